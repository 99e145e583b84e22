"""Public functions and estimators declare their arguments with scikit-learn's ``validate_params``.

Walks ``fmmlearn.__all__`` and the ``__all__`` of the public subpackages:
every public function of the top level is wrapped by ``validate_params``
(or is in :data:`NOT_WRAPPED`, with the reason), and every numeric interval
declared anywhere (functions and estimators' ``_parameter_constraints``)
rejects ``True`` with a message naming the argument -- ``batch_size=True`` is
a mistake, not a batch of one (``fmmlearn.utils._validation.StrictInterval``).
"""

import importlib
import inspect
import pkgutil

import pytest
from sklearn.utils._param_validation import Interval, InvalidParameterError, validate_parameter_constraints

import fmmlearn

#: Public functions of ``fmmlearn.__all__`` not wrapped by ``validate_params``, and why.
NOT_WRAPPED = {
    # Names looked up in an open registry (users add their own); the error lists the known names.
    "get_metric": "registry lookup",
    "get_method": "registry lookup",
    "importance_methods": "registry listing",
    "load_paper_dataset": "a name checked against the registry of paper datasets",
    "make_detector": "a name checked against the registry of detectors (or an instance, cloned)",
    # Nothing besides data to declare: a scorer's (estimator, X, y); a ratio grid (check_ratios) and a metric name.
    "faithfulness_score": "a scorer: (estimator, X, y)",
    "in_distribution_score": "a scorer: (estimator, X, y)",
    "random_masking_curve": "a ratio grid (check_ratios) and a metric name (registry)",
    # Not declared yet: their arguments are checked by hand inside the function (issue 23 follow-up).
    **dict.fromkeys(["acu", "racu", "compute_importance", "summarize_pvalues", "min_calibration_size",
                     "explanation_html", "report_html", "plot_faithfulness", "plot_erasure", "plot_in_distribution",
                     "load_tweet_sentiment", "load_bbc_news", "make_babi", "train_test_split_bunch"],
                    "checked by hand, not declared yet"),
}


def _public_modules():
    names = ["fmmlearn"] + [f"fmmlearn.{m.name}" for m in pkgutil.iter_modules(fmmlearn.__path__)
                            if not m.name.startswith("_") and m.name != "cli"]
    return [importlib.import_module(name) for name in names]


def _public_objects():
    """``(qualified name, object)`` of every function and class in a public ``__all__``, once each."""
    seen = {}
    for module in _public_modules():
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", "").startswith("fmmlearn"):
                seen.setdefault(f"{obj.__module__}.{obj.__qualname__}", obj)
    return sorted(seen.items())


def _top_level_functions():
    return sorted(name for name in fmmlearn.__all__ if inspect.isfunction(getattr(fmmlearn, name)))


def _constraints(obj) -> dict:
    if inspect.isclass(obj):
        return getattr(obj, "_parameter_constraints", {}) or {}
    return getattr(obj, "_skl_parameter_constraints", {}) or {}


def test_every_top_level_function_is_wrapped_by_validate_params_or_listed_with_a_reason():
    unwrapped = [name for name in _top_level_functions()
                 if not _constraints(getattr(fmmlearn, name)) and name not in NOT_WRAPPED]
    assert not unwrapped, f"declare the arguments of {unwrapped} with validate_params (or list them in NOT_WRAPPED)"


def test_the_exception_list_holds_only_unwrapped_top_level_functions():
    stale = [name for name in NOT_WRAPPED
             if name not in _top_level_functions() or _constraints(getattr(fmmlearn, name))]
    assert not stale, f"remove {stale} from NOT_WRAPPED: wrapped now, or no longer public"


def _numeric_intervals():
    """``(owner, argument, constraints)`` of every argument declared with a numeric interval."""
    found = []
    for qualname, obj in _public_objects():
        for argument, constraints in _constraints(obj).items():
            if any(isinstance(c, Interval) for c in constraints) and "boolean" not in constraints \
                    and bool not in constraints:
                found.append((qualname, argument, constraints))
    return found


def test_the_walk_finds_the_declared_intervals():
    owners = {owner for owner, _, _ in _numeric_intervals()}
    assert {"fmmlearn.estimator._classifier.FaithfulTextClassifier", "fmmlearn.ood._masf.MaSF"} <= owners
    assert len(_numeric_intervals()) >= 20


@pytest.mark.parametrize("owner, argument, constraints", _numeric_intervals(),
                         ids=[f"{o.rsplit('.', 1)[-1]}.{a}" for o, a, _ in _numeric_intervals()])
def test_true_is_not_a_number_for_any_declared_interval(owner, argument, constraints):
    with pytest.raises(InvalidParameterError, match=f"'{argument}' parameter"):
        validate_parameter_constraints({argument: constraints}, {argument: True}, caller_name=owner)


def test_the_estimators_refuse_true_for_a_count_when_fitting():
    from fmmlearn import FaithfulTextClassifier
    from fmmlearn.ood import MaSF

    with pytest.raises(InvalidParameterError, match="'max_epochs' parameter of FaithfulTextClassifier"):
        FaithfulTextClassifier(max_epochs=True).fit(["a", "b"], [0, 1])
    with pytest.raises(InvalidParameterError, match="'chunk_size' parameter of MaSF"):
        MaSF(chunk_size=True).fit([[0.0]] * 30)

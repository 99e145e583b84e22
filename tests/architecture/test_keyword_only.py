"""Options are keyword-only (issue 36): in every public callable, what follows the data arguments is passed by name.

A public callable is a function or a public method of a class in ``fmmlearn.__all__`` or in the
``__all__`` of a public sub-package.  Its leading positional parameters may be its first parameter
(what it acts on: the data of a function, the subject of a look-up or factory, the main
hyper-parameter of an estimator as in scikit-learn's ``KNeighborsClassifier(n_neighbors=5, *, ...)``)
followed by data arguments, named in :data:`DATA`; everything after them is keyword-only.  Passing
an option by position still works for now, with a FutureWarning (``fmmlearn.utils.keyword_only``).
The generated ``__init__`` of a record (dataclass, NamedTuple) is left out: its fields are its data.
"""

import dataclasses
import importlib
import inspect

import pytest

#: The public modules walked.
PUBLIC = ["fmmlearn"] + [f"fmmlearn.{name}" for name in (
    "faithfulness", "ood", "importance", "datasets", "study", "plotting", "html", "explanation", "masking",
    "encoding", "metrics")]

#: Names of data arguments, by what they hold.  The rule stays mechanical so that a new option cannot slip in
#: as positional: adding a name here needs the reason it is data.
DATA = {
    # the model or detector a function fits, applies or explains (scikit-learn's ``estimator``)
    "clf", "estimator", "model", "masf", "detector",
    # the texts, labels and per-example weights
    "X", "y", "X_calib", "X_test", "y_test", "X_train", "y_train", "texts", "data", "paragraphs", "answers",
    "supporting_spans", "answer_spans", "answer_supporting", "sample_weight",
    # encoded inputs, their positions and targets
    "encoding", "batch", "input_ids", "attention_mask", "special_tokens_mask", "segment_ids", "maskable",
    "eligible", "indices", "lengths", "target", "target_idx", "targets_idx", "gold_idx", "logits", "n",
    # scores, features and p-values a function summarises
    "features", "features_by_ratio", "importance", "importances", "scores", "supporting", "steps", "ids",
    "masked_ids", "original_ids", "p", "pvalues", "reference", "calibration", "positive", "calibration_scores",
    "values",
    # frames, curves and results a function reads or draws
    "frames", "frame", "curve", "random_curve", "curves", "summary", "performance", "report", "result",
    "results", "explanations", "explanation", "per_example",
    # the study's machinery a stage is handed
    "context", "runtime", "job", "problem",
}


def _is_record_init(cls, function) -> bool:
    return dataclasses.is_dataclass(cls) or "<" in function.__qualname__ or function.__module__ is None \
        or not function.__qualname__.startswith(cls.__qualname__)


def public_callables():
    """``(qualified name, function)`` of every public function and public method, once each."""
    seen, found = set(), []
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if id(obj) in seen or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            seen.add(id(obj))
            if inspect.isfunction(obj):
                found.append((f"{module_name}.{name}", obj))
                continue
            for attr, value in vars(obj).items():
                function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                if not inspect.isfunction(function) or (attr.startswith("_") and attr != "__init__"):
                    continue
                if attr == "__init__" and _is_record_init(obj, function):
                    continue
                found.append((f"{module_name}.{name}.{attr}", function))
    return found


def positional_options(function) -> list:
    """The parameters after the data arguments that may still be passed by position."""
    names = [p.name for p in inspect.signature(function).parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("self", "cls")]
    leading = 1
    while leading < len(names) and names[leading] in DATA:
        leading += 1
    return names[leading:]


def test_the_walk_finds_the_public_api():
    names = {name for name, _ in public_callables()}
    assert {"fmmlearn.explain", "fmmlearn.FaithfulTextClassifier.fit", "fmmlearn.study.FaithfulnessStudy.run",
            "fmmlearn.masking.mask_top_k", "fmmlearn.plotting.plot_racu"} <= names
    assert len(names) > 150


def test_every_option_after_the_data_arguments_is_keyword_only():
    offenders = [f"{name}: {', '.join(options)}" for name, function in public_callables()
                 if (options := positional_options(function))]
    assert not offenders, "make these keyword-only (def f(data, *, option=...)) with @keyword_only:\n" + \
        "\n".join(offenders)


def test_an_option_passed_by_position_still_works_and_warns():
    from fmmlearn.ood import conformal_null_share

    with pytest.warns(FutureWarning, match=r"conformal_null_share: pass alpha by keyword \(alpha=\); from "
                                           r"fmmlearn 0\.3 options after the data arguments are keyword-only"):
        by_position = conformal_null_share(99, 0.05)
    assert by_position == conformal_null_share(99, alpha=0.05)


def test_keyword_only_keeps_errors_and_signatures():
    from fmmlearn.utils import keyword_only

    @keyword_only
    def f(data, *, option=1, other=2):
        return data, option, other

    assert str(inspect.signature(f)) == "(data, *, option=1, other=2)"
    with pytest.warns(FutureWarning, match=r"pass option, other by keyword"):
        assert f(0, 5, 6) == (0, 5, 6)
    with pytest.raises(TypeError):
        f(0, 5, 6, 7)
    with pytest.raises(TypeError):
        f(0, 5, option=5)

"""Issue 36: one noun per concept.  Every old spelling still works and warns once, naming the new one."""

import importlib
import warnings

import pytest

from fmmlearn.study import FaithfulnessStudy
from fmmlearn.utils import renamed_parameter

RENAMED = [
    ("fmmlearn", "get_measure", "get_method"),
    ("fmmlearn", "importance_measures", "importance_methods"),
    ("fmmlearn.importance", "get_measure", "get_method"),
    ("fmmlearn.importance", "importance_measures", "importance_methods"),
    ("fmmlearn.importance", "MEASURE_NAMES", "METHOD_NAMES"),
    ("fmmlearn.importance", "Measure", "ImportanceMethod"),
    ("fmmlearn.importance.registry", "Measure", "ImportanceMethod"),
    ("fmmlearn.datasets", "blind_baseline", "blind_predictor"),
    ("fmmlearn.datasets", "BlindBaseline", "BlindPredictor"),
    ("fmmlearn.datasets._blind", "BlindBaseline", "BlindPredictor"),
]


@pytest.mark.parametrize("module, old, new", RENAMED)
def test_an_old_name_is_the_new_one_with_one_warning(module, old, new):
    package = importlib.import_module(module)
    with pytest.warns(FutureWarning, match=rf"{module}\.{old} is deprecated .* use {module}\.{new}") as record:
        value = getattr(package, old)
    assert value is getattr(package, new) and len(record) == 1
    assert old not in package.__all__ and new in package.__all__


def test_from_import_of_an_old_name_warns_once():
    with pytest.warns(FutureWarning) as record:
        from fmmlearn.importance import Measure  # noqa: F401
    assert len(record) == 1 and "ImportanceMethod" in str(record[0].message)


@pytest.mark.parametrize("old, new, value", [("measures", "methods", ["rand", "loo-sign"]),
                                             ("measure_params", "method_params", {"loo-sign": {}}),
                                             ("n_baseline", "n_random", 2)])
def test_a_renamed_study_parameter_stays_in_the_signature_and_warns_where_it_is_used(old, new, value):
    study = FaithfulnessStudy(**{old: value})
    assert study.get_params()[old] == value  # __init__ only stores (scikit-learn's rule)
    with pytest.warns(FutureWarning, match=rf"FaithfulnessStudy\({old}=\.\.\.\) is deprecated .* use {new}="):
        assert renamed_parameter(study, old, new) == value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed_parameter(FaithfulnessStudy(**{new: value}), old, new) == value
    with pytest.raises(ValueError, match=f"give {new}= only"):
        renamed_parameter(FaithfulnessStudy(**{old: value, new: value}), old, new)


def test_run_uses_the_old_parameter_with_a_warning(tiny_model_dir):
    from helpers.data import make_sentiment

    study = FaithfulnessStudy(tiny_model_dir, measures=["rand", "no-such-method"], device="cpu", verbose=0)
    with pytest.warns(FutureWarning, match=r"measures=\.\.\.\) is deprecated"), \
            pytest.raises(ValueError, match="no-such-method"):  # the old parameter's value is the one checked
        study.run(*make_sentiment(60, seed=0))

"""The package's contracts (docs/architecture.md): the classifier protocol, light imports, stable import paths."""

import subprocess
import sys

import pytest

import fmmlearn
from fmmlearn import FittedClassifier
from fmmlearn._protocols import MaskedFittedClassifier

from helpers.faithfulness import BagClassifier, word_weights


def test_the_estimator_and_the_test_wrapper_implement_the_protocol(fitted_tiny, bundled_tokenizer):
    assert isinstance(fitted_tiny, FittedClassifier) and isinstance(fitted_tiny, MaskedFittedClassifier)
    bag = BagClassifier(bundled_tokenizer, word_weights(bundled_tokenizer))
    assert isinstance(bag, FittedClassifier)
    assert not isinstance(object(), FittedClassifier)


def _modules_loaded_by(statement: str) -> set:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("statement", [
    "import fmmlearn",
    "from fmmlearn.ood import MaSF, simes_pvalue, summarize_pvalues",
    "from fmmlearn.faithfulness import acu, racu",
    "from fmmlearn import MaSF, acu, racu",
])
def test_statistics_import_without_torch_or_transformers(statement):
    loaded = _modules_loaded_by(statement)
    assert "torch" not in loaded and "transformers" not in loaded


@pytest.mark.parametrize("name", fmmlearn.__all__)
def test_every_top_level_name_resolves(name):
    assert getattr(fmmlearn, name) is not None


@pytest.mark.parametrize("module, names", [
    ("fmmlearn.faithfulness", ["faithfulness_curve", "random_masking_curve", "acu", "racu", "check_ratios",
                               "make_faithfulness_scorer", "faithfulness_score", "faithful_refit",
                               "faithfulness_report", "FaithfulnessReport", "FaithfulnessWarning",
                               "iter_batch_masking", "iter_explainer_masking", "CURVE_COLUMNS", "DEFAULT_RATIOS"]),
    ("fmmlearn.ood", ["MaSF", "MaSFStatistics", "empirical_cdf", "fisher_pvalue", "simes_pvalue",
                      "summarize_pvalues", "min_calibration_size", "hidden_state_features", "calibration_features",
                      "mask_like_training", "in_distribution_report", "REPORT_COLUMNS"]),
    ("fmmlearn.explanation", ["explain", "explain_encoded", "token_frame", "word_frame", "resolve_targets",
                              "resolve_seed", "autocast_dtype_for"]),
    ("fmmlearn.masking", ["check_ratios", "SEGMENTS", "mask_training_batch", "mask_top_k"]),
])
def test_import_paths_from_before_the_restructuring_still_work(module, names):
    imported = __import__(module, fromlist=names)
    missing = [n for n in names if not hasattr(imported, n)]
    assert not missing

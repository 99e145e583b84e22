"""The package's contracts (docs/architecture.md): the classifier protocol, light imports, stable import paths."""

import subprocess
import sys

import pytest

import fmmlearn
from fmmlearn import FittedClassifier
from fmmlearn.utils._protocols import MaskedFittedClassifier

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
    # the runtime became a package, the study a pipeline, the CLI one module per command (issue 23)
    ("fmmlearn.modeling", ["BUNDLED_MODELS", "DEFAULT_TOKENS_PER_FORWARD", "ForwardRates", "MIN_SPEEDUP", "PRECISIONS",
                           "PRECISION_FAMILIES", "PROBE_SHAPE", "TOKEN_BUDGETS", "autocast", "autocast_dtype_for",
                           "eval_mode", "check_finite_logits", "clear_probe_cache", "cpu_info", "forward_logits",
                           "load_pretrained", "logits_of", "map_batches", "measure_forward_rates", "position_limit",
                           "precision_report", "predict_logits", "progress_bar", "quiet_transformers",
                           "reduced_dtype", "resolve_device", "resolve_max_length", "resolve_model_path",
                           "resolve_precision", "run_in_batches", "tokens_per_forward"]),
    ("fmmlearn.distributed", ["DISTRIBUTED_EXTRA", "AcceleratedTrainingMixin", "ProcessBatchSampler",
                              "accelerated_net_options", "batches_for_this_process", "dask_backend",
                              "gather_objects", "is_main_process", "launched_processes", "local_only",
                              "make_accelerator", "num_processes", "optimizer_steps_per_epoch",
                              "process_device_index", "process_index", "process_seed", "require", "shard_batches",
                              "split_training_batches"]),
    ("fmmlearn.study", ["DEFAULT_ERASURE_K", "DEFAULT_ERASURE_MEASURES", "DEFAULT_MEASURES", "FRAMES", "STAGES",
                        "FaithfulnessStudy", "StudyResult", "dataset_names", "erasure_by_model", "load_study",
                        "model_label"]),
    ("fmmlearn.cli", ["build_parser", "main", "read_table", "labels_from", "summary_path", "DEMO_PRESETS"]),
    ("fmmlearn.datasets", ["DatasetUnavailableError", "clean_mimic_text", "load_paper_dataset", "load_babi"]),
])
def test_import_paths_from_before_the_restructuring_still_work(module, names):
    imported = __import__(module, fromlist=names)
    missing = [n for n in names if not hasattr(imported, n)]
    assert not missing

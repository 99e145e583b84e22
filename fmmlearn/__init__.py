"""fmmlearn: faithfulness measurable text classifiers with a scikit-learn API.

Fine-tune a transformer with random token masking so that masked inputs are
in-distribution (Madsen, Reddy & Chandar, ICML 2024); then explanations can be
checked by masking the tokens they call important.

Public names are imported lazily, so ``import fmmlearn.masking`` does not load
transformers.  Modules that moved into packages keep their old import paths
(docs/architecture.md, "Old import paths").
"""

from ._version import __version__
from .utils import attach, redirect_moved_modules, renamed_attributes

# public name -> module that defines it
_EXPORTS = {
    "FaithfulTextClassifier": "fmmlearn.estimator",
    "FaithfulnessWarning": "fmmlearn.exceptions",
    "DegenerateModelWarning": "fmmlearn.exceptions",
    "TruncationWarning": "fmmlearn.exceptions",
    "CacheWarning": "fmmlearn.exceptions",
    "UncertifiedErasureWarning": "fmmlearn.exceptions",
    "FittedClassifier": "fmmlearn.utils",
    "MaSF": "fmmlearn.ood",
    "MahalanobisDetector": "fmmlearn.ood",
    "KNNDetector": "fmmlearn.ood",
    "make_detector": "fmmlearn.ood",
    "in_distribution_score": "fmmlearn.ood",
    "make_in_distribution_scorer": "fmmlearn.ood",
    "InDistributionReport": "fmmlearn.ood",
    "summarize_pvalues": "fmmlearn.ood",
    "hidden_state_features": "fmmlearn.ood",
    "calibration_features": "fmmlearn.ood",
    "mask_like_training": "fmmlearn.ood",
    "in_distribution_report": "fmmlearn.ood",
    "min_calibration_size": "fmmlearn.ood",
    "plot_in_distribution": "fmmlearn.plotting",
    "explanation_html": "fmmlearn.explanation",
    "report_html": "fmmlearn.plotting",
    "Explanation": "fmmlearn.explanation",
    "get_metric": "fmmlearn.metrics",
    "importance_methods": "fmmlearn.importance",
    "compute_importance": "fmmlearn.importance",
    "get_method": "fmmlearn.importance",
    "explain": "fmmlearn.explanation",
    "faithfulness_curve": "fmmlearn.faithfulness",
    "random_masking_curve": "fmmlearn.faithfulness",
    "faithfulness_score": "fmmlearn.faithfulness",
    "make_faithfulness_scorer": "fmmlearn.faithfulness",
    "faithfulness_report": "fmmlearn.faithfulness",
    "erasure_metrics": "fmmlearn.faithfulness",
    "make_erasure_scorer": "fmmlearn.faithfulness",
    "acu": "fmmlearn.faithfulness",
    "racu": "fmmlearn.faithfulness",
    "plot_faithfulness": "fmmlearn.plotting",
    "plot_erasure": "fmmlearn.plotting",
    "load_tweet_sentiment": "fmmlearn.datasets",
    "load_bbc_news": "fmmlearn.datasets",
    "make_babi": "fmmlearn.datasets",
    "load_paper_dataset": "fmmlearn.datasets",
    "train_test_split_bunch": "fmmlearn.datasets",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


__getattr__, __dir__ = attach(__name__, _EXPORTS, globals())
#: Renamed public names (issue 36) -> their new names; the old ones still work, with a FutureWarning.
__getattr__ = renamed_attributes(__name__, {"get_measure": "get_method", "importance_measures": "importance_methods"},
                                 globals())

#: Private modules that moved into packages (issue 36) -> their homes; the old paths still import, with a
#: DeprecationWarning (fmmlearn.utils._redirect), so pickles and caches that name them still load.
_MOVED = {
    **{f"fmmlearn.{name}": f"fmmlearn.utils.{name}" for name in (
        "_bootstrap", "_files", "_formatting", "_labels", "_lazy", "_processes", "_protocols", "_random", "_signals",
        "_templates", "_validation", "_warnings")},
    **{f"fmmlearn.{name}": f"fmmlearn.estimator.{name}" for name in (
        "_model_card", "_net_routing", "_persistence", "_validation_data")},
    "fmmlearn._explanation_data": "fmmlearn.explanation._data",
    "fmmlearn._explanation_frames": "fmmlearn.explanation._frames",
}

redirect_moved_modules(_MOVED)

"""In-distribution tests for masked inputs: MaSF (Madsen et al., 2024) and conformal detectors (``docs/ood.md``).

MaSF (Max-Simes-Fisher) turns hidden-state features into one p-value per
example, small meaning "out of distribution", in three levels:

1. per (layer, dimension): an empirical-CDF p-value of the feature against the
   calibration examples' values of that feature;
2. per layer: the Simes combination of the dimension p-values, turned into a
   p-value against the calibration examples' Simes values;
3. per example: the Fisher combination of the layer p-values, turned into the
   final right-sided p-value against the calibration examples' Fisher values.

One concept per module:

* ``_ecdf`` -- the empirical-CDF kernels (:func:`empirical_cdf`);
* ``_combine`` -- :func:`simes_pvalue`, :func:`geometric_mean_pvalue`, :func:`fisher_pvalue`,
  :func:`summarize_pvalues` (dataset-level p-values valid for dependent p-values);
* ``_checks`` -- the input checks of the statistics;
* ``_masf`` -- the :class:`MaSF` estimator and :func:`min_calibration_size`;
* ``_detectors`` -- split-conformal detectors on pooled hidden states:
  :class:`MahalanobisDetector`, :class:`KNNDetector` (:class:`ConformalDetector`);
* ``_registry`` -- detectors by name (:func:`make_detector`, :data:`DETECTORS`);
* ``_power`` -- :func:`power_curve` and :func:`size_for_power`: a test's power
  against a shift as a function of its data;
* ``_features`` -- :func:`hidden_state_features` (pooled hidden states of a
  fitted classifier), :func:`mask_like_training` and :func:`calibration_features`;
* ``_calibrate`` -- :func:`fit_detector`: a detector fitted on a classifier's
  texts masked like its training batches;
* ``_controls`` -- the positive controls: the matched placeholder control
  (:func:`resolve_placeholder`, :func:`placeholder_ids`) and random tokens;
* ``_report`` -- :func:`in_distribution_report`: p-values of explainer-masked
  test sets per masking ratio;
* ``_scorer`` -- :func:`make_in_distribution_scorer`: a scikit-learn scorer
  for model selection that keeps masked inputs in-distribution.

The statistics need only numpy and scipy; the classifier integration
(``_features``, ``_report``) imports torch and is loaded on first use, so
``from fmmlearn.ood import MaSF`` stays light.
"""

from ..utils import attach
from ._combine import DEFAULT_THRESHOLDS, fisher_pvalue, geometric_mean_pvalue, simes_pvalue, summarize_pvalues
from ._ecdf import empirical_cdf
from ._detectors import (POOLINGS, ConformalDetector, KNNDetector, MahalanobisDetector, conformal_null_share,
                         conformal_pvalues)
from ._masf import CALIBRATIONS, MaSF, MaSFStatistics, min_calibration_size, null_share, sized_fold_fractions
from ._power import POWER_CURVE_COLUMNS, power_curve, size_for_power
from ._registry import DEFAULT_DETECTOR, DETECTORS, detector_name, make_detector

# public name -> submodule that defines it (loaded on first access: these need torch)
_LAZY = {
    "fit_detector": "._calibrate",
    "in_distribution_score": "._scorer",
    "make_in_distribution_scorer": "._scorer",
    "calibration_features": "._features",
    "calibration_groups": "._features",
    "hidden_state_features": "._features",
    "mask_like_training": "._features",
    "PLACEHOLDERS": "._controls",
    "Placeholder": "._controls",
    "placeholder_ids": "._controls",
    "placeholder_inputs": "._controls",
    "random_token_ids": "._controls",
    "resolve_placeholder": "._controls",
    "REFERENCE_ONLY_COLUMNS": "._report",
    "InDistributionReport": "._report",
    "REPORT_COLUMNS": "._report",
    "in_distribution_report": "._report",
    "masked_pvalues": "._report",
    "masked_set_features": "._report",
    "masked_test_sets": "._report",
    "pvalue_frame": "._report",
    "report_rows": "._report",
}

__all__ = sorted(["CALIBRATIONS", "DEFAULT_DETECTOR", "DEFAULT_THRESHOLDS", "DETECTORS", "POOLINGS",
                  "POWER_CURVE_COLUMNS", "ConformalDetector", "KNNDetector", "MaSF", "MaSFStatistics",
                  "MahalanobisDetector", "conformal_null_share", "conformal_pvalues", "detector_name", "empirical_cdf",
                  "fisher_pvalue", "geometric_mean_pvalue", "make_detector", "min_calibration_size", "null_share",
                  "power_curve", "simes_pvalue", "size_for_power", "sized_fold_fractions", "summarize_pvalues",
                  *_LAZY])


__getattr__, __dir__ = attach(__name__, _LAZY, globals())

"""In-distribution tests for masked inputs: MaSF (Madsen et al., 2024; ``docs/ood.md``).

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
* ``_masf`` -- the :class:`MaSF` estimator and :func:`min_calibration_size`;
* ``_features`` -- :func:`hidden_state_features` (max-pooled hidden states of a
  fitted classifier), :func:`mask_like_training` and :func:`calibration_features`;
* ``_report`` -- :func:`in_distribution_report`: p-values of explainer-masked
  test sets per masking ratio.

The statistics need only numpy and scipy; the classifier integration
(``_features``, ``_report``) imports torch and is loaded on first use, so
``from fmmlearn.ood import MaSF`` stays light.
"""

from .._lazy import attach
from ._combine import DEFAULT_THRESHOLDS, fisher_pvalue, geometric_mean_pvalue, simes_pvalue, summarize_pvalues
from ._ecdf import empirical_cdf
from ._masf import CALIBRATIONS, MaSF, MaSFStatistics, min_calibration_size, null_share, sized_fold_fractions

# public name -> submodule that defines it (loaded on first access: these need torch)
_LAZY = {
    "calibration_features": "._features",
    "calibration_groups": "._features",
    "hidden_state_features": "._features",
    "mask_like_training": "._features",
    "REFERENCE_ONLY_COLUMNS": "._report",
    "InDistributionReport": "._report",
    "REPORT_COLUMNS": "._report",
    "in_distribution_report": "._report",
    "masked_pvalues": "._report",
    "report_rows": "._report",
}

__all__ = sorted(["CALIBRATIONS", "DEFAULT_THRESHOLDS", "MaSF", "MaSFStatistics", "empirical_cdf", "fisher_pvalue",
                  "geometric_mean_pvalue", "min_calibration_size", "null_share", "simes_pvalue", "sized_fold_fractions",
                  "summarize_pvalues", *_LAZY])


__getattr__, __dir__ = attach(__name__, _LAZY, globals())

"""Combining p-values: Simes, Fisher, the geometric mean, and the dataset-level summary of a masked test set.

Dataset-level p-values combine the per-example MaSF p-values of one test set.
Those share the calibration references, so they are dependent: a combination
must be valid under that dependence.  Simes' test is valid for positively
dependent (PRDS) p-values, which conformal p-values sharing one calibration
set are (Bates et al., 2023); e times the geometric mean is valid under any
dependence (Vovk & Wang, 2020).  Fisher's chi-square combination assumes
independence and rejects far too often here (docs/ood.md), so the summary
shows it only for the reference procedure, labelled reference-only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ._checks import _check_pvalues, _check_thresholds
from ..utils import keyword_only

__all__ = ["DEFAULT_THRESHOLDS", "fisher_pvalue", "geometric_mean_pvalue", "simes_pvalue", "summarize_pvalues"]

DEFAULT_THRESHOLDS = (0.001, 0.005, 0.01, 0.05, 0.1)
_CALIBRATIONS = ("calibrated", "reference")
# The reference adds this inside ln(p) so that p = 0 gives a finite Fisher statistic.
_REFERENCE_FISHER_EPS = 1e-8


def _simes(p, axis):
    """Simes' ``min_i p_(i) n / i`` along ``axis`` (no input checks)."""
    return _simes_of_sorted(np.sort(p, axis=axis), axis)


def _simes_of_sorted(p, axis):
    """Simes' statistic of p-values already sorted along ``axis``."""
    n = p.shape[axis]
    shape = [1] * p.ndim
    shape[axis] = n
    ranks = np.arange(1, n + 1, dtype=np.float64).reshape(shape)
    return np.min(p * n / ranks, axis=axis)


@keyword_only
def simes_pvalue(p, *, axis=-1):
    """Simes' combined p-value ``min_i p_(i) n / i`` of n p-values.

    It is valid when the p-values are independent or positively dependent,
    and equals the smallest Benjamini-Hochberg adjusted p-value
    (``scipy.stats.false_discovery_control(p).min()``).

    Parameters
    ----------
    p : array-like
        P-values in [0, 1].
    axis : int, default=-1
        Axis along which to combine.

    Returns
    -------
    float or ndarray
        One combined p-value per slice along ``axis``.

    Examples
    --------
    >>> from fmmlearn.ood import simes_pvalue
    >>> float(simes_pvalue([0.01, 0.04, 0.3, 0.8]))
    0.04
    """
    p = _check_pvalues(p, "p")
    result = _simes(p, axis=axis)
    return float(result) if result.ndim == 0 else result


def fisher_pvalue(p):
    """Fisher's combined p-value: survival function of ``-2 sum ln p_i`` under chi-square(2n).

    Valid only for **independent** p-values.  MaSF p-values of one test set
    share the calibration references and are not: use
    :func:`geometric_mean_pvalue` (any dependence) or :func:`simes_pvalue`
    (positive dependence) for them.

    Parameters
    ----------
    p : array-like of shape (n,)
        Independent p-values in [0, 1].  Any ``p = 0`` gives 0.

    Returns
    -------
    float

    See Also
    --------
    scipy.stats.combine_pvalues : used for the computation.

    Examples
    --------
    >>> from fmmlearn.ood import fisher_pvalue
    >>> round(fisher_pvalue([0.01, 0.2, 0.5]), 4)
    0.0318
    """
    p = _check_pvalues(p, "p").ravel()
    if np.any(p == 0):
        return 0.0          # ln 0 = -inf: the statistic is infinite, its p-value 0
    return float(stats.combine_pvalues(p, method="fisher").pvalue)


def geometric_mean_pvalue(p):
    """e times the geometric mean of n p-values, clipped to 1: valid under any dependence.

    ``min(1, e * (p_1 ... p_n)^(1/n))`` is a p-value whatever the joint
    distribution of the ``p_i`` (Vovk & Wang, 2020, "Combining p-values via
    averaging", Biometrika 107(4): the geometric mean needs the factor e,
    which is also the smallest factor valid for every n).  It is a
    monotone function of Fisher's statistic ``-2 sum ln p_i``, namely
    ``e * exp(-statistic / (2n))``: the same evidence, calibrated for
    dependent p-values instead of independent ones.  It responds to many
    moderately small p-values (a broad shift of the set), where Simes
    responds to a few very small ones; it is conservative (for independent
    uniform p-values it is close to 1).

    Parameters
    ----------
    p : array-like of shape (n,)
        P-values in [0, 1].  Any ``p = 0`` gives 0.

    Returns
    -------
    float

    Examples
    --------
    >>> from fmmlearn.ood import geometric_mean_pvalue
    >>> round(geometric_mean_pvalue([0.001, 0.002, 0.004]), 5)
    0.00544
    >>> geometric_mean_pvalue([0.5, 0.9])
    1.0
    """
    p = _check_pvalues(p, "p").ravel()
    if np.any(p == 0):
        return 0.0
    return float(min(1.0, np.e * np.exp(np.mean(np.log(p)))))


def _reference_fisher_pvalue(p):
    """Fisher's p-value of the reference's statistic ``-2 sum ln(p + 1e-8)`` (chi-square(2n) survival function).

    The reference code reports the chi-square CDF instead (a bug: one minus this).
    """
    statistic = -2.0 * np.sum(np.log(p + _REFERENCE_FISHER_EPS))
    return float(stats.chi2.sf(statistic, df=2 * p.size))


@keyword_only
def summarize_pvalues(p, *, thresholds=DEFAULT_THRESHOLDS, calibration="calibrated"):
    """Dataset-level summary of per-example p-values (docs/ood.md).

    Parameters
    ----------
    p : array-like of shape (n,)
        Per-example p-values, e.g. from :meth:`MaSF.pvalues`.
    thresholds : sequence of float, default=(0.001, 0.005, 0.01, 0.05, 0.1)
        Levels in (0, 1] at which to report the proportion of ``p < threshold``.
    calibration : {"calibrated", "reference"}, default="calibrated"
        The MaSF calibration the p-values come from.  ``"reference"`` adds
        ``fisher_p_reference_only``: the chi-square(2n) survival function of
        the reference's statistic ``-2 sum ln(p + 1e-8)``, the paper's
        dataset-level Fisher value (the reference code itself prints one minus
        it, a CDF bug).  It assumes independent p-values, which MaSF p-values
        of one test set are not, so it is never shown for calibrated p-values.

    Returns
    -------
    summary : pandas.DataFrame
        One row per threshold with columns ``threshold``, ``proportion``
        (fraction of ``p < threshold``), ``simes_p`` (:func:`simes_pvalue` of
        all p), ``geomean_p`` (:func:`geometric_mean_pvalue` of all p) and,
        for the reference calibration, ``fisher_p_reference_only``; the
        p-values are dataset-level and repeat on every row.  A small
        ``simes_p`` or ``geomean_p`` rejects "the whole set is in-distribution".

    Examples
    --------
    >>> from fmmlearn.ood import summarize_pvalues
    >>> summarize_pvalues([0.002, 0.03, 0.2, 0.7], thresholds=(0.01, 0.05))
       threshold  proportion  simes_p  geomean_p
    0       0.01        0.25    0.008    0.14634
    1       0.05        0.50    0.008    0.14634
    """
    p = _check_pvalues(p, "p").ravel()
    levels = _check_thresholds(thresholds)
    if calibration not in _CALIBRATIONS:
        raise ValueError(f"calibration must be one of {_CALIBRATIONS}, got {calibration!r}.")
    summary = pd.DataFrame({
        "threshold": levels,
        "proportion": (p[None, :] < levels[:, None]).mean(axis=1),
        "simes_p": _simes(p, axis=0),
        "geomean_p": geometric_mean_pvalue(p),
    })
    if calibration == "reference":
        summary["fisher_p_reference_only"] = _reference_fisher_pvalue(p)
    return summary

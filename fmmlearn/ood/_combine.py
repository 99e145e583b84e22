"""Combining p-values: Simes and Fisher, and the dataset-level summary of a masked test set."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ._checks import _check_pvalues, _check_thresholds

__all__ = ["DEFAULT_THRESHOLDS", "fisher_pvalue", "simes_pvalue", "summarize_pvalues"]

DEFAULT_THRESHOLDS = (0.001, 0.005, 0.01, 0.05, 0.1)
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


def simes_pvalue(p, axis=-1):
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


def _reference_fisher_pvalue(p):
    """The reference's dataset-level Fisher number: chi-square *CDF* of ``-2 sum ln(p + 1e-8)`` (a bug)."""
    statistic = -2.0 * np.sum(np.log(p + _REFERENCE_FISHER_EPS))
    return float(stats.chi2.cdf(statistic, df=2 * p.size))


def summarize_pvalues(p, thresholds=DEFAULT_THRESHOLDS, *, reference_fisher=False):
    """Dataset-level summary of per-example p-values (docs/ood.md).

    Parameters
    ----------
    p : array-like of shape (n,)
        Per-example p-values, e.g. from :meth:`MaSF.pvalues`.
    thresholds : sequence of float, default=(0.001, 0.005, 0.01, 0.05, 0.1)
        Levels in (0, 1] at which to report the proportion of ``p < threshold``.
    reference_fisher : bool, default=False
        Also report ``fisher_p_reference``, the number the reference code
        reports: the chi-square CDF (not survival function) of
        ``-2 sum ln(p + 1e-8)``, i.e. roughly ``1 - fisher_p``.  For parity
        checks only.

    Returns
    -------
    summary : pandas.DataFrame
        One row per threshold with columns ``threshold``, ``proportion``
        (fraction of ``p < threshold``), ``simes_p`` (:func:`simes_pvalue` of
        all p) and ``fisher_p`` (:func:`fisher_pvalue` of all p); the last two
        are dataset-level and repeat on every row.  Small ``simes_p`` /
        ``fisher_p`` reject "the whole set is in-distribution".

    Examples
    --------
    >>> from fmmlearn.ood import summarize_pvalues
    >>> summarize_pvalues([0.002, 0.03, 0.2, 0.7], thresholds=(0.01, 0.05))
       threshold  proportion  simes_p  fisher_p
    0       0.01        0.25    0.008  0.002915
    1       0.05        0.50    0.008  0.002915
    """
    p = _check_pvalues(p, "p").ravel()
    levels = _check_thresholds(thresholds)
    summary = pd.DataFrame({
        "threshold": levels,
        "proportion": (p[None, :] < levels[:, None]).mean(axis=1),
        "simes_p": _simes(p, axis=0),
        "fisher_p": fisher_pvalue(p),
    })
    if reference_fisher:
        summary["fisher_p_reference"] = _reference_fisher_pvalue(p)
    return summary

"""Bootstrap confidence intervals: of a mean (the paper's tables), and of any statistic of resampled indices.

:func:`bootstrap_ci` is the one resampling engine of the study (over test examples, vectorised
statistics); :func:`mean_ci` and :func:`seed_ci` summarise a handful of values (e.g. one per seed).
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np

__all__ = ["bootstrap_ci", "mean_ci", "seed_ci"]

def _seed_argument() -> str:
    """The name of :func:`scipy.stats.bootstrap`'s seed: ``rng`` from scipy 1.15 on, ``random_state`` before."""
    from scipy.stats import bootstrap

    return "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"


# Bootstrap resamples evaluated at once (bounds the memory of a vectorised statistic).
_BATCH_CELLS = 4_000_000


def mean_ci(values, confidence_level: float = 0.95, *, n_resamples: int = 9999,
            random_state: int = 0) -> tuple[float, float, float]:
    """Mean and BCa bootstrap CI (seeded, default 0), collapsed to the mean when all values are equal (as in the paper's tables).

    ``n_resamples`` and ``random_state`` (an int seed) are passed to :func:`scipy.stats.bootstrap`.
    """
    from scipy.stats import bootstrap

    seed = {_seed_argument(): random_state}
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (float("nan"),) * 3
    if np.all(values == values[0]):
        return (float(values[0]),) * 3
    mean = float(values.mean())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BCa on very few values warns about degenerate resamples
        ci = bootstrap((values,), np.mean, confidence_level=confidence_level, n_resamples=n_resamples,
                       **seed).confidence_interval
        if not (np.isfinite(ci.low) and np.isfinite(ci.high)):
            ci = bootstrap((values,), np.mean, confidence_level=confidence_level, method="percentile",
                           n_resamples=n_resamples, **seed).confidence_interval
    return mean, float(ci.low), float(ci.high)


def bootstrap_ci(statistic, n: int, point: float, *, confidence_level: float, n_resamples: int,
                 cells_per_resample: int, seed: int = 0) -> tuple[float, float]:
    """BCa interval of ``statistic(indices)`` over resampled indices ``0..n-1``.

    ``statistic`` is vectorised (scipy's ``vectorized=True``: indices of shape ``(B, n)`` give ``B``
    values).  Falls back to percentiles of the finite resamples when BCa cannot be formed (e.g. a few
    resamples where RACU is undefined), and collapses to the point estimate when every resample gives
    it.

    Parameters
    ----------
    statistic : callable
    n : int
        Number of units resampled (e.g. test examples).
    point : float
        The statistic on all units; NaN gives NaN bounds.
    confidence_level : float
    n_resamples : int
    cells_per_resample : int
        Array cells one resample touches, to batch resamples within a fixed memory budget.
    seed : int, default=0

    Returns
    -------
    (low, high) : tuple of float
    """
    from scipy.stats import bootstrap

    if n < 2 or not np.isfinite(point):
        return float("nan"), float("nan")
    batch = max(1, _BATCH_CELLS // max(1, cells_per_resample))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples; handled below
        result = bootstrap((np.arange(n),), statistic, vectorized=True, batch=batch, n_resamples=n_resamples,
                           confidence_level=confidence_level, **{_seed_argument(): seed})
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if np.isfinite(low) and np.isfinite(high):
        return low, high
    values = result.bootstrap_distribution[np.isfinite(result.bootstrap_distribution)]
    if values.size == 0:
        return float("nan"), float("nan")
    if np.all(values == values[0]):
        return float(values[0]), float(values[0])
    tail = 50 * (1 - confidence_level)
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))


def seed_ci(values, confidence_level: float = 0.95) -> tuple[float, float, float]:
    """Mean over seeds and its BCa bootstrap CI (seeded 0); collapsed to the mean when all values are equal.

    Non-finite values are dropped; fewer than 2 values give NaN bounds (one seed says nothing about
    the spread over seeds).

    Returns
    -------
    (mean, low, high) : tuple of float
    """
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (float("nan"),) * 3
    mean = float(values.mean())
    if values.size < 2:
        return mean, float("nan"), float("nan")
    if np.all(values == values[0]):
        return mean, mean, mean
    low, high = bootstrap_ci(lambda idx, axis=-1: values[np.asarray(idx, dtype=np.intp)].mean(axis=-1),
                             values.size, mean, confidence_level=confidence_level, n_resamples=9999,
                             cells_per_resample=values.size)
    return mean, low, high

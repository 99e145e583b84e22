"""Bootstrap confidence intervals of a mean, the way the paper's tables report them."""

from __future__ import annotations

import inspect
import warnings

import numpy as np

__all__ = ["mean_ci"]


def mean_ci(values, confidence_level: float = 0.95, *, n_resamples: int = 9999,
            random_state: int = 0) -> tuple[float, float, float]:
    """Mean and BCa bootstrap CI (seeded, default 0), collapsed to the mean when all values are equal (as in the paper's tables).

    ``n_resamples`` and ``random_state`` (an int seed) are passed to :func:`scipy.stats.bootstrap`.
    """
    from scipy.stats import bootstrap

    # scipy >= 1.15 names the seed `rng`; older versions `random_state`
    seed = {"rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state": random_state}
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

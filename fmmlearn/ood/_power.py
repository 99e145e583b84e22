"""A test's power against a shift, as a function of the data it is fitted on (numpy; docs/ood.md).

A silent test is evidence only when it could have spoken.  :func:`power_curve` refits a detector on
nested random subsets of its reference and calibration features and measures the share of a
positive control it flags at each size; :func:`size_for_power` reads off (or extrapolates, on a
log scale) how many texts would give the power asked for.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.utils.validation import check_random_state

__all__ = ["POWER_CURVE_COLUMNS", "power_curve", "size_for_power"]

#: Columns of :func:`power_curve`.
POWER_CURVE_COLUMNS = ("fraction", "n_reference", "n_calibration", "power", "null_share")


def power_curve(detector, reference, calibration, positive, *, groups=None, fractions=(0.25, 0.5, 1.0),
                alpha: float = 0.05, n_draws: int = 3, random_state=0) -> pd.DataFrame:
    """Power of ``detector`` against ``positive`` when fitted on shares of its data.

    For each fraction ``f``, ``n_draws`` times: a random ``f`` of the reference texts (whole groups)
    and of the calibration texts, a clone of ``detector`` fitted on them, and the share of
    ``positive`` it flags at ``alpha``; the rows give the mean over the draws.

    Parameters
    ----------
    detector : MaSF, MahalanobisDetector, KNNDetector or another conformal detector
        Its parameters are used (a clone is fitted); it must accept ``fit(reference, groups=...,
        calibration=...)``.
    reference : ndarray of shape (n_reference, n_layers, hidden_size)
        The features its score is fitted on (e.g. training texts masked like training).
    calibration : ndarray of shape (n_calibration, n_layers, hidden_size)
        Held-out in-distribution features of its conformal level.
    positive : ndarray of shape (n_positive, n_layers, hidden_size)
        Features of a shift the test must detect (the matched positive control).
    groups : ndarray of shape (n_reference,), optional
        Text id per reference row (copies of one text are drawn together).
    fractions : sequence of float in (0, 1], default=(0.25, 0.5, 1.0)
    alpha : float, default=0.05
    n_draws : int, default=3
        Subsets per fraction below 1 (the full data is fitted once).
    random_state : int, RandomState or None, default=0

    Returns
    -------
    pandas.DataFrame
        Columns :data:`POWER_CURVE_COLUMNS`, one row per fraction.
    """
    rng = check_random_state(random_state)
    groups = np.arange(len(reference)) if groups is None else np.asarray(groups)
    ids = np.unique(groups)
    rows = []
    for fraction in sorted(float(f) for f in fractions):
        if not 0 < fraction <= 1:
            raise ValueError(f"fractions must lie in (0, 1], got {fraction!r}.")
        powers, shares = [], []
        for _ in range(1 if fraction == 1 else n_draws):
            chosen = rng.choice(ids, max(2, int(round(fraction * len(ids)))), replace=False)
            rows_ref = np.flatnonzero(np.isin(groups, chosen))
            rows_cal = rng.choice(len(calibration), max(2, int(round(fraction * len(calibration)))), replace=False)
            fitted = clone(detector).fit(reference[rows_ref], groups=groups[rows_ref],
                                         calibration=calibration[np.sort(rows_cal)])
            powers.append(float(np.mean(fitted.pvalues(positive) < alpha)))
            shares.append(fitted.null_share(alpha))
        rows.append({"fraction": fraction, "n_reference": len(rows_ref) if fraction < 1 else len(reference),
                     "n_calibration": len(rows_cal), "power": float(np.mean(powers)),
                     "null_share": float(np.mean(shares))})
    return pd.DataFrame(rows, columns=list(POWER_CURVE_COLUMNS))


def size_for_power(curve: pd.DataFrame, target: float = 0.8) -> float:
    """The data multiplier that gives ``target`` power, from a :func:`power_curve`.

    The smallest measured fraction reaching ``target`` when one does.  Otherwise the power is
    extrapolated linearly in ``log2(fraction)`` from the two largest fractions whose test could flag
    anything (a positive ``null_share``: with too few calibration texts no p-value reaches the level).

    Parameters
    ----------
    curve : pandas.DataFrame
        From :func:`power_curve` (columns ``fraction``, ``power`` and, optionally, ``null_share``).
    target : float, default=0.8

    Returns
    -------
    float
        A multiple of the full data (``0.5``: half of it was enough; ``4.0``: about four times as
        many texts would be needed); ``inf`` when the power does not grow with the data or too few
        points can flag anything.

    Examples
    --------
    >>> import pandas as pd
    >>> from fmmlearn.ood import size_for_power
    >>> curve = pd.DataFrame({"fraction": [0.25, 0.5, 1.0], "power": [0.4, 0.5, 0.6]})
    >>> round(size_for_power(curve), 6)
    4.0
    """
    curve = curve.sort_values("fraction")
    reached = curve[curve["power"] >= target]
    if len(reached):
        return float(reached["fraction"].min())
    usable = curve if "null_share" not in curve.columns else curve[curve["null_share"] > 0]
    if len(usable) < 2:
        return math.inf
    (f1, p1), (f2, p2) = usable[["fraction", "power"]].to_numpy(float)[-2:]
    slope = (p2 - p1) / (math.log2(f2) - math.log2(f1))
    if slope <= 1e-9:
        return math.inf
    return float(f2 * 2.0 ** ((target - p2) / slope))

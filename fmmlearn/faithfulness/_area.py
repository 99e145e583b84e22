"""ACU and RACU: the area between an explanation's masking curve and the random one.

Torch-free (numpy and pandas only), so curves computed elsewhere can be
summarised anywhere.  See ``docs/faithfulness.md`` for the formulas (Madsen et
al., 2024, following the RACU of Madsen et al., 2022).
"""

from __future__ import annotations


import numpy as np
import pandas as pd

from ..exceptions import FaithfulnessWarning
from ..metrics import greater_is_better as _metric_greater_is_better
from ..utils import check_ratios, single_class_note, warn
from ..utils import keyword_only

__all__ = ["acu", "area_statistics", "racu"]


def _curve_arrays(curve, name: str, ratios):
    """``(ratios, values, (metric name, greater_is_better) or None)`` of a curve DataFrame or value array."""
    if isinstance(curve, pd.DataFrame):
        missing = {"ratio", "value"} - set(curve.columns)
        if missing:
            raise ValueError(f"{name} lacks column(s) {sorted(missing)}; expected a curve DataFrame.")
        for column in ("method", "repeat", "metric"):
            if column in curve.columns and curve[column].nunique() > 1:
                raise ValueError(f"{name} holds several curves (column {column!r} has "
                                 f"{curve[column].nunique()} values); select one.")
        ordered = curve.sort_values("ratio", kind="stable")
        return check_ratios(ordered["ratio"].to_numpy(), name=f"{name}['ratio']", endpoints=True), \
            ordered["value"].to_numpy(dtype=np.float64), _direction(curve)
    values = np.asarray(curve, dtype=np.float64)
    if values.ndim != 1 or values.size < 2:
        raise ValueError(f"{name} must be a curve DataFrame or a 1-D array of at least 2 values, got shape "
                         f"{values.shape}.")
    grid = np.linspace(0.0, 1.0, values.size) if ratios is None else check_ratios(ratios, endpoints=True)
    if grid.size != values.size:
        raise ValueError(f"{name} has {values.size} values but ratios has {grid.size}.")
    return grid, values, None


def _direction(curve: pd.DataFrame):
    """``(metric name, greater_is_better)`` of a curve frame; ``None`` where it does not say."""
    if "metric" not in curve.columns or not len(curve):
        return None
    name = curve["metric"].iloc[0]
    if "greater_is_better" in curve.attrs:
        return name, bool(curve.attrs["greater_is_better"])
    try:
        return name, _metric_greater_is_better(name)
    except (ValueError, TypeError):  # a custom metric's name: assume greater is better
        return name, True


def _aligned(curve, random_curve, ratios, greater_is_better):
    grid, p_im, direction = _curve_arrays(curve, "curve", ratios)
    grid_rand, p_rand, direction_rand = _curve_arrays(random_curve, "random_curve", ratios)
    if grid.shape != grid_rand.shape or not np.allclose(grid, grid_rand):
        raise ValueError(f"curve and random_curve have different ratio grids: {grid.tolist()} vs "
                         f"{grid_rand.tolist()}.")
    if direction is not None and direction_rand is not None and direction[0] != direction_rand[0]:
        raise ValueError(f"curve and random_curve use different metrics: {direction[0]!r} vs "
                         f"{direction_rand[0]!r}.")
    if greater_is_better is None:
        known = direction or direction_rand
        greater_is_better = True if known is None else known[1]
    _warn_if_not_finite(grid, p_im, p_rand)
    return grid, p_im, p_rand, 1.0 if greater_is_better else -1.0


def _warn_if_not_finite(grid, p_im, p_rand) -> None:
    """A :class:`FaithfulnessWarning` naming the ratios where a curve is NaN or infinite (the area is then NaN)."""
    for name, values in (("curve", p_im), ("random_curve", p_rand)):
        bad = ~np.isfinite(values)
        if bad.any():
            warn(f"{name} is not finite (NaN or inf) at ratio(s) {grid[bad].tolist()}, so the area is "
                 "not a number; recompute the curve (e.g. a metric undefined on a single class gives NaN).",
                 FaithfulnessWarning)


def _area(grid: np.ndarray, values: np.ndarray) -> float:
    """Trapezoid rule on the actual grid."""
    return float(np.sum(np.diff(grid) * (values[1:] + values[:-1]) / 2.0))


@keyword_only
def area_statistics(curve, random_curve, *, grid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ACU, RACU and the random curve's area along the last axis (the ratio grid), for a greater-is-better metric.

    The definitions of :func:`acu` and :func:`racu`, vectorised over any leading axes (bootstrap
    resamples, seeds): ``ACU = ∫ (p_rand - p) dr`` and ``RACU = ACU / ∫ (p_rand - p_rand(1)) dr``
    (trapezoid rule on ``grid``).  RACU is NaN where the random curve is flat.

    Parameters
    ----------
    curve, random_curve : ndarray of shape (..., n_ratios)
        The method's and the ``rand`` curve's metric values (the frames call the latter the
        ``baseline``).
    grid : ndarray of shape (n_ratios,)

    Returns
    -------
    acu, racu, baseline_area : ndarray
        ``baseline_area`` (the frames' name) is RACU's denominator, the area random masking leaves above its
        fully-masked end; near 0 (or below), RACU is unstable.

    Examples
    --------
    >>> import numpy as np
    >>> a, r, m = area_statistics(np.array([1.0, 0.5, 0.5]), np.array([1.0, 1.0, 0.5]),
    ...                           grid=np.array([0, 0.5, 1]))
    >>> float(a), round(float(r), 4), float(m)
    (0.25, 0.6667, 0.375)
    """
    from scipy.integrate import trapezoid

    curve, rand = np.asarray(curve, dtype=np.float64), np.asarray(random_curve, dtype=np.float64)
    acu_values = trapezoid(rand - curve, x=grid, axis=-1)
    largest = trapezoid(rand - rand[..., -1:], x=grid, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        racu_values = np.where(largest != 0, acu_values / np.where(largest != 0, largest, 1.0), np.nan)
    return acu_values, racu_values, largest


def acu(curve, random_curve, *, ratios=None, greater_is_better: bool | None = None) -> float:
    """Area between the random curve and an explanation's curve (docs/faithfulness.md).

    ``ACU = sum_k (r_k - r_{k-1}) / 2 * [(p_rand(r_k) - p(r_k)) + (p_rand(r_{k-1}) - p(r_{k-1}))]``.
    Positive: masking the explanation's important tokens hurts performance
    more than masking random ones (more faithful than random).  For a metric
    where lower is better (a loss) the sign is flipped, so positive still
    means more faithful.

    Parameters
    ----------
    curve, random_curve : DataFrame or array-like
        Curve DataFrames (columns ``ratio``, ``value``; ``metric`` is used to
        infer the direction) such as :func:`faithfulness_curve` returns, or
        arrays of metric values.  ``random_curve`` is the ``rand`` curve of
        the same model on the same data.
    ratios : array-like, optional
        Only for arrays: the grid, which must start at 0 and end at 1;
        default evenly spaced (``0, 0.1, ..., 1`` for 11 values).
    greater_is_better : bool, optional
        Direction of the metric; default inferred from the frames' ``metric``
        column, else True.

    Returns
    -------
    float

    Examples
    --------
    >>> acu([1.0, 0.5, 0.5], [1.0, 1.0, 0.5])
    0.25
    """
    grid, p_im, p_rand, sign = _aligned(curve, random_curve, ratios, greater_is_better)
    return sign * _area(grid, p_rand - p_im)


def racu(curve, random_curve, *, ratios=None, greater_is_better: bool | None = None) -> float:
    """ACU relative to the largest area random masking leaves (docs/faithfulness.md).

    ``RACU = ACU / MAX`` with ``MAX`` the area between the random curve and
    its fully-masked end ``p_rand(1)``.  1 means the curve drops at once to the
    fully-masked level; it can exceed 1 (dropping below it, e.g. for signed
    measures) and be negative (less faithful than random).  The direction of
    the metric flips ACU and MAX alike, so the ratio keeps its meaning.

    Parameters
    ----------
    curve, random_curve, ratios, greater_is_better
        See :func:`acu`.

    Returns
    -------
    float
        NaN, with a :class:`FaithfulnessWarning`, when ``MAX = 0`` (a flat
        random curve: masking does not change performance).

    Examples
    --------
    >>> round(racu([1.0, 0.5, 0.5], [1.0, 1.0, 0.5]), 4)
    0.6667
    """
    grid, p_im, p_rand, sign = _aligned(curve, random_curve, ratios, greater_is_better)
    largest = sign * _area(grid, p_rand - p_rand[-1])
    if largest == 0 or not np.isfinite(largest):
        warn("RACU is undefined: the random curve is flat (or not finite), so the area it leaves "
             f"is {largest}; returning NaN. A model that predicts a single class does this.", FaithfulnessWarning)
        return float("nan")
    return sign * _area(grid, p_rand - p_im) / largest


def flat_baseline_reason(clf, encoding, target_idx) -> str:
    """Why RACU is undefined on these inputs, for warnings: a model that predicts one class, or a flat random curve.

    Parameters
    ----------
    clf : FittedClassifier
    encoding : Encoding
        The clean inputs the curves were measured on.
    target_idx : ndarray of int
        Their gold labels as class indices.

    Returns
    -------
    str
    """
    classes = np.asarray(clf.classes_)
    predicted = classes[clf.encoded_logits(encoding).argmax(axis=1)]
    note = single_class_note(predicted, classes[np.asarray(target_idx)], "clean inputs")
    if note:
        return (f"{note}, so masking does not change its performance and the random curve is flat; refit the "
                "model (more epochs or another learning rate)")
    return "the random curve is flat (masking does not change the metric)"

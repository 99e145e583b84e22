"""Confidence intervals of the study: bootstrap over test examples and over fine-tuning seeds.

A faithfulness curve is a metric of the masked test set at each ratio, so it
is a function of the per-example predictions.  Keeping the predictions of
every example at every ratio makes the bootstrap over examples exact and
cheap: resample the examples, recompute both curves (the measure's and the
``rand`` baseline's, on the *same* resampled examples) and the area between
them.  With several seeds the test examples are the same for every seed, so
the mean over seeds is resampled the same way.  The spread over seeds is a
second, separate interval (the paper's tables: mean over seeds with a 95 %
BCa bootstrap CI, seeded 0, collapsed to the mean when all values are equal).
"""

from __future__ import annotations

import inspect
import warnings
from typing import Callable

import numpy as np
from scipy.integrate import trapezoid
from scipy.stats import bootstrap

__all__ = ["area_metrics", "example_ci", "score_function", "seed_ci"]

# scipy >= 1.15 names the seed of `bootstrap` `rng`; older versions `random_state`.
_SEED_ARG = "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"
# Bootstrap resamples evaluated at once (bounds the memory of the vectorised statistic).
_BATCH_CELLS = 4_000_000


def _class_counts(pred, gold, n_classes: int):
    """Per class: true positives, predicted and gold counts over the last axis (shape ``(..., n_classes)``)."""
    classes = np.arange(n_classes).reshape((n_classes,) + (1,) * pred.ndim)
    is_pred, is_gold = pred == classes, gold == classes
    tp, predicted, true = (is_pred & is_gold).sum(-1), is_pred.sum(-1), is_gold.sum(-1)
    return (np.moveaxis(x, 0, -1).astype(np.float64) for x in (tp, predicted, true))


def _macro_f1(pred, gold, n_classes):
    """Macro F1 over every class (0/0 := 0, so a class neither predicted nor present scores 0)."""
    tp, predicted, true = _class_counts(pred, gold, n_classes)
    denominator = predicted + true
    return np.where(denominator > 0, 2 * tp / np.where(denominator > 0, denominator, 1), 0.0).mean(-1)


def _matthew(pred, gold, n_classes):
    """Multi-class Matthews correlation from the confusion counts (NaN -> 0)."""
    tp, predicted, true = _class_counts(pred, gold, n_classes)
    s = float(pred.shape[-1])
    c = tp.sum(-1)
    denominator = np.sqrt((s**2 - (predicted**2).sum(-1)) * (s**2 - (true**2).sum(-1)))
    return np.where(denominator > 0, (c * s - (true * predicted).sum(-1)) / np.where(denominator > 0, denominator, 1),
                    0.0)


def score_function(metric, classes) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``score(pred, gold) -> values`` over the last axis, for any leading shape.

    The paper's metrics (accuracy, micro F1 -- equal to accuracy for
    single-label data --, macro F1 and Matthews correlation) are vectorised
    over resamples from per-class counts; any other label metric of
    :func:`fmmlearn.metrics.get_metric` is called once per curve point and
    resample (exact, but slow: lower ``n_bootstrap`` for it).

    Parameters
    ----------
    metric : fmmlearn.metrics.Metric
    classes : ndarray
        The classifier's ``classes_`` (predictions and gold are indices into it).

    Returns
    -------
    callable
    """
    n_classes = len(classes)
    if metric.name in ("accuracy", "micro_f1"):
        return lambda pred, gold: (pred == gold).mean(axis=-1)
    if metric.name == "macro_f1":
        return lambda pred, gold: _macro_f1(*np.broadcast_arrays(pred, gold), n_classes)
    if metric.name == "matthew":
        return lambda pred, gold: _matthew(*np.broadcast_arrays(pred, gold), n_classes)
    labels = np.asarray(classes)

    def score(pred, gold):
        pred, gold = np.broadcast_arrays(pred, gold)
        flat_pred, flat_gold = pred.reshape(-1, pred.shape[-1]), gold.reshape(-1, gold.shape[-1])
        out = [metric(labels[g], labels[p], labels=labels) for p, g in zip(flat_pred, flat_gold)]
        return np.asarray(out, dtype=np.float64).reshape(pred.shape[:-1])

    return score


def area_metrics(curve: np.ndarray, baseline: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, ...]:
    """ACU, RACU and the baseline's area along the last axis (the ratio grid), for a greater-is-better metric.

    ``ACU = ∫ (p_rand - p) dr`` and ``RACU = ACU / ∫ (p_rand - p_rand(1)) dr``
    (trapezoid rule on ``grid``), the definitions of
    :func:`fmmlearn.faithfulness.acu` and :func:`~fmmlearn.faithfulness.racu`,
    vectorised over any leading axes (resamples, seeds).  RACU is NaN where
    the baseline is flat.

    Returns
    -------
    acu, racu, baseline_area : ndarray
        ``baseline_area`` is RACU's denominator, the area random masking
        leaves above its fully-masked end; near 0 (or below), RACU is unstable.
    """
    acu = trapezoid(baseline - curve, x=grid, axis=-1)
    largest = trapezoid(baseline - baseline[..., -1:], x=grid, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        racu = np.where(largest != 0, acu / np.where(largest != 0, largest, 1.0), np.nan)
    return acu, racu, largest


def _bootstrap_ci(statistic, n: int, point: float, *, confidence_level: float, n_resamples: int,
                  cells_per_resample: int, seed: int = 0) -> tuple[float, float]:
    """BCa interval of ``statistic(indices)`` over resampled indices ``0..n-1``.

    Falls back to percentiles of the finite resamples when BCa cannot be
    formed (e.g. a few resamples where RACU is undefined), and collapses to
    the point estimate when every resample gives it.
    """
    if n < 2 or not np.isfinite(point):
        return float("nan"), float("nan")
    batch = max(1, _BATCH_CELLS // max(1, cells_per_resample))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples; handled below
        result = bootstrap((np.arange(n),), statistic, vectorized=True, batch=batch, n_resamples=n_resamples,
                           confidence_level=confidence_level, **{_SEED_ARG: seed})
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


def example_ci(score, pred: np.ndarray, gold: np.ndarray, *, baseline: np.ndarray | None = None,
               grid: np.ndarray | None = None, kind: str = "value", confidence_level: float = 0.95,
               n_resamples: int = 9999) -> tuple[float, float, float]:
    """A statistic of per-example predictions and its bootstrap CI over the examples.

    Parameters
    ----------
    score : callable
        From :func:`score_function`.
    pred : ndarray of int, shape (n_seeds, n_ratios, n_examples) or (n_seeds, n_examples)
        Predicted class indices; seeds share the examples.
    gold : ndarray of int, shape (n_examples,)
    baseline : ndarray of int, optional
        The ``rand`` predictions, shape ``(n_seeds, n_draws, n_ratios,
        n_examples)``: the baseline curve is the mean of the draws' curves.
    grid : ndarray, optional
        The ratio grid (for the area statistics).
    kind : {"value", "acu", "racu", "baseline_area"}
        ``"value"``: the metric, mean over seeds; the others: the area
        statistic of ``pred`` against ``baseline`` (see :func:`area_metrics`),
        mean over seeds.
    confidence_level : float, default=0.95
    n_resamples : int, default=9999

    Returns
    -------
    (point, low, high) : tuple of float
    """
    pred, gold = np.asarray(pred), np.asarray(gold)
    kinds = ("acu", "racu", "baseline_area")
    if kind != "value" and kind not in kinds:
        raise ValueError(f"kind must be 'value', 'acu', 'racu' or 'baseline_area', got {kind!r}.")
    pick = kinds.index(kind) if kind in kinds else None

    def statistic(idx, axis=-1):
        idx = np.asarray(idx, dtype=np.intp)
        values = score(pred[..., idx], gold[idx])      # (..., [B,] n) -> (seeds, [ratios,] [B])
        if kind == "value":
            return values.mean(axis=0)
        base = score(baseline[..., idx], gold[idx]).mean(axis=1)  # (seeds, draws, ...) -> mean over draws
        if idx.ndim == 2:  # resamples on the last axis of the curves: put the ratios last
            values, base = np.moveaxis(values, -1, 1), np.moveaxis(base, -1, 1)
        return area_metrics(values, base, grid)[pick].mean(axis=0)

    point = float(statistic(np.arange(len(gold))))
    cells = (int(np.prod(pred.shape[:-1])) + (0 if baseline is None else int(np.prod(baseline.shape[:-1])))) \
        * len(gold)
    low, high = _bootstrap_ci(statistic, len(gold), point, confidence_level=confidence_level,
                              n_resamples=n_resamples, cells_per_resample=cells)
    return point, low, high


def seed_ci(values, confidence_level: float = 0.95) -> tuple[float, float, float]:
    """Mean over seeds and its BCa bootstrap CI (seeded 0); collapsed to the mean when all values are equal.

    Non-finite values are dropped; fewer than 2 values give NaN bounds.

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
    low, high = _bootstrap_ci(lambda idx, axis=-1: values[np.asarray(idx, dtype=np.intp)].mean(axis=-1),
                              values.size, mean, confidence_level=confidence_level, n_resamples=9999,
                              cells_per_resample=values.size)
    return mean, low, high

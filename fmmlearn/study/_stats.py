"""Confidence intervals of the study over test examples (and, separately, over fine-tuning seeds).

A faithfulness curve is a metric of the masked test set at each ratio, so it is a function of the
per-example predictions.  Keeping the predictions of every example at every ratio makes the
bootstrap over examples exact and cheap: resample the examples, recompute both curves (the
measure's and the ``rand`` baseline's, on the *same* resampled examples) and the area between them.
With several seeds the test examples are the same for every seed, so the mean over seeds is
resampled the same way.  The spread over seeds is a second, separate interval
(:func:`fmmlearn._bootstrap.seed_ci`).  The metric comes from :func:`fmmlearn.metrics.vectorized_metric`,
the areas from :func:`fmmlearn.faithfulness.area_statistics`, the resampling from
:func:`fmmlearn._bootstrap.bootstrap_ci`: this module only says what is resampled.
"""

from __future__ import annotations

import numpy as np

from .._bootstrap import bootstrap_ci
from ..faithfulness import area_statistics

__all__ = ["AREA_KINDS", "example_ci"]

#: The area statistics :func:`example_ci` can resample (see :func:`fmmlearn.faithfulness.area_statistics`).
AREA_KINDS = ("acu", "racu", "baseline_area")


def example_ci(score, pred: np.ndarray, gold: np.ndarray, *, baseline: np.ndarray | None = None,
               grid: np.ndarray | None = None, kind: str = "value", confidence_level: float = 0.95,
               n_resamples: int = 9999) -> tuple[float, float, float]:
    """A statistic of per-example predictions and its bootstrap CI over the examples.

    Parameters
    ----------
    score : callable
        From :func:`fmmlearn.metrics.vectorized_metric`.
    pred : ndarray of int, shape (n_seeds, n_ratios, n_examples) or (n_seeds, n_examples)
        Predicted class indices; seeds share the examples.
    gold : ndarray of int, shape (n_examples,)
    baseline : ndarray of int, optional
        The ``rand`` predictions, shape ``(n_seeds, n_draws, n_ratios, n_examples)``: the baseline
        curve is the mean of the draws' curves.
    grid : ndarray, optional
        The ratio grid (for the area statistics).
    kind : {"value", "acu", "racu", "baseline_area"}
        ``"value"``: the metric, mean over seeds; the others: the area statistic of ``pred`` against
        ``baseline``, mean over seeds.
    confidence_level : float, default=0.95
    n_resamples : int, default=9999

    Returns
    -------
    (point, low, high) : tuple of float
    """
    pred, gold = np.asarray(pred), np.asarray(gold)
    if kind != "value" and kind not in AREA_KINDS:
        raise ValueError(f"kind must be 'value', 'acu', 'racu' or 'baseline_area', got {kind!r}.")
    pick = AREA_KINDS.index(kind) if kind in AREA_KINDS else None

    def statistic(idx, axis=-1):
        idx = np.asarray(idx, dtype=np.intp)
        values = score(pred[..., idx], gold[idx])      # (..., [B,] n) -> (seeds, [ratios,] [B])
        if kind == "value":
            return values.mean(axis=0)
        base = score(baseline[..., idx], gold[idx]).mean(axis=1)  # (seeds, draws, ...) -> mean over draws
        if idx.ndim == 2:  # resamples on the last axis of the curves: put the ratios last
            values, base = np.moveaxis(values, -1, 1), np.moveaxis(base, -1, 1)
        return area_statistics(values, base, grid)[pick].mean(axis=0)

    point = float(statistic(np.arange(len(gold))))
    cells = (int(np.prod(pred.shape[:-1])) + (0 if baseline is None else int(np.prod(baseline.shape[:-1])))) \
        * len(gold)
    low, high = bootstrap_ci(statistic, len(gold), point, confidence_level=confidence_level,
                             n_resamples=n_resamples, cells_per_resample=cells)
    return point, low, high

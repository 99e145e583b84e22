"""Confidence intervals of the study over test examples (and, separately, over fine-tuning seeds).

A faithfulness curve is a metric of the masked test set at each ratio, so it is a function of the
per-example predictions.  Keeping the predictions of every example at every ratio makes the
bootstrap over examples exact and cheap: resample the examples, recompute both curves (the
measure's and the ``rand`` baseline's, on the *same* resampled examples) and the area between them.
With several seeds the test examples are the same for every seed, so the mean over seeds is
resampled the same way.  The spread over seeds is a second, separate interval
(:func:`fmmlearn.utils._bootstrap.seed_ci`).  The metric comes from :func:`fmmlearn.metrics.vectorized_metric`,
the areas from :func:`fmmlearn.faithfulness.area_statistics`, the resampling from
:func:`fmmlearn.utils._bootstrap.bootstrap_ci`: this module only says what is resampled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..faithfulness import area_statistics
from ..utils import bootstrap_ci

__all__ = ["AREA_KINDS", "PairedDifference", "example_ci", "mean_over_texts", "paired_difference", "share_ci"]

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
        return area_statistics(values, base, grid=grid)[pick].mean(axis=0)

    point = float(statistic(np.arange(len(gold))))
    cells = (int(np.prod(pred.shape[:-1])) + (0 if baseline is None else int(np.prod(baseline.shape[:-1])))) \
        * len(gold)
    low, high = bootstrap_ci(statistic, len(gold), point, confidence_level=confidence_level,
                             n_resamples=n_resamples, cells_per_resample=cells)
    return point, low, high


@dataclass(frozen=True)
class PairedDifference:
    """A paired difference ``first - second`` and its bootstrap distribution (read intervals at any level)."""

    estimate: float
    resamples: np.ndarray
    n_examples: int
    n_seeds: int
    method: str = "normal"

    def interval(self, confidence_level: float) -> tuple[float, float]:
        """The interval at ``confidence_level`` (NaN when there are no resamples).

        ``"normal"``: ``estimate +- z * SE`` with the bootstrap standard error -- stable at the extreme
        levels alpha-spending asks for, where a percentile would rest on a handful of resamples (a
        difference of two ACUs sums many bounded per-text terms, so it is close to normal).
        ``"percentile"``: quantiles of the resamples (for shares near 0 or 1, which are not).
        """
        from scipy.stats import norm

        values = self.resamples[np.isfinite(self.resamples)]
        if values.size < 2 or not np.isfinite(self.estimate):
            return float("nan"), float("nan")
        tail = (1 - confidence_level) / 2
        if self.method == "percentile":
            low, high = np.quantile(values, [tail, 1 - tail])
            return float(low), float(high)
        half = float(norm.ppf(1 - tail) * values.std(ddof=1))
        return self.estimate - half, self.estimate + half


def _statistic(score, first, second, gold, grid):
    """Per resample: mean over seeds of ``value(first) - value(second)``; for curves, ``ACU(first) - ACU(second)``.

    ``ACU(A) - ACU(B) = ∫ (p_rand - p_A) - ∫ (p_rand - p_B) = ∫ (p_B - p_A) dr``: on the same texts
    the ``rand`` baseline cancels, so the difference is the area between the two curves.
    """
    a, b = score(first, gold), score(second, gold)  # (..., seeds[, ratios])
    if grid is None:
        return (a - b).mean(axis=-1)
    from scipy.integrate import trapezoid

    return trapezoid(b - a, x=grid, axis=-1).mean(axis=-1)


def paired_difference(score, first: np.ndarray, second: np.ndarray, gold: np.ndarray, *, grid=None,
                      n_resamples: int = 4000, seed: int = 0) -> PairedDifference:
    """``first - second`` on the same texts (and seeds), with a paired, two-level bootstrap.

    Parameters
    ----------
    score : callable
        From :func:`fmmlearn.metrics.vectorized_metric`.
    first, second : ndarray of int, shape (n_seeds, n_examples) or (n_seeds, n_ratios, n_examples)
        Predicted class indices of the two things compared, on the same texts, seed by seed: clean
        predictions of two models (a metric difference) or masking curves of two measures (with
        ``grid``: an ACU difference).
    gold : ndarray of int, shape (n_examples,)
    grid : ndarray, optional
        The masking-ratio grid of curves.
    n_resamples : int, default=4000
    seed : int, default=0

    Returns
    -------
    PairedDifference
        Each resample draws the texts with replacement and, with two or more seeds, the seeds too:
        the interval covers the texts and the fine-tuning seeds, and pairing (the same texts and
        seeds for both) removes what the two share.
    """
    first, second, gold = np.asarray(first), np.asarray(second), np.asarray(gold)
    if first.shape != second.shape:
        raise ValueError(f"first and second must have the same shape, got {first.shape} and {second.shape}.")
    n_seeds, n = first.shape[0], first.shape[-1]
    curves = first.ndim == 3

    def values(seeds, texts):  # seeds (B, S), texts (B, n) -> (B,)
        pick = (seeds[:, :, None, None], np.arange(first.shape[1])[None, None, :, None], texts[:, None, None, :]) \
            if curves else (seeds[:, :, None], texts[:, None, :])
        g = gold[texts][:, None, None, :] if curves else gold[texts][:, None, :]
        stat = _statistic(score, first[pick], second[pick], g, grid)
        return stat

    point = float(_statistic(score, first, second, gold[None, None, :] if curves else gold[None, :], grid))
    if n < 2:
        return PairedDifference(point, np.array([]), n, n_seeds)
    rng = np.random.default_rng(seed)
    cells = first[0].size * max(n_seeds, 1) * 2
    batch = max(1, 4_000_000 // max(cells, 1))
    out = []
    for start in range(0, n_resamples, batch):
        b = min(batch, n_resamples - start)
        texts = rng.integers(0, n, (b, n))
        seeds = rng.integers(0, n_seeds, (b, n_seeds)) if n_seeds > 1 else np.zeros((b, 1), dtype=np.int64)
        out.append(values(seeds, texts))
    return PairedDifference(point, np.concatenate(out), n, n_seeds)


def share_ci(k: int, n: int, confidence_level: float = 0.95) -> tuple[float, float, float]:
    """A share ``k / n`` and its Wilson interval (``scipy.stats.binomtest``); NaN for ``n = 0``."""
    from scipy.stats import binomtest

    if n == 0:
        return (float("nan"),) * 3
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence_level, method="wilson")
    return k / n, float(ci.low), float(ci.high)


def mean_over_texts(values: np.ndarray, *, n_resamples: int = 4000, seed: int = 0) -> PairedDifference:
    """The mean of per-text values of shape ``(n_seeds, n_texts)``, with the two-level bootstrap of
    :func:`paired_difference` (texts, and seeds when there are several).  E.g. the share of masking
    ratios at which MaSF flags each test text."""
    values = np.asarray(values, dtype=np.float64)
    n_seeds, n = values.shape
    point = float(values.mean())
    if n < 2:
        return PairedDifference(point, np.array([]), n, n_seeds, method="percentile")
    rng = np.random.default_rng(seed)
    texts = rng.integers(0, n, (n_resamples, n))
    seeds = rng.integers(0, n_seeds, (n_resamples, n_seeds)) if n_seeds > 1 else np.zeros((n_resamples, 1), int)
    means = values[seeds[:, :, None], texts[:, None, :]].mean(axis=(1, 2))
    return PairedDifference(point, means, n, n_seeds, method="percentile")

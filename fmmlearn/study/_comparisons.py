"""Paired comparisons with verdicts: two measures on the texts both ran on, two models on the same test texts.

Every comparison is ``first - second`` with a paired bootstrap interval (texts, and seeds when there
are several: :func:`~fmmlearn.study._stats.paired_difference`) and a verdict from the rules'
equivalence margin (:func:`~fmmlearn.study._rules.comparison_verdict`): ``first ahead``, ``second
ahead``, ``equivalent`` or ``inconclusive``.  Measures are compared by ACU on their common texts (the
``rand`` baseline cancels: the difference is the area between the two curves); models by their clean
test metric.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from ._names import model_label
from ._rules import comparison_verdict
from ._stats import paired_difference

__all__ = ["COMPARISON_COLUMNS", "final_comparisons", "measure_comparisons", "model_comparisons"]

#: Columns of :attr:`StudyResult.comparisons`, in order.
COMPARISON_COLUMNS = ("kind", "model", "first", "second", "statistic", "n_examples", "n_seeds", "estimate", "ci_low",
                      "ci_high", "margin", "verdict", "confidence_level", "round")


def _row(kind, model, first, second, statistic, difference, margin, level, round_index) -> dict:
    low, high = difference.interval(level)
    return {"kind": kind, "model": model, "first": first, "second": second, "statistic": statistic,
            "n_examples": difference.n_examples, "n_seeds": difference.n_seeds, "estimate": difference.estimate,
            "ci_low": low, "ci_high": high, "margin": margin, "verdict": comparison_verdict(low, high, margin),
            "confidence_level": level, "round": round_index}


def _common(idx_a: np.ndarray, idx_b: np.ndarray):
    """The texts both index arrays hold, and where each holds them."""
    common = np.intersect1d(idx_a, idx_b)
    where_a, where_b = {v: i for i, v in enumerate(idx_a)}, {v: i for i, v in enumerate(idx_b)}
    return common, np.array([where_a[v] for v in common], dtype=np.int64), \
        np.array([where_b[v] for v in common], dtype=np.int64)


def measure_comparisons(settings, gold, score, converged: dict, predictions: dict, *, level: float,
                        round_index=None) -> pd.DataFrame:
    """Every pair of measures of every model, by ACU on their common texts (converged seeds only).

    Parameters
    ----------
    predictions : dict
        ``(run, method) -> (indices of its test texts, predictions of shape (n_ratios, n))``.
    """
    rules = settings.rules
    margin = rules["comparisons"]["acu_margin"]
    rows = []
    for ratio in settings.masking_ratios:
        seeds = [s for s in settings.curve_seed_list if converged[(ratio, s)]]
        if not seeds:
            continue
        for first, second in combinations(settings.measures[1:], 2):
            idx_a, idx_b = predictions[((ratio, seeds[0]), first)][0], predictions[((ratio, seeds[0]), second)][0]
            common, pos_a, pos_b = _common(idx_a, idx_b)
            a = np.stack([predictions[((ratio, s), first)][1][:, pos_a] for s in seeds])
            b = np.stack([predictions[((ratio, s), second)][1][:, pos_b] for s in seeds])
            difference = paired_difference(score, a, b, gold[common], grid=settings.grid,
                                           n_resamples=rules["bootstrap"]["n_resamples"],
                                           seed=rules["bootstrap"]["seed"])
            rows.append(_row("measures", model_label(ratio), first, second, "ACU difference", difference, margin,
                             level, round_index))
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))


def model_comparisons(settings, gold, score, converged: dict, test_predictions: dict, *, level: float,
                      round_index=None) -> pd.DataFrame:
    """Every more-masked model against every less-masked one, by the clean test metric, on the same texts."""
    rules = settings.rules
    margin = rules["comparisons"]["accuracy_margin"]
    rows = []
    for low_ratio, high_ratio in combinations(sorted(settings.masking_ratios), 2):
        seeds = [s for s in settings.seeds if converged[(low_ratio, s)] and converged[(high_ratio, s)]]
        if not seeds:
            continue
        a = np.stack([test_predictions[(high_ratio, s)] for s in seeds])
        b = np.stack([test_predictions[(low_ratio, s)] for s in seeds])
        difference = paired_difference(score, a, b, gold, n_resamples=rules["bootstrap"]["n_resamples"],
                                       seed=rules["bootstrap"]["seed"])
        first, second = model_label(high_ratio), model_label(low_ratio)
        rows.append(_row("models", f"{first} vs {second}", first, second,
                         f"{settings.metric.name} difference", difference, margin, level, round_index))
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))


def final_comparisons(rounds: list) -> pd.DataFrame:
    """Each comparison's verdict at the first round that decided it, else at the last round.

    Under alpha-spending a decision taken at round ``r`` stands: later rounds only decide what was
    still open (docs/quickstart.md, "Verdicts").
    """
    rounds = [frame for frame in rounds if len(frame)]
    if not rounds:
        return pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    keys = ["kind", "model", "first", "second"]
    final = {}
    for frame in rounds:
        for row in frame.to_dict("records"):
            key = tuple(row[k] for k in keys)
            if key not in final or final[key]["verdict"] == "inconclusive":
                final[key] = row
    return pd.DataFrame(list(final.values()), columns=list(COMPARISON_COLUMNS))

"""Paired comparisons with verdicts, on synthetic curves where the answer is known."""

import numpy as np
import pandas as pd
import pytest

from fmmlearn.metrics import vectorized_metric
from fmmlearn.study._comparisons import final_comparisons, measure_comparisons, model_comparisons
from fmmlearn.study._rules import comparison_verdict, load_rules, spent_level
from fmmlearn.study._stats import paired_difference

GRID = np.linspace(0, 1, 11)
SCORE = vectorized_metric("accuracy", classes=["a", "b"])


def _curves(rng, gold, slope, n_seeds=2):
    """Predictions (seeds, ratios, texts) whose accuracy falls linearly from 0.9 by ``slope`` over the grid."""
    accuracy = np.clip(0.9 - slope * GRID, 0.5, 1)
    correct = rng.random((n_seeds, len(GRID), len(gold))) < accuracy[None, :, None]
    return np.where(correct, gold, 1 - gold)


class _Settings:
    def __init__(self, measures, masking_ratios=(1.0,), seeds=(0, 1), rules=None):
        self.measures, self.masking_ratios, self.seeds = ("rand", *measures), masking_ratios, seeds
        self.curve_seed_list = seeds
        self.grid, self.rules, self.confidence_level = GRID, rules or load_rules(), 0.95

        class metric:
            name = "accuracy"

        self.metric = metric


def test_an_equivalent_pair_reads_equivalent_and_a_real_gap_reads_ahead():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 300)
    steep, same, flat = _curves(rng, gold, 0.4), None, _curves(rng, gold, 0.1)
    same = steep.copy()
    flip = rng.random(same.shape) < 0.02  # the same explanation, a few predictions apart
    same[flip] = 1 - same[flip]
    idx = np.arange(300)
    predictions = {((1.0, s), m): (idx, p[s]) for s in (0, 1) for m, p in
                   (("x", steep), ("y", same), ("z", flat))}
    frame = measure_comparisons(_Settings(["x", "y", "z"]), gold, SCORE, {(1.0, 0): True, (1.0, 1): True},
                                predictions, level=0.95, round_index=0)
    verdicts = {(r.first, r.second): r.verdict for r in frame.itertuples()}
    assert verdicts[("x", "y")] == "equivalent"
    assert verdicts[("x", "z")] == "first ahead" and verdicts[("y", "z")] == "first ahead"
    row = frame[(frame["first"] == "x") & (frame["second"] == "z")].iloc[0]
    # the ACU difference is the area between the two accuracy curves (the baseline cancels)
    areas = [np.trapezoid(SCORE(flat[s], gold) - SCORE(steep[s], gold), GRID) for s in (0, 1)]
    assert row["estimate"] == pytest.approx(np.mean(areas))
    assert row["ci_low"] < row["estimate"] < row["ci_high"] and row["n_seeds"] == 2


def test_measures_are_compared_on_the_texts_both_ran_on():
    rng = np.random.default_rng(1)
    gold = rng.integers(0, 2, 100)
    curves = _curves(rng, gold, 0.3, n_seeds=1)[0]
    few = np.array([3, 10, 17, 40, 41, 99])  # a costly measure's subset, in any order
    predictions = {((1.0, 0), "cheap"): (np.arange(100), curves), ((1.0, 0), "costly"): (few[::-1], curves[:, few[::-1]])}
    frame = measure_comparisons(_Settings(["cheap", "costly"], seeds=(0,)), gold, SCORE, {(1.0, 0): True},
                                predictions, level=0.95)
    assert frame["n_examples"].tolist() == [6]
    assert frame["estimate"].iloc[0] == pytest.approx(0.0)  # identical predictions on the shared texts


def test_model_comparison_is_paired_on_the_test_texts():
    rng = np.random.default_rng(2)
    gold = rng.integers(0, 2, 400)
    plain = np.where(rng.random((2, 400)) < 0.8, gold, 1 - gold)
    masked = plain.copy()
    masked[:, :8] = 1 - masked[:, :8]  # differs from plain on 8 of 400 texts only
    frame = model_comparisons(_Settings(["x"], masking_ratios=(0.0, 1.0)), gold, SCORE,
                              {(r, s): True for r in (0.0, 1.0) for s in (0, 1)},
                              {(0.0, s): plain[s] for s in (0, 1)} | {(1.0, s): masked[s] for s in (0, 1)}, level=0.95)
    row = frame.iloc[0]
    assert (row["first"], row["second"]) == ("masked", "plain") and row["verdict"] == "equivalent"
    assert abs(row["estimate"]) <= 8 / 400 and row["ci_high"] - row["ci_low"] < 0.05  # pairing: no text noise


def test_final_comparisons_keep_the_first_decision():
    first = pd.DataFrame([{"kind": "measures", "model": "m", "first": "a", "second": "b", "verdict": "inconclusive",
                           "round": 0}, {"kind": "measures", "model": "m", "first": "a", "second": "c",
                                         "verdict": "first ahead", "round": 0}])
    second = first.assign(verdict=["equivalent", "inconclusive"], round=1)
    final = final_comparisons([first, second]).set_index("second")
    assert final.loc["b", "verdict"] == "equivalent" and final.loc["b", "round"] == 1
    assert final.loc["c", "verdict"] == "first ahead" and final.loc["c", "round"] == 0


def test_error_control_survives_optional_stopping():
    """Under the null (two measures alike), stopping at the first round that decides 'ahead' at alpha-spent
    levels declares a winner in at most alpha of the runs; looking at the same level every round would not."""
    rng = np.random.default_rng(3)
    wrong_spent = wrong_naive = 0
    runs, rounds, block = 120, 6, 20
    for _ in range(runs):
        gold = rng.integers(0, 2, rounds * block)
        a, b = _curves(rng, gold, 0.3, n_seeds=1), _curves(rng, gold, 0.3, n_seeds=1)
        decided_spent = decided_naive = False
        for r in range(rounds):
            n = (r + 1) * block
            d = paired_difference(SCORE, a[..., :n], b[..., :n], gold[:n], grid=GRID, n_resamples=600,
                                  seed=int(rng.integers(1 << 30)))
            decided_spent |= comparison_verdict(*d.interval(spent_level(0.95, r)), 0.0) != "inconclusive"
            decided_naive |= comparison_verdict(*d.interval(0.95), 0.0) != "inconclusive"
        wrong_spent += decided_spent
        wrong_naive += decided_naive
    assert wrong_spent / runs <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / runs)
    assert wrong_naive > wrong_spent  # the reason for spending: repeated looks at one level inflate the error

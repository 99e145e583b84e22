"""The study's statistics: share intervals that cover the truth, means that resample texts and seeds."""

import numpy as np
import pytest

from fmmlearn.study._stats import mean_over_texts, share_ci


def test_share_intervals_cover_the_truth_at_their_level():
    rng = np.random.default_rng(4)
    hits = 0
    for _ in range(400):
        k = rng.binomial(60, 0.05)
        _, low, high = share_ci(k, 60)
        hits += low <= 0.05 <= high
    assert hits / 400 >= 0.9


def test_mean_over_texts_resamples_texts_and_seeds():
    values = np.array([[0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    share = mean_over_texts(values, n_resamples=2000)
    assert share.estimate == pytest.approx(0.75)
    low, high = share.interval(0.95)
    assert low < 0.75 < high and share.n_seeds == 2 and share.n_examples == 4

"""The empirical-CDF kernels of MaSF (docs/ood.md, "The three levels"): strict, column-wise, exact with ties."""

import numpy as np
from scipy import stats

from fmmlearn.ood import empirical_cdf


def test_ecdf_matches_gaussian_cdf():
    reference = np.random.default_rng(0).standard_normal(10_000)
    grid = np.linspace(-3, 3, 601)
    assert np.max(np.abs(empirical_cdf(reference, grid) - stats.norm.cdf(grid))) < 0.015


def test_ecdf_is_strict_and_columnwise_with_ties():
    reference = np.array([[-0.0, 5.0], [0.0, 5.0], [1.0, 6.0], [2.0, 5.0]])
    values = np.array([[0.0, 5.0], [0.5, 5.5], [-1.0, 7.0]])
    expected = np.array([[0.0, 0.0], [0.5, 0.75], [0.0, 1.0]])   # -0.0 and 0.0 tie
    np.testing.assert_array_equal(empirical_cdf(reference, values), expected)

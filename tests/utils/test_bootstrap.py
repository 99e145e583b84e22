"""Bootstrap confidence intervals of fmmlearn.utils._bootstrap."""

import pytest

from fmmlearn.utils._bootstrap import mean_ci


def test_mean_ci_collapses_for_equal_values_and_brackets_the_mean():
    assert mean_ci([0.4, 0.4, 0.4], 0.95) == (0.4, 0.4, 0.4)
    assert mean_ci([0.7], 0.95) == (0.7, 0.7, 0.7)
    mean, low, high = mean_ci([0.1, 0.3, 0.2, 0.5, 0.4], 0.95)
    assert mean == pytest.approx(0.3) and low < mean < high

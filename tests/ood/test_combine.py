"""Combinations of p-values (docs/ood.md, "Dataset-level summaries"): Simes, Fisher, the geometric mean, summaries."""

import numpy as np
import pytest
from scipy import stats

from fmmlearn.ood import fisher_pvalue, geometric_mean_pvalue, simes_pvalue, summarize_pvalues


def test_simes_pvalue_by_hand_and_against_benjamini_hochberg():
    assert simes_pvalue([0.01, 0.04, 0.3, 0.8]) == pytest.approx(0.04)     # min(0.04, 0.08, 0.4, 0.8)
    assert simes_pvalue([0.5, 0.2]) == pytest.approx(0.4)                  # min(0.4, 0.5)
    p = np.random.default_rng(0).uniform(size=200) ** 2
    assert simes_pvalue(p) == pytest.approx(stats.false_discovery_control(p).min())
    np.testing.assert_allclose(simes_pvalue(np.array([[0.01, 0.04], [0.5, 0.2]])), [0.02, 0.4])


def test_fisher_pvalue_by_hand():
    p = np.array([0.01, 0.2, 0.5])
    statistic = -2 * (np.log(0.01) + np.log(0.2) + np.log(0.5))
    assert fisher_pvalue(p) == pytest.approx(stats.chi2.sf(statistic, df=6))
    assert fisher_pvalue([0.0, 0.9]) == 0.0
    assert fisher_pvalue([1.0, 1.0]) == pytest.approx(1.0)


def test_geometric_mean_pvalue_by_hand():
    p = np.array([0.001, 0.002, 0.004])
    assert geometric_mean_pvalue(p) == pytest.approx(np.e * 0.002)            # (1e-3 * 2e-3 * 4e-3)^(1/3) = 2e-3
    statistic = -2 * np.sum(np.log(p))                                       # a monotone function of Fisher's
    assert geometric_mean_pvalue(p) == pytest.approx(np.e * np.exp(-statistic / (2 * p.size)))
    assert geometric_mean_pvalue([0.0, 0.9]) == 0.0
    assert geometric_mean_pvalue([0.5, 0.9]) == 1.0                          # clipped


def test_summarize_pvalues_columns_and_values():
    p = np.array([0.0005, 0.004, 0.02, 0.05, 0.3, 0.9, 1.0, 0.07])
    summary = summarize_pvalues(p)
    assert list(summary.columns) == ["threshold", "proportion", "simes_p", "geomean_p"]
    np.testing.assert_allclose(summary["threshold"], [0.001, 0.005, 0.01, 0.05, 0.1])
    np.testing.assert_allclose(summary["proportion"], [1 / 8, 2 / 8, 2 / 8, 3 / 8, 5 / 8])   # strict p < t
    assert summary["simes_p"].iloc[0] == pytest.approx(0.0005 * 8)
    assert summary["geomean_p"].iloc[0] == pytest.approx(min(1, np.e * stats.gmean(p)))
    reference = summarize_pvalues(p, calibration="reference")
    assert list(reference.columns) == ["threshold", "proportion", "simes_p", "geomean_p", "fisher_p_reference_only"]
    statistic = -2 * np.sum(np.log(p + 1e-8))                                # the reference's statistic
    assert reference["fisher_p_reference_only"].iloc[0] == pytest.approx(stats.chi2.sf(statistic, df=16))
    with pytest.raises(ValueError, match="calibration must be one of"):
        summarize_pvalues(p, calibration="paper")


def conformal_pvalue_sets(rng, n_repeats, n_calibration, n_test):
    """In-distribution test sets scored against one shared calibration set each: dependent conformal p-values."""
    calibration = np.sort(rng.standard_normal((n_repeats, n_calibration)), axis=1)
    test = rng.standard_normal((n_repeats, n_test))
    at_least = n_calibration - np.stack([np.searchsorted(c, t) for c, t in zip(calibration, test)])
    return (1 + at_least) / (n_calibration + 1)


def test_dataset_level_combinations_under_shared_calibration():
    """Per-example p-values sharing the calibration references are dependent (docs/ood.md).

    Fisher's chi-square combination assumes independence and rejects a whole
    in-distribution set far more often than 5 %; the combinations the
    calibrated report shows (Simes, e x geometric mean) stay at or below 5 %.
    """
    p = conformal_pvalue_sets(np.random.default_rng(0), n_repeats=1000, n_calibration=100, n_test=1000)
    assert np.mean(p < 0.05) == pytest.approx(0.05, abs=0.005)             # each p-value is valid ...
    fisher = np.array([fisher_pvalue(row) for row in p])
    assert np.mean(fisher <= 0.05) > 0.12                                     # ... their Fisher combination is not
    for combine in (simes_pvalue, geometric_mean_pvalue):
        combined = np.array([combine(row) for row in p])
        assert np.mean(combined <= 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / len(p)), combine.__name__


@pytest.mark.parametrize("p, message", [
    ([0.5, 1.5], r"\[0, 1\]"), ([0.5, np.nan], "NaN"), ([], "empty"), (["x"], "numeric"),
])
def test_summaries_reject_bad_pvalues(p, message):
    with pytest.raises(ValueError, match=message):
        summarize_pvalues(p)


def test_summaries_reject_bad_thresholds():
    with pytest.raises(ValueError, match="thresholds"):
        summarize_pvalues([0.5], thresholds=(0.05, 1.5))

"""MaSF in-distribution test (docs/ood.md; Madsen, Reddy & Chandar, ICML 2024): calibration, power, parity with a
brute-force loop."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from fmmlearn.ood import MaSF, summarize_pvalues

# Tiny calibration sets in parity tests cannot reach p < 0.05; that warning is expected there.
pytestmark = pytest.mark.filterwarnings("ignore:The level-3 fold has only:UserWarning")

LAYERS, HIDDEN = 13, 768          # roberta-base / BERT-base: embeddings + 12 layers


@pytest.fixture(scope="module")
def gaussian():
    """Independent standard-normal features with the paper's shapes: calibration and fresh examples."""
    rng = np.random.default_rng(1)
    return (rng.standard_normal((3000, LAYERS, HIDDEN), dtype=np.float32),
            rng.standard_normal((2000, LAYERS, HIDDEN), dtype=np.float32))


@pytest.fixture(scope="module")
def calibrated(gaussian):
    return MaSF().fit(gaussian[0])


# -- calibration and power on paper-sized synthetic features ------------------------------------------


def test_calibrated_false_positive_rate_is_nominal(gaussian, calibrated):
    p = calibrated.pvalues(gaussian[1])
    assert 0.03 <= np.mean(p < 0.05) <= 0.07
    assert np.mean(p < 0.10) <= 0.13
    assert p.min() >= 1 / (calibrated.level3_reference_.size + 1)   # conformal floor, never 0


def test_calibrated_mode_stays_calibrated_with_correlated_dimensions():
    """The conformal guarantee does not assume independent features (docs/ood.md, "Measured calibration and power
    of MaSF", the correlated case)."""
    rng = np.random.default_rng(2)
    def features(n):
        shared = rng.standard_normal((n, 4, 1), dtype=np.float32)
        return np.float32(0.7) * rng.standard_normal((n, 4, 64), dtype=np.float32) + np.float32(0.7) * shared
    p = MaSF().fit(features(3000)).pvalues(features(3000))
    assert 0.03 <= np.mean(p < 0.05) <= 0.07


@pytest.mark.parametrize("name, transform", [
    ("mean shift 0.5 sd", lambda x: x + np.float32(0.5)),
    ("scale 1.1", lambda x: x * np.float32(1.1)),
])
def test_calibrated_flags_shifted_distributions(gaussian, calibrated, name, transform):
    p = calibrated.pvalues(transform(gaussian[1][:400]))
    assert np.mean(p < 0.05) >= 0.9, name


def test_reference_procedure_is_anti_conservative(gaussian):
    """docs/ood.md, "Two calibrations": in-sample calibration flags far more than 5 % of in-distribution examples."""
    masf = MaSF(calibration="reference").fit(gaussian[0][:1000])
    p = masf.pvalues(gaussian[1][:1000])
    assert np.mean(p < 0.05) > 0.25 and np.mean(p < 0.01) > 0.1
    summary = summarize_pvalues(p, calibration="reference").iloc[0]   # and the whole in-distribution set is rejected
    assert summary["simes_p"] < 0.05 and summary["fisher_p_reference_only"] < 1e-6


# -- degenerate features: ties at every level (docs/ood.md, "The three levels"; "Options": ties are exact) ------


@pytest.mark.parametrize("calibration", ["reference", "calibrated"])
def test_constant_features_score_one(calibration):
    features = np.full((60, 3, 5), 0.25, dtype=np.float32)
    np.testing.assert_array_equal(MaSF(calibration, random_state=0).fit(features).pvalues(features), 1.0)


def test_discrete_features_score_one_against_own_calibration_set():
    features = np.random.default_rng(0).integers(0, 2, size=(80, 3, 40)).astype(np.float32)
    np.testing.assert_array_equal(MaSF("reference").fit(features).pvalues(features), 1.0)


# -- ECDF ----------------------------------------------------------------------------------------------


# -- brute-force parity --------------------------------------------------------------------------------


def _brute_force(calibration, level1, level2, level3, queries):
    """MaSF one example and one comparison at a time, O(N^2) (docs/ood.md, "The three levels", "Two calibrations")."""
    layers, hidden = queries.shape[1:]

    def two_sided(reference, value):
        less = sum(1 for a in reference if a < value)
        if calibration == "reference":             # min(F, 1 - F), F = less / N, kept in integers
            return min(less, len(reference) - less) / len(reference)
        at_most, at_least = sum(1 for a in reference if a <= value), len(reference) - less
        return min(1.0, 2.0 * min(1.0 + at_most, 1.0 + at_least) / (len(reference) + 1))

    def simes(ps):
        ps = sorted(ps)
        return min(p * len(ps) / (i + 1) for i, p in enumerate(ps))

    def simes_per_layer(x):
        return [simes([two_sided(level1[:, l, d], x[l, d]) for d in range(hidden)]) for l in range(layers)]

    level2_simes = [simes_per_layer(x) for x in level2]
    eps = 1e-8 if calibration == "reference" else 0.0

    def fisher(s):
        total = 0.0
        for l in range(layers):
            total += np.log(two_sided([r[l] for r in level2_simes], s[l]) + eps)
        return -2.0 * total

    level3_fisher = [fisher(simes_per_layer(x)) for x in level3]

    def final(x):
        at_least = sum(1 for v in level3_fisher if v >= fisher(simes_per_layer(x)))
        n = len(level3_fisher)
        return at_least / n if calibration == "reference" else (1.0 + at_least) / (n + 1)

    return np.array([final(x) for x in queries])


@pytest.fixture(scope="module")
def tiny():
    """N = 30 calibration examples of 3 x 5 features rounded to 0.1, so ties are common."""
    rng = np.random.default_rng(3)
    cal = np.round(rng.standard_normal((30, 3, 5)), 1).astype(np.float32)
    new = np.round(rng.standard_normal((12, 3, 5)) * 1.3, 1).astype(np.float32)
    return cal, new


def test_reference_mode_equals_brute_force(tiny):
    cal, new = tiny
    masf = MaSF("reference").fit(cal)
    queries = np.concatenate([cal, new])
    expected = _brute_force("reference", cal, cal, cal, queries)
    np.testing.assert_array_equal(masf.pvalues(queries), expected)


def test_fit_and_scoring_count_the_same_way(tiny):
    """Fitting reads in-sample counts off one sort; scoring searches: both give the same statistics."""
    cal = tiny[0]
    masf = MaSF("reference").fit(cal)
    np.testing.assert_array_equal(np.sort(masf.statistics(cal).fisher), masf.level3_reference_)
    np.testing.assert_array_equal(np.sort(masf.statistics(cal).simes, axis=0).T, masf.level2_reference_)


def test_calibrated_mode_equals_brute_force(tiny):
    cal, new = tiny
    masf = MaSF(random_state=5).fit(cal)
    folds = [cal[idx] for idx in masf.fold_indices_]
    np.testing.assert_array_equal(masf.pvalues(new), _brute_force("calibrated", *folds, new))


def test_folds_are_disjoint_and_cover_the_calibration_set(tiny):
    folds = MaSF(fold_fractions=(0.5, 0.3, 0.2), random_state=1).fit(tiny[0]).fold_indices_
    assert [len(f) for f in folds] == [15, 9, 6]
    np.testing.assert_array_equal(np.sort(np.concatenate(folds)), np.arange(30))


def test_results_do_not_depend_on_chunk_size_or_layout(tiny):
    cal, new = tiny
    expected = MaSF(random_state=0).fit(cal).statistics(new)
    chunked = MaSF(random_state=0, chunk_size=4).fit(cal).statistics(new)
    for got, want in zip(chunked, expected):
        np.testing.assert_array_equal(got, want)
    single = MaSF("reference").fit(cal[:, 0, :]).pvalues(new[:, 0, :])       # 2-D = one layer
    np.testing.assert_array_equal(single, MaSF("reference").fit(cal[:, :1]).pvalues(new[:, :1]))
    as_float64 = MaSF("reference").fit(cal.astype(np.float64)).pvalues(new.astype(np.float64))
    np.testing.assert_array_equal(as_float64, MaSF("reference").fit(cal).pvalues(new))


def test_float16_rounds_features_before_comparing():
    rng = np.random.default_rng(0)
    cal, new = rng.standard_normal((40, 2, 6)), rng.standard_normal((10, 2, 6))
    half = MaSF("reference", dtype="float16").fit(cal).pvalues(new)
    rounded = MaSF("reference").fit(cal.astype(np.float16)).pvalues(new.astype(np.float16))
    np.testing.assert_array_equal(half, rounded)


def test_statistics_fields_and_clone(tiny):
    masf = MaSF("reference").fit(tiny[0])
    result = masf.statistics(tiny[1])
    assert result.simes.shape == result.layer_pvalues.shape == (12, 3)
    assert result.fisher.shape == result.pvalues.shape == (12,)
    np.testing.assert_array_equal(result.pvalues, masf.pvalues(tiny[1]))
    assert masf.level1_reference_.shape == (3, 5, 30) and masf.level1_reference_.dtype == np.float32
    with pytest.raises(NotFittedError):
        clone(masf).pvalues(tiny[1])


# -- dataset-level summaries ---------------------------------------------------------------------------


def correlated_copies(rng, n, repeats, layers=2, hidden=48, rho=0.5):
    """``repeats`` copies of ``n`` examples: a shared per-example component plus per-copy noise (unit variance)."""
    shared = rng.standard_normal((n, layers, hidden), dtype=np.float32)
    return np.concatenate([np.float32(np.sqrt(rho)) * shared + np.float32(np.sqrt(1 - rho))
                           * rng.standard_normal((n, layers, hidden), dtype=np.float32) for _ in range(repeats)])


def test_groups_keep_the_copies_of_an_example_in_one_fold():
    rng = np.random.default_rng(4)
    n, repeats = 2000, 3
    groups = np.tile(np.arange(n), repeats)           # copy k of example i is row k * n + i (calibration_features)
    masf = MaSF(random_state=0).fit(correlated_copies(rng, n, repeats), groups=groups)
    fold_of_row = np.empty(n * repeats, dtype=int)
    for k, fold in enumerate(masf.fold_indices_):
        fold_of_row[fold] = k
    assert (fold_of_row.reshape(repeats, n) == fold_of_row[:n]).all()       # every copy in its example's fold
    assert [len(f) for f in masf.fold_indices_] == [3 * 667, 3 * 666, 3 * 667]
    # Fresh in-distribution examples (one copy each) get p <= 0.05 at the nominal rate.
    p = masf.pvalues(correlated_copies(rng, 2000, 1))
    assert 0.03 <= np.mean(p <= 0.05) <= 0.07
    # Without groups, rows are split one by one: copies land in different folds.
    ungrouped = MaSF(random_state=0).fit(correlated_copies(rng, 200, repeats))
    fold_of_row = np.empty(200 * repeats, dtype=int)
    for k, fold in enumerate(ungrouped.fold_indices_):
        fold_of_row[fold] = k
    assert not (fold_of_row.reshape(repeats, 200) == fold_of_row[:200]).all()


def test_unique_groups_give_the_row_folds(tiny):
    ungrouped = MaSF(random_state=3).fit(tiny[0])
    grouped = MaSF(random_state=3).fit(tiny[0], groups=np.arange(len(tiny[0])))
    for a, b in zip(ungrouped.fold_indices_, grouped.fold_indices_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ungrouped.pvalues(tiny[1]), grouped.pvalues(tiny[1]))
    reference = MaSF("reference").fit(tiny[0], groups=np.zeros(len(tiny[0])))      # ignored in reference mode
    assert all(len(f) == len(tiny[0]) for f in reference.fold_indices_)


def test_bad_groups_are_named():
    X = np.random.default_rng(0).standard_normal((12, 2, 3))
    with pytest.raises(ValueError, match=r"groups must be a 1-D array with one example id per row of features \(12\)"):
        MaSF().fit(X, groups=np.arange(5))
    with pytest.raises(ValueError, match=r"12 rows of 2 groups.*whole groups give the folds \(6, 0, 6\) rows"):
        MaSF().fit(X, groups=np.repeat(np.arange(2), 6))


# -- bad input -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted_small():
    return MaSF().fit(np.random.default_rng(0).standard_normal((60, 3, 4)))


@pytest.mark.parametrize("features, message", [
    (np.zeros((5, 3, 4, 2)), "3-D array"),
    (np.zeros(5), "got 1 dimension"),
    (np.zeros((5, 2, 4)), "2 layer.*fitted on 3 layer"),
    (np.zeros((5, 3, 6)), "hidden size 6.*hidden size 4"),
    (np.zeros((5, 4)), "1 layer"),
    (np.zeros((0, 3, 4)), "empty"),
    (np.full((5, 3, 4), "a"), "real numbers"),
])
def test_pvalues_rejects_bad_shapes(fitted_small, features, message):
    with pytest.raises(ValueError, match=message):
        fitted_small.pvalues(features)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_features_are_located(fitted_small, bad):
    features = np.zeros((5, 3, 4))
    features[2, 1, 3] = bad
    with pytest.raises(ValueError, match=r"NaN or infinite.*example 2, layer 1, dimension 3"):
        fitted_small.pvalues(features)
    with pytest.raises(ValueError, match="NaN or infinite"):
        MaSF().fit(np.concatenate([features] * 4))


def test_float16_overflow_is_reported():
    with pytest.raises(ValueError, match="after rounding to float16"):
        MaSF("reference", dtype="float16").fit(np.full((4, 1, 2), 1e6))


def test_too_few_calibration_examples():
    with pytest.raises(ValueError, match=r"5 examples.*\(0.333, 0.333, 0.333\).*\(2, 1, 2\).*at least 2"):
        MaSF().fit(np.zeros((5, 1, 3)))
    with pytest.raises(ValueError, match="at least 2"):
        MaSF("reference").fit(np.zeros((1, 1, 3)))
    with pytest.warns(UserWarning, match="no p-value can be below"):
        MaSF().fit(np.random.default_rng(0).standard_normal((30, 1, 3)))


@pytest.mark.parametrize("params, message", [
    ({"fold_fractions": (0.5, 0.5)}, "fold_fractions"),
    ({"fold_fractions": (0.6, 0.3, 0.3)}, "fold_fractions"),
    ({"fold_fractions": (1.0, 0.0, 0.0)}, "fold_fractions"),
    ({"dtype": "float64"}, "dtype"),
    ({"calibration": "in-sample"}, "calibration"),
    ({"chunk_size": 0}, "chunk_size"),
])
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        MaSF(**params).fit(np.zeros((30, 1, 2)))


@pytest.mark.parametrize("n_calibration", [30, 100, 150, 600])
def test_the_null_share_is_the_share_of_attainable_pvalues_below_alpha(n_calibration):
    """p-values are k / (N3 + 1); in-distribution examples get each with probability 1 / (N3 + 1)."""
    rng = np.random.default_rng(n_calibration)
    masf = MaSF(random_state=0).fit(rng.standard_normal((n_calibration, 2, 6)))
    n3 = len(masf.level3_reference_)
    assert masf.pvalue_floor_ == pytest.approx(1 / (n3 + 1))
    attainable = np.arange(1, n3 + 2) / (n3 + 1)
    for alpha in (0.01, 0.05, 0.1):
        assert masf.null_share(alpha) == pytest.approx((attainable < alpha).mean())
        assert masf.null_share(alpha) <= alpha
    # 100 calibration texts: a level-3 fold of 33, so p < 0.05 only at p = 1/34
    if n_calibration == 100:
        assert n3 == 33 and masf.null_share(0.05) == pytest.approx(1 / 34)
    # and it is what in-distribution examples get, over calibration sets (a Monte Carlo check of the size:
    # for one fixed calibration set the share varies around it, conformal p-values are marginally valid)
    shares = [np.mean(MaSF(random_state=r).fit(rng.standard_normal((n_calibration, 2, 6)))
                      .pvalues(rng.standard_normal((100, 2, 6))) < 0.05) for r in range(40)]
    standard_error = np.std(shares, ddof=1) / np.sqrt(len(shares))
    assert abs(np.mean(shares) - masf.null_share(0.05)) < 4 * standard_error + 1e-3


def test_the_reference_procedure_has_no_known_null_share():
    masf = MaSF(calibration="reference").fit(np.random.default_rng(0).standard_normal((50, 2, 4)))
    assert masf.pvalue_floor_ == 0.0 and np.isnan(masf.null_share(0.05))

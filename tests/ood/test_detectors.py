"""Conformal in-distribution detectors (docs/ood.md, "Detectors with power"): level, power, exact scores."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.covariance import LedoitWolf
from sklearn.exceptions import NotFittedError

from fmmlearn.ood import (DETECTORS, KNNDetector, MahalanobisDetector, MaSF, conformal_null_share, conformal_pvalues,
                          make_detector, power_curve, size_for_power)
from fmmlearn.ood._detectors import split_groups

RNG = np.random.default_rng


# -- conformal p-values --------------------------------------------------------------------------------


def test_conformal_pvalues_count_calibration_scores_at_least_as_large():
    calibration = np.sort(np.array([3.0, 1.0, 2.0, 2.0]))
    p = conformal_pvalues(calibration, np.array([0.0, 2.0, 2.5, 9.0]))
    # (1 + #{c >= s}) / (M + 1): 5/5, (1+3)/5 (ties count as at least as large), (1+1)/5, 1/5
    np.testing.assert_allclose(p, [1.0, 0.8, 0.4, 0.2])


@pytest.mark.parametrize("m, alpha", [(19, 0.05), (20, 0.05), (80, 0.05), (99, 0.01), (300, 0.1)])
def test_null_share_is_the_exact_rate_of_uniform_ranks(m, alpha):
    """Without ties a new in-distribution score is equally likely at each of the M + 1 ranks."""
    ranks = np.arange(1, m + 2) / (m + 1)                   # every p-value the test can give, equally likely
    assert conformal_null_share(m, alpha=alpha) == pytest.approx(np.mean(ranks < alpha))
    assert conformal_null_share(m, alpha=alpha) <= alpha


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_every_detector_holds_its_level_over_calibration_draws(name):
    """Marginal validity: averaged over calibration sets, in-distribution texts are flagged at most alpha."""
    rng = RNG(0)
    rates, shares = [], []
    for _ in range(40):
        detector = make_detector(name, random_state=int(rng.integers(1 << 30)))
        features = lambda n: rng.standard_normal((n, 3, 8)).astype(np.float32)  # noqa: E731
        detector.fit(features(200), calibration=features(60))
        rates.append(np.mean(detector.pvalues(features(400)) < 0.05))
        shares.append(detector.null_share(0.05))
    # 40 x 400 draws: the mean rate has a standard error of about 0.6 points around the null share
    assert np.mean(rates) <= np.mean(shares) + 0.02, name
    assert np.mean(rates) >= np.mean(shares) - 0.03, name


@pytest.mark.parametrize("name", ["mahalanobis", "mahalanobis-all", "knn", "masf"])
def test_detectors_flag_a_shift(name):
    rng = RNG(1)
    inliers = lambda n: rng.standard_normal((n, 3, 8)) + 2.0   # noqa: E731  (kNN reads directions)
    detector = make_detector(name).fit(inliers(600), calibration=inliers(200))
    shifted = inliers(300)
    shifted[:, :, :4] *= -1  # half the dimensions mirrored: another mean (Mahalanobis) and direction (kNN)
    assert np.mean(detector.pvalues(shifted) < 0.05) > 0.8, name
    assert np.mean(detector.pvalues(inliers(300)) < 0.05) < 0.12, name


# -- exact scores --------------------------------------------------------------------------------------


def test_mahalanobis_score_is_the_shrinkage_distance_of_each_layer():
    rng = RNG(2)
    reference, queries = rng.standard_normal((300, 2, 6)), rng.standard_normal((5, 2, 6)) * 2
    detector = MahalanobisDetector(layers="all").fit(reference, calibration=rng.standard_normal((50, 2, 6)))
    expected, medians = np.zeros(5), []
    for layer in range(2):
        estimate = LedoitWolf().fit(reference[:, layer])
        centred = queries[:, layer] - reference[:, layer].mean(axis=0)
        covariance = estimate.covariance_
        distance = np.einsum("nh,nh->n", centred, np.linalg.solve(covariance, centred.T).T)
        ref_centred = reference[:, layer] - reference[:, layer].mean(axis=0)
        median = np.median(np.einsum("nh,nh->n", ref_centred, np.linalg.solve(covariance, ref_centred.T).T))
        expected += distance / median
    np.testing.assert_allclose(detector.nonconformity(queries), expected, rtol=1e-8)


def test_knn_score_is_the_distance_to_the_kth_nearest_normalised_reference():
    rng = RNG(3)
    reference, queries = rng.standard_normal((50, 1, 4)), rng.standard_normal((7, 1, 4))
    detector = KNNDetector(n_neighbors=3).fit(reference, calibration=rng.standard_normal((20, 1, 4)))
    unit = lambda z: z / np.linalg.norm(z, axis=-1, keepdims=True)  # noqa: E731
    distances = np.linalg.norm(unit(queries[:, 0])[:, None, :] - unit(reference[:, 0])[None, :, :], axis=-1)
    kth = np.sort(distances, axis=1)[:, 2]
    reference_kth = np.sort(np.linalg.norm(unit(reference[:, 0])[:, None] - unit(reference[:, 0])[None], axis=-1),
                            axis=1)[:, 2]  # each reference against all (itself included), as fit scores them
    np.testing.assert_allclose(detector.nonconformity(queries), kth / np.median(reference_kth), rtol=1e-5)


def test_layers_select_the_last_one_index_or_all():
    rng = RNG(4)
    X = rng.standard_normal((100, 4, 5))
    assert MahalanobisDetector().fit(X).layer_indices_.tolist() == [3]
    assert MahalanobisDetector(layers=1).fit(X).layer_indices_.tolist() == [1]
    assert MahalanobisDetector(layers=-2).fit(X).layer_indices_.tolist() == [2]
    assert MahalanobisDetector(layers="all").fit(X).layer_indices_.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="layers=7 is out of range for features of 4 layer"):
        MahalanobisDetector(layers=7).fit(X)


# -- folds ---------------------------------------------------------------------------------------------


def test_without_calibration_the_copies_of_a_text_share_a_fold():
    groups = np.repeat(np.arange(30), 3)
    first, second = split_groups(groups, 0.5, 0)
    assert not set(groups[first]) & set(groups[second])
    assert len(set(groups[second])) == 15
    detector = MahalanobisDetector().fit(RNG(5).standard_normal((90, 1, 3)), groups=groups)
    assert detector.n_reference_ + detector.n_calibration_ == 90 and detector.n_calibration_ == 45


def test_masf_with_a_held_out_level3_fits_levels_1_and_2_on_the_features():
    rng = RNG(6)
    groups = np.repeat(np.arange(40), 2)
    masf = MaSF().fit(rng.standard_normal((80, 2, 5)), groups=groups, calibration=rng.standard_normal((30, 2, 5)))
    level1, level2, level3 = masf.fold_indices_
    assert level3.tolist() == list(range(80, 110))                 # the calibration rows, and only them
    assert not set(groups[level1]) & set(groups[level2])          # copies of a text in one fold
    assert sorted([*level1, *level2]) == list(range(80))
    assert masf.pvalue_floor_ == pytest.approx(1 / 31) and masf.null_share() == pytest.approx(1 / 31)
    with pytest.raises(ValueError, match="needs calibration='calibrated'"):
        MaSF("reference").fit(rng.standard_normal((20, 2, 5)), calibration=rng.standard_normal((10, 2, 5)))


# -- registry, errors, cloning -------------------------------------------------------------------------


def test_make_detector_by_name_or_instance():
    assert isinstance(make_detector("masf"), MaSF)
    assert make_detector("knn-mean").pooling == "mean"
    assert make_detector("mahalanobis-all").layers == "all"
    fitted = MahalanobisDetector().fit(RNG(7).standard_normal((40, 3)))
    fresh = make_detector(fitted)
    assert fresh is not fitted and not hasattr(fresh, "calibration_scores_")
    with pytest.raises(ValueError, match="detector must be one of"):
        make_detector("mahalanobis-cls")
    with pytest.raises(TypeError, match="detector must be a name"):
        make_detector(object())


@pytest.mark.parametrize("make, message", [
    (lambda: MahalanobisDetector(pooling="sum"), "pooling"),
    (lambda: KNNDetector(n_neighbors=0), "n_neighbors"),
    (lambda: MahalanobisDetector(calibration_share=1.0), "calibration_share"),
])
def test_bad_parameters_name_themselves(make, message):
    with pytest.raises(ValueError, match=message):
        make().fit(RNG(8).standard_normal((40, 3)))


def test_scoring_checks_shapes_and_values():
    detector = MahalanobisDetector().fit(RNG(9).standard_normal((40, 2, 3)))
    with pytest.raises(ValueError, match="2 layer.*MahalanobisDetector was fitted on 2 layer"):
        detector.pvalues(np.zeros((3, 2, 4)))
    bad = np.zeros((3, 2, 3))
    bad[1, 1, 2] = np.nan
    with pytest.raises(ValueError, match="example 1, layer 1, dimension 2"):
        detector.pvalues(bad)
    with pytest.raises(NotFittedError):
        KNNDetector().pvalues(bad)
    with pytest.raises(ValueError, match="n_neighbors=10 but only 4 reference"):
        KNNDetector().fit(np.zeros((4, 3)), calibration=np.zeros((4, 3)))
    with pytest.raises(ValueError, match="at least 2 reference and 2 calibration"):
        MahalanobisDetector().fit(np.zeros((5, 3)), calibration=np.zeros((1, 3)))


def test_fitted_detectors_are_deterministic_and_clone_unfitted():
    X = RNG(10).standard_normal((120, 2, 4))
    a, b = KNNDetector(layers="all").fit(X), KNNDetector(layers="all").fit(X)
    np.testing.assert_array_equal(a.calibration_scores_, b.calibration_scores_)
    assert not hasattr(clone(a), "reference_")


# -- power curves --------------------------------------------------------------------------------------


def test_power_grows_with_the_data_and_the_multiplier_is_read_off_it():
    rng = RNG(11)
    inliers = lambda n: rng.standard_normal((n, 1, 6))  # noqa: E731
    positive = inliers(400) + np.r_[0.5, np.zeros(5)]      # a subtle shift
    curve = power_curve(MahalanobisDetector(), inliers(800), inliers(400), positive, random_state=0)
    assert curve["fraction"].tolist() == [0.25, 0.5, 1.0]
    assert curve["n_calibration"].tolist() == [100, 200, 400]
    assert curve["power"].iloc[-1] >= curve["power"].iloc[0]
    assert (curve["null_share"] <= 0.05).all()


def test_size_for_power_extrapolates_on_a_log_scale():
    curve = pd.DataFrame({"fraction": [0.25, 0.5, 1.0], "power": [0.2, 0.5, 0.6], "null_share": [0.04] * 3})
    assert size_for_power(curve, 0.8) == pytest.approx(4.0)        # +0.1 per doubling from the last two points
    assert size_for_power(curve.assign(power=[0.5, 0.85, 0.9]), 0.8) == 0.5
    assert math.isinf(size_for_power(curve.assign(power=[0.5, 0.5, 0.4]), 0.8))
    # a point whose test could flag nothing (null share 0) does not count
    assert size_for_power(curve.assign(null_share=[0.0, 0.0, 0.04]), 0.8) == math.inf

"""ACU and RACU by hand (docs/faithfulness.md, "ACU and RACU")."""

import math

import pandas as pd
import pytest

from fmmlearn.faithfulness import FaithfulnessWarning, acu, racu


GRID = [0.0, 0.5, 1.0]
RAND = [1.0, 0.6, 0.5]


@pytest.mark.parametrize("curve, expected_acu, expected_racu", [
    ([1.0, 0.5, 0.5], 0.05, 0.05 / 0.175),  # MAX = 0.5 * (0.5 + 0.1) / 2 + 0.5 * 0.1 / 2 = 0.175
    ([1.0, 0.3, 0.5], 0.15, 0.15 / 0.175),
    ([1.0, 0.0, 0.5], 0.30, 0.30 / 0.175),  # below the fully masked level: RACU > 1
    ([1.0, 0.9, 0.5], -0.15, -0.15 / 0.175),  # worse than random: negative
    (RAND, 0.0, 0.0),
])
def test_acu_racu_by_hand(curve, expected_acu, expected_racu):
    assert acu(curve, RAND) == pytest.approx(expected_acu)
    assert racu(curve, RAND) == pytest.approx(expected_racu)


def test_racu_above_one_and_uneven_grid():
    # grid 0, 0.2, 1: MAX = 0.2 * (0.5 + 0.1) / 2 + 0.8 * 0.1 / 2 = 0.1; ACU = 0.2 * 0.6 / 2 + 0.8 * 0.6 / 2 = 0.3
    assert acu([1.0, 0.0, 0.5], RAND, ratios=[0, 0.2, 1]) == pytest.approx(0.3)
    assert racu([1.0, 0.0, 0.5], RAND, ratios=[0, 0.2, 1]) == pytest.approx(3.0)


def curve_frame(values, metric="accuracy", method="m"):
    return pd.DataFrame({"method": method, "ratio": GRID, "metric": metric, "value": values})


def test_loss_flips_acu_sign_but_not_racu():
    rand, curve = [0.2, 0.5, 0.7], [0.2, 0.65, 0.7]  # the explanation raises the loss faster
    # ACU = -(0.5 * (0 - 0.15) / 2 * 2) = 0.075; MAX = -(0.5 * (-0.5 - 0.2) / 2 + 0.5 * (-0.2) / 2) = 0.225
    assert acu(curve, rand, greater_is_better=False) == pytest.approx(0.075)
    assert racu(curve, rand, greater_is_better=False) == pytest.approx(1 / 3)
    assert racu(curve, rand, greater_is_better=True) == pytest.approx(1 / 3)
    frames = curve_frame(curve, "log_loss"), curve_frame(rand, "loss", "rand")
    with pytest.raises(ValueError, match="different metrics"):
        acu(*frames)
    frames = curve_frame(curve, "log_loss"), curve_frame(rand, "log_loss", "rand")
    assert acu(*frames) == pytest.approx(0.075) and racu(*frames) == pytest.approx(1 / 3)


def test_frames_and_arrays_agree_and_rows_may_be_unsorted():
    frame = curve_frame([1.0, 0.3, 0.5]).iloc[::-1]
    assert racu(frame, curve_frame(RAND, method="rand")) == pytest.approx(racu([1.0, 0.3, 0.5], RAND))


def test_flat_random_curve_gives_nan_with_warning():
    with pytest.warns(FaithfulnessWarning, match="flat"):
        assert math.isnan(racu([1.0, 0.5, 0.5], [0.5, 0.5, 0.5]))
    assert acu([1.0, 0.5, 0.5], [0.5, 0.5, 0.5]) == pytest.approx(-0.125)


@pytest.mark.parametrize("curve, rand, kwargs, message", [
    ([1, 0.5, 0.5], RAND, {"ratios": [0.1, 0.5, 1]}, "start at 0 and end at 1"),
    ([1, 0.5, 0.5], RAND, {"ratios": [0, 1]}, "has 3 values"),
    ([1, 0.5, 0.5], [1, 0.5], {}, "different ratio grids"),
    (curve_frame([1, 0.5, 0.5]).assign(method=["a", "b", "a"]), RAND, {}, "several curves"),
    (pd.DataFrame({"value": [1.0]}), RAND, {}, "lacks column"),
])
def test_acu_argument_errors(curve, rand, kwargs, message):
    with pytest.raises(ValueError, match=message):
        acu(curve, rand, **kwargs)

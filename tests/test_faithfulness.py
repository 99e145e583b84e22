"""Explainer masking (SPEC 5.1), curves, ACU/RACU (SPEC 5.2), reports and plots."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from fmmlearn.encoding import SEGMENT_A, SEGMENT_B, Batch
from fmmlearn.explanation import explain
from fmmlearn.utils._bootstrap import mean_ci
from fmmlearn.faithfulness import (
    CURVE_COLUMNS,
    FaithfulnessReport,
    FaithfulnessWarning,
    acu,
    check_ratios,
    faithfulness_curve,
    faithfulness_report,
    iter_batch_masking,
    iter_explainer_masking,
    racu,
    random_masking_curve,
)
from fmmlearn.masking import eligible_positions
from fmmlearn.plotting import plot_faithfulness

from helpers.data import make_sentiment
from helpers.faithfulness import WrappedClassifier, bag  # noqa: F401 (bag is a fixture)
from helpers.importance import PAIRS, make_batch, tiny_bert
from test_importance_parity import ToyDifferentiable

BOS, EOS, PAD, TOKEN, MASK = 0, 1, 2, 3, 4


# --------------------------------------------------------------------------- SPEC 9 toy vectors


def toy_batch(rows, segment_b=()):
    """Toy ids as a Batch; BOS/EOS/PAD are special, ``segment_b`` lists (row, position) of segment B."""
    ids = torch.tensor(rows)
    special = (ids == BOS) | (ids == EOS) | (ids == PAD)
    segments = torch.where(special, torch.tensor(-1), torch.tensor(SEGMENT_A))
    for row, pos in segment_b:
        segments[row, pos] = SEGMENT_B
    return Batch(ids, (ids != PAD).long(), special, segments, None, torch.arange(len(rows)))


def masked_at(batch, target, ratios, method="grad-l2", **kwargs):
    """``{ratio: ids as lists}`` of the toy differentiable model's masking loop."""
    steps = iter_batch_masking(ToyDifferentiable(), batch, torch.tensor(target), method=method, ratios=ratios,
                               mask_token_id=MASK, **kwargs)
    return {r: ids.tolist() for r, ids in steps}


X1 = [BOS, TOKEN, TOKEN, EOS, PAD]
X2 = [BOS, TOKEN, EOS, PAD, PAD]


def test_toy_half_masking_from_clean():
    steps = masked_at(toy_batch([X1, X2]), [0, 1], [0.0, 0.5])
    assert steps[0.0] == [X1, X2]
    # tie between the two tokens broken towards the earlier one; floor(0.5 * 1) = 0 for x2
    assert steps[0.5] == [[BOS, MASK, TOKEN, EOS, PAD], X2]


def test_toy_pre_masked_input_is_unchanged_at_half():
    pre = [BOS, TOKEN, MASK, EOS, PAD]
    assert masked_at(toy_batch([pre]), [0], [0.0, 0.5])[0.5] == [pre]  # the existing MASK ranks first


def test_toy_full_masking_hits_every_segment_a_token():
    assert masked_at(toy_batch([X1, X2]), [0, 1], [0.0, 1.0])[1.0] == [[BOS, MASK, MASK, EOS, PAD],
                                                                       [BOS, MASK, EOS, PAD, PAD]]


def test_toy_paired_input_masks_segment_a_only():
    batch = toy_batch([[BOS, TOKEN, TOKEN, BOS, TOKEN, EOS, PAD]], segment_b=[(0, 4)])
    steps = masked_at(batch, [0], [0.0, 0.5, 1.0])
    assert steps[0.5] == [[BOS, MASK, TOKEN, BOS, TOKEN, EOS, PAD]]
    assert steps[1.0] == [[BOS, MASK, MASK, BOS, TOKEN, EOS, PAD]]
    assert masked_at(batch, [0], [0.0, 1.0], segment="all")[1.0] == [[BOS, MASK, MASK, BOS, MASK, EOS, PAD]]


def test_toy_supplied_importance_is_used_non_recursively():
    importance = torch.tensor([[10.0, 2.0, 5.0, 8.0, -math.inf]])
    steps = masked_at(toy_batch([X1]), [0], [0.0, 0.5], importance=importance)
    assert steps[0.5] == [[BOS, TOKEN, MASK, EOS, PAD]]


class Counting(ToyDifferentiable):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, **kwargs):
        self.calls += 1
        return super().forward(**kwargs)


def test_ratio_one_and_zero_never_call_the_measure():
    model = Counting()
    list(iter_batch_masking(model, toy_batch([X1]), torch.tensor([0]), method="grad-l2", ratios=[0.0, 1.0],
                            mask_token_id=MASK))
    assert model.calls == 0


def test_recursive_measure_skips_rows_without_new_masks():
    # x2 has one token: floor(r * 1) = 0 below r = 1, so only x1 is explained at the two middle steps.
    model = Counting()
    batch = toy_batch([X1, X2])
    steps = list(iter_batch_masking(model, batch, torch.tensor([0, 1]), method="grad-l2", ratios=[0, 0.2, 0.5, 1.0],
                                    mask_token_id=MASK))
    assert model.calls == 1  # r=0.2 masks nothing (floor(0.4) = 0), r=0.5 explains x1 alone
    assert steps[2][1].tolist() == [[BOS, MASK, TOKEN, EOS, PAD], X2]


def test_non_recursive_measure_is_computed_once():
    model = Counting()
    list(iter_batch_masking(model, toy_batch([X1, X2]), torch.tensor([0, 1]), method="grad-l2", ratios=None,
                            mask_token_id=MASK, recursive=False))
    assert model.calls == 1


# --------------------------------------------------------------------------- invariants on a real BERT


@pytest.fixture(scope="module")
def bert(tiny_model_dir):
    return tiny_bert(tiny_model_dir)


@pytest.mark.parametrize("method", ["loo-sign", "grad-l2", "rand"])
def test_masks_grow_and_only_segment_a_is_touched(bert, method):
    model, tokenizer = bert
    batch = make_batch(tokenizer, PAIRS, is_pair=True)
    eligible = eligible_positions(batch, segment="first")
    previous = batch.input_ids
    steps = list(iter_batch_masking(model, batch, torch.tensor([0, 1]), method=method, ratios=None,
                                    mask_token_id=tokenizer.mask_token_id, generator=torch.Generator().manual_seed(0)))
    assert [r for r, _ in steps] == pytest.approx([k / 10 for k in range(11)])
    n = eligible.sum(dim=1)
    for ratio, ids in steps:
        was_masked = previous == tokenizer.mask_token_id
        assert (ids[was_masked] == tokenizer.mask_token_id).all()  # masks only grow
        assert torch.equal(ids[~eligible], batch.input_ids[~eligible])  # segment B, specials, padding
        counts = ((ids == tokenizer.mask_token_id) & eligible).sum(dim=1)
        assert counts.tolist() == [math.floor(round(ratio * int(k), 6)) for k in n]
        previous = ids
    assert ((steps[-1][1] == tokenizer.mask_token_id) == eligible).all()  # r = 1: every eligible token


@pytest.fixture(scope="module")
def bert_clf(bert):
    model, tokenizer = bert
    return WrappedClassifier(tokenizer, model)


def test_encoding_level_loop_restores_input_order(bert_clf):
    X, y = make_sentiment(20, seed=3, max_words=14)
    encoding = bert_clf.encode(X)
    target = np.array([list(bert_clf.classes_).index(v) for v in y])
    steps = dict(iter_explainer_masking(bert_clf, encoding, target, method="inp-grad-sign", ratios=[0, 0.5, 1.0],
                                        batch_size=3))
    mask = bert_clf.tokenizer_.mask_token_id
    for i, clean in enumerate(encoding.input_ids):
        assert np.array_equal(steps[0.0][i], clean)
        segment_a = (encoding.segment_ids[i] == SEGMENT_A) & ~encoding.special_tokens_mask[i]
        assert (steps[1.0][i] == mask).tolist() == segment_a.tolist()
        assert (steps[0.5][i] == mask).sum() == segment_a.sum() // 2


# --------------------------------------------------------------------------- curves


@pytest.fixture(scope="module")
def bag_data():
    return make_sentiment(120, seed=1)


@pytest.fixture(scope="module")
def bag_rand(bag, bag_data):
    return faithfulness_curve(bag, *bag_data, method="rand")


def test_curve_frame_format(bag, bag_data, bag_rand):
    assert list(bag_rand.columns) == list(CURVE_COLUMNS)
    assert bag_rand["ratio"].tolist() == pytest.approx([k / 10 for k in range(11)])
    assert (bag_rand["method"] == "rand").all() and (bag_rand["n_examples"] == 120).all()
    assert bag_rand["value"].iloc[0] == 1.0  # the clean input is classified perfectly
    assert bag_rand["mean_masked_fraction"].iloc[[0, -1]].tolist() == [0.0, 1.0]
    assert bag_rand["mean_masked_fraction"].is_monotonic_increasing


def test_true_ordering_reaches_the_oracle_and_rand_averages_zero(bag, bag_data, bag_rand):
    X, y = bag_data
    oracle = faithfulness_curve(bag, X, y, method="oracle", importances=bag.true_importances(X, y))
    best = racu(oracle, bag_rand)
    assert best > 1  # a signed measure drives accuracy below the fully-masked level
    for method in ("loo-sign", "inp-grad-sign"):  # both equal the true contributions on this model
        assert racu(faithfulness_curve(bag, X, y, method=method), bag_rand) == pytest.approx(best)
    reverse = faithfulness_curve(bag, X, y, method="reverse", importances=[-s for s in bag.true_importances(X, y)])
    assert racu(reverse, bag_rand) < 0
    rand = [racu(faithfulness_curve(bag, X, y, method="rand", random_state=s), bag_rand) for s in range(1, 9)]
    assert abs(np.mean(rand)) < 0.12 and max(rand) < best / 3


def test_loss_curve_rises_and_keeps_the_racu_sign(bag, bag_data, bag_rand):
    X, y = bag_data
    loo = faithfulness_curve(bag, X, y, method="loo-sign", metric="loss")
    rand = faithfulness_curve(bag, X, y, method="rand", metric="log_loss")
    assert loo["metric"].iloc[0] == "log_loss" and loo["value"].iloc[5] > loo["value"].iloc[0]
    assert acu(loo, rand) > 0 and racu(loo, rand) > 0  # inferred from the metric column
    assert acu(loo, rand) == pytest.approx(-acu(loo, rand, greater_is_better=True))


def test_precomputed_formats_equal_the_non_recursive_path(bert_clf):
    X, y = make_sentiment(10, seed=5)
    ratios = [0.0, 0.3, 0.6, 1.0]
    internal = faithfulness_curve(bert_clf, X, y, method="grad-l2", ratios=ratios, recursive=False)
    frame = explain(bert_clf, X, y, method="grad-l2")
    encoding = bert_clf.encode(X)
    as_list = [np.zeros(n) for n in encoding.lengths]
    for row in frame.itertuples():
        as_list[row.example][row.position] = row.importance
    as_array = np.full((len(X), encoding.lengths.max() + 2), np.nan)
    for i, scores in enumerate(as_list):
        as_array[i, : len(scores)] = scores
    for importances in (frame, as_list, as_array):
        curve = faithfulness_curve(bert_clf, X, y, method="grad-l2", ratios=ratios, importances=importances)
        pd.testing.assert_frame_equal(curve, internal)


def test_precomputed_frame_must_cover_maskable_tokens(bert_clf):
    X, y = make_sentiment(4, seed=5)
    frame = explain(bert_clf, X, y, method="grad-l2")
    with pytest.raises(ValueError, match="no score"):
        faithfulness_curve(bert_clf, X, y, importances=frame.iloc[1:])
    with pytest.raises(ValueError, match="recursive=True"):
        faithfulness_curve(bert_clf, X, y, importances=frame, recursive=True)
    with pytest.raises(ValueError, match=r"importances\[0\] has"):
        faithfulness_curve(bert_clf, X, y, importances=[np.zeros(2)] * 4)


def test_random_masking_curve_masks_both_segments_at_exact_counts(bag, bag_data):
    curve = random_masking_curve(bag, *bag_data)
    assert (curve["method"] == "random-masking").all()
    lengths = bag.encode(bag_data[0]).lengths - 2  # [CLS] and [SEP]
    expected = [np.mean(np.floor(np.round(r * lengths, 6)) / lengths) for r in curve["ratio"]]
    assert curve["mean_masked_fraction"].tolist() == pytest.approx(expected)
    assert curve["value"].iloc[0] == 1.0 and curve["value"].iloc[-1] == 0.5


@pytest.mark.parametrize("kwargs, message", [
    ({"ratios": [0, 0.5, 0.3, 1]}, "sorted"),
    ({"ratios": [0, 1.5]}, r"\[0, 1\]"),
    ({"ratios": []}, "non-empty"),
    ({"method": "gradient"}, "method must be one of"),
    ({"segment": "second"}, "segment"),
    ({"recursive": "yes"}, "recursive"),
    ({"n_stepz": 3}, "does not take"),
])
def test_curve_argument_errors(bag, bag_data, kwargs, message):
    with pytest.raises(ValueError, match=message):
        faithfulness_curve(bag, *bag_data, **kwargs)


def test_y_must_match_x(bag, bag_data):
    X, y = bag_data
    with pytest.raises(ValueError, match="y has"):
        faithfulness_curve(bag, X, y[:-1])
    with pytest.raises(ValueError, match="y is required"):
        faithfulness_curve(bag, X, None)


# --------------------------------------------------------------------------- ACU and RACU by hand


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


def test_check_ratios_defaults_and_endpoints():
    assert check_ratios().tolist() == pytest.approx([k / 10 for k in range(11)])
    assert check_ratios([0.2, 0.4]).tolist() == [0.2, 0.4]
    with pytest.raises(ValueError, match="my_ratios"):
        check_ratios([0.2, 0.2], name="my_ratios")


# --------------------------------------------------------------------------- report and plot


def test_mean_ci_collapses_for_equal_values_and_brackets_the_mean():
    assert mean_ci([0.4, 0.4, 0.4], 0.95) == (0.4, 0.4, 0.4)
    assert mean_ci([0.7], 0.95) == (0.7, 0.7, 0.7)
    mean, low, high = mean_ci([0.1, 0.3, 0.2, 0.5, 0.4], 0.95)
    assert mean == pytest.approx(0.3) and low < mean < high


def test_report_and_plot(bag, bag_data, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    report = faithfulness_report(bag, *bag_data, methods=["loo-sign", "rand"], n_repeats=3, random_state=0)
    assert isinstance(report, FaithfulnessReport)
    curves, summary = report
    assert summary["method"].tolist() == ["loo-sign", "rand"]
    loo, rand = summary.iloc[0], summary.iloc[1]
    assert loo["racu"] > 1 and loo["racu_low"] <= loo["racu"] <= loo["racu_high"]
    assert abs(rand["racu"]) < 0.3 and loo["signed"] and not rand["signed"] and loo["n_repeats"] == 3
    counts = curves.groupby(["role", "method"]).size().to_dict()
    assert counts == {("baseline", "rand"): 33, ("method", "loo-sign"): 11, ("method", "rand"): 33}
    ax = report.plot(path=tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 0
    styles = {line.get_label(): line.get_linestyle() for line in ax.lines}
    assert styles == {"rand (baseline)": "--", "loo-sign": "-", "rand": "-"}
    with pytest.raises(ValueError, match="mixes metrics"):
        plot_faithfulness(pd.concat([curves, curves.assign(metric="loss")]))

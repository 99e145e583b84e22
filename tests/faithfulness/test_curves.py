"""Faithfulness curves (docs/faithfulness.md, "The procedure" and "Random masking"): the frame, the oracle and
rand orderings, precomputed importances, argument errors."""

import numpy as np
import pandas as pd
import pytest

from fmmlearn.explanation import explain
from fmmlearn.faithfulness import CURVE_COLUMNS, acu, faithfulness_curve, racu, random_masking_curve

from helpers.data import make_sentiment
from helpers.faithfulness import WrappedClassifier, bag  # noqa: F401 (bag is a fixture)
from helpers.importance import tiny_bert


@pytest.fixture(scope="module")
def bert(tiny_model_dir):
    return tiny_bert(tiny_model_dir)


@pytest.fixture(scope="module")
def bert_clf(bert):
    model, tokenizer = bert
    return WrappedClassifier(tokenizer, model)


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

"""Faithfulness curves: one explanation for every ratio, every ratio evaluated in one batched pass.

The reference is the naive loop: the masked ids of each ratio evaluated on their own with
``clf.encoded_logits``, scored, ratio by ratio.
"""

import numpy as np
import pytest
import torch
from helpers.data import make_sentiment
from helpers.faithfulness import BagClassifier, word_weights

from fmmlearn.explanation import _masking as _loop
from fmmlearn.faithfulness import faithfulness_curve, iter_explainer_masking
from fmmlearn.faithfulness._curves import step_logits
from fmmlearn.metrics import get_metric


class CountingBag(BagClassifier):
    """A bag classifier that counts the rows ``encoded_logits`` evaluates."""

    rows = 0

    def encoded_logits(self, encoding, input_ids=None):
        self.rows += len(encoding)
        return super().encoded_logits(encoding, input_ids=input_ids)


@pytest.fixture(scope="module")
def data():
    return make_sentiment(24, seed=3, min_words=1, max_words=7)  # short texts: ratios often mask nothing new


def naive_curve(clf, X, y, method, metric, **kwargs):
    """(values, masked fractions) of the curve, one evaluation per ratio."""
    encoding = clf.encode(X)
    target_idx = np.searchsorted(clf.classes_, y)
    metric = get_metric(metric)
    values, fractions = [], []
    for ratio, ids in iter_explainer_masking(clf, encoding, target_idx, method=method, **kwargs):
        logits = clf.encoded_logits(encoding, input_ids=ids)
        if metric.needs_proba:
            proba = torch.softmax(torch.from_numpy(logits).double(), dim=1).numpy()
            values.append(metric(y, proba, labels=clf.classes_))
        else:
            values.append(metric(y, clf.classes_[logits.argmax(axis=1)], labels=clf.classes_))
        shares = []
        for i, n in enumerate(encoding.lengths):
            eligible = ~encoding.special_tokens_mask[i]
            if eligible.any():
                shares.append((eligible & (ids[i] == clf.tokenizer_.mask_token_id)).sum() / eligible.sum())
        fractions.append(np.mean(shares))
    return np.array(values), np.array(fractions)


@pytest.mark.parametrize("method, recursive", [("inp-grad-sign", False), ("loo-sign", True), ("beam-sign-2", None),
                                               ("rand", True)])
@pytest.mark.parametrize("metric", ["accuracy", "loss"])
def test_batched_curve_equals_the_naive_loop(bundled_tokenizer, data, method, recursive, metric):
    clf = BagClassifier(bundled_tokenizer, word_weights(bundled_tokenizer))
    X, y = data
    curve = faithfulness_curve(clf, X, y, method=method, recursive=recursive, metric=metric)
    values, fractions = naive_curve(clf, X, y, method, metric, recursive=recursive)
    np.testing.assert_allclose(curve["value"].to_numpy(), values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(curve["mean_masked_fraction"].to_numpy(), fractions, rtol=0, atol=1e-12)


def test_batched_curve_equals_the_naive_loop_on_a_bert(fitted_tiny, data):
    X, y = data
    curve = faithfulness_curve(fitted_tiny, X, y, method="loo-sign", metric="loss")
    values, fractions = naive_curve(fitted_tiny, X, y, "loo-sign", "loss")
    np.testing.assert_allclose(curve["value"].to_numpy(), values, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(curve["mean_masked_fraction"].to_numpy(), fractions)


def test_non_recursive_curve_explains_once_and_evaluates_each_distinct_input_once(bundled_tokenizer, data,
                                                                                  monkeypatch):
    calls = []
    compute = _loop.compute_importance
    monkeypatch.setattr(_loop, "compute_importance", lambda *a, **k: calls.append(1) or compute(*a, **k))
    clf = CountingBag(bundled_tokenizer, word_weights(bundled_tokenizer))
    X, y = data
    faithfulness_curve(clf, X, y, method="inp-grad-sign", recursive=False)
    n_batches = -(-len(X) // clf.batch_size)  # gradient measures run clf.batch_size examples at a time
    assert len(calls) == n_batches  # one explanation per batch, reused for all 11 ratios

    encoding = clf.encode(X)
    steps = list(iter_explainer_masking(clf, encoding, np.searchsorted(clf.classes_, y), method="inp-grad-sign",
                                        recursive=False))
    distinct = {(i, ids[i].tobytes()) for _, ids in steps for i in range(len(X))}
    clf.rows = 0
    logits = step_logits(clf, encoding, [ids for _, ids in steps])
    assert clf.rows == len(distinct) < len(steps) * len(X)  # one pass, shared inputs evaluated once
    for (_, ids), got in zip(steps, logits):
        np.testing.assert_array_equal(got, BagClassifier.encoded_logits(clf, encoding, input_ids=ids))


def test_recursive_curve_re_explains_only_rows_that_mask_something_new(bundled_tokenizer, data, monkeypatch):
    explained = []
    compute = _loop.compute_importance

    def counting(model, batch, *args, **kwargs):
        explained.append(len(batch))
        return compute(model, batch, *args, **kwargs)

    monkeypatch.setattr(_loop, "compute_importance", counting)
    clf = BagClassifier(bundled_tokenizer, word_weights(bundled_tokenizer))
    X, y = data
    encoding = clf.encode(X)
    list(iter_explainer_masking(clf, encoding, np.searchsorted(clf.classes_, y), method="loo-sign"))
    n = np.array([(~m).sum() for m in encoding.special_tokens_mask])
    # a row is explained at ratio r only when floor(r n) exceeds what the previous ratio masked
    grid = np.round(np.arange(11) / 10, 6)
    expected = sum(int((np.floor(np.round(r * n, 6)) > np.floor(np.round(p * n, 6))).sum())
                   for p, r in zip(grid[:-2], grid[1:-1]))
    assert sum(explained) == expected < 9 * len(X)

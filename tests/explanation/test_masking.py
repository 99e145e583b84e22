"""Explainer masking (docs/faithfulness.md, "The procedure"): the reference code's toy vectors, and the invariants
on a real BERT."""

import math

import numpy as np
import pytest
import torch

from fmmlearn.encoding import SEGMENT_A, SEGMENT_B, Batch
from fmmlearn.faithfulness import iter_batch_masking, iter_explainer_masking
from fmmlearn.masking import eligible_positions

from helpers.data import make_sentiment
from helpers.faithfulness import WrappedClassifier
from helpers.importance import PAIRS, ToyDifferentiable, make_batch, tiny_bert

BOS, EOS, PAD, TOKEN, MASK = 0, 1, 2, 3, 4


# --------------------------------------------------------------------------- toy vectors


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

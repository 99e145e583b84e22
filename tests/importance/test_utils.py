"""Rows packed into forward passes by exact length, and LOO/beam exactness under every precision."""

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fmmlearn import modeling
from fmmlearn.explanation import explain_encoded
from fmmlearn.importance._utils import plan_chunks
from fmmlearn.modeling import clear_probe_cache, measure_forward_rates

from helpers.importance import TEXTS, make_batch, scores_of, tiny_bert


@pytest.fixture(scope="module")
def bert(tiny_model_dir):
    return tiny_bert(tiny_model_dir)


# --------------------------------------------------------------------------- the plan


@settings(max_examples=200, deadline=None)
@given(widths=st.lists(st.integers(1, 12), max_size=60), capacity=st.integers(1, 9))
def test_plan_chunks_covers_every_row_once_widest_first_within_capacity(widths, capacity):
    widths = np.array(widths, dtype=np.int64)
    chunks = plan_chunks(widths, lambda width: capacity)
    rows = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)
    assert sorted(rows.tolist()) == list(range(len(widths)))
    assert all(1 <= len(c) <= capacity for c in chunks)
    heads = [widths[c].max() for c in chunks]
    assert heads == sorted(heads, reverse=True)
    for width in np.unique(widths):
        # padding touches a width at most twice: its remainder heads one padded pass, and it tops up
        # one remainder of a wider width; every other pass holding it holds it alone
        padded = [c for c in chunks if width in widths[c] and len(set(widths[c])) > 1]
        assert len(padded) <= 2
        assert sum(int(widths[c].max() == width) for c in padded) <= 1
        exact = [c for c in chunks if set(widths[c]) == {width}]
        assert sum(len(c) < capacity for c in exact) <= 1  # at most one pass is a remainder


def test_plan_chunks_merges_small_remainders_and_keeps_half_full_ones():
    widths = np.array([9, 5, 5, 5, 4, 4, 3, 3, 3, 3, 3, 3, 2])
    chunks = [widths[c].tolist() for c in plan_chunks(widths, lambda width: 4)]
    # 9 alone is under half a pass: topped up with the 5s; [4, 4] is half a pass: its own; ...
    assert chunks == [[9, 5, 5, 5], [4, 4], [3, 3, 3, 3], [3, 3], [2]]


def test_plan_chunks_capacity_may_depend_on_width():
    widths = np.array([8] * 5 + [2] * 9)
    chunks = plan_chunks(widths, lambda width: 16 // width)  # a fixed token budget
    assert [len(c) for c in chunks] == [2, 2, 1, 8, 1]
    assert all(len(c) * widths[c].max() <= 16 for c in chunks)


# --------------------------------------------------------------------------- packed LOO


class RecordMasks(torch.nn.Module):
    """The tiny BERT, recording the attention mask of every forward pass."""

    def __init__(self, model):
        super().__init__()
        self.model, self.masks = model, []

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def forward(self, **kwargs):
        self.masks.append(kwargs["attention_mask"].clone())
        return self.model(**kwargs)


def test_packed_loo_equals_loo_one_row_at_a_time(bert):
    model, tokenizer = bert
    batch = make_batch(tokenizer, TEXTS)
    target = torch.tensor([1, 0, 1, 0])
    packed = scores_of(model, tokenizer, batch, "loo-sign", target)  # default: probed size, packed by length
    single = scores_of(model, tokenizer, batch, "loo-sign", target, internal_batch_size=1)  # no packing at all
    torch.testing.assert_close(packed, single, rtol=0, atol=1e-6)
    for row in range(len(batch)):
        assert torch.equal(torch.argsort(packed[row], stable=True), torch.argsort(single[row], stable=True))


def test_loo_packs_rows_of_equal_length_across_examples_without_padding(bert):
    model, tokenizer = bert
    texts = ["the movie was great", "the plot was awful", "it was very sad", "fine"]
    batch = make_batch(tokenizer, texts)
    lengths = batch.attention_mask.sum(dim=1).tolist()
    assert lengths[:3] == [6, 6, 6] and lengths[3] == 3  # three examples of one length, one short
    recorder = RecordMasks(model)
    scores = scores_of(recorder, tokenizer, batch, "loo-sign", internal_batch_size=8)
    # 3 x (4 tokens + 1 clean row) = 15 rows of width 6 -> 2 passes; the short example's 2 rows -> 1 pass
    assert [tuple(m.shape) for m in recorder.masks] == [(8, 6), (7, 6), (2, 3)]
    assert all(bool(m.all()) for m in recorder.masks)  # no padding inside any pass
    torch.testing.assert_close(scores, scores_of(model, tokenizer, batch, "loo-sign", internal_batch_size=1),
                               rtol=0, atol=1e-6)


def test_packed_integrated_gradients_equal_one_step_at_a_time(bert):
    model, tokenizer = bert
    batch = make_batch(tokenizer, TEXTS)
    params = {"n_steps": 5, "pad_token_id": tokenizer.pad_token_id}
    packed = scores_of(model, tokenizer, batch, "int-grad-sign", **params)
    single = scores_of(model, tokenizer, batch, "int-grad-sign", internal_batch_size=1, **params)
    torch.testing.assert_close(packed, single, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- LOO / beam under every precision


@pytest.fixture
def fast_bf16(monkeypatch, fitted_tiny):
    """This CPU 'runs bf16 natively' and the probe 'measured' it 4x faster (cached for the tiny model)."""
    monkeypatch.setattr(modeling._devices, "reduced_dtype", lambda device: torch.bfloat16)
    clear_probe_cache()
    clock = {"now": 0.0}

    def bill(module, args, kwargs, output):
        cost = 1e-6 if not torch.is_autocast_enabled("cpu") else 0.25e-6
        clock["now"] += cost * kwargs["input_ids"].numel()

    hook = fitted_tiny.model_.register_forward_hook(bill, with_kwargs=True)
    try:
        measure_forward_rates(fitted_tiny.model_, fitted_tiny.device_, timer=lambda: clock["now"])
    finally:
        hook.remove()
    yield
    clear_probe_cache()


@pytest.mark.parametrize("method", ["loo-sign", "beam-sign-2"])
def test_loo_and_beam_do_not_depend_on_precision(fitted_tiny, fast_bf16, method):
    encoding = fitted_tiny.encode(["the movie was great", "a really awful and boring plot", "fine", "sad story"])
    targets = np.array([1, 0, 1, 0])
    exact = explain_encoded(fitted_tiny, encoding, targets, method=method)  # the fixture classifier is fp32
    for precision in ("auto", "bf16"):
        clf = copy.copy(fitted_tiny)
        clf.precision = precision
        assert clf.inference_dtype_ is torch.bfloat16  # predictions would use bf16 ...
        for per_call in (None, "auto"):  # ... but LOO and beam stay fp32: identical scores and rankings
            scores = explain_encoded(clf, encoding, targets, method=method, precision=per_call)
            for a, b in zip(scores, exact):
                np.testing.assert_array_equal(a, b)


def test_an_explicit_bf16_request_is_honoured_for_loo(fitted_tiny):
    encoding = fitted_tiny.encode(["the movie was great", "a really awful and boring plot"])
    seen = []
    hook = fitted_tiny.model_.register_forward_pre_hook(
        lambda module, args: seen.append(torch.is_autocast_enabled("cpu")))
    try:
        explain_encoded(fitted_tiny, encoding, np.array([1, 0]), method="loo-sign", precision="bf16")
    finally:
        hook.remove()
    assert seen and all(seen)

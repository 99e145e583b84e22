"""Leave-one-out, beam search, rand and batching on the tiny BERT: numerical truths."""

import itertools

import pytest
import torch

from fmmlearn.importance import Problem
from fmmlearn.importance.beam import beam_search_orders
from fmmlearn.masking import eligible_positions

from helpers.importance import PAIRS, TEXTS, make_batch, scores_of, target_logit, tiny_bert

MEASURES = ["grad-l2", "grad-l1", "inp-grad-sign", "inp-grad-abs", "int-grad-sign", "int-grad-abs", "loo-sign",
            "loo-abs", "beam-sign-2"]


@pytest.fixture(scope="module")
def bert(tiny_model_dir):
    return tiny_bert(tiny_model_dir)


@pytest.mark.parametrize("texts, is_pair, segment", [(TEXTS, False, "first"), (PAIRS, True, "first"),
                                                     (PAIRS, True, "all")])
def test_loo_equals_direct_re_evaluation(bert, texts, is_pair, segment):
    model, tokenizer = bert
    batch = make_batch(tokenizer, texts, is_pair=is_pair)
    target = torch.zeros(len(batch), dtype=torch.long)
    scores = scores_of(model, tokenizer, batch, "loo-sign", target, segment=segment, internal_batch_size=5)
    clean = target_logit(model, batch, target)
    eligible = eligible_positions(batch, segment=segment)
    expected = torch.zeros_like(scores)
    for example, position in eligible.nonzero().tolist():
        ids = batch.input_ids.clone()
        ids[example, position] = tokenizer.mask_token_id
        expected[example, position] = clean[example] - target_logit(model, batch, target, input_ids=ids)[example]
    torch.testing.assert_close(scores, expected, rtol=0, atol=1e-5)
    assert (expected != 0).sum() == eligible.sum()


def brute_force_best_order(model, single, target, positions, mask_id):
    """The masking order with the largest area S for a one-example batch, each subset evaluated once."""
    logit = {}
    for size in range(len(positions) + 1):
        for subset in itertools.combinations(positions, size):
            ids = single.input_ids.clone()
            ids[0, list(subset)] = mask_id
            logit[frozenset(subset)] = target_logit(model, single, target, input_ids=ids).item()
    area = lambda order: sum(logit[frozenset()] - logit[frozenset(order[:j])] for j in range(1, len(order) + 1))  # noqa: E731
    best = max(itertools.permutations(positions), key=area)
    return best, area(best)


def test_wide_beam_equals_brute_force_search(bert):
    model, tokenizer = bert
    texts = ["a great plot", "it was very sad", "awful movie and story", "this really was fine"]
    batch = make_batch(tokenizer, texts)
    target = torch.tensor([1, 0, 1, 0])
    eligible = eligible_positions(batch)
    assert eligible.sum(dim=1).max() <= 6
    problem = Problem(model, batch, target, eligible, tokenizer.mask_token_id, None, None, 64)
    # Width 20 = C(6, 3) keeps every mask set: beam search is then exact dynamic programming.
    found = beam_search_orders(problem, beam_size=20)
    scores = scores_of(model, tokenizer, batch, "beam-sign-20", target)
    for example, (order, area) in enumerate(found):
        positions = eligible[example].nonzero()[:, 0].tolist()
        single = make_batch(tokenizer, texts, [example])
        best, best_area = brute_force_best_order(model, single, target[example : example + 1], positions,
                                                 tokenizer.mask_token_id)
        assert area == pytest.approx(best_area, abs=1e-5)
        assert tuple(order) == best
        n = len(order)
        assert scores[example, list(order)].tolist() == list(range(n, 0, -1))


def test_narrow_beam_is_never_better_than_brute_force(bert):
    model, tokenizer = bert
    batch = make_batch(tokenizer, ["it was very sad", "awful movie and story"])
    target = torch.tensor([0, 1])
    problem = Problem(model, batch, target, eligible_positions(batch), tokenizer.mask_token_id, None, None, 64)
    wide = beam_search_orders(problem, beam_size=20)
    for width in (1, 2, 3):
        for (_, area), (_, best) in zip(beam_search_orders(problem, beam_size=width), wide):
            assert area <= best + 1e-6


@pytest.mark.parametrize("method", MEASURES)
def test_batched_equals_one_example_at_a_time(bert, method):
    model, tokenizer = bert
    params = {"n_steps": 3} if method.startswith("int-grad") else {}
    target = torch.tensor([1, 0, 1, 0])
    together = scores_of(model, tokenizer, make_batch(tokenizer, TEXTS), method, target, internal_batch_size=7,
                         **params)
    for i in range(len(TEXTS)):
        alone = scores_of(model, tokenizer, make_batch(tokenizer, TEXTS, [i]), method, target[i : i + 1], **params)
        width = alone.shape[1]
        torch.testing.assert_close(together[i, :width], alone[0], rtol=1e-5, atol=1e-5)
        assert (together[i, width:] == 0).all()


def test_rand_is_reproducible_and_uniform(bert):
    model, tokenizer = bert
    batch = make_batch(tokenizer, TEXTS)
    draw = lambda seed: scores_of(model, tokenizer, batch, "rand", generator=torch.Generator().manual_seed(seed))  # noqa: E731
    first, again, other = draw(0), draw(0), draw(1)
    eligible = eligible_positions(batch)
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert (first[~eligible] == 0).all() and ((first[eligible] >= 0) & (first[eligible] < 1)).all()


class OutOfMemoryAbove(torch.nn.Module):
    """Wraps a model and raises an out-of-memory error for more than ``limit`` rows."""

    def __init__(self, model, limit):
        super().__init__()
        self.model, self.limit, self.calls = model, limit, 0

    def get_input_embeddings(self):
        return self.model.get_input_embeddings()

    def forward(self, **kwargs):
        self.calls += 1
        rows = next(v for k, v in kwargs.items() if k in ("input_ids", "inputs_embeds")).shape[0]
        if rows > self.limit:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return self.model(**kwargs)


@pytest.mark.parametrize("method", ["loo-sign", "int-grad-sign"])
def test_out_of_memory_halves_the_internal_batch(bert, method):
    model, tokenizer = bert
    batch = make_batch(tokenizer, TEXTS)
    target = torch.tensor([1, 0, 1, 0])
    params = {"n_steps": 4, "pad_token_id": tokenizer.pad_token_id} if method == "int-grad-sign" else {}
    expected = scores_of(model, tokenizer, batch, method, target, **params)
    limited = OutOfMemoryAbove(model, limit=3)
    torch.testing.assert_close(scores_of(limited, tokenizer, batch, method, target, **params), expected, rtol=0,
                               atol=1e-5)
    assert limited.calls > 1


@pytest.mark.parametrize("method", ["loo-sign", "inp-grad-sign"])
def test_bf16_autocast_stays_close_to_fp32(bert, method):
    model, tokenizer = bert
    batch = make_batch(tokenizer, TEXTS[:2])
    exact = scores_of(model, tokenizer, batch, method)
    reduced = scores_of(model, tokenizer, batch, method, autocast_dtype=torch.bfloat16)
    assert reduced.dtype == torch.float32
    torch.testing.assert_close(reduced, exact, rtol=0.1, atol=0.1)

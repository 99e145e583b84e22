"""Gradient measures on the tiny BERT: numerical truths (integrated gradients: test_integrated.py)."""

import pytest
import torch

from fmmlearn.importance import Problem
from fmmlearn.importance.gradient import embedding_gradients
from fmmlearn.masking import eligible_positions

from helpers.importance import PAIRS, TEXTS, make_batch, scores_of, target_logit
from helpers.importance import bert64, embeddings  # noqa: F401 (bert64 is a fixture)


def test_embedding_gradient_matches_finite_differences(bert64):
    model, tokenizer = bert64
    batch = make_batch(tokenizer, TEXTS)
    target = torch.tensor([0, 1, 0, 1])
    problem = Problem(model, batch, target, eligible_positions(batch), tokenizer.mask_token_id, None, None, 64)
    _, g = embedding_gradients(problem)
    e = embeddings(model, batch)
    rng = torch.Generator().manual_seed(0)
    eps = 1e-5
    for example, position in [(0, 1), (1, 3), (2, 1), (3, 5)]:
        u = torch.randn(e.shape[-1], generator=rng, dtype=torch.float64)
        step = torch.zeros_like(e)
        step[example, position] = eps * u
        up = target_logit(model, batch, target, inputs_embeds=e + step)[example]
        down = target_logit(model, batch, target, inputs_embeds=e - step)[example]
        assert (g[example, position] @ u).item() == pytest.approx(((up - down) / (2 * eps)).item(), rel=1e-6, abs=1e-9)


def test_input_x_gradient_is_the_directional_derivative_along_the_embedding(bert64):
    model, tokenizer = bert64
    batch = make_batch(tokenizer, TEXTS)
    target = torch.tensor([1, 0, 1, 0])
    scores = scores_of(model, tokenizer, batch, "inp-grad-sign", target)
    e = embeddings(model, batch)
    eps = 1e-5
    eligible = eligible_positions(batch)
    for example, position in eligible.nonzero().tolist():
        step = torch.zeros_like(e)
        step[example, position] = eps * e[example, position]
        up = target_logit(model, batch, target, inputs_embeds=e + step)[example]
        down = target_logit(model, batch, target, inputs_embeds=e - step)[example]
        assert scores[example, position].item() == pytest.approx(((up - down) / (2 * eps)).item(), rel=1e-4,
                                                                 abs=1e-7)
    absolute = scores_of(model, tokenizer, batch, "inp-grad-abs", target)
    torch.testing.assert_close(absolute, scores.abs())


def test_gradient_norms_match_the_materialised_one_hot_gradient(bert64):
    # grad-l2 / grad-l1 never build B x T x V; here the naive way does, as the reference.
    model, tokenizer = bert64
    batch = make_batch(tokenizer, PAIRS, is_pair=True)
    target = torch.tensor([0, 1])
    weight = model.get_input_embeddings().weight.detach()
    one_hot = torch.nn.functional.one_hot(batch.input_ids, weight.shape[0]).double().requires_grad_(True)
    logits = model(inputs_embeds=one_hot @ weight, attention_mask=batch.attention_mask,
                   token_type_ids=batch.token_type_ids).logits
    (grad,) = torch.autograd.grad(logits.gather(1, target[:, None]).sum(), one_hot)
    eligible = eligible_positions(batch, segment="all")
    for method, naive in [("grad-l2", grad.norm(dim=-1)), ("grad-l1", grad.abs().sum(dim=-1))]:
        # A small block size forces many vocabulary chunks in grad-l1.
        params = {"block_elements": 1000} if method == "grad-l1" else {}
        scores = scores_of(model, tokenizer, batch, method, target, segment="all", **params)
        torch.testing.assert_close(scores[eligible].double(), naive[eligible], rtol=1e-5, atol=1e-9)
        assert (scores[~eligible] == 0).all()


def test_gradient_measures_work_inside_inference_mode(bert64):
    model, tokenizer = bert64
    batch = make_batch(tokenizer, TEXTS[:2])
    expected = scores_of(model, tokenizer, batch, "int-grad-sign", n_steps=2)
    with torch.inference_mode():
        inside = scores_of(model, tokenizer, make_batch(tokenizer, TEXTS[:2]), "int-grad-sign", n_steps=2)
    torch.testing.assert_close(inside, expected)


def test_gram_matrix_is_cached_and_follows_in_place_updates():
    from fmmlearn.importance.gradient import _gram

    weight = torch.nn.Parameter(torch.randn(50, 4, dtype=torch.float64))
    first = _gram(weight)
    assert _gram(weight) is first  # cached
    with torch.no_grad():
        weight.mul_(2)  # e.g. an optimiser step: the version counter moves
    torch.testing.assert_close(_gram(weight), 4 * first)

"""Integrated gradients on the tiny BERT (docs/explain.md, "Integrated gradients"): completeness, path points."""

import pytest
import torch

from fmmlearn.importance import compute_importance
from fmmlearn.importance.integrated import path_points
from fmmlearn.masking import eligible_positions

from helpers.importance import TEXTS, make_batch, target_logit
from helpers.importance import bert64, embeddings  # noqa: F401 (bert64 is a fixture)


@pytest.mark.parametrize("baseline, positions", [("pad", "eligible"), ("mask", "eligible"), ("zero", "all"),
                                                 ("pad", "all")])
def test_integrated_gradients_completeness(bert64, baseline, positions):
    model, tokenizer = bert64
    batch = make_batch(tokenizer, TEXTS)
    target = torch.tensor([0, 1, 1, 0])
    # With every position moving, completeness covers the special tokens too, so all are scored.
    eligible = eligible_positions(batch) if positions == "eligible" else batch.attention_mask.bool()
    scores = compute_importance(model, batch, target, method="int-grad-sign", mask_token_id=tokenizer.mask_token_id,
                                eligible=eligible, n_steps=64, rule="gausslegendre", baseline=baseline,
                                baseline_positions=positions)
    e = embeddings(model, batch)
    token = {"pad": tokenizer.pad_token_id, "mask": tokenizer.mask_token_id}.get(baseline)
    weight = model.get_input_embeddings().weight.detach()
    vector = torch.zeros_like(weight[0]) if token is None else weight[token]
    moving = eligible if positions == "eligible" else torch.ones_like(eligible)
    start = torch.where(moving[..., None], vector, e)
    delta = target_logit(model, batch, target) - target_logit(model, batch, target, inputs_embeds=start)
    assert delta.abs().min() > 1e-3  # the check below is not vacuous
    torch.testing.assert_close(scores.sum(dim=1).double(), delta, rtol=0.01, atol=0)


def test_right_riemann_points_and_gauss_legendre_weights():
    points, weights = path_points(4)
    assert points.tolist() == [0.25, 0.5, 0.75, 1.0] and weights.tolist() == [0.25] * 4
    for rule in ("riemann_left", "riemann_middle", "riemann_trapezoid", "gausslegendre"):
        points, weights = path_points(50, rule)
        assert weights.sum() == pytest.approx(1.0) and 0 <= points.min() and points.max() <= 1
        assert (weights * points**2).sum() == pytest.approx(1 / 3, abs=0.02)
    points, weights = path_points(3, "gausslegendre")
    assert (weights * points**5).sum() == pytest.approx(1 / 6)  # exact up to degree 2K - 1

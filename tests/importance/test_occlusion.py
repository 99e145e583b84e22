"""Leave-one-out (loo-sign, loo-abs) on the tiny BERT: equal to re-evaluating each masked input directly."""

import pytest
import torch

from fmmlearn.masking import eligible_positions

from helpers.importance import PAIRS, TEXTS, make_batch, scores_of, target_logit, tiny_bert


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

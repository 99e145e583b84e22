"""Helpers shared by the importance-measure tests: the tiny BERT and batches of real text."""

import pytest
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

from fmmlearn.encoding import collate, encode
from fmmlearn.importance import compute_importance
from fmmlearn.masking import eligible_positions

TEXTS = ["the movie was great", "a really awful and boring plot", "fine", "it was very nice and happy, superb"]
PAIRS = [("the plot was good", "it was"), ("awful", "a very sad story of this movie")]


def tiny_bert(model_dir, dtype=torch.float32):
    """The conftest tiny BERT in evaluation mode, in ``dtype``, with its tokenizer.

    Its weights are redrawn at unit scale: with BERT's initialisation (std 0.02)
    the logits hardly depend on the input (differences ~1e-5), which would
    make every comparison below vacuous.
    """
    model = BertForSequenceClassification.from_pretrained(model_dir).to(dtype).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                fan_in = module.in_features if isinstance(module, torch.nn.Linear) else 1
                module.weight.normal_(0, fan_in**-0.5, generator=generator)
    return model, AutoTokenizer.from_pretrained(model_dir)


def make_batch(tokenizer, texts, indices=None, is_pair=False):
    """Encode ``texts`` and collate the examples at ``indices`` (default all) into a Batch."""
    encoding = encode(tokenizer, list(texts), is_pair=is_pair, max_length=None)
    indices = range(len(texts)) if indices is None else indices
    return collate(encoding, list(indices), pad_token_id=tokenizer.pad_token_id)


def scores_of(model, tokenizer, batch, method, target=None, segment="first", **params):
    """``compute_importance`` with the batch's segment-A positions and target class 1 by default."""
    target = torch.ones(len(batch), dtype=torch.long) if target is None else target
    return compute_importance(model, batch, target, method=method, mask_token_id=tokenizer.mask_token_id,
                              eligible=eligible_positions(batch, segment=segment), **params)


def target_logit(model, batch, target, input_ids=None, inputs_embeds=None):
    """``f_y`` per example, computed directly (the reference every test compares against)."""
    kwargs = {"attention_mask": batch.attention_mask}
    if batch.token_type_ids is not None:
        kwargs["token_type_ids"] = batch.token_type_ids
    with torch.no_grad():
        if inputs_embeds is not None:
            logits = model(inputs_embeds=inputs_embeds, **kwargs).logits
        else:
            logits = model(input_ids=batch.input_ids if input_ids is None else input_ids, **kwargs).logits
    return logits.gather(1, target[:, None])[:, 0]


@pytest.fixture(scope="module")
def bert64(tiny_model_dir):
    """The tiny BERT in float64, so finite differences and quadratures are exact enough."""
    return tiny_bert(tiny_model_dir, torch.float64)


def embeddings(model, batch):
    with torch.no_grad():
        return model.get_input_embeddings()(batch.input_ids)


class ToyDifferentiable(torch.nn.Module):
    """logits = (sum_t e_t^2) W with 3-d embeddings: the reference code's toy model for the parity vectors."""

    def __init__(self):
        super().__init__()
        self.embeddings = torch.nn.Embedding(5, 3)
        table = [[0, 1, 0], [0, 1, 0], [0, 0, 0], [1, 0, 0], [0, 1, 0]]  # BOS EOS PAD TOKEN MASK
        with torch.no_grad():
            self.embeddings.weight.copy_(torch.tensor(table, dtype=torch.float32))
        self.register_buffer("W", torch.tensor([[1.0, 0, 1], [0, 1, 1], [0, 0, 0]]))

    def get_input_embeddings(self):
        return self.embeddings

    def forward(self, input_ids=None, inputs_embeds=None, attention_mask=None):
        e = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        return (e**2).sum(dim=1) @ self.W

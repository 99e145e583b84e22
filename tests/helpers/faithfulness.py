"""A classifier whose explanation is known exactly, for faithfulness tests.

:class:`LinearBag` scores a text by a weighted sum of token indicators:
``logit_1 = sum_t w[x_t]``, ``logit_0 = -logit_1``, with ``w = 0`` for the mask
token and special tokens.  Each token's true contribution to the target logit
is ``+-w[x_t]``, which is exactly what ``loo-sign`` and ``inp-grad-sign``
return, and masking it removes exactly that contribution.
:class:`WrappedClassifier` gives any model the low-level API that
:mod:`fmmlearn.faithfulness` uses (``encode``, ``encoded_logits``, ...);
:class:`BagClassifier` is it around a :class:`LinearBag`.
"""

import numpy as np
import pytest
import torch

from fmmlearn.encoding import encode, validate_texts
from fmmlearn.modeling import predict_logits

from helpers.data import FILLER, NEGATIVE, POSITIVE


class LinearBag(torch.nn.Module):
    """``logits = (-s, s)`` with ``s = sum_t w[x_t]`` over attended tokens."""

    def __init__(self, weights):
        super().__init__()
        self.embeddings = torch.nn.Embedding(len(weights), 1)
        with torch.no_grad():
            self.embeddings.weight.copy_(torch.as_tensor(weights, dtype=torch.float32)[:, None])

    def get_input_embeddings(self):
        return self.embeddings

    def forward(self, input_ids=None, inputs_embeds=None, attention_mask=None, token_type_ids=None):
        e = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        s = (e[..., 0] * attention_mask).sum(dim=1)
        return torch.stack([-s, s], dim=1)


def word_weights(tokenizer, polar=3.0, filler_scale=0.2, seed=0):
    """Token weights: +polar / -polar for the sentiment words, small random ones for filler."""
    rng = np.random.default_rng(seed)
    weights = np.zeros(tokenizer.vocab_size, dtype=np.float32)
    for words, value in ((POSITIVE, polar), (NEGATIVE, -polar)):
        for word in words:
            weights[tokenizer(word, add_special_tokens=False)["input_ids"]] = value
    for word in FILLER:
        weights[tokenizer(word, add_special_tokens=False)["input_ids"]] = rng.uniform(-filler_scale, filler_scale)
    weights[tokenizer.all_special_ids] = 0.0
    return weights


class WrappedClassifier:
    """The low-level classifier API (as ``FaithfulTextClassifier`` has it) around any model, on the CPU."""

    def __init__(self, tokenizer, model, classes=("neg", "pos"), random_state=0):
        self.tokenizer_ = tokenizer
        self.model_ = model.eval()
        self.classes_ = np.array(classes)
        self.device_ = torch.device("cpu")
        self.inference_dtype_ = None
        self.batch_size = 8
        self.inference_batch_size_ = 32
        self.random_state = random_state
        self.verbose = 0
        self.max_length = None

    def encode(self, X, name="X"):
        texts, is_pair = validate_texts(X, name=name)
        return encode(self.tokenizer_, texts, is_pair=is_pair, max_length=self.max_length)

    def encoded_logits(self, encoding, input_ids=None):
        return predict_logits(self.model_, encoding, pad_token_id=self.tokenizer_.pad_token_id,
                              batch_size=self.inference_batch_size_, device=self.device_, dtype=None,
                              input_ids=input_ids)


class BagClassifier(WrappedClassifier):
    """A :class:`LinearBag` with labels ``["neg", "pos"]``."""

    def __init__(self, tokenizer, weights, random_state=0):
        super().__init__(tokenizer, LinearBag(weights), random_state=random_state)

    def true_importances(self, X, y):
        """Each token's exact contribution to the gold-label logit, aligned with ``encode(X)``."""
        weights = self.model_.embeddings.weight[:, 0].detach().numpy()
        sign = np.where(np.asarray(y) == "pos", 1.0, -1.0)
        return [s * weights[ids] for s, ids in zip(sign, self.encode(X).input_ids)]


@pytest.fixture(scope="module")
def bag(bundled_tokenizer):
    """A :class:`BagClassifier` over :func:`word_weights` (import the fixture into a test module)."""
    return BagClassifier(bundled_tokenizer, word_weights(bundled_tokenizer))

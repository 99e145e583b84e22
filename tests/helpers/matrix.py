"""What the model matrices (encoders, decoders) share: toy data and direct references computed on the model itself.

The references run the model on the tokenizer's own output, never through
fmmlearn: leave-one-out by explicit masked forwards, gradients by autograd on
the word embeddings.
"""

import numpy as np
import torch

POSITIVE = ["good", "great", "fine", "nice", "happy", "superb"]
NEGATIVE = ["bad", "awful", "poor", "sad", "ugly", "terrible"]
FILLER = ["the", "a", "movie", "plot", "was", "really", "and", "it", "very", "story", "of", "this"]


def sentiment(n, seed=0):
    """Texts whose label is one polar word among filler words."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        label = i % 2
        words = list(rng.choice(FILLER, size=int(rng.integers(3, 8))))
        words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(POSITIVE if label else NEGATIVE)))
        texts.append(" ".join(words))
        labels.append("pos" if label else "neg")
    return texts, np.array(labels)


def sentiment_pairs(n, seed=0):
    """Pairs whose label comes from segment A (as in :func:`sentiment`); segment B is filler context."""
    texts, labels = sentiment(n, seed)
    rng = np.random.default_rng(seed + 1)
    pairs = [(t, " ".join(rng.choice(FILLER, size=3))) for t in texts]
    return pairs, labels


FIT = dict(max_epochs=2, batch_size=8, learning_rate=3e-3, warmup_ratio=0.0, device="cpu", precision="fp32",
           random_state=0)


class EmbeddingInputs:
    """Record every id tensor fed to an embedding of ``vocab_size`` rows (the word embedding)."""

    def __init__(self, vocab_size):
        self.vocab_size, self.batches = vocab_size, []

    def __enter__(self):
        def hook(module, args):
            if isinstance(module, torch.nn.Embedding) and module.num_embeddings == self.vocab_size and args:
                self.batches.append(args[0].detach().clone())

        self.handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def direct_inputs(clf, texts):
    """The tokenizer's own output for one text or pair, as the model's keyword arguments."""
    a, b = (texts, None) if isinstance(texts, str) else texts
    enc = clf.tokenizer_(a, b, return_tensors="pt", return_special_tokens_mask=True)
    special = enc.pop("special_tokens_mask")[0].bool()
    sequence = torch.tensor([-1 if s is None else s for s in enc.sequence_ids(0)])
    return dict(enc), special, sequence


def direct_logits(clf, inputs, input_ids=None):
    with torch.no_grad():
        return clf.model_(**{**inputs, "input_ids": inputs["input_ids"] if input_ids is None else input_ids}).logits


def direct_loo(clf, text, target):
    """``f_y(x) - f_y(x with token t := mask)`` at every non-special position of segment A."""
    inputs, special, sequence = direct_inputs(clf, text)
    ids = inputs["input_ids"]
    positions = torch.nonzero(~special & (sequence == 0))[:, 0]
    masked = ids.repeat(len(positions), 1)
    masked[torch.arange(len(positions)), positions] = clf.tokenizer_.mask_token_id
    clean = direct_logits(clf, inputs)[0, target]
    with torch.no_grad():
        batch = {k: v.repeat(len(positions), 1) for k, v in inputs.items()}
        occluded = clf.model_(**{**batch, "input_ids": masked}).logits[:, target]
    return positions.numpy(), (clean - occluded).numpy()


def direct_gradients(clf, text, target):
    """Embeddings ``e``, ``g = d f_y / d e`` by autograd, and the embedding matrix ``E``."""
    inputs, special, sequence = direct_inputs(clf, text)
    table = clf.model_.get_input_embeddings()
    e = table(inputs.pop("input_ids")).detach().requires_grad_(True)
    logit = clf.model_(inputs_embeds=e, **inputs).logits[0, target]
    (g,) = torch.autograd.grad(logit, e)
    return e.detach()[0], g[0], table.weight.detach(), torch.nonzero(~special & (sequence == 0))[:, 0]


def scores_by_position(frame, example=0):
    rows = frame[frame["example"] == example]
    return rows["position"].to_numpy(), rows["importance"].to_numpy()


def assert_close_and_informative(actual, expected, rtol=1e-4):
    """Equal up to float32 round-off, and the reference is not (near) constant."""
    scale = float(np.abs(expected).max())
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)
    assert np.ptp(expected) > 100 * rtol * scale, "reference scores are nearly constant: the check is vacuous"

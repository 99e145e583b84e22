"""What several stages share: the per-example outcomes of a masked test set, and the test texts' key."""

from __future__ import annotations

import numpy as np
import torch

from .._cache import content_key

__all__ = ["masked_fraction", "outcomes", "test_key"]


def test_key(splits) -> str:
    """The content key of the test split (texts and labels)."""
    return content_key(splits.X_test, splits.y_test.tolist())


def outcomes(clf, encoding, gold, input_ids=None):
    """Predicted class index and probability of the gold class, per example."""
    logits = torch.from_numpy(clf.encoded_logits(encoding, input_ids=input_ids)).double()
    proba = torch.softmax(logits, dim=1).numpy()
    return logits.argmax(dim=1).numpy().astype(np.int16), proba[np.arange(len(gold)), gold].astype(np.float32)


def masked_fraction(clf, encoding, input_ids, segment) -> np.ndarray:
    """Realised share of eligible tokens that hold the mask token, per example (NaN where none is eligible)."""
    from ...encoding import collate
    from ...masking import eligible_positions

    batch = collate(encoding, np.arange(len(encoding)), clf.tokenizer_.pad_token_id, input_ids=input_ids)
    eligible = eligible_positions(batch, segment).numpy()
    masked = (eligible & (batch.input_ids.numpy() == clf.tokenizer_.mask_token_id)).sum(axis=1)
    n = eligible.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, masked / np.maximum(n, 1), np.nan)

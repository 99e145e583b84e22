"""The training data of masked fine-tuning: an encoding as a torch dataset, and the fixed masked validation copy.

Items of :class:`EncodedDataset` are indices; the loader collates (pads, masks) whole batches.  The
``"masked"`` part of a validation set is drawn once, before the first epoch, as in the paper
(:func:`mask_encoding` with :func:`random_masker`), and joined to the clean part
(:func:`concat_encodings`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch.utils.data import Dataset

from ..encoding import Encoding, collate, length_grouped_batches
from ..masking import maskable_positions, random_max_masking

__all__ = ["EncodedDataset", "concat_encodings", "mask_encoding", "random_masker"]


class EncodedDataset(Dataset):
    """An :class:`~fmmlearn.encoding.Encoding` plus integer targets; items are indices.

    Collation (padding, masking) happens per batch in the loader, so the
    dataset only hands out positions.
    """

    def __init__(self, encoding: Encoding, targets: np.ndarray):
        self.encoding = encoding
        self.targets = torch.as_tensor(np.asarray(targets, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.encoding)

    def __getitem__(self, i: int) -> int:
        return i


def mask_encoding(encoding: Encoding, mask_fn: Callable, pad_token_id: int, batch_size: int = 256) -> Encoding:
    """Return a copy of ``encoding`` whose ids went through ``mask_fn(batch) -> ids``.

    Used to draw the fixed masked copy of the validation set once.
    """
    masked = list(encoding.input_ids)
    for idx in length_grouped_batches(encoding.lengths, batch_size=batch_size):
        batch = collate(encoding, idx, pad_token_id=pad_token_id)
        ids = mask_fn(batch).numpy()
        for row, i in enumerate(idx):
            masked[i] = ids[row, : len(encoding.input_ids[i])].copy()
    out = encoding.subset(np.arange(len(encoding)))
    out.input_ids = masked
    return out


def random_masker(max_ratio: float, mask_token_id: int, seed: int) -> Callable:
    """``batch -> ids`` applying random-max masking to every row, from its own seeded generator.

    Draws the fixed masked copy of the validation set (drawn once, as in the paper).
    """
    generator = torch.Generator(device="cpu").manual_seed(seed)

    def mask(batch):
        maskable = maskable_positions(batch.attention_mask, batch.special_tokens_mask)
        return random_max_masking(batch.input_ids, maskable, max_ratio=max_ratio, mask_token_id=mask_token_id,
                                  generator=generator)

    return mask


def concat_encodings(first: Encoding, second: Encoding) -> Encoding:
    """Concatenate two encodings of the same kind (e.g. clean + masked validation)."""
    both = first.subset(np.arange(len(first)))
    for name in ("input_ids", "special_tokens_mask", "segment_ids", "word_ids", "offsets", "texts"):
        setattr(both, name, getattr(first, name) + getattr(second, name))
    if first.token_type_ids is not None:
        both.token_type_ids = first.token_type_ids + second.token_type_ids
    both.truncated = np.concatenate([first.truncated, second.truncated])
    return both

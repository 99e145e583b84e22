"""The validation set of ``fit``: explicit or split off, clean or with its masked copy (docs/classifier.md).

The paper selects the best epoch on the validation split and its masked copy together
(``validation="both"``); the masked copy is drawn once, so it is the same in every epoch.
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import train_test_split

from ..encoding import encode, validate_texts
from ..utils import check_labels, offset_seed
from ._data import EncodedDataset, concat_encodings, mask_encoding, random_masker

__all__ = ["masked_validation", "split_validation", "validation_dataset"]


def split_validation(texts, targets, validation_data, encoder, is_pair, seed, validation_fraction, *, owner):
    """Indices to train on, plus ``None`` or the validation part (``validation_data`` given, or a stratified split)."""
    all_idx = np.arange(len(texts))
    if validation_data is not None:
        if not (isinstance(validation_data, tuple) and len(validation_data) == 2):
            raise ValueError("validation_data must be a tuple (X_valid, y_valid).")
        v_texts, v_pair = validate_texts(validation_data[0], name="validation_data[0]")
        if v_pair != is_pair:
            raise ValueError("validation_data[0] must be of the same kind (single texts or pairs) as X.")
        v_labels = check_labels(validation_data[1], len(v_texts), "validation_data[1]", owner=owner)
        unseen = sorted(set(v_labels.tolist()) - set(encoder.classes_.tolist()), key=str)
        if unseen:
            raise ValueError(f"validation_data[1] has labels not in y: {unseen[:5]}.")
        return all_idx, ("explicit", v_texts, encoder.transform(v_labels))
    if not validation_fraction:
        return all_idx, None
    n_valid = int(round(validation_fraction * len(texts)))
    if n_valid < 1 or len(texts) - n_valid < 1:
        raise ValueError(
            f"validation_fraction={validation_fraction} leaves no validation or no training "
            f"examples out of {len(texts)}; pass validation_fraction=0 or more data."
        )
    counts = np.bincount(targets)
    stratify = targets if counts.min() >= 2 and n_valid >= len(counts) else None
    train_idx, valid_idx = train_test_split(all_idx, test_size=n_valid, random_state=seed, stratify=stratify)
    return np.sort(train_idx), ("split", np.sort(valid_idx))


def validation_dataset(encoding, targets, valid_part, tokenizer, is_pair, max_length):
    """The clean validation set: the explicit ``validation_data``, or the split-off part of ``X``."""
    if valid_part is None:
        return None
    if valid_part[0] == "explicit":
        _, v_texts, v_targets = valid_part
        v_encoding = encode(tokenizer, v_texts, is_pair=is_pair, max_length=max_length,
                            name="validation_data[0]")
        return EncodedDataset(v_encoding, v_targets)
    idx = valid_part[1]
    return EncodedDataset(encoding.subset(idx), targets[idx])


def masked_validation(valid_set, tokenizer, max_masking_ratio: float, validation: str, seed):
    """The masked copy of the validation set, drawn once (as in the paper)."""
    masker = random_masker(max_masking_ratio, tokenizer.mask_token_id, offset_seed(seed, 1))
    masked = mask_encoding(valid_set.encoding, masker, tokenizer.pad_token_id)
    if validation == "masked":
        return EncodedDataset(masked, valid_set.targets.numpy())
    both = concat_encodings(valid_set.encoding, masked)
    return EncodedDataset(both, np.concatenate([valid_set.targets.numpy()] * 2))

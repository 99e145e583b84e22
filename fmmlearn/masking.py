"""Masking primitives: pure functions on id tensors (docs/masking.md).

Every function takes the token ids of a batch, a boolean tensor saying which
positions may be masked, and, where it draws random numbers, an explicit
``torch.Generator``.  Nothing here decodes text; the mask token is always the
tokenizer's own ``mask_token_id``.  The same rules serve training (random
masking), evaluation (fixed-count masking) and faithfulness curves (masking the
top-ranked tokens of an explanation), so a reader finds each rule in one place.
"""

from __future__ import annotations

import numbers

import torch

from .encoding import SEGMENT_A, SEGMENT_NONE, Batch
from .utils import DEFAULT_RATIOS, SEGMENTS, check_ratios
from .utils import keyword_only

__all__ = [
    "DEFAULT_RATIOS",
    "MASKING_STRATEGIES",
    "SEGMENTS",
    "apply_masking_strategy",
    "check_ratios",
    "eligible_positions",
    "fixed_count_masking",
    "mask_counts",
    "mask_top_k",
    "mask_training_batch",
    "maskable_positions",
    "random_max_masking",
    "segment_a_positions",
]

#: Names of the training-batch masking strategies (docs/masking.md).
MASKING_STRATEGIES = ("half-det", "half-ran", "uni")


def maskable_positions(attention_mask: torch.Tensor, special_tokens_mask: torch.Tensor) -> torch.Tensor:
    """Positions random masking may hit: real tokens that are not special.

    Both segments count; ``[UNK]`` and tokens that already are ``[MASK]`` are
    maskable.  Special tokens (from the tokenizer's special-tokens mask, never
    hard-coded ids) and padding are not.

    Parameters
    ----------
    attention_mask : Tensor (B, T)
    special_tokens_mask : BoolTensor (B, T)

    Returns
    -------
    BoolTensor (B, T)
    """
    return attention_mask.bool() & ~special_tokens_mask.bool()


def segment_a_positions(segment_ids: torch.Tensor) -> torch.Tensor:
    """Positions of segment A (the first text), special tokens excluded."""
    return segment_ids == SEGMENT_A


@keyword_only
def eligible_positions(batch: Batch, *, segment: str = "first") -> torch.Tensor:
    """Positions an explanation may mask: segment A (``"first"``) or every maskable token (``"all"``).

    Parameters
    ----------
    batch : Batch
    segment : {"first", "all"}, default="first"

    Returns
    -------
    BoolTensor (B, T)
    """
    maskable = maskable_positions(batch.attention_mask, batch.special_tokens_mask)
    if segment == "first":
        return maskable & segment_a_positions(batch.segment_ids)
    if segment == "all":
        return maskable & (batch.segment_ids != SEGMENT_NONE)
    raise ValueError(f"segment must be one of {SEGMENTS}, got {segment!r}.")


def _check_ratio(ratio, name: str) -> float:
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not 0.0 <= float(ratio) <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {ratio!r}.")
    return float(ratio)


def mask_counts(ratio: float, n: torch.Tensor) -> torch.Tensor:
    """``floor(ratio * n)`` without float rounding surprises.

    ``0.7 * 10`` is ``7.000000000000001`` but ``0.29 * 100`` is
    ``28.999999999999996``; rounding the product to 6 decimals before the floor
    gives the exact integer on the ratio grids used in practice (the reference
    computed the product in float32 and truncated it).

    Parameters
    ----------
    ratio : float in [0, 1]
    n : LongTensor
        Number of eligible tokens per example.

    Returns
    -------
    LongTensor, same shape as ``n``
    """
    product = torch.round(n.double() * float(ratio), decimals=6)
    return torch.floor(product).long()


@keyword_only
def random_max_masking(
    input_ids: torch.Tensor,
    maskable: torch.Tensor,
    *, max_ratio: float,
    mask_token_id: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """Random-max masking (the paper's RandomMaxMasking): ratio ``m_i ~ U[0, max_ratio)`` per row, then Bernoulli(m_i) per token.

    The realised masked fraction therefore averages ``max_ratio / 2``.

    Parameters
    ----------
    input_ids : LongTensor (B, T)
    maskable : BoolTensor (B, T)
    max_ratio : float in [0, 1]
        ``0`` returns the ids unchanged.
    mask_token_id : int
    generator : torch.Generator
        On the same device as ``input_ids``.

    Returns
    -------
    LongTensor (B, T)
        A new tensor; ``input_ids`` is not modified.
    """
    max_ratio = _check_ratio(max_ratio, "max_ratio")
    if max_ratio == 0.0:
        return input_ids.clone()
    rows, width = input_ids.shape
    ratio = torch.rand(rows, 1, generator=generator, device=input_ids.device) * max_ratio
    draws = torch.rand(rows, width, generator=generator, device=input_ids.device)
    # Strict "<" keeps ratio 0 an exact identity (the reference's "<=" differs on a null set).
    hit = (draws < ratio) & maskable
    return torch.where(hit, torch.full_like(input_ids, mask_token_id), input_ids)


@keyword_only
def fixed_count_masking(
    input_ids: torch.Tensor,
    maskable: torch.Tensor,
    *, ratio: float,
    mask_token_id: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """Fixed-count masking (the paper's RandomFixedMasking): mask exactly ``floor(ratio * n_i)`` random maskable tokens per row.

    Parameters
    ----------
    input_ids : LongTensor (B, T)
    maskable : BoolTensor (B, T)
    ratio : float in [0, 1]
    mask_token_id : int
    generator : torch.Generator

    Returns
    -------
    LongTensor (B, T)
    """
    ratio = _check_ratio(ratio, "ratio")
    keys = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    # Non-maskable positions get key 2 so they sort after every maskable one.
    keys = torch.where(maskable, keys, torch.full_like(keys, 2.0))
    ranks = keys.argsort(dim=1).argsort(dim=1)
    k = mask_counts(ratio, maskable.sum(dim=1))
    hit = (ranks < k[:, None]) & maskable
    return torch.where(hit, torch.full_like(input_ids, mask_token_id), input_ids)


def apply_masking_strategy(
    input_ids: torch.Tensor,
    maskable: torch.Tensor,
    *,
    strategy: str,
    max_ratio: float,
    mask_token_id: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """Mask a training batch with one of the strategies (docs/masking.md).

    Parameters
    ----------
    input_ids : LongTensor (B, T)
        Rows in random order (the batch is already shuffled).
    maskable : BoolTensor (B, T)
    strategy : {"half-det", "half-ran", "uni"}
        ``"half-det"`` (the paper's masked fine-tuning): the first ``floor(B/2)``
        rows stay clean, the rest get random-max masking.  ``"half-ran"``: each
        row is masked with probability 1/2.  ``"uni"``: every row is masked.
    max_ratio : float in [0, 1]
    mask_token_id : int
    generator : torch.Generator

    Returns
    -------
    LongTensor (B, T)
    """
    rows = input_ids.shape[0]
    if strategy == "uni":
        selected = torch.ones(rows, dtype=torch.bool, device=input_ids.device)
    elif strategy == "half-det":
        selected = torch.arange(rows, device=input_ids.device) >= rows // 2
    elif strategy == "half-ran":
        selected = torch.rand(rows, generator=generator, device=input_ids.device) < 0.5
    else:
        raise ValueError(f"strategy must be one of {MASKING_STRATEGIES}, got {strategy!r}.")
    return random_max_masking(input_ids, maskable & selected[:, None], max_ratio=max_ratio,
                              mask_token_id=mask_token_id, generator=generator)


def mask_training_batch(
    batch: Batch,
    *,
    strategy: str,
    max_ratio: float,
    mask_token_id: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """The ids of one training batch masked exactly as ``fit`` masks them.

    The single masking path of masked fine-tuning: the skorch training loop
    calls it on every freshly drawn batch, and the MaSF calibration set
    (:func:`fmmlearn.ood.mask_like_training`) calls it on the same batches
    with the same generators, so "masked like the training batches" holds by
    construction.  Random masking may hit every non-special token of both
    segments; ``max_ratio=0`` (plain fine-tuning) returns the ids unchanged
    without drawing random numbers.

    Parameters
    ----------
    batch : Batch
        Rows in random order (training batches are shuffled).
    strategy : {"half-det", "half-ran", "uni"}
    max_ratio : float in [0, 1]
    mask_token_id : int
    generator : torch.Generator
        On the CPU, so the stream does not depend on the device.

    Returns
    -------
    LongTensor (B, T)
    """
    if max_ratio == 0:
        return batch.input_ids
    return apply_masking_strategy(
        batch.input_ids,
        maskable_positions(batch.attention_mask, batch.special_tokens_mask),
        strategy=strategy,
        max_ratio=max_ratio,
        mask_token_id=mask_token_id,
        generator=generator,
    )


@keyword_only
def mask_top_k(
    input_ids: torch.Tensor,
    importance: torch.Tensor,
    eligible: torch.Tensor,
    *, ratio: float,
    mask_token_id: int,
) -> torch.Tensor:
    """Explainer masking step (docs/faithfulness.md): mask the top ``floor(ratio * n)`` eligible tokens.

    Tokens already holding the mask token rank first, so the mask set only
    grows; the others are ranked by ``importance``, descending, ties broken
    towards the earlier position.

    Parameters
    ----------
    input_ids : LongTensor (B, T)
        Current (possibly partly masked) ids.
    importance : Tensor (B, T)
    eligible : BoolTensor (B, T)
        Positions that may be masked (``n`` counts these, masked ones included).
    ratio : float in [0, 1]
    mask_token_id : int

    Returns
    -------
    LongTensor (B, T)
    """
    ratio = _check_ratio(ratio, "ratio")
    if torch.isnan(importance[eligible]).any():
        raise ValueError("importance contains NaN at eligible positions; cannot rank tokens.")
    score = importance.detach().double()
    score = torch.where(eligible & (input_ids == mask_token_id), torch.full_like(score, float("inf")), score)
    score = torch.where(eligible, score, torch.full_like(score, float("-inf")))
    order = torch.sort(score, dim=1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    k = mask_counts(ratio, eligible.sum(dim=1))
    hit = (ranks < k[:, None]) & eligible
    return torch.where(hit, torch.full_like(input_ids, mask_token_id), input_ids)

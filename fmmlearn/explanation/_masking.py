"""The explainer-masking loop (Madsen et al., 2024; ``docs/faithfulness.md``).

At ratio ``r`` the top ``floor(r * n)`` eligible tokens by importance are
replaced by the mask token; the masks only grow from one ratio to the next.
:func:`iter_batch_masking` runs the loop on one padded batch and any model
(toy models included); :func:`iter_explainer_masking` runs it over a whole
encoded set of a fitted classifier and yields ``(ratio, masked ids)`` per
step, which the curves, the in-distribution report and the erasure metrics
evaluate.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import torch

from ..encoding import collate
from ..importance import compute_importance, get_method
from ..importance.precomputed import check_covered, importance_arrays
from ..masking import eligible_positions, mask_counts, mask_top_k
from ..modeling import autocast_dtype_for, map_batches
from ..utils import check_ratios, check_segment, resolve_seed
from ..utils import keyword_only

__all__ = ["eligible_masks", "finite_scores", "iter_batch_masking", "iter_explainer_masking", "resolve_recursive"]


@keyword_only
def resolve_recursive(measure, *, recursive, precomputed: bool) -> bool:
    """The measure's default (docs/explain.md) unless told; precomputed scores cannot be recomputed."""
    if precomputed:
        if recursive:
            raise ValueError("recursive=True cannot be combined with precomputed importances (they are fixed "
                             "scores of the clean input); pass recursive=None or False.")
        return False
    if recursive is None:
        return measure.recursive
    if not isinstance(recursive, (bool, np.bool_)):
        raise ValueError(f"recursive must be None, True or False, got {recursive!r}.")
    return bool(recursive)


def _checked_measure(method, precomputed: bool, method_params: dict):
    """The measure (``None`` for precomputed scores), its parameters checked before any model work."""
    if precomputed:
        if method_params:
            raise ValueError(f"measure parameters {sorted(method_params)} cannot apply to precomputed importances.")
        return None
    measure = get_method(method)
    measure.bind(method_params)
    return measure






def finite_scores(importance: torch.Tensor) -> torch.Tensor:
    """``importance`` in float64, clamped so that no score ties with the ranking sentinels."""
    # mask_top_k ranks already-masked tokens at +inf and ineligible ones at -inf;
    # clamping keeps a user's +-inf from tying with those sentinels.
    big = torch.finfo(torch.float64).max / 4
    return importance.double().clamp(-big, big)


def _rows(batch, rows: torch.Tensor, input_ids: torch.Tensor):
    """The sub-batch of ``rows`` with the current ids."""
    pick = lambda t: None if t is None else t[rows]  # noqa: E731
    return type(batch)(input_ids[rows], batch.attention_mask[rows], batch.special_tokens_mask[rows],
                       batch.segment_ids[rows], pick(batch.token_type_ids), batch.index[rows])


@keyword_only
def iter_batch_masking(
    model,
    batch,
    target: torch.Tensor,
    *, method="loo-sign",
    ratios=None,
    mask_token_id: int,
    recursive: bool | None = None,
    segment: str = "first",
    importance: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    autocast_dtype: torch.dtype | None = None,
    internal_batch_size: int | None = None,
    **method_params,
) -> Iterator[tuple[float, torch.Tensor]]:
    """Explainer masking of one batch (docs/faithfulness.md), one step per ratio.

    At ratio ``r`` the top ``floor(r * n)`` eligible tokens by importance are
    replaced by the mask token (``n`` counts eligible tokens, masked ones
    included).  Tokens already masked rank first, so the mask set only grows.
    Recursive measures are recomputed on the current, partly masked input
    before each step; non-recursive ones once on the clean input.  ``r = 0``
    is the input as given; ``r = 1`` masks every eligible token without
    calling the measure.

    Parameters
    ----------
    model : torch.nn.Module
        Any model :func:`fmmlearn.importance.compute_importance` accepts.
    batch : Batch
        On the model's device.
    target : LongTensor (B,)
        Class explained per row (the gold label in faithfulness curves).
    method : str, ImportanceMethod or explainer value (docs/explainers.md), default="loo-sign"
        Importance measure; ignored when ``importance`` is given.
    ratios : array-like of float, optional
        Strictly increasing in ``[0, 1]``; default :data:`DEFAULT_RATIOS`.
    mask_token_id : int
    recursive : bool, optional
        Default: the measure's own (``True`` except ``beam-*``).
    segment : {"first", "all"}, default="first"
        Mask segment A only (the paper) or every non-special token.
    importance : Tensor (B, T), optional
        Precomputed scores of the clean input (non-recursive); higher is
        masked first.
    generator : torch.Generator, optional
        Random source of ``rand``.
    autocast_dtype : torch.dtype, optional
        Autocast for the measure's forward passes.
    internal_batch_size : int, optional
        Rows per forward pass of the measure; default: the probed best size
        (see :func:`fmmlearn.importance.compute_importance`).
    **method_params
        Passed to the measure.

    Returns
    -------
    iterator of (float, LongTensor (B, T))
        ``(ratio, masked ids)`` per ratio, computed lazily; arguments are
        validated at the call.
    """
    grid = check_ratios(ratios)
    measure = _checked_measure(method, importance is not None, method_params)
    recursive = resolve_recursive(measure, recursive=recursive, precomputed=importance is not None)
    eligible = eligible_positions(batch, segment=check_segment(segment))

    def explain(rows: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        sub = batch.with_input_ids(input_ids) if rows is None else _rows(batch, rows, input_ids)
        return compute_importance(
            model, sub, target if rows is None else target[rows], method=measure, mask_token_id=mask_token_id,
            eligible=eligible if rows is None else eligible[rows], generator=generator,
            autocast_dtype=autocast_dtype, internal_batch_size=internal_batch_size, **method_params,
        )

    def steps(importance=importance):
        ids = batch.input_ids
        if importance is None and not recursive and np.any((grid > 0) & (grid < 1)):
            importance = explain(None, ids)
        for ratio in grid.tolist():
            if ratio == 1.0:
                ids = torch.where(eligible, torch.full_like(ids, mask_token_id), ids)
            elif ratio > 0.0:
                scores = _recursive_scores(explain, ids, eligible, ratio, mask_token_id) if recursive else importance
                ids = mask_top_k(ids, finite_scores(scores), eligible, ratio=ratio, mask_token_id=mask_token_id)
            yield ratio, ids

    return steps()  # arguments are checked now, the work happens on iteration


def _recursive_scores(explain, ids, eligible, ratio, mask_token_id) -> torch.Tensor:
    """Importance of the current input, computed only for rows that mask another token at this step.

    A row whose ``floor(r * n)`` does not exceed its masked count keeps its
    ids whatever the scores (its masked tokens rank first), so it is skipped:
    on short texts this saves a good share of the (expensive) recursive steps.
    """
    masked = (eligible & (ids == mask_token_id)).sum(dim=1)
    rows = torch.nonzero(mask_counts(ratio, eligible.sum(dim=1)) > masked)[:, 0]
    if len(rows) == len(ids):
        return explain(None, ids)
    scores = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
    if len(rows):
        scores[rows] = explain(rows, ids).to(scores.dtype)
    return scores


@keyword_only
def iter_explainer_masking(
    clf,
    encoding,
    target_idx,
    *, method="loo-sign",
    ratios=None,
    recursive: bool | None = None,
    segment: str = "first",
    importances=None,
    random_state=None,
    batch_size: int | None = None,
    precision: str | None = None,
    internal_batch_size: int | None = None,
    **method_params,
) -> Iterator[tuple[float, list]]:
    """Explainer masking of an encoded set, yielding the masked ids at every ratio.

    The loop of :func:`iter_batch_masking` runs batch by batch (length-grouped,
    longest first, the batch on ``clf.device_``); the masked copies are put
    back in the caller's order.  All batches are processed before the first
    step is yielded.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted (anything with its low-level API).
    encoding : Encoding
        From ``clf.encode``.
    target_idx : array-like of int, shape (n_samples,)
        Class index (into ``clf.classes_``) explained per example.
    method : str, ImportanceMethod or explainer value (docs/explainers.md), default="loo-sign"
        Importance measure (see :func:`fmmlearn.importance.get_method`).
    ratios : array-like of float, optional
        Default :data:`DEFAULT_RATIOS`.
    recursive : bool, optional
        Default: the measure's own.
    segment : {"first", "all"}, default="first"
    importances : list of ndarray, ndarray or DataFrame, optional
        Precomputed scores (see :func:`faithfulness_curve`); then ``method``
        is only a label and the curve is non-recursive.
    random_state : int, optional
        Seed of ``rand``; default ``clf.random_state``.
    batch_size : int, optional
        Examples per batch; default ``clf.batch_size`` for gradient measures,
        ``clf.inference_batch_size_`` otherwise (as in ``explain``, so the
        same scores come out).
    precision : {None, "auto", "fp32", "bf16", "fp16"}, default=None
        ``None``: fp32 for every measure.  ``"auto"``: gradient measures use
        the classifier's inference precision; leave-one-out and beam search
        stay in fp32 (see :func:`fmmlearn.modeling.autocast_dtype_for`).
    internal_batch_size : int, optional
        Perturbed copies per forward pass (leave-one-out, beam search, IG);
        default: the probed best size.
    **method_params
        Passed to the measure.

    Returns
    -------
    iterator of (float, list of ndarray of int64)
        ``(ratio, masked ids per example)``, aligned with
        ``encoding.input_ids``.  Arguments are validated at the call; the
        work starts with the first step.
    """
    grid = check_ratios(ratios)
    check_segment(segment)
    precomputed = importances is not None
    measure = _checked_measure(method, precomputed, method_params)
    recursive = resolve_recursive(measure, recursive=recursive, precomputed=precomputed)
    targets = np.asarray(target_idx, dtype=np.int64)
    if targets.shape != (len(encoding),):
        raise ValueError(f"target_idx must have shape ({len(encoding)},), got {targets.shape}.")
    scores = None
    if precomputed:
        eligible = eligible_masks(clf, encoding, segment=segment)[0]
        scores = check_covered(importance_arrays(importances, encoding), eligible)
    if batch_size is None:
        batch_size = clf.batch_size if measure is not None and measure.uses_gradients else clf.inference_batch_size_
    tokenizer = clf.tokenizer_
    options = dict(mask_token_id=tokenizer.mask_token_id, recursive=recursive, segment=segment,
                   autocast_dtype=autocast_dtype_for(clf, measure, precision),
                   generator=torch.Generator(device="cpu").manual_seed(resolve_seed(random_state, clf.random_state)),
                   internal_batch_size=internal_batch_size, **method_params)
    label = measure.name if measure is not None else method

    def steps():
        masked = _masked_sets(clf, encoding, targets, measure, grid, scores, batch_size, options, label)
        yield from zip(grid.tolist(), masked)

    return steps()


def _masked_sets(clf, encoding, targets, measure, grid, scores, batch_size, options, label) -> list:
    """Run :func:`iter_batch_masking` batch by batch; ``out[step][i]`` = masked ids of example ``i``."""
    device, pad = clf.device_, clf.tokenizer_.pad_token_id

    def run(idx):
        batch = collate(encoding, idx, pad_token_id=pad).to(device)
        given = None if scores is None else _padded(scores, idx, batch.input_ids.shape[1]).to(device)
        target = torch.as_tensor(targets[idx], device=device)
        steps = iter_batch_masking(clf.model_, batch, target, method=measure, ratios=grid, importance=given, **options)
        return [ids for _, ids in steps]

    return map_batches(run, encoding.lengths, batch_size, ragged=True, desc=f"faithfulness ({label})",
                       verbose=getattr(clf, "verbose", 0), generator=options["generator"])


def _padded(scores: list, idx, width: int) -> torch.Tensor:
    out = np.zeros((len(idx), width), dtype=np.float64)
    for row, i in enumerate(idx):
        out[row, : len(scores[i])] = scores[i]
    return torch.from_numpy(out)




@keyword_only
def eligible_masks(clf, encoding, *, segment: str, input_ids=None) -> tuple[list, list]:
    """Per example: the eligible positions and which of them hold the mask token."""
    batch = collate(encoding, np.arange(len(encoding)), pad_token_id=clf.tokenizer_.pad_token_id, input_ids=input_ids)
    eligible = eligible_positions(batch, segment=segment).numpy()
    masked = eligible & (batch.input_ids.numpy() == clf.tokenizer_.mask_token_id)
    lengths = encoding.lengths
    return [eligible[i, :n] for i, n in enumerate(lengths)], [masked[i, :n] for i, n in enumerate(lengths)]

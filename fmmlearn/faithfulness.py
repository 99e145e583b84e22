"""Faithfulness by explainer masking (SPEC section 5): curves, ACU/RACU, scorers, reports.

An explanation is faithful when the tokens it calls important really matter
to the model.  For a classifier fine-tuned with masking, masked inputs are
in-distribution, so this can be measured directly: mask the top ``r`` share
of segment-A tokens by importance, for ``r = 0, 0.1, ..., 1``, and follow the
performance on the masked set.  The faster it drops compared with masking
random tokens (the ``rand`` measure), the more faithful the explanation; the
area between the two curves is ACU, and its ratio to the largest possible
area is RACU.

Layers, from the bottom:

* :func:`iter_batch_masking` -- the masking loop of SPEC 5.1 on one padded
  :class:`~fmmlearn.encoding.Batch` and any model (toy models included);
* :func:`iter_explainer_masking` -- the same over a whole
  :class:`~fmmlearn.encoding.Encoding` of a fitted classifier, batch by batch,
  yielding ``(ratio, masked ids)`` per step (the in-distribution report reuses
  it to get the masked test sets);
* :func:`faithfulness_curve`, :func:`random_masking_curve` -- tidy DataFrames;
* :func:`acu`, :func:`racu` -- summary numbers of SPEC 5.2;
* :func:`make_faithfulness_scorer`, :func:`faithfulness_score` -- scikit-learn
  scorers for ``GridSearchCV`` / ``cross_validate``;
* :func:`faithfulness_report` -- several measures, repeats and bootstrap CIs.

Only the classifier's public low-level API is used (``encode``,
``encoded_logits``, ``model_``, ``tokenizer_``, ``classes_``, ``device_``,
``inference_dtype_``, ``inference_batch_size_``, ``batch_size``,
``random_state``, ``verbose``).
"""

from __future__ import annotations

import inspect
import numbers
import warnings
from functools import partial
from typing import Iterator, NamedTuple

import numpy as np
import pandas as pd
import torch

from .encoding import collate
from .explanation import autocast_dtype_for, resolve_seed, resolve_targets, run_over_batches
from .importance import compute_importance, get_measure
from .masking import eligible_positions, fixed_count_masking, mask_counts, mask_top_k, maskable_positions
from .metrics import get_metric
from .metrics import greater_is_better as _metric_greater_is_better

__all__ = [
    "CURVE_COLUMNS",
    "DEFAULT_RATIOS",
    "FaithfulnessReport",
    "FaithfulnessScorer",
    "FaithfulnessWarning",
    "acu",
    "check_ratios",
    "faithful_refit",
    "faithfulness_curve",
    "faithfulness_report",
    "faithfulness_score",
    "iter_batch_masking",
    "iter_explainer_masking",
    "make_faithfulness_scorer",
    "racu",
    "random_masking_curve",
]

#: The paper's masking ratios: 0, 0.1, ..., 1.0 (SPEC 5.1).
DEFAULT_RATIOS = tuple(k / 10 for k in range(11))
#: Columns of a curve DataFrame, in order.
CURVE_COLUMNS = ("method", "ratio", "metric", "value", "n_examples", "mean_masked_fraction")
SEGMENTS = ("first", "all")
#: Name of the random-baseline measure (SPEC 5.2).
BASELINE = "rand"
#: ``method`` label of :func:`random_masking_curve` rows.
RANDOM_MASKING = "random-masking"
DEFAULT_REPORT_METHODS = ("grad-l2", "inp-grad-sign", "loo-sign")
_FRAME_OPTIONS = ("precision", "internal_batch_size")


class FaithfulnessWarning(UserWarning):
    """A faithfulness number could not be formed (e.g. a flat random curve); the result is NaN."""


# --------------------------------------------------------------------------- validation


def check_ratios(ratios=None, name: str = "ratios", *, endpoints: bool = False) -> np.ndarray:
    """Validate a masking-ratio grid.

    Parameters
    ----------
    ratios : array-like of float, optional
        Strictly increasing values in ``[0, 1]``; ``None`` is
        :data:`DEFAULT_RATIOS`.
    name : str, default="ratios"
        Argument name used in error messages.
    endpoints : bool, default=False
        Also require the grid to start at 0 and end at 1 (ACU and RACU
        integrate over the whole ``[0, 1]``).

    Returns
    -------
    ndarray of float64

    Raises
    ------
    ValueError
        Naming ``name``, for an empty, unsorted, repeated, non-finite or
        out-of-range grid.
    """
    if ratios is None:
        ratios = DEFAULT_RATIOS
    try:
        grid = np.asarray(ratios, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numbers in [0, 1], got {ratios!r}.") from exc
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of numbers in [0, 1], got {ratios!r}.")
    if not np.all(np.isfinite(grid)) or grid.min() < 0 or grid.max() > 1:
        raise ValueError(f"{name} must lie in [0, 1], got {grid.tolist()}.")
    if np.any(np.diff(grid) <= 0):
        raise ValueError(f"{name} must be sorted in increasing order without repeats, got {grid.tolist()}.")
    if endpoints and (grid[0] != 0 or grid[-1] != 1):
        raise ValueError(f"{name} must start at 0 and end at 1 for ACU/RACU, got {grid.tolist()}.")
    return grid


def _check_segment(segment) -> str:
    if not (isinstance(segment, str) and segment in SEGMENTS):
        raise ValueError(f"segment must be one of {SEGMENTS}, got {segment!r}.")
    return segment


def _resolve_recursive(measure, recursive, precomputed: bool) -> bool:
    """The measure's default (SPEC 4.3) unless told; precomputed scores cannot be recomputed."""
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
    measure = get_measure(method)
    measure.bind(method_params)
    return measure


def _derive_seed(seed: int, *keys: int) -> int:
    """An independent seed for a sub-stream (e.g. repeat ``i`` of the baseline)."""
    return int(np.random.SeedSequence([seed, *keys]).generate_state(1)[0])


# --------------------------------------------------------------------------- the masking loop


def _finite_scores(importance: torch.Tensor) -> torch.Tensor:
    # mask_top_k ranks already-masked tokens at +inf and ineligible ones at -inf;
    # clamping keeps a user's +-inf from tying with those sentinels.
    big = torch.finfo(torch.float64).max / 4
    return importance.double().clamp(-big, big)


def _rows(batch, rows: torch.Tensor, input_ids: torch.Tensor):
    """The sub-batch of ``rows`` with the current ids."""
    pick = lambda t: None if t is None else t[rows]  # noqa: E731
    return type(batch)(input_ids[rows], batch.attention_mask[rows], batch.special_tokens_mask[rows],
                       batch.segment_ids[rows], pick(batch.token_type_ids), batch.index[rows])


def iter_batch_masking(
    model,
    batch,
    target: torch.Tensor,
    method="loo-sign",
    ratios=None,
    *,
    mask_token_id: int,
    recursive: bool | None = None,
    segment: str = "first",
    importance: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    autocast_dtype: torch.dtype | None = None,
    internal_batch_size: int = 64,
    **method_params,
) -> Iterator[tuple[float, torch.Tensor]]:
    """Explainer masking of one batch (SPEC 5.1), one step per ratio.

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
    method : str or Measure, default="loo-sign"
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
    internal_batch_size : int, default=64
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
    recursive = _resolve_recursive(measure, recursive, importance is not None)
    eligible = eligible_positions(batch, _check_segment(segment))

    def explain(rows: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        sub = batch.with_input_ids(input_ids) if rows is None else _rows(batch, rows, input_ids)
        return compute_importance(
            model, sub, target if rows is None else target[rows], measure, mask_token_id=mask_token_id,
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
                ids = mask_top_k(ids, _finite_scores(scores), eligible, ratio, mask_token_id)
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


def iter_explainer_masking(
    clf,
    encoding,
    target_idx,
    method="loo-sign",
    ratios=None,
    recursive: bool | None = None,
    segment: str = "first",
    *,
    importances=None,
    random_state=None,
    batch_size: int | None = None,
    precision: str | None = None,
    internal_batch_size: int = 64,
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
    method : str, default="loo-sign"
        Importance measure (see :func:`fmmlearn.importance.get_measure`).
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
        ``None``: the classifier's inference precision for forward-only
        measures, fp32 for gradient measures.
    internal_batch_size : int, default=64
        Perturbed copies per forward pass (leave-one-out, beam search, IG).
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
    _check_segment(segment)
    precomputed = importances is not None
    measure = _checked_measure(method, precomputed, method_params)
    recursive = _resolve_recursive(measure, recursive, precomputed)
    targets = np.asarray(target_idx, dtype=np.int64)
    if targets.shape != (len(encoding),):
        raise ValueError(f"target_idx must have shape ({len(encoding)},), got {targets.shape}.")
    scores = None
    if precomputed:
        scores = _check_covered(_importance_arrays(importances, encoding), _eligible_masks(clf, encoding, segment)[0])
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
        batch = collate(encoding, idx, pad).to(device)
        given = None if scores is None else _padded(scores, idx, batch.input_ids.shape[1]).to(device)
        target = torch.as_tensor(targets[idx], device=device)
        steps = iter_batch_masking(clf.model_, batch, target, measure, grid, importance=given, **options)
        return [ids.cpu().numpy() for _, ids in steps]

    parts = run_over_batches(clf, encoding, batch_size, run, f"faithfulness ({label})")
    masked = [[None] * len(encoding) for _ in grid]
    for idx, batch_steps in parts:
        for step, ids in zip(masked, batch_steps):
            for row, i in enumerate(idx):
                step[i] = ids[row, : len(encoding.input_ids[i])]
    return masked


# --------------------------------------------------------------------------- precomputed importances


def _padded(scores: list, idx, width: int) -> torch.Tensor:
    out = np.zeros((len(idx), width), dtype=np.float64)
    for row, i in enumerate(idx):
        out[row, : len(scores[i])] = scores[i]
    return torch.from_numpy(out)


def _importance_arrays(importances, encoding) -> list:
    """Precomputed importances as one float64 array per example, aligned to the encoding."""
    lengths = encoding.lengths
    if isinstance(importances, pd.DataFrame):
        return _importances_from_frame(importances, lengths)
    if isinstance(importances, np.ndarray) and importances.ndim == 2:
        if importances.shape[0] != len(lengths) or importances.shape[1] < lengths.max():
            raise ValueError(f"importances has shape {importances.shape}; expected ({len(lengths)}, T) with "
                             f"T >= {lengths.max()} (the longest encoded example).")
        rows = [importances[i, :n] for i, n in enumerate(lengths)]
    elif isinstance(importances, (list, tuple)):
        rows = list(importances)
    else:
        raise TypeError("importances must be a list of per-example arrays, an (n_samples, T) array or a "
                        f"DataFrame with columns example/position/importance, got {type(importances).__name__}.")
    if len(rows) != len(lengths):
        raise ValueError(f"importances has {len(rows)} entries but X has {len(lengths)} examples.")
    out = []
    for i, (row, n) in enumerate(zip(rows, lengths)):
        row = np.asarray(row, dtype=np.float64).ravel()
        if len(row) != n:
            raise ValueError(f"importances[{i}] has {len(row)} values but example {i} has {n} tokens "
                             "(special tokens included); align scores with clf.encode(X).input_ids.")
        out.append(row)
    return out


def _importances_from_frame(frame: pd.DataFrame, lengths) -> list:
    missing = {"example", "position", "importance"} - set(frame.columns)
    if missing:
        raise ValueError(f"importances DataFrame lacks column(s) {sorted(missing)}; expected the long format "
                         "of explain(): example, position, importance.")
    if "method" in frame.columns and frame["method"].nunique() > 1:
        raise ValueError("importances DataFrame holds several methods; pass one method's rows.")
    example = frame["example"].to_numpy(dtype=np.int64)
    position = frame["position"].to_numpy(dtype=np.int64)
    if len(frame) and (example.min() < 0 or example.max() >= len(lengths)
                       or position.min() < 0 or np.any(position >= lengths[example])):
        raise ValueError("importances DataFrame has example/position values outside the encoded input.")
    # NaN marks positions the frame does not cover; an eligible one among them is an error.
    out = [np.full(n, np.nan) for n in lengths]
    for i, p, v in zip(example, position, frame["importance"].to_numpy(dtype=np.float64)):
        out[i][p] = v
    return out


def _check_covered(scores: list, eligible: list) -> list:
    """NaN (no score) is allowed only where nothing is masked; it becomes 0 there."""
    out = []
    for i, (row, elig) in enumerate(zip(scores, eligible)):
        gaps = np.flatnonzero(np.isnan(row) & elig)
        if len(gaps):
            raise ValueError(f"importances has no score (NaN or a missing row) for example {i} at maskable "
                             f"position(s) {gaps[:5].tolist()}; every token masking may hit needs one "
                             "(use -inf for 'mask last').")
        out.append(np.where(np.isnan(row), 0.0, row))
    return out


# --------------------------------------------------------------------------- curves


def _eligible_masks(clf, encoding, segment: str, input_ids=None) -> tuple[list, list]:
    """Per example: the eligible positions and which of them hold the mask token."""
    batch = collate(encoding, np.arange(len(encoding)), clf.tokenizer_.pad_token_id, input_ids=input_ids)
    eligible = eligible_positions(batch, segment).numpy()
    masked = eligible & (batch.input_ids.numpy() == clf.tokenizer_.mask_token_id)
    lengths = encoding.lengths
    return [eligible[i, :n] for i, n in enumerate(lengths)], [masked[i, :n] for i, n in enumerate(lengths)]


def _mean_masked_fraction(clf, encoding, input_ids, segment: str) -> float:
    eligible, masked = _eligible_masks(clf, encoding, segment, input_ids)
    fractions = [m.sum() / e.sum() for e, m in zip(eligible, masked) if e.any()]
    return float(np.mean(fractions)) if fractions else float("nan")


def _metric_value(metric, clf, y_true, logits: np.ndarray) -> float:
    if metric.needs_proba:
        proba = torch.softmax(torch.from_numpy(logits).double(), dim=1).numpy()
        return metric(y_true, proba, labels=clf.classes_)
    return metric(y_true, clf.classes_[logits.argmax(axis=1)], labels=clf.classes_)


def _curve_frame(clf, encoding, y_true, steps, metric, method: str, segment: str,
                 endpoints: dict | None = None) -> pd.DataFrame:
    """Evaluate every ``(ratio, masked ids)`` step on the whole set: one row per ratio.

    ``endpoints`` caches the scores at ``r = 0`` (clean) and ``r = 1`` (all
    masked), which every curve of the same set, segment and metric shares.
    """
    rows = []
    for ratio, ids in steps:
        cached = endpoints is not None and ratio in (0.0, 1.0)
        if not cached or ratio not in endpoints:
            logits = clf.encoded_logits(encoding, input_ids=ids)
            score = (_metric_value(metric, clf, y_true, logits), _mean_masked_fraction(clf, encoding, ids, segment))
            if cached:
                endpoints[ratio] = score
        value, fraction = endpoints[ratio] if cached else score
        rows.append((method, ratio, metric.name, value, len(encoding), fraction))
    frame = pd.DataFrame(rows, columns=list(CURVE_COLUMNS))
    frame.attrs["greater_is_better"] = metric.greater_is_better  # read by acu/racu (custom metrics)
    return frame


def _gold(clf, encoding, y):
    """Gold labels as class indices (the explanation target) and as ``classes_`` values (for the metric)."""
    if y is None:
        raise ValueError("y is required: a faithfulness curve measures performance against the gold labels.")
    target_idx = resolve_targets(clf, encoding, y=y)
    return target_idx, clf.classes_[target_idx]


def _encoded_curve(clf, encoding, target_idx, method, *, ratios=None, recursive=None, segment="first",
                   metric=None, random_state=None, importances=None, batch_size=None, endpoints=None,
                   **method_params):
    metric = get_metric("accuracy" if metric is None else metric)
    label = (method if isinstance(method, str) else "precomputed") if importances is not None \
        else get_measure(method).name
    steps = iter_explainer_masking(clf, encoding, target_idx, method, ratios, recursive, segment,
                                   importances=importances, random_state=random_state, batch_size=batch_size,
                                   **method_params)
    return _curve_frame(clf, encoding, clf.classes_[target_idx], steps, metric, label, segment, endpoints)


def faithfulness_curve(
    clf,
    X,
    y,
    method="loo-sign",
    ratios=None,
    recursive: bool | None = None,
    segment: str = "first",
    metric=None,
    random_state=None,
    importances=None,
    batch_size: int | None = None,
    **method_params,
) -> pd.DataFrame:
    """Performance of ``clf`` while masking the tokens an explanation ranks highest (SPEC 5.1).

    At each ratio ``r`` the top ``floor(r * n)`` segment-A tokens of every
    example are replaced by the mask token, ranked by importance for the gold
    label (the paper's target); the masks only grow from one ratio to the
    next.  Recursive measures (the default for all but ``beam-*``) are
    recomputed on the partly masked input before every step.  ``r = 0`` is the
    clean input and ``r = 1`` masks every eligible token.  The whole set is
    scored with ``metric`` at each ratio.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs
    y : array-like of shape (n_samples,)
        Gold labels (values of ``clf.classes_``).
    method : str, default="loo-sign"
        Importance measure: ``rand``, ``grad-l2``, ``grad-l1``,
        ``inp-grad-sign``, ``inp-grad-abs``, ``int-grad-sign``,
        ``int-grad-abs``, ``loo-sign``, ``loo-abs`` or ``beam-sign-K``.  With
        ``importances`` it is only the label of the curve (any string).
    ratios : array-like of float, optional
        Strictly increasing in ``[0, 1]``; default ``0, 0.1, ..., 1.0``.
    recursive : bool, optional
        Recompute the importance at every step; default the measure's own.
    segment : {"first", "all"}, default="first"
        Mask segment A only (the paper; segment B of pairs is context) or
        every non-special token.
    metric : str, Metric or callable, optional
        Default ``"accuracy"``; any name :func:`fmmlearn.metrics.get_metric`
        knows (``"macro_f1"``, ``"matthew"``, ``"loss"``/``"log_loss"`` =
        cross-entropy from the probabilities, scikit-learn scorer names) or
        a callable ``metric(y_true, y_pred)``.
    random_state : int, optional
        Seed of ``rand``; default ``clf.random_state``.
    importances : list of ndarray, ndarray or DataFrame, optional
        Precomputed scores of the clean inputs, e.g. from Captum, scored as
        a non-recursive curve (higher = masked first):

        * a list with one 1-D array per example, aligned with
          ``clf.encode(X).input_ids[i]`` (special tokens included; their
          values are ignored);
        * an ``(n_samples, T)`` array, ``T`` at least the longest encoded
          example, positions beyond an example's length ignored;
        * the long DataFrame of ``clf.explain`` (columns ``example``,
          ``position``, ``importance``), which must cover every position
          masking may hit.
    batch_size : int, optional
        Examples per batch for the importance computation.
    **method_params
        ``precision`` and ``internal_batch_size`` (see
        :func:`iter_explainer_masking`), and the measure's parameters (e.g.
        ``n_steps=20``).

    Returns
    -------
    pandas.DataFrame
        One row per ratio with columns ``method``, ``ratio``, ``metric``,
        ``value``, ``n_examples`` and ``mean_masked_fraction`` (the realised
        share of eligible tokens masked, averaged over examples with any).

    Raises
    ------
    ValueError
        Unknown method or parameter, bad ``ratios``/``segment``, ``y`` of the
        wrong length or with unknown labels, malformed ``importances``.

    Examples
    --------
    >>> curve = faithfulness_curve(clf, X_test, y_test, method="inp-grad-sign")   # doctest: +SKIP
    >>> curve[["ratio", "value"]]                                                 # doctest: +SKIP
    """
    encoding = clf.encode(X)
    target_idx, _ = _gold(clf, encoding, y)
    return _encoded_curve(clf, encoding, target_idx, method, ratios=ratios, recursive=recursive, segment=segment,
                          metric=metric, random_state=random_state, importances=importances,
                          batch_size=batch_size, **method_params)


def _iter_random_masking(clf, encoding, grid, seed: int) -> Iterator[tuple[float, list]]:
    batch = collate(encoding, np.arange(len(encoding)), clf.tokenizer_.pad_token_id)
    maskable = maskable_positions(batch.attention_mask, batch.special_tokens_mask)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    for ratio in grid.tolist():
        ids = fixed_count_masking(batch.input_ids, maskable, ratio, clf.tokenizer_.mask_token_id, generator).numpy()
        yield ratio, [ids[i, :n] for i, n in enumerate(encoding.lengths)]


def random_masking_curve(clf, X, y, ratios=None, metric=None, random_state=None) -> pd.DataFrame:
    """Performance under random masking of all maskable tokens (both segments), ratio by ratio.

    The paper's check that the fine-tuned model tolerates masking: at each
    ratio exactly ``floor(r * n)`` random non-special tokens of each clean
    example are masked (RandomFixedMasking, SPEC 3.1), independently per
    ratio.  A model fine-tuned without masking typically collapses here.  This
    is *not* the baseline of ACU/RACU (that is the ``rand`` explanation curve,
    which masks segment A only and cumulatively).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs
    y : array-like of shape (n_samples,)
    ratios : array-like of float, optional
        Default ``0, 0.1, ..., 1.0``.
    metric : str, Metric or callable, optional
        Default ``"accuracy"`` (see :func:`faithfulness_curve`).
    random_state : int, optional
        Default ``clf.random_state``.

    Returns
    -------
    pandas.DataFrame
        Columns as :func:`faithfulness_curve`, ``method = "random-masking"``;
        ``mean_masked_fraction`` is over all maskable tokens.
    """
    grid = check_ratios(ratios)
    encoding = clf.encode(X)
    target_idx, y_true = _gold(clf, encoding, y)
    steps = _iter_random_masking(clf, encoding, grid, resolve_seed(random_state, clf.random_state))
    return _curve_frame(clf, encoding, y_true, steps, get_metric("accuracy" if metric is None else metric),
                        RANDOM_MASKING, "all")


# --------------------------------------------------------------------------- ACU and RACU


def _curve_arrays(curve, name: str, ratios):
    """``(ratios, values, (metric name, greater_is_better) or None)`` of a curve DataFrame or value array."""
    if isinstance(curve, pd.DataFrame):
        missing = {"ratio", "value"} - set(curve.columns)
        if missing:
            raise ValueError(f"{name} lacks column(s) {sorted(missing)}; expected a curve DataFrame.")
        for column in ("method", "repeat", "metric"):
            if column in curve.columns and curve[column].nunique() > 1:
                raise ValueError(f"{name} holds several curves (column {column!r} has "
                                 f"{curve[column].nunique()} values); select one.")
        ordered = curve.sort_values("ratio", kind="stable")
        return check_ratios(ordered["ratio"].to_numpy(), f"{name}['ratio']", endpoints=True), \
            ordered["value"].to_numpy(dtype=np.float64), _direction(curve)
    values = np.asarray(curve, dtype=np.float64)
    if values.ndim != 1 or values.size < 2:
        raise ValueError(f"{name} must be a curve DataFrame or a 1-D array of at least 2 values, got shape "
                         f"{values.shape}.")
    grid = np.linspace(0.0, 1.0, values.size) if ratios is None else check_ratios(ratios, endpoints=True)
    if grid.size != values.size:
        raise ValueError(f"{name} has {values.size} values but ratios has {grid.size}.")
    return grid, values, None


def _direction(curve: pd.DataFrame):
    """``(metric name, greater_is_better)`` of a curve frame; ``None`` where it does not say."""
    if "metric" not in curve.columns or not len(curve):
        return None
    name = curve["metric"].iloc[0]
    if "greater_is_better" in curve.attrs:
        return name, bool(curve.attrs["greater_is_better"])
    try:
        return name, _metric_greater_is_better(name)
    except (ValueError, TypeError):  # a custom metric's name: assume greater is better
        return name, True


def _aligned(curve, random_curve, ratios, greater_is_better):
    grid, p_im, direction = _curve_arrays(curve, "curve", ratios)
    grid_rand, p_rand, direction_rand = _curve_arrays(random_curve, "random_curve", ratios)
    if grid.shape != grid_rand.shape or not np.allclose(grid, grid_rand):
        raise ValueError(f"curve and random_curve have different ratio grids: {grid.tolist()} vs "
                         f"{grid_rand.tolist()}.")
    if direction is not None and direction_rand is not None and direction[0] != direction_rand[0]:
        raise ValueError(f"curve and random_curve use different metrics: {direction[0]!r} vs "
                         f"{direction_rand[0]!r}.")
    if greater_is_better is None:
        known = direction or direction_rand
        greater_is_better = True if known is None else known[1]
    return grid, p_im, p_rand, 1.0 if greater_is_better else -1.0


def _area(grid: np.ndarray, values: np.ndarray) -> float:
    """Trapezoid rule on the actual grid."""
    return float(np.sum(np.diff(grid) * (values[1:] + values[:-1]) / 2.0))


def acu(curve, random_curve, *, ratios=None, greater_is_better: bool | None = None) -> float:
    """Area between the random curve and an explanation's curve (SPEC 5.2).

    ``ACU = sum_k (r_k - r_{k-1}) / 2 * [(p_rand(r_k) - p(r_k)) + (p_rand(r_{k-1}) - p(r_{k-1}))]``.
    Positive: masking the explanation's important tokens hurts performance
    more than masking random ones (more faithful than random).  For a metric
    where lower is better (a loss) the sign is flipped, so positive still
    means more faithful.

    Parameters
    ----------
    curve, random_curve : DataFrame or array-like
        Curve DataFrames (columns ``ratio``, ``value``; ``metric`` is used to
        infer the direction) such as :func:`faithfulness_curve` returns, or
        arrays of metric values.  ``random_curve`` is the ``rand`` curve of
        the same model on the same data.
    ratios : array-like, optional
        Only for arrays: the grid, which must start at 0 and end at 1;
        default evenly spaced (``0, 0.1, ..., 1`` for 11 values).
    greater_is_better : bool, optional
        Direction of the metric; default inferred from the frames' ``metric``
        column, else True.

    Returns
    -------
    float

    Examples
    --------
    >>> acu([1.0, 0.5, 0.5], [1.0, 1.0, 0.5])
    0.25
    """
    grid, p_im, p_rand, sign = _aligned(curve, random_curve, ratios, greater_is_better)
    return sign * _area(grid, p_rand - p_im)


def racu(curve, random_curve, *, ratios=None, greater_is_better: bool | None = None) -> float:
    """ACU relative to the largest area random masking leaves (SPEC 5.2).

    ``RACU = ACU / MAX`` with ``MAX`` the area between the random curve and
    its fully-masked end ``p_rand(1)``.  1 means the curve drops at once to the
    fully-masked level; it can exceed 1 (dropping below it, e.g. for signed
    measures) and be negative (less faithful than random).  The direction of
    the metric flips ACU and MAX alike, so the ratio keeps its meaning.

    Parameters
    ----------
    curve, random_curve, ratios, greater_is_better
        See :func:`acu`.

    Returns
    -------
    float
        NaN, with a :class:`FaithfulnessWarning`, when ``MAX = 0`` (a flat
        random curve: masking does not change performance).

    Examples
    --------
    >>> round(racu([1.0, 0.5, 0.5], [1.0, 1.0, 0.5]), 4)
    0.6667
    """
    grid, p_im, p_rand, sign = _aligned(curve, random_curve, ratios, greater_is_better)
    largest = sign * _area(grid, p_rand - p_rand[-1])
    if largest == 0 or not np.isfinite(largest):
        warnings.warn("RACU is undefined: the random curve is flat (or not finite), so the area it leaves "
                      f"is {largest}; returning NaN.", FaithfulnessWarning, stacklevel=2)
        return float("nan")
    return sign * _area(grid, p_rand - p_im) / largest


# --------------------------------------------------------------------------- scorer


def _baseline_values(clf, encoding, target_idx, seeds, **options) -> pd.DataFrame:
    """The ``rand`` curve averaged over one run per seed."""
    curves = [_encoded_curve(clf, encoding, target_idx, BASELINE, random_state=s, **options) for s in seeds]
    mean = curves[0].copy()
    mean["value"] = np.mean([c["value"].to_numpy() for c in curves], axis=0)
    return mean


def _has_eligible(clf, encoding, segment: str) -> bool:
    eligible, _ = _eligible_masks(clf, encoding, segment)
    return any(e.any() for e in eligible)


class FaithfulnessScorer:
    """A scikit-learn scorer ``scorer(estimator, X, y) -> float``: RACU (or ACU) of an explanation.

    Build it with :func:`make_faithfulness_scorer`; the attributes are its
    parameters (see there).  Greater is better.  Picklable, so it works with
    ``n_jobs > 1``.
    """

    def __init__(self, method="loo-sign", metric="accuracy", ratios=DEFAULT_RATIOS, relative=True, n_random=1,
                 random_state=0, segment="first", recursive=None, max_samples=None, method_params=None):
        self.method = method
        self.metric = metric
        self.ratios = ratios
        self.relative = relative
        self.n_random = n_random
        self.random_state = random_state
        self.segment = segment
        self.recursive = recursive
        self.max_samples = max_samples
        self.method_params = dict(method_params or {})

    def get_params(self, deep: bool = True) -> dict:
        """The scorer's parameters (as :func:`make_faithfulness_scorer` takes them)."""
        return {"method": self.method, "metric": self.metric, "ratios": self.ratios, "relative": self.relative,
                "n_random": self.n_random, "random_state": self.random_state, "segment": self.segment,
                "recursive": self.recursive, "max_samples": self.max_samples, **self.method_params}

    def __repr__(self) -> str:
        params = self.get_params()
        if tuple(params["ratios"]) == DEFAULT_RATIOS:
            params.pop("ratios")
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
        return f"make_faithfulness_scorer({shown})"

    def _subsample(self, X, y):
        if self.max_samples is None or len(y) <= self.max_samples:
            return X, y
        rng = np.random.default_rng(_derive_seed(resolve_seed(self.random_state, 0), 2))
        keep = np.sort(rng.choice(len(y), size=self.max_samples, replace=False))
        rows = X.iloc[keep] if isinstance(X, (pd.Series, pd.DataFrame)) else [X[i] for i in keep]
        return rows, np.asarray(y)[keep]

    def __call__(self, estimator, X, y, **kwargs) -> float:
        """Score a fitted classifier on ``(X, y)``: NaN with a warning if no curve can be formed."""
        X, y = self._subsample(X, y)
        encoding = estimator.encode(X)
        target_idx, _ = _gold(estimator, encoding, y)
        if not _has_eligible(estimator, encoding, self.segment):
            warnings.warn(f"no token of X can be masked (segment={self.segment!r}); the faithfulness score is "
                          "NaN.", FaithfulnessWarning, stacklevel=2)
            return float("nan")
        options = dict(ratios=self.ratios, segment=self.segment, metric=self.metric, endpoints={})
        seed = resolve_seed(self.random_state, 0)
        curve = _encoded_curve(estimator, encoding, target_idx, self.method, recursive=self.recursive,
                               random_state=_derive_seed(seed, 1), **options, **self.method_params)
        baseline = _baseline_values(estimator, encoding, target_idx,
                                    [_derive_seed(seed, 0, i) for i in range(self.n_random)], **options)
        direction = get_metric(self.metric).greater_is_better
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FaithfulnessWarning)
            value = (racu if self.relative else acu)(curve, baseline, greater_is_better=direction)
        if not np.isfinite(value):
            warnings.warn("the random curve is flat (masking does not change the metric), so RACU is undefined; "
                          "the faithfulness score is NaN.", FaithfulnessWarning, stacklevel=2)
        return float(value)


def make_faithfulness_scorer(
    method="loo-sign",
    *,
    metric="accuracy",
    ratios=None,
    relative: bool = True,
    n_random: int = 1,
    random_state=0,
    segment: str = "first",
    recursive: bool | None = None,
    max_samples: int | None = None,
    **method_params,
) -> FaithfulnessScorer:
    """Make a scikit-learn scorer measuring how faithful an explanation of the estimator is.

    The scorer computes :func:`faithfulness_curve` of ``method`` and of the
    random baseline ``rand`` on the scoring data and returns RACU (or ACU).

    Parameters
    ----------
    method : str, default="loo-sign"
        Importance measure.  Leave-one-out costs ``n + 1`` forward passes per
        example and step; ``inp-grad-sign`` (one backward pass) is much cheaper
        for model selection.
    metric : str, Metric or callable, default="accuracy"
        Performance metric of the curves (``"loss"`` works too; the score
        stays greater-is-better).
    ratios : array-like of float, optional
        Must start at 0 and end at 1; default ``0, 0.1, ..., 1``.
    relative : bool, default=True
        Return RACU (comparable across models and datasets); ``False``
        returns ACU.
    n_random : int, default=1
        Number of ``rand`` curves averaged into the baseline (less noise).
    random_state : int, default=0
        Seed of the baseline (and of ``rand`` as ``method``, and the
        subsample).
    segment : {"first", "all"}, default="first"
    recursive : bool, optional
        Default: the measure's own.
    max_samples : int, optional
        Score a fixed random subsample of at most this many examples (cost
        control).
    **method_params
        Passed to the measure (and ``precision``, ``internal_batch_size``).

    Returns
    -------
    FaithfulnessScorer

    Raises
    ------
    ValueError
        For an unknown method or metric, bad ratios, ``n_random < 1`` or
        ``max_samples < 1``.

    Examples
    --------
    >>> from sklearn.model_selection import GridSearchCV
    >>> scorer = make_faithfulness_scorer("inp-grad-sign", n_random=3)
    >>> search = GridSearchCV(clf, {"max_masking_ratio": [0.0, 1.0]},           # doctest: +SKIP
    ...                       scoring={"accuracy": "accuracy", "faithfulness": scorer},
    ...                       refit=faithful_refit(tolerance=0.02))
    """
    measure = get_measure(method)
    measure.bind({k: v for k, v in method_params.items() if k not in _FRAME_OPTIONS})
    get_metric(metric)
    grid = tuple(check_ratios(ratios, endpoints=True).tolist())
    _check_segment(segment)
    _resolve_recursive(measure, recursive, False)
    for value, name in ((n_random, "n_random"), (max_samples if max_samples is not None else 1, "max_samples")):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    resolve_seed(random_state, 0)
    return FaithfulnessScorer(measure.name, metric, grid, bool(relative), int(n_random), random_state, segment,
                              recursive, max_samples, method_params)


_DEFAULT_SCORER = FaithfulnessScorer()


def faithfulness_score(estimator, X, y) -> float:
    """RACU of ``loo-sign`` against the ``rand`` curve, accuracy, ratios 0..1: a ready-made scorer.

    Greater is better; NaN (with a :class:`FaithfulnessWarning`) when no curve
    can be formed.  Use :func:`make_faithfulness_scorer` for other settings.

    Parameters
    ----------
    estimator : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs
    y : array-like of shape (n_samples,)

    Returns
    -------
    float
    """
    return _DEFAULT_SCORER(estimator, X, y)


def _refit_index(cv_results, tolerance, accuracy, faithfulness) -> int:
    acc = np.asarray(cv_results[f"mean_test_{accuracy}"], dtype=np.float64)
    faith = np.asarray(cv_results[f"mean_test_{faithfulness}"], dtype=np.float64)
    admissible = np.flatnonzero(acc >= np.nanmax(acc) - tolerance)
    scores = np.where(np.isnan(faith[admissible]), -np.inf, faith[admissible])
    return int(admissible[np.argmax(scores)])


def faithful_refit(tolerance: float = 0.02, *, accuracy: str = "accuracy", faithfulness: str = "faithfulness"):
    """A ``refit`` rule for multi-metric search: the most faithful model within an accuracy floor.

    Selecting on faithfulness alone can pick a model that is faithful but
    poor; this keeps the candidates whose mean test accuracy is within
    ``tolerance`` of the best, then picks the highest mean faithfulness
    (ties: the earlier candidate).

    Parameters
    ----------
    tolerance : float, default=0.02
        Allowed accuracy loss (absolute).
    accuracy, faithfulness : str
        Keys of the two scorers in ``scoring``.

    Returns
    -------
    callable
        ``refit(cv_results) -> int`` for ``GridSearchCV(refit=...)``.
    """
    if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real) or tolerance < 0:
        raise ValueError(f"tolerance must be a non-negative number, got {tolerance!r}.")
    return partial(_refit_index, tolerance=float(tolerance), accuracy=accuracy, faithfulness=faithfulness)


# --------------------------------------------------------------------------- report


class FaithfulnessReport(NamedTuple):
    """Curves and summary of :func:`faithfulness_report`; unpacks as ``curves, summary``.

    Attributes
    ----------
    curves : pandas.DataFrame
        Curve rows (:data:`CURVE_COLUMNS`) plus ``repeat`` and ``role``
        (``"method"`` or ``"baseline"``).
    summary : pandas.DataFrame
        One row per method: ``method``, ``metric``, ``signed``,
        ``recursive``, ``n_repeats``, ``racu``, ``racu_low``, ``racu_high``,
        ``acu``, ``acu_low``, ``acu_high`` (mean and bootstrap CI over
        repeats).
    """

    curves: pd.DataFrame
    summary: pd.DataFrame

    def plot(self, ax=None, path=None):
        """Draw the curves with the random baseline dashed (see :func:`fmmlearn.plotting.plot_faithfulness`)."""
        from .plotting import plot_faithfulness

        return plot_faithfulness(self.curves, ax=ax, path=path)


def _mean_ci(values, confidence_level: float) -> tuple[float, float, float]:
    """Mean and BCa bootstrap CI (seeded 0), collapsed to the mean when all values are equal (SPEC 5.2)."""
    from scipy.stats import bootstrap

    # scipy >= 1.15 names the seed `rng`; older versions `random_state`
    seed = {"rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state": 0}
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (float("nan"),) * 3
    if np.all(values == values[0]):
        return (float(values[0]),) * 3
    mean = float(values.mean())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BCa on very few values warns about degenerate resamples
        ci = bootstrap((values,), np.mean, confidence_level=confidence_level, **seed).confidence_interval
        if not (np.isfinite(ci.low) and np.isfinite(ci.high)):
            ci = bootstrap((values,), np.mean, confidence_level=confidence_level, method="percentile",
                           **seed).confidence_interval
    return mean, float(ci.low), float(ci.high)


def _summary_row(measure, curves: list, baselines: list, confidence_level: float) -> dict:
    # A deterministic measure has one curve, scored against every repeat's baseline.
    pairs = zip(curves if len(curves) == len(baselines) else curves * len(baselines), baselines)
    scores = [(acu(c, b), racu(c, b)) for c, b in pairs]
    acu_ci = _mean_ci([s[0] for s in scores], confidence_level)
    racu_ci = _mean_ci([s[1] for s in scores], confidence_level)
    return {"method": measure.name, "metric": curves[0]["metric"].iloc[0], "signed": measure.signed,
            "recursive": measure.recursive, "n_repeats": int(np.isfinite([s[1] for s in scores]).sum()),
            "racu": racu_ci[0], "racu_low": racu_ci[1], "racu_high": racu_ci[2],
            "acu": acu_ci[0], "acu_low": acu_ci[1], "acu_high": acu_ci[2]}


def _tagged(curve: pd.DataFrame, repeat: int, role: str) -> pd.DataFrame:
    return curve.assign(repeat=repeat, role=role)


def faithfulness_report(
    clf,
    X,
    y,
    methods=DEFAULT_REPORT_METHODS,
    n_repeats: int = 5,
    ratios=None,
    random_state=None,
    *,
    metric=None,
    segment: str = "first",
    batch_size: int | None = None,
    confidence_level: float = 0.95,
) -> FaithfulnessReport:
    """Faithfulness curves of several importance measures, with RACU/ACU and bootstrap CIs.

    For every repeat a fresh ``rand`` baseline curve is drawn; deterministic
    measures are computed once and scored against each repeat's baseline, so
    the interval reflects the randomness of the baseline (``rand`` itself, if
    listed, is redrawn per repeat with its own seeds and should score about 0).
    With several fine-tuned models (seeds), concatenate their reports.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs
    y : array-like of shape (n_samples,)
    methods : sequence of str, default=("grad-l2", "inp-grad-sign", "loo-sign")
    n_repeats : int, default=5
    ratios : array-like of float, optional
        Must start at 0 and end at 1; default ``0, 0.1, ..., 1``.
    random_state : int, optional
        Default ``clf.random_state``.
    metric : str, Metric or callable, optional
        Default ``"accuracy"``.
    segment : {"first", "all"}, default="first"
    batch_size : int, optional
    confidence_level : float, default=0.95

    Returns
    -------
    FaithfulnessReport
        ``(curves, summary)``; ``report.plot()`` draws the curves.

    Examples
    --------
    >>> report = faithfulness_report(clf, X_test, y_test, methods=["inp-grad-sign", "loo-sign"])  # doctest: +SKIP
    >>> report.summary[["method", "racu", "racu_low", "racu_high"]]                             # doctest: +SKIP
    """
    measures = [get_measure(m) for m in ([methods] if isinstance(methods, str) else list(methods))]
    if not measures:
        raise ValueError("methods must name at least one importance measure.")
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, numbers.Integral) or n_repeats < 1:
        raise ValueError(f"n_repeats must be a positive integer, got {n_repeats!r}.")
    if not (isinstance(confidence_level, numbers.Real) and 0 < confidence_level < 1):
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}.")
    options = dict(ratios=check_ratios(ratios, endpoints=True), segment=_check_segment(segment), metric=metric,
                   batch_size=batch_size, endpoints={})
    encoding = clf.encode(X)
    target_idx, _ = _gold(clf, encoding, y)
    seed = resolve_seed(random_state, clf.random_state)
    curve = partial(_encoded_curve, clf, encoding, target_idx, **options)
    baselines = [curve(BASELINE, random_state=_derive_seed(seed, 0, i)) for i in range(n_repeats)]
    frames = [_tagged(b, i, "baseline") for i, b in enumerate(baselines)]
    rows = []
    for measure in measures:
        stochastic = measure.name == BASELINE
        curves = [curve(measure, random_state=_derive_seed(seed, 1, i)) for i in range(n_repeats if stochastic else 1)]
        frames += [_tagged(c, i, "method") for i, c in enumerate(curves)]
        rows.append(_summary_row(measure, curves, baselines, confidence_level))
    return FaithfulnessReport(pd.concat(frames, ignore_index=True), pd.DataFrame(rows))

"""Explanations of a fitted classifier as tidy DataFrames (one row per token or word).

:func:`explain` is the user-facing function (and what
``FaithfulTextClassifier.explain`` delegates to): texts in, a long DataFrame
out.  :func:`explain_encoded` is the reusable middle layer: an
:class:`~fmmlearn.encoding.Encoding` and target class indices in, one score
array per example out.  Both use only the classifier's public low-level API
(``encode``, ``model_``, ``tokenizer_``, ``classes_``, ``device_``, ...).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ._labels import resolve_targets
from ._random import resolve_seed
from ._validation import SEGMENTS
from .encoding import SEGMENT_A, SEGMENT_B, collate
from .importance import compute_importance, get_measure
from .masking import eligible_positions
from .modeling import autocast_dtype_for, map_batches

__all__ = ["explain", "explain_encoded", "token_frame", "word_frame"]

# ``resolve_targets``, ``resolve_seed`` and ``autocast_dtype_for`` were defined
# here before the runtime moved to ``fmmlearn.modeling``, ``fmmlearn._random``
# and ``fmmlearn._labels``; the imports above keep ``from
# fmmlearn.explanation import ...`` working.

LEVELS = ("token", "word")
AGGREGATES = ("sum", "mean", "max")
_SEGMENT_NAMES = {SEGMENT_A: "A", SEGMENT_B: "B"}


def _check_choice(value, name: str, choices: tuple) -> None:
    if not (isinstance(value, str) and value in choices):
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")


def explain_encoded(
    clf,
    encoding,
    targets_idx,
    method="loo-sign",
    segment: str = "first",
    *,
    batch_size: int | None = None,
    random_state=None,
    precision: str | None = None,
    input_ids=None,
    internal_batch_size: int = 64,
    **method_params,
) -> list[np.ndarray]:
    """Importance scores for an encoding, one array per example (low-level API).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    encoding : Encoding
        From ``clf.encode``.
    targets_idx : array-like of int, shape (n_samples,)
        Class index (into ``clf.classes_``) explained per example.
    method : str, default="loo-sign"
        See :func:`fmmlearn.importance.get_measure`.
    segment : {"first", "all"}, default="first"
        Explain segment A only (the paper) or every non-special token.
    batch_size : int, optional
        Examples per batch; default ``clf.batch_size`` for gradient measures,
        ``clf.inference_batch_size_`` for the others.
    random_state : int, optional
        Seed of ``rand``; default ``clf.random_state``.
    precision : {None, "auto", "fp32", "bf16", "fp16"}, default=None
        ``None``: the classifier's inference precision for forward-only
        measures (leave-one-out, beam search), fp32 for gradient measures.
        ``"auto"`` uses the classifier's precision for all measures.
    input_ids : list of ndarray, optional
        Replacement ids per example (e.g. partially masked copies).
    internal_batch_size : int, default=64
        Perturbed copies / path points per forward pass.
    **method_params
        Passed to the measure (e.g. ``n_steps=20``).

    Returns
    -------
    list of ndarray of float32
        ``scores[i]`` has one entry per token of example ``i`` (special tokens
        included, with score 0), in the caller's order.
    """
    measure = get_measure(method)
    measure.bind(method_params)  # fail before any model work
    _check_choice(segment, "segment", SEGMENTS)
    targets_idx = np.asarray(targets_idx, dtype=np.int64)
    if targets_idx.shape != (len(encoding),):
        raise ValueError(f"targets_idx must have shape ({len(encoding)},), got {targets_idx.shape}.")
    if len(targets_idx) and not (0 <= targets_idx.min() and targets_idx.max() < len(clf.classes_)):
        raise ValueError(f"targets_idx must be class indices in [0, {len(clf.classes_)}), got values in "
                         f"[{targets_idx.min()}, {targets_idx.max()}].")
    if batch_size is None:
        batch_size = clf.batch_size if measure.uses_gradients else clf.inference_batch_size_
    device, dtype = clf.device_, autocast_dtype_for(clf, measure, precision)
    generator = torch.Generator(device="cpu").manual_seed(resolve_seed(random_state, clf.random_state))

    def run(idx):
        batch = collate(encoding, idx, clf.tokenizer_.pad_token_id, input_ids=input_ids).to(device)
        return compute_importance(
            clf.model_, batch, torch.as_tensor(targets_idx[idx], device=device), measure,
            mask_token_id=clf.tokenizer_.mask_token_id, eligible=eligible_positions(batch, segment),
            generator=generator, autocast_dtype=dtype, internal_batch_size=internal_batch_size, **method_params,
        )

    return map_batches(run, encoding.lengths, batch_size, ragged=True, desc=f"explain ({measure.name})",
                       verbose=getattr(clf, "verbose", 0))


# --------------------------------------------------------------------------- frames


def _segment_text(encoding, i: int, segment_id: int) -> str:
    text = encoding.texts[i]
    return text[segment_id] if encoding.is_pair else text


def token_frame(clf, encoding, scores, targets_idx, method: str, segment: str = "first") -> pd.DataFrame:
    """One row per explained token: the long format :func:`explain` returns.

    Parameters
    ----------
    clf : FaithfulTextClassifier
    encoding : Encoding
    scores : list of ndarray
        From :func:`explain_encoded`.
    targets_idx : ndarray of int
    method : str
    segment : {"first", "all"}

    Returns
    -------
    pandas.DataFrame
    """
    parts = []
    for i, ids in enumerate(encoding.input_ids):
        seg = encoding.segment_ids[i]
        keep = (seg == SEGMENT_A) | ((seg == SEGMENT_B) & (segment == "all"))
        keep &= ~encoding.special_tokens_mask[i]
        pos = np.flatnonzero(keep)
        parts.append(pd.DataFrame({
            "example": i,
            "position": pos,
            "token_id": ids[pos],
            "segment": seg[pos],
            "word": encoding.word_ids[i][pos],
            "char_start": encoding.offsets[i][pos, 0],
            "char_end": encoding.offsets[i][pos, 1],
            "importance": scores[i][pos].astype(np.float64),
        }))
    frame = pd.concat(parts, ignore_index=True)
    frame.insert(2, "token", clf.tokenizer_.convert_ids_to_tokens(frame["token_id"].tolist()))
    frame["segment"] = frame["segment"].map(_SEGMENT_NAMES)
    frame["target"] = clf.classes_[np.asarray(targets_idx)[frame["example"].to_numpy()]]
    frame["method"] = method
    frame["truncated"] = encoding.truncated[frame["example"].to_numpy()]
    return frame


def word_frame(frame: pd.DataFrame, encoding, aggregate: str = "sum") -> pd.DataFrame:
    """Aggregate a token frame to words (the tokenizer's word ids within each segment).

    Parameters
    ----------
    frame : pandas.DataFrame
        From :func:`token_frame`.
    encoding : Encoding
    aggregate : {"sum", "mean", "max"}, default="sum"
        How the subword scores of a word combine.

    Returns
    -------
    pandas.DataFrame
        One row per word: ``example``, ``segment``, ``word``, ``text`` (the
        original text slice), ``position`` (of the first subword), ``n_tokens``,
        ``char_start``, ``char_end``, ``importance``, ``target``, ``method``,
        ``truncated``.
    """
    keys = ["example", "segment", "word"]
    words = frame.groupby(keys, sort=False, as_index=False).agg(
        position=("position", "min"),
        n_tokens=("position", "size"),
        char_start=("char_start", "min"),
        char_end=("char_end", "max"),
        importance=("importance", aggregate),
        target=("target", "first"),
        method=("method", "first"),
        truncated=("truncated", "first"),
    )
    segment_ids = words["segment"].map({v: k for k, v in _SEGMENT_NAMES.items()}).to_numpy()
    words.insert(3, "text", [
        _segment_text(encoding, i, s)[a:b]
        for i, s, a, b in zip(words["example"], segment_ids, words["char_start"], words["char_end"])
    ])
    return words.sort_values(["example", "position"], kind="stable").reset_index(drop=True)


def explain(
    clf,
    X,
    y=None,
    method="loo-sign",
    target=None,
    segment: str = "first",
    level: str = "token",
    aggregate: str = "sum",
    batch_size: int | None = None,
    random_state=None,
    **method_params,
) -> pd.DataFrame:
    """Explain the classifier's decisions on ``X`` with an importance measure.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs
    y : array-like, optional
        Gold labels; their class is explained (the paper's convention).
    method : str, default="loo-sign"
        An importance measure: ``rand``, ``grad-l2``, ``grad-l1``,
        ``inp-grad-sign``, ``inp-grad-abs``, ``int-grad-sign``,
        ``int-grad-abs``, ``loo-sign``, ``loo-abs`` or ``beam-sign-K`` (any
        beam width K, e.g. ``beam-sign-10``); see
        :func:`fmmlearn.importance.importance_measures`.
    target : label or array-like of labels, optional
        Class to explain (a value of ``clf.classes_``), for all examples or
        one per example; overrides ``y``.  Default: ``y`` if given, else the
        predicted class.  The explained quantity is the class's logit.
    segment : {"first", "all"}, default="first"
        ``"first"``: explain (and return) segment A only, the paper's choice
        for pairs; segment B is context.  ``"all"``: both segments.
    level : {"token", "word"}, default="token"
        Return subword tokens, or words with aggregated scores.
    aggregate : {"sum", "mean", "max"}, default="sum"
        Word level only: how subword scores combine.
    batch_size : int, optional
        Examples per batch (see :func:`explain_encoded`).
    random_state : int, optional
        Seed of ``rand``; default ``clf.random_state``.
    **method_params
        ``precision`` and ``internal_batch_size`` (see
        :func:`explain_encoded`) and the measure's own parameters, e.g.
        ``n_steps``, ``baseline``, ``rule`` for integrated gradients.

    Returns
    -------
    pandas.DataFrame
        Token level: one row per (example, token) with columns ``example``
        (index into ``X``), ``position``, ``token``, ``token_id``, ``segment``
        (``"A"``/``"B"``), ``word``, ``char_start``, ``char_end`` (in the
        original text of that segment), ``importance``, ``target`` (class
        label), ``method`` and ``truncated`` (the example was cut to
        ``max_length``).  Special tokens and padding are never included.
        Word level: see :func:`word_frame`.

    Raises
    ------
    ValueError
        Unknown method or parameter, ``y``/``target`` of the wrong length or
        with labels not in ``clf.classes_``, empty ``X``.

    Examples
    --------
    >>> from fmmlearn.explanation import explain
    >>> frame = explain(clf, ["a wonderful film"], method="int-grad-sign")   # doctest: +SKIP
    >>> frame[["token", "importance"]]                                     # doctest: +SKIP
    """
    measure = get_measure(method)
    _check_choice(segment, "segment", SEGMENTS)
    _check_choice(level, "level", LEVELS)
    _check_choice(aggregate, "aggregate", AGGREGATES)
    options = {k: method_params.pop(k) for k in ("precision", "internal_batch_size") if k in method_params}
    measure.bind(method_params)
    encoding = clf.encode(X)
    targets_idx = resolve_targets(clf, encoding, y=y, target=target)
    scores = explain_encoded(clf, encoding, targets_idx, measure, segment, batch_size=batch_size,
                             random_state=random_state, **options, **method_params)
    frame = token_frame(clf, encoding, scores, targets_idx, measure.name, segment)
    return word_frame(frame, encoding, aggregate) if level == "word" else frame

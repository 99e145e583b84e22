"""Explanations of a fitted classifier as tidy DataFrames (one row per token or word).

:func:`explain` is the user-facing function (and what
``FaithfulTextClassifier.explain`` delegates to): texts in, an
:class:`Explanation` out -- a long DataFrame that also keeps the original
texts and predictions, and renders as a heatmap.  :func:`explain_encoded` is
the reusable middle layer: an :class:`~fmmlearn.encoding.Encoding` and target
class indices in, one score array per example out.  Both use only the
classifier's public low-level API (``encode``, ``encoded_logits``,
``model_``, ``tokenizer_``, ``classes_``, ``device_``, ...).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils._param_validation import StrOptions, validate_params

from ..encoding import collate
from ..importance import compute_importance, get_method
from ..masking import eligible_positions
from ..modeling import autocast_dtype_for, map_batches
from ..utils import (SEGMENTS, as_labels, check_segment, label_indices, positive_int, reports_truncation_once,
                     resolve_seed, resolve_targets)
from ._frames import AGGREGATES, example_table, token_frame, word_frame
from ._result import Explanation
from ..utils import keyword_only

__all__ = ["explain", "explain_encoded"]


LEVELS = ("token", "word")


@keyword_only
def explain_encoded(
    clf,
    encoding,
    targets_idx,
    *, method="loo-sign",
    segment: str = "first",
    batch_size: int | None = None,
    random_state=None,
    precision: str | None = None,
    input_ids=None,
    internal_batch_size: int | None = None,
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
    method : str, ImportanceMethod or explainer value (docs/explainers.md), default="loo-sign"
        See :func:`fmmlearn.importance.get_method`.
    segment : {"first", "all"}, default="first"
        Explain segment A only (the paper) or every non-special token.
    batch_size : int, optional
        Examples per batch; default ``clf.batch_size`` for gradient measures,
        ``clf.inference_batch_size_`` for the others.
    random_state : int, optional
        Seed of ``rand``; default ``clf.random_state``.
    precision : {None, "auto", "fp32", "bf16", "fp16"}, default=None
        ``None``: fp32 for every measure.  ``"auto"``: gradient measures use
        the classifier's inference precision (bf16 only where measured
        faster); leave-one-out and beam search stay in fp32, so their rankings
        never depend on precision.  An explicit precision applies to every
        measure (see :func:`fmmlearn.modeling.autocast_dtype_for`).
    input_ids : list of ndarray, optional
        Replacement ids per example (e.g. partially masked copies).
    internal_batch_size : int, optional
        Perturbed copies / path points per forward pass; default: rows of one
        length packed across examples into passes of the probed best size
        (see :func:`fmmlearn.importance.compute_importance`).
    **method_params
        Passed to the measure (e.g. ``n_steps=20``).

    Returns
    -------
    list of ndarray of float32
        ``scores[i]`` has one entry per token of example ``i`` (special tokens
        included, with score 0), in the caller's order.
    """
    measure = get_method(method)
    measure.bind(method_params)  # fail before any model work
    check_segment(segment)
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
        batch = collate(encoding, idx, pad_token_id=clf.tokenizer_.pad_token_id, input_ids=input_ids).to(device)
        return compute_importance(
            clf.model_, batch, torch.as_tensor(targets_idx[idx], device=device), method=measure,
            mask_token_id=clf.tokenizer_.mask_token_id, eligible=eligible_positions(batch, segment=segment),
            generator=generator, autocast_dtype=dtype, internal_batch_size=internal_batch_size, **method_params,
        )

    return map_batches(run, encoding.lengths, batch_size, ragged=True, desc=f"explain ({measure.name})",
                       verbose=getattr(clf, "verbose", 0), generator=generator)


@keyword_only
@reports_truncation_once
@validate_params(
    {"segment": [StrOptions(set(SEGMENTS))], "level": [StrOptions(set(LEVELS))],
     "aggregate": [StrOptions(set(AGGREGATES))], "batch_size": [positive_int(), None]},
    prefer_skip_nested_validation=True,
)
def explain(
    clf,
    X,
    y=None,
    *, method="loo-sign",
    target=None,
    segment: str = "first",
    level: str = "token",
    aggregate: str = "sum",
    batch_size: int | None = None,
    random_state=None,
    **method_params,
) -> Explanation:
    """Explain the classifier's decisions on ``X`` with an importance measure.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs
    y : array-like, optional
        Gold labels; their class is explained (the paper's convention).
    method : str, ImportanceMethod or explainer value (docs/explainers.md), default="loo-sign"
        An importance measure: ``rand``, ``grad-l2``, ``grad-l1``,
        ``inp-grad-sign``, ``inp-grad-abs``, ``int-grad-sign``,
        ``int-grad-abs``, ``loo-sign``, ``loo-abs`` or ``beam-sign-K`` (any
        beam width K, e.g. ``beam-sign-10``); see
        :func:`fmmlearn.importance.importance_methods`.
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
    Explanation
        A :class:`pandas.DataFrame` (subclass).  Token level: one row per
        (example, token) with columns ``example`` (index into ``X``),
        ``position``, ``token``, ``token_id``, ``segment`` (``"A"``/``"B"``),
        ``word``, ``char_start``, ``char_end`` (in the original text of that
        segment), ``importance``, ``target`` (class label), ``method`` and
        ``truncated`` (the example was cut to ``max_length``).  Special tokens
        and padding are never included.  Word level: see :func:`word_frame`.
        Per example it also keeps the original text, the predicted label and
        probability and the gold label (:attr:`Explanation.examples`); it
        renders as a heatmap (:meth:`Explanation.to_html`, notebook display).

    Raises
    ------
    ValueError
        Unknown method or parameter, ``y``/``target`` of the wrong length or
        with labels not in ``clf.classes_``, empty ``X``.

    Examples
    --------
    The bundled MiniLM, fine-tuned with masking on a toy task for one epoch:

    >>> from fmmlearn import FaithfulTextClassifier
    >>> from fmmlearn.explanation import explain
    >>> X, y = ["a wonderful film", "a dreadful film", "great acting", "awful plot"] * 4, ["pos", "neg"] * 8
    >>> clf = FaithfulTextClassifier(max_epochs=1, validation_fraction=0, random_state=0).fit(X, y)
    >>> e = explain(clf, ["a wonderful film"], method="int-grad-sign")
    >>> e["token"].tolist()
    ['a', 'wonderful', 'film']
    >>> e.examples[["text", "predicted"]].shape
    (1, 2)
    >>> e.to_html("explanation.html")  # a self-contained heatmap page  # doctest: +SKIP
    """
    measure = get_method(method)
    options = {k: method_params.pop(k) for k in ("precision", "internal_batch_size") if k in method_params}
    measure.bind(method_params)
    encoding = clf.encode(X)
    if y is None and target is None:
        # The prediction is the target: one forward pass gives both it and the probabilities.
        logits = clf.encoded_logits(encoding)
        targets_idx = logits.argmax(axis=1).astype(np.int64)
    else:
        targets_idx = resolve_targets(clf, encoding, y=y, target=target)   # validates before any model work
        logits = clf.encoded_logits(encoding)
    gold_idx = None
    if y is not None:
        gold_idx = targets_idx if target is None else label_indices(clf.classes_, as_labels(y, len(encoding), "y"),
                                                                    "y")
    scores = explain_encoded(clf, encoding, targets_idx, method=measure, segment=segment, batch_size=batch_size,
                             random_state=random_state, **options, **method_params)
    frame = token_frame(clf, encoding, scores, targets_idx, method=measure.name, segment=segment)
    if level == "word":
        frame = word_frame(frame, encoding, aggregate=aggregate)
    # an explainer's signedness may have been inferred on the first batch just now
    measure = get_method(measure.explainer) if measure.explainer is not None else measure
    return Explanation(frame, examples=example_table(clf, encoding, logits, gold_idx, measure=measure))

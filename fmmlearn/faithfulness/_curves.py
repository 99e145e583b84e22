"""Faithfulness curves: performance on explainer-masked (or randomly masked) sets, ratio by ratio."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd
import torch
from sklearn.utils._param_validation import StrOptions, validate_params

from ..datasets import paper_primary_metric
from ..encoding import collate
from ..exceptions import FaithfulnessWarning
from ..explanation import eligible_masks, iter_explainer_masking
from ..importance import get_method
from ..masking import fixed_count_masking, maskable_positions
from ..metrics import get_metric
from ..modeling import probabilities
from ..utils import (
    SEGMENTS, check_ratios, check_segment, gold_targets, positive_int, reports_truncation_once, resolve_seed, warn,
)
from ..utils import keyword_only

__all__ = ["BASELINE", "CURVE_COLUMNS", "RANDOM_MASKING", "faithfulness_curve", "masked_fractions",
           "random_masking_curve", "step_logits", "step_outcomes"]

#: Columns of a curve DataFrame, in order.
CURVE_COLUMNS = ("method", "ratio", "metric", "value", "n_examples", "mean_masked_fraction")
SEGMENTS = ("first", "all")
#: Name of the random-baseline measure (docs/faithfulness.md).
BASELINE = "rand"
#: ``method`` label of :func:`random_masking_curve` rows.
RANDOM_MASKING = "random-masking"


def resolve_metric(clf, metric):
    """``metric`` as a Metric; ``None`` is the primary metric of ``clf.dataset`` (a paper dataset), else accuracy.

    ``FaithfulTextClassifier(dataset="cola")`` (or ``for_paper_dataset``)
    is thus scored with MCC, ``"mrpc"`` with macro-F1, and a classifier
    without a dataset with accuracy.
    """
    if metric is None:
        metric = paper_primary_metric(getattr(clf, "dataset", None), argname="clf.dataset") or "accuracy"
    return get_metric(metric)


@keyword_only
def masked_fractions(clf, encoding, ids, *, segment: str) -> np.ndarray:
    """Per example, the share of its eligible tokens holding the mask token (NaN where none is eligible).

    Parameters
    ----------
    clf : FittedClassifier
    encoding : Encoding
    ids : list of ndarray
        The (masked) ids of every example, aligned with ``encoding``.
    segment : {"first", "all"}
        Which tokens are eligible (docs/faithfulness.md).

    Returns
    -------
    ndarray of shape (n_examples,), float64
    """
    eligible, masked = eligible_masks(clf, encoding, segment=segment, input_ids=ids)
    n = np.array([e.sum() for e in eligible], dtype=np.float64)
    hits = np.array([m.sum() for m in masked], dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, hits / np.maximum(n, 1), np.nan)


def _mean_fraction(fractions: np.ndarray) -> float:
    """The masked share averaged over the examples that have eligible tokens (NaN when none has)."""
    counted = fractions[np.isfinite(fractions)]
    return float(counted.mean()) if counted.size else float("nan")


def step_logits(clf, encoding, id_sets: list) -> list[np.ndarray]:
    """Logits of every example at every step, in one batched pass over the distinct inputs.

    All steps' masked copies are evaluated together (full, length-grouped
    batches instead of one pass per step), and an input that several steps
    share -- a short text whose ``floor(r * n)`` stays the same from one ratio
    to the next, the clean input at ``r = 0`` -- is evaluated once.

    Parameters
    ----------
    clf : FittedClassifier
    encoding : Encoding
    id_sets : list of (list of ndarray)
        Per step, the ids of every example (aligned with ``encoding``).

    Returns
    -------
    list of ndarray, shape (n_examples, n_classes)
        One per step.
    """
    rows, examples, ids_rows = {}, [], []
    where = np.empty((len(id_sets), len(encoding)), dtype=np.int64)
    for step, ids in enumerate(id_sets):
        for i in range(len(encoding)):
            row = np.asarray(ids[i])
            key = (i, row.tobytes())
            if key not in rows:
                rows[key] = len(examples)
                examples.append(i)
                ids_rows.append(row)
            where[step, i] = rows[key]
    if not examples:
        return [np.empty((0, len(clf.classes_)), dtype=np.float32) for _ in id_sets]
    logits = clf.encoded_logits(encoding.subset(examples), input_ids=ids_rows)
    return [logits[where[step]] for step in range(len(id_sets))]


@keyword_only
def step_outcomes(clf, encoding, steps, *, segment: str) -> tuple[list, list]:
    """The per-example outcomes of every masking step: what a curve aggregates (docs/faithfulness.md).

    Parameters
    ----------
    clf : FittedClassifier
    encoding : Encoding
    steps : list of (float, list of ndarray)
        Per ratio, the masked ids of every example (from
        :func:`~fmmlearn.explanation.iter_explainer_masking`).
    segment : {"first", "all"}
        Which tokens count for the masked fractions.

    Returns
    -------
    logits : list of ndarray of shape (n_examples, n_classes)
        Per step, evaluated in one batched pass over the distinct inputs (:func:`step_logits`).
    fractions : list of ndarray of shape (n_examples,)
        Per step, :func:`masked_fractions`.
    """
    id_sets = [ids for _, ids in steps]
    return step_logits(clf, encoding, id_sets), [masked_fractions(clf, encoding, ids, segment=segment)
                                                for ids in id_sets]


def _metric_value(metric, clf, y_true, logits: np.ndarray) -> float:
    if metric.needs_proba:
        return metric(y_true, probabilities(logits), labels=clf.classes_)
    return metric(y_true, clf.classes_[logits.argmax(axis=1)], labels=clf.classes_)


def _curve_frame(clf, encoding, y_true, steps, metric, method: str, segment: str,
                 endpoints: dict | None = None) -> pd.DataFrame:
    """Evaluate every ``(ratio, masked ids)`` step on the whole set: one row per ratio.

    All steps are evaluated in one batched pass (:func:`step_logits`).
    ``endpoints`` caches the scores at ``r = 0`` (clean) and ``r = 1`` (all
    masked), which every curve of the same set, segment and metric shares.
    """
    steps = list(steps)
    cached = lambda ratio: endpoints is not None and ratio in (0.0, 1.0)  # noqa: E731
    todo = [(ratio, ids) for ratio, ids in steps if not (cached(ratio) and ratio in endpoints)]
    logits, fractions = step_outcomes(clf, encoding, todo, segment=segment)
    scores = {ratio: (_metric_value(metric, clf, y_true, step), _mean_fraction(fraction))
              for (ratio, _), step, fraction in zip(todo, logits, fractions)}
    for ratio, score in scores.items():
        if cached(ratio):
            endpoints[ratio] = score
    rows = []
    for ratio, _ in steps:
        value, fraction = endpoints[ratio] if cached(ratio) else scores[ratio]
        rows.append((method, ratio, metric.name, value, len(encoding), fraction))
    frame = pd.DataFrame(rows, columns=list(CURVE_COLUMNS))
    frame.attrs["greater_is_better"] = metric.greater_is_better  # read by acu/racu (custom metrics)
    return frame


def _warn_if_unmaskable(clf, encoding, segment) -> None:
    """A :class:`FaithfulnessWarning` naming the examples with no token that ``segment`` lets masking hit.

    An empty segment A (``("", context)`` pairs, or empty texts) is never
    masked: such an example keeps its clean prediction at every ratio and
    flattens the curve towards the random one.
    """
    eligible, _ = eligible_masks(clf, encoding, segment=check_segment(segment))
    empty = [i for i, e in enumerate(eligible) if not e.any()]
    if empty:
        where = "segment A (the first text of each pair)" if encoding.is_pair and segment == "first" else "text"
        warn(f"{len(empty)} of {len(encoding)} example(s) have an empty {where}, so masking never changes them "
             f"(indices {empty[:10]}{' ...' if len(empty) > 10 else ''}); they keep their clean prediction at "
             "every ratio and pull the curve towards the random one.", FaithfulnessWarning)


def encoded_curve(clf, encoding, target_idx, method, *, ratios=None, recursive=None, segment="first",
                   metric=None, random_state=None, importances=None, batch_size=None, endpoints=None,
                   **method_params):
    metric = resolve_metric(clf, metric)
    label = (method if isinstance(method, str) else "precomputed") if importances is not None \
        else get_method(method).name
    _warn_if_unmaskable(clf, encoding, segment)
    steps = iter_explainer_masking(clf, encoding, target_idx, method=method, ratios=ratios, recursive=recursive,
                                   segment=segment,
                                   importances=importances, random_state=random_state, batch_size=batch_size,
                                   **method_params)
    return _curve_frame(clf, encoding, clf.classes_[target_idx], steps, metric, label, segment, endpoints)


@keyword_only
@reports_truncation_once
@validate_params(
    {"recursive": ["boolean", None], "segment": [StrOptions(set(SEGMENTS))], "batch_size": [positive_int(), None]},
    prefer_skip_nested_validation=True,
)
def faithfulness_curve(
    clf,
    X,
    y,
    *, method="loo-sign",
    ratios=None,
    recursive: bool | None = None,
    segment: str = "first",
    metric=None,
    random_state=None,
    importances=None,
    batch_size: int | None = None,
    **method_params,
) -> pd.DataFrame:
    """Performance of ``clf`` while masking the tokens an explanation ranks highest (docs/faithfulness.md).

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
    method : str, ImportanceMethod or explainer value (docs/explainers.md), default="loo-sign"
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
        Default: the primary metric of the paper dataset ``clf.dataset``
        when set (e.g. by ``FaithfulTextClassifier.for_paper_dataset``:
        macro-F1 for CB, IMDB, MIMIC, MRPC, QQP, MCC for CoLA), else
        ``"accuracy"``.  Any name :func:`fmmlearn.metrics.get_metric`
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
    The bundled MiniLM, fine-tuned with masking on a toy task for one epoch:

    >>> from fmmlearn import FaithfulTextClassifier
    >>> X, y = ["a wonderful film", "a dreadful film", "great acting", "awful plot"] * 4, ["pos", "neg"] * 8
    >>> clf = FaithfulTextClassifier(max_epochs=1, validation_fraction=0, random_state=0).fit(X, y)
    >>> curve = faithfulness_curve(clf, X, y, method="inp-grad-sign", ratios=(0.0, 0.5, 1.0))
    >>> curve[["method", "ratio"]].to_numpy().tolist()
    [['inp-grad-sign', 0.0], ['inp-grad-sign', 0.5], ['inp-grad-sign', 1.0]]
    >>> bool(curve["value"].between(0, 1).all())
    True
    """
    encoding = clf.encode(X)
    target_idx, _ = gold_targets(clf, encoding, y)
    return encoded_curve(clf, encoding, target_idx, method, ratios=ratios, recursive=recursive, segment=segment,
                          metric=metric, random_state=random_state, importances=importances,
                          batch_size=batch_size, **method_params)


def _iter_random_masking(clf, encoding, grid, seed: int) -> Iterator[tuple[float, list]]:
    batch = collate(encoding, np.arange(len(encoding)), pad_token_id=clf.tokenizer_.pad_token_id)
    maskable = maskable_positions(batch.attention_mask, batch.special_tokens_mask)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    for ratio in grid.tolist():
        ids = fixed_count_masking(batch.input_ids, maskable, ratio=ratio, mask_token_id=clf.tokenizer_.mask_token_id,
                                  generator=generator).numpy()
        yield ratio, [ids[i, :n] for i, n in enumerate(encoding.lengths)]


@keyword_only
@reports_truncation_once
def random_masking_curve(clf, X, y, *, ratios=None, metric=None, random_state=None) -> pd.DataFrame:
    """Performance under random masking of all maskable tokens (both segments), ratio by ratio.

    The paper's check that the fine-tuned model tolerates masking: at each
    ratio exactly ``floor(r * n)`` random non-special tokens of each clean
    example are masked (fixed-count masking, docs/masking.md), independently per
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
        Default: ``clf.dataset``'s primary metric, else ``"accuracy"`` (see
        :func:`faithfulness_curve`).
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
    target_idx, y_true = gold_targets(clf, encoding, y)
    steps = _iter_random_masking(clf, encoding, grid, resolve_seed(random_state, clf.random_state))
    return _curve_frame(clf, encoding, y_true, steps, resolve_metric(clf, metric), RANDOM_MASKING, "all")

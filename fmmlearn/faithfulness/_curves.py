"""Faithfulness curves: performance on explainer-masked (or randomly masked) sets, ratio by ratio."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd
import torch

from .._labels import gold_targets
from .._random import resolve_seed
from .._validation import check_ratios
from ..encoding import collate
from ..importance import get_measure
from ..masking import fixed_count_masking, maskable_positions
from ..metrics import get_metric
from ._loop import eligible_masks, iter_explainer_masking

__all__ = ["BASELINE", "CURVE_COLUMNS", "RANDOM_MASKING", "faithfulness_curve", "random_masking_curve"]

#: Columns of a curve DataFrame, in order.
CURVE_COLUMNS = ("method", "ratio", "metric", "value", "n_examples", "mean_masked_fraction")
SEGMENTS = ("first", "all")
#: Name of the random-baseline measure (docs/faithfulness.md).
BASELINE = "rand"
#: ``method`` label of :func:`random_masking_curve` rows.
RANDOM_MASKING = "random-masking"


def _mean_masked_fraction(clf, encoding, input_ids, segment: str) -> float:
    eligible, masked = eligible_masks(clf, encoding, segment, input_ids)
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



def encoded_curve(clf, encoding, target_idx, method, *, ratios=None, recursive=None, segment="first",
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
    target_idx, _ = gold_targets(clf, encoding, y)
    return encoded_curve(clf, encoding, target_idx, method, ratios=ratios, recursive=recursive, segment=segment,
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
    target_idx, y_true = gold_targets(clf, encoding, y)
    steps = _iter_random_masking(clf, encoding, grid, resolve_seed(random_state, clf.random_state))
    return _curve_frame(clf, encoding, y_true, steps, get_metric("accuracy" if metric is None else metric),
                        RANDOM_MASKING, "all")

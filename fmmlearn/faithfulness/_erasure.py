"""Erasure metrics: comprehensiveness, sufficiency and AOPC (ERASER, ferret), certified by MaSF.

For an example ``x`` with target class ``y`` and its top ``k`` share of
eligible tokens ``r_k`` by importance (docs/erasure.md):

* comprehensiveness ``p(y | x) - p(y | x without r_k)``: higher = the
  explanation found the tokens the prediction needs;
* sufficiency ``p(y | x) - p(y | only r_k)``: lower = those tokens alone
  carry the prediction;
* AOPC: either one averaged over the ``k`` grid (DeYoung et al., 2020).

``p`` is the softmax probability of the target class.  Tokens are removed by
the model's own mask token (lengths kept; for a masked fine-tuned model this
is its notion of "absent") or deleted from the ids (ERASER/ferret).  Either
way the perturbed inputs may be out of distribution, which mixes faithfulness
with distribution shift; every perturbed input is therefore scored with the
MaSF in-distribution test, and each number comes with the share of perturbed
inputs MaSF rejects and a ``valid`` flag.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
from sklearn.base import clone
from sklearn.utils._param_validation import StrOptions, validate_params

from ..encoding import Encoding
from ..exceptions import FaithfulnessWarning, UncertifiedErasureWarning
from ..explanation import eligible_masks, finite_scores
from ..explanation import explain_encoded
from ..importance import get_method
from ..importance.precomputed import check_covered, importance_arrays
from ..masking import mask_top_k
from ..modeling import probabilities
from ..ood import ConformalDetector, MaSF, calibration_features, hidden_state_features, min_calibration_size
from ..utils import (
    SEGMENTS, StrictInterval, derive_seed, mean_ci, positive_int, reports_truncation_once, resolve_seed,
    resolve_targets, warn,
)
from ._token_lists import is_token_list_form, token_list_scores
from ..utils import keyword_only

__all__ = ["AOPC", "DEFAULT_K", "ERASURE_MODES", "PER_EXAMPLE_COLUMNS", "REMOVALS", "SUMMARY_COLUMNS",
           "ErasureReport", "check_k", "erasure_metrics"]

#: ERASER's bins: the top 1, 5, 10, 20 and 50 % of the eligible tokens.
DEFAULT_K = (0.01, 0.05, 0.1, 0.2, 0.5)
#: The two erasure metrics.
ERASURE_MODES = ("comprehensiveness", "sufficiency")
#: How a token is removed: replaced by the mask token, or deleted from the ids.
REMOVALS = ("mask", "delete")
#: ``k`` value of the summary rows that average over the ``k`` grid.
AOPC = "aopc"
#: Columns of :attr:`ErasureReport.per_example`, in order (``model`` follows when ``model_name`` is given).
PER_EXAMPLE_COLUMNS = ("example", "target", "method", "removal", "mode", "k", "n_eligible", "n_selected",
                       "n_removed", "p_full", "p_perturbed", "value", "masf_p")
#: Columns of :attr:`ErasureReport.summary`, in order (``model`` follows when ``model_name`` is given).
SUMMARY_COLUMNS = ("method", "removal", "mode", "k", "n_examples", "mean", "ci_low", "ci_high", "n_perturbed",
                   "ood_share", "valid")

_FORWARD_OPTIONS = ("precision", "internal_batch_size")
# Perturbed inputs scored at once: bounds the memory of their hidden-state features.
_CHUNK = 4096


class ErasureReport(NamedTuple):
    """Result of :func:`erasure_metrics`; unpacks as ``per_example, summary``.

    Attributes
    ----------
    per_example : pandas.DataFrame
        One row per (mode, k, example), columns :data:`PER_EXAMPLE_COLUMNS`:
        ``n_eligible`` tokens that may be removed, ``n_selected`` = the top
        ``floor(k * n_eligible)`` (the rationale), ``n_removed`` tokens
        actually removed (the rationale for comprehensiveness, the rest of
        the eligible tokens for sufficiency), ``p_full`` and ``p_perturbed``
        (target-class probabilities), ``value = p_full - p_perturbed`` and
        ``masf_p`` (the perturbed input's MaSF p-value; NaN without
        calibration).  Rows with ``n_selected = 0`` have no perturbed input:
        ``value`` is NaN there.
    summary : pandas.DataFrame
        One row per mode and ``k``, then the ``k = "aopc"`` row per mode,
        columns :data:`SUMMARY_COLUMNS`: the ``mean`` over examples with its
        bootstrap CI ``ci_low``-``ci_high``, ``n_perturbed`` inputs scored by
        MaSF, ``ood_share`` = the share of them with ``p < alpha``, and
        ``valid`` (``ood_share <= max_invalid_factor * alpha``; ``<NA>``
        without calibration).  An AOPC row is valid when every ``k`` it
        averages is.
    """

    per_example: pd.DataFrame
    summary: pd.DataFrame

    @keyword_only
    def plot(self, ax=None, *, path=None, title: str | None = None):
        """Draw the metrics against ``k``, coloured by validity (see :func:`fmmlearn.plotting.plot_erasure`).

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; a new figure when ``None``.
        path : str or path-like, optional
            Also save the figure to this file.
        title : str, optional
            The figure's title.

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on.
        """
        from ..plotting import plot_erasure

        return plot_erasure(self.summary, ax=ax, path=path, title=title)


# --------------------------------------------------------------------------- argument checks


@keyword_only
def check_k(k, *, name: str = "k") -> np.ndarray:
    """Validate the erasure fractions: one number or a non-empty sequence, each in ``(0, 1]``.

    Parameters
    ----------
    k : float or sequence of float
        Shares of the eligible tokens in the rationale, e.g. ERASER's
        ``(0.01, 0.05, 0.1, 0.2, 0.5)``.
    name : str, default="k"
        Argument name used in error messages.

    Returns
    -------
    ndarray of float64
        Sorted increasingly.

    Raises
    ------
    ValueError
        Naming ``name``: empty, non-numeric, out of ``(0, 1]``, or repeated values.
    """
    items = [k] if isinstance(k, (str, bytes)) or not np.iterable(k) else list(k)
    if not items:
        raise ValueError(f"{name} is empty; expected at least one fraction in (0, 1], e.g. {name}={DEFAULT_K}.")
    bad = [v for v in items if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real)]
    if bad:
        raise ValueError(f"{name} must hold numbers in (0, 1] (shares of the eligible tokens), got {bad[0]!r} "
                         f"of type {type(bad[0]).__name__}.")
    grid = np.asarray(items, dtype=np.float64)
    outside = [v for v in grid.tolist() if not (math.isfinite(v) and 0 < v <= 1)]
    if outside:
        raise ValueError(f"{name} must lie in (0, 1] (a share of the eligible tokens; 0 removes nothing), got "
                         f"{outside}.")
    if len(np.unique(grid)) != len(grid):
        raise ValueError(f"{name} has repeated values: {grid.tolist()}.")
    return np.sort(grid)


def _check_modes(mode) -> tuple:
    modes = [mode] if isinstance(mode, str) else list(mode) if np.iterable(mode) else [mode]
    unknown = [m for m in modes if not (isinstance(m, str) and m in ERASURE_MODES)]
    if not modes or unknown:
        raise ValueError(f"mode must be one of {ERASURE_MODES} or a sequence of them, got {mode!r}.")
    if len(set(modes)) != len(modes):
        raise ValueError(f"mode has repeated values: {modes}.")
    return tuple(modes)


def _check_choice(value, name: str, choices: tuple) -> str:
    if not (isinstance(value, str) and value in choices):
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")
    return value


def _checked_method(method, importances, method_params: dict):
    """The measure to compute (``None`` with precomputed importances) and the label of the rows."""
    if importances is not None:
        if method_params:
            raise ValueError(f"measure parameters {sorted(method_params)} cannot apply to precomputed importances.")
        if method is not None and not isinstance(method, str):
            raise ValueError(f"with importances, method is only a label (a str), got {type(method).__name__}.")
        return None, "precomputed" if method is None else method
    if method is None:
        raise ValueError("pass method (an importance measure such as 'loo-sign', see importance_methods()) or "
                         "importances (precomputed scores); got neither.")
    measure = get_method(method)
    measure.bind({k: v for k, v in method_params.items() if k not in _FORWARD_OPTIONS})
    return measure, measure.name


def _is_fitted_masf(masf) -> bool:
    return hasattr(masf, "pvalue_floor_")


def _check_validity_source(masf, X_calib) -> None:
    if masf is not None and not isinstance(masf, (MaSF, ConformalDetector)):
        raise TypeError(f"masf must be an in-distribution test of fmmlearn.ood (MaSF, MahalanobisDetector, "
                        f"KNNDetector; fitted, or unfitted to fit on X_calib), got {type(masf).__name__}.")
    if masf is not None and _is_fitted_masf(masf) and X_calib is not None:
        raise ValueError("pass either a fitted masf or X_calib (to fit one), not both.")
    if masf is not None and not _is_fitted_masf(masf) and X_calib is None:
        raise ValueError("masf is not fitted; pass X_calib to fit it on, or a fitted test.")


def _check_calibration_size(masf, n_calib: int) -> None:
    if isinstance(masf, MaSF) and masf.calibration == "calibrated":
        needed = min_calibration_size(masf.fold_fractions)
        if n_calib < needed:
            raise ValueError(f"X_calib has {n_calib} example(s); MaSF(calibration='calibrated') needs at least "
                             f"{needed}, and the level-3 fold must exceed 1 / alpha - 1 examples before any "
                             "perturbed input can be flagged. Give more calibration examples.")


def _check_resolution(masf, alpha: float) -> None:
    """Refuse a test whose p-values cannot fall below ``alpha``: ``valid`` would always read True."""
    floor = masf.pvalue_floor_
    if floor >= alpha:
        raise ValueError(f"masf: its smallest p-value is {floor:.3g} (its conformal level holds {round(1 / floor) - 1} "
                         f"examples), so no perturbed input could be flagged at alpha={alpha:g}; the "
                         f"validity flag would always read True. The conformal level needs more than "
                         f"{1.0 / alpha - 1:g} examples: give more calibration examples (about "
                         f"{math.ceil(3 / alpha)} for MaSF's equal folds) or a larger alpha.")


# --------------------------------------------------------------------------- importances and rationales


def _precomputed_scores(importances, clf, encoding, eligible) -> list:
    """Precomputed importances as float64 arrays aligned to the encoding, checked at every eligible position."""
    if isinstance(importances, torch.Tensor):
        importances = importances.detach().cpu().numpy()
    if isinstance(importances, np.ndarray) and importances.ndim == 3:
        raise ValueError(f"importances has shape {importances.shape}; expected (n_samples, T) token scores. "
                         "Reduce embedding-level attributions first, e.g. attributions.sum(dim=-1) for Captum's "
                         "LayerIntegratedGradients.")
    if is_token_list_form(importances):
        scores = token_list_scores(importances, encoding, clf.tokenizer_)
    else:
        if isinstance(importances, (list, tuple)):
            importances = [r.detach().cpu().numpy() if isinstance(r, torch.Tensor) else r for r in importances]
        scores = importance_arrays(importances, encoding)
    return check_covered(scores, eligible)


def _padded(rows: list, fill, dtype) -> torch.Tensor:
    out = np.full((len(rows), max(len(r) for r in rows)), fill, dtype=dtype)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return torch.from_numpy(out)


def _rationales(scores: list, eligible: list, k: float) -> list:
    """Per example, the positions of its rationale at ``k``: the top ``floor(k * n)`` eligible tokens.

    Selected by :func:`fmmlearn.masking.mask_top_k`, the rule of the masking
    curves (count ``floor(k * n)``, descending importance, ties to the earlier
    position), so the two metrics remove the same tokens at the same share.
    """
    allowed = _padded(eligible, False, bool)
    importance = finite_scores(_padded([np.nan_to_num(s, nan=0.0) for s in scores], 0.0, np.float64))
    sentinel = -1  # an id no token has: nothing counts as "already masked"
    hit = mask_top_k(torch.zeros_like(allowed, dtype=torch.long), importance, allowed, ratio=k,
                     mask_token_id=sentinel) == sentinel
    return [np.flatnonzero(row[: len(e)]) for row, e in zip(hit.numpy(), eligible)]


# --------------------------------------------------------------------------- perturbed inputs


def _perturbed_encoding(encoding: Encoding, rows: np.ndarray, removed: list, removal: str,
                        mask_token_id: int | None) -> Encoding:
    """One perturbed input per ``(rows[j], removed[j])``: positions masked, or deleted from every field.

    Deletion cuts all per-token fields consistently (ids, special-token mask,
    segments, word ids, offsets, token types), so special tokens and segment
    B stay as they are and the offsets still point into the original text.
    """
    fields = {name: [] for name in ("input_ids", "special_tokens_mask", "segment_ids", "word_ids", "offsets")}
    types = None if encoding.token_type_ids is None else []
    for i, positions in zip(rows.tolist(), removed):
        if removal == "mask":
            ids = encoding.input_ids[i].copy()
            ids[positions] = mask_token_id
            keep = slice(None)
        else:
            keep = np.ones(len(encoding.input_ids[i]), dtype=bool)
            keep[positions] = False
            ids = encoding.input_ids[i][keep]
        fields["input_ids"].append(ids)
        for name in ("special_tokens_mask", "segment_ids", "word_ids", "offsets"):
            fields[name].append(getattr(encoding, name)[i][keep])
        if types is not None:
            types.append(encoding.token_type_ids[i][keep])
    return Encoding(**fields, token_type_ids=types, truncated=encoding.truncated[rows],
                    texts=[encoding.texts[i] for i in rows.tolist()], is_pair=encoding.is_pair)


def _plan(scores: list, eligible: list, modes: tuple, grid: np.ndarray) -> pd.DataFrame:
    """The (mode, k, example) rows: rationale sizes and which positions each perturbed input removes."""
    n_eligible = np.array([e.sum() for e in eligible], dtype=np.int64)
    rationales = {k: _rationales(scores, eligible, k) for k in grid.tolist()}
    parts = []
    for mode in modes:
        for k, chosen in rationales.items():
            # Comprehensiveness removes the rationale; sufficiency every other eligible token.
            removed = chosen if mode == "comprehensiveness" else [
                np.setdiff1d(np.flatnonzero(e), r, assume_unique=True) for e, r in zip(eligible, chosen)]
            parts.append(pd.DataFrame({"example": np.arange(len(scores)), "mode": mode, "k": k,
                                       "n_eligible": n_eligible, "n_selected": [len(r) for r in chosen],
                                       "removed": removed}))
    plan = pd.concat(parts, ignore_index=True)
    plan["n_removed"] = plan["removed"].map(len).where(plan["n_selected"] > 0, 0)
    return plan


def _score_perturbed(clf, encoding, plan, target_idx, removal, masf, batch_size):
    """Target probabilities and MaSF p-values of the perturbed inputs, chunk by chunk."""
    todo = np.flatnonzero(plan["n_selected"].to_numpy() > 0)
    p = np.full(len(plan), np.nan)
    masf_p = np.full(len(plan), np.nan)
    rows = plan["example"].to_numpy()
    for start in range(0, len(todo), _CHUNK):
        chunk = todo[start: start + _CHUNK]
        perturbed = _perturbed_encoding(encoding, rows[chunk], plan["removed"].iloc[chunk].tolist(), removal,
                                        clf.tokenizer_.mask_token_id)
        proba = probabilities(clf.encoded_logits(perturbed))
        p[chunk] = proba[np.arange(len(chunk)), target_idx[rows[chunk]]]
        if masf is not None:
            features = hidden_state_features(clf, encoding=perturbed, pooling=masf.pooling, batch_size=batch_size)
            masf_p[chunk] = masf.pvalues(features)
    return p, masf_p


# --------------------------------------------------------------------------- summary


def _validity(masf_p: np.ndarray, alpha: float, factor: float, certified: bool):
    """``(ood_share, valid)`` of the perturbed inputs with these MaSF p-values (NaN = no perturbed input)."""
    scored = masf_p[np.isfinite(masf_p)]
    if not certified or scored.size == 0:
        return float("nan"), pd.NA
    share = float(np.mean(scored < alpha))
    return share, bool(share <= factor * alpha)


def _summary(per_example: pd.DataFrame, grid, alpha, factor, certified, n_bootstrap, confidence_level, seed):
    def interval(values):
        values = values[np.isfinite(values)]
        if n_bootstrap == 0:
            return (float(values.mean()) if values.size else float("nan")), float("nan"), float("nan")
        return mean_ci(values, confidence_level, n_resamples=n_bootstrap, random_state=seed)

    rows = []
    for mode, frame in per_example.groupby("mode", sort=False):
        flags = []
        for k in grid.tolist():
            at = frame[frame["k"] == k]
            values = at["value"].to_numpy(dtype=np.float64)
            share, valid = _validity(at["masf_p"].to_numpy(dtype=np.float64), alpha, factor, certified)
            n_perturbed = int((at["n_selected"] > 0).sum())
            if n_perturbed:  # a k without any rationale does not enter the AOPC, nor its validity
                flags.append(valid)
            rows.append((mode, k, int(np.isfinite(values).sum()), *interval(values), n_perturbed, share, valid))
        # AOPC per example: the mean over the k that select a rationale (ferret skips the others too).
        aopc = frame.groupby("example")["value"].mean().to_numpy(dtype=np.float64)
        share, _ = _validity(frame["masf_p"].to_numpy(dtype=np.float64), alpha, factor, certified)
        known = [f for f in flags if f is not pd.NA]
        valid = pd.NA if not flags or len(known) < len(flags) else bool(all(known))
        rows.append((mode, AOPC, int(np.isfinite(aopc).sum()), *interval(aopc),
                     int((frame["n_selected"] > 0).sum()), share, valid))
    summary = pd.DataFrame(rows, columns=[c for c in SUMMARY_COLUMNS if c not in ("method", "removal")])
    summary["k"] = summary["k"].astype(object)
    summary["valid"] = summary["valid"].astype("boolean")
    return summary


# --------------------------------------------------------------------------- the metric


#: Arguments shared by :func:`erasure_metrics` and the erasure scorer: how tokens are removed and certified.
_REMOVAL_CONSTRAINTS = {
    "removal": [StrOptions(set(REMOVALS))], "segment": [StrOptions(set(SEGMENTS))],
    "alpha": [StrictInterval(numbers.Real, 0, 1, closed="neither")],
    "max_invalid_factor": [StrictInterval(numbers.Real, 0, math.inf, closed="neither")],
}


@keyword_only
@reports_truncation_once
@validate_params(
    {**_REMOVAL_CONSTRAINTS,
     "n_bootstrap": [StrictInterval(numbers.Integral, 0, None, closed="left")],
     "confidence_level": [StrictInterval(numbers.Real, 0, 1, closed="neither")],
     "batch_size": [positive_int(), None]},
    prefer_skip_nested_validation=True,
)
def erasure_metrics(
    clf,
    X,
    y=None,
    *, method=None,
    importances=None,
    k=DEFAULT_K,
    mode=ERASURE_MODES,
    removal: str = "mask",
    target=None,
    segment: str = "first",
    X_calib=None,
    masf=None,
    alpha: float = 0.05,
    max_invalid_factor: float = 2.0,
    n_bootstrap: int = 9999,
    confidence_level: float = 0.95,
    random_state=None,
    batch_size: int | None = None,
    model_name=None,
    **method_params,
) -> ErasureReport:
    """Comprehensiveness, sufficiency and AOPC of an explanation, with a MaSF validity flag (docs/erasure.md).

    For every ``k``, the rationale ``r_k`` is the top ``floor(k * n)`` of an example's ``n`` eligible tokens by
    importance for the target class; comprehensiveness is ``p(y | x) - p(y | x without r_k)``, sufficiency
    ``p(y | x) - p(y | only r_k)`` and AOPC their mean over ``k`` (docs/erasure.md, "The metrics").  With
    calibration data every perturbed input is scored by an in-distribution test, and a metric is ``valid``
    when at most ``max_invalid_factor * alpha`` of them get ``p < alpha`` (docs/erasure.md, "Validity").

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs
    y : array-like of shape (n_samples,), optional
        Gold labels: their class is the target (without ``y`` or ``target``, the predicted class).
    method : str, ImportanceMethod or explainer value (docs/explainers.md), optional
        Importance measure, computed on the clean inputs for the target class; with ``importances`` only
        the label of the rows (default ``"precomputed"``).
    importances : optional
        Precomputed scores (higher = more important): arrays aligned to ``clf.encode(X).input_ids``, the
        frame of ``clf.explain``, or ferret-style token lists (docs/erasure.md, "Importances from Captum
        and ferret").
    k : float or sequence of float, default=(0.01, 0.05, 0.1, 0.2, 0.5)
        Rationale sizes as shares of the eligible tokens, in ``(0, 1]`` (ERASER's bins).
    mode : str or sequence of str, default=("comprehensiveness", "sufficiency")
    removal : {"mask", "delete"}, default="mask"
        Replace removed tokens by the mask token, or drop their ids as ERASER and ferret do, without
        re-tokenizing (docs/erasure.md, "Differences from ferret and ERASER").
    target : label or array-like of labels, optional
        The class to measure, for all examples or one per example; overrides ``y``.
    segment : {"first", "all"}, default="first"
        Rank and remove segment-A tokens only (segment B of pairs is context) or every non-special token.
    X_calib : sequence of str, or sentence pairs, optional
        In-distribution examples (e.g. the validation split) to fit the test on, masked like the training
        batches (:func:`fmmlearn.ood.calibration_features`).
    masf : MaSF, MahalanobisDetector or KNNDetector, optional
        The in-distribution test (docs/ood.md): fitted on this classifier's features, or unfitted to fit
        on ``X_calib`` (default there: MaSF).  With neither, nothing is certified and an
        :class:`~fmmlearn.exceptions.UncertifiedErasureWarning` says so.
    alpha : float, default=0.05
        Level: a perturbed input with ``p < alpha`` counts as out of distribution.
    max_invalid_factor : float, default=2.0
        ``valid`` when ``ood_share <= max_invalid_factor * alpha``.
    n_bootstrap : int, default=9999
        Resamples of the BCa bootstrap CI of each mean over examples; 0 skips the intervals.
    confidence_level : float, default=0.95
    random_state : int, RandomState or None, default=None
        Seeds ``rand``, the calibration masks, MaSF's folds and the bootstrap; default ``clf.random_state``.
    batch_size : int, optional
        Examples per batch of the importance computation and the features.
    model_name : str, optional
        Adds a ``model`` column to both frames (to stack plain and masked).
    **method_params
        The measure's parameters, ``precision`` and ``internal_batch_size``
        (see :func:`fmmlearn.explanation.explain_encoded`).

    Returns
    -------
    ErasureReport
        ``(per_example, summary)``; ``report.plot()`` draws the summary.

    Raises
    ------
    ValueError
        Naming the argument, before any model work (docs/erasure.md, "Errors").
    TypeError
        For importances or ``masf`` of an unsupported type.

    Examples
    --------
    >>> report = erasure_metrics(clf, X_test, y_test, method="inp-grad-sign", X_calib=X_valid)  # doctest: +SKIP
    >>> report.summary[["mode", "k", "mean", "ci_low", "ci_high", "ood_share", "valid"]]     # doctest: +SKIP
    """
    grid, modes = check_k(k), _check_modes(mode)
    alpha, factor, confidence_level = float(alpha), float(max_invalid_factor), float(confidence_level)
    n_bootstrap, batch_size = int(n_bootstrap), None if batch_size is None else int(batch_size)
    measure, label = _checked_method(method, importances, method_params)
    if removal == "mask" and clf.tokenizer_.mask_token_id is None:
        raise ValueError("removal='mask' needs a tokenizer with a mask token; this one has none (use "
                         "removal='delete').")
    _check_validity_source(masf, X_calib)
    seed = resolve_seed(random_state, clf.random_state)

    encoding = clf.encode(X)
    eligible, _ = eligible_masks(clf, encoding, segment=segment)
    scores = None if importances is None else _precomputed_scores(importances, clf, encoding, eligible)
    given = y is not None or target is not None
    target_idx = resolve_targets(clf, encoding, y=y, target=target) if given else None
    calib = None
    if X_calib is not None:
        masf = MaSF(random_state=seed) if masf is None else clone(masf)
        calib = X_calib
        _check_calibration_size(masf, len(clf.encode(X_calib, name="X_calib")))
    certified = masf is not None
    if not certified:
        warn("no X_calib or fitted masf: the erasure metrics are not certified in-distribution "
             "(ood_share is NaN, valid is <NA>). Perturbed inputs are often out of distribution for a "
             "model fine-tuned without masking; see docs/erasure.md.", UncertifiedErasureWarning)
    elif calib is None:
        _check_resolution(masf, alpha)

    # Model work from here on; the calibration first, as it can still refuse (too coarse p-values).
    if calib is not None:
        masf.fit(calibration_features(clf, calib, random_state=seed, pooling=masf.pooling, batch_size=batch_size))
        _check_resolution(masf, alpha)
    logits = clf.encoded_logits(encoding).astype(np.float64)
    if target_idx is None:
        target_idx = logits.argmax(axis=1).astype(np.int64)  # the prediction, as ERASER does
    p_full = probabilities(logits)[np.arange(len(encoding)), target_idx]
    if scores is None:
        forward = {key: method_params.pop(key) for key in _FORWARD_OPTIONS if key in method_params}
        scores = explain_encoded(clf, encoding, target_idx, method=measure, segment=segment, batch_size=batch_size,
                                 random_state=derive_seed(seed, 1), **forward, **method_params)
    plan = _plan([np.asarray(s, dtype=np.float64) for s in scores], eligible, modes, grid)
    _warn_empty_k(plan, grid)
    p_perturbed, masf_p = _score_perturbed(clf, encoding, plan, target_idx, removal,
                                           masf if certified else None, batch_size)
    per_example = plan.drop(columns="removed")
    per_example.insert(1, "target", clf.classes_[target_idx[per_example["example"].to_numpy()]])
    per_example.insert(2, "method", label)
    per_example.insert(3, "removal", removal)
    per_example["p_full"] = p_full[per_example["example"].to_numpy()]
    per_example["p_perturbed"] = p_perturbed
    per_example["value"] = per_example["p_full"] - p_perturbed
    per_example["masf_p"] = masf_p
    per_example = per_example[list(PER_EXAMPLE_COLUMNS)]
    summary = _summary(per_example, grid, alpha, factor, certified, n_bootstrap, confidence_level,
                       derive_seed(seed, 2))
    summary.insert(0, "method", label)
    summary.insert(1, "removal", removal)
    if model_name is not None:
        per_example["model"] = summary["model"] = str(model_name)
    return ErasureReport(per_example, summary)


def _warn_empty_k(plan: pd.DataFrame, grid: np.ndarray) -> None:
    """Warn about the ``k`` whose rationale is empty for every example (e.g. 1 % of a tweet)."""
    selected = plan.groupby("k")["n_selected"].max()
    empty = [k for k in grid.tolist() if selected.get(k, 0) == 0]
    if empty:
        warn(f"k={empty} selects no token in any example (floor(k * n) = 0 for every example's n "
             "eligible tokens); those rows are NaN and AOPC averages the other k.", FaithfulnessWarning)

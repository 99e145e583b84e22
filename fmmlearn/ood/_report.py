"""The in-distribution report: MaSF p-values of explainer-masked test sets, ratio by ratio."""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
from sklearn.utils._param_validation import validate_params
from sklearn.utils.validation import check_is_fitted

from ..explanation import iter_explainer_masking
from ..importance import get_method
from ..utils import (
    check_ratios, check_segment, derive_seed, positive_int, reports_truncation_once, resolve_seed, resolve_targets,
)
from ._checks import _check_thresholds
from ._combine import DEFAULT_THRESHOLDS, summarize_pvalues
from ._calibrate import fit_detector
from ._controls import placeholder_ids, placeholder_inputs
from ._features import hidden_state_features
from ._masf import _MIN_FOLD_SIZE, MaSF, _check_fold_fractions, _fewest_examples, min_calibration_size
from ._registry import detector_name, make_detector
from ..utils import keyword_only

__all__ = ["REFERENCE_ONLY_COLUMNS", "REPORT_COLUMNS", "in_distribution_report", "masked_pvalues",
           "masked_set_features", "masked_test_sets", "pvalue_frame", "report_rows"]

#: Columns of :func:`in_distribution_report`, in order.  ``calibration="reference"`` appends
#: :data:`REFERENCE_ONLY_COLUMNS`; ``model`` comes last when ``model_name`` is given.
REPORT_COLUMNS = ("ratio", "threshold", "proportion", "expected", "simes_p", "geomean_p", "n_examples", "method",
                  "calibration", "detector")
#: Columns only reports of ``calibration="reference"`` have: the paper's dataset-level Fisher value,
#: which assumes independent p-values and is invalid for MaSF's dependent ones (docs/ood.md).
REFERENCE_ONLY_COLUMNS = ("fisher_p_reference_only",)


_REPORT_CORE = ("ratio", "threshold", "simes_p")


def _report_or_frame(*args, **kwargs) -> pd.DataFrame:
    """pandas' constructor for results derived from a report: a report while its core columns remain."""
    frame = InDistributionReport(*args, **kwargs)
    return frame if all(c in frame.columns for c in _REPORT_CORE) else pd.DataFrame(frame, copy=False)


class InDistributionReport(pd.DataFrame):
    """The rows of :func:`in_distribution_report`: a DataFrame that draws and displays itself.

    It *is* a :class:`pandas.DataFrame` (one row per ratio and threshold;
    filtering, ``pd.concat`` of several models' reports, CSV/Parquet writing
    work as before), with :meth:`plot` (the paper's figure) and a notebook
    display (:meth:`_repr_html_`: the table and the plot).  A selection that
    drops the ``ratio``, ``threshold`` or ``simes_p`` column is a plain
    DataFrame.

    Parameters
    ----------
    data, index, columns, dtype, copy
        As for :class:`pandas.DataFrame`.
    """

    @property
    def _constructor(self):
        return _report_or_frame

    @keyword_only
    def plot(self, ax=None, *, path=None, **options):
        """Draw the p-values against the masking ratio (see :func:`fmmlearn.plotting.plot_in_distribution`).

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; a new figure when ``None``.
        path : str or path-like, optional
            Also save the figure to this file.
        **options
            ``threshold``, ``statistic`` and ``title`` of :func:`fmmlearn.plotting.plot_in_distribution`.

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on.
        """
        from ..plotting import plot_in_distribution

        return plot_in_distribution(pd.DataFrame(self), ax=ax, path=path, **options)

    def _repr_html_(self) -> str:
        """Notebook display: the summary table and the plot (see :func:`fmmlearn.plotting.report_html`)."""
        from ..plotting import report_html

        return report_html(pd.DataFrame(self), full_page=False)


@keyword_only
@reports_truncation_once
@validate_params({"dist_repeats": [positive_int()], "batch_size": [positive_int(), None]},
                 prefer_skip_nested_validation=True)
def in_distribution_report(clf, X_calib, X_test, y_test, *, method="rand", ratios=None, calibration="calibrated",
                           thresholds=DEFAULT_THRESHOLDS, segment="first", random_state=None, detector="masf",
                           X_train=None, dist_repeats=1, fold_fractions=(1 / 3, 1 / 3, 1 / 3), recursive=None,
                           batch_size=None, model_name=None, **method_params):
    """Are explainer-masked inputs in-distribution?  Per-example p-values per masking ratio (docs/ood.md).

    The in-distribution test (``detector``: MaSF by default, or a conformal
    Mahalanobis or kNN detector) is fitted on the features of ``X_calib``
    masked like the training batches (:func:`calibration_features`), its
    score optionally on ``X_train`` (:func:`fit_detector`).  ``X_test`` is then masked by the
    faithfulness loop of docs/faithfulness.md (the top ``r`` share of segment-A tokens
    by ``method``'s importance for the gold label ``y_test``, the masks
    growing with ``r``), and each masked test set is scored: the share of
    examples with ``p < threshold`` and dataset-level p-values of the whole
    set that stay valid although the per-example p-values are dependent
    (Simes, and e times the geometric mean).  In the paper, masked fine-tuned
    models mostly keep ``simes_p`` above 0.05 across the ratios, while plain
    ones drop below it once tokens are masked (``docs/ood.md`` shows how to
    compare the two).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X_calib : sequence of str, or sentence pairs
        In-distribution calibration examples (e.g. the validation split).
        ``calibration="calibrated"`` needs at least
        ``min_calibration_size(fold_fractions)`` (6) of them times
        ``dist_repeats``, and about 60 before any p-value can reach 0.05.
    X_test : sequence of str, or sentence pairs
        Examples to mask and score.
    y_test : array-like of shape (len(X_test),)
        Gold labels of ``X_test``: the class whose importance ranks the tokens.
    method : str, ImportanceMethod or explainer value (docs/explainers.md), default="rand"
        Importance measure of the masking (:func:`fmmlearn.importance_methods`);
        ``"rand"`` masks random tokens, as in the paper's figures.
    ratios : array-like of float, optional
        Masking ratios, strictly increasing in ``[0, 1]``; default
        ``0, 0.1, ..., 1``.  Ratio 0 scores the clean test set.
    calibration : {"calibrated", "reference"}, default="calibrated"
        MaSF only: see :class:`MaSF`; ``"reference"`` is the paper's
        (anti-conservative) procedure.
    thresholds : sequence of float, default=(0.001, 0.005, 0.01, 0.05, 0.1)
        Levels for ``proportion``.
    segment : {"first", "all"}, default="first"
        Mask segment A only (the paper) or every non-special token.
    random_state : int, RandomState or None, default=None
        Seeds the calibration masks, MaSF's folds and the ``rand`` measure;
        default ``clf.random_state``.
    detector : str or detector, default="masf"
        The in-distribution test: a name of :data:`fmmlearn.ood.DETECTORS`
        (``"masf"``, ``"mahalanobis-all"``, ``"knn"``, ...) or an instance
        (:class:`MaSF`, :class:`MahalanobisDetector`, :class:`KNNDetector`).
        docs/ood.md compares their power.
    X_train : sequence of str, or sentence pairs, optional
        Texts the detector's score is fitted on (masked like the training
        batches, ``dist_repeats`` copies); ``X_calib`` then makes only the
        conformal level (:func:`fit_detector`).
    dist_repeats : int, default=1
        Differently masked copies of the texts the detector's score is fitted
        on; the copies of one example always share a fold.
    fold_fractions : tuple of 3 floats, default=(1/3, 1/3, 1/3)
        Calibrated MaSF: see :class:`MaSF`.
    recursive : bool, optional
        Recompute importances after every step; default the measure's own.
    batch_size : int, optional
        Batch size of the explainer masking (see
        :func:`fmmlearn.faithfulness.iter_explainer_masking`); features use
        ``clf.inference_batch_size_``.
    model_name : str, optional
        Adds a ``model`` column with this value, to stack the reports of
        several models (e.g. plain and masked) into one frame.
    **method_params
        Passed to the importance measure (and ``precision``,
        ``internal_batch_size``, ``importances`` to the masking loop).

    Returns
    -------
    report : InDistributionReport
        A DataFrame with ``.plot()`` and a notebook display.  One row per
        (ratio, threshold), columns :data:`REPORT_COLUMNS`:
        ``ratio``, ``threshold``, ``proportion`` (share of test examples with
        ``p < threshold``), ``simes_p`` and ``geomean_p`` (dataset-level,
        repeated on each threshold's row; see :func:`summarize_pvalues`),
        ``n_examples``, ``method``, ``calibration``, ``detector`` (its
        name); then, for ``calibration="reference"`` only,
        ``fisher_p_reference_only`` (the paper's Fisher value, not valid for
        dependent p-values); then ``model``.

    Raises
    ------
    ValueError
        Naming the argument: too few calibration examples for the folds (and
        how many are needed), bad ratios, thresholds, segment, calibration or
        method parameters, labels that do not match ``X_test``, or non-finite
        features (e.g. an fp16 overflow).

    See Also
    --------
    fmmlearn.plotting.plot_in_distribution : draws a report (or several).

    Examples
    --------
    >>> plain = FaithfulTextClassifier(max_masking_ratio=0.0).fit(X_train, y_train)    # doctest: +SKIP
    >>> masked = FaithfulTextClassifier(max_masking_ratio=1.0).fit(X_train, y_train)   # doctest: +SKIP
    >>> reports = {name: in_distribution_report(model, X_valid, X_test, y_test)        # doctest: +SKIP
    ...            for name, model in {"plain": plain, "masked": masked}.items()}
    >>> plot_in_distribution(reports, path="ood.png")                                   # doctest: +SKIP
    """
    check_is_fitted(clf)
    levels = _check_thresholds(thresholds)
    seed = resolve_seed(random_state, clf.random_state)
    test_detector = _checked_detector(detector, calibration, fold_fractions, seed)
    calib = clf.encode(X_calib, name="X_calib")
    if isinstance(test_detector, MaSF) and X_train is None:
        _check_calibration_size(len(calib), dist_repeats, calibration, fold_fractions)
    if y_test is None:
        raise ValueError("y_test is None; the masking ranks tokens by their importance for the gold label.")
    # Masking first: it validates the measure's parameters before any work and is the expensive part.
    steps = _masked_steps(clf, X_test, y_test, method, ratios, segment, derive_seed(seed, 1), recursive=recursive,
                          batch_size=batch_size, **method_params)
    fitted = _in_context("the calibration features of X_calib (masked like the training batches)", partial(
        fit_detector, clf, test_detector, X_calib, X_train=X_train, dist_repeats=dist_repeats, random_state=seed))
    pvalues = _scored_steps(clf, fitted, steps)
    label = str(method) if "importances" in method_params else get_method(method).name
    report = report_rows(pvalues, fitted, thresholds=levels, method=label, detector=detector_name(detector))
    if model_name is not None:
        report["model"] = str(model_name)
    return InDistributionReport(report)


def _masked_steps(clf, X_test, y_test, method, ratios, segment, seed, *, recursive=None, batch_size=None,
                  **method_params):
    """``(encoding, [(ratio, masked ids), ...])`` of the explainer-masked test set."""
    grid = check_ratios(ratios)
    check_segment(segment)
    test = clf.encode(X_test, name="X_test")
    target_idx = _in_context("y_test (the gold labels of X_test)", resolve_targets, clf, test, y_test)
    return test, list(iter_explainer_masking(clf, test, target_idx, method=method, ratios=grid, recursive=recursive,
                                             segment=segment,
                                             random_state=seed, batch_size=batch_size, **method_params))


@keyword_only
def masked_test_sets(clf, X_test, y_test, *, method="rand", ratios=None, segment="first", random_state=None,
                     recursive=None, batch_size=None, **method_params):
    """The explainer-masked copies of ``X_test``, ratio by ratio: what an in-distribution report scores.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X_test, y_test, method, ratios, segment, recursive, batch_size, **method_params
        As in :func:`in_distribution_report`.
    random_state : int, optional
        Seeds the masking (``rand``); default ``clf.random_state``.

    Returns
    -------
    encoding : Encoding
        ``X_test`` encoded.
    steps : list of (float, list of ndarray)
        Per ratio, the masked ids of every example.
    """
    check_is_fitted(clf)
    return _masked_steps(clf, X_test, y_test, method, ratios, segment, resolve_seed(random_state, clf.random_state),
                         recursive=recursive, batch_size=batch_size, **method_params)


def masked_set_features(clf, encoding, steps, *, pooling="max", placeholder=None):
    """Pooled hidden states of every masked set of :func:`masked_test_sets`, optionally as the matched control.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    encoding : Encoding
        The encoded test texts.
    steps : list of (float, list of ndarray)
        Per ratio, the masked ids.
    pooling : str or sequence of str, default="max"
        See :func:`hidden_state_features`.
    placeholder : Placeholder, optional
        Put this placeholder where the masking put the mask token (the matched positive control,
        docs/ood.md); ratio 0 is then left out.

    Returns
    -------
    list of (float, ndarray or dict)
        Per ratio, the features of every example.
    """
    out = []
    for ratio, ids in steps:
        if placeholder is None:
            out.append((ratio, hidden_state_features(clf, encoding=encoding, input_ids=ids, pooling=pooling)))
        elif ratio > 0:
            swapped = placeholder_ids(ids, encoding.input_ids, mask_token_id=clf.tokenizer_.mask_token_id,
                                      placeholder=placeholder)
            with placeholder_inputs(clf.model_, placeholder=placeholder):
                out.append((ratio, hidden_state_features(clf, encoding=encoding, input_ids=swapped, pooling=pooling)))
    return out


def pvalue_frame(detector, features_by_ratio) -> pd.DataFrame:
    """Columns ``ratio``, ``example``, ``p``: ``detector``'s p-value of every example of every masked set.

    Parameters
    ----------
    detector : MaSF or ConformalDetector
        Fitted.
    features_by_ratio : list of (float, ndarray)
        From :func:`masked_set_features` with ``detector.pooling``.

    Returns
    -------
    pandas.DataFrame
    """
    parts = []
    for ratio, features in features_by_ratio:
        p = _in_context(f"the features of X_test masked at ratio {ratio:g}", detector.pvalues, features)
        parts.append(pd.DataFrame({"ratio": ratio, "example": np.arange(len(p)), "p": p}))
    return pd.concat(parts, ignore_index=True)


def _scored_steps(clf, detector, steps) -> pd.DataFrame:
    test, masked = steps
    return pvalue_frame(detector, masked_set_features(clf, test, masked, pooling=detector.pooling))


@keyword_only
def masked_pvalues(clf, masf, X_test, y_test, *, method="rand", ratios=None, segment="first", random_state=None,
                   recursive=None, batch_size=None, **method_params) -> pd.DataFrame:
    """The MaSF p-value of every test example at every masking ratio (the numbers behind a report).

    ``X_test`` is masked as :func:`in_distribution_report` masks it (the explainer-masking loop,
    seeded by ``random_state``) and each masked set is scored by the fitted ``masf``.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    masf : MaSF or ConformalDetector
        A fitted in-distribution test of ``clf`` (e.g. :func:`fit_detector`); its ``pooling`` says
        which features it reads.
    X_test, y_test, method, ratios, segment, recursive, batch_size, **method_params
        As in :func:`in_distribution_report`.
    random_state : int, optional
        Seeds the masking (``rand``); default ``clf.random_state``.

    Returns
    -------
    pandas.DataFrame
        Columns ``ratio``, ``example`` (the position in ``X_test``) and ``p``.
    """
    check_is_fitted(clf)
    seed = resolve_seed(random_state, clf.random_state)
    steps = _masked_steps(clf, X_test, y_test, method, ratios, segment, seed, recursive=recursive,
                          batch_size=batch_size, **method_params)
    return _scored_steps(clf, masf, steps)


@keyword_only
def report_rows(pvalues: pd.DataFrame, masf, *, thresholds=DEFAULT_THRESHOLDS, method: str,
                detector: str | None = None) -> pd.DataFrame:
    """The report's rows from per-example p-values (:func:`masked_pvalues`): one row per (ratio, threshold).

    ``expected`` is the share of in-distribution examples the test flags at the threshold
    (:meth:`MaSF.null_share`: p-values are multiples of ``1 / (N3 + 1)``); NaN for the reference
    procedure, whose p-values are not calibrated.
    """
    levels = _check_thresholds(thresholds)
    mode = getattr(masf, "calibration_", "calibrated")  # the conformal detectors are always calibrated
    parts = []
    for ratio, part in pvalues.groupby("ratio", sort=True):
        rows = summarize_pvalues(part["p"].to_numpy(), thresholds=levels, calibration=mode)
        rows.insert(0, "ratio", ratio)
        rows.insert(3, "expected", [masf.null_share(t) for t in rows["threshold"]])
        rows["n_examples"] = len(part)
        parts.append(rows)
    report = pd.concat(parts, ignore_index=True)
    report["method"], report["calibration"] = method, mode
    report["detector"] = detector_name(masf) if detector is None else detector
    return report[[*REPORT_COLUMNS, *(REFERENCE_ONLY_COLUMNS if mode == "reference" else ())]]


def _checked_detector(detector, calibration, fold_fractions, seed):
    """The unfitted test of a report: MaSF with the report's MaSF options, or a conformal detector."""
    if isinstance(detector, str) and detector == "masf":
        masf = MaSF(calibration, fold_fractions=fold_fractions, random_state=seed)
        masf._validate_params()
        return masf
    test = make_detector(detector, random_state=seed)
    if calibration != "calibrated" and not isinstance(test, MaSF):
        raise ValueError(f"calibration={calibration!r} is a MaSF option; the detector {detector_name(detector)!r} is "
                         "always calibrated (split conformal).")
    return test


def _check_calibration_size(n_calib, dist_repeats, calibration, fold_fractions):
    """Fail before any model work when MaSF cannot be fitted on ``n_calib * dist_repeats`` examples."""
    n = n_calib * dist_repeats
    if calibration == "reference":
        needed, why = _MIN_FOLD_SIZE, ""
    else:
        needed = min_calibration_size(fold_fractions)
        # A level-3 fold of N3 examples gives p-values >= 1 / (N3 + 1): 19 are needed to reach 0.05.
        useful = _fewest_examples(_check_fold_fractions(fold_fractions), 19)
        why = (f" ({_MIN_FOLD_SIZE} per fold with fold_fractions={tuple(fold_fractions)}; about {useful} before "
               "any test example can reach p < 0.05)")
    if n < needed:
        raise ValueError(
            f"X_calib has {n_calib} example(s), {n} calibration input(s) with dist_repeats={dist_repeats}; "
            f"calibration={calibration!r} needs at least {needed}{why}. Give more calibration examples, "
            "raise dist_repeats (with a masked model), or use calibration='reference'.")


def _in_context(what, fn, *args):
    """``fn(*args)``, with ``what`` put in front of a ValueError's message."""
    try:
        return fn(*args)
    except ValueError as error:
        raise ValueError(f"{what}: {error}") from error

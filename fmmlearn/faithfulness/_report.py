"""Faithfulness of several measures at once: curves, ACU/RACU and bootstrap CIs over repeats."""

from __future__ import annotations

import warnings
from functools import partial
from numbers import Real
from typing import NamedTuple

import numpy as np
import pandas as pd
from sklearn.utils._param_validation import validate_params

from ..exceptions import FaithfulnessWarning
from ..importance import get_method
from ..utils import (
    StrictInterval, check_ratios, check_segment, derive_seed, gold_targets, mean_ci, positive_int,
    reports_truncation_once, resolve_seed, warn,
)
from ._area import acu, flat_baseline_reason, racu
from ._curves import BASELINE, encoded_curve
from ..utils import keyword_only

__all__ = ["DEFAULT_REPORT_METHODS", "FaithfulnessReport", "faithfulness_report"]

DEFAULT_REPORT_METHODS = ("grad-l2", "inp-grad-sign", "loo-sign")


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

    @keyword_only
    def plot(self, ax=None, *, path=None):
        """Draw the curves with the random baseline dashed (see :func:`fmmlearn.plotting.plot_faithfulness`).

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; a new figure when ``None``.
        path : str or path-like, optional
            Also save the figure to this file.

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on.
        """
        from ..plotting import plot_faithfulness

        return plot_faithfulness(self.curves, ax=ax, path=path)

    def _repr_html_(self) -> str:
        """Notebook display: the summary table and the curves (see :func:`fmmlearn.plotting.report_html`)."""
        from ..plotting import report_html

        return report_html(self, full_page=False)



def _summary_row(measure, curves: list, baselines: list, confidence_level: float) -> dict:
    # A deterministic measure has one curve, scored against every repeat's baseline.
    pairs = zip(curves if len(curves) == len(baselines) else curves * len(baselines), baselines)
    with warnings.catch_warnings():  # one warning per report says why (faithfulness_report)
        warnings.simplefilter("ignore", FaithfulnessWarning)
        scores = [(acu(c, b), racu(c, b)) for c, b in pairs]
    acu_ci = mean_ci([s[0] for s in scores], confidence_level)
    racu_ci = mean_ci([s[1] for s in scores], confidence_level)
    return {"method": measure.name, "metric": curves[0]["metric"].iloc[0], "signed": measure.signed,
            "recursive": measure.recursive, "n_repeats": int(np.isfinite([s[1] for s in scores]).sum()),
            "racu": racu_ci[0], "racu_low": racu_ci[1], "racu_high": racu_ci[2],
            "acu": acu_ci[0], "acu_low": acu_ci[1], "acu_high": acu_ci[2]}


def _tagged(curve: pd.DataFrame, repeat: int, role: str) -> pd.DataFrame:
    return curve.assign(repeat=repeat, role=role)


@keyword_only
@reports_truncation_once
@validate_params(
    {"n_repeats": [positive_int()], "batch_size": [positive_int(), None],
     "confidence_level": [StrictInterval(Real, 0, 1, closed="neither")]},
    prefer_skip_nested_validation=True,
)
def faithfulness_report(
    clf,
    X,
    y,
    *, methods=DEFAULT_REPORT_METHODS,
    n_repeats: int = 5,
    ratios=None,
    random_state=None,
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
        Default: the primary metric of ``clf.dataset`` (a paper dataset),
        else ``"accuracy"``.
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
    single = isinstance(methods, str) or not isinstance(methods, (list, tuple))
    measures = [get_method(m) for m in ([methods] if single else list(methods))]
    if not measures:
        raise ValueError("methods must name at least one importance measure.")
    options = dict(ratios=check_ratios(ratios, endpoints=True), segment=check_segment(segment), metric=metric,
                   batch_size=batch_size, endpoints={})
    encoding = clf.encode(X)
    target_idx, _ = gold_targets(clf, encoding, y)
    seed = resolve_seed(random_state, clf.random_state)
    curve = partial(encoded_curve, clf, encoding, target_idx, **options)
    baselines = [curve(BASELINE, random_state=derive_seed(seed, 0, i)) for i in range(n_repeats)]
    frames = [_tagged(b, i, "baseline") for i, b in enumerate(baselines)]
    rows = []
    for measure in measures:
        stochastic = measure.name == BASELINE
        curves = [curve(measure, random_state=derive_seed(seed, 1, i)) for i in range(n_repeats if stochastic else 1)]
        frames += [_tagged(c, i, "method") for i, c in enumerate(curves)]
        rows.append(_summary_row(measure, curves, baselines, confidence_level))
    _warn_undefined_racu(clf, encoding, target_idx, rows, n_repeats)
    return FaithfulnessReport(pd.concat(frames, ignore_index=True), pd.DataFrame(rows))


def _warn_undefined_racu(clf, encoding, target_idx, rows: list, n_repeats: int) -> None:
    """One :class:`FaithfulnessWarning` naming the methods whose RACU is NaN in some repeats, and why."""
    undefined = {row["method"]: n_repeats - row["n_repeats"] for row in rows if row["n_repeats"] < n_repeats}
    if undefined:
        which = ", ".join(f"{method} ({n} of {n_repeats} repeats)" for method, n in undefined.items())
        warn(f"RACU is NaN for {which}: {flat_baseline_reason(clf, encoding, target_idx)}.", FaithfulnessWarning)

"""Notebook displays of reports: a faithfulness or in-distribution report as its table plus its plot.

:func:`report_html` renders the summary table and the plot (an embedded PNG) as self-contained HTML,
from the same Jinja2 environment as every page (``fmmlearn.utils._templates``); the reports'
``_repr_html_`` call it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..utils import environment, figure_data_uri, interval, number, write_page
from ._figures import plot_faithfulness, plot_in_distribution

__all__ = ["report_html"]

_OOD_KEYS = ("report", "model", "method", "calibration")


def _figure_png(draw, dpi: int) -> str:
    """A data URI of the PNG that ``draw(ax)`` makes (no pyplot: nothing leaks into a notebook)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.5, 3.8))
    draw(figure.subplots())
    return figure_data_uri(figure, dpi=dpi, close=False)


def _with_interval(mean, low, high) -> str:
    return " ".join(filter(None, [number(mean, 3, missing="n/a"), interval(low, high, 3) if np.isfinite(mean) else ""]))


def _faithfulness_table(summary: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    columns = {"method": summary["method"]}
    if "metric" in summary.columns:
        columns["metric"] = summary["metric"]
    for name in ("racu", "acu"):
        if name in summary.columns:
            low, high = summary.get(f"{name}_low", np.nan), summary.get(f"{name}_high", np.nan)
            low = low if isinstance(low, pd.Series) else pd.Series(np.nan, index=summary.index)
            high = high if isinstance(high, pd.Series) else pd.Series(np.nan, index=summary.index)
            columns[f"{name.upper()} [CI]"] = [_with_interval(m, a, b) for m, a, b in zip(summary[name], low, high)]
    for name in ("n_repeats", "signed", "recursive"):
        if name in summary.columns:
            columns[name] = summary[name]
    notes = ["RACU: area between the random baseline's curve and the measure's, relative to the largest possible "
             "(0 = no better than random, 1 = the best possible); the interval is a bootstrap over the repeats "
             "(docs/faithfulness.md)."]
    if "n_repeats" in summary.columns and (summary["n_repeats"] == 0).any():
        notes.append("n/a with 0 repeats: the curves gave no finite RACU (e.g. a model that predicts one class).")
    return pd.DataFrame(columns), notes


def _ood_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    keys = [c for c in _OOD_KEYS if c in frame.columns] + ["ratio"]
    base = frame.groupby(keys, sort=False, dropna=False).agg(
        **{name: (name, "mean") for name in ("simes_p", "geomean_p", "fisher_p_reference_only")
           if name in frame.columns},
        **({"n_examples": ("n_examples", "first")} if "n_examples" in frame.columns else {}))
    if "proportion" in frame.columns:
        shares = frame.pivot_table(index=keys, columns="threshold", values="proportion", aggfunc="mean", sort=False,
                                   dropna=False)
        shares.columns = [f"share p < {t:g}" for t in shares.columns]
        base = base.join(shares)
    notes = ["Simes / geometric mean: dataset-level p-values of the masked test set (MaSF), valid for its dependent "
             "per-example p-values; above the level (dashed) means the masked inputs cannot be told apart from "
             "in-distribution data (docs/ood.md). Fisher is shown for the reference procedure only."]
    if frame.groupby(keys, dropna=False).size().max() > frame["threshold"].nunique():
        notes.append("Rows repeated for a ratio (e.g. several seeds) are averaged.")
    return base.reset_index(), notes


def report_html(report, *, title: str | None = None, path=None, full_page: bool = True, threshold: float = 0.05,
                dpi: int = 110) -> str:
    """A faithfulness or in-distribution report as HTML: the summary table and the plot (an embedded PNG).

    Parameters
    ----------
    report : FaithfulnessReport or pandas.DataFrame
        The result of :func:`fmmlearn.faithfulness.faithfulness_report`
        (``curves``, ``summary``), or of
        :func:`fmmlearn.ood.in_distribution_report` (rows per ratio and
        threshold; several stacked reports are told apart by their
        ``model``/``method``/``calibration`` columns).
    title : str, optional
    path : str or path-like, optional
        Also write the HTML to this file.
    full_page : bool, default=True
        A complete document, or an embeddable fragment (notebook display).
    threshold : float, default=0.05
        In-distribution reports: the level drawn as a dashed line.
    dpi : int, default=110
        Resolution of the plot.

    Returns
    -------
    str

    Raises
    ------
    TypeError
        For anything that is not one of the two reports.
    """
    if hasattr(report, "curves") and hasattr(report, "summary"):
        table, notes = _faithfulness_table(report.summary)
        image = _figure_png(lambda ax: plot_faithfulness(report.curves, ax=ax), dpi)
        kind, alt = "faithfulness", "faithfulness curves: performance as the most important tokens are masked"
    elif isinstance(report, pd.DataFrame) and {"ratio", "threshold", "simes_p"} <= set(report.columns):
        table, notes = _ood_table(report)
        image = _figure_png(lambda ax: plot_in_distribution(report, ax=ax, threshold=threshold), dpi)
        kind, alt = "in-distribution", "MaSF p-values of the masked test set against the masking ratio"
    else:
        raise TypeError("report must be a FaithfulnessReport (faithfulness_report) or the DataFrame of "
                        f"in_distribution_report, got {type(report).__name__}.")
    from markupsafe import Markup

    table_html = Markup(table.to_html(index=False, border=0, classes="fmm-rep-table", na_rep="n/a",
                                      float_format=lambda v: f"{v:.3g}"))
    page = environment().get_template("summary.html.j2").render(
        title=title, full_page=bool(full_page), kind=kind, table=table_html, image=image, alt=alt, notes=notes)
    write_page(page, path)
    return page

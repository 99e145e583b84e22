"""Matplotlib figures rendered from fmmlearn's tidy result frames.

matplotlib is imported only when a function is called, so ``import fmmlearn``
stays light; nothing here needs a display (the Agg backend works).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..utils import atomic_write
from ..utils import keyword_only

__all__ = ["plot_erasure", "plot_faithfulness", "plot_faithfulness_grid", "plot_in_distribution", "plot_performance",
           "plot_racu", "plot_random_masking"]

_BASELINE_STYLE = {"linestyle": "--", "color": "0.35"}
_RANDOM_MASKING_STYLE = {"linestyle": ":", "color": "0.55"}


def _save_figure(figure, path) -> None:
    """Write ``figure`` to ``path`` atomically (format by suffix); a failed write names ``path``."""
    atomic_write(path, lambda tmp: figure.savefig(tmp, dpi=150, bbox_inches="tight"))


def _curve_style(method: str, role: str | None) -> dict:
    """Dashed grey for the ``rand`` baseline, dotted for random masking, solid for measures."""
    if role == "baseline" or (role is None and method == "rand"):
        return dict(_BASELINE_STYLE)
    if method == "random-masking":
        return dict(_RANDOM_MASKING_STYLE)
    return {"linestyle": "-", "marker": "o", "markersize": 3}


def _groups(curves: pd.DataFrame):
    """``(label, style, per-ratio stats)`` per curve, repeats pooled (mean line, min-max band)."""
    has_role = "role" in curves.columns
    keys = ["role", "method"] if has_role else ["method"]
    for key, rows in curves.groupby(keys, sort=False):
        role, method = key if has_role else (None, key[0] if isinstance(key, tuple) else key)
        stats = rows.groupby("ratio")["value"].agg(["mean", "min", "max", "size"]).sort_index()
        label = f"{method} (baseline)" if role == "baseline" else str(method)
        yield label, _curve_style(method, role), stats


@keyword_only
def plot_faithfulness(curves, *, ax=None, path=None, title: str | None = None):
    """Draw faithfulness curves; the random baseline is dashed.

    Parameters
    ----------
    curves : pandas.DataFrame or FaithfulnessReport
        Rows of :func:`fmmlearn.faithfulness.faithfulness_curve` (several
        concatenated curves are fine), :func:`~fmmlearn.faithfulness.random_masking_curve`
        or the ``curves`` of :func:`~fmmlearn.faithfulness.faithfulness_report`.
        Needs columns ``method``, ``ratio``, ``value``; with a ``repeat``
        column the repeats are averaged and their range shaded.  The baseline
        is the ``role == "baseline"`` curve, or ``method == "rand"`` when there
        is no ``role`` column.
    ax : matplotlib Axes, optional
        Draw here; default a new figure.
    path : str or path-like, optional
        Also save the figure there (PNG, or the format of the suffix).
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        For missing columns or curves of several metrics.

    Examples
    --------
    >>> from fmmlearn.plotting import plot_faithfulness
    >>> ax = plot_faithfulness(pd.concat([curve, rand_curve]), path="curves.png")   # doctest: +SKIP
    """
    frame = getattr(curves, "curves", curves)
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"curves must be a DataFrame of curve rows, got {type(curves).__name__}.")
    missing = {"method", "ratio", "value"} - set(frame.columns)
    if missing:
        raise ValueError(f"curves lacks column(s) {sorted(missing)}; expected faithfulness_curve() rows.")
    metrics = frame["metric"].unique().tolist() if "metric" in frame.columns else ["value"]
    if len(metrics) != 1:
        raise ValueError(f"curves mixes metrics {metrics}; plot one metric at a time.")
    ax = _axes(ax)
    for label, style, stats in _groups(frame):
        _pooled_line(ax, stats, label=label, **style)
    return _finish(ax, str(metrics[0]), title, path)


# --------------------------------------------------------------------------- in-distribution reports

_OOD_STATISTICS = {"simes_p": "Simes p-value (whole test set)",
                   "geomean_p": "geometric-mean p-value (whole test set)",
                   "fisher_p_reference_only": "Fisher p-value (reference procedure only)",
                   "proportion": "share of examples with p < {threshold:g}"}
# Columns that tell lines apart when a frame stacks several reports.
_OOD_LINE_COLUMNS = ("report", "model", "method", "calibration")
# The study's (and the docs') model labels, spelled out, in fixed colours so figures compare.
_OOD_MODELS = {"plain": ("plain fine-tuning", "tab:orange"), "masked": ("masked fine-tuning", "tab:blue")}


def _stacked_reports(report) -> pd.DataFrame:
    """One frame from a report, a stack of reports, or a ``{label: report}`` mapping (label column ``report``)."""
    if isinstance(report, pd.DataFrame):
        return report
    if isinstance(report, dict) and report and all(isinstance(r, pd.DataFrame) for r in report.values()):
        return pd.concat([r.assign(report=str(label)) for label, r in report.items()], ignore_index=True)
    raise TypeError("report must be a DataFrame from in_distribution_report or a non-empty dict of them "
                    f"(label -> report), got {type(report).__name__}.")


def _ood_legend(label: str, rows: pd.DataFrame, stats: pd.DataFrame) -> tuple[str, dict]:
    """Legend text and style of one line: the model spelled out, and what its band is."""
    name, color = _OOD_MODELS.get(label, (label, None))
    runs, what = int(stats["size"].max()), "runs"
    if "seed" in rows.columns and rows["seed"].nunique() > 1:
        runs, what = rows["seed"].nunique(), "seeds"
    if runs > 1:
        name = f"{name}: mean of {runs} {what}, band = their range"
    return name, {} if color is None else {"color": color}


def _ood_lines(frame: pd.DataFrame, statistic: str, threshold: float):
    """``(label, per-ratio stats, rows)`` per line; rows repeated per ratio (seeds) are pooled."""
    keys = [c for c in _OOD_LINE_COLUMNS if c in frame.columns and frame[c].nunique() > 1]
    named = next((c for c in _OOD_LINE_COLUMNS if c in frame.columns), None)
    groups = frame.groupby(keys, sort=False) if keys else [((), frame)]
    for key, rows in groups:
        values = key if isinstance(key, tuple) else (key,)
        label = " / ".join(map(str, values)) if keys else (str(rows[named].iloc[0]) if named else statistic)
        at = (rows["threshold"].astype(float) - threshold).abs() < 1e-12
        if not at.any():
            if statistic == "proportion":
                raise ValueError(f"threshold={threshold:g} is not among the thresholds of report {label!r} "
                                 f"({sorted(rows['threshold'].unique().tolist())}).")
            # Dataset-level p-values repeat on every threshold's row: any one threshold will do.
            at = rows["threshold"] == rows["threshold"].iloc[0]
        stats = rows[at].groupby("ratio")[statistic].agg(["mean", "min", "max", "size"]).sort_index()
        yield label, stats, rows[at]


@keyword_only
def plot_in_distribution(report, *, ax=None, path=None, threshold: float = 0.05, statistic: str = "simes_p",
                         title: str | None = None):
    """Draw MaSF in-distribution p-values against the masking ratio, with a dashed line at ``threshold``.

    The paper's figure: one line per model (plain and masked fine-tuning
    side by side), the mean over seeds with the range over seeds shaded.
    The reading (docs/ood.md): a line above the dashed 0.05 means "cannot
    reject that the masked test set is in-distribution".  In the paper,
    masked fine-tuned models mostly stay above it across the ratios, while
    plain ones drop below it once tokens are masked.  Lines labelled
    ``"plain"`` and ``"masked"`` (the study's labels) are spelled out in the
    legend and drawn in fixed colours (orange, blue).

    Parameters
    ----------
    report : pandas.DataFrame or dict of str to DataFrame
        Rows of :func:`fmmlearn.ood.in_distribution_report`, or a
        ``{label: report}`` mapping such as ``{"plain": rep0, "masked": rep1}``.
        In one frame, lines are told apart by the ``model``, ``method`` and
        ``calibration`` columns that vary; several rows for one line and ratio
        (e.g. concatenated seeds, with a ``seed`` column) are averaged and
        their range shaded; the legend says how many.
    ax : matplotlib Axes, optional
        Draw here; default a new figure.
    path : str or path-like, optional
        Also save the figure there (PNG, or the format of the suffix).
    threshold : float, default=0.05
        Height of the dashed line; for ``statistic="proportion"`` also the
        threshold whose proportion is drawn (the dashed line is then the share
        expected for in-distribution data under ``calibration="calibrated"``).
    statistic : {"simes_p", "geomean_p", "fisher_p_reference_only", "proportion"}, default="simes_p"
        The paper plots the Simes p-value; ``fisher_p_reference_only`` exists
        in ``calibration="reference"`` reports only.
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        For an unknown ``statistic``, missing columns, or a ``threshold`` the
        report has no proportion for.

    Examples
    --------
    >>> from fmmlearn.plotting import plot_in_distribution
    >>> ax = plot_in_distribution({"plain": report_plain, "masked": report_masked}, path="ood.png")  # doctest: +SKIP
    """
    if statistic not in _OOD_STATISTICS:
        raise ValueError(f"statistic must be one of {tuple(_OOD_STATISTICS)}, got {statistic!r}.")
    try:
        level = float(threshold)
    except (TypeError, ValueError):
        level = float("nan")
    if not 0 < level <= 1:
        raise ValueError(f"threshold must be a number in (0, 1], got {threshold!r}.")
    frame = _stacked_reports(report)
    missing = {"ratio", "threshold", statistic} - set(frame.columns)
    if missing:
        raise ValueError(f"report lacks column(s) {sorted(missing)}; expected in_distribution_report() rows.")
    lines = list(_ood_lines(frame, statistic, level))      # fail before a figure is made
    ax = _axes(ax)
    for label, stats, rows in lines:
        legend, style = _ood_legend(label, rows, stats)
        _pooled_line(ax, stats, label=legend, marker="o", markersize=3, **style)
    expected = _expected_share(frame, level) if statistic == "proportion" else None
    if expected is not None:  # the test's null share: p-values are multiples of 1 / (N3 + 1)
        ax.axhline(expected, label=f"{expected:.1%} (share flagged among in-distribution texts)", linewidth=1,
                   **_BASELINE_STYLE)
    else:
        meaning = ("share expected for in-distribution data" if statistic == "proportion"
                   else "below: flagged out-of-distribution")
        ax.axhline(level, label=f"{level:g} ({meaning})", linewidth=1, **_BASELINE_STYLE)
    ax.set_ylim(-0.02, 1.02)
    return _finish(ax, _OOD_STATISTICS[statistic].format(threshold=level), title, path)


def _expected_share(frame: pd.DataFrame, level: float):
    """The null share of the reports at ``level`` (their ``expected`` column), if they have one and agree."""
    if "expected" not in frame.columns:
        return None
    values = frame.loc[np.isclose(frame["threshold"].astype(float), level), "expected"].dropna().unique()
    return float(values.mean()) if len(values) else None


# Shared by the figures over masking ratios.


def _axes(ax):
    """``ax``, or the Axes of a new figure of the house size."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5.5, 3.8))
    return ax


def _pooled_line(ax, stats: pd.DataFrame, **style):
    """A line of ``stats["mean"]`` over the ratios in its index, its ``min``-``max`` range shaded when pooled."""
    ratios = stats.index.to_numpy(dtype=float)
    (line,) = ax.plot(ratios, stats["mean"].to_numpy(), **style)
    if (stats["size"] > 1).any():
        ax.fill_between(ratios, stats["min"].to_numpy(), stats["max"].to_numpy(), alpha=0.15,
                        color=line.get_color(), linewidth=0)
    return line


def _finish(ax, ylabel: str, title: str | None, path):
    """Masking-ratio axis, labels, grid, legend, title; save to ``path`` if given."""
    ax.set_xlabel("masked share of tokens")
    ax.set_ylabel(ylabel)
    ax.set_xlim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize="small")
    if title:
        ax.set_title(title)
    if path is not None:
        _save_figure(ax.figure, path)
    return ax


# --------------------------------------------------------------------------- erasure metrics


_ERASURE_LINE_COLUMNS = ("report", "model", "method", "removal")
_ERASURE_MODE_STYLE = {"comprehensiveness": "-", "sufficiency": "--"}
# Marker colours of the validity flag: in-distribution, out of distribution, not checked.
_VALIDITY_COLORS = {True: "tab:green", False: "tab:red", None: "0.6"}


def _erasure_summary(summary) -> pd.DataFrame:
    """One summary frame from an ErasureReport, a summary, or a ``{label: report or summary}`` mapping."""
    if isinstance(summary, dict) and summary:
        frames = [getattr(s, "summary", s) for s in summary.values()]
        if all(isinstance(f, pd.DataFrame) for f in frames):
            return pd.concat([f.assign(report=str(label)) for label, f in zip(summary, frames)], ignore_index=True)
    frame = getattr(summary, "summary", summary)
    if isinstance(frame, pd.DataFrame):
        return frame
    raise TypeError("summary must be an ErasureReport, its summary DataFrame, or a non-empty dict of them "
                    f"(label -> report), got {type(summary).__name__}.")


@keyword_only
def plot_erasure(summary, *, ax=None, path=None, title: str | None = None):
    """Draw comprehensiveness and sufficiency against ``k``, each point coloured by its validity flag.

    Solid lines are comprehensiveness (higher is better), dashed lines
    sufficiency (lower is better), with the bootstrap CI as error bars.  A
    green point is valid (its perturbed inputs are in-distribution by MaSF), a
    red one is not, a grey one was not checked (no calibration data).  The
    legend gives each line's AOPC and whether it is valid.

    Parameters
    ----------
    summary : ErasureReport, pandas.DataFrame or dict
        An :func:`fmmlearn.faithfulness.erasure_metrics` result, its
        ``summary`` (several stacked; lines are told apart by the ``model``,
        ``method`` and ``removal`` columns that vary), or a ``{label: report}``
        mapping such as ``{"plain": rep0, "masked": rep1}``.
    ax : matplotlib Axes, optional
        Draw here; default a new figure.
    path : str or path-like, optional
        Also save the figure there (PNG, or the format of the suffix).
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        For missing columns.

    Examples
    --------
    >>> from fmmlearn.plotting import plot_erasure
    >>> ax = plot_erasure({"plain": report_plain, "masked": report_masked}, path="erasure.png")  # doctest: +SKIP
    """
    frame = _erasure_summary(summary)
    missing = {"mode", "k", "mean", "ci_low", "ci_high", "valid"} - set(frame.columns)
    if missing:
        raise ValueError(f"summary lacks column(s) {sorted(missing)}; expected erasure_metrics() summary rows.")
    keys = [c for c in _ERASURE_LINE_COLUMNS if c in frame.columns and frame[c].nunique() > 1]
    if "report" in keys:  # a dict's labels already name its reports: keep what varies within one
        keys = ["report"] + [c for c in keys[1:] if (frame.groupby("report")[c].nunique() > 1).any()]
    ax = _axes(ax)
    for key, rows in frame.groupby(keys + ["mode"], sort=False):
        values = key if isinstance(key, tuple) else (key,)
        mode = values[-1]
        at_k = rows[rows["k"].map(lambda v: not isinstance(v, str))].sort_values("k")
        aopc = rows[rows["k"].map(lambda v: isinstance(v, str))]
        ks, mean = at_k["k"].to_numpy(dtype=float), at_k["mean"].to_numpy(dtype=float)
        label = " / ".join(map(str, values))
        if len(aopc):
            flag = aopc["valid"].iloc[0]
            verdict = "not checked" if pd.isna(flag) else ("valid" if flag else "not valid")
            label += f" (AOPC {aopc['mean'].iloc[0]:.3f}, {verdict})"
        (line,) = ax.plot(ks, mean, linestyle=_ERASURE_MODE_STYLE.get(mode, "-"), label=label)
        err = [mean - at_k["ci_low"].to_numpy(dtype=float), at_k["ci_high"].to_numpy(dtype=float) - mean]
        ax.errorbar(ks, mean, yerr=err, fmt="none", ecolor=line.get_color(), alpha=0.5, capsize=2)
        colors = [_VALIDITY_COLORS[None if pd.isna(v) else bool(v)] for v in at_k["valid"]]
        ax.scatter(ks, mean, c=colors, edgecolors=line.get_color(), zorder=3, s=28)
    from matplotlib.ticker import NullLocator, PercentFormatter

    ax.axhline(0.0, linewidth=0.8, **_BASELINE_STYLE)
    ax.set_xscale("log")  # ERASER's k grid spans 1 % to 50 %
    ax.set_xticks(sorted({float(v) for v in frame["k"] if not isinstance(v, str)}))
    ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("k (share of the eligible tokens in the rationale)")
    ax.set_ylabel("p(y | x) - p(y | perturbed x)")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if title:
        ax.set_title(title)
    if path is not None:
        _save_figure(ax.figure, path)
    return ax


# --------------------------------------------------------------------------- studies (fmmlearn.study)


# Colours of the models of a study, in the order they appear (plain grey-blue, masked orange, ...).
_MODEL_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown")


def _model_colors(models) -> dict:
    return {m: _MODEL_COLORS[i % len(_MODEL_COLORS)] for i, m in enumerate(models)}


def _require(frame, columns, what: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"expected a DataFrame of {what}, got {type(frame).__name__}.")
    missing = set(columns) - set(frame.columns)
    if missing:
        raise ValueError(f"the frame lacks column(s) {sorted(missing)}; expected {what}.")


def _converged(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of converged runs only (a study's ``converged`` flag), when the frame has one."""
    return frame[frame["converged"].astype(bool)] if "converged" in frame.columns else frame


@keyword_only
def plot_random_masking(curves, *, ax=None, path=None, title: str | None = None):
    """Performance of each model while random tokens are masked, one line per model (seeds pooled).

    A model fine-tuned with masking keeps most of its performance as more
    tokens are masked; a plainly fine-tuned one usually collapses, because
    masked inputs are new to it.

    Parameters
    ----------
    curves : pandas.DataFrame
        Rows of :func:`fmmlearn.faithfulness.random_masking_curve` with a
        ``model`` column, e.g. a study's ``curves`` (its ``random-masking``
        rows are used).  Several rows per model and ratio (seeds) are
        averaged and their range shaded; unconverged runs are left out.
    ax : matplotlib Axes, optional
    path : str or path-like, optional
        Also save the figure there.
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    _require(curves, ("model", "ratio", "value"), "random-masking curve rows with a model column")
    frame = _converged(curves)
    if "method" in frame.columns:
        frame = frame[frame["method"] == "random-masking"]
    if frame.empty:
        raise ValueError("curves holds no random-masking rows.")
    ax = _axes(ax)
    colors = _model_colors(pd.unique(frame["model"]))
    for model, rows in frame.groupby("model", sort=False):
        stats = rows.groupby("ratio")["value"].agg(["mean", "min", "max", "size"]).sort_index()
        _pooled_line(ax, stats, label=str(model), color=colors[model], marker="o", markersize=3)
    metric = str(frame["metric"].iloc[0]) if "metric" in frame.columns else "value"
    return _finish(ax, metric, title, path)


@keyword_only
def plot_faithfulness_grid(curves, *, path=None, models=None, methods=None, title: str | None = None):
    """Faithfulness curves in small multiples: one row per model, one panel per importance measure.

    Each panel shows the measure's curve (solid) and the ``rand`` curve on
    the *same* test examples (dashed, see :func:`plot_faithfulness`); the
    larger the area between them, the more faithful the measure (RACU).

    Parameters
    ----------
    curves : pandas.DataFrame
        A study's ``curves``: columns ``model``, ``method``, ``subset``,
        ``ratio``, ``value`` (seeds pooled, unconverged runs left out).
    path : str or path-like, optional
        Also save the figure there.
    models, methods : sequence of str, optional
        Rows and columns, in order; default all (``rand`` and
        ``random-masking`` are never panels).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    _require(curves, ("model", "method", "subset", "ratio", "value"), "a study's curves")
    frame = _converged(curves)
    models = list(pd.unique(frame["model"])) if models is None else list(models)
    if methods is None:
        methods = [m for m in pd.unique(frame["method"]) if m not in ("rand", "random-masking")]
    if not models or not methods:
        raise ValueError("curves holds no faithfulness curve of a measure other than rand.")
    fig, axes = plt.subplots(len(models), len(methods), figsize=(2.7 * len(methods) + 0.6, 2.4 * len(models) + 0.5),
                             sharex=True, sharey=True, squeeze=False)
    metric = str(frame["metric"].iloc[0]) if "metric" in frame.columns else "value"
    for i, model in enumerate(models):
        for j, method in enumerate(methods):
            ax = axes[i, j]
            own = frame[(frame["model"] == model) & (frame["method"] == method)]
            if own.empty:
                ax.set_axis_off()
                continue
            subset = own["subset"].iloc[0]
            panel = frame[(frame["model"] == model) & (frame["subset"] == subset)
                          & frame["method"].isin([method, "rand"])]
            plot_faithfulness(panel, ax=ax)
            ax.get_legend().remove()
            n = int(own["n_examples"].iloc[0]) if "n_examples" in own.columns else None
            ax.set_title(f"{method}" + (f"  (n={n})" if n else ""), fontsize="medium")
            ax.set_xlabel("masked share" if i == len(models) - 1 else "")
            ax.set_ylabel(f"{model}\n{metric}" if j == 0 else "")
    handles = [plt.Line2D([], [], color="tab:blue", marker="o", markersize=3, label="importance measure"),
               plt.Line2D([], [], label="rand (same examples)", **_BASELINE_STYLE)]
    fig.legend(handles=handles, loc="upper right", ncol=2, frameon=False, fontsize="small")
    if title:
        fig.suptitle(title, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    if path is not None:
        _save_figure(fig, path)
    return fig


@keyword_only
def plot_racu(summary, *, ax=None, path=None, value: str = "racu", title: str | None = None):
    """RACU (or ACU) of each importance measure and model, with its confidence interval.

    0 is random (the ``rand`` baseline).  For RACU, 1 means masking the
    measure's top tokens drops performance at once to the fully-masked
    level; for ACU the unit is performance x masked share.  The more faithful
    a measure, the further right.  Rows whose RACU is flagged unstable
    (``reliable`` is False: its denominator, the area random masking leaves,
    is near 0) are drawn as hollow points without an interval, clipped to the
    range of the stable ones.

    Parameters
    ----------
    summary : pandas.DataFrame
        A study's ``racu_summary`` (or ``racu``): columns ``model``,
        ``method`` and ``<value>``, ``<value>_low``, ``<value>_high``;
        several rows per model and measure (seeds) are averaged.
    ax : matplotlib Axes, optional
    path : str or path-like, optional
    value : {"racu", "acu"}, default="racu"
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt
    import numpy as np

    if value not in ("racu", "acu"):
        raise ValueError(f"value must be 'racu' or 'acu', got {value!r}.")
    columns = [value, f"{value}_low", f"{value}_high"]
    _require(summary, ("model", "method", *columns), f"{value.upper()} rows")
    frame = _converged(summary).copy()
    frame["stable"] = frame["reliable"].astype(bool) if value == "racu" and "reliable" in frame.columns else True
    frame = frame.groupby(["model", "method"], sort=False).agg(
        **{c: (c, "mean") for c in columns}, stable=("stable", "all")).reset_index()
    methods, models = list(pd.unique(frame["method"])), list(pd.unique(frame["model"]))
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 0.45 * len(methods) * max(1, len(models)) ** 0.5 + 1.2))
    stable = frame[frame["stable"]]
    bounds = stable[columns].to_numpy(dtype=float)
    bounds = bounds[np.isfinite(bounds)]
    low, high = (min(bounds.min(), 0.0), max(bounds.max(), 1.0 if value == "racu" else 0.0)) if bounds.size \
        else (-1.0, 2.0)
    pad = 0.05 * (high - low or 1.0)
    colors = _model_colors(models)
    offsets = np.linspace(-0.18, 0.18, len(models)) if len(models) > 1 else [0.0]
    for offset, model in zip(offsets, models):
        rows = frame[frame["model"] == model].set_index("method").reindex(methods)
        y = np.arange(len(methods)) + offset
        ok = rows["stable"].fillna(False).to_numpy(dtype=bool)
        point = rows[value].to_numpy(dtype=float)
        err = np.abs(np.vstack([point - rows[f"{value}_low"], rows[f"{value}_high"] - point]))
        ax.errorbar(point[ok], y[ok], xerr=np.nan_to_num(err[:, ok]), fmt="o", color=colors[model],
                    label=str(model), capsize=3, markersize=5)
        if (~ok).any():
            ax.plot(np.clip(point[~ok], low - pad, high + pad), y[~ok], "o", markerfacecolor="white",
                    color=colors[model], markersize=5)
    if (~frame["stable"]).any():
        ax.plot([], [], "o", markerfacecolor="white", color="0.4", label="unstable (no interval)")
    ax.axvline(0, label="random", linewidth=1, **_BASELINE_STYLE)
    ax.set_xlim(low - 2 * pad, high + 2 * pad)
    ax.set_yticks(np.arange(len(methods)), methods)
    ax.invert_yaxis()
    ax.set_xlabel("RACU (0 = random, 1 = drops at once)" if value == "racu"
                  else "ACU (area between the random and the measure's curve)")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(frameon=False, fontsize="small", loc="best")
    if title:
        ax.set_title(title)
    if path is not None:
        _save_figure(ax.figure, path)
    return ax


@keyword_only
def plot_performance(performance, *, ax=None, path=None, title: str | None = None):
    """Clean test performance of each model: a bar per model, its CI, and a dot per seed.

    Parameters
    ----------
    performance : pandas.DataFrame
        A study's ``performance``: columns ``model``, ``value``, ``low``,
        ``high`` (one row per seed); unconverged runs are drawn hollow.
    ax : matplotlib Axes, optional
    path : str or path-like, optional
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt
    import numpy as np

    _require(performance, ("model", "value", "low", "high"), "a study's performance rows")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.3 * performance["model"].nunique() + 2.2, 3.0))
    models = list(pd.unique(performance["model"]))
    colors = _model_colors(models)
    for x, model in enumerate(models):
        rows = performance[performance["model"] == model]
        kept = _converged(rows)
        mean = kept["value"].mean() if len(kept) else np.nan
        low, high = kept["low"].mean(), kept["high"].mean()
        ax.bar(x, mean, width=0.6, color=colors[model], alpha=0.35)
        ax.errorbar(x, mean, yerr=[[mean - low], [high - mean]], color=colors[model], capsize=4)
        for value, ok in zip(rows["value"], rows.get("converged", pd.Series(True, index=rows.index))):
            ax.plot(x, value, "o", color=colors[model], markerfacecolor=colors[model] if ok else "white")
        ax.annotate(f"{mean:.3f}", (x, high), textcoords="offset points", xytext=(0, 4), ha="center",
                    fontsize="small")
    ax.set_xticks(range(len(models)), models)
    metric = str(performance["metric"].iloc[0]) if "metric" in performance.columns else "value"
    ax.set_ylabel(f"test {metric} (unmasked)")
    ax.set_ylim(0, min(1.05, max(1.0, float(performance["high"].max()) + 0.1)))
    ax.grid(alpha=0.3, axis="y")
    if title:
        ax.set_title(title)
    if path is not None:
        _save_figure(ax.figure, path)
    return ax

"""The result of a study: tidy frames, figures, a plain-language summary, the HTML report, save/load."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["FRAMES", "StudyResult", "erasure_by_model", "load_study"]

#: The frames of a :class:`StudyResult`, in the order they are saved.
FRAMES = ("performance", "curves", "racu", "racu_summary", "in_distribution", "erasure", "explanations",
          "outcomes", "timings")
_METADATA = "metadata.json"
_FORMATS = ("parquet", "csv")
_LEVEL = 0.05
# Line colours of the erasure plot: its points are green (valid), red (not valid) or grey (not checked).
_LINE_COLORS = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:cyan", "tab:olive", "tab:pink", "black")


class StudyResult:
    """Everything a :class:`~fmmlearn.study.FaithfulnessStudy` measured, as tidy pandas frames.

    Attributes
    ----------
    performance : pandas.DataFrame
        One row per fine-tuned model (``model``, ``max_masking_ratio``,
        ``seed``): clean test ``value`` of ``metric`` with its bootstrap CI
        over examples (``low``, ``high``), ``converged``, epochs and fit time.
    curves : pandas.DataFrame
        One row per model, curve and ratio: ``method`` (a measure, ``rand``,
        or ``random-masking``), ``subset`` (the test examples the curve is
        on: ``all``, ``random k`` or ``shortest k``; ``rand`` appears once
        per subset, as the baseline of the measures on it), ``ratio``,
        ``value``, ``n_examples``, ``mean_masked_fraction``.
    racu : pandas.DataFrame
        RACU and ACU of every measure per model and seed, with bootstrap CIs
        over the test examples (``racu_low``/``racu_high``, ...); the
        baseline is the mean of ``n_baseline`` ``rand`` curves on the same
        examples.
    racu_summary : pandas.DataFrame
        Per model and measure, over converged seeds: mean RACU and ACU with
        the CI over examples of that mean, the CI over seeds
        (``racu_seed_low``/``racu_seed_high``; NaN with one seed), the area
        random masking leaves (``baseline_area``, RACU's denominator, with
        its CI), ``reliable`` (the lower bound of that area's CI is at
        least half of it, so RACU's denominator is known to about +-50 %)
        and ``most_faithful`` (the highest RACU of the model when all its
        RACUs are reliable, else the highest ACU).
    in_distribution : pandas.DataFrame
        The MaSF reports (:func:`fmmlearn.ood.in_distribution_report`) of
        all models and seeds: per ratio and threshold, the share of masked
        test examples with ``p < threshold`` and dataset-level p-values.
    erasure : pandas.DataFrame
        ERASER's erasure metrics (:func:`fmmlearn.faithfulness.erasure_metrics`,
        removal by the mask token) of the ``erasure`` measures and of
        ``rand`` on the same test texts (``subset``), per model and seed:
        one row per ``mode`` (comprehensiveness, sufficiency) and ``k``, then
        the AOPC row (``aopc`` True, ``k`` NaN); the ``mean`` over examples
        with its bootstrap CI (``ci_low``, ``ci_high``), ``n_perturbed``
        erased inputs, ``ood_share`` (the share of them MaSF flags at
        ``p < 0.05``) and ``valid`` (``ood_share`` at most twice 0.05; an
        AOPC row is valid when every ``k`` is; ``<NA>``: not checked).  Empty
        when the stage did not run.
    explanations : fmmlearn.explanation.Explanation
        The long frame of :func:`fmmlearn.explanation.explain` for a few
        test examples and every model (columns ``model``, ``seed`` and
        ``test_index`` added); it renders as heatmaps.
    outcomes : pandas.DataFrame
        Per model, seed, measure (``draw`` numbers the ``rand`` baseline
        draws), ratio and test example: the prediction,
        whether it is correct and the gold-class probability (everything
        the curves and CIs are computed from).
    timings : pandas.DataFrame
        One row per stage job: ``cached``, wall ``seconds`` of this run,
        ``compute_seconds`` when it was computed, examples and forward
        counts.
    metadata : dict
        Settings, data sizes, versions, CPU model and flags, torch threads,
        precision used, seeds, per-stage timings.
    """

    def __init__(self, *, metadata: dict, **frames):
        unknown = set(frames) - set(FRAMES)
        if unknown:
            raise TypeError(f"unknown frame(s) {sorted(unknown)}; a StudyResult holds {list(FRAMES)}.")
        for name in FRAMES:
            setattr(self, name, frames.get(name, pd.DataFrame()))
        self.metadata = metadata

    def __repr__(self) -> str:
        models = ", ".join(pd.unique(self.performance["model"])) if len(self.performance) else "none"
        measures = ", ".join(pd.unique(self.racu_summary["method"])) if len(self.racu_summary) else "none"
        return (f"StudyResult(data={self.metadata.get('data', {}).get('name')!r}, models=[{models}], "
                f"measures=[{measures}], seeds={self.metadata.get('seeds')})")

    # ------------------------------------------------------------------ figures
    def plot_performance(self, ax=None, path=None):
        """Clean test performance per model (see :func:`fmmlearn.plotting.plot_performance`)."""
        from ..plotting import plot_performance

        return plot_performance(self.performance, ax=ax, path=path)

    def plot_random_masking(self, ax=None, path=None):
        """Random-masking curves per model (see :func:`fmmlearn.plotting.plot_random_masking`)."""
        from ..plotting import plot_random_masking

        return plot_random_masking(self.curves, ax=ax, path=path)

    def plot_faithfulness(self, model=None, path=None):
        """Faithfulness curves, one panel per measure and model (see :func:`fmmlearn.plotting.plot_faithfulness_grid`).

        Parameters
        ----------
        model : str, optional
            Only this model's row of panels (e.g. ``"masked"``).
        path : str or path-like, optional

        Returns
        -------
        matplotlib.figure.Figure
        """
        from ..plotting import plot_faithfulness_grid

        models = None if model is None else [model]
        if model is not None and model not in set(self.curves["model"]):
            raise ValueError(f"model {model!r} is not in the study; it has {list(pd.unique(self.curves['model']))}.")
        return plot_faithfulness_grid(self.curves, path=path, models=models)

    def plot_racu(self, value="racu", ax=None, path=None):
        """RACU (or ACU) with its CI per measure and model (see :func:`fmmlearn.plotting.plot_racu`)."""
        from ..plotting import plot_racu

        return plot_racu(self.racu_summary, ax=ax, path=path, value=value)

    def plot_in_distribution(self, statistic="proportion", threshold=_LEVEL, ax=None, path=None):
        """MaSF statistic against the masking ratio, one line per model with its seed band.

        See :func:`fmmlearn.plotting.plot_in_distribution`; ``"proportion"``
        (default) is the share of masked test examples with ``p < threshold``.
        """
        from ..plotting import plot_in_distribution

        if self.in_distribution.empty:
            raise ValueError("the study ran without the in-distribution stage (in_distribution=None).")
        frame = self.in_distribution[self.in_distribution["converged"].astype(bool)]
        return plot_in_distribution(frame, ax=ax, path=path, statistic=statistic, threshold=threshold)

    def plot_erasure(self, ax=None, path=None, *, baseline: bool = False):
        """Comprehensiveness and sufficiency against ``k``, one line per model, coloured by validity.

        Means over the converged seeds (:func:`erasure_by_model`); see
        :func:`fmmlearn.plotting.plot_erasure`.  Green points are valid, red
        ones not, grey ones not checked.

        Parameters
        ----------
        ax : matplotlib Axes, optional
        path : str or path-like, optional
        baseline : bool, default=False
            Also draw the ``rand`` baseline's lines.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from ..faithfulness import AOPC
        from ..plotting import plot_erasure

        rows = erasure_by_model(self)
        if rows.empty:
            raise ValueError("the study has no erasure metrics (it ran with erasure=None, or no converged run).")
        if not baseline:
            rows = rows[rows["method"] != "rand"]
        rows = rows.assign(k=[AOPC if total else k for total, k in zip(rows["aopc"], rows["k"])])
        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(9, 3.8))
            # One colour per model (solid and dashed line alike), none of them the green or red of the flags.
            ax.set_prop_cycle(color=[c for c in _LINE_COLORS for _ in range(2)])
        return plot_erasure(rows, ax=ax, path=path)

    # ------------------------------------------------------------------ text
    def summary(self) -> str:
        """A plain-language summary: accuracy, the most faithful measures, in-distribution and erasure verdicts."""
        return "\n".join(_summary_lines(self))

    def to_html(self, path=None, *, title: str | None = None) -> str:
        """The self-contained HTML report (inline CSS, figures as PNG data URIs, no scripts, no network).

        Parameters
        ----------
        path : str or path-like, optional
            Also write the report there (atomically).
        title : str, optional

        Returns
        -------
        str
        """
        from ._report import render_report

        page = render_report(self, title=title)
        if path is not None:
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(path, lambda tmp: tmp.write_text(page, encoding="utf-8"))
        return page

    # ------------------------------------------------------------------ persistence
    def save(self, directory, *, format: str = "parquet") -> Path:
        """Save every frame (Parquet or CSV) and ``metadata.json`` to ``directory``.

        Each file is written to a temporary name and renamed, ``metadata.json``
        last, so a reader never sees a half-written result.

        Parameters
        ----------
        directory : str or path-like
            Created if needed.
        format : {"parquet", "csv"}, default="parquet"
            Parquet needs ``pyarrow`` (or ``fastparquet``); CSV always works
            (column types are restored on load).

        Returns
        -------
        pathlib.Path
        """
        if format not in _FORMATS:
            raise ValueError(f"format must be one of {_FORMATS}, got {format!r}.")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files = {}
        for name in FRAMES:
            frame = getattr(self, name)
            file = directory / f"{name}.{format}"
            plain = pd.DataFrame(frame)  # an Explanation's rows, without its per-example table
            if format == "parquet":
                _atomic_write(file, lambda tmp, f=plain: f.to_parquet(tmp, index=False))
            else:
                _atomic_write(file, lambda tmp, f=plain: f.to_csv(tmp, index=False))
            files[name] = {"file": file.name, "dtypes": {c: str(t) for c, t in frame.dtypes.items()},
                           "columns": list(frame.columns)}
            if _is_explanation(frame):  # its own exact format keeps the original texts and predictions
                json_file = directory / f"{name}.explanation.json"
                _atomic_write(json_file, lambda tmp, f=frame: tmp.write_text(f.to_json(), encoding="utf-8"))
                files[name]["explanation"] = json_file.name
        meta = {**self.metadata, "saved": {"format": format, "frames": files}}
        _atomic_write(directory / _METADATA, lambda tmp: tmp.write_text(json.dumps(meta, indent=2, default=str)))
        return directory

    @classmethod
    def load(cls, directory) -> "StudyResult":
        """Load a result written by :meth:`save`."""
        directory = Path(directory)
        meta_file = directory / _METADATA
        if not meta_file.is_file():
            raise FileNotFoundError(f"{directory} holds no {_METADATA}; it was not written by StudyResult.save().")
        metadata = json.loads(meta_file.read_text())
        saved = metadata.pop("saved")
        frames = {}
        for name, info in saved["frames"].items():
            file = directory / info["file"]
            if "explanation" in info:
                from ..explanation import Explanation

                frames[name] = Explanation.read_json(directory / info["explanation"])
            elif saved["format"] == "parquet":
                frames[name] = pd.read_parquet(file)
            elif not info["columns"]:
                frames[name] = pd.DataFrame()
            else:
                frame = pd.read_csv(file, keep_default_na=True)
                frames[name] = frame.astype({c: t for c, t in info["dtypes"].items() if c in frame.columns})
        return cls(metadata=metadata, **frames)


def load_study(directory) -> StudyResult:
    """Load a study result saved with :meth:`StudyResult.save` (same as :meth:`StudyResult.load`)."""
    return StudyResult.load(directory)


def _is_explanation(frame) -> bool:
    from ..explanation import Explanation

    return isinstance(frame, Explanation)


def _atomic_write(path: Path, write) -> None:
    """``write(tmp)`` to a temporary sibling of ``path``, then rename it over ``path``."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


# --------------------------------------------------------------------------- the plain-language summary


def _ci(low, high) -> str:
    return "" if not (np.isfinite(low) and np.isfinite(high)) else f" (95% CI {low:.2f} to {high:.2f})"


def performance_by_model(result: StudyResult) -> pd.DataFrame:
    """Mean clean test performance per model over its converged seeds, with the mean CI bounds."""
    kept = result.performance[result.performance["converged"].astype(bool)]
    return kept.groupby("model", sort=False)[["value", "low", "high"]].mean()


def _performance_lines(result: StudyResult) -> list[str]:
    perf = performance_by_model(result)
    metric = result.metadata["data"]["metric"]
    lines = []
    dropped = result.performance[~result.performance["converged"].astype(bool)]
    if len(dropped):
        runs = ", ".join(f"{m} seed {s}" for m, s in zip(dropped["model"], dropped["seed"]))
        lines.append(f"Not converged (left out of every mean): {runs}.")
    if perf.empty:
        return lines + ["No run converged; nothing to compare."]
    ranked = perf.sort_values("value", ascending=False)
    parts = [f"{model} {row.value:.3f}{_ci(row.low, row.high)}" for model, row in ranked.iterrows()]
    lines.append(f"Test {metric}: " + "; ".join(parts) + ".")
    if len(ranked) > 1:
        (best, top), (second, other) = list(ranked.iterrows())[:2]
        overlap = top.low <= other.high
        lines.append(f"  The {best} model is more accurate by {top.value - other.value:.3f}"
                     + (" (the intervals overlap: within noise)." if overlap else " (the intervals do not overlap)."))
    return lines


def _faithfulness_lines(result: StudyResult) -> list[str]:
    from ._frames import ranking_metric

    summary = result.racu_summary.dropna(subset=["acu"])
    lines = ["Most faithful explanation (RACU: 0 = no better than random, 1 = performance drops at once; "
             "ACU: the area between the random and the explanation's curve):"]
    for model, rows in summary.groupby("model", sort=False):
        by = ranking_metric(rows)
        ranked = rows.sort_values(by, ascending=False)
        best, digits = ranked.iloc[0], 2 if by == "racu" else 3
        text = (f"  {model}: {best['method']}, {by.upper()} {best[by]:.{digits}f}"
                f"{_ci(best[f'{by}_low'], best[f'{by}_high'])}")
        if len(ranked) > 1:
            runner = ranked.iloc[1]
            text += (f", ahead of {runner['method']} ({runner[by]:.{digits}f}) by "
                     f"{best[by] - runner[by]:.{digits}f}")
        if by == "acu":
            unstable = rows.loc[~rows["reliable"], "method"].tolist()
            which = "every measure" if len(unstable) == len(rows) else ", ".join(unstable)
            text += f"; ranked by ACU, as RACU is unstable for {which} on so few texts"
        lines.append(text + ".")
    return lines if len(lines) > 1 else []


def in_distribution_verdicts(result: StudyResult, level: float = _LEVEL) -> pd.DataFrame:
    """Per model: share of masked test examples flagged at ``p < level`` and ratios where Simes rejects.

    Averaged over converged seeds and over the masking ratios above 0.

    Returns
    -------
    pandas.DataFrame
        Indexed by model: ``flagged`` (mean share), ``n_rejected`` (ratios
        with mean Simes p below ``level``), ``n_ratios``, ``first_rejected``
        (the smallest such ratio, NaN if none) and ``accepted_up_to`` (the
        largest ratio below it, NaN if the smallest ratio is rejected).
    """
    frame = result.in_distribution
    if frame.empty:
        return pd.DataFrame()
    rows = frame[frame["converged"].astype(bool) & (frame["ratio"] > 0)
                 & np.isclose(frame["threshold"].astype(float), level)]
    out = {}
    for model, part in rows.groupby("model", sort=False):
        per_ratio = part.groupby("ratio")[["proportion", "simes_p"]].mean()
        rejected = per_ratio["simes_p"] < level
        first = per_ratio.index[rejected].min() if rejected.any() else float("nan")
        accepted_before = per_ratio.index[per_ratio.index < first] if rejected.any() else per_ratio.index
        out[model] = {"flagged": float(per_ratio["proportion"].mean()), "n_rejected": int(rejected.sum()),
                      "n_ratios": int(len(per_ratio)), "first_rejected": float(first),
                      "accepted_up_to": float(accepted_before.max()) if len(accepted_before) else float("nan")}
    return pd.DataFrame.from_dict(out, orient="index")


def verdict_text(row) -> str:
    """Plain words for one row of :func:`in_distribution_verdicts`."""
    n_rejected, n_ratios = int(row["n_rejected"]), int(row["n_ratios"])
    if n_rejected == 0:
        return "in-distribution at every masking ratio (the Simes test never rejects)"
    if np.isfinite(row["accepted_up_to"]):
        return (f"in-distribution up to {row['accepted_up_to']:.0%} masked; the Simes test rejects from "
                f"{row['first_rejected']:.0%} on ({n_rejected} of {n_ratios} ratios)")
    return f"out of distribution from {row['first_rejected']:.0%} masked on ({n_rejected} of {n_ratios} ratios)"


def _in_distribution_lines(result: StudyResult) -> list[str]:
    verdicts = in_distribution_verdicts(result)
    if verdicts.empty:
        return []
    lines = [f"Are masked inputs in-distribution? (MaSF; share of masked test examples with p < {_LEVEL:g}, "
             f"{_LEVEL:.0%} expected if they are):"]
    for model, row in verdicts.iterrows():
        lines.append(f"  {model}: {row['flagged']:.0%} flagged; {verdict_text(row)}.")
    return lines


def _all_valid(flags: pd.Series):
    """``False`` if any flag is False, else ``<NA>`` if any is missing, else ``True``."""
    flags = pd.Series(flags, dtype="boolean")
    if (flags == False).any():  # noqa: E712 - elementwise on a nullable boolean
        return False
    return pd.NA if flags.isna().any() or flags.empty else True


def erasure_by_model(result: StudyResult) -> pd.DataFrame:
    """The erasure metrics per model over its converged seeds.

    ``mean``, ``ci_low``, ``ci_high`` and ``ood_share`` are means over the
    seeds (as :func:`performance_by_model` does for the CIs); ``valid`` is
    False when any seed's is, ``<NA>`` when any is unchecked, else True.

    Returns
    -------
    pandas.DataFrame
        One row per model, ``method``, ``subset``, ``mode`` and ``k`` (the AOPC
        row: ``aopc`` True), with ``n_seeds``.
    """
    frame = result.erasure
    if frame.empty:
        return pd.DataFrame()
    kept = frame[frame["converged"].astype(bool)]
    keys = ["model", "method", "subset", "removal", "mode", "aopc", "k"]
    grouped = kept.groupby(keys, sort=False, dropna=False)
    out = grouped[["n_examples", "mean", "ci_low", "ci_high", "n_perturbed", "ood_share"]].mean()
    out["valid"] = grouped["valid"].agg(_all_valid).astype("boolean")
    out["n_seeds"] = grouped.size()
    return out.reset_index()


def _verdict(flag) -> str:
    return "not checked" if pd.isna(flag) else ("valid" if flag else "not valid")


def _names(models: list) -> str:
    return models[0] if len(models) == 1 else ", ".join(models[:-1]) + " and " + models[-1]


def _erasure_lines(result: StudyResult) -> list[str]:
    rows = erasure_by_model(result)
    if rows.empty:
        return []
    meta = result.metadata.get("erasure") or {}
    alpha = meta.get("alpha", _LEVEL)
    aopc = rows[rows["aopc"]]
    grid = ", ".join(f"{k:.0%}" for k in meta.get("k", sorted(rows["k"].dropna().unique())))
    lines = [f"Erasure metrics (AOPC over the top k = {grid} of the tokens; valid when MaSF flags at most "
             f"{alpha * meta.get('max_invalid_factor', 2.0):.0%} of the erased inputs at p < {alpha:g}):"]
    order = ("valid", "not valid", "not checked")
    for method in [m for m in pd.unique(aopc["method"]) if m != "rand"]:
        verdicts = {}
        for model, part in aopc[aopc["method"] == method].groupby("model", sort=False):
            base = aopc[(aopc["method"] == "rand") & (aopc["model"] == model)
                        & (aopc["subset"] == part["subset"].iloc[0])].set_index("mode")["mean"]
            parts = []
            for rec in part.itertuples(index=False):
                versus = f" (rand {base[rec.mode]:.3f})" if rec.mode in base.index else ""
                flagged = "" if not np.isfinite(rec.ood_share) else f", {rec.ood_share:.0%} flagged"
                parts.append(f"{rec.mode} {rec.mean:.3f}{versus} {_verdict(rec.valid)}{flagged}")
                verdicts.setdefault(rec.mode, {}).setdefault(_verdict(rec.valid), []).append(model)
            lines.append(f"  {model}, {method}: " + "; ".join(parts) + ".")
        # One sentence per verdict pattern: "Comprehensiveness and sufficiency of loo-sign: valid for masked, ..."
        patterns = {}
        for mode, by in verdicts.items():
            key = tuple((word, tuple(by[word])) for word in order if word in by)
            patterns.setdefault(key, []).append(mode)
        for key, modes in patterns.items():
            said = ", ".join(f"{word} for {_names(list(models))}" for word, models in key)
            lines.append(f"  {_names(modes).capitalize()} of {method}: {said}.")
    return lines


def _summary_lines(result: StudyResult) -> list[str]:
    data = result.metadata["data"]
    sizes = data["sizes"]
    head = (f"Faithfulness study on {data['name']}: {sizes['train']} training, {sizes['valid']} validation and "
            f"{sizes['test']} test texts, {len(result.metadata.get('seeds', []))} seed(s).")
    return [head, *_performance_lines(result), *_faithfulness_lines(result), *_in_distribution_lines(result),
            *_erasure_lines(result)]

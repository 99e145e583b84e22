"""The plain-language summary of a study: accuracy, the most faithful measures, in-distribution and erasure.

Each ``*_lines`` function reads the result's frames (through :mod:`fmmlearn.study._tables`) and
returns sentences; :func:`summary_lines` is what :meth:`StudyResult.summary` and the report print.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._formatting import interval
from ._tables import (
    LEVEL,
    erasure_by_model,
    in_distribution_verdicts,
    performance_by_model,
    ranking_metric,
    verdict_text,
)

__all__ = ["summary_lines"]


def _performance_lines(result) -> list[str]:
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
    parts = [f"{model} {row.value:.3f}{interval(row.low, row.high, style='words')}" for model, row in ranked.iterrows()]
    lines.append(f"Test {metric}: " + "; ".join(parts) + ".")
    if len(ranked) > 1:
        (best, top), (second, other) = list(ranked.iterrows())[:2]
        overlap = top.low <= other.high
        lines.append(f"  The {best} model is more accurate by {top.value - other.value:.3f}"
                     + (" (the intervals overlap: within noise)." if overlap else " (the intervals do not overlap)."))
    return lines


def _faithfulness_lines(result) -> list[str]:
    summary = result.racu_summary.dropna(subset=["acu"])
    lines = ["Most faithful explanation (RACU: 0 = no better than random, 1 = performance drops at once; "
             "ACU: the area between the random and the explanation's curve):"]
    for model, rows in summary.groupby("model", sort=False):
        by = ranking_metric(rows)
        ranked = rows.sort_values(by, ascending=False)
        best, digits = ranked.iloc[0], 2 if by == "racu" else 3
        text = (f"  {model}: {best['method']}, {by.upper()} {best[by]:.{digits}f}"
                f"{interval(best[f'{by}_low'], best[f'{by}_high'], style='words')}")
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


def _in_distribution_lines(result) -> list[str]:
    verdicts = in_distribution_verdicts(result)
    if verdicts.empty:
        return []
    lines = [f"Are masked inputs in-distribution? (MaSF; share of masked test examples with p < {LEVEL:g}, "
             f"{LEVEL:.0%} expected if they are):"]
    for model, row in verdicts.iterrows():
        lines.append(f"  {model}: {row['flagged']:.0%} flagged; {verdict_text(row)}.")
    return lines


def _verdict(flag) -> str:
    return "not checked" if pd.isna(flag) else ("valid" if flag else "not valid")


def _names(models: list) -> str:
    return models[0] if len(models) == 1 else ", ".join(models[:-1]) + " and " + models[-1]


def _erasure_lines(result) -> list[str]:
    rows = erasure_by_model(result)
    if rows.empty:
        return []
    meta = result.metadata.get("erasure") or {}
    alpha = meta.get("alpha", LEVEL)
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


def summary_lines(result) -> list[str]:
    data = result.metadata["data"]
    sizes = data["sizes"]
    head = (f"Faithfulness study on {data['name']}: {sizes['train']} training, {sizes['valid']} validation and "
            f"{sizes['test']} test texts, {len(result.metadata.get('seeds', []))} seed(s).")
    return [head, *_performance_lines(result), *_faithfulness_lines(result), *_in_distribution_lines(result),
            *_erasure_lines(result)]

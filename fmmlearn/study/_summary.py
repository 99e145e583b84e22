"""The plain-language summary of a study: accuracy, the most faithful measures, in-distribution and erasure.

Each ``*_lines`` function reads the result's frames (through :mod:`fmmlearn.study._tables`) and
returns sentences; :func:`summary_lines` is what :meth:`StudyResult.summary` and the report print.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..utils import interval
from ._tables import LEVEL, comparison_between, erasure_by_model, performance_by_model, ranked_measures

__all__ = ["summary_lines"]


def _words(row: dict, first: str, second: str, digits: int = 3) -> str:
    """A comparison of ``first - second`` in words: ahead by d [CI], equivalent within +-m, or not separated."""
    d, ci = row["estimate"], interval(row["ci_low"], row["ci_high"], digits, style="signed")
    if row["verdict"] == "first ahead":
        return f"ahead of {second} by {d:.{digits}f} {ci}"
    if row["verdict"] == "second ahead":
        return f"behind {second} by {-d:.{digits}f} {ci}"
    if row["verdict"] == "equivalent":
        return f"equivalent to {second} within ±{row['margin']:g} (difference {d:+.{digits}f} {ci})"
    return (f"not separated from {second}: difference {d:+.{digits}f} {ci}, inconclusive at the margin "
            f"±{row['margin']:g}")


def _performance_lines(result) -> list[str]:
    perf = performance_by_model(result)
    metric = result.metadata["data"]["metric"]
    lines = []
    frame = result.performance
    dropped = frame[~frame["converged"].astype(bool)]
    if len(dropped):
        lines.append("Not counted (left out of every mean): " + "; ".join(
            f"{r['model']} seed {r['seed']} ({r['reason']})" if "reason" in r else f"{r['model']} seed {r['seed']}"
            for r in dropped.to_dict("records")) + ".")
    if perf.empty:  # what the fits reached, though none counts
        everything = frame.groupby("model", sort=False)[["value", "low", "high"]].mean()
        parts = [f"{model} {row.value:.3f}{interval(row.low, row.high, style='words')}"
                 for model, row in everything.iterrows()]
        return lines + [f"Test {metric} (no fit counted): " + "; ".join(parts) + "; nothing to compare."]
    ranked = perf.sort_values("value", ascending=False)
    parts = [f"{model} {row.value:.3f}{interval(row.low, row.high, style='words')}" for model, row in ranked.iterrows()]
    lines.append(f"Test {metric}: " + "; ".join(parts) + ".")
    comparisons = result.comparisons
    models = comparisons[comparisons["kind"] == "models"] if len(comparisons) else comparisons
    for row in models.to_dict("records") if len(models) else []:
        lines.append(f"  {row['first']} - {row['second']}: {row['first']} is {_words(row, row['first'], row['second'])}"
                     f" ({row['n_examples']} test texts, {row['n_seeds']} seed(s)).")
    return lines


def _faithfulness_lines(result) -> list[str]:
    summary = result.racu_summary.dropna(subset=["acu"])
    rules = result.metadata.get("rules") or {}
    margin = (rules.get("margins") or {}).get("acu_margin")
    lines = ["Most faithful explanation (ACU: the area between random masking's accuracy curve and the "
             "explanation's; measures compared on the texts both ran on"
             + (f", equivalent within ±{margin:g}):" if margin is not None else "):")]
    for model, rows in summary.groupby("model", sort=False):
        ranked = ranked_measures(rows, result.comparisons)
        by_acu = [m for m in rows.sort_values("acu", ascending=False, kind="stable")["method"] if m != ranked[0]]
        ranked = [ranked[0], *by_acu]  # the runner-up: the strongest other measure by ACU
        best = rows[rows["method"] == ranked[0]].iloc[0]
        text = f"  {model}: {best['method']} (ACU {best['acu']:.3f} {interval(best['acu_low'], best['acu_high'], 3)}"
        if bool(best.get("racu_stable", False)) and bool(best.get("reliable", False)):
            text += f", RACU {best['racu']:.2f} {interval(best['racu_low'], best['racu_high'])}"
        text += ")"
        if len(ranked) > 1:
            row = comparison_between(result.comparisons, model, ranked[0], ranked[1])
            text += "; " + (_words(row, ranked[0], ranked[1]) if row is not None else f"then {ranked[1]}")
        lines.append(text + ".")
    lines += _budget_lines(result)
    return lines if len(lines) > 1 else []


def _budget_lines(result) -> list[str]:
    """With a budget: how many rounds ran, why they stopped, and which comparisons stayed open."""
    rounds = result.metadata.get("rounds") or {}
    if not rounds.get("budget"):
        return []
    frame = result.comparisons
    open_rows = frame[(frame["kind"] == "measures") & (frame["verdict"] == "inconclusive")] if len(frame) else frame
    added = sum(step["added_texts"] for step in rounds.get("added", []))
    line = (f"  Budget {rounds['budget']:g} s: {rounds['rounds']} round(s), {added} texts added to the costly "
            f"measures; stopped: {rounds['stopped']}.")
    if len(open_rows):
        line += " Not decided: " + ", ".join(f"{r['first']} vs {r['second']} ({r['model']})"
                                             for r in open_rows.to_dict("records")) + "."
    return [line]


def _in_distribution_lines(result) -> list[str]:
    verdicts = result.frames.get("in_distribution_verdicts")
    if verdicts is None or not len(verdicts):
        return []
    expected = " or ".join(dict.fromkeys(f"{row['expected']:.1%}" for row in verdicts.to_dict("records")))
    detector = verdicts["detector"].iloc[0] if "detector" in verdicts.columns else "MaSF"
    lines = [f"Are masked inputs in-distribution? ({detector}: the share of masked test texts flagged at p < "
             f"{LEVEL:g}, masking ratios 10-90 %; it flags {expected} of in-distribution texts; power: the share "
             "of the same texts flagged with a never-seen placeholder where the mask token is):"]
    for row in verdicts.to_dict("records"):
        flagged = interval(row["flagged_low"], row["flagged_high"], 1, style="percent")
        note = "" if row.get("counted", True) else " (no fit counted: all seeds, for information)"
        lines.append(f"  {row['model']}{note}: {row['flagged']:.1%} {flagged} flagged: {row['verdict']} "
                     f"({row['reason']}); {_controls_text(row)}.")
    return lines


def _controls_text(row) -> str:
    """The power and the controls of one verdict row, in a few words."""
    parts = [f"power {row['power']:.0%} {interval(row['power_low'], row['power_high'], 0, style='percent')}"]
    if row.get("negative_n"):
        parts.append(f"negative control {row['negative_share']:.0%} "
                     f"{interval(row['negative_low'], row['negative_high'], 0, style='percent')}")
    else:
        parts.append("no negative control (too few validation texts)")
    parts.append(f"random tokens {row['random_share']:.0%}")
    if row.get("other_domain_n"):
        parts.append(f"another domain {row['other_domain_share']:.0%}")
    return ", ".join(parts)


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
    lines = [f"Erasure metrics (AOPC over the top k = {grid} of the tokens; valid when the in-distribution test flags "
             "at most "
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
    return [head, *_performance_lines(result), *_faithfulness_lines(result), *_precision_lines(result),
            *_in_distribution_lines(result), *_erasure_lines(result)]


def _precision_lines(result) -> list[str]:
    """What the precision probe decided per costly measure, with its largest change (docs/benchmarks.md)."""
    probe = result.frames.get("precision_probe")
    if probe is None or not len(probe):
        return []
    parts = []
    for method, rows in probe.groupby("method", sort=False):
        worst = rows["share_of_half_width"].max()
        where = "bf16" if bool(rows["accepted"].all()) else "fp32"
        parts.append(f"{method} in {where} (ACU changed by at most {rows['acu_change'].max():.4f}, "
                     f"{worst:.0%} of its interval's half-width)")
    return ["Precision (each measure's first texts computed in fp32 and in bf16; bf16 kept where it moved ACU "
            "and RACU by less than a tenth of their interval's half-width): " + "; ".join(parts) + "."]

"""``report.html``: a study rendered with Jinja2 into one self-contained page.

The page has inline CSS, figures as PNG data URIs and the heatmaps of
:func:`fmmlearn.explanation.explanation_html` as an embedded fragment: no scripts,
nothing loaded from the network.  The templates live in
``fmmlearn/templates/`` (package data); each section opens with a sentence or
two on what it shows and how to read it.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..utils import environment, figure_data_uri, interval, number
from ._summary import summary_lines
from ._tables import erasure_by_model, measure_costs, ranking_metric

__all__ = ["render_report", "report_context"]

_TEMPLATE = "report.html.j2"
# An unstable RACU further from 0 than this is not shown (it only says that the denominator is near 0).
_SHOWN_RACU = 10
# Rows of an added stage's table shown in the report (the frame itself has them all).
_SECTION_ROWS = 200


# --------------------------------------------------------------------------- sections


def _setup_rows(result) -> list[tuple[str, str]]:
    meta = result.metadata
    study, data, machine = meta["study"], meta["data"], meta["machine"]
    clf = study.get("classifier_params") or {}
    sizes = data["sizes"]
    subsets = meta.get("subsets", {})
    measures = ", ".join(
        m + ("" if info["name"] == "all" else f" ({info['name']} test texts)") for m, info in subsets.items())
    cpu = machine["cpu"]
    flags = ", ".join(f for f, present in cpu["flags"].items() if present) or "no avx2/avx512/amx"
    versions = machine["versions"]
    models = ", ".join(f"{r['model']} (max_masking_ratio={r['max_masking_ratio']:g})"
                       for r in {r["model"]: r for r in meta["runs"]}.values())
    rows = [
        ("data", f"{data['name']}: {sizes['train']} training, {sizes['valid']} validation, {sizes['test']} test "
                 f"texts; classes {', '.join(data['classes'])}"),
        ("base model", str(study["model"])),
        ("fine-tuned models", models),
        ("fine-tuning", ", ".join(f"{k}={v}" for k, v in clf.items()) or "FaithfulTextClassifier defaults"),
        ("seeds", ", ".join(str(s) for s in meta["seeds"])),
        ("importance measures", measures),
        ("masking ratios of the curves", ", ".join(f"{r:g}" for r in sorted(result.curves["ratio"].unique()))),
        ("metric", data["metric"]),
        ("validation split", "selects the best epoch and calibrates the in-distribution test (its conformal level)"),
        ("precision", f"{meta['precision']['inference']} for forward passes, gradient measures in "
                      f"{', '.join(sorted({v for k, v in meta['precision']['measures'].items()}))} "
                      f"on {meta['precision']['device']}"),
        ("machine", f"{cpu['model']}, kind {cpu.get('kind', '?')} ({cpu['cores']} cores; {flags}), "
                    f"{machine['torch_threads']} torch threads"),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v)),
        ("run", f"{meta['started']}, {meta['wall_seconds']:.0f} s wall time (cache hits included)"),
    ]
    if data.get("truncated_test_examples"):
        rows.append(("truncated", f"{data['truncated_test_examples']} test texts longer than max_length were cut"))
    return rows


def _performance_rows(result) -> list[dict]:
    rows = []
    for rec in result.performance.to_dict("records"):
        rows.append({"model": rec["model"], "seed": rec["seed"], "value": number(rec["value"]),
                     "ci": interval(rec["low"], rec["high"], 3), "converged": bool(rec["converged"]),
                     "baseline_value": number(rec.get("baseline_value")),
                     "vs_baseline": number(rec.get("vs_baseline"), 3),
                     "vs_baseline_ci": interval(rec.get("vs_baseline_low"), rec.get("vs_baseline_high"), 3,
                                                style="signed"),
                     "reason": rec.get("reason", ""),
                     "epochs": "–" if rec.get("best_epoch") is None or pd.isna(rec.get("best_epoch"))
                     else f"{int(rec['best_epoch'])} of {int(rec['epochs'])}",
                     "fit_seconds": number(rec.get("fit_seconds"), 0)})
    return rows


_BADGES = {"first ahead": "valid", "second ahead": "valid", "equivalent": "equivalent", "inconclusive": "unchecked"}


def _comparison_rows(result, kind: str) -> list[dict]:
    frame = result.comparisons
    if frame is None or not len(frame):
        return []
    rows = []
    for rec in frame[frame["kind"] == kind].to_dict("records"):
        words = {"first ahead": f"{rec['first']} ahead", "second ahead": f"{rec['second']} ahead"}
        rows.append({"model": rec["model"], "first": rec["first"], "second": rec["second"],
                     "n_examples": rec["n_examples"], "n_seeds": rec["n_seeds"],
                     "estimate": f"{rec['estimate']:+.3f}",
                     "ci": interval(rec["ci_low"], rec["ci_high"], 3, style="signed"),
                     "verdict": words.get(rec["verdict"], rec["verdict"]), "badge": _BADGES[rec["verdict"]],
                     "margin": f"{rec['margin']:g}", "level": f"{rec['confidence_level']:.4g}"})
    return rows


def _rounds_note(result) -> str | None:
    rounds = result.metadata.get("rounds") or {}
    if not rounds.get("budget"):
        return None
    added = sum(step["added_texts"] for step in rounds.get("added", []))
    return (f"With a budget of {rounds['budget']:g} s the faithfulness stage ran {rounds['rounds']} round(s), adding "
            f"{added} texts to the costly measures; it stopped because {rounds['stopped']}. Round r decides at "
            "level 1 - alpha/2^(r+1) (alpha-spending), so the verdicts hold whenever the rounds stop; a comparison "
            "keeps the verdict of the first round that decided it.")


def _racu_table(result) -> dict:
    summary = result.racu_summary
    models = list(pd.unique(summary["model"]))
    several_seeds = bool((summary["n_seeds"] > 1).any())
    by_acu = {m for m, rows in summary.groupby("model") if ranking_metric(rows) == "acu"}
    costs = measure_costs(result.timings).groupby("method")["seconds_per_text"].mean()
    rows = []
    for method, part in summary.groupby("method", sort=False):
        cells = []
        for model in models:
            rec = part[part["model"] == model]
            if rec.empty or pd.isna(rec["acu"].iloc[0]):
                cells.append({"racu": "–", "ci": "", "seed_ci": "", "acu": "–", "acu_ci": "", "best": "",
                              "reliable": True})
                continue
            rec = rec.iloc[0]
            best = "" if not rec["most_faithful"] else ("acu" if model in by_acu else "racu")
            stable = bool(rec["reliable"])
            shown = number(rec["racu"], 2) if stable or abs(rec["racu"]) < _SHOWN_RACU else "–"
            cells.append({"racu": shown, "ci": interval(rec["racu_low"], rec["racu_high"]) if stable else "",
                          "seed_ci": interval(rec["racu_seed_low"], rec["racu_seed_high"]) if several_seeds else "",
                          "acu": number(rec["acu"], 3), "acu_ci": interval(rec["acu_low"], rec["acu_high"], 3),
                          "best": best, "reliable": bool(rec["reliable"])})
        first = part.iloc[0]
        signed = first["signed"]
        rows.append({"method": method, "signed": "sign unknown" if pd.isna(signed) else
                     ("signed" if signed else "unsigned"), "cost": number(costs.get(method, np.nan), 3),
                     "examples": f"{int(first['n_examples'])}" + ("" if first["subset"] == "all"
                                                                  else f" ({first['subset'].split()[0]})"),
                     "cells": cells})
    return {"models": models, "rows": rows, "several_seeds": several_seeds, "by_acu": sorted(by_acu)}


def _in_distribution_rows(result) -> list[dict]:
    verdicts = result.frames.get("in_distribution_verdicts")
    if verdicts is None or not len(verdicts):
        return []
    rows = []
    for rec in verdicts.to_dict("records"):
        rows.append({"model": rec["model"], "flagged": f"{rec['flagged']:.1%}",
                     "flagged_ci": interval(rec["flagged_low"], rec["flagged_high"], 1, style="percent"),
                     "expected": f"{rec['expected']:.1%}",
                     "negative": f"{rec['negative_share']:.1%}" if rec.get("negative_n") else "–",
                     "negative_ci": interval(rec["negative_low"], rec["negative_high"], 1, style="percent"),
                     "power": f"{rec['power']:.1%}",
                     "power_ci": interval(rec["power_low"], rec["power_high"], 1, style="percent"),
                     "random": f"{rec['random_share']:.1%}",
                     "other": f"{rec['other_domain_share']:.1%}" if rec.get("other_domain_n") else "–",
                     "verdict": rec["verdict"], "reason": rec["reason"], "ok": rec["verdict"] == "in-distribution"})
    return rows


def _detector_name(result) -> str:
    verdicts = result.frames.get("in_distribution_verdicts")
    if verdicts is None or not len(verdicts) or "detector" not in verdicts.columns:
        return "MaSF"
    return str(verdicts["detector"].iloc[0])


def _null_share_text(result) -> str:
    verdicts = result.frames.get("in_distribution_verdicts")
    if verdicts is None or not len(verdicts):
        return "about 5 %"
    return " or ".join(dict.fromkeys(f"{v:.1%}" for v in verdicts["expected"]))


def _erasure_cell(rows: pd.DataFrame, mode: str) -> dict:
    """One mode of one model and measure: AOPC with its CI, the flagged share per k and pooled, the badge."""
    mode_rows = rows[rows["mode"] == mode]
    total = mode_rows[mode_rows["aopc"]]
    if total.empty:
        return {"aopc": "–", "ci": "", "flagged": "–", "per_k": "", "badge": "unchecked", "verdict": "not checked"}
    rec = total.iloc[0]
    per_k = mode_rows[~mode_rows["aopc"]].sort_values("k")
    flag = rec["valid"]
    badge = "unchecked" if pd.isna(flag) else ("valid" if flag else "invalid")
    shares = ", ".join(f"{k:.0%}: {share:.0%}" for k, share in zip(per_k["k"], per_k["ood_share"])
                       if np.isfinite(share))
    return {"aopc": number(rec["mean"]), "ci": interval(rec["ci_low"], rec["ci_high"], 3),
            "flagged": "–" if not np.isfinite(rec["ood_share"]) else f"{rec['ood_share']:.0%}",
            "per_k": f"k {shares}" if shares else "",
            "badge": badge, "verdict": {"valid": "valid", "invalid": "not valid", "unchecked": "not checked"}[badge]}


def _erasure_table(result) -> dict | None:
    """The erasure section: per model and measure (``rand`` last), both modes; ``None`` when not run."""
    rows = erasure_by_model(result)
    meta = result.metadata.get("erasure")
    if rows.empty or not meta:
        return None
    methods = [m for m in pd.unique(rows["method"]) if m != "rand"] + ["rand"]
    table = []
    for model in pd.unique(rows["model"]):
        for method in methods:
            part = rows[(rows["model"] == model) & (rows["method"] == method)]
            for subset, sub in part.groupby("subset", sort=False):
                table.append({"model": model, "method": method, "baseline": method == "rand",
                              "texts": f"{int(sub['n_examples'].max())}" + ("" if subset == "all"
                                                                         else f" ({subset.split()[0]})"),
                              "cells": [_erasure_cell(sub, mode) for mode in ("comprehensiveness", "sufficiency")]})
    limit = meta["alpha"] * meta["max_invalid_factor"]
    return {"rows": table, "k": ", ".join(f"{k:.0%}" for k in meta["k"]), "alpha": f"{meta['alpha']:g}",
            "limit": f"{limit:.0%}", "unchecked": meta.get("unchecked"),
            "several_seeds": bool((rows["n_seeds"] > 1).any())}


def _heatmaps(result) -> str | None:
    from ..explanation import explanation_html

    frame = result.explanations
    if frame is None or len(frame) == 0:
        return None
    return explanation_html(frame, facet="model", full_page=False, max_examples=None)


def _baseline_name(result) -> str:
    name = result.metadata.get("blind_baseline") or "majority class"
    return f"the {name} baseline"


def _rule(meta: dict, name: str, default):
    """A stability width of the rules that judged the study (older results: the default)."""
    return (meta.get("rules") or {}).get("stability", {}).get(name, default)


def _stage_sections(result) -> list[dict]:
    """Sections of the stages a study was given besides the built-in ones (``metadata["sections"]``)."""
    from markupsafe import Markup

    out = []
    for i, section in enumerate(result.metadata.get("sections", [])):
        frame = result.frames.get(section["frame"])
        if frame is None or not len(frame):
            continue
        table = pd.DataFrame(frame).head(_SECTION_ROWS).to_html(index=False, border=0, classes="stage-table",
                                                                float_format=lambda v: number(v, 3), na_rep="–")
        out.append({"id": f"stage-{i}", "title": section["title"], "intro": section["intro"], "table": Markup(table)})
    return out


def _timing_rows(result) -> list[dict]:
    rows = []
    for stage, info in result.metadata.get("stages", {}).items():
        rows.append({"stage": stage, "seconds": number(info["seconds"], 1),
                     "compute_seconds": number(info["compute_seconds"], 1),
                     "hits": info["cache_hits"], "misses": info["cache_misses"],
                     "forwards": f"{info['forward_rows']:,}", "gradients": f"{info['gradient_rows']:,}"})
    return rows


def _drawn(draw):
    """The data URI of the figure ``draw()`` returns, or ``None`` when there is nothing to draw (no fit counted)."""
    try:
        figure = draw()
    except ValueError:
        return None
    return figure_data_uri(getattr(figure, "figure", figure))


def _in_distribution_figure(result):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    try:
        result.plot_in_distribution("proportion", ax=axes[0])
        result.plot_in_distribution("simes_p", ax=axes[1])
    except ValueError:
        plt.close(fig)
        raise
    axes[0].set_title("share of masked test examples flagged (p < 0.05)", fontsize="medium")
    axes[1].set_title("whole masked test set: Simes p-value", fontsize="medium")
    fig.tight_layout()
    return fig


def _figures(result) -> dict:
    figures = {"performance": _drawn(result.plot_performance), "random_masking": _drawn(result.plot_random_masking),
               "faithfulness": None, "racu": None, "racu_value": None, "in_distribution": None, "erasure": None}
    if not result.racu_summary.empty:  # empty when rand, the baseline, was the only measure
        ranking = "racu" if all(ranking_metric(rows) == "racu"
                                for _, rows in result.racu_summary.groupby("model")) else "acu"
        figures.update(faithfulness=_drawn(result.plot_faithfulness),
                       racu=_drawn(lambda: result.plot_racu(value=ranking)), racu_value=ranking.upper())
    if not result.in_distribution.empty:
        figures["in_distribution"] = _drawn(lambda: _in_distribution_figure(result))
    if _erasure_table(result) is not None:
        figures["erasure"] = _drawn(result.plot_erasure)
    return figures


def report_context(result, title: str | None = None) -> dict:
    """Everything the report template needs, as plain values (figures as data URIs)."""
    from markupsafe import Markup

    meta = result.metadata
    subsets = meta.get("subsets", {})
    restricted = {m: info for m, info in subsets.items() if info["name"] != "all"}
    heatmaps = _heatmaps(result)
    return {
        "title": title or f"Faithfulness study: {meta['data']['name']}",
        "generated": time.strftime("%Y-%m-%d %H:%M"),
        "summary": summary_lines(result),
        "setup": _setup_rows(result),
        "metric": meta["data"]["metric"],
        "performance": _performance_rows(result),
        "racu": _racu_table(result),
        "restricted": restricted,
        "n_test": meta["data"]["sizes"]["test"],
        "in_distribution": _in_distribution_rows(result),
        "in_distribution_ran": not result.in_distribution.empty,
        "no_figure": "Nothing to draw: no fit counted (see the accuracy section).",
        "null_share": _null_share_text(result),
        "detector": _detector_name(result),
        "baseline": _baseline_name(result),
        "model_comparisons": _comparison_rows(result, "models"),
        "measure_comparisons": _comparison_rows(result, "measures"),
        "several_seeds": len(meta.get("seeds", [])) > 1,
        "acu_margin": f"{(meta.get('rules') or {}).get('margins', {}).get('acu_margin', float('nan')):g}",
        "rules_version": (meta.get("rules") or {}).get("version"),
        "rounds_note": _rounds_note(result),
        "racu_width": f"{_rule(meta, 'racu_max_ci_width', 0.5):g}",
        "erasure": _erasure_table(result),
        "explain_method": meta.get("explain_method"),
        "heatmaps": None if heatmaps is None else Markup(heatmaps),
        "sections": _stage_sections(result),
        "timings": _timing_rows(result),
        "figures": _figures(result),
        "metadata_json": _metadata_text(meta),
    }


def _metadata_text(meta: dict) -> str:
    import json

    keep = {k: meta[k] for k in ("machine", "precision", "stages", "load_average_start", "load_average_end")
            if k in meta}
    return json.dumps(keep, indent=2, default=str)


def render_report(result, title: str | None = None) -> str:
    """The report page of a :class:`~fmmlearn.study.StudyResult` (HTML text)."""
    return environment().get_template(_TEMPLATE).render(**report_context(result, title))

"""``report.html``: a study rendered with Jinja2 into one self-contained page.

The page has inline CSS, figures as PNG data URIs and the heatmaps of
:func:`fmmlearn.html.explanation_html` as an embedded fragment: no scripts,
nothing loaded from the network.  The templates live in
``fmmlearn/templates/`` (package data); each section opens with a sentence or
two on what it shows and how to read it.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._formatting import interval, number
from .._templates import environment, figure_data_uri
from ._summary import summary_lines
from ._tables import erasure_by_model, in_distribution_verdicts, ranking_metric, verdict_text

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
        ("validation split", "selects the best epoch and calibrates the in-distribution test (MaSF)"),
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
                     "epochs": "–" if rec.get("best_epoch") is None or pd.isna(rec.get("best_epoch"))
                     else f"{int(rec['best_epoch'])} of {int(rec['epochs'])}",
                     "fit_seconds": number(rec.get("fit_seconds"), 0)})
    return rows


def _racu_table(result) -> dict:
    summary = result.racu_summary
    models = list(pd.unique(summary["model"]))
    several_seeds = bool((summary["n_seeds"] > 1).any())
    by_acu = {m for m, rows in summary.groupby("model") if ranking_metric(rows) == "acu"}
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
        rows.append({"method": method, "signed": "signed" if first["signed"] else "unsigned",
                     "examples": f"{int(first['n_examples'])}" + ("" if first["subset"] == "all"
                                                                  else f" ({first['subset'].split()[0]})"),
                     "cells": cells})
    return {"models": models, "rows": rows, "several_seeds": several_seeds, "by_acu": sorted(by_acu)}


def _in_distribution_rows(result) -> list[dict]:
    # Green: never rejected, or only with every token masked (unlike any training input, for every model).
    return [{"model": model, "flagged": f"{rec['flagged']:.0%}", "verdict": verdict_text(rec),
             "ok": rec["n_rejected"] == 0 or rec["first_rejected"] >= 1.0}
            for model, rec in in_distribution_verdicts(result).iterrows()]


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
    from ..html import explanation_html

    frame = result.explanations
    if frame is None or len(frame) == 0:
        return None
    return explanation_html(frame, facet="model", full_page=False, max_examples=None)


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


def _figures(result) -> dict:
    figures = {"performance": figure_data_uri(result.plot_performance().figure),
               "random_masking": figure_data_uri(result.plot_random_masking().figure),
               "faithfulness": None, "racu": None, "racu_value": None}
    if not result.racu_summary.empty:  # empty when rand, the baseline, was the only measure
        ranking = "racu" if all(ranking_metric(rows) == "racu"
                                for _, rows in result.racu_summary.groupby("model")) else "acu"
        figures.update(faithfulness=figure_data_uri(result.plot_faithfulness()),
                       racu=figure_data_uri(result.plot_racu(value=ranking).figure), racu_value=ranking.upper())
    if not result.in_distribution.empty:
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        result.plot_in_distribution("proportion", ax=axes[0])
        result.plot_in_distribution("simes_p", ax=axes[1])
        axes[0].set_title("share of masked test examples flagged (p < 0.05)", fontsize="medium")
        axes[1].set_title("whole masked test set: Simes p-value", fontsize="medium")
        fig.tight_layout()
        figures["in_distribution"] = figure_data_uri(fig)
    if _erasure_table(result) is not None:
        ax = result.plot_erasure()
        figures["erasure"] = figure_data_uri(ax.figure)
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

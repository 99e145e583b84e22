"""The metadata a study result carries: settings, data, runs, subsets, precision, per-stage costs, machine."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ._names import model_label

__all__ = ["study_metadata"]


def _jsonable(value):
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return repr(value)


def _precision(settings, clf) -> dict:
    from ..importance import get_method
    from ..modeling import autocast_dtype_for

    measures = {}
    for method in settings.measures:
        options = settings.measure_params.get(method, {})
        dtype = autocast_dtype_for(clf, get_method(method), options.get("precision"))
        measures[method] = "fp32" if dtype is None else str(dtype).replace("torch.", "")
    inference = clf.inference_dtype_
    return {"inference": "fp32" if inference is None else str(inference).replace("torch.", ""),
            "device": str(clf.device_), "measures": measures}


def _stage_costs(timings: pd.DataFrame) -> dict:
    stages = {}
    for stage, rows in timings.groupby("stage", sort=False):
        stages[stage] = {"seconds": float(rows["seconds"].sum()),
                         "compute_seconds": float(rows["compute_seconds"].sum()),
                         "cache_hits": int(rows["cached"].sum()), "cache_misses": int((~rows["cached"]).sum()),
                         "forward_rows": int(rows["forward_rows"].sum()),
                         "gradient_rows": int(rows["gradient_rows"].sum())}
    return stages


def _sections(stages, frames: dict) -> list:
    """Report sections of stages that are not built in (their title, intro and the frame they show)."""
    from .stages import STAGES

    builtin = {type(stage) for stage in STAGES}
    out = []
    for stage in stages:
        section = None if type(stage) in builtin else stage.report_section(frames)
        if section is not None:
            out.append({"stage": stage.name, "title": section.title, "intro": section.intro, "frame": section.frame})
    return out


def _rules_record(settings) -> dict:
    """Which rules judged the study: the shipped file's version and hash, or that they were changed."""
    from ._rules import RULES_FILE, load_rules, rules_digest

    shipped = load_rules() == dict(settings.rules)
    return {"version": settings.rules.get("version"), "shipped": shipped,
            "sha256": rules_digest(RULES_FILE) if shipped else None,
            "margins": dict(settings.rules["comparisons"]), "stability": dict(settings.rules["stability"]),
            "convergence_margin": settings.rules["convergence"]["margin"]}


def study_metadata(settings, splits, context, stages, frames: dict, timings: pd.DataFrame, *, started: str,
                   load_start, wall: float, machine: dict) -> dict:
    """Everything a result records besides its frames (JSON-ready)."""
    from ._system import load_average

    runs = settings.runs
    clf = context["models"][runs[0]].get()
    return {
        "study": {k: _jsonable(v) for k, v in settings.params.items()},
        "data": {"name": splits.name, "sizes": splits.sizes(), "classes": [str(c) for c in context["classes"]],
                 "metric": settings.metric.name, "split_seed": settings.random_state,
                 "truncated_test_examples": int(np.asarray(context["truncated"]).sum())},
        "runs": [{"model": model_label(r), "max_masking_ratio": r, "seed": seed,
                  "fit_key": context["fit_keys"][(r, seed)]} for r, seed in runs],
        "seeds": list(settings.seeds),
        "curve_seeds": list(settings.curve_seed_list),
        "curve_examples": int(len(context["curve_texts"])) if "curve_texts" in context else None,
        "subsets": {m: {"name": name, "n_examples": int(len(idx))}
                    for m, (name, idx) in context.get("measured_subsets", context["subsets"]).items()},
        "rounds": context.get("rounds"),
        "rules": _rules_record(settings),
        "blind_baseline": context["blind"]["name"] if "blind" in context else None,
        "explain_method": context.get("explain_method"),
        "explained_examples": [int(i) for i in context.get("explained", [])],
        "convergence_threshold": settings.convergence_threshold,
        "erasure": context.get("erasure_info"),
        "precision": _precision(settings, clf),
        "stages": _stage_costs(timings),
        "pipeline": [{"stage": s.name, "class": f"{type(s).__module__}.{type(s).__qualname__}",
                      "frames": list(s.frames)} for s in stages],
        "frames": list(frames),
        "sections": _sections(stages, frames),
        "machine": machine,
        "started": started,
        "wall_seconds": wall,
        "load_average_start": load_start,
        "load_average_end": load_average(),
    }

"""The prose of docs/reproduction.md that carries numbers, written from the tables (never by hand).

Each ``reading-*`` block says, in sentences, what a claim's rows say: the verdict, the numbers behind
it and what would settle an open question.  The hand-written prose around the blocks carries no result
(``tests/integration/test_reproduce.py`` checks that every number of the page's prose is in a generated block).
"""

from __future__ import annotations

import pandas as pd

__all__ = ["prose_blocks", "runtime", "runtime_block"]

#: Which study stages each table of the reproduction comes from.
STAGE_TABLES = {"(a) performance": ("fit", "performance"), "(b) random masking": ("random masking",),
                "(c) faithfulness and comparisons": ("faithfulness", "comparisons"),
                "(d) in-distribution": ("calibration", "in-distribution"), "(e) supporting facts": ("supporting facts",),
                "(f) erasure": ("erasure",)}


def runtime(runs) -> dict:
    """Seconds per table: its study stages summed over the datasets (cache hits cost about 0)."""
    timings = pd.concat([r["result"].timings for r in runs], ignore_index=True)
    out = {}
    for table, stages in STAGE_TABLES.items():
        rows = timings[timings["stage"].isin(stages)]
        if rows.empty:
            continue
        out[table] = {"stages": ", ".join(stages), "seconds": float(rows["seconds"].sum()),
                      "compute_seconds": float(rows["compute_seconds"].fillna(rows["seconds"]).sum()),
                      "cached": int(rows["cached"].sum()), "jobs": int(len(rows))}
    return out


def runtime_block(report: dict) -> str:
    from _common import md_table

    rows = [[t, s["stages"], f"{s['seconds']:.0f}", f"{s['compute_seconds']:.0f}", f"{s['cached']} of {s['jobs']}"]
            for t, s in report["runtime"].items()]
    computed = sum(s["compute_seconds"] for s in report["runtime"].values())
    return (md_table(["table", "stages", "seconds (this run)", "seconds (when computed)", "cached jobs"], rows)
            + f"\n\nThis run: {report['wall_seconds'] / 60:.1f} minutes of wall time; computing every job from an "
              f"empty cache took {computed / 60:.1f} minutes of stage time on the machine above.")


def _pct(value) -> str:
    return f"{value:.1%}"


def _claim_rows(claims: pd.DataFrame, claim: int) -> tuple:
    rows = claims[claims["claim"] == claim]
    return rows[rows["dataset"] != "overall"], rows[rows["dataset"] == "overall"].iloc[0]


def _reading_1(tables, claims) -> str:
    rows, overall = _claim_rows(claims, 1)
    perf = tables["performance"]
    parts = []
    for r in rows.itertuples():
        p = perf[(perf["dataset"] == r.dataset) & perf["converged"].astype(bool)]
        means = p.groupby("model")["value"].mean()
        accuracy = ", ".join(f"{m} {means[m]:.3f}" for m in ("plain", "masked") if m in means)
        parts.append(f"on {r.dataset}: **{r.verdict}** ({accuracy}; {r.note})")
    dropped = perf[~perf["converged"].astype(bool)]
    text = f"**Claim 1: {overall.verdict}.** " + "; ".join(parts) + "."
    if len(dropped):
        text += " Fits that did not count: " + "; ".join(
            f"{r.dataset} {r.model} seed {r.seed} ({r.reason})" for r in dropped.itertuples()) + "."
    return text


def _reading_2(tables, claims) -> str:
    rows, overall = _claim_rows(claims, 2)
    verdicts = tables["masf_verdicts"]
    parts = []
    for r in rows.itertuples():
        v = verdicts[verdicts["dataset"] == r.dataset].set_index("model") if len(verdicts) else pd.DataFrame()
        controls = "; ".join(
            f"{m}: power against the matched control {_pct(v.loc[m, 'power'])}, negative control "
            f"{_pct(v.loc[m, 'negative_share'])}, random tokens {_pct(v.loc[m, 'random_share'])}"
            for m in ("plain", "masked") if m in v.index)
        parts.append(f"on {r.dataset}: **{r.verdict}** ({r.note}; {controls})")
    return f"**Claim 2: {overall.verdict}.** " + "; ".join(parts) + "."


def _reading_3(tables, claims) -> str:
    rows, overall = _claim_rows(claims, 3)
    return (f"**Claim 3: {overall.verdict}.** "
            + "; ".join(f"on {r.dataset}: **{r.verdict}** ({r.note})" for r in rows.itertuples()) + ".")


def _reading_4(tables, claims) -> str:
    rows, overall = _claim_rows(claims, 4)
    return (f"**Claim 4: {overall.verdict}.** "
            + "; ".join(f"on {r.dataset}: **{r.verdict}** ({r.note})" for r in rows.itertuples()) + ".")


def _reading_support(tables) -> str:
    support = tables["supporting_facts"]
    if support.empty or not support["converged"].astype(bool).any():
        return "No bAbI fit counted, so the supporting-fact test was not read."
    kept = support[support["converged"].astype(bool)]
    means = kept.groupby(["model", "method"], sort=False)[["hit_rate", "chance", "lift", "lift_low"]].mean()
    lines = [f"{model}, {method}: hit rate {row.hit_rate:.2f} against chance {row.chance:.2f} "
             f"(lift {row.lift:+.2f}, lower bound {row.lift_low:+.2f})" for (model, method), row in means.iterrows()]
    above = [f"{m} {x}" for (m, x), row in means.iterrows() if row.lift_low > 0]
    return ("On distractor bAbI-1 (the answer named twice, only the question says which sentence supports it) "
            + "; ".join(lines) + ". Above chance (the lower bound of the lift above 0): "
            + (", ".join(above) if above else "none") + ".")


def prose_blocks(report: dict, tables: dict, claims: pd.DataFrame) -> dict:
    """The ``reading-*`` blocks of docs/reproduction.md."""
    return {"reading-1": _reading_1(tables, claims), "reading-2": _reading_2(tables, claims),
            "reading-3": _reading_3(tables, claims), "reading-4": _reading_4(tables, claims),
            "reading-support": _reading_support(tables),
            "reading-summary": _summary(claims, report)}


def _summary(claims, report) -> str:
    overall = claims[claims["dataset"] == "overall"]
    from claims import CLAIMS

    parts = [f"claim {r.claim} ({CLAIMS[r.claim]}): **{r.verdict}** ({r.note})" for r in overall.itertuples()]
    # the stage time every verdict cost when computed; a rerun over the cache takes less wall time
    minutes = sum(s["compute_seconds"] for s in report["runtime"].values()) / 60
    return (f"In this run ({minutes:.0f} minutes of stage time on {report['machine']['cores']} CPU cores, every "
            "job computed once): " + "; ".join(parts) + ".")

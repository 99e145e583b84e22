"""What each verdict cost: the CPU seconds spent until it was decided, per claim and stage.

A verdict needs some of a study's stages: the accuracy comparison (claim 1) the fits and the clean
predictions; the in-distribution verdict (claim 2) the fits of the curve seeds, the calibration of the
test and its report; the comparisons of measures (claims 3 and 4) those fits and the faithfulness
stage, round by round.  From a study's own timings (``result.timings``: wall and CPU seconds of every
job when it was computed, cached or not) this module adds up, per verdict, the seconds of the jobs it
read.  :func:`decision_costs` serves the reproduction (``docs/reproduction.md``, "What each verdict
cost") and this script, which measures the demo:

    python benchmarks/decision_cost.py              # the demo from an empty cache; results/<cpu kind>/decision_cost.*
    python benchmarks/decision_cost.py --quick      # fmmlearn demo --quick; writes nothing
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: The stages each verdict reads (the fits: those of the models it compares).
VERDICT_STAGES = {
    "1: accuracy (masked vs plain)": ("fit", "performance"),
    "2: in-distribution": ("fit", "calibration", "in-distribution"),
    "3 and 4: comparisons of measures": ("fit", "performance", "faithfulness"),
    "erasure validity": ("fit", "calibration", "erasure"),
}
#: Columns of :func:`decision_costs`.
COLUMNS = ("verdict", "stage", "jobs", "wall_seconds", "cpu_seconds")


def decision_costs(timings: pd.DataFrame, curve_seeds=None) -> pd.DataFrame:
    """Per verdict and stage: the jobs it read and their wall and CPU seconds when computed.

    Parameters
    ----------
    timings : pandas.DataFrame
        ``StudyResult.timings`` (of one study, or several stacked).
    curve_seeds : sequence of int, optional
        The seeds of the masking stages: the in-distribution and measure verdicts read only their fits.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COLUMNS`, with a ``total`` row per verdict.
    """
    frame = timings.copy()
    frame["wall"] = frame["compute_seconds"].fillna(frame["seconds"])
    frame["cpu"] = frame["compute_cpu_seconds"] if "compute_cpu_seconds" in frame else float("nan")
    rows = []
    for verdict, stages in VERDICT_STAGES.items():
        part = frame[frame["stage"].isin(stages)]
        if not verdict.startswith("1") and curve_seeds is not None:
            part = part[(part["stage"] != "fit") | part["seed"].isin(list(curve_seeds))]
        if part.empty or not part["stage"].isin(stages[1:]).any():
            continue
        for stage in stages:
            rows_of = part[part["stage"] == stage]
            rows.append({"verdict": verdict, "stage": stage, "jobs": len(rows_of),
                         "wall_seconds": float(rows_of["wall"].sum()),
                         "cpu_seconds": float(rows_of["cpu"].sum(min_count=1))})
        rows.append({"verdict": verdict, "stage": "total", "jobs": len(part), "wall_seconds": float(part["wall"].sum()),
                     "cpu_seconds": float(part["cpu"].sum(min_count=1))})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def markdown_rows(costs: pd.DataFrame) -> list:
    """Table rows: verdict, stage, jobs, wall and CPU minutes."""
    return [[r.verdict if r.stage == "total" else "", r.stage, r.jobs, f"{r.wall_seconds / 60:.1f}",
             "-" if r.cpu_seconds != r.cpu_seconds else f"{r.cpu_seconds / 60:.1f}"] for r in costs.itertuples()]


def run_demo(quick: bool) -> tuple:
    """``fmmlearn demo`` from an empty cache: its result, wall seconds and the process's CPU seconds."""
    from fmmlearn.cli import main as cli

    with tempfile.TemporaryDirectory() as tmp:
        argv = ["demo", "-o", str(Path(tmp) / "demo"), "-q", *(["--quick"] if quick else [])]
        started, cpu = time.perf_counter(), time.process_time()
        cli(argv)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        from fmmlearn.study import load_study

        result = load_study(Path(tmp) / "demo" / "results")
    return result, wall, cpu


def main(argv=None):
    from _common import command, machine, machine_line, table, write_results

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    info = machine()
    result, wall, cpu = run_demo(args.quick)
    costs = decision_costs(result.timings)
    verdicts = result.in_distribution_verdicts
    lines = [f"# What each verdict of `fmmlearn demo{' --quick' if args.quick else ''}` cost", "",
             machine_line(info, "precision='auto' (bf16 where measured faster; the measures by the probe)"), "",
             f"Command: `{command()}`", "",
             f"The whole demo: {wall:.0f} s wall, {cpu:.0f} s CPU (every thread of the process), from an empty "
             "cache. Per verdict, the jobs of the stages it reads, summed when computed:", ""]
    lines += table(["verdict", "stage", "jobs", "wall minutes", "CPU minutes"], markdown_rows(costs))
    lines += ["", "In-distribution verdicts: " + "; ".join(f"{r.model}: {r.verdict}" for r in verdicts.itertuples()),
              "", "Summary:", "", "```text", result.summary(), "```"]
    report = {"machine": info, "command": command(), "wall_seconds": wall, "cpu_seconds": cpu,
              "costs": costs.to_dict("records"), "summary": result.summary().splitlines()}
    write_results("decision_cost", info, report, "\n".join(lines) + "\n", quick=args.quick)


if __name__ == "__main__":
    main()

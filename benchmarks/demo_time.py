"""Wall time of ``fmmlearn demo --quick`` and ``fmmlearn demo``, stage by stage.

Each run is a fresh process with a fresh output directory (an empty stage
cache), the way a new user runs it.  Per stage it reports the wall time and
the work done -- sequences through the model (forward passes), how many of
them also had a backward pass, and the examples each job covers -- so numbers
from a contended machine can be rescaled: at a given text length the time of a
stage is roughly proportional to its forward count.

The demo's targets are about 2 minutes with ``--quick`` and at most 10 minutes
without it, on 2 idle CPU cores.  This script records what this machine did,
with the shared header (CPU model, kind and flags, torch threads, load average
at the start; the load at the end too: well above the thread count means other
jobs shared the cores and the times are inflated) and the precision used.

Usage::

    python benchmarks/demo_time.py [--threads 2] [--keep DIR]    # both runs, results written
    python benchmarks/demo_time.py --quick                       # only the --quick run, nothing written

Prints a markdown table and writes ``benchmarks/results/<cpu kind>/demo_time.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command, machine, machine_line, write_results  # noqa: E402

RUNS = {"quick": ["--quick"], "full": []}


def run_demo(name: str, flags: list, root: Path, threads: int, model: str) -> dict:
    """One demo in a fresh process: its JSON summary, its saved result and the wall time."""
    from fmmlearn.study import load_study

    output = root / f"demo-{name}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads), "MPLBACKEND": "Agg"}
    argv = [sys.executable, "-m", "fmmlearn", "demo", *flags, "--output", str(output), "--model", model, "--json"]
    load_before = os.getloadavg()
    start = time.perf_counter()
    completed = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({completed.returncode}):\n{completed.stderr[-4000:]}")
    summary = json.loads(completed.stdout)
    result = load_study(output / "results")
    jobs = result.timings.assign(method=result.timings["method"].fillna("")).to_dict("records")
    return {"command": " ".join(["fmmlearn", "demo", *flags]), "wall_seconds": wall,
            "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
            "summary": summary["summary"], "stages": result.metadata["stages"], "jobs": jobs,
            "sizes": result.metadata["data"]["sizes"], "subsets": result.metadata["subsets"],
            "precision": result.metadata["precision"], "performance": summary["performance"],
            "racu": summary["racu"], "output": str(output)}


def markdown(info: dict, runs: dict, argv: str) -> str:
    precision = next(iter(runs.values()))["precision"]
    used = (f"{precision['inference']} forward passes, gradient measures "
            f"{', '.join(sorted(set(precision['measures'].values())))}, device {precision['device']}")
    lines = ["# `fmmlearn demo`: wall time per stage", "", machine_line(info, used), "", f"Command: `{argv}`", ""]
    for run in runs.values():
        sizes = run["sizes"]
        subsets = ", ".join(f"{m} {v['n_examples']}" for m, v in run["subsets"].items())
        lines += [f"## `{run['command']}`: {run['wall_seconds']:.0f} s wall "
                  f"(load average {run['load_average_before'][0]:.1f} before, "
                  f"{run['load_average_after'][0]:.1f} after)", "",
                  f"{sizes['train']} training / {sizes['valid']} validation / {sizes['test']} test tweets; test "
                  f"texts per measure: {subsets}.", "",
                  "| stage | seconds | forward passes | with backward |", "|---|---:|---:|---:|"]
        for stage, s in run["stages"].items():
            lines.append(f"| {stage} | {s['seconds']:.1f} | {s['forward_rows']:,} | {s['gradient_rows']:,} |")
        lines += ["", "| job | model | seconds | examples | forward passes | with backward |",
                  "|---|---|---:|---:|---:|---:|"]
        for job in run["jobs"]:
            label = job["stage"] + (f" {job['method']}" if job["stage"] == "faithfulness" else "")
            lines.append(f"| {label} | {job['model']} | {job['compute_seconds']:.1f} | {job['n_examples']} | "
                         f"{job['forward_rows']:,} | {job['gradient_rows']:,} |")
        lines += ["", "Summary it printed:", "", "```", *run["summary"], "```", ""]
    lines.append("Fit forward counts are computed (epochs x (training + validation rows)); the others are counted "
                 "by a forward hook on the model. With a load average well above the torch thread count, other "
                 "jobs shared the cores: rerun on an idle machine to check the demo's targets.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="time only 'fmmlearn demo --quick'; write nothing")
    parser.add_argument("--threads", type=int, default=2, help="OMP/torch threads of the demo processes")
    parser.add_argument("--model", default="minilm", help="base model of the demo")
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="keep the demos' output directories (reports, results, caches) under DIR")
    args = parser.parse_args()
    info = machine(args.threads)
    names = ["quick"] if args.quick else ["quick", "full"]
    with tempfile.TemporaryDirectory(prefix="fmmlearn-demo-bench-") as scratch:
        root = Path(args.keep or scratch)
        runs = {name: run_demo(name, RUNS[name], root, args.threads, args.model) for name in names}
    report = {"machine": info, "command": command(), "runs": runs}
    write_results("demo_time", info, report, markdown(info, runs, command()), quick=args.quick)


if __name__ == "__main__":
    main()

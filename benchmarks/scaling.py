"""Explanation throughput with 1 vs N processes under ``accelerate launch`` (docs/scaling.md).

One saved classifier (the bundled MiniLM, fine-tuned for one epoch on a few tweets, or
``--model-dir``) explains the same tweets with ``--method`` (default ``loo-sign``) in a fresh
``accelerate launch --num_processes N`` for every N of ``--processes``.  Each launched process
loads the model itself; ``explain`` splits the length-grouped batches across the processes and
gathers the rows back (``fmmlearn.distributed``).  Every process times ``--repeats`` calls after
one warm-up call; a call's time is the slowest process's (the gather waits for it).

Reported per N: seconds per call (min / median / max), examples per second, the speedup over
N = 1 and the parallel efficiency ``speedup / N`` (1.0 is perfect scaling), and whether the
importances equal the N = 1 run's exactly.

* **CPUs** (no CUDA, or ``--cpu``): the same cores are shared out, ``--threads`` in all, so
  N processes get ``threads // N`` torch threads each.  Expect at most ``min(N, cores)`` x, less
  where the threads were already busy (the 1-process run uses every core too).
* **GPUs**: process ``i`` uses GPU ``i`` (``LOCAL_RANK``), so N processes use N GPUs:
  ``python benchmarks/scaling.py --processes 1 2 4 8 --n-texts 4000``.

The launcher is ``accelerate launch --multi_gpu`` (torchrun) for N > 1: on CPUs it starts N gloo
processes (``--cpu`` alone starts one unless ``accelerate config`` set up MPI); N = 1 is a plain
``accelerate launch``.  Process start-up
and model loading are outside the timed calls.

Usage::

    python benchmarks/scaling.py [--processes 1 2] [--n-texts 400] [--repeats 3] [--method loo-sign]
                                 [--threads 2] [--cpu] [--model-dir DIR] [--quick]

Writes ``benchmarks/results/scaling.{md,json}`` (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

# _common sets OMP_WAIT_POLICY and HF_HUB_OFFLINE: import it before torch
from _common import RESULTS, command, fmt_stats, machine, machine_line, stats, table

import numpy as np

HERE = Path(__file__).resolve()


# --------------------------------------------------------------------------- the launched side


def worker(spec_path: str) -> None:
    """Run under ``accelerate launch``: time ``explain`` on this process's share, report from rank 0."""
    import torch

    from fmmlearn import FaithfulTextClassifier
    from fmmlearn.distributed import gather_objects, is_main_process, local_only, num_processes

    spec = json.loads(Path(spec_path).read_text())
    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    clf = FaithfulTextClassifier.load(spec["model_dir"], device="cpu" if spec["cpu"] else "auto")
    texts, params = spec["texts"], {"method": spec["method"], "precision": spec["precision"]}
    with local_only():  # untimed warm-up of every process: kernels, the pass-size probe
        clf.explain(texts[: min(8, len(texts))], **params)
    times = []
    for _ in range(spec["repeats"]):
        gather_objects(None)  # start together
        start = time.perf_counter()
        explanation = clf.explain(texts, **params)
        gather_objects(None)  # the call ends when the slowest process is done
        times.append(time.perf_counter() - start)
    times = [max(ts) for ts in zip(*gather_objects(times))]
    if is_main_process():
        out = Path(spec["out"])
        np.save(out / "importance.npy", explanation["importance"].to_numpy())
        (out / "result.json").write_text(json.dumps({
            "processes": num_processes(), "threads_per_process": torch.get_num_threads(),
            "device": str(clf.device_), "times": times, "n_texts": len(texts),
            "n_tokens": int(clf.encode(texts).lengths.sum())}))


# --------------------------------------------------------------------------- the driver


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fitted_model(folder: Path, seed: int) -> str:
    """The bundled MiniLM fine-tuned for one epoch on 64 tweets (explanation cost does not depend on training)."""
    from fmmlearn import FaithfulTextClassifier
    from fmmlearn.datasets import load_tweet_sentiment

    data = load_tweet_sentiment(n_samples=64, random_state=seed + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = FaithfulTextClassifier(max_epochs=1, validation_fraction=0, learning_rate=1e-4, precision="fp32",
                                     random_state=seed).fit(data.data, data.target)
    return str(clf.save(folder / "model"))


def launch(n: int, spec: dict, folder: Path, use_cpu: bool) -> dict:
    out = folder / f"n{n}"
    out.mkdir()
    spec_path = folder / f"spec-{n}.json"
    spec_path.write_text(json.dumps({**spec, "out": str(out)}))
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    if use_cpu:
        env.update(ACCELERATE_USE_CPU="1", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS=str(spec["threads"]))
    mode = ["--multi_gpu", "--main_process_port", str(_free_port())] if n > 1 else ["--cpu"] if use_cpu else []
    cmd = [sys.executable, "-m", "accelerate.commands.launch", *mode, "--num_processes", str(n),
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           str(HERE), "--worker", str(spec_path)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the {n}-process launch failed:\n{done.stderr[-4000:]}")
    result = json.loads((out / "result.json").read_text())
    result["importance"] = np.load(out / "importance.npy")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--n-texts", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--method", default="loo-sign")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16", "auto"],
                        help="of the importance passes (a fixed one: identical results across process counts)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU: torch threads of all processes")
    parser.add_argument("--cpu", action="store_true", help="run on CPUs even where CUDA is available")
    parser.add_argument("--model-dir", default=None, help="a saved FaithfulTextClassifier to explain with")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="40 texts, 1 repeat, nothing written")
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    import torch

    from fmmlearn.datasets import load_tweet_sentiment

    if args.quick:
        args.n_texts, args.repeats = 40, 1
    use_cpu = args.cpu or not torch.cuda.is_available()
    if not use_cpu and max(args.processes) > torch.cuda.device_count():
        raise SystemExit(f"--processes {max(args.processes)} needs as many GPUs; {torch.cuda.device_count()} found")
    info = machine(args.threads)
    texts = list(load_tweet_sentiment(n_samples=args.n_texts, random_state=args.seed).data)
    with tempfile.TemporaryDirectory(prefix="fmmlearn-scaling-") as tmp:
        folder = Path(tmp)
        model_dir = args.model_dir or fitted_model(folder, args.seed)
        runs = {}
        for n in sorted(set(args.processes)):
            threads = max(1, args.threads // n) if use_cpu else None
            spec = {"model_dir": model_dir, "texts": texts, "method": args.method, "precision": args.precision,
                    "repeats": args.repeats, "threads": threads, "cpu": use_cpu}
            started = time.perf_counter()
            runs[n] = launch(n, spec, folder, use_cpu)
            print(f"{n} process(es): {fmt_stats(stats(runs[n]['times']))} s per call "
                  f"({time.perf_counter() - started:.0f} s with start-up)", flush=True)
    base = min(runs)
    reference = runs[base]
    rows, report_runs = [], []
    for n, run in runs.items():
        s = stats(run["times"])
        speedup = min(reference["times"]) / s["min"]  # over the fewest processes run (normally 1)
        efficiency = speedup / (n / base)
        same = bool(np.array_equal(run["importance"], reference["importance"]))
        rows.append([n, run["threads_per_process"] if use_cpu else "-", run["device"], fmt_stats(s),
                     run["n_texts"] / s["min"], speedup, efficiency, "yes" if same else "NO"])
        report_runs.append({k: v for k, v in run.items() if k != "importance"}
                           | {"stats": s, "speedup": speedup, "efficiency": efficiency, "equal_to_first": same})
    where = (f"CPU, {args.threads} torch threads shared out" if use_cpu
             else f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}, one GPU per process")
    lines = [
        "# Explanation throughput: 1 vs N processes (accelerate launch)",
        "",
        machine_line(info, args.precision),
        "",
        f"`{args.method}` on {args.n_texts} tweets ({reference['n_tokens']} tokens), bundled MiniLM-L6, "
        f"{where}; {args.repeats} timed calls per process count after one warm-up, the slowest process's time "
        "per call (min / median / max). Speedup over the fewest processes and efficiency = speedup / (N / fewest), "
        "from the minima.",
        "",
        *table(["processes", "threads / process", "device", "s per call", "examples / s", "speedup", "efficiency",
                "importances = first run"], rows),
        "",
        f"Command: `{command()}`",
    ]
    if info["load_average"] > 0.5 * (os.cpu_count() or 1):
        lines += ["", f"**The machine was busy (load average {info['load_average']:.1f} on {os.cpu_count()} cores):** "
                      "these numbers only show that the script works; rerun it on an idle machine."]
    markdown = "\n".join(lines) + "\n"
    print(markdown)
    if args.quick:
        print("(--quick: nothing written; run without --quick for results)")
        return None
    report = {"machine": info, "command": command(), "method": args.method, "precision": args.precision,
              "n_texts": args.n_texts, "repeats": args.repeats, "cpu": use_cpu, "runs": report_runs}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scaling.json").write_text(json.dumps(report, indent=2, default=str))
    (RESULTS / "scaling.md").write_text(markdown)
    print(f"wrote {RESULTS / 'scaling'}.md and .json")
    return None


if __name__ == "__main__":
    main()

"""MaSF fit and scoring speed and memory at the paper's feature shape (13 layers x 768 dims).

Runs ``fmmlearn.ood.MaSF`` in both calibration modes for N = 1k, 5k, 20k calibration
examples of float32 Gaussian features, scores 1,000 new examples, and reports median
wall time, time / (N log2 N) normalised to the smallest N (flat = N log N growth) and
the peak memory traced during the call (numpy allocations, excluding the inputs).
As a baseline it times the naive O(N^2) pairwise count for the level-1 ECDF of one
layer (what a direct ``#{a_j < a_i}`` implementation does) at the two smaller N.

Usage::

    python benchmarks/masf_speed.py [--sizes 1000 5000 20000] [--repeats 3]

Prints a markdown table and writes ``benchmarks/results/masf_speed.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import tracemalloc
from pathlib import Path

import numpy as np

from fmmlearn.ood import MaSF

LAYERS, HIDDEN, N_SCORE = 13, 768, 1000
RESULTS = Path(__file__).parent / "results"


def measure(func):
    """Wall time (s) and traced peak memory (MiB) of ``func()``."""
    tracemalloc.start()
    start = time.perf_counter()
    result = func()
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return result, elapsed, peak


def naive_level1_counts(layer_values, chunk=16):
    """``#{a_j < a_i}`` for every example i and dimension by broadcasting: O(N^2 H)."""
    out = np.empty(layer_values.shape, dtype=np.int64)
    for start in range(0, len(layer_values), chunk):
        block = layer_values[start:start + chunk, None, :]
        out[start:start + chunk] = (layer_values[None, :, :] < block).sum(axis=1)
    return out


def bench_size(n, repeats, rng):
    features = rng.standard_normal((n, LAYERS, HIDDEN), dtype=np.float32)
    new = rng.standard_normal((N_SCORE, LAYERS, HIDDEN), dtype=np.float32)
    rows = []
    for calibration in ("calibrated", "reference"):
        fits, scores, fit_peaks, score_peaks = [], [], [], []
        for _ in range(repeats):
            masf, t_fit, m_fit = measure(lambda: MaSF(calibration).fit(features))
            _, t_score, m_score = measure(lambda: masf.pvalues(new))
            fits.append(t_fit), scores.append(t_score), fit_peaks.append(m_fit), score_peaks.append(m_score)
            del masf
        rows.append({"n_calibration": n, "calibration": calibration, "repeats": repeats,
                     "fit_s": float(np.median(fits)), "score_1k_s": float(np.median(scores)),
                     "fit_peak_mib": float(max(fit_peaks)), "score_peak_mib": float(max(score_peaks)),
                     "features_mib": features.nbytes / 2**20})
    if n <= 5000:       # the quadratic baseline is out of reach beyond that
        layer = np.ascontiguousarray(features[:, 0, :])
        _, t_naive, _ = measure(lambda: naive_level1_counts(layer))
        for row in rows:
            row["naive_level1_one_layer_s"] = t_naive
    return rows


def add_normalised_time(rows):
    """time / (N log2 N), divided by its value at the smallest N of the same mode."""
    for calibration in {row["calibration"] for row in rows}:
        mine = [row for row in rows if row["calibration"] == calibration]
        base = min(mine, key=lambda row: row["n_calibration"])
        unit = base["fit_s"] / (base["n_calibration"] * np.log2(base["n_calibration"]))
        for row in mine:
            row["fit_per_nlogn_rel"] = row["fit_s"] / (row["n_calibration"] * np.log2(row["n_calibration"])) / unit


def markdown(rows):
    head = ("| mode | N | fit (s) | fit / (N log N), rel. | score 1k (s) | fit peak (MiB) | score peak (MiB) "
            "| features (MiB) | naive O(N²) level-1 ECDF, 1 of 13 layers (s) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in sorted(rows, key=lambda r: (r["calibration"], r["n_calibration"])):
        naive = row.get("naive_level1_one_layer_s")
        lines.append(f"| {row['calibration']} | {row['n_calibration']:,} | {row['fit_s']:.2f} "
                     f"| {row['fit_per_nlogn_rel']:.2f} | {row['score_1k_s']:.2f} | {row['fit_peak_mib']:.0f} "
                     f"| {row['score_peak_mib']:.0f} | {row['features_mib']:.0f} "
                     f"| {'-' if naive is None else f'{naive:.2f}'} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--repeats", type=int, default=3, help="repeats for N <= 5000 (1 above)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for n in args.sizes:
        rows += bench_size(n, args.repeats if n <= 5000 else 1, rng)
        print(f"done N={n}", flush=True)
    add_normalised_time(rows)
    table = markdown(rows)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {"layers": LAYERS, "hidden": HIDDEN, "n_score": N_SCORE, "numpy": np.__version__,
            "machine": platform.machine(), "processor": platform.processor()}
    (RESULTS / "masf_speed.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (RESULTS / "masf_speed.md").write_text(
        f"MaSF speed, {LAYERS} x {HIDDEN} float32 features, scoring {N_SCORE} new examples "
        f"(median wall time; peak = traced numpy memory during the call, inputs excluded).\n\n{table}\n")


if __name__ == "__main__":
    main()

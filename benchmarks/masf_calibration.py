"""MaSF calibration and power on synthetic features with the paper's shapes (the numbers of docs/ood.md).

Gaussian features of 13 layers x 768 dimensions stand in for a BERT-base model's max-pooled hidden
states, with BoolQ's sizes (1886 calibration, 3270 test examples); "correlated" adds a
shared per-(example, layer) factor (correlation 0.5 between the dimensions of a layer).  For both
calibration modes it reports

* false positives: the share of fresh in-distribution test examples with p < alpha, the share with
  p = 0, and the dataset-level Simes and geometric-mean p-values of the whole in-distribution test set;
* power: the share of 1000 changed test examples with p < 0.05, and the AUC separating them from their
  unchanged originals by p-value (threshold-free, so modes with different false-positive rates compare
  fairly);
* fold fractions (calibrated mode, N = 3000, independent features): false-positive rate and power at a
  0.3 sd mean shift for three splits of the calibration set;
* dataset-level combinations: how often each combination of the per-example p-values rejects a whole
  in-distribution test set at 0.05 (the p-values share the calibration references, so they are
  dependent): conformal p-values with a level-3 fold of BoolQ's size (1000 repetitions), and MaSF end
  to end on smaller features (200 repetitions);
* ``dist_repeats``: the calibrated false-positive rate with 3 copies per calibration example, the
  copies' folds chosen by example (``groups=``) or row by row.

Usage::

    python benchmarks/masf_calibration.py

Takes a few minutes on 2 cores (seeded, deterministic).  Prints markdown tables and writes
``benchmarks/results/masf_calibration.{json,md}``.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from fmmlearn.ood import MaSF, fisher_pvalue, geometric_mean_pvalue, simes_pvalue, summarize_pvalues

LAYERS, HIDDEN = 13, 768
N_CALIBRATION, N_TEST, N_CHANGED = 1886, 3270, 1000          # BoolQ's validation / test sizes
ALPHAS = (0.01, 0.05, 0.1)
FOLD_FRACTIONS = ((1 / 3, 1 / 3, 1 / 3), (0.5, 0.25, 0.25), (0.6, 0.2, 0.2))
RESULTS = Path(__file__).parent / "results"


def gaussian_features(rng, n, rho):
    """Standard-normal features; ``rho`` > 0 mixes in a factor shared by the dimensions of a layer."""
    x = rng.standard_normal((n, LAYERS, HIDDEN), dtype=np.float32)
    if rho:
        shared = rng.standard_normal((n, LAYERS, 1), dtype=np.float32)
        x = np.float32(np.sqrt(1 - rho)) * x + np.float32(np.sqrt(rho)) * shared
    return x


def sparse_shift(x, share=0.05, shift=2.0):
    """+``shift`` sd on the first ``share`` of every layer's dimensions."""
    y = x.copy()
    y[:, :, : int(share * HIDDEN)] += np.float32(shift)
    return y


CHANGES = {
    "mean + 0.1 sd": lambda x: x + np.float32(0.1),
    "mean + 0.3 sd": lambda x: x + np.float32(0.3),
    "mean + 0.5 sd": lambda x: x + np.float32(0.5),
    "scale x 1.05": lambda x: x * np.float32(1.05),
    "scale x 1.1": lambda x: x * np.float32(1.1),
    "+2 sd on 5 % of dims": sparse_shift,
}


def calibration_rows():
    """False positives and power of both modes, for independent and correlated features."""
    rows = []
    for rho, features in ((0.0, "independent"), (0.5, "correlated")):
        rng = np.random.default_rng(1)
        calibration, test = gaussian_features(rng, N_CALIBRATION, rho), gaussian_features(rng, N_TEST, rho)
        for mode in ("reference", "calibrated"):
            start = time.perf_counter()
            masf = MaSF(mode, random_state=0).fit(calibration)
            p = masf.pvalues(test)
            summary = summarize_pvalues(p, thresholds=ALPHAS).set_index("threshold")
            row = {"features": features, "rho": rho, "mode": mode, "p_zero": float(np.mean(p == 0)),
                   "simes_p": float(summary["simes_p"].iloc[0]), "geomean_p": float(summary["geomean_p"].iloc[0]),
                   **{f"fpr_{alpha:g}": float(summary.loc[alpha, "proportion"]) for alpha in ALPHAS}}
            unchanged = p[:N_CHANGED]
            is_changed = np.r_[np.zeros(N_CHANGED), np.ones(N_CHANGED)]
            for name, change in CHANGES.items():
                q = masf.pvalues(change(test[:N_CHANGED]))
                row[f"power {name}"] = float(np.mean(q < 0.05))
                row[f"auc {name}"] = float(roc_auc_score(is_changed, -np.r_[unchanged, q]))
            row["seconds"] = time.perf_counter() - start
            print(f"done {features} {mode} ({row['seconds']:.0f} s)", flush=True)
            rows.append(row)
    return rows


def fold_fraction_rows(n_calibration=3000, n_test=2000, n_shifted=500):
    """Calibrated mode with three splits of the calibration set: false positives and power at 0.3 sd."""
    rng = np.random.default_rng(0)
    calibration, test = gaussian_features(rng, n_calibration, 0.0), gaussian_features(rng, n_test, 0.0)
    rows = []
    for fractions in FOLD_FRACTIONS:
        masf = MaSF(fold_fractions=fractions, random_state=0).fit(calibration)
        p = masf.pvalues(test)
        q = masf.pvalues(test[:n_shifted] + np.float32(0.3))
        rows.append({"fold_fractions": [round(f, 4) for f in fractions], "n_calibration": n_calibration,
                     "fpr_0.05": float(np.mean(p < 0.05)), "power mean + 0.3 sd": float(np.mean(q < 0.05))})
        print(f"done fold_fractions={fractions}", flush=True)
    return rows


COMBINATIONS = {"Simes": simes_pvalue, "e x geometric mean": geometric_mean_pvalue,
                "Fisher (assumes independence)": fisher_pvalue}


def _rejection_rates(pvalue_sets):
    return {name: float(np.mean([combine(p) <= 0.05 for p in pvalue_sets])) for name, combine in COMBINATIONS.items()}


def set_level_rows(n_repeats=1000, n_masf_repeats=200):
    """Share of in-distribution test sets each dataset-level combination rejects at 0.05."""
    rng = np.random.default_rng(5)
    n_level3, n_test = round(N_CALIBRATION / 3), N_TEST
    calibration = np.sort(rng.standard_normal((n_repeats, n_level3)), axis=1)
    test = rng.standard_normal((n_repeats, n_test))
    at_least = n_level3 - np.stack([np.searchsorted(c, t) for c, t in zip(calibration, test)])
    conformal = (1 + at_least) / (n_level3 + 1)        # MaSF's final p-values given its level-1/2 references
    rows = [{"setting": f"conformal p-values, N3 = {n_level3}, {n_test} test examples, {n_repeats} sets",
             **_rejection_rates(conformal)}]
    sets = []
    for repeat in range(n_masf_repeats):
        rng = np.random.default_rng(1000 + repeat)
        features = rng.standard_normal((N_CALIBRATION + N_TEST, 2, 64), dtype=np.float32)
        masf = MaSF(random_state=repeat).fit(features[:N_CALIBRATION])
        sets.append(masf.pvalues(features[N_CALIBRATION:]))
    rows.append({"setting": f"MaSF calibrated, 2 x 64 features, N = {N_CALIBRATION}, {N_TEST} test examples, "
                            f"{n_masf_repeats} sets", **_rejection_rates(sets)})
    print("done set-level combinations", flush=True)
    return rows


def copies_of(rng, base, rho):
    """One copy per example: ``rho`` of its variance shared with the example's other copies."""
    noise = rng.standard_normal(base.shape, dtype=np.float32)
    return np.float32(np.sqrt(rho)) * base + np.float32(np.sqrt(1 - rho)) * noise


def group_rows(n=2000, repeats=3, seeds=(0, 1, 2)):
    """Calibrated false positives with ``repeats`` copies per calibration example: folds by example or by row."""
    rows = []
    for rho in (0.5, 1.0):
        rates = {"by example (groups=)": [], "by row": []}
        for seed in seeds:
            rng = np.random.default_rng(seed)
            base = rng.standard_normal((n, 2, 256), dtype=np.float32)
            calibration = np.concatenate([copies_of(rng, base, rho) for _ in range(repeats)])
            test = rng.standard_normal((2000, 2, 256), dtype=np.float32)
            groups = np.tile(np.arange(n), repeats)
            for name, fit_groups in (("by example (groups=)", groups), ("by row", None)):
                p = MaSF(random_state=seed).fit(calibration, groups=fit_groups).pvalues(test)
                rates[name].append(float(np.mean(p <= 0.05)))
        rows.append({"shared_variance": rho, "n_examples": n, "dist_repeats": repeats,
                     **{name: float(np.mean(r)) for name, r in rates.items()},
                     **{f"{name} per seed": r for name, r in rates.items()}})
        print(f"done dist_repeats rho={rho}", flush=True)
    return rows


def _number(value):
    return f"{value:.3f}" if value >= 0.001 or value == 0 else f"{value:.1e}"


def markdown(rows, fold_rows, set_rows, repeat_rows):
    lines = ["**False positives on in-distribution data** (share with p < alpha; dataset-level p-values of the "
             "whole in-distribution test set)", "",
             "| features | mode | " + " | ".join(f"alpha {a:g}" for a in ALPHAS) + " | p = 0 | Simes p (set) "
             "| geomean p (set) |", "|" + "---|" * (5 + len(ALPHAS))]
    for row in rows:
        rates = " | ".join(_number(row[f"fpr_{a:g}"]) for a in ALPHAS)
        lines.append(f"| {row['features']} | {row['mode']} | {rates} | {_number(row['p_zero'])} "
                     f"| {_number(row['simes_p'])} | {_number(row['geomean_p'])} |")
    columns = [(row["features"], row["mode"]) for row in rows]
    lines += ["", "**Power** (share with p < 0.05) and **AUC**", "",
              "| change | " + " | ".join(f"{f}, {m}" for f, m in columns) + " |", "|" + "---|" * (1 + len(columns))]
    for name in CHANGES:
        cells = " | ".join(f"{row[f'power {name}']:.2f} ({row[f'auc {name}']:.2f})" for row in rows)
        lines.append(f"| {name} | {cells} |")
    lines += ["", f"**Fold fractions** (calibrated, N = {fold_rows[0]['n_calibration']}, independent features)", "",
              "| fold_fractions | false positives at 0.05 | power at mean + 0.3 sd |", "|---|---|---|"]
    for row in fold_rows:
        lines.append(f"| {tuple(row['fold_fractions'])} | {row['fpr_0.05']:.3f} | {row['power mean + 0.3 sd']:.2f} |")
    lines += ["", "**Dataset-level combinations**: share of whole in-distribution test sets rejected at 0.05 "
              "(nominal: at most 0.05)", "", "| setting | " + " | ".join(COMBINATIONS) + " |",
              "|" + "---|" * (1 + len(COMBINATIONS))]
    for row in set_rows:
        lines.append(f"| {row['setting']} | " + " | ".join(f"{row[name]:.3f}" for name in COMBINATIONS) + " |")
    lines += ["", "**dist_repeats = 3** (calibrated, 2 x 256 features, 2000 examples x 3 copies, 2000 fresh test "
              "examples, mean of 3 seeds): share of fresh in-distribution examples with p <= 0.05", "",
              "| copies share | folds by example (groups=) | folds by row |", "|---|---|---|"]
    for row in repeat_rows:
        lines.append(f"| {row['shared_variance']:.0%} of their variance | {row['by example (groups=)']:.4f} "
                     f"| {row['by row']:.4f} |")
    return "\n".join(lines)


def main():
    start = time.perf_counter()
    rows, fold_rows = calibration_rows(), fold_fraction_rows()
    set_rows, repeat_rows = set_level_rows(), group_rows()
    table = markdown(rows, fold_rows, set_rows, repeat_rows)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {"layers": LAYERS, "hidden": HIDDEN, "n_calibration": N_CALIBRATION, "n_test": N_TEST,
            "n_changed": N_CHANGED, "numpy": np.__version__, "machine": platform.machine(),
            "seconds": time.perf_counter() - start}
    (RESULTS / "masf_calibration.json").write_text(json.dumps({"meta": meta, "rows": rows,
                                                               "fold_fractions": fold_rows,
                                                               "dataset_level": set_rows,
                                                               "dist_repeats": repeat_rows}, indent=2))
    (RESULTS / "masf_calibration.md").write_text(
        f"MaSF calibration and power, synthetic Gaussian features {LAYERS} x {HIDDEN} (float32), "
        f"{N_CALIBRATION} calibration and {N_TEST} in-distribution test examples, {N_CHANGED} changed ones; "
        f"seeded.\n\n{table}\n")


if __name__ == "__main__":
    main()

"""Masked fine-tuning in fp32 and in bf16: epoch time and test accuracy across seeds.

The question of issue 35: where bf16 is faster, is masked fine-tuning in bf16 as accurate as in fp32?
The same masked MiniLM fit (``max_masking_ratio=1.0``, the paper's masked fine-tuning) on the same
bundled tweets, per seed once in fp32 and once in bf16 (interleaved, the order alternating with the
seed), scored on the same held-out test tweets.  Reported: epoch seconds (skorch's ``dur``), test
accuracy per seed, the fp32 accuracies' 95 % t-interval across seeds, whether the bf16 mean lies in
it, and the paired bf16 - fp32 difference with its t-interval across seeds.  Fine-tuning precision
is chosen by ``precision="auto"`` (bf16 where a probe measures it faster, docs/explain.md,
"Precision"); this benchmark is the accuracy side of that choice.

Usage::

    python benchmarks/fit_precision.py [--n-train 600] [--n-test 1000] [--epochs 2] [--seeds 0 1 2] [--quick]

Writes ``benchmarks/results/<cpu kind>/fit_precision.{md,json}`` (not with ``--quick``).
"""

from __future__ import annotations

import argparse

# _common sets OMP_WAIT_POLICY and HF_HUB_OFFLINE: import it before torch
from _common import command, machine, machine_line, table, write_results

LEARNING_RATE = 2e-4
PRECISIONS = ("fp32", "bf16")


def load_split(n_train: int, n_test: int):
    """Stratified train/test tweets (the corpus is sorted by label: always shuffle)."""
    from sklearn.model_selection import train_test_split

    from fmmlearn.datasets import load_tweet_sentiment

    data = load_tweet_sentiment(n_samples=n_train + n_test, random_state=0)
    return train_test_split(list(data.data), list(data.target), train_size=n_train, test_size=n_test,
                            stratify=list(data.target), random_state=0)


def fit_and_score(split, precision: str, seed: int, epochs: int) -> dict:
    """One masked fit: mean epoch seconds and test accuracy."""
    from fmmlearn import FaithfulTextClassifier

    X_train, X_test, y_train, y_test = split
    clf = FaithfulTextClassifier(max_masking_ratio=1.0, max_epochs=epochs, batch_size=16,
                                 learning_rate=LEARNING_RATE, max_length=48, precision=precision,
                                 validation_fraction=0.0, random_state=seed, device="cpu")
    clf.fit(X_train, y_train)
    return {"precision": precision, "seed": seed, "epoch_seconds": float(clf.history_["dur"].mean()),
            "accuracy": float(clf.score(X_test, y_test))}


def t_interval(values) -> tuple:
    """Mean and 95 % t-interval of ``values`` (NaN bounds for fewer than two)."""
    import numpy as np
    from scipy import stats

    values = np.asarray(values, dtype=float)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    if np.ptp(values) == 0:  # no spread: the t-interval degenerates to the mean
        return mean, mean, mean
    low, high = stats.t.interval(0.95, len(values) - 1, loc=mean, scale=stats.sem(values))
    return mean, float(low), float(high)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=600)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="64 / 64 tweets, 1 epoch, 2 seeds: check the script runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_train, args.n_test, args.epochs, args.seeds = 64, 64, 1, [0, 1]
    info = machine(args.threads)
    print(machine_line(info, "fp32 and bf16, one fit each per seed"), flush=True)
    split = load_split(args.n_train, args.n_test)
    runs = []
    for i, seed in enumerate(args.seeds):
        for precision in PRECISIONS[::-1] if i % 2 else PRECISIONS:  # alternate the order: drift hits both
            runs.append(fit_and_score(split, precision, seed, args.epochs))
            print(runs[-1], flush=True)
    by = {p: {r["seed"]: r for r in runs if r["precision"] == p} for p in PRECISIONS}
    fp32 = t_interval([by["fp32"][s]["accuracy"] for s in args.seeds])
    bf16 = t_interval([by["bf16"][s]["accuracy"] for s in args.seeds])
    diff = t_interval([by["bf16"][s]["accuracy"] - by["fp32"][s]["accuracy"] for s in args.seeds])
    speed = t_interval([by["fp32"][s]["epoch_seconds"] / by["bf16"][s]["epoch_seconds"] for s in args.seeds])
    within = fp32[1] <= bf16[0] <= fp32[2]
    rows = [[s, f"{by['fp32'][s]['epoch_seconds']:.1f}", f"{by['bf16'][s]['epoch_seconds']:.1f}",
             f"{by['fp32'][s]['accuracy']:.3f}", f"{by['bf16'][s]['accuracy']:.3f}",
             f"{by['bf16'][s]['accuracy'] - by['fp32'][s]['accuracy']:+.3f}"] for s in args.seeds]
    report = {"machine": info, "command": command(argv), "settings": {
        "n_train": args.n_train, "n_test": args.n_test, "epochs": args.epochs, "seeds": args.seeds,
        "learning_rate": LEARNING_RATE, "max_masking_ratio": 1.0, "batch_size": 16, "max_length": 48},
        "runs": runs, "fp32_accuracy": fp32, "bf16_accuracy": bf16, "difference": diff,
        "speedup": speed, "bf16_mean_within_fp32_ci": within}
    lines = [f"# Masked fine-tuning in fp32 and bf16: {args.n_train} training tweets, {args.epochs} epoch(s), "
             f"{args.n_test} test tweets, seeds {args.seeds}", "",
             machine_line(info, "fp32 and bf16, one fit each per seed"), "", f"Command: `{report['command']}`", ""]
    lines += table(["seed", "fp32 epoch (s)", "bf16 epoch (s)", "fp32 accuracy", "bf16 accuracy", "bf16 - fp32"], rows)
    lines += ["", f"* fp32 accuracy {fp32[0]:.3f}, 95 % t-interval across seeds [{fp32[1]:.3f}, {fp32[2]:.3f}]; "
                  f"bf16 accuracy {bf16[0]:.3f}: {'within' if within else 'outside'} the fp32 interval.",
              f"* bf16 - fp32 accuracy, paired by seed: {diff[0]:+.3f} [{diff[1]:+.3f}, {diff[2]:+.3f}].",
              f"* fp32 / bf16 epoch time: {speed[0]:.2f}x [{speed[1]:.2f}, {speed[2]:.2f}] (above 1: bf16 faster)."]
    write_results("fit_precision", info, report, "\n".join(lines) + "\n", quick=args.quick)


if __name__ == "__main__":
    main()

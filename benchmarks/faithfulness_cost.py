"""Cost of measuring faithfulness by explainer masking vs the ROAR alternative.

fmmlearn measures faithfulness on one masked fine-tuned model: an 11-point
``loo-sign`` curve (recursive leave-one-out) plus the ``rand``
baseline curve on a test split.  ROAR (Hooker et al., 2019) instead re-trains
the model on data masked by the explanation at each of 10 ratios; its cost is
counted here, as in the issue, as ``10 x`` the measured time of one
``FaithfulTextClassifier.fit`` on the training split (a lower bound: ROAR also
has to explain the whole training set at every ratio, which is reported as a
second, fuller estimate: ``10 fits + the curve's explanation cost scaled to
the training-set size``).

Same bundled MiniLM, same tweets, same precision and ``max_length`` on both
sides, one process.  Also timed, for scale: the ``inp-grad-sign`` curve (one
backward pass per step) and the ``rand`` curve alone.  Because the recursive
LOO curve costs ``~ n/2 + 1`` forward passes per example and step while a fit
costs about ``3 * epochs`` forward-equivalents per training example, the
ratio depends mostly on how much larger the training split is than the test
split; the break-even size ratio for a 20x advantage is reported too.

Usage::

    python benchmarks/faithfulness_cost.py [--n-train 300] [--n-test 80] [--max-length 48]

Prints a markdown table and writes ``benchmarks/results/faithfulness_cost.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
RESULTS = Path(__file__).resolve().parent / "results"


def load_split(n_train: int, n_test: int, seed: int):
    from sklearn.model_selection import train_test_split

    from fmmlearn.datasets import load_tweet_sentiment

    data = load_tweet_sentiment(n_samples=n_train + n_test, random_state=seed)
    return train_test_split(list(data.data), list(data.target), test_size=n_test, random_state=seed,
                            stratify=list(data.target))


def timed(func):
    start = time.perf_counter()
    result = func()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-train", type=int, default=300)
    parser.add_argument("--n-test", type=int, default=80)
    parser.add_argument("--max-length", type=int, default=48)
    parser.add_argument("--max-epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)  # truncation notices

    import torch

    from fmmlearn import FaithfulTextClassifier
    from fmmlearn.faithfulness import faithfulness_curve, racu

    X_train, X_test, y_train, y_test = load_split(args.n_train, args.n_test, args.seed)
    clf = FaithfulTextClassifier(model="minilm", max_length=args.max_length, max_epochs=args.max_epochs,
                                 precision="auto", random_state=args.seed)
    load_before = os.getloadavg()[0]
    _, fit_s = timed(lambda: clf.fit(X_train, y_train))
    rand, rand_s = timed(lambda: faithfulness_curve(clf, X_test, y_test, "rand"))
    grad, grad_s = timed(lambda: faithfulness_curve(clf, X_test, y_test, "inp-grad-sign"))
    loo, loo_s = timed(lambda: faithfulness_curve(clf, X_test, y_test, "loo-sign"))
    load_after = os.getloadavg()[0]

    roar_s = 10 * fit_s
    ours_s = loo_s + rand_s  # a RACU needs the measure's curve and the baseline
    explain_train_s = (loo_s - rand_s) * len(X_train) / len(X_test)  # LOO importance on the training split
    fuller_roar_s = roar_s + explain_train_s
    per_test, per_train = ours_s / len(X_test), roar_s / len(X_train)
    rows = [
        ("one fit (training split)", fit_s, "-"),
        ("ROAR = 10 fits", roar_s, "1.0x"),
        ("ROAR, fuller: 10 fits + LOO on the training split", fuller_roar_s, f"{fuller_roar_s / roar_s:.2f}x"),
        ("fmmlearn: loo-sign curve + rand curve", ours_s, f"{roar_s / ours_s:.2f}x cheaper"),
        ("  loo-sign curve alone", loo_s, f"{roar_s / loo_s:.2f}x cheaper"),
        ("  inp-grad-sign curve + rand curve", grad_s + rand_s, f"{roar_s / (grad_s + rand_s):.2f}x cheaper"),
        ("  rand curve alone", rand_s, f"{roar_s / rand_s:.2f}x cheaper"),
    ]
    report = {
        "config": {**vars(args), "model": "minilm", "precision": "auto", "torch_threads": torch.get_num_threads(),
                   "cpu_count": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                   "load_average_before": load_before, "load_average_after": load_after},
        "seconds": {"fit": fit_s, "roar_10_fits": roar_s, "roar_fuller": fuller_roar_s, "loo_sign_curve": loo_s,
                    "rand_curve": rand_s, "inp_grad_sign_curve": grad_s, "fmmlearn_loo_plus_rand": ours_s},
        "ratio_roar_over_fmmlearn": roar_s / ours_s,
        "ratio_fuller_roar_over_fmmlearn": fuller_roar_s / ours_s,
        # ROAR's cost grows with the training split, ours with the test split: the ratio
        # n_train / n_test at which 10 fits cost 20x one loo-sign + rand measurement.
        "break_even_train_test_ratio_for_20x": 20 * per_test / per_train,
        "racu": {"loo-sign": racu(loo, rand), "inp-grad-sign": racu(grad, rand)},
        "test_accuracy": float(rand["value"].iloc[0]),
    }
    header = (f"Faithfulness measurement vs ROAR, bundled MiniLM, tweets, {len(X_train)} training / {len(X_test)} "
              f"test texts, max_length={args.max_length}, max_epochs={args.max_epochs}, precision=auto, "
              f"{torch.get_num_threads()} torch threads on {os.cpu_count()} CPU cores (load average "
              f"{load_before:.1f} -> {load_after:.1f}; one run, wall time).\n\n")
    table = "| what | seconds | vs ROAR |\n|---|---|---|\n" + "".join(
        f"| {name} | {seconds:.1f} | {ratio} |\n" for name, seconds, ratio in rows)
    notes = (f"\nTest accuracy {report['test_accuracy']:.3f}; RACU loo-sign {report['racu']['loo-sign']:.3f}, "
             f"inp-grad-sign {report['racu']['inp-grad-sign']:.3f}.  ROAR over fmmlearn (loo-sign + rand): "
             f"{report['ratio_roar_over_fmmlearn']:.2f}x (10 fits only), "
             f"{report['ratio_fuller_roar_over_fmmlearn']:.2f}x (with ROAR's training-set explanations).  "
             f"A 20x advantage with 10 fits alone needs a training split about "
             f"{report['break_even_train_test_ratio_for_20x']:.0f}x the test split at these settings.\n")
    markdown = header + table + notes
    print(markdown)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "faithfulness_cost.md").write_text(markdown)
    (RESULTS / "faithfulness_cost.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

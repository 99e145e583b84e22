"""Cost of a faithfulness curve: against its own lower bound, and against ROAR's re-fits.

**Curve vs its bound.**  A curve of a non-recursive measure needs one explanation of the test set
and the evaluation of 11 masked copies of it (ratios 0, 0.1, ..., 1), so its bound is
``explain time + 11 forwards`` (the 11 evaluations of the set, one ``encoded_logits`` each).
Ours reuses the explanation for every ratio and evaluates all ratios in one batched pass, each
distinct masked input once.  Goal: curve / (explain + 11 forwards) <= 1.2.  A recursive curve
re-explains at every interior ratio, but only the examples that mask a new token there; its
naive cost ``9 explanations + 11 forwards`` is reported next to it.  The three sides (curve,
explanation, 11 forwards) run interleaved in one process, min / median / max of ``--repeats``.

**Curve vs ROAR.**  fmmlearn measures faithfulness on one masked fine-tuned model: an 11-point
``loo-sign`` curve (recursive leave-one-out) plus the ``rand`` baseline curve on the test split.
ROAR (Hooker et al., 2019) re-trains the model on data masked by the explanation at each of 10
ratios; its cost is counted as ``10 x`` the measured time of one ``FaithfulTextClassifier.fit``
on the training split (a lower bound: ROAR also has to explain the training set at every ratio,
reported as a fuller estimate: ``10 fits + the LOO curve's explanation cost scaled to the
training-set size``).  The ratio grows with the training split: the break-even train/test size
ratio for a 20x advantage is reported.

Same bundled MiniLM, same tweets, precision ``"auto"``, ``max_length`` on both sides, one process.

Usage::

    python benchmarks/faithfulness_cost.py [--n-train 300] [--n-test 80] [--max-length 48] [--repeats 3] [--quick]

Writes ``benchmarks/results/<cpu kind>/faithfulness_cost.{md,json}`` (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import time
import warnings

# _common sets OMP_WAIT_POLICY and HF_HUB_OFFLINE: import it before torch
from _common import command, fmt_stats, interleaved, machine, machine_line, table, write_results


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


def curve_vs_bound(clf, X_test, y_test, method, recursive, repeats) -> dict:
    """Curve time against ``explain + 11 forwards`` (and ``9 explanations + 11 forwards`` if recursive)."""
    import numpy as np

    from fmmlearn.explanation import explain_encoded
    from fmmlearn.faithfulness import faithfulness_curve

    encoding = clf.encode(X_test)
    targets = np.searchsorted(clf.classes_, y_test)
    sides = {
        "curve": lambda: faithfulness_curve(clf, X_test, y_test, method=method, recursive=recursive),
        "explain": lambda: explain_encoded(clf, encoding, targets, method=method),
        "11 forwards": lambda: [clf.encoded_logits(encoding) for _ in range(11)],
    }
    runs = interleaved(sides, repeats, warm_up=True)
    curve, explain, forwards = (runs[k]["stats"] for k in ("curve", "explain", "11 forwards"))
    explanations = 9 if recursive else 1
    bound = explanations * explain["min"] + forwards["min"]
    return {"method": method, "recursive": recursive, "n_test": len(X_test), "curve": curve, "explain": explain,
            "forwards": forwards, "bound_s": bound, "explanations_in_bound": explanations,
            "curve_over_bound": curve["min"] / bound}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-train", type=int, default=300)
    parser.add_argument("--n-test", type=int, default=80)
    parser.add_argument("--max-length", type=int, default=48)
    parser.add_argument("--max-epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes and 1 repeat, to check the script runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_train, args.n_test, args.max_epochs, args.repeats, args.max_length = 24, 8, 1, 1, 32
    info = machine(args.threads)
    from fmmlearn.exceptions import TruncationWarning

    warnings.simplefilter("ignore", TruncationWarning)  # truncation notices: by category, so other warnings show
    print(machine_line(info, "auto"), flush=True)

    from fmmlearn import FaithfulTextClassifier
    from fmmlearn.faithfulness import faithfulness_curve, racu

    X_train, X_test, y_train, y_test = load_split(args.n_train, args.n_test, args.seed)
    clf = FaithfulTextClassifier(model="minilm", max_length=args.max_length, max_epochs=args.max_epochs,
                                 precision="auto", random_state=args.seed, validation_fraction=0.0)
    _, fit_s = timed(lambda: clf.fit(X_train, y_train))
    inference = clf.inference_dtype_
    precision = ("fp32" if inference is None else str(inference).replace("torch.", "")) + \
        " for predictions (measured), fp32 for the measures"

    bounds = [curve_vs_bound(clf, X_test, y_test, m, r, args.repeats)
              for m, r in (("inp-grad-sign", False), ("loo-sign", False), ("loo-sign", True))]
    for row in bounds:
        print({k: row[k] for k in ("method", "recursive", "curve_over_bound")}, flush=True)

    rand, rand_s = timed(lambda: faithfulness_curve(clf, X_test, y_test, method="rand"))
    grad, grad_s = timed(lambda: faithfulness_curve(clf, X_test, y_test, method="inp-grad-sign"))
    loo, loo_s = timed(lambda: faithfulness_curve(clf, X_test, y_test, method="loo-sign"))
    roar_s = 10 * fit_s
    ours_s = loo_s + rand_s  # a RACU needs the measure's curve and the baseline
    explain_train_s = max(loo_s - rand_s, 0.0) * len(X_train) / len(X_test)
    fuller_roar_s = roar_s + explain_train_s
    per_test, per_train = ours_s / len(X_test), roar_s / len(X_train)
    roar_rows = [
        ("one fit (training split)", fit_s, "-"),
        ("ROAR = 10 fits", roar_s, "1.0x"),
        ("ROAR, fuller: 10 fits + LOO on the training split", fuller_roar_s, f"{fuller_roar_s / roar_s:.2f}x"),
        ("fmmlearn: loo-sign curve + rand curve", ours_s, f"{roar_s / ours_s:.2f}x cheaper"),
        ("  loo-sign curve alone", loo_s, f"{roar_s / loo_s:.2f}x cheaper"),
        ("  inp-grad-sign curve + rand curve", grad_s + rand_s, f"{roar_s / (grad_s + rand_s):.2f}x cheaper"),
        ("  rand curve alone", rand_s, f"{roar_s / rand_s:.2f}x cheaper"),
    ]
    report = {
        "machine": info, "command": command(argv), "precision": precision,
        "config": {k: v for k, v in vars(args).items()} | {"model": "minilm"},
        "curve_vs_bound": bounds,
        "roar_seconds": {"fit": fit_s, "roar_10_fits": roar_s, "roar_fuller": fuller_roar_s, "loo_sign_curve": loo_s,
                         "rand_curve": rand_s, "inp_grad_sign_curve": grad_s, "fmmlearn_loo_plus_rand": ours_s},
        "ratio_roar_over_fmmlearn": roar_s / ours_s,
        "ratio_fuller_roar_over_fmmlearn": fuller_roar_s / ours_s,
        "break_even_train_test_ratio_for_20x": 20 * per_test / per_train,
        "racu": {"loo-sign": racu(loo, rand), "inp-grad-sign": racu(grad, rand)},
        "test_accuracy": float(rand["value"].iloc[0]),
    }
    lines = [f"# Faithfulness-curve cost ({len(X_train)} training / {len(X_test)} test tweets)", "",
             machine_line(info, precision), "", f"Command: `{report['command']}`", "",
             f"Bundled MiniLM, max_length={args.max_length}, fine-tuned {args.max_epochs} epoch(s) on the "
             f"{len(X_train)} training tweets; curves on the {len(X_test)} test tweets.", "",
             f"## Curve vs its bound (min / median / max of {args.repeats} interleaved runs, seconds)", "",
             "Goal (issue 16): non-recursive curve / (explain + 11 forwards) <= 1.2.", ""]
    lines += table(["measure", "recursive", "curve (s)", "explain (s)", "11 forwards (s)", "bound", "curve / bound"],
                   [[r["method"], r["recursive"], fmt_stats(r["curve"]), fmt_stats(r["explain"]),
                     fmt_stats(r["forwards"]),
                     f"{r['explanations_in_bound']} x explain + 11 forwards = {r['bound_s']:.3g} s",
                     f"**{r['curve_over_bound']:.2f}**"] for r in bounds])
    lines += ["", "## Curve vs ROAR (one run each, wall time)", "",
              "| what | seconds | vs ROAR |", "|---|---|---|",
              *(f"| {name} | {seconds:.1f} | {value} |" for name, seconds, value in roar_rows), "",
              f"Test accuracy {report['test_accuracy']:.3f}; RACU loo-sign {report['racu']['loo-sign']:.3f}, "
              f"inp-grad-sign {report['racu']['inp-grad-sign']:.3f}.  ROAR over fmmlearn (loo-sign + rand): "
              f"{report['ratio_roar_over_fmmlearn']:.2f}x (10 fits only), "
              f"{report['ratio_fuller_roar_over_fmmlearn']:.2f}x (with ROAR's training-set explanations).  A 20x "
              f"advantage with 10 fits alone needs a training split about "
              f"{report['break_even_train_test_ratio_for_20x']:.0f}x the test split at these settings.", "",
              "Final numbers need an idle machine: rerun the command above there."]
    write_results("faithfulness_cost", info, report, "\n".join(lines) + "\n", quick=args.quick)


if __name__ == "__main__":
    main()

"""Level and power of the in-distribution tests: detector x control x calibration, plain and masked MiniLM.

For each dataset (bundled tweets, BBC news), seed and model (plain: ``max_masking_ratio=0``; masked:
1.0, half-det), one fit, then the pooled hidden states (max, mean, first token; one forward pass per
text set) of:

* the training texts masked like the training batches (3 copies, grouped by text);
* a pool of validation texts masked like the training batches: calibration (100, 300, 1000 texts)
  and 200 held out as the **negative control** (drawn exactly like the calibration texts);
* the test texts: unmasked; ``rand``-masked at ratios 0.1..0.9 ([MASK]); the **matched positive
  controls** (the same positions filled with an unused vocabulary entry, or with a token at the mean
  input embedding); every maskable token random; and texts of the other dataset (another domain).

Every detector (MaSF and the conformal Mahalanobis/kNN detectors, ``fmmlearn.ood.DETECTORS``) is
fitted per calibration setting: on 100, 300 or 1000 validation texts alone (split internally), or
with its score fitted on the training features (1 or 3 copies) and the conformal level on 300
validation texts.  Reported per control: the share flagged at p < 0.05 with its 95 % CI (Wilson for
one set; for the ratio-averaged sets a bootstrap over texts), the detector's null share, the AUROC
of its score against the unmasked test texts, and its seconds to fit and to score.

    python benchmarks/ood_power.py                # ~40 min on 2 cores; writes results/<cpu kind>/ood_power.*
    python benchmarks/ood_power.py --quick        # 1 dataset, 1 seed, small sizes; writes nothing
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command, machine, machine_line, table, write_results  # noqa: E402

ALPHA = 0.05
RATIOS = tuple(round(0.1 * k, 1) for k in range(1, 10))
DATASETS = {"tweets": {"max_length": 48}, "bbc": {"max_length": 64}}
OTHER = {"tweets": "bbc", "bbc": "tweets"}
CLASSIFIER = {"max_epochs": 3, "learning_rate": 2e-4}


def load(name: str, n: int, seed: int):
    from fmmlearn.datasets import load_bbc_news, load_tweet_sentiment

    loader = load_tweet_sentiment if name == "tweets" else load_bbc_news
    bunch = loader(n_samples=n, random_state=seed)
    return list(bunch.data), list(bunch.target)


def splits(name, sizes, seed):
    from sklearn.model_selection import train_test_split

    n_train, n_pool, n_test = sizes
    X, y = load(name, n_train + n_pool + n_test, seed)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, train_size=n_train, stratify=y, random_state=seed)
    X_pool, X_test, y_pool, y_test = train_test_split(X_rest, y_rest, test_size=n_test, stratify=y_rest,
                                                      random_state=seed)
    return X_train, y_train, X_pool, y_pool, X_test, y_test


def feature_sets(clf, data, other_texts, seed, n_neg):
    """Every text set's pooled features {set: {pooling: array}} and the seconds of the forward passes."""
    from fmmlearn.utils._random import derive_seed
    from fmmlearn.ood import POOLINGS, calibration_features, hidden_state_features
    from fmmlearn.ood._controls import placeholder_ids, placeholder_inputs, random_token_ids, resolve_placeholder
    from fmmlearn.ood._report import _masked_steps

    X_train, y_train, X_pool, y_pool, X_test, y_test = data
    started, sets = time.perf_counter(), {}
    sets["train"], groups = calibration_features(clf, X_train, dist_repeats=3, random_state=seed, pooling=POOLINGS,
                                                 return_groups=True)
    pool = calibration_features(clf, X_pool, random_state=derive_seed(seed, 5), pooling=POOLINGS)
    sets["negative"] = {k: v[:n_neg] for k, v in pool.items()}
    sets["calibration"] = {k: v[n_neg:] for k, v in pool.items()}
    test, steps = _masked_steps(clf, X_test, y_test, "rand", [0.0, *RATIOS], "first", derive_seed(seed, 1))
    sets["unmasked"] = hidden_state_features(clf, encoding=test, pooling=POOLINGS)
    mask_id = clf.tokenizer_.mask_token_id
    for kind in ("unused", "mean-embedding"):
        placeholder = resolve_placeholder(clf, kind=kind) if kind != "unused" or _has_unused(clf) else None
        if placeholder is None:
            continue
        for ratio, ids in steps:
            if ratio == 0:
                continue
            if kind == "unused":  # the [MASK] sets once, beside the first placeholder
                sets[f"[MASK] {ratio:.1f}"] = hidden_state_features(clf, encoding=test, input_ids=ids,
                                                                    pooling=POOLINGS)
            with placeholder_inputs(clf.model_, placeholder=placeholder):
                sets[f"{kind} {ratio:.1f}"] = hidden_state_features(
                    clf, encoding=test, input_ids=placeholder_ids(ids, test.input_ids, mask_token_id=mask_id,
                                                                  placeholder=placeholder),
                    pooling=POOLINGS)
    sets["random tokens"] = hidden_state_features(clf, encoding=test, pooling=POOLINGS,
                                                  input_ids=random_token_ids(clf, test, seed=derive_seed(seed, 6),
                                                                             segment="first"))
    sets["other domain"] = hidden_state_features(clf, other_texts, pooling=POOLINGS)
    return sets, groups, time.perf_counter() - started


def _has_unused(clf) -> bool:
    from fmmlearn.ood._controls import resolve_placeholder

    return resolve_placeholder(clf, kind="auto").kind == "unused"


def scored(detector, features):
    """``(p-values, scores)``; the scores (larger: less typical) are for the AUROC: the nonconformity, or
    MaSF's Fisher statistic.  One pass of the detector over the features."""
    from fmmlearn.ood import conformal_pvalues

    if hasattr(detector, "nonconformity"):
        scores = detector.nonconformity(features)
        return conformal_pvalues(detector.calibration_scores_, scores), scores
    statistics = detector.statistics(features)
    return statistics.pvalues, statistics.fisher


def calibration_settings(sizes):
    n_cal = sizes["calibration"]
    settings = [(f"{n} validation", n, None) for n in (100, 300, 1000) if n <= n_cal]
    return settings + [(f"train x{k} + 300", min(300, n_cal), k) for k in (1, 3)]


def evaluate(detector_name, sets, groups, n_train, setting, seed):
    """Rows of one detector in one calibration setting: every control's flagged share, AUROC, seconds."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from fmmlearn.ood import make_detector
    from fmmlearn.study._stats import mean_over_texts, share_ci

    label, n_cal, copies = setting
    detector = make_detector(detector_name, random_state=seed)
    pooling = detector.pooling
    started = time.perf_counter()
    if copies is None:
        detector.fit(sets["calibration"][pooling][:n_cal])
    else:
        rows = np.arange(len(groups)) if copies == 3 else np.arange(n_train)  # copy 0 is rows 0..n_train-1
        detector.fit(sets["train"][pooling][rows], groups=groups[rows],
                     calibration=sets["calibration"][pooling][:n_cal])
    fit_seconds = time.perf_counter() - started
    started = time.perf_counter()
    scored = {name: globals()["scored"](detector, f[pooling]) for name, f in sets.items()
              if name not in ("train", "calibration")}
    score_seconds = time.perf_counter() - started
    unmasked_scores = scored["unmasked"][1]
    out = []

    def row(control, share, low, high, n, auroc):
        out.append({"detector": detector_name, "calibration": label, "control": control, "n": n, "flagged": share,
                    "low": low, "high": high, "null_share": detector.null_share(ALPHA), "auroc": auroc,
                    "fit_seconds": fit_seconds, "score_seconds": score_seconds})

    for control in ("negative", "unmasked", "random tokens", "other domain", "[MASK] 0.5", "unused 0.5",
                    "mean-embedding 0.5"):
        if control not in scored:
            continue
        p, s = scored[control]
        share, low, high = share_ci(int(np.sum(p < ALPHA)), len(p))
        auroc = float("nan") if control == "unmasked" else _auroc(roc_auc_score, unmasked_scores, s)
        row(control, share, low, high, len(p), auroc)
    for kind in ("[MASK]", "unused", "mean-embedding"):
        names = [f"{kind} {r:.1f}" for r in RATIOS if f"{kind} {r:.1f}" in scored]
        if not names:
            continue
        flags = np.stack([scored[n][0] < ALPHA for n in names]).mean(axis=0)  # per text: share of ratios
        share = mean_over_texts(flags[None, :], n_resamples=2000, seed=0)
        low, high = share.interval(0.95)
        auroc = float(np.mean([_auroc(roc_auc_score, unmasked_scores, scored[n][1]) for n in names]))
        row(f"{kind} 0.1-0.9", share.estimate, low, high, len(flags), auroc)
    return out


def _auroc(roc_auc_score, negatives, positives) -> float:
    import numpy as np

    y = np.r_[np.zeros(len(negatives)), np.ones(len(positives))]
    return float(roc_auc_score(y, np.r_[negatives, positives]))


def run(args) -> tuple[dict, str]:
    import numpy as np
    import pandas as pd

    from fmmlearn import FaithfulTextClassifier
    from fmmlearn.ood import DETECTORS

    info = machine()
    sizes = {"train": args.n_train, "calibration": args.n_calibration, "negative": args.n_negative,
             "test": args.n_test}
    rows, fits = [], []
    for dataset in args.datasets:
        for seed in args.seeds:
            data = splits(dataset, (sizes["train"], sizes["calibration"] + sizes["negative"], sizes["test"]), seed)
            other, _ = load(OTHER[dataset], sizes["test"], seed)
            for model, ratio in (("plain", 0.0), ("masked", 1.0)):
                started = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # truncation notices of long articles
                    clf = FaithfulTextClassifier(max_masking_ratio=ratio, random_state=seed, **CLASSIFIER,
                                                 **DATASETS[dataset])
                    clf.fit(data[0], data[1], validation_data=(data[2][:100], data[3][:100]))
                    fit_seconds = time.perf_counter() - started
                    accuracy = clf.score(data[4], data[5])
                    sets, groups, forward_seconds = feature_sets(clf, data, other, seed, sizes["negative"])
                fits.append({"dataset": dataset, "seed": seed, "model": model, "accuracy": accuracy,
                             "fit_seconds": fit_seconds, "forward_seconds": forward_seconds})
                print(f"{dataset} seed {seed} {model}: accuracy {accuracy:.3f}, fit {fit_seconds:.0f} s, "
                      f"features {forward_seconds:.0f} s", flush=True)
                started = time.perf_counter()
                for name in DETECTORS:
                    for setting in calibration_settings(sizes):
                        for r in evaluate(name, sets, groups, sizes["train"], setting, seed):
                            rows.append({"dataset": dataset, "seed": seed, "model": model, **r})
                print(f"  detectors evaluated in {time.perf_counter() - started:.0f} s", flush=True)
    frame = pd.DataFrame(rows)
    report = {"machine": info, "command": command(), "sizes": sizes, "seeds": list(args.seeds),
              "fits": fits, "rows": rows}
    return report, markdown(frame, pd.DataFrame(fits), info, sizes, args)


def pooled(frame):
    """Mean over seeds of the shares (the CI: the seeds' lowest low and highest high)."""
    keys = ["dataset", "model", "detector", "calibration", "control"]
    return frame.groupby(keys, sort=False).agg(flagged=("flagged", "mean"), low=("low", "min"), high=("high", "max"),
                                               null_share=("null_share", "mean"), auroc=("auroc", "mean"),
                                               fit_seconds=("fit_seconds", "median"),
                                               score_seconds=("score_seconds", "median")).reset_index()


CONTROLS = ("negative", "unmasked", "[MASK] 0.1-0.9", "unused 0.1-0.9", "mean-embedding 0.1-0.9", "random tokens",
            "other domain")


def markdown(frame, fits, info, sizes, args) -> str:
    summary = pooled(frame)
    lines = ["# In-distribution tests: level and power", "", machine_line(info, "fp32 features (MiniLM autocast "
             "as chosen by precision='auto')"), "", f"Command: `{command()}`", "",
             f"Per dataset and seed: {sizes['train']} training texts (3 epochs), a pool of "
             f"{sizes['calibration']} calibration + {sizes['negative']} negative-control validation texts masked "
             f"like the training batches, {sizes['test']} test texts; seeds {list(args.seeds)}. Shares flagged at "
             f"p < {ALPHA} (mean over seeds; CI: the seeds' widest 95 % bounds). Ratio-averaged controls: the share "
             "of the ratios 0.1..0.9 at which a text is flagged, averaged over texts.", "",
             "## Fits", ""]
    lines += table(["dataset", "seed", "model", "test accuracy", "fit s", "features s"],
                   [[r.dataset, r.seed, r.model, r.accuracy, r.fit_seconds, r.forward_seconds]
                    for r in fits.itertuples()])
    for (dataset, model), part in summary.groupby(["dataset", "model"], sort=False):
        lines += ["", f"## {dataset}, {model} model: flagged share [95 % CI] (AUROC against unmasked test texts)", ""]
        present = [c for c in CONTROLS if c in set(part["control"])]
        header = ["detector", "calibration", "null share", *present, "fit s", "score s"]
        body = []
        for (detector, calibration), cell in part.groupby(["detector", "calibration"], sort=False):
            by = cell.set_index("control")
            values = []
            for c in present:
                r = by.loc[c]
                auroc = "" if c in ("negative", "unmasked") else f" ({r['auroc']:.2f})"
                values.append(f"{r['flagged']:.1%} [{r['low']:.0%}, {r['high']:.0%}]{auroc}")
            body.append([detector, calibration, f"{cell['null_share'].iloc[0]:.1%}", *values,
                         f"{cell['fit_seconds'].iloc[0]:.2f}", f"{cell['score_seconds'].iloc[0]:.2f}"])
        lines += table(header, body)
    lines += ["", choice_lines(frame)]
    return "\n".join(lines) + "\n"


#: The positive controls the default detector is chosen on: the matched ones (the verdict's power) and the
#: two reported ones.
POSITIVE = ("unused 0.1-0.9", "mean-embedding 0.1-0.9", "random tokens", "other domain")


def choice_lines(frame) -> str:
    """The default detector by measurement: training-fitted (as studies fit it), at its null share (the
    negative control pooled over every run and seed not clearly above it), the most power on the positive
    controls: the highest lowest flagged share over datasets, models and controls (then the highest mean)."""
    from fmmlearn.study._stats import share_ci

    trained = frame[frame["calibration"].str.startswith("train x1")]
    scores = {}
    for detector, part in trained.groupby("detector"):
        negative = part[part["control"] == "negative"]
        k, n = int(round((negative["flagged"] * negative["n"]).sum())), int(negative["n"].sum())
        _, low, _ = share_ci(k, n)
        positive = part[part["control"].isin(POSITIVE)].groupby(["dataset", "model", "control"])["flagged"].mean()
        scores[detector] = (low <= negative["null_share"].mean(), positive.min(), positive.mean(), k / n)
    ranked = sorted(scores.items(), key=lambda kv: (not kv[1][0], -kv[1][1], -kv[1][2]))
    text = ", ".join(f"{d} (lowest {s[1]:.1%}, mean {s[2]:.1%}; negative control {s[3]:.1%}"
                     f"{'' if s[0] else ', clearly above its null share'})" for d, s in ranked)
    return (f"Power of the training-fitted detectors (train x1 + 300) on the positive controls ({', '.join(POSITIVE)}; "
            f"lowest share over datasets, models and controls first): {text}. Most power: **{ranked[0][0]}**.")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--n-train", type=int, default=600)
    parser.add_argument("--n-calibration", type=int, default=1000)
    parser.add_argument("--n-negative", type=int, default=200)
    parser.add_argument("--n-test", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="tweets, seed 0, small sizes; writes nothing")
    args = parser.parse_args(argv)
    if args.quick:
        args.datasets, args.seeds = ["tweets"], [0]
        args.n_train, args.n_calibration, args.n_negative, args.n_test = 120, 300, 40, 40
    report, text = run(args)
    write_results("ood_power", report["machine"], report, text, quick=args.quick)


if __name__ == "__main__":
    main()

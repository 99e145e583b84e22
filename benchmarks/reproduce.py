"""Do the claims of Madsen, Reddy & Chandar (ICML 2024) hold with fmmlearn?  A reproduction on this machine.

On bundled tweets, generated bAbI-1 (and Facebook's bAbI-1 when it is available) and BBC news, the
bundled MiniLM is fine-tuned plainly (``max_masking_ratio=0``) and with masking (``1.0``), over
several seeds, by :class:`fmmlearn.study.FaithfulnessStudy`.  The script then writes:

(a) the unmasked test performance of both models;
(b) their performance under random masking, 0-100 %;
(c) RACU of every importance measure (``int-grad-*`` with ``variant="reference"``, as in the
    paper's tables; ``beam-sign-10`` on bAbI only, on its shortest paragraphs), with CIs over test
    examples and over seeds;
(d) the MaSF share of masked test examples flagged out of distribution, per masking ratio;
(e) on bAbI, how often each measure ranks a token of the supporting fact first, against chance;
(f) ERASER's comprehensiveness and sufficiency (AOPC) of ``loo-sign`` and ``rand``, each flagged
    valid only when MaSF finds its erased inputs in-distribution (docs/erasure.md);

and a claims table: for each of the paper's four claims a verdict (agrees / disagrees /
inconclusive) computed from those numbers by the explicit rules of :func:`claims_table` (see
``docs/reproduction.md``).  The paper's convergence filter is applied: bAbI runs whose unmasked
test accuracy is at most 0.5 are left out of every mean and listed separately.

Usage::

    python benchmarks/reproduce.py                          # the default: ~1 hour on 2 CPU cores
    python benchmarks/reproduce.py --doc docs/reproduction.md   # ... and refresh the doc's tables
    python benchmarks/reproduce.py --quick                  # minutes, toy sizes, to a scratch directory
    python benchmarks/reproduce.py --scale 4 --seeds 0 1 2 3 4 --device cuda     # bigger
    HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 python benchmarks/reproduce.py --datasets babi-1-facebook

Every stage is cached by content under ``--cache-dir``: a rerun with the same settings fits
nothing and only redraws the tables (``--measures`` with one more measure computes only that one).
Results go to ``benchmarks/results/reproduce/`` (CSV, JSON, PNG and ``reproduce.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, machine_line  # noqa: E402  (sets HF_HUB_OFFLINE=1 and OMP_WAIT_POLICY)

RESULTS_DIR = Path(__file__).resolve().parent / "results" / "reproduce"
#: The paper's masked fine-tuning and plain fine-tuning.
MASKING_RATIOS = (0.0, 1.0)
#: Measures of every dataset (``int-grad-*`` run with ``variant="reference"``), and of bAbI only.
DEFAULT_MEASURES = ("rand", "grad-l2", "inp-grad-sign", "inp-grad-abs", "int-grad-sign", "loo-sign")
BABI_ONLY_MEASURES = ("beam-sign-10",)
#: Masking-based measures (claim 3): the importance is a change of the output when tokens are masked.
MASKING_FAMILIES = ("loo", "beam")
ALPHA = 0.05  # the MaSF level of the flagged share (and of the paper's figures)
CONFIDENCE = 0.95


def family(measure: str) -> str:
    """``"gradient"``, ``"int-grad"``, ``"loo"``, ``"beam"`` or ``"rand"``: the cost class of a measure."""
    for prefix, name in (("beam-", "beam"), ("loo-", "loo"), ("int-grad-", "int-grad"), ("rand", "rand")):
        if measure.startswith(prefix):
            return name
    return "gradient"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one dataset of the reproduction runs: sizes, fine-tuning, test examples per measure family.

    ``caps`` maps a measure family to the number of test examples it is measured on: a seeded
    random subset, the same (nested) for every family, except ``beam``: the shortest texts.
    """

    name: str
    title: str
    n_train: int
    n_valid: int
    n_test: int
    epochs: int
    learning_rate: float
    max_length: int | None
    caps: dict
    babi_source: str | None = None
    max_sentences: int | None = None

    @property
    def is_babi(self) -> bool:
        return self.babi_source is not None

    def scaled(self, factor: float) -> "Plan":
        grow = lambda n: max(2, int(round(n * factor)))  # noqa: E731
        return dataclasses.replace(self, n_train=grow(self.n_train), n_valid=grow(self.n_valid),
                                   n_test=grow(self.n_test), caps={k: grow(v) for k, v in self.caps.items()})


# Sizes measured to fit the default into one hour on 2 CPU cores (docs/reproduction.md, "Runtime"), with
# learning rates and epochs at which MiniLM learns each task (it needs more than the paper's 2e-5).
_BABI = dict(n_train=600, n_valid=100, n_test=80, epochs=8, learning_rate=3e-4, max_length=None,
             caps={"gradient": 40, "int-grad": 12, "loo": 24, "beam": 6}, max_sentences=4)
PLANS = {
    "tweets": Plan("tweets", "Tweets (bundled, 3 classes)", n_train=300, n_valid=100, n_test=80, epochs=3,
                   learning_rate=2e-4, max_length=48, caps={"gradient": 40, "int-grad": 12, "loo": 24}),
    "babi-1": Plan("babi-1", "bAbI-1 (generated)", babi_source="generated", **_BABI),
    "babi-1-facebook": Plan("babi-1-facebook", "bAbI-1 (Facebook en-10k)", babi_source="facebook", **_BABI),
    "bbc-news": Plan("bbc-news", "BBC news (bundled, 5 classes, first 64 tokens)", n_train=200, n_valid=100,
                     n_test=60, epochs=3, learning_rate=2e-4, max_length=64,
                     caps={"gradient": 30, "int-grad": 6, "loo": 10}),
}
DEFAULT_DATASETS = ("tweets", "babi-1", "bbc-news")
#: ``--quick``: every dataset at toy sizes (minutes with MiniLM, seconds with a tiny model).
QUICK = dict(n_train=48, n_valid=30, n_test=16, epochs=1, caps={"gradient": 8, "int-grad": 4, "loo": 6, "beam": 4})
FACEBOOK_COMMAND = ("HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 python benchmarks/reproduce.py --datasets "
                    "babi-1-facebook --output benchmarks/results/reproduce-facebook")


# =========================================================================== data


def babi_data(plan: Plan, seed: int):
    """The paper's bAbI-1 splits, subsampled (stratified, seeded) to the plan's sizes.

    With ``max_sentences``, only paragraphs of at most that many sentences are kept (a question
    comes every two statements, so 4 keeps the first two questions of each story).  The study
    keeps these splits as given, so the test examples, and their supporting facts, are known here.
    """
    from sklearn.model_selection import train_test_split
    from sklearn.utils import Bunch

    from fmmlearn.datasets import load_babi

    full = load_babi(1, source=plan.babi_source)
    parts = {}
    for split, n in (("train", plan.n_train), ("validation", plan.n_valid), ("test", plan.n_test)):
        bunch = full[split]
        keep = np.arange(len(bunch.data))
        if plan.max_sentences is not None:
            keep = keep[[bunch.data[i][0].count(".") <= plan.max_sentences for i in keep]]
        if n > len(keep):
            raise SystemExit(f"{plan.name}: {n} {split} examples asked for, {len(keep)} available.")
        if n < len(keep):
            keep, _ = train_test_split(keep, train_size=n, stratify=np.asarray(bunch.target)[keep],
                                       random_state=seed)
            keep = np.sort(keep)
        parts[split] = Bunch(data=[tuple(bunch.data[i]) for i in keep], target=np.asarray(bunch.target)[keep],
                             supporting_spans=[[tuple(s) for s in bunch.supporting_spans[i]] for i in keep],
                             supporting_facts=[list(bunch.supporting_facts[i]) for i in keep])
    return dataclasses.replace(full, **parts)


def facebook_status() -> dict:
    """Whether Facebook's bAbI-1 can be loaded here (offline: only from the ``datasets`` cache)."""
    from fmmlearn.datasets import DatasetUnavailableError, load_babi

    if os.environ.get("HF_HUB_OFFLINE", "0") != "1":
        return {"available": None, "reason": "not checked (online: checking would download it)",
                "command": FACEBOOK_COMMAND}
    try:
        load_babi(1, "test", source="facebook")
    except (DatasetUnavailableError, ModuleNotFoundError) as exc:
        return {"available": False, "reason": str(exc).split(". ")[0] + ".", "command": FACEBOOK_COMMAND}
    return {"available": True, "reason": "in the local datasets cache", "command": FACEBOOK_COMMAND}


# =========================================================================== running the studies


def study_for(plan: Plan, args, measures) -> "object":
    from fmmlearn.study import FaithfulnessStudy

    caps = {m: plan.caps[family(m)] for m in measures if family(m) in plan.caps}
    params = {m: {"variant": "reference"} for m in measures if family(m) == "int-grad"}
    classifier = {"max_epochs": plan.epochs, "learning_rate": plan.learning_rate, "max_length": plan.max_length,
                  "precision": args.precision}
    sizes = {} if plan.is_babi else {"n_train": plan.n_train, "n_valid": plan.n_valid, "n_test": plan.n_test}
    n = int(round(1 / args.ratio_step))
    return FaithfulnessStudy(
        args.model, masking_ratios=MASKING_RATIOS, measures=list(measures), seeds=tuple(args.seeds),
        ratios=[k / n for k in range(n + 1)], max_examples=caps, measure_params=params,
        classifier_params=classifier, n_explain=0, n_baseline=args.n_baseline, n_bootstrap=args.n_bootstrap,
        confidence_level=CONFIDENCE, device=args.device, cache_dir=Path(args.cache_dir) / plan.name,
        random_state=args.split_seed, verbose=args.verbose, **sizes)


def run_dataset(plan: Plan, args) -> dict:
    """One study (and, for bAbI, the supporting-fact analysis) of a dataset."""
    measures = [m for m in args.measures if plan.is_babi or family(m) != "beam"]  # beam search: bAbI only
    study = study_for(plan, args, measures)
    data = babi_data(plan, args.split_seed) if plan.is_babi else plan.name
    print(f"\n== {plan.title}: measures {', '.join(measures)}", flush=True)
    start = time.perf_counter()
    with warnings.catch_warnings():
        # truncation of long texts is the plan (max_length); the study counts truncated test examples
        warnings.filterwarnings("ignore", message=".*truncat", category=UserWarning)
        result = study.run(data)
    out = {"plan": plan, "result": result, "measures": measures, "seconds": time.perf_counter() - start,
           "support": None}
    if plan.is_babi:
        start = time.perf_counter()
        out["support"], out["support_cached"] = supporting_fact_hits(plan, args, result, data.test)
        out["support_seconds"] = time.perf_counter() - start
    return out


# =========================================================================== (e) supporting facts


def _token_hits(frame: pd.DataFrame, spans) -> tuple[float, float]:
    """Top-1 hit and chance rate of one example's explanation (segment A tokens only).

    Hit: the share of the top-scored tokens (ties share the credit) whose character span overlaps a
    supporting fact; chance: the share of all segment-A tokens that do, i.e. the hit rate of a
    uniformly random top token.
    """
    rows = frame[frame["segment"] == "A"]
    start, end = rows["char_start"].to_numpy(), rows["char_end"].to_numpy()
    inside = np.zeros(len(rows), dtype=bool)
    for s, e in spans:
        inside |= (start < e) & (end > s)
    scores = rows["importance"].to_numpy()
    top = scores == scores.max()
    return float(inside[top].mean()), float(inside.mean())


def _supporting_stage(model_dir: str, fit_key: str, texts, labels, spans, method, params, seed, device):
    """Hits and chance per example of ``method`` on one fitted model (cached by its arguments)."""
    from fmmlearn import FaithfulTextClassifier
    from fmmlearn.modeling import quiet_transformers

    with quiet_transformers():
        clf = FaithfulTextClassifier.load(model_dir, device=device)
    start = time.perf_counter()
    frame = clf.explain(texts, labels, method=method, random_state=seed, **params)
    hits = [_token_hits(part, spans[i]) for i, part in frame.groupby("example", sort=True)]
    return {"hit": [h for h, _ in hits], "chance": [c for _, c in hits], "seconds": time.perf_counter() - start}


def supporting_fact_hits(plan: Plan, args, result, test) -> tuple[pd.DataFrame, bool]:
    """(e): per model, seed, measure and test example, whether the top token lies in a supporting fact.

    Two sets of test examples, each with every measure on the same examples: the random subset
    leave-one-out was measured on (all measures but beam search), and the shortest paragraphs beam
    search was measured on (every measure, beam search included).
    """
    import joblib

    cache = Path(args.cache_dir) / plan.name
    memory = joblib.Memory(cache / "supporting-facts", verbose=0)
    stage = memory.cache(_supporting_stage, ignore=["model_dir", "device"])
    measures = [m for m in result.racu_summary["method"].unique()]
    subsets = {}
    loo = [m for m in measures if family(m) == "loo"]
    pick = loo[0] if loo else next((m for m in measures if family(m) != "beam"), None)
    examples = result.outcomes
    if pick is not None:
        subsets["random"] = (np.sort(examples.loc[examples["method"] == pick, "example"].unique()),
                             ["rand", *[m for m in measures if family(m) != "beam"]])
    beams = [m for m in measures if family(m) == "beam"]
    if beams:
        subsets["shortest"] = (np.sort(examples.loc[examples["method"] == beams[0], "example"].unique()),
                               ["rand", *measures])
    params = {m: {"variant": "reference"} for m in measures if family(m) == "int-grad"}
    rows, all_cached = [], True
    for run in result.metadata["runs"]:
        model_dir = str(cache / "models" / run["fit_key"] / "model")
        for subset, (idx, methods) in subsets.items():
            texts = [test.data[i] for i in idx]
            labels = test.target[idx].tolist()
            spans = [test.supporting_spans[i] for i in idx]
            for method in methods:
                call = (model_dir, run["fit_key"], texts, labels, spans, method, params.get(method, {}), run["seed"],
                        args.device)
                all_cached &= bool(stage.check_call_in_cache(*call))
                out = stage(*call)
                rows.append(pd.DataFrame({"model": run["model"], "seed": run["seed"], "subset": subset,
                                          "method": method, "example": idx, "hit": out["hit"],
                                          "chance": out["chance"], "seconds": out["seconds"] / len(idx)}))
    return pd.concat(rows, ignore_index=True), all_cached


# =========================================================================== statistics


def example_weights(n: int, n_resamples: int, rng) -> np.ndarray:
    """Bootstrap weights over ``n`` examples, shape ``(n_resamples, n)``, each row summing to 1."""
    return rng.multinomial(n, np.full(n, 1 / n), size=n_resamples) / n


def seed_resampled_means(values: np.ndarray, weights: np.ndarray, rng) -> np.ndarray:
    """Two-level bootstrap of a mean over seeds of per-seed example means.

    ``values`` has shape ``(n_seeds, ..., n_examples)``; each resample reweights the examples
    (``weights``, shared by everything compared, so comparisons are paired) and draws the seeds
    with replacement.  Returns shape ``(n_resamples, ...)``.
    """
    per_seed = np.einsum("s...n,bn->bs...", values, weights)
    picks = rng.integers(0, values.shape[0], size=(weights.shape[0], values.shape[0]))
    chosen = np.take_along_axis(per_seed, picks.reshape(picks.shape + (1,) * (per_seed.ndim - 2)), axis=1)
    return chosen.mean(axis=1)


def percentile_ci(samples: np.ndarray) -> tuple[float, float]:
    tail = 50 * (1 - CONFIDENCE)
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def wilson_interval(share: float, n: int) -> tuple[float, float]:
    """Wilson score interval of a share observed on ``n`` examples."""
    from scipy.stats import norm

    if n <= 0 or not np.isfinite(share):
        return float("nan"), float("nan")
    z = norm.ppf(0.5 + CONFIDENCE / 2)
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _correct(outcomes: pd.DataFrame, model: str, seeds, method: str, examples=None, draw=0) -> tuple:
    """Correctness array ``(n_seeds, n_ratios, n_examples)`` of a measure's curve, and the ratios and examples."""
    rows = outcomes[(outcomes["model"] == model) & (outcomes["method"] == method) & (outcomes["draw"] == draw)
                    & outcomes["seed"].isin(list(seeds))]
    if examples is not None:
        rows = rows[rows["example"].isin(list(examples))]
    cube = rows.pivot_table(index=["seed", "ratio"], columns="example", values="correct", aggfunc="first")
    seeds = sorted(set(rows["seed"]))
    ratios = np.sort(rows["ratio"].unique())
    cube = cube.reindex(pd.MultiIndex.from_product([seeds, ratios], names=["seed", "ratio"]))
    return cube.to_numpy(dtype=float).reshape(len(seeds), len(ratios), -1), ratios, cube.columns.to_numpy()


def _baseline(outcomes, model, seeds, examples, n_draws) -> np.ndarray:
    draws = [_correct(outcomes, model, seeds, "rand", examples, draw=d)[0] for d in range(n_draws)]
    return np.mean(draws, axis=0)


# =========================================================================== tables (a)-(e)


def converged_seeds(perf: pd.DataFrame, model: str) -> list:
    rows = perf[(perf["model"] == model) & perf["converged"].astype(bool)]
    return sorted(rows["seed"].tolist())


def performance_tables(runs) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(a) per seed, its summary per model (converged seeds; CI over examples and seeds), and the dropped runs."""
    per_seed, summary, dropped = [], [], []
    for r in runs:
        res, name = r["result"], r["plan"].name
        perf = res.performance.assign(dataset=name)
        per_seed.append(perf)
        threshold = res.metadata["convergence_threshold"]
        bad = perf[~perf["converged"].astype(bool)]
        if len(bad):
            dropped.append(bad.assign(threshold=threshold))
        rng = np.random.default_rng(0)
        n = len(res.performance["n_examples"]) and int(res.performance["n_examples"].iloc[0])
        weights = example_weights(n, N_RESAMPLES, rng)
        for model in pd.unique(perf["model"]):
            seeds = converged_seeds(perf, model)
            row = {"dataset": name, "model": model, "metric": perf["metric"].iloc[0], "n_seeds": len(seeds),
                   "n_dropped": int((~perf.loc[perf["model"] == model, "converged"].astype(bool)).sum()),
                   "n_examples": n, "value": np.nan, "low": np.nan, "high": np.nan}
            if seeds:
                correct = _correct(res.outcomes, model, seeds, "rand")[0][:, 0, :]  # ratio 0: the unmasked texts
                row["value"] = float(correct.mean())
                row["low"], row["high"] = percentile_ci(seed_resampled_means(correct, weights, rng))
                row["seed_values"] = " / ".join(f"{v:.3f}" for v in
                                               perf.loc[(perf["model"] == model) & perf["seed"].isin(seeds), "value"])
            summary.append(row)
    cols = ["dataset", "model", "seed", "metric", "value", "low", "high", "converged", "epochs", "best_epoch",
            "fit_seconds"]
    dropped = pd.concat(dropped, ignore_index=True)[["dataset", "model", "seed", "metric", "value", "threshold"]] \
        if dropped else pd.DataFrame(columns=["dataset", "model", "seed", "metric", "value", "threshold"])
    return pd.concat(per_seed, ignore_index=True)[cols], pd.DataFrame(summary), dropped


def random_masking_table(runs) -> pd.DataFrame:
    """(b) mean (min, max) over converged seeds of each model's random-masking curve."""
    parts = []
    for r in runs:
        curves = r["result"].curves
        rows = curves[(curves["method"] == "random-masking") & curves["converged"].astype(bool)]
        agg = rows.groupby(["model", "ratio"], sort=False)["value"].agg(["mean", "min", "max", "count"])
        parts.append(agg.reset_index().rename(columns={"count": "n_seeds"}).assign(dataset=r["plan"].name))
    return pd.concat(parts, ignore_index=True)[["dataset", "model", "ratio", "mean", "min", "max", "n_seeds"]]


def racu_table(runs) -> pd.DataFrame:
    """(c) the study's RACU summary (mean over converged seeds; CIs over examples and over seeds)."""
    cols = ["dataset", "model", "method", "signed", "subset", "n_examples", "n_seeds", "racu", "racu_low",
            "racu_high", "racu_seed_low", "racu_seed_high", "acu", "acu_low", "acu_high", "baseline_area",
            "reliable"]
    return pd.concat([r["result"].racu_summary.assign(dataset=r["plan"].name) for r in runs],
                     ignore_index=True)[cols]


def masf_table(runs) -> pd.DataFrame:
    """(d) share of masked test examples with MaSF p < 0.05, per ratio: mean (min, max) over converged seeds."""
    parts = []
    for r in runs:
        frame = r["result"].in_distribution
        if frame.empty:
            continue
        rows = frame[frame["converged"].astype(bool) & np.isclose(frame["threshold"].astype(float), ALPHA)]
        agg = rows.groupby(["model", "ratio"], sort=False).agg(
            mean=("proportion", "mean"), min=("proportion", "min"), max=("proportion", "max"),
            simes_p=("simes_p", "mean"), n_seeds=("seed", "nunique"), n_examples=("n_examples", "first"))
        parts.append(agg.reset_index().assign(dataset=r["plan"].name))
    if not parts:
        return pd.DataFrame()
    return pd.concat(parts, ignore_index=True)[["dataset", "model", "ratio", "mean", "min", "max", "simes_p",
                                                "n_seeds", "n_examples"]]


def support_table(runs) -> pd.DataFrame:
    """(e) top-1 supporting-fact hit rate per model and measure (converged seeds), against chance."""
    rows = []
    for r in runs:
        hits = r["support"]
        if hits is None:
            continue
        perf = r["result"].performance
        rng = np.random.default_rng(0)
        for (model, subset), part in hits.groupby(["model", "subset"], sort=False):
            seeds = converged_seeds(perf, model)
            part = part[part["seed"].isin(seeds)]
            if part.empty:
                continue
            examples = np.sort(part["example"].unique())
            weights = example_weights(len(examples), N_RESAMPLES, rng)
            for method, rows_m in part.groupby("method", sort=False):
                hit = rows_m.pivot(index="seed", columns="example", values="hit")[examples].to_numpy()
                chance = rows_m.pivot(index="seed", columns="example", values="chance")[examples].to_numpy()
                diff = seed_resampled_means(hit - chance, weights, rng)
                boot = seed_resampled_means(hit, weights, rng)
                low, high = percentile_ci(boot)
                d_low, d_high = percentile_ci(diff)
                rows.append({"dataset": r["plan"].name, "model": model, "subset": subset, "method": method,
                             "n_examples": len(examples), "n_seeds": len(seeds), "hit_rate": float(hit.mean()),
                             "low": low, "high": high, "chance": float(chance.mean()),
                             "above_chance": float((hit - chance).mean()), "above_low": d_low,
                             "above_high": d_high})
    return pd.DataFrame(rows, columns=SUPPORT_COLUMNS)


def erasure_table(runs) -> pd.DataFrame:
    """(f) AOPC of comprehensiveness and sufficiency per model and measure (converged seeds), with validity.

    The study's erasure stage (:func:`fmmlearn.study.erasure_by_model`): removal by the mask token, each
    number flagged valid when MaSF finds at most 10 % of its erased inputs out of distribution.
    """
    from fmmlearn.study import erasure_by_model

    parts = []
    for r in runs:
        rows = erasure_by_model(r["result"])
        if rows.empty:
            continue
        parts.append(rows[rows["aopc"]].assign(dataset=r["plan"].name))
    if not parts:
        return pd.DataFrame(columns=ERASURE_COLUMNS)
    return pd.concat(parts, ignore_index=True)[ERASURE_COLUMNS]


ERASURE_COLUMNS = ["dataset", "model", "method", "mode", "n_examples", "n_seeds", "mean", "ci_low", "ci_high",
                   "ood_share", "valid"]


SUPPORT_COLUMNS = ["dataset", "model", "subset", "method", "n_examples", "n_seeds", "hit_rate", "low", "high",
                   "chance", "above_chance", "above_low", "above_high"]


# =========================================================================== claims


#: Margins of the verdict rules (command-line options of the same names).
MARGINS = {"performance_margin": 0.05, "ood_margin": 0.05}


def noninferiority_verdict(low: float, high: float, margin: float) -> str:
    """Claim 1 on one dataset, from the CI of (masked - plain) performance: a non-inferiority rule.

    agrees: the whole CI lies above ``-margin``; disagrees: it lies below ``-margin``; else inconclusive.
    """
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive"
    if low >= -margin:
        return "agrees"
    if high < -margin:
        return "disagrees"
    return "inconclusive"


def ood_state(low: float, high: float, zone: float) -> str:
    """``in-distribution`` if the flagged share's CI lies at or below ``zone``, ``out-of-distribution`` above it."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "unknown"
    if high <= zone:
        return "in-distribution"
    if low > zone:
        return "out-of-distribution"
    return "unclear"


def in_distribution_verdict(plain: str, masked: str) -> str:
    """Claim 2 on one dataset: masked inputs are in-distribution for the masked model and not for the plain one."""
    if plain == "in-distribution" or masked == "out-of-distribution":
        return "disagrees"
    if plain == "out-of-distribution" and masked == "in-distribution":
        return "agrees"
    return "inconclusive"


def compare(low: float, high: float) -> str:
    """``"first"`` if a CI of (first - second) lies above 0, ``"second"`` below 0, else ``"tie"``."""
    if low > 0:
        return "first"
    if high < 0:
        return "second"
    return "tie"


def masking_measures_verdict(outcomes: dict) -> str:
    """Claim 3 on one model: ``outcomes`` maps each other measure to its comparisons with the masking-based ones.

    Each value is a list of :func:`compare` results of (masking-based - other).  agrees: every other
    measure is beaten by some masking-based measure; disagrees: some other measure beats every
    masking-based one it was compared with; else inconclusive.
    """
    if not outcomes or any(not v for v in outcomes.values()):
        return "inconclusive"
    if any(all(c == "second" for c in v) for v in outcomes.values()):
        return "disagrees"
    if all(any(c == "first" for c in v) for v in outcomes.values()):
        return "agrees"
    return "inconclusive"


def signed_verdict(results: list) -> str:
    """Claim 4 over all (signed - abs) comparisons: "often better" as at least half of them, never worse."""
    n, signed, unsigned = len(results), results.count("first"), results.count("second")
    if n == 0:
        return "inconclusive"
    if unsigned == 0 and 2 * signed >= n:
        return "agrees"
    if 2 * unsigned >= n or (signed == 0 and unsigned > 0):
        return "disagrees"
    return "inconclusive"


def overall_verdict(verdicts: list) -> str:
    """Across datasets: agrees if all agree; disagrees if some disagree and none agrees; else inconclusive."""
    if verdicts and all(v == "agrees" for v in verdicts):
        return "agrees"
    if "disagrees" in verdicts and "agrees" not in verdicts:
        return "disagrees"
    return "inconclusive"


def pairwise_table(runs, models=("masked", "plain")) -> pd.DataFrame:
    """Paired comparisons of measures: the difference of ACU (first - second) on their common test examples.

    ACU(A) - ACU(B) = the area between B's and A's curves (the ``rand`` baseline cancels), so it
    compares two measures without RACU's noisy denominator; ``delta_racu`` divides it by the
    baseline area of the same examples.  The CI is a two-level bootstrap: test examples (the same
    for both measures) and seeds (the same fitted models for both).
    """
    rows = []
    for r in runs:
        res = r["result"]
        methods = [m for m in res.racu_summary["method"].unique()]
        masking = [m for m in methods if family(m) in MASKING_FAMILIES]
        others = [m for m in methods if family(m) not in MASKING_FAMILIES]
        pairs = [(m, o, "claim 3") for m in masking for o in others]
        pairs += [(m, m.replace("-sign", "-abs"), "claim 4") for m in methods
                  if m.endswith("-sign") and m.replace("-sign", "-abs") in methods]
        n_draws = int(res.metadata["study"]["n_baseline"])
        for model in models:
            seeds = converged_seeds(res.performance, model)
            if not seeds:
                continue
            rng = np.random.default_rng(0)
            for first, second, claim in pairs:
                ex_a = set(res.outcomes.loc[(res.outcomes["method"] == first), "example"])
                ex_b = set(res.outcomes.loc[(res.outcomes["method"] == second), "example"])
                common = np.sort(list(ex_a & ex_b))
                row = {"dataset": r["plan"].name, "model": model, "claim": claim, "first": first, "second": second,
                       "n_examples": len(common), "n_seeds": len(seeds)}
                if len(common) < MIN_COMMON:
                    rows.append({**row, "result": "not compared"})
                    continue
                a, grid, _ = _correct(res.outcomes, model, seeds, first, common)
                b = _correct(res.outcomes, model, seeds, second, common)[0]
                base = _baseline(res.outcomes, model, seeds, common, n_draws)
                weights = example_weights(len(common), N_RESAMPLES, rng)
                curves = seed_resampled_means(b - a, weights, rng)         # (B, ratios): curve(second) - curve(first)
                delta = np.trapezoid(curves, x=grid, axis=-1)
                point = float(np.trapezoid((b - a).mean(axis=(0, 2)), x=grid))
                base_curve = base.mean(axis=(0, 2))
                area = float(np.trapezoid(base_curve - base_curve[-1], x=grid))
                low, high = percentile_ci(delta)
                rows.append({**row, "delta_acu": point, "low": low, "high": high,
                             "delta_racu": point / area if area > 0 else np.nan, "result": compare(low, high)})
    return pd.DataFrame(rows)


def claims_table(perf_summary, masf, pairwise, margins=MARGINS) -> pd.DataFrame:
    """The four claims, per dataset and overall, each verdict computed from the tables by the rules above.

    1. *Masked fine-tuning keeps the unmasked performance*: CI of masked - plain (two-level bootstrap
       over test examples and seeds, paired on examples) vs ``-performance_margin``
       (:func:`noninferiority_verdict`).
    2. *Masked inputs are in-distribution only after masked fine-tuning*: the share of test examples
       MaSF flags at p < 0.05, averaged over the masking ratios strictly between 0 and 1 and the
       converged seeds, with a Wilson interval on the number of test examples (conservative: the
       same examples recur at every ratio and seed); a model is in-distribution when the interval
       lies at or below ``0.05 + ood_margin``, out of it when above (:func:`in_distribution_verdict`).
    3. *Masking-based measures (leave-one-out, beam search) are the most faithful*, on the masked
       model: paired ACU differences (:func:`pairwise_table`, :func:`masking_measures_verdict`).
    4. *Signed variants are often better*, on the masked model: every ``X-sign`` vs ``X-abs`` pair
       (:func:`signed_verdict`).
    """
    rows = []
    # ---- claim 1
    c1 = []
    for name, part in perf_summary.groupby("dataset", sort=False):
        by = part.set_index("model")
        if not {"plain", "masked"} <= set(by.index):
            continue
        diff, low, high, verdict = np.nan, np.nan, np.nan, "inconclusive"
        note = ""
        if by.loc["plain", "n_seeds"] and by.loc["masked", "n_seeds"]:
            diff, low, high = by.loc["masked", "diff"], by.loc["masked", "diff_low"], by.loc["masked", "diff_high"]
            verdict = noninferiority_verdict(low, high, margins["performance_margin"])
        else:
            note = "no converged run of a model"
        c1.append(verdict)
        rows.append({"claim": 1, "dataset": name, "statistic": "masked - plain unmasked accuracy", "estimate": diff,
                     "low": low, "high": high,
                     "rule": f"agrees if low >= -{margins['performance_margin']:g}; disagrees if high < "
                             f"-{margins['performance_margin']:g}", "verdict": verdict, "note": note})
    rows.append(_overall(1, c1))
    # ---- claim 2
    c2, zone = [], ALPHA + margins["ood_margin"]
    for name, part in (masf.groupby("dataset", sort=False) if len(masf) else []):
        inner = part[(part["ratio"] > 0) & (part["ratio"] < 1)]
        states, numbers = {}, []
        for model in ("plain", "masked"):
            rows_m = inner[inner["model"] == model]
            if rows_m.empty:
                states[model] = "unknown"
                numbers.append(f"{model}: no converged run")
                continue
            share = float(rows_m["mean"].mean())
            low, high = wilson_interval(share, int(rows_m["n_examples"].iloc[0]))
            states[model] = ood_state(low, high, zone)
            numbers.append(f"{model} {share:.1%} [{low:.1%}, {high:.1%}] ({states[model]})")
        verdict = in_distribution_verdict(states["plain"], states["masked"])
        c2.append(verdict)
        plain_rows = inner[inner["model"] == "plain"]
        masked_rows = inner[inner["model"] == "masked"]
        rows.append({"claim": 2, "dataset": name, "statistic": "share flagged at p<0.05, ratios 10-90 %",
                     "estimate": float(masked_rows["mean"].mean()) if len(masked_rows) else np.nan,
                     "low": np.nan, "high": np.nan,
                     "plain_estimate": float(plain_rows["mean"].mean()) if len(plain_rows) else np.nan,
                     "rule": f"in-distribution if CI <= {zone:g}, out of distribution if CI > {zone:g}; agrees if "
                             "plain out and masked in; disagrees if plain in or masked out",
                     "verdict": verdict, "note": "; ".join(numbers)})
    rows.append(_overall(2, c2))
    # ---- claim 3 (masked model)
    c3 = []
    p3 = pairwise[(pairwise["claim"] == "claim 3") & (pairwise["model"] == "masked")] if len(pairwise) else pairwise
    for name, part in (p3.groupby("dataset", sort=False) if len(p3) else []):
        compared = part[part["result"] != "not compared"]
        outcomes = {o: compared.loc[compared["second"] == o, "result"].tolist() for o in part["second"].unique()}
        verdict = masking_measures_verdict(outcomes)
        c3.append(verdict)
        notes = []
        for other, results in outcomes.items():
            wins = compared[(compared["second"] == other)]
            text = ", ".join(f"{w.first} {w.delta_acu:+.3f} [{w.low:+.3f}, {w.high:+.3f}]" for w in
                             wins.itertuples())
            notes.append(f"vs {other}: {text or 'not compared'}")
        rows.append({"claim": 3, "dataset": name, "statistic": "ACU(masking-based) - ACU(other), masked model",
                     "estimate": np.nan, "low": np.nan, "high": np.nan,
                     "rule": "agrees if every other measure is beaten (CI > 0) by some masking-based one; disagrees "
                             "if one beats (CI < 0) every masking-based one",
                     "verdict": verdict, "note": "; ".join(notes)})
    rows.append(_overall(3, c3))
    # ---- claim 4 (masked model)
    p4 = pairwise[(pairwise["claim"] == "claim 4") & (pairwise["model"] == "masked")] if len(pairwise) else pairwise
    p4 = p4[p4["result"] != "not compared"] if len(p4) else p4
    results = p4["result"].tolist() if len(p4) else []
    for w in (p4.itertuples() if len(p4) else []):
        rows.append({"claim": 4, "dataset": w.dataset, "statistic": f"ACU({w.first}) - ACU({w.second}), masked model",
                     "estimate": w.delta_acu, "low": w.low, "high": w.high,
                     "rule": "signed better if CI > 0, abs better if CI < 0",
                     "verdict": {"first": "signed better", "second": "abs better", "tie": "tie"}[w.result], "note": ""})
    rows.append({"claim": 4, "dataset": "overall", "statistic": f"{results.count('first')} of {len(results)} "
                 f"comparisons signed better, {results.count('second')} abs better",
                 "estimate": np.nan, "low": np.nan, "high": np.nan,
                 "rule": "agrees if signed better in at least half and abs never better; disagrees if abs better "
                         "in at least half, or abs better somewhere and signed nowhere",
                 "verdict": signed_verdict(results), "note": ""})
    frame = pd.DataFrame(rows)
    frame.insert(1, "text", frame["claim"].map(CLAIMS))
    return frame


CLAIMS = {1: "masked fine-tuning keeps the unmasked performance",
          2: "masked inputs are in-distribution only after masked fine-tuning",
          3: "masking-based measures (leave-one-out, beam search) are the most faithful",
          4: "signed variants are often better"}


def _overall(claim: int, verdicts: list) -> dict:
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("agrees", "disagrees", "inconclusive") if v in verdicts)
    return {"claim": claim, "dataset": "overall", "statistic": f"{len(verdicts)} dataset(s): {counts or 'none'}",
            "estimate": np.nan, "low": np.nan, "high": np.nan,
            "rule": "agrees if every dataset agrees; disagrees if some disagree and none agrees",
            "verdict": overall_verdict(verdicts), "note": ""}


def add_differences(perf_summary: pd.DataFrame, runs) -> pd.DataFrame:
    """Masked - plain unmasked accuracy per dataset, paired on test examples, seeds resampled per model."""
    out = perf_summary.copy()
    out[["diff", "diff_low", "diff_high"]] = np.nan
    for r in runs:
        res, name = r["result"], r["plan"].name
        seeds = {m: converged_seeds(res.performance, m) for m in ("plain", "masked")}
        if not all(seeds.values()):
            continue
        correct = {m: _correct(res.outcomes, m, seeds[m], "rand")[0][:, 0, :] for m in seeds}
        rng = np.random.default_rng(1)
        weights = example_weights(correct["plain"].shape[1], N_RESAMPLES, rng)
        boot = seed_resampled_means(correct["masked"], weights, rng) - seed_resampled_means(correct["plain"],
                                                                                            weights, rng)
        low, high = percentile_ci(boot)
        where = (out["dataset"] == name) & (out["model"] == "masked")
        out.loc[where, ["diff", "diff_low", "diff_high"]] = [correct["masked"].mean() - correct["plain"].mean(),
                                                              low, high]
    return out


N_RESAMPLES = 4000
MIN_COMMON = 5  # fewer common test examples than this: two measures are not compared


# =========================================================================== figures


def figures(runs, tables, out: Path) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fmmlearn.plotting import plot_in_distribution, plot_racu, plot_random_masking

    written = []
    n = len(runs)

    def panels(name, draw, height=3.4):
        fig, axes = plt.subplots(1, n, figsize=(4.6 * n, height), squeeze=False)
        for ax, r in zip(axes[0], runs):
            try:
                draw(r, ax)
            except ValueError as exc:  # e.g. no converged run of this dataset
                ax.set_title(r["plan"].title)
                ax.text(0.5, 0.5, str(exc), ha="center", va="center", wrap=True, transform=ax.transAxes)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)

    panels("random_masking", lambda r, ax: plot_random_masking(r["result"].curves, ax=ax, title=r["plan"].title))
    def racu(r, ax):
        summary = r["result"].racu_summary
        if not summary["n_seeds"].gt(0).any():
            raise ValueError("no converged run")
        plot_racu(summary, ax=ax, title=r["plan"].title)

    panels("racu", racu, height=4.2)

    def acu(r, ax):  # ACU: no noisy denominator, comparable across the measures' subsets of texts
        summary = r["result"].racu_summary
        if not summary["n_seeds"].gt(0).any():
            raise ValueError("no converged run")
        plot_racu(summary, ax=ax, value="acu", title=r["plan"].title)

    panels("acu", acu, height=4.2)

    def masf(r, ax):
        frame = r["result"].in_distribution
        frame = frame[frame["converged"].astype(bool)]
        if frame.empty:
            raise ValueError("no converged run")
        plot_in_distribution(frame, ax=ax, statistic="proportion", threshold=ALPHA, title=r["plan"].title)

    if all(not r["result"].in_distribution.empty for r in runs):
        panels("masf", masf)
    support = tables["supporting_facts"]
    if not len(support) and any(r["support"] is not None for r in runs):  # bAbI ran, but no run converged
        fig, ax = plt.subplots(figsize=(5.5, 2.0))
        ax.axis("off")
        ax.text(0.5, 0.5, "supporting facts: no converged bAbI run\n(every run's metric is at most the threshold)",
                ha="center", va="center", transform=ax.transAxes)
        path = out / "supporting_facts.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    elif len(support):
        groups = list(support.groupby(["dataset", "subset"], sort=False))
        fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 3.6), squeeze=False)
        for ax, ((dataset, subset), part) in zip(axes[0], groups):
            methods = list(pd.unique(part["method"]))
            width = 0.8 / max(1, part["model"].nunique())
            for k, (model, rows) in enumerate(part.groupby("model", sort=False)):
                rows = rows.set_index("method").reindex(methods)
                x = np.arange(len(methods)) + k * width
                ax.bar(x, rows["hit_rate"], width, label=model,
                       yerr=[rows["hit_rate"] - rows["low"], rows["high"] - rows["hit_rate"]], capsize=2)
            ax.axhline(part["chance"].mean(), color="k", ls="--", lw=1, label="chance")
            ax.set_xticks(np.arange(len(methods)) + width * (part["model"].nunique() - 1) / 2, methods,
                          rotation=30, ha="right")
            ax.set_ylim(0, 1)
            ax.set_ylabel("top token in a supporting fact")
            ax.set_title(f"{dataset}: {subset} test paragraphs")
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / "supporting_facts.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


# =========================================================================== markdown


def _f(value, digits=3) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "-"
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}f}"
    return str(value)


def _ci(low, high, digits=3) -> str:
    """``[low, high]``; a bound beyond +-1000 (a RACU whose denominator reaches 0) prints as ``-inf``/``inf``."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "-"
    bound = lambda v: ("inf" if v > 0 else "-inf") if abs(v) > 1e3 else f"{v:.{digits}f}"  # noqa: E731
    return f"[{bound(low)}, {bound(high)}]"


def md_table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown_blocks(report: dict, tables: dict, runs) -> dict:
    """The generated parts of docs/reproduction.md, by marker name."""
    blocks = {}
    meta = report
    info = meta["machine"]
    precision = meta["precision"]
    blocks["setup"] = "\n".join([
        f"Command: `{meta['command']}` ({meta['wall_seconds'] / 60:.1f} min wall, started {meta['started']}; "
        f"load average {meta['load_average'][0]:.1f} at the start, {meta['load_average'][1]:.1f} at the end).",
        "", machine_line(info, f"{precision['inference']} forward passes; measures "
                               + ", ".join(f"{m} {p}" for m, p in precision["measures"].items())),
        "", "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".", "",
        md_table(["dataset", "train / valid / test", "epochs", "learning rate", "max_length", "test texts per measure"],
                 [[p["title"], f"{p['n_train']} / {p['n_valid']} / {p['n_test']}", p["epochs"], p["learning_rate"],
                   p["max_length"] or "model's", ", ".join(f"{m} {v['n_examples']} ({v['name']})"
                                                           for m, v in p["subsets"].items())]
                  for p in meta["datasets"].values()]),
        "", f"Seeds {', '.join(map(str, meta['seeds']))}; ratio grid step {meta['ratio_step']:g}; "
            f"{meta['n_baseline']} `rand` baseline draws; bootstrap {meta['n_bootstrap']} resamples (study CIs), "
            f"{N_RESAMPLES} (this script's paired CIs).",
    ])
    fb = meta["facebook"]
    blocks["facebook"] = (f"Facebook's bAbI-1: **{'available' if fb['available'] else 'not available'}** on this "
                          f"machine ({fb['reason']}). To run it online: `{fb['command']}`."
                          if fb["available"] is not True else
                          f"Facebook's bAbI-1 is in the local cache; it ran only if `--datasets` named "
                          f"`babi-1-facebook`. Command: `{fb['command']}`.")
    blocks["runtime"] = md_table(
        ["table", "stages", "seconds (this run)", "seconds (when computed)", "cached jobs"],
        [[t, s["stages"], f"{s['seconds']:.0f}", f"{s['compute_seconds']:.0f}", f"{s['cached']} of {s['jobs']}"]
         for t, s in meta["runtime"].items()]) + f"\n\nAll tables: `{meta['command']}`."
    perf, summary = tables["performance"], tables["performance_summary"]
    blocks["performance"] = md_table(
        ["dataset", "model", "accuracy (mean of converged seeds)", "95% CI (examples x seeds)", "per seed",
         "masked - plain [95% CI]", "dropped runs"],
        [[r.dataset, r.model, _f(r.value), _ci(r.low, r.high), getattr(r, "seed_values", "-") or "-",
          f"{_f(r.diff, 3)} {_ci(r.diff_low, r.diff_high)}" if r.model == "masked" else "", r.n_dropped]
         for r in summary.itertuples()])
    dropped = tables["dropped"]
    blocks["dropped"] = ("No run was dropped by the convergence filter." if dropped.empty else
                         "Dropped by the paper's convergence filter (test metric at or below the threshold), left "
                         "out of every mean:\n\n" + md_table(
                             ["dataset", "model", "seed", "metric", "value", "threshold"],
                             [[r.dataset, r.model, r.seed, r.metric, _f(r.value), _f(r.threshold, 2)]
                              for r in dropped.itertuples()]))
    rm = tables["random_masking"]
    ratios = sorted(rm["ratio"].unique())
    shown = [x for x in ratios if round(x * 10) % 2 == 0] if len(ratios) > 6 else ratios
    blocks["random-masking"] = md_table(
        ["dataset", "model", *[f"{x:.0%}" for x in shown]],
        [[d, m, *[_f(part.set_index("ratio").loc[x, "mean"], 2) if x in set(part["ratio"]) else "-" for x in shown]]
         for (d, m), part in rm.groupby(["dataset", "model"], sort=False)]) + \
        "\n\nMean over converged seeds of the accuracy when a share of the tokens is masked at random (both segments)."
    racu = tables["racu"]
    blocks["racu"] = md_table(
        ["dataset", "model", "measure", "test texts", "RACU", "95% CI (examples)", "95% CI (seeds)", "ACU",
         "reliable"],
        [[r.dataset, r.model, r.method, f"{r.n_examples} ({r.subset})", _f(r.racu, 2), _ci(r.racu_low, r.racu_high, 2),
          _ci(r.racu_seed_low, r.racu_seed_high, 2), _f(r.acu, 3), "yes" if r.reliable else "no"]
         for r in racu.itertuples()])
    masf = tables["masf"]
    if len(masf):
        ratios = sorted(masf["ratio"].unique())
        shown = [x for x in ratios if round(x * 10) % 2 == 0] if len(ratios) > 6 else ratios
        blocks["masf"] = md_table(
            ["dataset", "model", *[f"{x:.0%}" for x in shown]],
            [[d, m, *[_f(part.set_index("ratio").loc[x, "mean"], 2) if x in set(part["ratio"]) else "-"
                      for x in shown]]
             for (d, m), part in masf.groupby(["dataset", "model"], sort=False)]) + \
            "\n\nShare of `rand`-masked test examples with MaSF p < 0.05 (calibrated mode; 0.05 expected for " \
            "in-distribution inputs), mean over converged seeds."
    else:
        blocks["masf"] = "The in-distribution stage did not run."
    support = tables["supporting_facts"]
    blocks["supporting-facts"] = "No bAbI dataset ran." if support.empty else md_table(
        ["dataset", "test texts", "model", "measure", "top-1 hit rate [95% CI]", "chance", "above chance [95% CI]"],
        [[r.dataset, f"{r.n_examples} {r.subset}", r.model, r.method, f"{r.hit_rate:.2f} {_ci(r.low, r.high, 2)}",
          f"{r.chance:.2f}", f"{r.above_chance:+.2f} {_ci(r.above_low, r.above_high, 2)}"]
         for r in support.itertuples()])
    erasure = tables["erasure"]
    blocks["erasure"] = "The erasure stage did not run." if erasure.empty else md_table(
        ["dataset", "model", "measure", "mode", "test texts", "AOPC [95% CI]", "flagged by MaSF", "valid"],
        [[r.dataset, r.model, r.method, r.mode, int(r.n_examples), f"{_f(r.mean)} {_ci(r.ci_low, r.ci_high)}",
          "-" if pd.isna(r.ood_share) else f"{r.ood_share:.1%}",
          "not checked" if pd.isna(r.valid) else ("**valid**" if r.valid else "not valid")]
         for r in erasure.itertuples()]) + (
        "\n\nAOPC over k = 10 %, 20 %, 50 % of the eligible tokens (removal by the mask token, gold label as "
        "target), mean over converged seeds; \"flagged\" is the share of erased inputs with MaSF p < 0.05, and a "
        "number is valid when that share is at most 10 % for every k and seed (docs/erasure.md).")
    pairwise = tables["pairwise"]
    blocks["pairwise"] = "No pair of measures compared." if pairwise.empty else md_table(
        ["dataset", "model", "claim", "first - second", "common texts", "ACU difference [95% CI]", "RACU difference",
         "result"],
        [[r.dataset, r.model, r.claim, f"{r.first} - {r.second}", r.n_examples,
          f"{_f(getattr(r, 'delta_acu', np.nan))} {_ci(getattr(r, 'low', np.nan), getattr(r, 'high', np.nan))}",
          _f(getattr(r, "delta_racu", np.nan), 2),
          {"first": "first better", "second": "second better"}.get(r.result, r.result)]
         for r in pairwise.itertuples()])
    claims = tables["claims"]
    blocks["claims"] = md_table(
        ["claim", "dataset", "statistic", "estimate [95% CI]", "verdict", "numbers"],
        [[f"{r.claim}. {r.text}" if r.dataset == "overall" else str(r.claim), r.dataset, r.statistic,
          f"{_f(r.estimate)} {_ci(r.low, r.high)}" if np.isfinite(r.estimate) else "-",
          f"**{r.verdict}**", r.note or "-"]
         for r in claims.itertuples()])
    return blocks


def update_doc(path: Path, blocks: dict) -> list:
    """Replace the text between ``<!-- reproduce:NAME -->`` and ``<!-- /reproduce:NAME -->`` in ``path``."""
    text = path.read_text()
    missing = []
    for name, body in blocks.items():
        pattern = re.compile(rf"(<!-- reproduce:{re.escape(name)} -->\n).*?(<!-- /reproduce:{re.escape(name)} -->)",
                             re.S)
        text, n = pattern.subn(lambda m, body=body: m.group(1) + body.rstrip() + "\n" + m.group(2), text)
        if n == 0:
            missing.append(name)
    path.write_text(text)
    return missing


# =========================================================================== main


STAGE_TABLES = {"(a) performance": ("fit", "performance"), "(b) random masking": ("random masking",),
                "(c) RACU": ("faithfulness",), "(d) MaSF": ("in-distribution",), "(f) erasure": ("erasure",)}


def runtime(runs) -> dict:
    """Seconds per table: its study stages summed over the datasets (and (e), timed here)."""
    out = {}
    timings = pd.concat([r["result"].timings for r in runs], ignore_index=True)
    for table, stages in STAGE_TABLES.items():
        rows = timings[timings["stage"].isin(stages)]
        out[table] = {"stages": ", ".join(stages), "seconds": float(rows["seconds"].sum()),
                      "compute_seconds": float(rows["compute_seconds"].fillna(rows["seconds"]).sum()),
                      "cached": int(rows["cached"].sum()), "jobs": int(len(rows))}
    babi = [r for r in runs if r["support"] is not None]
    if babi:
        out["(e) supporting facts"] = {
            "stages": "explain at 0 % masking", "seconds": float(sum(r["support_seconds"] for r in babi)),
            "compute_seconds": float(sum(r["support"]["seconds"].sum() for r in babi)),
            "cached": int(sum(r["support_cached"] for r in babi)), "jobs": len(babi)}
    return out


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=sorted(PLANS), default=list(DEFAULT_DATASETS))
    parser.add_argument("--measures", nargs="+", default=list(DEFAULT_MEASURES + BABI_ONLY_MEASURES),
                        help="importance measures (beam search runs on bAbI only; int-grad-* with variant='reference')")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="fine-tuning seeds")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every split size and test subset")
    parser.add_argument("--quick", action="store_true", help="toy sizes, 1 epoch, coarse grid (a smoke test)")
    parser.add_argument("--n-train", type=int, help="training examples of every dataset")
    parser.add_argument("--n-valid", type=int, help="validation examples (epoch selection, MaSF calibration)")
    parser.add_argument("--n-test", type=int, help="test examples of every dataset")
    parser.add_argument("--caps", nargs="+", default=[], metavar="FAMILY=N",
                        help="test examples per measure family: gradient, int-grad, loo, beam (e.g. loo=40)")
    parser.add_argument("--epochs", type=int, help="fine-tuning epochs of every dataset")
    parser.add_argument("--learning-rate", type=float, help="learning rate of every dataset")
    parser.add_argument("--babi-max-sentences", type=int, default=None,
                        help=f"keep bAbI paragraphs of at most this many sentences (default {_BABI['max_sentences']}; "
                             "10 = the whole task)")
    parser.add_argument("--ratio-step", type=float, default=None, help="step of the masking-ratio grid (0.1)")
    parser.add_argument("--n-baseline", type=int, default=3, help="rand baseline draws of RACU")
    parser.add_argument("--n-bootstrap", type=int, default=2000, help="bootstrap resamples of the study's CIs")
    parser.add_argument("--model", default="minilm", help="base model (bundled name or directory)")
    parser.add_argument("--precision", default="auto", help="FaithfulTextClassifier precision")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the data splits and subsets")
    parser.add_argument("--performance-margin", type=float, default=MARGINS["performance_margin"],
                        help="claim 1: largest accuracy loss that still counts as keeping the performance")
    parser.add_argument("--ood-margin", type=float, default=MARGINS["ood_margin"],
                        help="claim 2: flagged share above 0.05 that still counts as in-distribution")
    parser.add_argument("--output", default=None,
                        help=f"results directory (default {RESULTS_DIR.relative_to(Path.cwd()) if RESULTS_DIR.is_relative_to(Path.cwd()) else RESULTS_DIR}; "
                             "with --quick a scratch directory)")
    parser.add_argument("--cache-dir", default=None,
                        help="stage cache (fitted models, curves); default ~/.cache/fmmlearn-reproduce")
    parser.add_argument("--doc", default=None, help="also refresh the generated blocks of this markdown file")
    parser.add_argument("-v", "--verbose", type=int, default=1)
    args = parser.parse_args(argv)
    known = ", ".join(("gradient", "int-grad", "loo", "beam"))
    caps = {}
    for item in args.caps:
        key, _, value = item.partition("=")
        if key not in known.split(", ") or not value.isdigit() or int(value) < 2:
            parser.error(f"--caps: expected FAMILY=N with FAMILY one of {known} and N >= 2, got {item!r}")
        caps[key] = int(value)
    args.caps = caps
    if args.scale <= 0:
        parser.error(f"--scale must be positive, got {args.scale}")
    if len(set(args.seeds)) != len(args.seeds) or any(s < 0 for s in args.seeds):
        parser.error(f"--seeds must be distinct non-negative integers, got {args.seeds}")
    if args.ratio_step is None:
        args.ratio_step = 0.25 if args.quick else 0.1
    if not (0 < args.ratio_step <= 0.5) or abs(1 / args.ratio_step - round(1 / args.ratio_step)) > 1e-9:
        parser.error(f"--ratio-step must divide 1 (0.1, 0.2, 0.25, ...), got {args.ratio_step}")
    from fmmlearn.importance import get_measure

    for m in args.measures:
        try:
            get_measure(m)
        except ValueError as exc:
            parser.error(f"--measures: {exc}")
    if args.output is None:
        args.output = tempfile.mkdtemp(prefix="fmmlearn-reproduce-quick-") if args.quick else str(RESULTS_DIR)
    if args.cache_dir is None:
        args.cache_dir = str(Path.home() / ".cache" / "fmmlearn-reproduce")
    return args


def plans_for(args) -> list:
    plans = []
    for name in args.datasets:
        plan = PLANS[name].scaled(args.scale) if args.scale != 1 else PLANS[name]
        if args.quick:
            plan = dataclasses.replace(plan, **{**QUICK, "caps": {k: v for k, v in QUICK["caps"].items()
                                                                   if k in plan.caps}})
        changes = {k: getattr(args, k) for k in ("n_train", "n_valid", "n_test") if getattr(args, k) is not None}
        if args.epochs is not None:
            changes["epochs"] = args.epochs
        if args.learning_rate is not None:
            changes["learning_rate"] = args.learning_rate
        if args.babi_max_sentences is not None and plan.is_babi:
            changes["max_sentences"] = args.babi_max_sentences
        caps = {**plan.caps, **{k: v for k, v in args.caps.items() if k in plan.caps or k != "beam"}}
        if not plan.is_babi:
            caps.pop("beam", None)
        plans.append(dataclasses.replace(plan, caps=caps, **changes))
    return plans


def command_line(argv) -> str:
    return "python benchmarks/reproduce.py" + ("" if not argv else " " + shlex.join(argv))


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    margins = {"performance_margin": args.performance_margin, "ood_margin": args.ood_margin}
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    info = machine()
    started, t0, load_start = time.strftime("%Y-%m-%dT%H:%M:%S%z"), time.perf_counter(), os.getloadavg()[0]
    cmd = command_line(argv)
    print(f"{cmd}\n" + machine_line(info, f"precision={args.precision!r} (chosen by measurement)"), flush=True)
    facebook = facebook_status()
    plans = plans_for(args)
    runs = []
    for plan in plans:
        if plan.babi_source == "facebook" and facebook["available"] is False:
            print(f"\n== {plan.title}: skipped, {facebook['reason']}\n   online: {facebook['command']}", flush=True)
            continue
        runs.append(run_dataset(plan, args))
    if not runs:
        raise SystemExit("no dataset ran")
    per_seed, summary, dropped = performance_tables(runs)
    summary = add_differences(summary, runs)
    tables = {"performance": per_seed, "performance_summary": summary, "dropped": dropped,
              "random_masking": random_masking_table(runs), "racu": racu_table(runs), "masf": masf_table(runs),
              "supporting_facts": support_table(runs), "erasure": erasure_table(runs)}
    tables["pairwise"] = pairwise_table(runs)
    tables["claims"] = claims_table(summary, tables["masf"], tables["pairwise"], margins)
    first = runs[0]["result"].metadata
    report = {
        "command": cmd, "started": started, "wall_seconds": time.perf_counter() - t0,
        "load_average": [load_start, os.getloadavg()[0]], "machine": info,
        "versions": first["machine"]["versions"], "precision": first["precision"],
        "seeds": list(args.seeds), "ratio_step": args.ratio_step, "n_baseline": args.n_baseline,
        "n_bootstrap": args.n_bootstrap, "model": args.model, "margins": margins, "facebook": facebook,
        "datasets": {r["plan"].name: {**{k: v for k, v in dataclasses.asdict(r["plan"]).items()},
                                      "sizes": r["result"].metadata["data"]["sizes"],
                                      "subsets": r["result"].metadata["subsets"],
                                      "truncated_test_examples": r["result"].metadata["data"]["truncated_test_examples"],
                                      "precision": r["result"].metadata["precision"],
                                      "seconds": r["seconds"]} for r in runs},
        "runtime": runtime(runs),
    }
    for name, frame in tables.items():
        frame.to_csv(out / f"{name}.csv", index=False)
    report["claims"] = tables["claims"].replace({np.nan: None}).to_dict("records")
    report["figures"] = [p.name for p in figures(runs, tables, out)]
    blocks = markdown_blocks(report, tables, runs)
    (out / "reproduce.json").write_text(json.dumps(report, indent=2, default=str))
    body = "\n\n".join(f"## {name}\n\n{text}" for name, text in blocks.items())
    (out / "reproduce.md").write_text(f"# Reproduction: generated tables\n\n{body}\n")
    print("\n" + blocks["setup"] + "\n\n" + blocks["runtime"] + "\n\n" + blocks["claims"], flush=True)
    if args.doc:
        missing = update_doc(Path(args.doc), blocks)
        print(f"updated {args.doc}" + (f" (no markers for {', '.join(missing)})" if missing else ""))
    print(f"\nwrote {out}")
    return {"output": out, "tables": tables, "report": report, "runs": runs}


if __name__ == "__main__":
    main()

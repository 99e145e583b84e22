"""Do the claims of Madsen, Reddy & Chandar (ICML 2024) hold with fmmlearn?  A reproduction on this machine.

On bundled tweets and BBC news (and, with ``--datasets``, generated bAbI-1 with distractors), the
bundled MiniLM is fine-tuned plainly (``max_masking_ratio=0``) and with masking (``1.0``) over several
seeds, each dataset one :class:`fmmlearn.study.FaithfulnessStudy`.  Every verdict is the study's:
paired comparisons with equivalence margins, the in-distribution test with its known null share, its
negative control and its measured power, convergence against the best input-blind predictor -- all
judged by the rules in ``fmmlearn/study/verdict_rules.json``, whose hash and last commit the report
records (and whether the file changed after the run started).  The script adds the four claims, the
tables and the prose of ``docs/reproduction.md``, every number of which it writes itself.

Usage::

    python benchmarks/reproduce.py --doc docs/reproduction.md   # the default: < 90 minutes on 2 CPU cores
    python benchmarks/reproduce.py --quick                      # minutes, toy sizes, a scratch directory
    python benchmarks/reproduce.py --redraw --doc docs/reproduction.md   # the tables again, from the last run
    python benchmarks/reproduce.py --scale 2 --seeds 0 1 2 --device cuda

Every stage is cached by content under ``--cache-dir``: a rerun with the same settings fits nothing and
only redraws the tables.  Results go to ``benchmarks/results/reproduce/`` (CSV, JSON, PNG, ``reproduce.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, machine_line, md_table  # noqa: E402  (sets HF_HUB_OFFLINE=1 and OMP_WAIT_POLICY)

from claims import CLAIMS, claims_table  # noqa: E402

from fmmlearn.utils._files import atomic_write  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results" / "reproduce"
MASKING_RATIOS = (0.0, 1.0)
#: Every measure of claims 3 and 4 (sign and abs of leave-one-out, integrated gradients and input x gradient).
MEASURES = ("rand", "grad-l2", "inp-grad-sign", "inp-grad-abs", "int-grad-sign", "int-grad-abs", "loo-sign",
            "loo-abs")
BABI_ONLY = ("beam-sign-10",)


@dataclasses.dataclass(frozen=True)
class Plan:
    """One dataset of the reproduction: sizes, fine-tuning, and the texts of the costly measures."""

    name: str
    title: str
    n_train: int
    n_valid: int
    n_test: int
    epochs: int
    learning_rate: float
    max_length: int | None
    costly: int  # texts shared by leave-one-out, integrated gradients (and beam search): the pilot's
    beam: int | None = None  # texts of beam search (a nested part of the costly ones), bAbI only
    babi: bool = False
    max_sentences: int | None = None
    curve: int | None = None  # test texts of the masking stages; accuracy is measured on all n_test
    budget: float | None = None  # seconds the faithfulness stage may add texts to decide claim 3

    def scaled(self, factor: float) -> "Plan":
        grow = lambda n: None if n is None else max(2, int(round(n * factor)))  # noqa: E731
        return dataclasses.replace(self, n_train=grow(self.n_train), n_valid=grow(self.n_valid),
                                   n_test=grow(self.n_test), costly=grow(self.costly), beam=grow(self.beam),
                                   curve=grow(self.curve),
                                   budget=None if self.budget is None else self.budget * factor)


# Sized by cost and power (docs/reproduction.md, "The plan"; benchmarks/measure_cost.py gives the seconds per text
# of every measure): claim 1 compares the models' accuracy, one forward pass per text, so it gets thousands of
# test texts and every seed (fine-tuning noise is its largest error); the curves run on a few hundred of them
# (curve), on the models of the first seed (curve_seeds), their costly measures on a pilot (costly) that the
# budget rounds grow until the comparisons of claim 3 are decided (budget: seconds of the whole faithfulness stage,
# the pilot's 1200 or so included; the rounds add texts on the masked model only).  bAbI-1 with
# distractors is not in the default plan: on 2 CPU cores its masked model never beat the question-blind
# predictor at affordable sizes (the earlier runs), so it could not give a verdict (``--datasets babi-1``).
PLANS = {
    "tweets": Plan("tweets", "Tweets (bundled, 3 classes)", n_train=2000, n_valid=300, n_test=4000, epochs=3,
                   learning_rate=2e-4, max_length=48, costly=60, curve=300, budget=2100.0),
    "babi-1": Plan("babi-1", "bAbI-1 (generated, with distractors)", n_train=1200, n_valid=200, n_test=100,
                   epochs=10, learning_rate=3e-4, max_length=None, costly=40, beam=16, babi=True, max_sentences=4),
    "bbc-news": Plan("bbc-news", "BBC news (bundled, 5 classes, first 64 tokens)", n_train=300, n_valid=100,
                     n_test=1500, epochs=3, learning_rate=2e-4, max_length=64, costly=30, curve=80),
}
DEFAULT_DATASETS = ("tweets", "bbc-news")
QUICK = dict(n_train=60, n_valid=30, n_test=20, epochs=1, costly=8, beam=4, curve=None, budget=None)
#: Seeds of the curves (the masking stages); every seed is fitted and scored for claim 1.
CURVE_SEEDS = (0,)
RULES_PATH = ROOT / "fmmlearn" / "study" / "verdict_rules.json"
#: The other-domain control of each dataset's in-distribution test: texts its model was never trained on
#: (none for bAbI: its inputs are (paragraph, question) pairs).
OTHER_DOMAIN = {"tweets": "bbc-news", "bbc-news": "tweets"}


# =========================================================================== data and studies


def babi_data(plan: Plan, seed: int):
    """Generated bAbI-1 with distractors, paragraphs of at most ``max_sentences`` sentences, subsampled.

    With distractors every answer location is named twice, by the supporting sentence and by the
    partner's, in random order: only the question tells them apart, so the supporting-fact test can
    fail, and a question-blind predictor gets exactly one half.
    """
    from sklearn.model_selection import train_test_split
    from sklearn.utils import Bunch

    from fmmlearn.datasets import load_babi

    full = load_babi(1, distractors=True)
    parts = {}
    for split, n in (("train", plan.n_train), ("validation", plan.n_valid), ("test", plan.n_test)):
        bunch = full[split]
        keep = np.arange(len(bunch.data))
        if plan.max_sentences is not None:
            keep = keep[[bunch.data[i][0].count(".") <= plan.max_sentences for i in keep]]
        if n > len(keep):
            raise SystemExit(f"{plan.name}: {n} {split} examples asked for, {len(keep)} available.")
        if n < len(keep):
            keep = np.sort(train_test_split(keep, train_size=n, stratify=np.asarray(bunch.target)[keep],
                                            random_state=seed)[0])
        fields = {key: [value[i] for i in keep] for key, value in bunch.items()
                  if isinstance(value, (list, np.ndarray)) and len(value) == len(bunch.data)
                  and key not in ("data", "target")}
        rest = {k: v for k, v in bunch.items() if k not in fields and k not in ("data", "target", "frame")}
        parts[split] = Bunch(**rest, **fields, data=[tuple(bunch.data[i]) for i in keep],
                             target=np.asarray(bunch.target)[keep])
    return dataclasses.replace(full, **parts)


def study_for(plan: Plan, args):
    from fmmlearn.study import STAGES, FaithfulnessStudy
    from fmmlearn.study.stages.supporting_facts import SupportingFactsStage

    measures = [m for m in args.measures if plan.babi or not m.startswith("beam-")]
    caps = {m: plan.beam for m in measures if m.startswith("beam-") and plan.beam}
    params = {m: {"variant": "reference"} for m in measures if m.startswith("int-grad-")}
    classifier = {"max_epochs": plan.epochs, "learning_rate": plan.learning_rate, "max_length": plan.max_length,
                  "precision": args.precision}
    stages = [*STAGES, SupportingFactsStage()] if plan.babi else None
    return FaithfulnessStudy(
        args.model, masking_ratios=MASKING_RATIOS, methods=measures, seeds=tuple(args.seeds),
        ratios=[k / args.steps for k in range(args.steps + 1)], max_examples=caps, costly_examples=plan.costly,
        curve_examples=plan.curve, curve_seeds=[s for s in args.seeds if s in args.curve_seeds] or args.seeds[:1],
        budget=plan.budget, budget_models=(1.0,) if plan.budget else None,
        budget_pairs=claim_3_pairs(measures) if plan.budget else None,
        method_params=params, classifier_params=classifier, n_explain=0, n_random=args.n_baseline,
        n_bootstrap=args.n_bootstrap, device=args.device, cache_dir=Path(args.cache_dir) / plan.name,
        random_state=args.split_seed, verbose=args.verbose, rules=str(RULES_PATH), stages=stages,
        other_domain=OTHER_DOMAIN.get(plan.name),
        **({} if plan.babi else {"n_train": plan.n_train, "n_valid": plan.n_valid, "n_test": plan.n_test}))


def claim_3_pairs(measures) -> list:
    """The comparisons claim 3 needs on the masked model: ``loo-sign`` (the paper's masking-based measure)
    against every other measure; the budget rounds add texts until these are decided."""
    return [("loo-sign", m) for m in measures if m not in ("rand", "loo-sign")] if "loo-sign" in measures else []


def run_dataset(plan: Plan, args) -> dict:
    from fmmlearn.exceptions import TruncationWarning

    study = study_for(plan, args)
    data = babi_data(plan, args.split_seed) if plan.babi else plan.name
    print(f"\n== {plan.title}: methods {', '.join(study.methods)}", flush=True)
    start = time.perf_counter()
    with warnings.catch_warnings():
        # truncation of long texts is the plan (max_length); the study counts the truncated test texts.
        # Silenced by category: a CacheWarning about a truncated cache file must still be shown.
        warnings.simplefilter("ignore", TruncationWarning)
        result = study.run(data)
    return {"plan": plan, "result": result, "seconds": time.perf_counter() - start}


# =========================================================================== the rules' provenance


def _git(*args) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def rules_record(started_epoch: float, digest_at_start: str) -> dict:
    """The rules that judged the run: version, hash, the commit that last changed them, and whether that was late."""
    from fmmlearn.study._rules import load_rules, rules_digest

    rules = load_rules(RULES_PATH)
    last = _git("log", "-1", "--format=%H %ct", "--", str(RULES_PATH.relative_to(ROOT)))
    commit, committed = (last.split() if last else (None, None))
    dirty = _git("status", "--porcelain", "--", str(RULES_PATH.relative_to(ROOT)))
    changed = []
    if committed is not None and int(committed) > started_epoch:
        changed.append("the rules file was committed after the run started")
    if rules_digest(RULES_PATH) != digest_at_start:
        changed.append("the rules file changed while the run was going on")
    if dirty:
        changed.append("the rules file has uncommitted changes")
    return {"path": str(RULES_PATH.relative_to(ROOT)), "version": rules["version"], "sha256": digest_at_start,
            "commit": commit, "committed": None if committed is None else
            time.strftime("%Y-%m-%dT%H:%M:%S%z", time.gmtime(int(committed))), "changed_after_start": changed,
            "rules": rules}


# =========================================================================== tables


def _frames(runs, name: str) -> pd.DataFrame:
    parts = [r["result"].frames[name].assign(dataset=r["plan"].name) for r in runs
             if name in r["result"].frames and len(r["result"].frames[name].columns)]
    if not parts:
        return pd.DataFrame(columns=["dataset"])
    frame = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    return frame[["dataset", *[c for c in frame.columns if c != "dataset"]]]


def tables_of(runs) -> dict:
    """Every table of the reproduction, from the studies' frames (nothing recomputed here but means)."""
    perf = _frames(runs, "performance")
    curves = _frames(runs, "curves")
    rm = curves[(curves["method"] == "random-masking") & curves["converged"].astype(bool)]
    random_masking = rm.groupby(["dataset", "model", "ratio"], sort=False)["value"].mean().reset_index()
    ood = _frames(runs, "in_distribution")
    if len(ood):
        ood = ood[ood["converged"].astype(bool) & np.isclose(ood["threshold"], 0.05)]
        ood = ood.groupby(["dataset", "model", "ratio"], sort=False)[["proportion", "expected"]].mean().reset_index()
    return {"performance": perf, "random_masking": random_masking, "racu": _frames(runs, "racu_summary"),
            "comparisons": _frames(runs, "comparisons"), "masf": ood,
            "masf_verdicts": _frames(runs, "in_distribution_verdicts"),
            "supporting_facts": _frames(runs, "supporting_facts"), "erasure": _erasure(runs)}


def _erasure(runs) -> pd.DataFrame:
    from fmmlearn.study import erasure_by_model

    parts = [erasure_by_model(r["result"]).assign(dataset=r["plan"].name) for r in runs if len(r["result"].erasure)]
    if not parts:
        return pd.DataFrame()
    frame = pd.concat(parts, ignore_index=True)
    return frame[frame["aopc"]][["dataset", "model", "method", "mode", "n_examples", "mean", "ci_low", "ci_high",
                                 "ood_share", "valid"]]


# =========================================================================== figures


def figures(runs, out: Path) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fmmlearn.plotting import plot_in_distribution, plot_racu, plot_random_masking

    written = []

    def panels(name, draw, height=3.6):
        fig, axes = plt.subplots(1, len(runs), figsize=(4.8 * len(runs), height), squeeze=False)
        for ax, r in zip(axes[0], runs):
            try:
                draw(r, ax)
            except ValueError as exc:  # e.g. no fit of this dataset counted
                ax.set_title(r["plan"].title)
                ax.text(0.5, 0.5, str(exc), ha="center", va="center", wrap=True, transform=ax.transAxes)
        fig.tight_layout()
        atomic_write(out / f"{name}.png", lambda tmp: fig.savefig(tmp, dpi=90))
        plt.close(fig)
        written.append(out / f"{name}.png")

    panels("random_masking", lambda r, ax: plot_random_masking(r["result"].curves, ax=ax, title=r["plan"].title))

    def acu(r, ax):
        summary = r["result"].racu_summary
        if not summary["n_seeds"].gt(0).any():
            raise ValueError("no fit counted")
        plot_racu(summary, ax=ax, value="acu", title=r["plan"].title)

    panels("acu", acu, height=4.4)

    def masf(r, ax):
        frame = r["result"].in_distribution
        frame = frame[frame["converged"].astype(bool)]
        if frame.empty:
            raise ValueError("no fit counted")
        plot_in_distribution(frame, ax=ax, statistic="proportion", threshold=0.05, title=r["plan"].title)

    panels("masf", masf)
    return written


# =========================================================================== markdown


def _f(value, digits=3) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, (float, np.floating)) else str(value)


def _ci(low, high, digits=3, *, signed=False, percent=False) -> str:
    if not (np.isfinite(low) and np.isfinite(high)):
        return "-"
    if percent:
        return f"[{low:.1%}, {high:.1%}]"
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]" if signed else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _setup_block(report: dict) -> str:
    info, precision = report["machine"], report["precision"]
    rows = []
    for p in report["datasets"].values():
        subsets = ", ".join(f"{m} {v['n_examples']}" for m, v in p["subsets"].items())
        rows.append([p["title"], f"{p['sizes']['train']} / {p['sizes']['valid']} / {p['sizes']['test']}",
                     p["epochs"], p["learning_rate"], p["max_length"] or "model's", subsets])
    return "\n".join([
        f"Command: `{report['command']}` ({report['wall_seconds'] / 60:.1f} min wall, started {report['started']}; "
        f"load average {report['load_average'][0]:.1f} at the start, {report['load_average'][1]:.1f} at the end).",
        "", machine_line(info, f"{precision['inference']} forward passes; measures "
                         + ", ".join(f"{m} {p}" for m, p in precision["measures"].items())),
        "", "Versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items() if v) + ".", "",
        md_table(["dataset", "train / valid / test", "epochs", "learning rate", "max_length", "test texts per measure"],
                 rows),
        "", f"Seeds {', '.join(map(str, report['seeds']))}; masking ratios in steps of 1/{report['steps']}; "
            f"{report['n_baseline']} `rand` baseline draws; bootstrap {report['n_bootstrap']} resamples for the "
            f"tables' intervals, {report['rules']['rules']['bootstrap']['n_resamples']} for the comparisons."])


def _rules_block(report: dict) -> str:
    rules = report["rules"]
    r = rules["rules"]
    lines = [f"Rules: `{rules['path']}` version {rules['version']}, SHA-256 `{rules['sha256']}`, last changed by "
             f"commit `{rules['commit'] or 'unknown'}` ({rules['committed'] or 'not committed'}), read when the run "
             f"started ({report['started']}).",
             "", ("**The rules changed after the run started:** " + "; ".join(rules["changed_after_start"]) + "."
                  if rules["changed_after_start"] else "The rules did not change after the run started."),
             "", md_table(["rule", "value"], [
                 ["equivalence margin, ACU differences", r["comparisons"]["acu_margin"]],
                 ["equivalence margin, accuracy differences", r["comparisons"]["accuracy_margin"]],
                 ["confidence level", r["confidence_level"]],
                 ["convergence margin over the input-blind predictor", r["convergence"]["margin"]],
                 ["in-distribution test: level; null share range of a MaSF calibration",
                  f"{r['in_distribution']['level']}; {r['in_distribution']['null_share_range']}"],
                 ["in-distribution: flagged at most the null share plus", r["in_distribution"]["max_excess"]],
                 ["in-distribution: least power against the matched control",
                  r["in_distribution"].get("min_power", "-")],
                 ["unstable when the CI is wider than (RACU, ACU)",
                  f"{r['stability']['racu_max_ci_width']}, {r['stability']['acu_max_ci_width']}"]])]
    lines += ["", *[f"* claim {k}: {text}" if k.isdigit() else f"* {k.replace('_', ' ')}: {text}"
                    for k, text in r["claims"].items()]]
    lines += ["", *[f"* version {k}: {text}" for k, text in r.get("changes", {}).items()]]
    return "\n".join(lines)


def _decision_cost_block(report: dict) -> str:
    """Per dataset and verdict, the wall and CPU minutes of the jobs it read (benchmarks/decision_cost.py)."""
    from decision_cost import markdown_rows

    parts = []
    for name, rows in report.get("decision_costs", {}).items():
        costs = pd.DataFrame(rows)
        if len(costs):
            parts.append(f"**{name}**\n\n" + md_table(["verdict", "stage", "jobs", "wall minutes", "CPU minutes"],
                                                      markdown_rows(costs)))
    rounds = "; ".join(f"{name}: {info['rounds']} round(s), stopped: {info['stopped']}"
                       for name, info in report.get("rounds", {}).items() if info)
    text = "\n\n".join(parts) or "No timings."
    return text + (f"\n\nBudget rounds of the faithfulness stage: {rounds}." if rounds else "")


def markdown_blocks(report: dict, tables: dict, claims: pd.DataFrame, prose: dict) -> dict:
    """The generated parts of docs/reproduction.md, by marker name."""
    from reading import runtime_block

    perf, racu, comparisons = tables["performance"], tables["racu"], tables["comparisons"]
    blocks = {"setup": _setup_block(report), "rules": _rules_block(report), "runtime": runtime_block(report),
              "decision-cost": _decision_cost_block(report)}
    blocks["performance"] = md_table(
        ["dataset", "model", "seed", "accuracy [95% CI]", "input-blind predictor", "difference [95% CI]", "counts"],
        [[r.dataset, r.model, r.seed, f"{_f(r.value)} {_ci(r.low, r.high)}", f"{r.baseline} {_f(r.baseline_value)}",
          f"{r.vs_baseline:+.3f} {_ci(r.vs_baseline_low, r.vs_baseline_high, signed=True)}",
          "yes" if r.converged else f"**no**: {r.reason}"] for r in perf.itertuples()])
    rm = tables["random_masking"]
    ratios = sorted(rm["ratio"].unique()) if len(rm) else []
    shown = [x for x in ratios if round(x * 10) % 2 == 0] if len(ratios) > 6 else ratios
    blocks["random-masking"] = md_table(
        ["dataset", "model", *[f"{x:.0%}" for x in shown]],
        [[d, m, *[_f(part.set_index("ratio").loc[x, "value"], 2) for x in shown]]
         for (d, m), part in rm.groupby(["dataset", "model"], sort=False)]) + \
        "\n\nMean over the counted seeds of the accuracy when a share of the tokens is masked at random (both " \
        "segments)."
    blocks["racu"] = md_table(
        ["dataset", "model", "measure", "test texts", "ACU [95% CI]", "RACU [95% CI]", "stable", "most faithful"],
        [[r.dataset, r.model, r.method, r.n_examples, f"{_f(r.acu)} {_ci(r.acu_low, r.acu_high)}",
          f"{_f(r.racu, 2)} {_ci(r.racu_low, r.racu_high, 2)}",
          "/".join(("RACU" if r.racu_stable and r.reliable else "-", "ACU" if r.acu_stable else "-")),
          "**yes**" if r.most_faithful else ""] for r in racu.itertuples()])
    blocks["comparisons"] = md_table(
        ["dataset", "model", "first - second", "texts", "seeds", "difference [CI]", "level", "verdict"],
        [[r.dataset, r.model, f"{r.first} - {r.second}", r.n_examples, r.n_seeds,
          f"{r.estimate:+.3f} {_ci(r.ci_low, r.ci_high, signed=True)}", f"{r.confidence_level:.3g}",
          f"**{r.verdict}**"] for r in comparisons.itertuples()])
    verdicts = tables["masf_verdicts"]
    blocks["masf"] = "The in-distribution stage did not run." if verdicts.empty else md_table(
        ["dataset", "model", "detector", "flagged, 10-90 % masked", "null share", "power (matched control)",
         "negative control", "random tokens", "another domain", "verdict"],
        [[r.dataset, r.model, r.detector, f"{r.flagged:.1%} {_ci(r.flagged_low, r.flagged_high, percent=True)}",
          f"{r.expected:.1%}", f"{r.power:.1%} {_ci(r.power_low, r.power_high, percent=True)}",
          f"{r.negative_share:.1%} {_ci(r.negative_low, r.negative_high, percent=True)}" if r.negative_n else "-",
          f"{r.random_share:.1%}", f"{r.other_domain_share:.1%}" if r.other_domain_n else "-",
          f"**{r.verdict}** ({r.reason})"] for r in verdicts.itertuples()])
    masf = tables["masf"]
    if len(masf):
        ratios = sorted(masf["ratio"].unique())
        shown = [x for x in ratios if round(x * 10) % 2 == 0] if len(ratios) > 6 else ratios
        blocks["masf-ratios"] = md_table(
            ["dataset", "model", *[f"{x:.0%}" for x in shown]],
            [[d, m, *[f"{part.set_index('ratio').loc[x, 'proportion']:.2f}" for x in shown]]
             for (d, m), part in masf.groupby(["dataset", "model"], sort=False)]) + (
            "\n\nShare of `rand`-masked test texts the in-distribution test flags at p < 0.05, mean over the "
            "counted seeds.")
    else:
        blocks["masf-ratios"] = "The in-distribution stage did not run."
    support = tables["supporting_facts"]
    blocks["supporting-facts"] = "No bAbI run counted." if support.empty else _support_table(support)
    erasure = tables["erasure"]
    blocks["erasure"] = "The erasure stage did not run." if erasure.empty else md_table(
        ["dataset", "model", "measure", "mode", "test texts", "AOPC [95% CI]", "flagged (in-distribution test)", "valid"],
        [[r.dataset, r.model, r.method, r.mode, int(r.n_examples), f"{_f(r.mean)} {_ci(r.ci_low, r.ci_high)}",
          "-" if pd.isna(r.ood_share) else f"{r.ood_share:.1%}",
          "not checked" if pd.isna(r.valid) else ("**valid**" if r.valid else "not valid")]
         for r in erasure.itertuples()])
    blocks["claims"] = md_table(
        ["claim", "dataset", "verdict", "numbers"],
        [[f"{r.claim}. {CLAIMS[r.claim]}" if r.dataset == "overall" else str(r.claim), r.dataset,
          f"**{r.verdict}**", r.note] for r in claims.itertuples()])
    blocks.update(prose)
    return blocks


def _support_table(support: pd.DataFrame) -> str:
    support = support[support["converged"].astype(bool)]
    if support.empty:
        return "No bAbI run counted."
    return md_table(["dataset", "model", "seed", "measure", "texts", "hit rate [95% CI]", "chance",
                     "above chance [95% CI]"],
                    [[r.dataset, r.model, r.seed, r.method, r.n_scored,
                      f"{r.hit_rate:.2f} {_ci(r.hit_low, r.hit_high, 2)}", f"{r.chance:.2f}",
                      f"{r.lift:+.2f} {_ci(r.lift_low, r.lift_high, 2, signed=True)}"]
                     for r in support.itertuples()])


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
    atomic_write(path, lambda tmp: tmp.write_text(text))
    return missing


# =========================================================================== main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=sorted(PLANS), default=list(DEFAULT_DATASETS))
    parser.add_argument("--methods", "--measures", dest="measures", nargs="+", default=list(MEASURES + BABI_ONLY),
                        metavar="METHOD",
                        help="importance methods (beam search on bAbI only; int-grad-* with variant='reference')")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1], help="fine-tuning seeds")
    parser.add_argument("--curve-seeds", nargs="+", type=int, default=list(CURVE_SEEDS),
                        help="seeds whose models the curves measure (the others: accuracy only)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every split size and costly subset")
    parser.add_argument("--quick", action="store_true", help="toy sizes, 1 epoch, 4 masking steps (a smoke test)")
    parser.add_argument("--epochs", type=int, help="fine-tuning epochs of every dataset")
    parser.add_argument("--learning-rate", type=float, help="learning rate of every dataset")
    parser.add_argument("--steps", type=int, default=None, help="masking-ratio steps between 0 and 1 (10)")
    parser.add_argument("--n-random", "--n-baseline", dest="n_baseline", type=int, default=3, metavar="N",
                        help="rand curves averaged into RACU's reference (--n-baseline: the old name)")
    parser.add_argument("--n-bootstrap", type=int, default=2000, help="bootstrap resamples of the tables' CIs")
    parser.add_argument("--model", default="minilm", help="base model (bundled name or directory)")
    parser.add_argument("--precision", default="auto", help="FaithfulTextClassifier precision")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the data splits and subsets")
    parser.add_argument("--output", default=None, help="results directory (default benchmarks/results/reproduce; "
                                                       "with --quick a scratch directory)")
    parser.add_argument("--cache-dir", default=None, help="stage cache; default ~/.cache/fmmlearn-reproduce")
    parser.add_argument("--doc", default=None, help="also refresh the generated blocks of this markdown file")
    parser.add_argument("--redraw", action="store_true",
                        help="redraw reproduce.md (and --doc) from the tables and reproduce.json a run left in "
                             "--output, without running anything")
    parser.add_argument("-v", "--verbose", type=int, default=1)
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error(f"--scale must be positive, got {args.scale}")
    if len(set(args.seeds)) != len(args.seeds) or any(s < 0 for s in args.seeds):
        parser.error(f"--seeds must be distinct non-negative integers, got {args.seeds}")
    args.steps = args.steps or (4 if args.quick else 10)
    if args.steps < 2:
        parser.error(f"--steps must be at least 2, got {args.steps}")
    from fmmlearn.importance import get_method

    for m in args.measures:
        try:
            get_method(m)
        except ValueError as exc:
            parser.error(f"--methods: {exc}")
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
            plan = dataclasses.replace(plan, **{**QUICK, "beam": QUICK["beam"] if plan.beam else None})
        changes = {k: v for k, v in (("epochs", args.epochs), ("learning_rate", args.learning_rate)) if v is not None}
        plans.append(dataclasses.replace(plan, **changes))
    return plans


def main(argv=None) -> dict:
    """Run the reproduction; one run at a time writes ``--output`` (a second one stops, naming the holder's pid).

    Warnings are one ``warning: <message> [<Category>]`` line each on stderr, as in the ``fmmlearn`` command:
    a corrupt or stale cache entry that is recomputed is one such ``[CacheWarning]`` line naming it.
    """
    from fmmlearn.utils._files import directory_lock
    from fmmlearn.utils._warnings import command_line_warnings

    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    with directory_lock(args.output, option="--output") as out, command_line_warnings():
        return redraw(args, out) if args.redraw else reproduce(args, argv, out)


def reproduce(args, argv: list, out: Path) -> dict:
    """The reproduction into ``out`` (locked by :func:`main`); every file is written atomically."""
    from decision_cost import decision_costs
    from fmmlearn.study._rules import rules_digest
    from reading import prose_blocks, runtime

    info = machine()
    started, started_epoch, t0 = time.strftime("%Y-%m-%dT%H:%M:%S%z"), time.time(), time.perf_counter()
    load_start, digest = os.getloadavg()[0], rules_digest(RULES_PATH)
    cmd = "python benchmarks/reproduce.py" + ("" if not argv else " " + shlex.join(argv))
    print(f"{cmd}\n" + machine_line(info, f"precision={args.precision!r} (chosen by measurement)"), flush=True)
    runs = [run_dataset(plan, args) for plan in plans_for(args)]
    tables = tables_of(runs)
    first = runs[0]["result"].metadata
    report = {
        "command": cmd, "started": started, "wall_seconds": time.perf_counter() - t0,
        "load_average": [load_start, os.getloadavg()[0]], "machine": info, "versions": first["machine"]["versions"],
        "precision": first["precision"], "seeds": list(args.seeds), "steps": args.steps,
        "n_baseline": args.n_baseline, "n_bootstrap": args.n_bootstrap, "model": args.model,
        "rules": rules_record(started_epoch, digest),
        "datasets": {r["plan"].name: {**dataclasses.asdict(r["plan"]), "sizes": r["result"].metadata["data"]["sizes"],
                                      "subsets": r["result"].metadata["subsets"], "seconds": r["seconds"],
                                      "blind": r["result"].metadata.get("blind_baseline")} for r in runs},
        "runtime": runtime(runs),
        "decision_costs": {r["plan"].name: decision_costs(r["result"].timings, r["result"].metadata.get("curve_seeds"))
                           .to_dict("records") for r in runs},
        "rounds": {r["plan"].name: r["result"].metadata.get("rounds") for r in runs}}
    claims = claims_table(tables, report["rules"]["rules"])
    for name, frame in {**tables, "claims": claims}.items():
        atomic_write(out / f"{name}.csv", lambda tmp, frame=frame: frame.to_csv(tmp, index=False))
    for r in runs:  # every job's wall and CPU seconds: what each verdict cost
        atomic_write(out / f"timings_{r['plan'].name}.csv",
                     lambda tmp, frame=r["result"].timings: frame.to_csv(tmp, index=False))
    report["claims"] = claims.replace({np.nan: None}).to_dict("records")
    report["figures"] = [p.name for p in figures(runs, out)]
    blocks = markdown_blocks(report, tables, claims, prose_blocks(report, tables, claims))
    atomic_write(out / "reproduce.json", lambda tmp: tmp.write_text(json.dumps(report, indent=2, default=str)))
    body = "\n\n".join(f"## {name}\n\n{text}" for name, text in blocks.items())
    atomic_write(out / "reproduce.md", lambda tmp: tmp.write_text(f"# Reproduction: generated tables\n\n{body}\n"))
    print("\n" + blocks["setup"] + "\n\n" + blocks["claims"], flush=True)
    if args.doc:
        missing = update_doc(Path(args.doc), blocks)
        print(f"updated {args.doc}" + (f" (no markers for {', '.join(missing)})" if missing else ""))
    print(f"\nwrote {out}")
    return {"output": out, "tables": tables, "claims": claims, "report": report, "runs": runs}


#: The tables of a run, saved as ``<name>.csv`` (the keys of :func:`tables_of`).
TABLE_NAMES = ("performance", "random_masking", "racu", "comparisons", "masf", "masf_verdicts", "supporting_facts",
               "erasure")


def redraw(args, out: Path) -> dict:
    """The doc's blocks and ``reproduce.md`` again from a finished run's files in ``out``: no study runs.

    For a change of how the tables are drawn: the numbers, the run's wall time and its machine stay those
    of the run that wrote ``reproduce.json`` and the tables.
    """
    from reading import prose_blocks

    report = json.loads((out / "reproduce.json").read_text())
    tables = {}
    for name in TABLE_NAMES:
        path = out / f"{name}.csv"
        tables[name] = pd.read_csv(path) if path.exists() and path.stat().st_size > 1 else pd.DataFrame()
    claims = pd.read_csv(out / "claims.csv")
    blocks = markdown_blocks(report, tables, claims, prose_blocks(report, tables, claims))
    body = "\n\n".join(f"## {name}\n\n{text}" for name, text in blocks.items())
    atomic_write(out / "reproduce.md", lambda tmp: tmp.write_text(f"# Reproduction: generated tables\n\n{body}\n"))
    if args.doc:
        missing = update_doc(Path(args.doc), blocks)
        print(f"updated {args.doc}" + (f" (no markers for {', '.join(missing)})" if missing else ""))
    return {"output": out, "tables": tables, "claims": claims, "report": report}


def _main_process() -> int:
    """The script: Ctrl-C and SIGTERM stop it with one line and the shell's status; the cache keeps what finished."""
    from fmmlearn.utils._signals import exit_status, signal_name, signals_as_interrupts

    try:
        with signals_as_interrupts():
            main()
    except KeyboardInterrupt as error:
        print(f"error: interrupted by {signal_name(error)}; the finished work is kept in the cache (--cache-dir): run the same "
              "command again to resume", file=sys.stderr)
        return exit_status(error)
    return 0


if __name__ == "__main__":
    sys.exit(_main_process())

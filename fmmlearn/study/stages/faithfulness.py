"""Stage ``faithfulness``: explainer-masking curves of every measure, per example, and RACU with CIs."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

from ...utils import derive_seed, label_indices
from .._names import model_label
from .._pipeline import Job, Stage
from .._stats import example_ci
from .._tables import RELIABLE_AREA_SHARE, most_faithful_rows
from ._common import gold_outcomes, test_key

__all__ = ["FaithfulnessStage", "rand_draw_seed"]

_AREAS = ["racu", "racu_low", "racu_high", "acu", "acu_low", "acu_high", "baseline_area", "baseline_area_low",
          "baseline_area_high", "reliable", "racu_stable", "acu_stable"]
RACU_COLUMNS = ["model", "max_masking_ratio", "seed", "converged", "method", "signed", "subset", "n_examples",
                *_AREAS]
_SUMMARY_COLUMNS = ["model", "max_masking_ratio", "method", "subset", "n_examples", "n_seeds", *_AREAS,
                    "racu_seed_low", "racu_seed_high", "acu_seed_low", "acu_seed_high"]
CURVE_COLUMNS = ["model", "max_masking_ratio", "seed", "converged", "method", "subset", "ratio", "metric",
                 "value", "n_examples", "mean_masked_fraction"]


def rand_draw_seed(seed: int, draw: int) -> int:
    """Seed of ``rand`` draw ``draw`` (of the ``n_random`` averaged) of a run with ``seed``: ``seed`` for draw 0."""
    return int(seed) if draw == 0 else derive_seed(seed, draw)


class FaithfulnessStage(Stage):
    """The explainer-masking curve of every measure, kept per example, and RACU/ACU with bootstrap CIs.

    ``rand`` is the reference: ``n_random`` independent draws over all test texts, averaged (the frames'
    ``baseline``), so every method is compared with random masking of exactly its own texts.
    """

    name = "faithfulness"
    requires = ("settings", "splits", "models", "fit_keys", "gold", "classes", "score", "subsets", "converged",
                "random_masking_curves", "subset_order", "curve_texts", "reduced_dtype")
    provides = ("curves", "outcomes", "racu", "racu_summary", "measured_subsets", "masking_predictions",
                "comparison_rounds", "rounds", "precision_probe")
    frames = ("curves", "outcomes", "racu", "racu_summary", "precision_probe")

    # ---------------------------------------------------------------- the jobs
    @staticmethod
    def _job(settings, sp, run, method, draw, idx, precision=None) -> Job:
        """One curve: ``method`` on texts ``idx`` of ``run``; ``precision`` forces the measure's (the probe's bf16)."""
        name = method if method != "rand" else f"rand (baseline draw {draw + 1})"
        params = dict(settings.measure_params.get(method, {}))
        if precision is not None:
            params["precision"] = precision
            name += f", {precision}"
        key = (test_key(sp), np.asarray(idx).tolist(), method, settings.grid.tolist(), rand_draw_seed(run[1], draw),
               settings.segment, params)
        return Job(run, key, method=method, n_examples=len(idx), data={"draw": draw, "precision": precision},
                   label=f"{model_label(run[0])} seed {run[1]}: {name} ({len(idx)} examples)")

    def jobs(self, context) -> list:
        """Round 0: every measure (and every ``rand`` draw) on its subset of the test texts."""
        return self._first_jobs(context, _initial_blocks(context))

    def execute(self, context, runtime) -> dict:
        """Round 0 (with the precision probe), then -- with a ``budget`` -- rounds while verdicts are open."""
        from .._comparisons import final_comparisons
        from .._precision import probe_plan
        from .._settings import is_costly

        settings, sp = context["settings"], context["splits"]
        started = time.perf_counter()
        blocks = _initial_blocks(context)  # (masking ratio, measure) -> index blocks so far
        plan = probe_plan(context, list(settings.measures[1:]))
        for m in plan.methods if plan else ():
            for r in settings.masking_ratios:  # the probe texts first, in fp32; the rest after the probe's judgement
                blocks[(r, m)] = [plan.probe[m]]
        with runtime.progress(self.name, len(self.jobs(context))) as bar:
            results = runtime.run_jobs(self, self._first_jobs(context, blocks), context, bar)
        precision, probe = self._probe(context, runtime, plan, results, blocks)
        rounds, history, snapshots = [self._compare(context, results, blocks, 0)], [], [_copy(blocks)]
        costly = [m for m in settings.measures[1:] if is_costly(m) and
                  sum(map(len, blocks[(settings.masking_ratios[0], m)])) < len(context["gold"])]
        reason = "no budget" if settings.budget is None else None
        while reason is None:
            reason, added = self._next_blocks(context, rounds[-1], results, blocks, costly, len(rounds))
            if reason is not None:
                break
            jobs = [self._job(settings, sp, run, m, 0, block, precision.get(m)) for run in settings.curve_runs
                    for (r, m), block in added.items() if run[0] == r]
            with runtime.progress(f"{self.name} +{max(len(b) for b in added.values())}", len(jobs)) as bar:
                results.update(runtime.run_jobs(self, jobs, context, bar))
            for key, block in added.items():
                blocks[key].append(block)
            history.append({"round": len(rounds), "added_texts": int(max(len(b) for b in added.values())),
                            "measures": list(dict.fromkeys(m for _, m in added)),
                            "models": list(dict.fromkeys(model_label(r) for r, _ in added)),
                            "texts": {f"{m} ({model_label(r)})": int(len(b)) for (r, m), b in added.items()}})
            rounds.append(self._compare(context, results, blocks, len(rounds)))
            snapshots.append(_copy(blocks))
        if plan is not None:
            results, rounds = self._verdicts_hold(context, runtime, results, rounds, snapshots, precision, probe)
        texts = {(r, m): int(sum(len(b) for b in blocks[(r, m)])) for r in settings.masking_ratios
                 for m in settings.measures[1:]}
        info = {"budget": settings.budget, "rounds": len(rounds), "seconds": time.perf_counter() - started,
                "stopped": reason, "added": history,
                "texts": {m: max(texts[(r, m)] for r in settings.masking_ratios) for m in settings.measures[1:]},
                "texts_by_model": {model_label(r): {m: texts[(r, m)] for m in settings.measures[1:]}
                                   for r in settings.masking_ratios},
                "precision": {m: precision.get(m) or "fp32" for m in settings.measures[1:]}}
        return {**self.finish(context, results, blocks, final_comparisons(rounds)), "comparison_rounds": rounds,
                "rounds": info, "precision_probe": probe}

    def _first_jobs(self, context, blocks) -> list:
        """Round 0: every ``rand`` draw and every measure on its first block of texts, in fp32."""
        settings, sp = context["settings"], context["splits"]
        pairs = [("rand", d) for d in range(settings.n_baseline)] + [(m, 0) for m in settings.measures[1:]]
        return [self._job(settings, sp, run, method, draw, blocks[(run[0], method)][0]) for run in settings.curve_runs
                for method, draw in pairs]

    def _probe(self, context, runtime, plan, results, blocks) -> tuple[dict, pd.DataFrame]:
        """The probe texts again in the reduced precision; per measure, the precision of its other texts."""
        from .._precision import PROBE_COLUMNS, judge_probe

        if plan is None:
            return {}, pd.DataFrame(columns=list(PROBE_COLUMNS))
        settings, sp = context["settings"], context["splits"]
        jobs = [self._job(settings, sp, run, m, 0, plan.probe[m], plan.reduced) for run in settings.curve_runs
                for m in plan.methods]
        with runtime.progress(f"{self.name} precision probe", len(jobs)) as bar:
            reduced = runtime.run_jobs(self, jobs, context, bar)
        fp32 = {(job.run, job.method): p["pred"] for job, p in results.items()
                if job.method in plan.methods and job.data["precision"] is None}
        reduced = {(job.run, job.method): p["pred"] for job, p in reduced.items()}
        rand_idx = context["subsets"]["rand"][1]  # round 0: every model's rand covers the curve texts
        draws = {run: np.stack([p["pred"] for job, p in sorted(results.items(), key=lambda kv: kv[0].data["draw"])
                                if job.method == "rand" and job.run == run]) for run in settings.curve_runs}
        rand = {(run, m): draws[run][:, :, np.searchsorted(rand_idx, plan.probe[m])] for run in settings.curve_runs
                for m in plan.methods}
        precision, probe = judge_probe(context, plan, fp32, reduced, rand)
        jobs = [self._job(settings, sp, run, m, 0, plan.rest[m], precision[m]) for run in settings.curve_runs
                for m in plan.methods if len(plan.rest[m])]
        with runtime.progress(self.name, len(jobs)) as bar:
            results.update(runtime.run_jobs(self, jobs, context, bar))
        for m in plan.methods:
            if len(plan.rest[m]):
                for r in settings.masking_ratios:
                    blocks[(r, m)].append(plan.rest[m])
        return precision, probe

    def _verdicts_hold(self, context, runtime, results, rounds, snapshots, precision, probe):
        """Back to fp32 for a measure whose reduced precision could flip a verdict; every round compared again."""
        from .._comparisons import final_comparisons
        from .._precision import sensitive_measures

        flagged = sensitive_measures(final_comparisons(rounds), probe, precision)
        if not flagged:
            return results, rounds
        settings, sp = context["settings"], context["splits"]
        kept = {job: p for job, p in results.items() if not (job.method in flagged and job.data["precision"])}
        jobs = [self._job(settings, sp, job.run, job.method, 0, job.key[1]) for job in results
                if job.method in flagged and job.data["precision"]]
        with runtime.progress(f"{self.name} back to fp32", len(jobs)) as bar:
            kept.update(runtime.run_jobs(self, jobs, context, bar))
        for m in flagged:
            precision[m] = None
        probe.loc[probe["method"].isin(flagged), "accepted"] = False
        return kept, [self._compare(context, kept, snapshot, r) for r, snapshot in enumerate(snapshots)]

    def _compare(self, context, results, blocks, round_index):
        from .._comparisons import measure_comparisons
        from .._rules import spent_level

        settings = context["settings"]
        level = spent_level(settings.confidence_level, None if settings.budget is None else round_index)
        return measure_comparisons(settings, context["gold"], context["score"], context["converged"],
                                   self._predictions(context, results, blocks), level=level, round_index=round_index)

    @staticmethod
    def _next_blocks(context, last, results, blocks, costly, round_index):
        """``(None, {measure: texts to add})``, or ``(why no round follows, None)``.

        The open comparisons (inconclusive, with a costly measure; only ``budget_pairs`` and
        ``budget_models`` when given) say which costly measures get texts, and how many: from each
        open comparison's estimate and standard error, the texts at which the next round's interval
        (at its spent level) would be narrow enough to decide it were the estimate to stay, a tenth
        more for safety, at least the rules' block.  What the budget cannot pay for is cut.
        """
        settings = context["settings"]
        open_pairs = _open_comparisons(last, costly, settings)
        if open_pairs.empty:
            return "every comparison with a costly measure is decided", None
        wanted = _texts_to_decide(open_pairs, settings, round_index)
        curve = set(context["curve_texts"].tolist())  # the rand baseline covers these only
        added = {}
        # the texts go to the models whose comparisons are to be decided (budget_models), every seed of them
        for r in settings.budget_models or settings.masking_ratios:
            for m, n_wanted in wanted.items():
                taken = set(np.concatenate(blocks[(r, m)]).tolist())
                left = [i for i in context["subset_order"] if i not in taken and i in curve]
                size = max(n_wanted - len(taken), settings.rules["budget"]["block"])
                if left:
                    added[(r, m)] = np.sort(np.asarray(left[:size], dtype=np.int64))
        if not added:
            return "no test text left to add", None
        # seconds per added text of a model's measure, its seeds together (cached jobs: their first computation)
        per_text = {(r, m): sum(p["seconds"] for job, p in results.items()
                                if job.method == m and job.run[0] == r and job.data["draw"] == 0)
                    / sum(len(b) for b in blocks[(r, m)]) for r, m in added}
        # the seconds the stage's results took when first computed, cached or not: a rerun over a cache
        # plans the same rounds as the run that filled it (on the same machine)
        elapsed = sum(p.get("seconds", 0.0) for p in results.values())
        cost = sum(per_text[m] * len(b) for m, b in added.items())
        left_s = settings.budget - elapsed
        if cost > left_s:  # cut every block by the same share, down to one rules block
            share = max(left_s / cost, 0.0)
            minimum = settings.rules["budget"]["block"]
            added = {m: b[: max(minimum, int(len(b) * share))] for m, b in added.items()}
            cost = sum(per_text[m] * len(b) for m, b in added.items())
            if cost > left_s:
                return (f"the budget ({settings.budget:g} s) would be exceeded ({elapsed:.0f} s spent, the next "
                        f"texts would take about {cost:.0f} s)"), None
        return None, added

    @staticmethod
    def _predictions(context, results, blocks) -> dict:
        """``(run, method) -> (indices, predictions (n_ratios, n))`` of every measure, blocks joined in order."""
        by_key = {}
        for job, payload in results.items():
            if job.data["draw"] == 0 and job.method != "rand":
                by_key[(job.run, job.method, tuple(job.key[1]))] = payload["pred"]
        out = {}
        for run in context["settings"].curve_runs:
            for method in context["settings"].measures[1:]:
                chosen = blocks[(run[0], method)]
                parts = [by_key[(run, method, tuple(np.asarray(b).tolist()))] for b in chosen]
                out[(run, method)] = (np.concatenate(chosen), np.concatenate(parts, axis=1))
        return out

    def compute(self, clf, job, context) -> dict:
        """``pred``, ``gold_proba`` and ``masked_fraction``, each of shape ``(n_ratios, n_examples)``.

        The per-example outcomes of :func:`fmmlearn.faithfulness.step_outcomes`: the very numbers
        :func:`~fmmlearn.faithfulness.faithfulness_curve` aggregates.
        """
        from ...faithfulness import iter_explainer_masking, step_outcomes

        sp = context["splits"]
        _, idx, method, grid, seed, segment, params = job.key
        X = [sp.X_test[i] for i in idx]
        encoding = clf.encode(X)
        gold = label_indices(clf.classes_, sp.y_test[list(idx)], "y_test")
        steps = list(iter_explainer_masking(clf, encoding, gold, method=method, ratios=list(grid), recursive=None,
                                            segment=segment,
                                            random_state=seed, **dict(params)))
        logits, fractions = step_outcomes(clf, encoding, steps, segment=segment)
        preds, probas = zip(*(gold_outcomes(step, gold) for step in logits))
        return {"pred": np.stack(preds), "gold_proba": np.stack(probas), "masked_fraction": np.stack(fractions)}

    # ---------------------------------------------------------------- the frames
    def finish(self, context, results, blocks=None, comparisons=None) -> dict:
        blocks = blocks or _initial_blocks(context)
        payloads = self._joined(context, results, blocks)
        names = context["subsets"]
        by_model = {(r, m): (names[m][0] if len(b) == 1 else f"random {sum(map(len, b))}", np.concatenate(b))
                    for (r, m), b in blocks.items()}
        # the frames describe the texts finally measured, model by model
        context = {**dict(context), "subsets": by_model}
        curves, outcome_frame = self._curve_frames(context, payloads)
        racu = self._racu_frame(context, payloads)
        return {"curves": curves, "outcomes": outcome_frame, "racu": racu,
                "racu_summary": self._racu_summary(context, payloads, racu, comparisons),
                "measured_subsets": _shared_subsets(by_model), "masking_predictions": self._predictions(context,
                                                                                                  results, blocks)}

    @staticmethod
    def _joined(context, results, blocks) -> dict:
        """``(run, method, draw) -> payload`` with the blocks of a measure joined along the texts."""
        parts = {}
        for job, payload in results.items():
            parts[(job.run, job.method, job.data["draw"], tuple(job.key[1]))] = payload
        out = {}
        for (run, method, draw, _), _payload in parts.items():
            if (run, method, draw) in out:
                continue
            pieces = [parts[(run, method, draw, tuple(np.asarray(b).tolist()))] for b in blocks[(run[0], method)]]
            out[(run, method, draw)] = pieces[0] if len(pieces) == 1 else {
                key: np.concatenate([p[key] for p in pieces], axis=1) for key in ("pred", "gold_proba",
                                                                                  "masked_fraction")}
        return out

    @staticmethod
    def _baseline(context, payloads, run):
        """The ``rand`` draws of a run: predictions and masked fractions of shape (draws, ratios, examples)."""
        draws = [payloads[(run, "rand", d)] for d in range(context["settings"].n_baseline)]
        return np.stack([d["pred"] for d in draws]), np.stack([d["masked_fraction"] for d in draws])

    def _curve_frames(self, context, payloads):
        settings, gold, subsets, converged = (context[k] for k in ("settings", "gold", "subsets", "converged"))
        rows, outcome_parts, grid = [], [], settings.grid
        for run in settings.curve_runs:
            base = {"model": model_label(run[0]), "max_masking_ratio": run[0], "seed": run[1],
                    "converged": converged[run]}
            mine = {m: subsets[(run[0], m)] for m in settings.measures}  # this model's texts per measure
            for rec in context["random_masking_curves"][run].to_dict("records"):
                rows.append({**base, **rec, "subset": mine["rand"][0]})
            rand_pred, rand_fraction = self._baseline(context, payloads, run)
            for name, idx in {name: idx for name, idx in mine.values()}.items():
                # the baseline (mean of the draws) on every subset a measure uses
                at = _in_baseline(mine, idx)
                rows += self._curve_rows(context, base, "rand", name, rand_pred[:, :, at], rand_fraction[:, :, at],
                                         gold[idx])
            for d in range(settings.n_baseline):
                outcome_parts.append(_outcome_frame(base, "rand", d, grid, mine["rand"][1],
                                                    payloads[(run, "rand", d)], gold[mine["rand"][1]],
                                                    context["classes"]))
            for method in settings.measures[1:]:
                payload = payloads[(run, method, 0)]
                name, idx = mine[method]
                rows += self._curve_rows(context, base, method, name, payload["pred"][None],
                                         payload["masked_fraction"][None], gold[idx])
                outcome_parts.append(_outcome_frame(base, method, 0, grid, idx, payload, gold[idx],
                                                    context["classes"]))
        return pd.DataFrame(rows)[CURVE_COLUMNS], pd.concat(outcome_parts, ignore_index=True)

    @staticmethod
    def _curve_rows(context, base, method, subset, pred, fractions, gold) -> list:
        """Curve rows from predictions of shape (draws, ratios, examples), averaged over the draws."""
        settings = context["settings"]
        values = context["score"](pred, gold[None, None, :]).mean(axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # examples with nothing to mask
            masked = np.nanmean(fractions, axis=(0, 2))
        return [{**base, "method": method, "subset": subset, "ratio": float(r), "metric": settings.metric.name,
                 "value": float(v), "n_examples": pred.shape[-1], "mean_masked_fraction": float(f)}
                for r, v, f in zip(settings.grid, values, masked)]

    @staticmethod
    def _areas(context, pred, baseline, gold) -> dict:
        """RACU, ACU and the baseline's area with CIs over the examples: ``{"racu": (point, low, high), ...}``."""
        settings = context["settings"]
        return {kind: example_ci(context["score"], pred, gold, baseline=baseline, grid=settings.grid, kind=kind,
                                 confidence_level=settings.confidence_level, n_resamples=settings.n_bootstrap)
                for kind in ("racu", "acu", "baseline_area")}

    def _racu_frame(self, context, payloads) -> pd.DataFrame:
        from ...importance import get_method

        settings, gold, subsets, converged = (context[k] for k in ("settings", "gold", "subsets", "converged"))
        rows = []
        for run in settings.curve_runs:
            rand_pred, _ = self._baseline(context, payloads, run)
            mine = {m: subsets[(run[0], m)] for m in settings.measures}
            for method in settings.measures[1:]:
                name, idx = mine[method]
                pred = payloads[(run, method, 0)]["pred"][None]
                areas = self._areas(context, pred, rand_pred[None][..., _in_baseline(mine, idx)], gold[idx])
                rows.append({"model": model_label(run[0]), "max_masking_ratio": run[0], "seed": run[1],
                             "converged": converged[run], "method": method, "signed": get_method(method).signed,
                             "subset": name, "n_examples": len(idx), **_area_columns(areas, settings.rules)})
        return pd.DataFrame(rows, columns=RACU_COLUMNS)

    def _racu_summary(self, context, payloads, racu: pd.DataFrame, comparisons=None) -> pd.DataFrame:
        from ...importance import get_method
        from ...utils import seed_ci

        settings, gold, subsets, converged = (context[k] for k in ("settings", "gold", "subsets", "converged"))
        rows = []
        for ratio in settings.masking_ratios:
            seeds = [seed for seed in settings.curve_seed_list if converged[(ratio, seed)]]
            mine = {m: subsets[(ratio, m)] for m in settings.measures}
            for method in settings.measures[1:]:
                name, idx = mine[method]
                row = {"model": model_label(ratio), "max_masking_ratio": ratio, "method": method, "subset": name,
                       "n_examples": len(idx), "n_seeds": len(seeds)}
                if seeds:
                    pred = np.stack([payloads[((ratio, s), method, 0)]["pred"] for s in seeds])
                    at = _in_baseline(mine, idx)
                    base = np.stack([self._baseline(context, payloads, (ratio, s))[0][..., at] for s in seeds])
                    row.update(_area_columns(self._areas(context, pred, base, gold[idx]), settings.rules))
                    for kind in ("racu", "acu"):
                        per_seed = racu[(racu["max_masking_ratio"] == ratio) & (racu["method"] == method)
                                        & racu["seed"].isin(seeds)][kind]
                        _, row[f"{kind}_seed_low"], row[f"{kind}_seed_high"] = seed_ci(per_seed,
                                                                                      settings.confidence_level)
                rows.append(row)
        frame = pd.DataFrame(rows).reindex(columns=_SUMMARY_COLUMNS)
        frame.insert(3, "signed", [get_method(m).signed for m in frame["method"]])
        for column in ("reliable", "racu_stable", "acu_stable"):
            frame[column] = frame[column].fillna(0).astype(bool)  # NaN: no interval, so not reliable or stable
        frame["most_faithful"] = most_faithful_rows(frame, comparisons)
        return frame


def _copy(blocks: dict) -> dict:
    """The blocks of every model's measures as they are now (a round's texts)."""
    return {key: list(b) for key, b in blocks.items()}


def _initial_blocks(context) -> dict:
    """``(masking ratio, measure) -> [texts]``: round 0's texts, the same for every model."""
    return {(r, m): [idx] for r in context["settings"].masking_ratios for m, (_, idx) in context["subsets"].items()}


def _shared_subsets(by_model: dict) -> dict:
    """Per measure, the texts every model measured (the smallest: the blocks are prefixes of one order)."""
    out = {}
    for (_, m), (name, idx) in by_model.items():
        if m not in out or len(idx) < len(out[m][1]):
            out[m] = (name, idx)
    return out


def _open_comparisons(last: pd.DataFrame, costly, settings) -> pd.DataFrame:
    """The inconclusive comparisons with a costly measure that the budget rounds try to decide."""
    rows = last[(last["verdict"] == "inconclusive") & (last["first"].isin(costly) | last["second"].isin(costly))]
    if settings.budget_models is not None:
        rows = rows[rows["model"].isin([model_label(r) for r in settings.budget_models])]
    if settings.budget_pairs is not None:
        pairs = {frozenset(p) for p in settings.budget_pairs}
        rows = rows[[frozenset((a, b)) in pairs for a, b in zip(rows["first"], rows["second"])]]
    return rows


def _texts_to_decide(open_pairs: pd.DataFrame, settings, round_index: int) -> dict:
    """Per costly measure of the open comparisons, the texts that would decide them at the next round's level.

    A comparison with estimate ``d``, margin ``m`` and standard error ``se`` on ``n`` texts is decided
    by an interval of half-width below ``h = max(|d|, m - |d|)`` (equivalent when ``|d| + h < m``, else
    ahead once ``|d| - h > 0``); the next round's half-width is ``z' se sqrt(n / n')``, so
    ``n' = n (z' se / h)^2``, a tenth more as the estimate moves.
    """
    from scipy.stats import norm

    from .._rules import spent_level
    from .._settings import is_costly

    z_next = norm.ppf(1 - (1 - spent_level(settings.confidence_level, round_index)) / 2)
    wanted = {}
    for row in open_pairs.to_dict("records"):
        z_now = norm.ppf(1 - (1 - row["confidence_level"]) / 2)
        se = (row["ci_high"] - row["ci_low"]) / (2 * z_now)
        d, m = abs(row["estimate"]), row["margin"]
        h = max(d, m - d)
        n = int(np.ceil(1.1 * row["n_examples"] * (z_next * se / h) ** 2)) if se > 0 and h > 0 else row["n_examples"]
        for method in (row["first"], row["second"]):
            if is_costly(method):
                wanted[method] = max(wanted.get(method, 0), n)
    return wanted


def _in_baseline(subsets, idx) -> np.ndarray:
    """Positions of the test texts ``idx`` among the ``rand`` baseline's texts (every measure's are among them)."""
    return np.searchsorted(subsets["rand"][1], idx)


def _area_columns(areas: dict, rules) -> dict:
    row = {}
    for kind, (point, low, high) in areas.items():
        row.update({kind: point, f"{kind}_low": low, f"{kind}_high": high})
    # RACU divides by the area random masking leaves.  Its interval stays bounded only where that area is
    # clearly above 0 (Fieller); we ask for the area to be known within about +-50 %: the lower bound of its
    # CI at least half the estimate.  Elsewhere RACU is unstable and ACU is the number to read.
    area, area_low, _ = areas["baseline_area"]
    row["reliable"] = bool(np.isfinite(area_low) and area > 0 and area_low >= RELIABLE_AREA_SHARE * area)
    # stable: the CI over texts is no wider than the rules allow (an unbounded one never is)
    for kind in ("racu", "acu"):
        _, low, high = areas[kind]
        width = rules["stability"][f"{kind}_max_ci_width"]
        row[f"{kind}_stable"] = bool(np.isfinite(low) and np.isfinite(high) and high - low <= width)
    return row


def _outcome_frame(base, method, draw, grid, idx, payload, gold, classes) -> pd.DataFrame:
    n_ratios, n = payload["pred"].shape
    return pd.DataFrame({
        "model": base["model"], "seed": base["seed"], "method": method, "draw": draw,
        "ratio": np.repeat(np.asarray(grid, dtype=float), n),
        "example": np.tile(idx, n_ratios),
        "prediction": classes[payload["pred"].ravel()],
        "correct": (payload["pred"] == gold[None, :]).ravel(),
        "gold_proba": payload["gold_proba"].ravel(),
    })


"""Stage ``explanations``: a few test texts explained by each model, for the report's heatmaps."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...utils import generator
from .._names import model_label
from .._pipeline import Job, Stage
from .._tables import most_faithful_rows
from ._common import test_key

__all__ = ["ExplanationsStage", "explanation_examples"]


def explanation_examples(lengths, gold, n: int, seed: int) -> np.ndarray:
    """``n`` test examples for the heatmaps: classes in turn, texts of moderate length first."""
    rng = generator(seed, 2)
    moderate = (lengths >= 8) & (lengths <= 40)
    picked = []
    pools = {c: list(rng.permutation(np.flatnonzero(gold == c))) for c in np.unique(gold)}
    for pool in pools.values():  # moderate lengths first, keeping the random order otherwise
        pool.sort(key=lambda i: not moderate[i])
    while len(picked) < n and any(pools.values()):
        for pool in pools.values():
            if pool and len(picked) < n:
                picked.append(pool.pop(0))
    return np.asarray(sorted(picked), dtype=np.int64)


def most_faithful_measure(summary: pd.DataFrame, masking_ratios) -> str | None:
    """The most faithful measure of the most masked model (beam search excluded: it is costly to explain)."""
    if summary.empty:  # only the rand baseline was measured: nothing to rank
        return None
    rows = summary[(summary["max_masking_ratio"] == max(masking_ratios))
                   & ~summary["method"].astype(str).str.startswith("beam-")]
    rows = rows.dropna(subset=["acu"]).reset_index(drop=True)
    if rows.empty:
        return None
    return str(rows.loc[most_faithful_rows(rows), "method"].iloc[0])


class ExplanationsStage(Stage):
    """Token importances of a few test texts for the gold class, by each model (its first converged seed).

    The measure is ``explain_method``, else the most faithful measure of the most masked model.
    """

    name = "explanations"
    requires = ("settings", "splits", "models", "fit_keys", "gold", "lengths", "performance", "racu_summary")
    provides = ("explanations", "explain_method", "explained")
    frames = ("explanations",)

    @staticmethod
    def _method(context) -> str | None:
        settings = context["settings"]
        return settings.explain_method or most_faithful_measure(context["racu_summary"], settings.masking_ratios)

    @staticmethod
    def _chosen(context) -> np.ndarray:
        settings = context["settings"]
        return explanation_examples(context["lengths"], context["gold"], settings.n_explain, settings.random_state)

    def jobs(self, context) -> list:
        settings, method = context["settings"], self._method(context)
        if settings.n_explain == 0 or method is None:
            return []
        performance, chosen, models = context["performance"], self._chosen(context), {}
        for run in settings.curve_runs:  # the first converged seed of each model (else its first seed)
            row = performance[(performance["max_masking_ratio"] == run[0]) & (performance["seed"] == run[1])]
            label, converged = model_label(run[0]), bool(row["converged"].iloc[0])
            if label not in models or (not models[label][1] and converged):
                models[label] = (run, converged)
        key = (test_key(context["splits"]), chosen.tolist(), method)
        return [Job(run, (*key, run[1], settings.segment, settings.measure_params.get(method, {})), method=method,
                    n_examples=len(chosen)) for run, _ in models.values()]

    def compute(self, clf, job, context) -> dict:
        sp = context["splits"]
        _, chosen, method, seed, segment, _ = job.key
        frame = clf.explain([sp.X_test[i] for i in chosen], sp.y_test[list(chosen)].tolist(), method=method,
                            segment=segment, random_state=seed,
                            **dict(context["settings"].measure_params.get(method, {})))
        return {"frame": frame}

    def finish(self, context, results) -> dict:
        method = self._method(context)
        if not results:
            return {"explanations": pd.DataFrame(), "explain_method": method, "explained": []}
        chosen, frames = self._chosen(context), []
        for job, payload in results.items():
            # constant columns become keys of an Explanation's per-example table, so concat keeps both
            frame = payload["frame"].assign(model=model_label(job.run[0]), seed=job.run[1])
            frame["test_index"] = chosen[frame["example"].to_numpy()]
            frames.append(frame)
        return {"explanations": pd.concat(frames, ignore_index=True), "explain_method": method,
                "explained": [int(i) for i in chosen]}

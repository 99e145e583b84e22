"""Stage ``performance``: clean test predictions of every model; the gold labels, the scorer, the subsets."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._labels import label_indices
from ..._random import generator
from ...metrics import vectorized_metric
from .._names import model_label
from .._pipeline import Job, Stage
from .._stats import example_ci
from ._common import outcomes, test_key

__all__ = ["PerformanceStage", "choose_subsets"]


def choose_subsets(settings, lengths: np.ndarray, n: int) -> dict:
    """Test examples of each measure: ``name -> (subset name, indices)``.

    All of them, a random subset (the same, nested, for every measure: one permutation seeded by
    ``random_state``), or for beam search the shortest texts (its cost grows like ``K n^2 / 2``).
    """
    order = generator(settings.random_state, 1).permutation(n)
    subsets = {}
    for method in settings.measures:
        cap = settings.max_examples.get(method)
        if cap is None or cap >= n:
            subsets[method] = ("all", np.arange(n))
        elif method.startswith("beam-"):
            subsets[method] = (f"shortest {cap}", np.sort(np.argsort(lengths, kind="stable")[:cap]))
        else:
            subsets[method] = (f"random {cap}", np.sort(order[:cap]))
    return subsets


class PerformanceStage(Stage):
    """Clean test predictions of every model: its metric with a bootstrap CI over the test texts.

    A run whose clean metric is at or below the convergence threshold is flagged ``converged=False``
    and left out of every mean.  This stage also fixes what the later stages share: the gold class
    indices, the vectorised scorer of the metric and the test texts of each measure.
    """

    name = "performance"
    requires = ("settings", "splits", "models", "fit_keys", "fit_info")
    provides = ("gold", "classes", "lengths", "truncated", "score", "subsets", "converged", "performance")
    frames = ("performance",)

    def jobs(self, context) -> list:
        sp = context["splits"]
        return [Job(run, ("test", test_key(sp)), n_examples=len(sp.y_test)) for run in context["settings"].runs]

    def compute(self, clf, job, context) -> dict:
        sp = context["splits"]
        encoding = clf.encode(sp.X_test)
        gold = label_indices(clf.classes_, sp.y_test, "y_test")
        pred, proba = outcomes(clf, encoding, gold)
        return {"pred": pred, "gold_proba": proba, "gold": gold, "classes": clf.classes_.tolist(),
                "lengths": encoding.lengths.astype(np.int64),
                "truncated": np.asarray(encoding.truncated, dtype=bool)}

    def finish(self, context, results) -> dict:
        settings = context["settings"]
        payloads = {job.run: payload for job, payload in results.items()}
        first = payloads[settings.runs[0]]
        gold, classes, lengths = first["gold"], np.asarray(first["classes"]), first["lengths"]
        score = vectorized_metric(settings.metric, classes)
        frame = self._frame(settings, payloads, gold, score, context["fit_info"])
        converged = {(r, s): bool(c) for r, s, c in frame[["max_masking_ratio", "seed", "converged"]].itertuples(
            index=False)}
        return {"gold": gold, "classes": classes, "lengths": lengths, "truncated": first["truncated"],
                "score": score, "subsets": choose_subsets(settings, lengths, len(gold)), "converged": converged,
                "performance": frame}

    @staticmethod
    def _frame(settings, payloads, gold, score, fit_infos) -> pd.DataFrame:
        rows, threshold = [], settings.convergence_threshold
        for run in settings.runs:
            value, low, high = example_ci(score, payloads[run]["pred"][None], gold, kind="value",
                                          confidence_level=settings.confidence_level,
                                          n_resamples=settings.n_bootstrap)
            info = fit_infos[run]
            rows.append({"model": model_label(run[0]), "max_masking_ratio": run[0], "seed": run[1],
                         "metric": settings.metric.name, "value": value, "low": low, "high": high,
                         "n_examples": len(gold), "converged": threshold is None or value > threshold,
                         "epochs": info.get("epochs"), "best_epoch": info.get("best_epoch"),
                         "fit_seconds": info.get("seconds")})
        return pd.DataFrame(rows)

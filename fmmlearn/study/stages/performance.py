"""Stage ``performance``: clean test predictions of every model; the gold labels, the scorer, the subsets."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...metrics import vectorized_metric
from ...utils import generator, interval, label_indices
from .._baselines import blind_predictions
from .._names import model_label
from .._pipeline import Job, Stage
from .._stats import example_ci, paired_difference
from ._common import outcomes, test_key

__all__ = ["PerformanceStage", "choose_subsets", "curve_texts", "subset_name", "subset_order"]


def subset_order(settings, n: int) -> np.ndarray:
    """The one permutation of the test texts that every subset is a prefix of (seeded by ``random_state``)."""
    return generator(settings.random_state, 1).permutation(n)


def curve_texts(settings, n: int) -> np.ndarray:
    """The test texts of the masking stages: all ``n``, or the first ``curve_examples`` of :func:`subset_order`."""
    k = settings.curve_examples
    if k is None or k >= n:
        return np.arange(n)
    return np.sort(subset_order(settings, n)[:k])


def subset_name(idx, n: int) -> str:
    """``"all"`` or ``"random k"``: how the frames name a subset of the ``n`` test texts."""
    return "all" if len(idx) >= n else f"random {len(idx)}"


def choose_subsets(settings, n: int) -> dict:
    """Test examples of each measure: ``name -> (subset name, indices)``.

    The curve texts (:func:`curve_texts`: all of them, or ``curve_examples``), or a random subset of
    them: the first ``k`` of :func:`subset_order`, so the subsets are nested and any two measures share
    the smaller one (the costly measures, with ``costly_examples``, share one).  ``rand``, the
    baseline, always covers every curve text.
    """
    order = subset_order(settings, n)
    n_curve = len(curve_texts(settings, n))
    subsets = {}
    for method in settings.measures:
        cap = settings.max_examples.get(method)
        k = n_curve if cap is None or method == "rand" else min(cap, n_curve)
        subsets[method] = (subset_name(np.arange(k), n), np.arange(n) if k >= n else np.sort(order[:k]))
    return subsets


def _precision_name(dtype) -> str | None:
    """``"bf16"``, ``"fp16"`` or ``None`` (fp32) for an autocast dtype."""
    import torch

    return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype)


class PerformanceStage(Stage):
    """Clean test predictions of every model: its metric with a bootstrap CI over the test texts.

    A run whose clean metric is at or below the convergence threshold is flagged ``converged=False``
    and left out of every mean.  This stage also fixes what the later stages share: the gold class
    indices, the vectorised scorer of the metric and the test texts of each measure.
    """

    name = "performance"
    requires = ("settings", "splits", "models", "fit_keys", "fit_info")
    provides = ("gold", "classes", "lengths", "truncated", "score", "subsets", "subset_order", "curve_texts",
                "converged", "test_predictions", "blind", "performance", "reduced_dtype")
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
                "truncated": np.asarray(encoding.truncated, dtype=bool),
                # the reduced precision this machine runs faster than fp32 (None: fp32 is as fast)
                "reduced_dtype": _precision_name(clf.inference_dtype_)}

    def finish(self, context, results) -> dict:
        settings = context["settings"]
        payloads = {job.run: payload for job, payload in results.items()}
        first = payloads[settings.runs[0]]
        gold, classes, lengths = first["gold"], np.asarray(first["classes"]), first["lengths"]
        score = vectorized_metric(settings.metric, classes=classes)
        blind_name, blind_labels = blind_predictions(context["splits"])
        blind = label_indices(classes, blind_labels, "the blind predictor's predictions")
        frame = self._frame(settings, payloads, gold, score, context["fit_info"], (blind_name, blind))
        converged = {(r, s): bool(c) for r, s, c in frame[["max_masking_ratio", "seed", "converged"]].itertuples(
            index=False)}
        return {"gold": gold, "classes": classes, "lengths": lengths, "truncated": first["truncated"],
                "score": score, "subsets": choose_subsets(settings, len(gold)),
                "subset_order": subset_order(settings, len(gold)), "curve_texts": curve_texts(settings, len(gold)),
                "converged": converged,
                "test_predictions": {run: payloads[run]["pred"] for run in settings.runs},
                "blind": {"name": blind_name, "pred": blind}, "performance": frame,
                "reduced_dtype": first.get("reduced_dtype")}

    @staticmethod
    def _convergence(settings, value, pred, gold, score, blind) -> dict:
        """Whether a fit counts, and why: against a threshold, the input-blind predictor, or not at all."""
        threshold, (name, blind_pred) = settings.convergence_threshold, blind
        out = {"baseline": name, "baseline_value": float(score(blind_pred, gold))}
        difference = paired_difference(score, pred[None], blind_pred[None], gold,
                                       n_resamples=settings.rules["bootstrap"]["n_resamples"],
                                       seed=settings.rules["bootstrap"]["seed"])
        low, high = difference.interval(settings.confidence_level)
        out.update(vs_baseline=difference.estimate, vs_baseline_low=low, vs_baseline_high=high)
        if threshold is None:
            return {**out, "converged": True, "reason": "every fit counts (convergence_threshold=None)"}
        if not isinstance(threshold, str):
            ok = value > threshold
            return {**out, "converged": ok, "reason": f"{settings.metric.name} {value:.3f} "
                                                      f"{'>' if ok else '<='} the threshold {threshold:g}"}
        margin = settings.rules["convergence"]["margin"]
        ok = bool(np.isfinite(low) and low > margin)
        return {**out, "converged": ok, "reason": (
            f"{settings.metric.name} {value:.3f} against the {name} predictor's {out['baseline_value']:.3f}: "
            f"difference {difference.estimate:+.3f} {interval(low, high, 3, style='signed')}, "
            f"{'above' if ok else 'not above'} {margin:g}")}

    def _frame(self, settings, payloads, gold, score, fit_infos, blind) -> pd.DataFrame:
        rows = []
        for run in settings.runs:
            pred = payloads[run]["pred"]
            value, low, high = example_ci(score, pred[None], gold, kind="value",
                                          confidence_level=settings.confidence_level,
                                          n_resamples=settings.n_bootstrap)
            info = fit_infos[run]
            rows.append({"model": model_label(run[0]), "max_masking_ratio": run[0], "seed": run[1],
                         "metric": settings.metric.name, "value": value, "low": low, "high": high,
                         "n_examples": len(gold), **self._convergence(settings, value, pred, gold, score, blind),
                         "epochs": info.get("epochs"), "best_epoch": info.get("best_epoch"),
                         "fit_seconds": info.get("seconds")})
        return pd.DataFrame(rows)

"""The stages' outputs turned into the result's tidy frames, confidence intervals and metadata.

:class:`FramesMixin` is the second half of the study runner: it reads what the
stages left in ``self.outputs`` (per-example predictions at every ratio) and
builds ``performance``, ``curves``/``outcomes``, ``racu``, ``racu_summary``,
``in_distribution``, ``erasure`` and the metadata.  Every mean over seeds uses converged
runs only.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd

from ._stats import example_ci, seed_ci

__all__ = ["ERASURE_COLUMNS", "FramesMixin", "RELIABLE_AREA_SHARE", "model_label", "ranking_metric"]

#: RACU is "reliable" when the CI lower bound of its denominator is at least this share of its estimate.
RELIABLE_AREA_SHARE = 0.5


def model_label(max_masking_ratio: float) -> str:
    """``"plain"`` for 0 (no masking), ``"masked"`` for 1 (the paper's masked fine-tuning), else ``"masked-r"``."""
    if max_masking_ratio == 0:
        return "plain"
    return "masked" if max_masking_ratio == 1 else f"masked-{max_masking_ratio:g}"


class FramesMixin:
    """Result frames of a runner that has ``study``, ``splits``, ``s`` (settings), ``runs``, ``outputs``,
    ``handles``, ``subsets``, ``gold``, ``classes``, ``score`` and ``fit_keys``."""

    def _performance_frame(self) -> pd.DataFrame:
        rows, s = [], self.s
        threshold = s["convergence_threshold"]
        for run in self.runs:
            payload = self.outputs[("performance", run)]
            value, low, high = example_ci(self.score, payload["pred"][None], self.gold, kind="value",
                                          confidence_level=self.study.confidence_level,
                                          n_resamples=self.study.n_bootstrap)
            info = self.handles[run].fit_info
            rows.append({"model": model_label(run[0]), "max_masking_ratio": run[0], "seed": run[1],
                         "metric": s["metric"].name, "value": value, "low": low, "high": high,
                         "n_examples": len(self.gold), "converged": threshold is None or value > threshold,
                         "epochs": info.get("epochs"), "best_epoch": info.get("best_epoch"),
                         "fit_seconds": info.get("seconds")})
        return pd.DataFrame(rows)

    def _baseline(self, run):
        """The ``rand`` draws of a run: predictions and masked fractions of shape (draws, ratios, examples)."""
        draws = [self.outputs[("faithfulness", run, "rand", d)] for d in range(self.study.n_baseline)]
        return np.stack([d["pred"] for d in draws]), np.stack([d["masked_fraction"] for d in draws])

    def _curve_frames(self, converged):
        rows, outcome_parts, s = [], [], self.s
        grid = s["grid"]
        for run in self.runs:
            base = {"model": model_label(run[0]), "max_masking_ratio": run[0], "seed": run[1],
                    "converged": converged[run]}
            for rec in self.outputs[("random masking", run)]["curve"].to_dict("records"):
                rows.append({**base, **rec, "subset": "all"})
            rand_pred, rand_fraction = self._baseline(run)
            for name, idx in {name: idx for name, idx in self.subsets.values()}.items():
                # the baseline (mean of the draws) on every subset a measure uses
                rows += self._curve_rows(base, "rand", name, rand_pred[:, :, idx], rand_fraction[:, :, idx],
                                         self.gold[idx], grid)
            for d in range(self.study.n_baseline):
                payload = self.outputs[("faithfulness", run, "rand", d)]
                outcome_parts.append(_outcome_frame(base, "rand", d, grid, self.subsets["rand"][1], payload,
                                                    self.gold, self.classes))
            for method in s["measures"][1:]:
                payload = self.outputs[("faithfulness", run, method, 0)]
                name, idx = self.subsets[method]
                rows += self._curve_rows(base, method, name, payload["pred"][None], payload["masked_fraction"][None],
                                         self.gold[idx], grid)
                outcome_parts.append(_outcome_frame(base, method, 0, grid, idx, payload, self.gold[idx],
                                                    self.classes))
        columns = ["model", "max_masking_ratio", "seed", "converged", "method", "subset", "ratio", "metric",
                   "value", "n_examples", "mean_masked_fraction"]
        return pd.DataFrame(rows)[columns], pd.concat(outcome_parts, ignore_index=True)

    def _curve_rows(self, base, method, subset, pred, fractions, gold, grid) -> list:
        """Curve rows from predictions of shape (draws, ratios, examples), averaged over the draws."""
        values = self.score(pred, gold[None, None, :]).mean(axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # examples with nothing to mask
            masked = np.nanmean(fractions, axis=(0, 2))
        return [{**base, "method": method, "subset": subset, "ratio": float(r), "metric": self.s["metric"].name,
                 "value": float(v), "n_examples": pred.shape[-1], "mean_masked_fraction": float(f)}
                for r, v, f in zip(grid, values, masked)]

    def _areas(self, pred, baseline, gold) -> dict:
        """RACU, ACU and the baseline's area with CIs over the examples: ``{"racu": (point, low, high), ...}``."""
        return {kind: example_ci(self.score, pred, gold, baseline=baseline, grid=self.s["grid"], kind=kind,
                                 confidence_level=self.study.confidence_level, n_resamples=self.study.n_bootstrap)
                for kind in ("racu", "acu", "baseline_area")}

    @staticmethod
    def _area_columns(areas: dict) -> dict:
        row = {}
        for kind, (point, low, high) in areas.items():
            row.update({kind: point, f"{kind}_low": low, f"{kind}_high": high})
        # RACU divides by the area random masking leaves.  Its interval stays bounded only where that area is
        # clearly above 0 (Fieller); we ask for the area to be known within about +-50 %: the lower bound of its
        # CI at least half the estimate.  Elsewhere RACU is unstable and ACU is the number to read.
        area, area_low, _ = areas["baseline_area"]
        row["reliable"] = bool(np.isfinite(area_low) and area > 0 and area_low >= RELIABLE_AREA_SHARE * area)
        return row

    def _racu_frame(self, converged) -> pd.DataFrame:
        from ..importance import get_measure

        rows = []
        for run in self.runs:
            rand_pred, _ = self._baseline(run)
            for method in self.s["measures"][1:]:
                name, idx = self.subsets[method]
                pred = self.outputs[("faithfulness", run, method, 0)]["pred"][None]
                areas = self._areas(pred, rand_pred[None][..., idx], self.gold[idx])
                rows.append({"model": model_label(run[0]), "max_masking_ratio": run[0], "seed": run[1],
                             "converged": converged[run], "method": method, "signed": get_measure(method).signed,
                             "subset": name, "n_examples": len(idx), **self._area_columns(areas)})
        return pd.DataFrame(rows, columns=_RACU_COLUMNS)

    def _racu_summary(self, racu: pd.DataFrame, converged) -> pd.DataFrame:
        from ..importance import get_measure

        rows = []
        for ratio in self.s["masking_ratios"]:
            seeds = [seed for seed in self.s["seeds"] if converged[(ratio, seed)]]
            for method in self.s["measures"][1:]:
                name, idx = self.subsets[method]
                row = {"model": model_label(ratio), "max_masking_ratio": ratio, "method": method, "subset": name,
                       "n_examples": len(idx), "n_seeds": len(seeds)}
                if seeds:
                    pred = np.stack([self.outputs[("faithfulness", (ratio, s), method, 0)]["pred"] for s in seeds])
                    base = np.stack([self._baseline((ratio, s))[0][..., idx] for s in seeds])
                    row.update(self._area_columns(self._areas(pred, base, self.gold[idx])))
                    for kind in ("racu", "acu"):
                        per_seed = racu[(racu["max_masking_ratio"] == ratio) & (racu["method"] == method)
                                        & racu["seed"].isin(seeds)][kind]
                        _, row[f"{kind}_seed_low"], row[f"{kind}_seed_high"] = seed_ci(per_seed,
                                                                                      self.study.confidence_level)
                rows.append(row)
        frame = pd.DataFrame(rows).reindex(columns=_SUMMARY_COLUMNS)
        frame.insert(3, "signed", [get_measure(m).signed for m in frame["method"]])
        frame["reliable"] = frame["reliable"].fillna(False).astype(bool)
        frame["most_faithful"] = _most_faithful_rows(frame)
        return frame

    def _in_distribution_frame(self, converged) -> pd.DataFrame:
        if self.study.in_distribution is None:
            return pd.DataFrame()
        parts = []
        for run in self.runs:
            report = self.outputs[("in-distribution", run)]["report"].copy()
            report.insert(0, "seed", run[1])
            report.insert(0, "max_masking_ratio", run[0])
            report["converged"] = converged[run]
            parts.append(report)
        frame = pd.concat(parts, ignore_index=True)
        first = ["model", "max_masking_ratio", "seed", "converged"]
        return frame[first + [c for c in frame.columns if c not in first]]

    def _erasure_frame(self, converged) -> pd.DataFrame:
        """The erasure summaries of every model, seed and measure; ``k`` is NaN on the AOPC rows (``aopc``)."""
        from ..faithfulness import AOPC

        parts = []
        for run in self.runs:
            for method, (subset, _) in getattr(self, "erasure_jobs", []):
                summary = pd.DataFrame(self.outputs[("erasure", run, method, subset)]["summary"])
                aopc = summary["k"].map(lambda v: isinstance(v, str) and v == AOPC).to_numpy(dtype=bool)
                parts.append(summary.assign(
                    model=model_label(run[0]), max_masking_ratio=run[0], seed=run[1], converged=converged[run],
                    subset=subset, aopc=aopc,
                    k=[np.nan if total else float(k) for total, k in zip(aopc, summary["k"])]))
        if not parts:
            return pd.DataFrame()
        frame = pd.concat(parts, ignore_index=True)[list(ERASURE_COLUMNS)]
        frame["valid"] = frame["valid"].astype("boolean")
        return frame

    def _metadata(self, timings, started, load_start, wall, machine) -> dict:
        from ..importance import get_measure
        from ..modeling import autocast_dtype_for
        from ._system import load_average

        study, sp, s = self.study, self.splits, self.s
        clf = self.handles[self.runs[0]].get()
        precision = {}
        for method in s["measures"]:
            options = s["measure_params"].get(method, {})
            dtype = autocast_dtype_for(clf, get_measure(method), options.get("precision"))
            precision[method] = "fp32" if dtype is None else str(dtype).replace("torch.", "")
        stages = {}
        for stage, rows in timings.groupby("stage", sort=False):
            stages[stage] = {"seconds": float(rows["seconds"].sum()),
                             "compute_seconds": float(rows["compute_seconds"].sum()),
                             "cache_hits": int(rows["cached"].sum()), "cache_misses": int((~rows["cached"]).sum()),
                             "forward_rows": int(rows["forward_rows"].sum()),
                             "gradient_rows": int(rows["gradient_rows"].sum())}
        inference = clf.inference_dtype_
        params = {k: _jsonable(v) for k, v in study.get_params().items()}
        return {
            "study": params,
            "data": {"name": sp.name, "sizes": sp.sizes(), "classes": [str(c) for c in self.classes],
                     "metric": s["metric"].name, "split_seed": study.random_state,
                     "truncated_test_examples": int(self.outputs[("performance", self.runs[0])]["truncated"].sum())},
            "runs": [{"model": model_label(r), "max_masking_ratio": r, "seed": seed,
                      "fit_key": self.fit_keys[(r, seed)]}
                     for r, seed in self.runs],
            "seeds": s["seeds"],
            "subsets": {m: {"name": name, "n_examples": int(len(idx))} for m, (name, idx) in self.subsets.items()},
            "explain_method": getattr(self, "explain_method", None),
            "explained_examples": [int(i) for i in getattr(self, "explained", [])],
            "convergence_threshold": s["convergence_threshold"],
            "erasure": self._erasure_metadata(),
            "precision": {"inference": "fp32" if inference is None else str(inference).replace("torch.", ""),
                          "device": str(clf.device_), "measures": precision},
            "stages": stages,
            "machine": machine,
            "started": started,
            "wall_seconds": wall,
            "load_average_start": load_start,
            "load_average_end": load_average(),
        }


    def _erasure_metadata(self) -> dict | None:
        from ._engine import ERASURE_ALPHA, ERASURE_MAX_INVALID_FACTOR

        jobs = getattr(self, "erasure_jobs", [])
        if not jobs:
            return None
        return {"measures": [m for m, _ in jobs if m != "rand"], "k": self.s["erasure_k"], "removal": "mask",
                "alpha": ERASURE_ALPHA, "max_invalid_factor": ERASURE_MAX_INVALID_FACTOR,
                "subsets": {f"{m} ({name})": int(len(idx)) for m, (name, idx) in jobs},
                "unchecked": self.erasure_unchecked}


#: Columns of :attr:`StudyResult.erasure`, in order.
ERASURE_COLUMNS = ("model", "max_masking_ratio", "seed", "converged", "method", "subset", "removal", "mode", "k",
                   "aopc", "n_examples", "mean", "ci_low", "ci_high", "n_perturbed", "ood_share", "valid")

_AREAS = ["racu", "racu_low", "racu_high", "acu", "acu_low", "acu_high", "baseline_area", "baseline_area_low",
          "baseline_area_high", "reliable"]
_RACU_COLUMNS = ["model", "max_masking_ratio", "seed", "converged", "method", "signed", "subset", "n_examples",
                 *_AREAS]
_SUMMARY_COLUMNS = ["model", "max_masking_ratio", "method", "subset", "n_examples", "n_seeds", *_AREAS,
                    "racu_seed_low", "racu_seed_high", "acu_seed_low", "acu_seed_high"]


def ranking_metric(rows: pd.DataFrame) -> str:
    """``"racu"`` when every RACU of a model's measures is reliable, else ``"acu"``.

    RACU compares measures on one scale only when each ratio is stable; the
    costly measures run on few texts, where the area random masking leaves
    (RACU's denominator) is noisy.  ACU, the area itself, stays comparable
    across random subsets of the test texts and is far less noisy.
    """
    return "racu" if len(rows) and rows["reliable"].all() and rows["racu"].notna().all() else "acu"


def _most_faithful_rows(frame: pd.DataFrame) -> np.ndarray:
    """Per model, the measure with the highest :func:`ranking_metric`."""
    best = np.zeros(len(frame), dtype=bool)
    for _, rows in frame.groupby("model", sort=False):
        values = rows[ranking_metric(rows)]
        if values.notna().any():
            best[frame.index.get_loc(values.idxmax())] = True
    return best


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


def _jsonable(value):
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return repr(value)

"""Stage ``erasure``: ERASER's comprehensiveness, sufficiency and AOPC, certified in-distribution by MaSF."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ...exceptions import FaithfulnessWarning, UncertifiedErasureWarning
from ...utils import warn
from .._names import model_label
from .._pipeline import Job, Stage
from ._common import test_key

__all__ = ["ERASURE_ALPHA", "ERASURE_COLUMNS", "ERASURE_MAX_INVALID_FACTOR", "ErasureStage", "erasure_jobs"]

#: MaSF level of the erasure stage's validity flag, and how far above it the flagged share may go.
ERASURE_ALPHA, ERASURE_MAX_INVALID_FACTOR = 0.05, 2.0
#: Columns of :attr:`StudyResult.erasure`, in order.
ERASURE_COLUMNS = ("model", "max_masking_ratio", "seed", "converged", "method", "subset", "removal", "mode", "k",
                   "aopc", "n_examples", "mean", "ci_low", "ci_high", "n_perturbed", "ood_share", "valid")


def erasure_jobs(measures, subsets: dict) -> list:
    """``(method, (subset, indices))`` of the erasure stage: each measure on its texts, ``rand`` on each of them."""
    if not measures:  # erasure=None, or "auto" without a default erasure measure
        return []
    jobs = [(m, subsets[m]) for m in measures if m != "rand"]
    texts = list({name: (name, idx) for _, (name, idx) in jobs}.values()) or [subsets["rand"]]
    return jobs + [("rand", pair) for pair in texts]


class ErasureStage(Stage):
    """Comprehensiveness, sufficiency and AOPC (removal by the mask token, the gold label as target).

    Of the ``erasure`` measures and of ``rand`` on the same test texts.  Every erased input is scored
    by the calibration stage's MaSF of the model (the very test of the in-distribution report); a
    number is ``valid`` when at most
    ``ERASURE_MAX_INVALID_FACTOR * ERASURE_ALPHA`` of its erased inputs get ``p < ERASURE_ALPHA``.  When the
    split is too small for MaSF to flag anything at that level, the metrics are computed but not
    certified (``valid`` is ``<NA>``), with one warning.
    """

    name = "erasure"
    requires = ("settings", "splits", "models", "fit_keys", "measured_subsets", "converged", "calibrations")
    provides = ("erasure", "erasure_info")
    frames = ("erasure",)

    def execute(self, context, runtime) -> dict:
        settings, sp = context["settings"], context["splits"]
        plan = erasure_jobs(settings.erasure, context["measured_subsets"])
        if not plan:
            return {"erasure": pd.DataFrame(), "erasure_info": None}
        unchecked, jobs = None, []
        for run in settings.curve_runs:
            masf = context["calibrations"].get(run)
            if masf is None or not masf.pvalue_floor_ < ERASURE_ALPHA:
                unchecked = (f"the in-distribution test's smallest p-value is {masf.pvalue_floor_:.3g} (a "
                             f"conformal level of {round(1 / masf.pvalue_floor_) - 1} texts), not below "
                             f"{ERASURE_ALPHA:g}") if masf else "no in-distribution test was calibrated"
                masf = None
            jobs += [self._job(settings, sp, run, method, subset, idx, masf) for method, (subset, idx) in plan]
        with runtime.progress(self.name, len(jobs)) as bar:
            results = runtime.run_jobs(self, jobs, context, bar)
        if unchecked:
            warn(f"erasure metrics are not certified in-distribution ({unchecked}; about 60 validation texts are "
                 "needed): their valid column is <NA>. Raise n_valid.", FaithfulnessWarning)
        info = {"measures": [m for m, _ in plan if m != "rand"], "k": list(settings.erasure_k), "removal": "mask",
                "alpha": ERASURE_ALPHA, "max_invalid_factor": ERASURE_MAX_INVALID_FACTOR,
                "subsets": {f"{m} ({name})": int(len(idx)) for m, (name, idx) in plan}, "unchecked": unchecked}
        return {"erasure": self._frame(context, results), "erasure_info": info}

    @staticmethod
    def _job(settings, sp, run, method, subset, idx, masf) -> Job:
        # the calibration is a function of the model (in the cache key already) and of the validation texts
        key = ("erasure", masf is not None, test_key(sp), idx.tolist(), method, settings.erasure_k, run[1],
               settings.segment, settings.measure_params.get(method, {}), ERASURE_ALPHA, ERASURE_MAX_INVALID_FACTOR,
               settings.n_bootstrap, settings.confidence_level)
        return Job(run, key, method=method, n_examples=len(idx), data={"masf": masf, "subset": subset},
                   label=f"{model_label(run[0])} seed {run[1]}: {method} ({len(idx)} examples)")

    def compute(self, clf, job, context) -> dict:
        from ...faithfulness import erasure_metrics

        settings, sp = context["settings"], context["splits"]
        idx, method = list(job.key[3]), job.key[4]
        masf = job.data["masf"]
        with warnings.catch_warnings():
            if masf is None:  # the stage says once, and why, that nothing is certified
                warnings.simplefilter("ignore", UncertifiedErasureWarning)
            report = erasure_metrics(clf, [sp.X_test[i] for i in idx], sp.y_test[idx].tolist(), method=method,
                                     k=list(settings.erasure_k), removal="mask", segment=settings.segment, masf=masf,
                                     alpha=ERASURE_ALPHA, max_invalid_factor=ERASURE_MAX_INVALID_FACTOR,
                                     n_bootstrap=settings.n_bootstrap, confidence_level=settings.confidence_level,
                                     random_state=job.run[1], **dict(settings.measure_params.get(method, {})))
        return {"summary": report.summary, "per_example": report.per_example}

    @staticmethod
    def _frame(context, results) -> pd.DataFrame:
        """The erasure summaries of every model, seed and measure; ``k`` is NaN on the AOPC rows (``aopc``)."""
        from ...faithfulness import AOPC

        parts = []
        for job, payload in results.items():
            summary = pd.DataFrame(payload["summary"])
            aopc = summary["k"].map(lambda v: isinstance(v, str) and v == AOPC).to_numpy(dtype=bool)
            parts.append(summary.assign(
                model=model_label(job.run[0]), max_masking_ratio=job.run[0], seed=job.run[1],
                converged=context["converged"][job.run], subset=job.data["subset"], aopc=aopc,
                k=[np.nan if total else float(k) for total, k in zip(aopc, summary["k"])]))
        if not parts:
            return pd.DataFrame()
        frame = pd.concat(parts, ignore_index=True)[list(ERASURE_COLUMNS)]
        frame["valid"] = frame["valid"].astype("boolean")
        return frame

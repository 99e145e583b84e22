"""Stage ``in-distribution``: the MaSF report of every model (are its masked inputs in-distribution?)."""

from __future__ import annotations

import pandas as pd

from .._cache import content_key
from .._names import model_label
from .._pipeline import Job, Stage
from ._common import test_key

__all__ = ["InDistributionStage"]


class InDistributionStage(Stage):
    """The MaSF in-distribution report of ``rand``-masked test sets, per model.

    MaSF is calibrated on the validation split masked like the training batches (with the run's
    seed), then scores the explainer-masked test set at every ratio (docs/ood.md).  Skipped with
    ``in_distribution=None``.
    """

    name = "in-distribution"
    requires = ("settings", "splits", "models", "fit_keys", "converged")
    provides = ("in_distribution",)
    frames = ("in_distribution",)

    def jobs(self, context) -> list:
        settings, sp = context["settings"], context["splits"]
        method = settings.in_distribution
        if method is None:
            return []
        valid_key = content_key(sp.X_valid)
        return [Job(run, (valid_key, test_key(sp), method, settings.grid.tolist(), run[1], settings.segment,
                          model_label(run[0])), method=method, n_examples=len(sp.y_test)) for run in settings.runs]

    def compute(self, clf, job, context) -> dict:
        from ...ood import in_distribution_report

        sp = context["splits"]
        _, _, method, grid, seed, segment, name = job.key
        report = in_distribution_report(clf, sp.X_valid, sp.X_test, sp.y_test.tolist(), method=method,
                                        ratios=list(grid), segment=segment, random_state=seed, model_name=name)
        return {"report": pd.DataFrame(report)}

    def finish(self, context, results) -> dict:
        if not results:
            return {"in_distribution": pd.DataFrame()}
        parts = []
        for job, payload in results.items():
            report = pd.DataFrame(payload["report"]).copy()
            report.insert(0, "seed", job.run[1])
            report.insert(0, "max_masking_ratio", job.run[0])
            report["converged"] = context["converged"][job.run]
            parts.append(report)
        frame = pd.concat(parts, ignore_index=True)
        first = ["model", "max_masking_ratio", "seed", "converged"]
        return {"in_distribution": frame[first + [c for c in frame.columns if c not in first]]}

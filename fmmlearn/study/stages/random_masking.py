"""Stage ``random masking``: the random-masking curve of every model (the paper's check that it tolerates masks)."""

from __future__ import annotations

from .._pipeline import Job, Stage
from ._common import test_key

__all__ = ["RandomMaskingStage"]


class RandomMaskingStage(Stage):
    """Performance when a growing share of random tokens (both segments, exact counts) is masked.

    Fresh masks per ratio, seeded by the run's seed; the curves go into the ``curves`` frame
    (method ``random-masking``) with the faithfulness curves.
    """

    name = "random masking"
    requires = ("settings", "splits", "models", "fit_keys", "curve_texts")
    provides = ("random_masking_curves",)

    def jobs(self, context) -> list:
        settings, sp, idx = context["settings"], context["splits"], context["curve_texts"]
        # the key names the curve texts only when they are a subset (so earlier caches stay valid)
        texts = () if len(idx) == len(sp.y_test) else (idx.tolist(),)
        key = (test_key(sp), settings.grid.tolist(), settings.metric.name, *texts)
        return [Job(run, (*key, run[1]), method="random-masking", n_examples=len(idx)) for run in settings.curve_runs]

    def compute(self, clf, job, context) -> dict:
        from ...faithfulness import random_masking_curve

        settings, sp, idx = context["settings"], context["splits"], context["curve_texts"]
        curve = random_masking_curve(clf, [sp.X_test[i] for i in idx], sp.y_test[idx].tolist(),
                                     ratios=settings.grid.tolist(), metric=settings.metric.name,
                                     random_state=job.run[1])
        return {"curve": curve}

    def finish(self, context, results) -> dict:
        return {"random_masking_curves": {job.run: payload["curve"] for job, payload in results.items()}}

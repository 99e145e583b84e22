"""Stage ``calibration``: one MaSF per model, shared by the in-distribution report and the erasure metrics."""

from __future__ import annotations

import numpy as np

from ..._random import generator
from .._cache import content_key
from .._names import model_label
from .._pipeline import Job, Stage

__all__ = ["CONTROL_MIN_VALID", "CONTROL_SHARE", "CalibrationStage", "calibration_split"]

#: The share of the validation texts held out of calibration as the in-distribution (negative) control...
CONTROL_SHARE = 0.2
#: ... when the validation split has at least this many texts (the rest must still calibrate MaSF well).
CONTROL_MIN_VALID = 80


def calibration_split(settings, n_valid: int) -> tuple[np.ndarray, np.ndarray]:
    """``(calibration, control)`` indices into the validation split (seeded by ``random_state``).

    The control texts are never seen by MaSF: masked like the training batches and scored like the
    test texts, the share MaSF flags among them estimates the test's size on real in-distribution
    texts of this model, the negative control of the in-distribution report.
    """
    if n_valid < CONTROL_MIN_VALID:
        return np.arange(n_valid), np.array([], dtype=np.int64)
    order = generator(settings.random_state, 3).permutation(n_valid)
    n_control = int(round(CONTROL_SHARE * n_valid))
    return np.sort(order[n_control:]), np.sort(order[:n_control])


class CalibrationStage(Stage):
    """MaSF fitted for every model on the validation split masked like the training batches.

    The texts (all of the validation split, less the negative-control texts when it has at least
    ``CONTROL_MIN_VALID``) are masked with the run's seed exactly as ``fit`` masked its batches, one
    group per text, and the folds are sized so that the test's null share at 0.05 lies between 4 and
    5 % (``MaSF(fold_fractions="auto")``).  The in-distribution report and the erasure metrics read
    the same fitted test.  Skipped when neither runs.
    """

    name = "calibration"
    requires = ("settings", "splits", "models", "fit_keys")
    provides = ("calibrations", "calibration_texts")

    def jobs(self, context) -> list:
        settings, sp = context["settings"], context["splits"]
        if settings.in_distribution is None and not settings.erasure:
            return []
        calibration, _ = calibration_split(settings, len(sp.y_valid))
        key = ("calibration", content_key(sp.X_valid), calibration.tolist(), "auto")
        return [Job(run, (*key, run[1]), method="MaSF calibration", n_examples=len(calibration),
                    label=f"{model_label(run[0])} seed {run[1]} ({len(calibration)} texts)") for run in settings.runs]

    def compute(self, clf, job, context) -> dict:
        from ...ood import MaSF, calibration_features

        sp, seed = context["splits"], job.run[1]
        texts = [sp.X_valid[i] for i in job.key[2]]
        features, groups = calibration_features(clf, texts, random_state=seed, return_groups=True)
        return {"masf": MaSF(fold_fractions="auto", random_state=seed).fit(features, groups=groups)}

    def finish(self, context, results) -> dict:
        settings, n_valid = context["settings"], len(context["splits"].y_valid)
        calibration, control = calibration_split(settings, n_valid)
        return {"calibrations": {job.run: payload["masf"] for job, payload in results.items()},
                "calibration_texts": {"calibration": calibration, "control": control}}

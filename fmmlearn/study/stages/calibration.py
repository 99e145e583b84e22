"""Stage ``calibration``: one in-distribution test per model, shared by the in-distribution report and the erasure metrics."""

from __future__ import annotations

import numpy as np

from ...utils import derive_seed, generator
from .._cache import content_key
from .._names import model_label
from .._pipeline import Job, Stage

__all__ = ["CONTROL_MIN_VALID", "CONTROL_SHARE", "CalibrationStage", "calibration_split"]

#: The share of the validation texts held out of calibration as the in-distribution (negative) control...
CONTROL_SHARE = 0.2
#: ... when the validation split has at least this many texts (the rest must still calibrate the test well).
CONTROL_MIN_VALID = 80


def calibration_split(settings, n_valid: int) -> tuple[np.ndarray, np.ndarray]:
    """``(calibration, control)`` indices into the validation split (seeded by ``random_state``).

    The control texts are never seen by the test: masked like the training batches and scored like
    the test texts, the share flagged among them estimates the test's size on real in-distribution
    texts of this model, the negative control of the in-distribution report.
    """
    if n_valid < CONTROL_MIN_VALID:
        return np.arange(n_valid), np.array([], dtype=np.int64)
    order = generator(settings.random_state, 3).permutation(n_valid)
    n_control = int(round(CONTROL_SHARE * n_valid))
    return np.sort(order[n_control:]), np.sort(order[:n_control])


class CalibrationStage(Stage):
    """The study's in-distribution test (``settings.detector``) fitted for every model.

    Its score (MaSF: levels 1 and 2) is fitted on the training texts masked exactly as ``fit``
    masked its first epoch (one more forward pass over the training texts); its conformal level on
    the validation texts masked like the training batches (less the negative-control texts when the
    split has at least ``CONTROL_MIN_VALID``), so the p-values are valid while the score sees every
    training text (docs/ood.md).  The in-distribution report and the erasure metrics read the same
    fitted test; the report also refits it on shares of these features for its power curve, so the
    payload keeps them.  Skipped when neither runs.
    """

    name = "calibration"
    requires = ("settings", "splits", "models", "fit_keys")
    provides = ("calibrations", "calibration_texts", "calibration_features")

    def jobs(self, context) -> list:
        settings, sp = context["settings"], context["splits"]
        if settings.in_distribution is None and not settings.erasure:
            return []
        calibration, _ = calibration_split(settings, len(sp.y_valid))
        key = ("calibration", settings.detector, content_key(sp.X_train), content_key(sp.X_valid),
               calibration.tolist())
        return [Job(run, (*key, run[1]), method=f"{settings.detector} calibration",
                    n_examples=len(sp.y_train) + len(calibration),
                    label=f"{model_label(run[0])} seed {run[1]} ({len(sp.y_train)} + {len(calibration)} texts)")
                for run in settings.curve_runs]

    def compute(self, clf, job, context) -> dict:
        from ...ood import calibration_features, calibration_groups, make_detector

        settings, sp, seed = context["settings"], context["splits"], job.run[1]
        detector = make_detector(settings.detector, random_state=seed)
        # The fit's own seed: the training copy is masked exactly as the first epoch was.
        reference = calibration_features(clf, sp.X_train, random_state=seed, pooling=detector.pooling)
        held_out = calibration_features(clf, [sp.X_valid[i] for i in job.key[4]], random_state=derive_seed(seed, 7),
                                        pooling=detector.pooling)
        groups = calibration_groups(len(sp.X_train), dist_repeats=1)
        detector.fit(reference, groups=groups, calibration=held_out)
        return {"detector": detector, "reference": reference, "groups": groups, "held_out": held_out}

    def finish(self, context, results) -> dict:
        settings, n_valid = context["settings"], len(context["splits"].y_valid)
        calibration, control = calibration_split(settings, n_valid)
        return {"calibrations": {job.run: payload["detector"] for job, payload in results.items()},
                "calibration_texts": {"calibration": calibration, "control": control},
                "calibration_features": {job.run: {k: payload[k] for k in ("reference", "groups", "held_out")}
                                         for job, payload in results.items()}}

"""Fit an in-distribution test on a classifier's texts, masked exactly like its training batches (docs/ood.md)."""

from __future__ import annotations

from ..utils import derive_seed, resolve_seed
from ._features import _masked_features, calibration_groups
from ._registry import make_detector

__all__ = ["fit_detector"]


def fit_detector(clf, detector, X_calib, *, X_train=None, dist_repeats=1, random_state=None, batch_size=None):
    """A detector fitted on ``clf``'s hidden states of texts masked like its training batches.

    Without ``X_train`` the detector is fitted on ``X_calib`` alone (``dist_repeats`` masked copies,
    grouped by text; MaSF splits them into its three folds, the conformal detectors into a score and a
    conformal half).  With ``X_train`` its score (MaSF: levels 1 and 2) is fitted on ``dist_repeats``
    masked copies of ``X_train`` and its conformal level on one masked copy of every ``X_calib``
    text, so the p-values stay valid while the score sees far more texts (docs/ood.md).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    detector : str or detector
        A name of :data:`fmmlearn.ood.DETECTORS` or an instance (cloned).
    X_calib : sequence of str, or sentence pairs
        Held-out in-distribution texts (e.g. the validation split).
    X_train : sequence of str, or sentence pairs, optional
        Texts the score is fitted on (e.g. the training split).
    dist_repeats : int, default=1
        Masked copies of the texts the score is fitted on.
    random_state : int, RandomState or None, default=None
        Seeds the masks and the detector's split; default ``clf.random_state``.
    batch_size : int, optional
        Forward-pass batch size.

    Returns
    -------
    detector
        Fitted.
    """
    seed = resolve_seed(random_state, clf.random_state)
    detector = make_detector(detector, random_state=seed)
    calib = clf.encode(X_calib, name="X_calib")
    if X_train is None:
        features = _masked_features(clf, calib, dist_repeats, seed, batch_size, pooling=detector.pooling)
        return detector.fit(features, groups=calibration_groups(len(calib), dist_repeats=dist_repeats))
    train = clf.encode(X_train, name="X_train")
    reference = _masked_features(clf, train, dist_repeats, seed, batch_size, pooling=detector.pooling)
    # Another seed than the training copies': a calibration text is masked like a fresh training batch.
    held_out = _masked_features(clf, calib, 1, derive_seed(seed, 7), batch_size, pooling=detector.pooling)
    return detector.fit(reference, groups=calibration_groups(len(train), dist_repeats=dist_repeats),
                        calibration=held_out)


"""A scikit-learn scorer of how in-distribution masked inputs stay: model selection that keeps the method valid."""

from __future__ import annotations

import numpy as np
from sklearn.utils._param_validation import validate_params

from ..utils import check_ratios, derive_seed, positive_int, reports_truncation_once, resolve_seed, sample_examples
from ._features import _masked_features, calibration_groups
from ._registry import make_detector
from ._report import _masked_steps, masked_set_features, pvalue_frame

__all__ = ["in_distribution_score", "make_in_distribution_scorer"]

#: Masking ratios the scorer tests: strictly between "nothing masked" and "everything masked".
_INNER_RATIOS = tuple(round(0.1 * k, 1) for k in range(1, 10))


class _InDistributionScorer:
    """``scorer(estimator, X, y) -> float``: one minus the share of masked validation texts the test flags.

    Build it with :func:`make_in_distribution_scorer`.  Greater is better; picklable.
    """

    def __init__(self, detector, method, ratios, level, calibration_share, dist_repeats, max_samples, random_state):
        self.detector = detector
        self.method = method
        self.ratios = ratios
        self.level = level
        self.calibration_share = calibration_share
        self.dist_repeats = dist_repeats
        self.max_samples = max_samples
        self.random_state = random_state

    def get_params(self, deep: bool = True) -> dict:
        """The scorer's parameters (as :func:`make_in_distribution_scorer` takes them)."""
        return {"detector": self.detector, "method": self.method, "ratios": self.ratios, "level": self.level,
                "calibration_share": self.calibration_share, "dist_repeats": self.dist_repeats,
                "max_samples": self.max_samples, "random_state": self.random_state}

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"make_in_distribution_scorer({shown})"

    @reports_truncation_once
    def __call__(self, estimator, X, y, **kwargs) -> float:
        """Score a fitted classifier on the validation fold ``(X, y)``."""
        seed = resolve_seed(self.random_state, 0)
        X, y = sample_examples(X, y, self.max_samples, derive_seed(seed, 2))
        order = np.random.default_rng(derive_seed(seed, 3)).permutation(len(X))
        n_calib = int(round(self.calibration_share * len(X)))
        if n_calib < 4 or len(X) - n_calib < 1:
            raise ValueError(f"X has {len(X)} texts; the in-distribution scorer needs at least 5 (about 50 before "
                             "its test can flag anything at level 0.05): a calibration part and a test part.")
        calib, test = order[:n_calib], order[n_calib:]
        encoding = estimator.encode([X[i] for i in calib], name="X")
        detector = make_detector(self.detector, random_state=seed)
        features = _masked_features(estimator, encoding, self.dist_repeats, seed, pooling=detector.pooling)
        detector.fit(features, groups=calibration_groups(len(encoding), dist_repeats=self.dist_repeats))
        test_encoding, steps = _masked_steps(estimator, [X[i] for i in test], [y[i] for i in test], self.method,
                                             [0.0, *self.ratios], "first", derive_seed(seed, 1))
        steps = [(r, ids) for r, ids in steps if r > 0]
        p = pvalue_frame(detector, masked_set_features(estimator, test_encoding, steps, pooling=detector.pooling))
        return float(1.0 - np.mean(p["p"].to_numpy() < self.level))


@validate_params({"dist_repeats": [positive_int()], "max_samples": [positive_int(), None]},
                 prefer_skip_nested_validation=True)
def make_in_distribution_scorer(detector="mahalanobis-cls-mean-all", *, method="rand", ratios=_INNER_RATIOS, level=0.05,
                                calibration_share=0.5, dist_repeats=2, max_samples=None, random_state=0):
    """Make a scikit-learn scorer of how in-distribution the estimator's masked inputs are.

    The scorer splits the scoring texts (e.g. a validation fold of ``GridSearchCV``) in two: it fits
    the in-distribution test on the first part masked exactly like the estimator's training batches
    (:func:`fit_detector`), masks the second part by ``method`` at every ratio, and returns one minus
    the share of those masked texts the test flags at ``level``.  A masking that keeps inputs
    in-distribution scores about ``1 - level``; a plain fine-tuned model, whose masked inputs are
    out of distribution, scores lower.  Beside ``"accuracy"`` and :func:`fmmlearn.faithfulness_score`
    it lets a search over masking rates weigh the three (docs/ood.md, "Model selection").

    Parameters
    ----------
    detector : str or detector, default="mahalanobis-cls-mean-all"
        The in-distribution test (:data:`fmmlearn.ood.DETECTORS` or an instance).
    method : str, default="rand"
        Importance measure of the masking (random tokens, as in the paper's in-distribution figures).
    ratios : sequence of float in (0, 1), default=(0.1, ..., 0.9)
        Masking ratios tested.
    level : float in (0, 1), default=0.05
        A masked text with ``p < level`` counts as flagged.
    calibration_share : float in (0, 1), default=0.5
        Share of the scoring texts the test is fitted on (the rest are masked and tested).
    dist_repeats : int, default=2
        Masked copies of each calibration text (grouped: the copies of one text share a fold).
    max_samples : int, optional
        Score a seeded random subset of at most this many texts (speed).
    random_state : int, default=0
        Seeds the split, the masks and the test's folds.

    Returns
    -------
    callable
        ``scorer(estimator, X, y) -> float``, greater is better.

    Examples
    --------
    >>> from sklearn.model_selection import GridSearchCV
    >>> from fmmlearn import FaithfulTextClassifier, faithfulness_score
    >>> from fmmlearn.ood import in_distribution_score
    >>> search = GridSearchCV(FaithfulTextClassifier(), {"max_masking_ratio": [0.0, 0.5, 1.0]},  # doctest: +SKIP
    ...                       scoring={"accuracy": "accuracy", "faithfulness": faithfulness_score,
    ...                                "in_distribution": in_distribution_score}, refit="accuracy")
    """
    grid = check_ratios([0.0, *ratios], name="ratios")[1:]
    if np.any(grid >= 1):
        raise ValueError(f"ratios must lie strictly between 0 and 1, got {list(ratios)!r}.")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}.")
    if not 0 < calibration_share < 1:
        raise ValueError(f"calibration_share must lie in (0, 1), got {calibration_share!r}.")
    make_detector(detector)  # an unknown name fails here, not in the middle of a search
    name = detector if isinstance(detector, str) else make_detector(detector)
    return _InDistributionScorer(name, method, tuple(float(r) for r in grid), float(level), float(calibration_share),
                                 int(dist_repeats), max_samples, random_state)


def in_distribution_score(estimator, X, y) -> float:
    """How in-distribution the estimator's masked inputs stay: :func:`make_in_distribution_scorer`'s defaults.

    For ``GridSearchCV(..., scoring={"in_distribution": in_distribution_score})``.

    Parameters
    ----------
    estimator : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs
        Scoring texts (e.g. a validation fold): half calibrate the test, half are masked and tested.
    y : array-like of shape (len(X),)
        Their labels (the masking's target; ``rand`` does not read them).

    Returns
    -------
    float
        One minus the share of masked texts flagged at 0.05; greater is better.
    """
    return _DEFAULT_SCORER(estimator, X, y)


_DEFAULT_SCORER = make_in_distribution_scorer()

"""scikit-learn scorers of faithfulness, for ``GridSearchCV`` and ``cross_validate``."""

from __future__ import annotations

import warnings
from functools import partial
from numbers import Real

import numpy as np
import pandas as pd
from sklearn.utils._param_validation import validate_params

from ..exceptions import FaithfulnessWarning
from ..explanation import eligible_masks, resolve_recursive
from ..importance import get_method
from ..metrics import get_metric
from ..utils import (
    DEFAULT_RATIOS, StrictInterval, check_ratios, check_segment, derive_seed, gold_targets, positive_int,
    reports_truncation_once, resolve_seed, sample_examples, warn,
)
from ._area import acu, flat_baseline_reason, racu
from ._curves import BASELINE, encoded_curve, resolve_metric

__all__ = ["faithful_refit", "faithfulness_score", "make_faithfulness_scorer"]

_FRAME_OPTIONS = ("precision", "internal_batch_size")


def _baseline_values(clf, encoding, target_idx, seeds, **options) -> pd.DataFrame:
    """The ``rand`` curve averaged over one run per seed."""
    curves = [encoded_curve(clf, encoding, target_idx, BASELINE, random_state=s, **options) for s in seeds]
    mean = curves[0].copy()
    mean["value"] = np.mean([c["value"].to_numpy() for c in curves], axis=0)
    return mean


def _has_eligible(clf, encoding, segment: str) -> bool:
    eligible, _ = eligible_masks(clf, encoding, segment=segment)
    return any(e.any() for e in eligible)


class _FaithfulnessScorer:
    """A scikit-learn scorer ``scorer(estimator, X, y) -> float``: RACU (or ACU) of an explanation.

    Build it with :func:`make_faithfulness_scorer`; the attributes are its
    parameters (see there).  Greater is better.  Picklable, so it works with
    ``n_jobs > 1``.
    """

    def __init__(self, method="loo-sign", metric=None, ratios=DEFAULT_RATIOS, relative=True, n_random=1,
                 random_state=0, segment="first", recursive=None, max_samples=None, method_params=None):
        self.method = method
        self.metric = metric
        self.ratios = ratios
        self.relative = relative
        self.n_random = n_random
        self.random_state = random_state
        self.segment = segment
        self.recursive = recursive
        self.max_samples = max_samples
        self.method_params = dict(method_params or {})

    def get_params(self, deep: bool = True) -> dict:
        """The scorer's parameters (as :func:`make_faithfulness_scorer` takes them)."""
        return {"method": self.method, "metric": self.metric, "ratios": self.ratios, "relative": self.relative,
                "n_random": self.n_random, "random_state": self.random_state, "segment": self.segment,
                "recursive": self.recursive, "max_samples": self.max_samples, **self.method_params}

    def __repr__(self) -> str:
        params = self.get_params()
        if tuple(params["ratios"]) == DEFAULT_RATIOS:
            params.pop("ratios")
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
        return f"make_faithfulness_scorer({shown})"

    def _subsample(self, X, y):
        return sample_examples(X, y, self.max_samples, derive_seed(resolve_seed(self.random_state, 0), 2))

    @reports_truncation_once
    def __call__(self, estimator, X, y, **kwargs) -> float:
        """Score a fitted classifier on ``(X, y)``: NaN with a warning if no curve can be formed."""
        X, y = self._subsample(X, y)
        encoding = estimator.encode(X)
        target_idx, _ = gold_targets(estimator, encoding, y)
        if not _has_eligible(estimator, encoding, self.segment):
            warn(f"no token of X can be masked (segment={self.segment!r}); the faithfulness score is "
                 "NaN.", FaithfulnessWarning)
            return float("nan")
        options = dict(ratios=self.ratios, segment=self.segment, metric=self.metric, endpoints={})
        seed = resolve_seed(self.random_state, 0)
        curve = encoded_curve(estimator, encoding, target_idx, self.method, recursive=self.recursive,
                               random_state=derive_seed(seed, 1), **options, **self.method_params)
        baseline = _baseline_values(estimator, encoding, target_idx,
                                    [derive_seed(seed, 0, i) for i in range(self.n_random)], **options)
        direction = resolve_metric(estimator, self.metric).greater_is_better
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FaithfulnessWarning)
            value = (racu if self.relative else acu)(curve, baseline, greater_is_better=direction)
        if not np.isfinite(value):
            reason = flat_baseline_reason(estimator, encoding, target_idx) if self.relative else \
                "the curves are not finite"
            warn(f"{'RACU' if self.relative else 'ACU'} is undefined: {reason}; the faithfulness score is NaN.",
                 FaithfulnessWarning)
        return float(value)


@validate_params(
    {"n_random": [positive_int()], "max_samples": [positive_int(), None], "relative": ["boolean"]},
    prefer_skip_nested_validation=True,
)
def make_faithfulness_scorer(
    method="loo-sign",
    *,
    metric=None,
    ratios=None,
    relative: bool = True,
    n_random: int = 1,
    random_state=0,
    segment: str = "first",
    recursive: bool | None = None,
    max_samples: int | None = None,
    **method_params,
) -> _FaithfulnessScorer:
    """Make a scikit-learn scorer measuring how faithful an explanation of the estimator is.

    The scorer computes :func:`faithfulness_curve` of ``method`` and of the
    random baseline ``rand`` on the scoring data and returns RACU (or ACU).

    Parameters
    ----------
    method : str, ImportanceMethod or explainer value (docs/explainers.md), default="loo-sign"
        Importance measure.  Leave-one-out costs ``n + 1`` forward passes per
        example and step; ``inp-grad-sign`` (one backward pass) is much cheaper
        for model selection.
    metric : str, Metric or callable, optional
        Performance metric of the curves (``"loss"`` works too; the score
        stays greater-is-better).  Default: the primary metric of the scored
        estimator's paper dataset (``estimator.dataset``), else accuracy.
    ratios : array-like of float, optional
        Must start at 0 and end at 1; default ``0, 0.1, ..., 1``.
    relative : bool, default=True
        Return RACU (comparable across models and datasets); ``False``
        returns ACU.
    n_random : int, default=1
        Number of ``rand`` curves averaged into the baseline (less noise).
    random_state : int, default=0
        Seed of the baseline (and of ``rand`` as ``method``, and the
        subsample).
    segment : {"first", "all"}, default="first"
    recursive : bool, optional
        Default: the measure's own.
    max_samples : int, optional
        Score a fixed random subsample of at most this many examples (cost
        control).
    **method_params
        Passed to the measure (and ``precision``, ``internal_batch_size``).

    Returns
    -------
    callable

    Raises
    ------
    ValueError
        For an unknown method or metric, bad ratios, ``n_random < 1`` or
        ``max_samples < 1``.

    Examples
    --------
    >>> from sklearn.model_selection import GridSearchCV
    >>> scorer = make_faithfulness_scorer("inp-grad-sign", n_random=3)
    >>> search = GridSearchCV(clf, {"max_masking_ratio": [0.0, 1.0]},           # doctest: +SKIP
    ...                       scoring={"accuracy": "accuracy", "faithfulness": scorer},
    ...                       refit=faithful_refit(tolerance=0.02))
    """
    measure = get_method(method)
    measure.bind({k: v for k, v in method_params.items() if k not in _FRAME_OPTIONS})
    if metric is not None:
        get_metric(metric)
    grid = tuple(check_ratios(ratios, endpoints=True).tolist())
    check_segment(segment)
    resolve_recursive(measure, recursive=recursive, precomputed=False)
    resolve_seed(random_state, 0)
    # an explainer value is kept as given (it pickles where it can); a built-in measure by its name
    return _FaithfulnessScorer(measure.name if measure.explainer is None else method, metric, grid, bool(relative), int(n_random), random_state, segment,
                              recursive, max_samples, method_params)


_DEFAULT_SCORER = _FaithfulnessScorer()


def faithfulness_score(estimator, X, y) -> float:
    """RACU of ``loo-sign`` against the ``rand`` curve, ratios 0..1: a ready-made scorer.

    Curves use the primary metric of ``estimator.dataset`` (a paper dataset,
    e.g. set by ``FaithfulTextClassifier.for_paper_dataset``), else accuracy.

    Greater is better; NaN (with a :class:`FaithfulnessWarning`) when no curve
    can be formed.  Use :func:`make_faithfulness_scorer` for other settings.

    Parameters
    ----------
    estimator : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs
    y : array-like of shape (n_samples,)

    Returns
    -------
    float

    Examples
    --------
    >>> import math
    >>> from fmmlearn import FaithfulTextClassifier, faithfulness_score
    >>> X, y = ["a wonderful film", "a dreadful film", "great acting", "awful plot"] * 4, ["pos", "neg"] * 8
    >>> clf = FaithfulTextClassifier(max_epochs=1, validation_fraction=0, random_state=0).fit(X, y)
    >>> score = faithfulness_score(clf, X[:8], y[:8])   # RACU: 1 at best, 0 no better than random
    >>> isinstance(score, float) and (math.isnan(score) or score <= 1)
    True
    """
    return _DEFAULT_SCORER(estimator, X, y)


def _refit_index(cv_results, tolerance, accuracy, faithfulness) -> int:
    acc = np.asarray(cv_results[f"mean_test_{accuracy}"], dtype=np.float64)
    faith = np.asarray(cv_results[f"mean_test_{faithfulness}"], dtype=np.float64)
    admissible = np.flatnonzero(acc >= np.nanmax(acc) - tolerance)
    scores = np.where(np.isnan(faith[admissible]), -np.inf, faith[admissible])
    return int(admissible[np.argmax(scores)])


@validate_params({"tolerance": [StrictInterval(Real, 0, None, closed="left")], "accuracy": [str],
                  "faithfulness": [str]}, prefer_skip_nested_validation=True)
def faithful_refit(tolerance: float = 0.02, *, accuracy: str = "accuracy", faithfulness: str = "faithfulness"):
    """A ``refit`` rule for multi-metric search: the most faithful model within an accuracy floor.

    Selecting on faithfulness alone can pick a model that is faithful but
    poor; this keeps the candidates whose mean test accuracy is within
    ``tolerance`` of the best, then picks the highest mean faithfulness
    (ties: the earlier candidate).

    Parameters
    ----------
    tolerance : float, default=0.02
        Allowed accuracy loss (absolute).
    accuracy, faithfulness : str
        Keys of the two scorers in ``scoring``.

    Returns
    -------
    callable
        ``refit(cv_results) -> int`` for ``GridSearchCV(refit=...)``.
    """
    return partial(_refit_index, tolerance=float(tolerance), accuracy=accuracy, faithfulness=faithfulness)

"""A scikit-learn scorer of comprehensiveness or sufficiency, for ``GridSearchCV`` and ``cross_validate``."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd
from sklearn.utils._param_validation import StrOptions, validate_params

from ..exceptions import FaithfulnessWarning
from ..importance import get_method
from ..utils import derive_seed, positive_int, resolve_seed, sample_examples, warn
from ._erasure import _REMOVAL_CONSTRAINTS, AOPC, DEFAULT_K, ERASURE_MODES, _check_choice, check_k, erasure_metrics

__all__ = ["make_erasure_scorer"]

_FORWARD_OPTIONS = ("precision", "internal_batch_size")


class _ErasureScorer:
    """A scikit-learn scorer ``scorer(estimator, X, y) -> float``: an erasure metric, greater is better.

    Build it with :func:`make_erasure_scorer`; the attributes are its
    parameters (see there).  Picklable, so it works with ``n_jobs > 1``.
    """

    def __init__(self, method="loo-sign", mode="comprehensiveness", k=DEFAULT_K, aggregate=AOPC, removal="mask",
                 segment="first", X_calib=None, alpha=0.05, max_invalid_factor=2.0, random_state=0,
                 max_samples=None, method_params=None):
        self.method = method
        self.mode = mode
        self.k = k
        self.aggregate = aggregate
        self.removal = removal
        self.segment = segment
        self.X_calib = X_calib
        self.alpha = alpha
        self.max_invalid_factor = max_invalid_factor
        self.random_state = random_state
        self.max_samples = max_samples
        self.method_params = dict(method_params or {})

    def get_params(self, deep: bool = True) -> dict:
        """The scorer's parameters (as :func:`make_erasure_scorer` takes them)."""
        return {"method": self.method, "mode": self.mode, "k": self.k, "aggregate": self.aggregate,
                "removal": self.removal, "segment": self.segment, "X_calib": self.X_calib, "alpha": self.alpha,
                "max_invalid_factor": self.max_invalid_factor, "random_state": self.random_state,
                "max_samples": self.max_samples, **self.method_params}

    def __repr__(self) -> str:
        shown = [f"{key}=<{len(value)} texts>" if key == "X_calib" and value is not None else f"{key}={value!r}"
                 for key, value in self.get_params().items()]
        return f"make_erasure_scorer({', '.join(shown)})"

    def _subsample(self, X, y):
        return sample_examples(X, y, self.max_samples, derive_seed(resolve_seed(self.random_state, 0), 3))

    def __call__(self, estimator, X, y, **kwargs) -> float:
        """Score a fitted classifier on ``(X, y)``; NaN with a warning if undefined or not valid."""
        X, y = self._subsample(X, y)
        with warnings.catch_warnings():
            # Without X_calib the scorer does not certify (documented); empty k are reported below as NaN.
            warnings.simplefilter("ignore", FaithfulnessWarning)
            report = erasure_metrics(estimator, X, y, method=self.method, k=self.k, mode=self.mode,
                                     removal=self.removal,
                                     segment=self.segment, X_calib=self.X_calib, alpha=self.alpha,
                                     max_invalid_factor=self.max_invalid_factor, n_bootstrap=0,
                                     random_state=self.random_state, **self.method_params)
        summary = report.summary
        row = summary[summary["k"].map(lambda v: v == self.aggregate)].iloc[0]
        value = float(row["mean"])
        if not np.isfinite(value):
            warn(f"no example has a rationale at k={self.aggregate!r} (texts too short for the k grid); "
                 "the erasure score is NaN.", FaithfulnessWarning)
            return float("nan")
        if self.X_calib is not None and row["valid"] is not pd.NA and not bool(row["valid"]):
            warn(f"{row['ood_share']:.0%} of the perturbed inputs are out of distribution for this model "
                 f"(MaSF p < {self.alpha:g}; at most {self.max_invalid_factor * self.alpha:.0%} allowed), "
                 f"so its {self.mode} is not valid; the erasure score is NaN.", FaithfulnessWarning)
            return float("nan")
        # ERASER: comprehensiveness is greater-is-better, sufficiency lower-is-better.
        return value if self.mode == "comprehensiveness" else -value


@validate_params(
    {"mode": [StrOptions(set(ERASURE_MODES))], **_REMOVAL_CONSTRAINTS,
     "max_samples": [positive_int(), None]},
    prefer_skip_nested_validation=True,
)
def make_erasure_scorer(
    method="loo-sign",
    *,
    mode: str = "comprehensiveness",
    k=DEFAULT_K,
    aggregate=AOPC,
    removal: str = "mask",
    segment: str = "first",
    X_calib=None,
    alpha: float = 0.05,
    max_invalid_factor: float = 2.0,
    random_state=0,
    max_samples: int | None = None,
    **method_params,
) -> _ErasureScorer:
    """Make a scikit-learn scorer of an explanation's comprehensiveness or sufficiency (docs/erasure.md).

    The scorer runs :func:`erasure_metrics` on the scoring data with the gold
    labels ``y`` as the target and returns the mean over examples of the AOPC
    (or of one ``k``).  It is greater-is-better, as scikit-learn requires:
    comprehensiveness is returned as is, **sufficiency negated** (lower
    sufficiency is better in ERASER).  With ``X_calib`` the perturbed inputs
    are checked by MaSF, and a metric that is not valid for the candidate
    model scores NaN (with a :class:`FaithfulnessWarning`), so it never wins a
    search (``faithful_refit`` ignores NaN); without it nothing is certified.

    Parameters
    ----------
    method : str, ImportanceMethod or explainer value (docs/explainers.md), default="loo-sign"
        Importance measure; ``inp-grad-sign`` (one backward pass) is much
        cheaper for model selection.
    mode : {"comprehensiveness", "sufficiency"}, default="comprehensiveness"
    k : float or sequence of float, default=(0.01, 0.05, 0.1, 0.2, 0.5)
        Rationale sizes in ``(0, 1]``.
    aggregate : "aopc" or float, default="aopc"
        The mean over the ``k`` grid (AOPC), or one value of ``k``.
    removal : {"mask", "delete"}, default="mask"
    segment : {"first", "all"}, default="first"
    X_calib : sequence of str, or sentence pairs, optional
        In-distribution texts (not from the scoring folds) to fit MaSF on for
        every candidate; enables the validity check.
    alpha, max_invalid_factor : float
        The validity rule of :func:`erasure_metrics`.
    random_state : int, default=0
        Seeds ``rand``, the calibration masks and folds, and the subsample.
    max_samples : int, optional
        Score a fixed random subsample of at most this many examples.
    **method_params
        Passed to the measure (and ``precision``, ``internal_batch_size``).

    Returns
    -------
    callable
        ``scorer(estimator, X, y) -> float``, picklable.

    Raises
    ------
    ValueError
        For an unknown method, mode or removal, bad ``k``, an ``aggregate``
        that is neither ``"aopc"`` nor in ``k``, or ``max_samples < 1``.

    Examples
    --------
    >>> from sklearn.model_selection import GridSearchCV
    >>> scorer = make_erasure_scorer("inp-grad-sign", k=(0.1, 0.2, 0.5), X_calib=X_valid)  # doctest: +SKIP
    >>> search = GridSearchCV(clf, {"max_masking_ratio": [0.0, 1.0]},           # doctest: +SKIP
    ...                       scoring={"accuracy": "accuracy", "faithfulness": scorer},
    ...                       refit=faithful_refit(tolerance=0.02))
    """
    measure = get_method(method)
    measure.bind({key: v for key, v in method_params.items() if key not in _FORWARD_OPTIONS})
    grid = tuple(check_k(k).tolist())
    if isinstance(aggregate, str):
        _check_choice(aggregate, "aggregate", (AOPC,))
    elif not (isinstance(aggregate, numbers.Real) and float(aggregate) in grid):
        raise ValueError(f"aggregate must be 'aopc' or one of k={grid}, got {aggregate!r}.")
    else:
        aggregate = float(aggregate)
    resolve_seed(random_state, 0)
    return _ErasureScorer(measure.name if measure.explainer is None else method, mode, grid, aggregate, removal, segment, X_calib, alpha, max_invalid_factor,
                          random_state, max_samples, method_params)

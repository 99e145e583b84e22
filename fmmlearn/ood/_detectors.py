"""Split-conformal in-distribution tests on pooled hidden states: Mahalanobis and k-nearest-neighbour (numpy).

A conformal detector has two parts (docs/ood.md, "Detectors with power"):

* a **nonconformity score** ``s(x)`` (larger: less like the reference texts), fitted on reference
  features -- the training texts masked like the training batches, several copies per text;
* a **conformal level**: the scores of ``M`` held-out calibration texts drawn exactly like the null
  (the validation texts masked like the training batches), against which a new text gets
  ``p(x) = (1 + #{j : s(c_j) >= s(x)}) / (M + 1)``.

The p-value is valid for *any* score function fitted without the calibration texts, so the score can
use all the training data while the guarantee rests on the calibration texts alone: an
in-distribution text gets ``p < alpha`` with probability at most ``alpha``
(:meth:`ConformalDetector.null_share` gives the exact share, ``(ceil(alpha (M + 1)) - 1) / (M + 1)``).

* :class:`MahalanobisDetector` -- squared Mahalanobis distance to the mean of the reference features
  under a shrinkage (Ledoit-Wolf) covariance (Podolskiy et al., AAAI 2021);
* :class:`KNNDetector` -- distance of the L2-normalised feature to its k-th nearest reference feature
  (Sun et al., ICML 2022).

Both read one pooling of the hidden states (``"cls"``: the position the classification head reads,
``"mean"`` or ``"max"`` over the real tokens) of the last layer or of every layer.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.covariance import LedoitWolf
from sklearn.neighbors import NearestNeighbors
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted, check_random_state

from ..utils import StrictInterval
from ._checks import _check_features
from ..utils import keyword_only

__all__ = ["POOLINGS", "ConformalDetector", "KNNDetector", "MahalanobisDetector", "conformal_pvalues",
           "conformal_null_share", "split_groups"]

#: How hidden states are pooled over a text's positions: ``"cls"`` the position the classification
#: head reads (the first token of an encoder, the last real token of a decoder), ``"mean"`` and
#: ``"max"`` over every real position (special and mask tokens included); ``"cls+mean"`` both of the
#: first two, the mean-pooled layers after the first-token ones (twice the layers).
POOLINGS = ("cls", "mean", "max", "cls+mean")

_MIN_CALIBRATION = 2


def conformal_pvalues(calibration_scores: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Split-conformal p-values ``(1 + #{j : c_j >= s}) / (M + 1)`` of ``scores`` against sorted calibration scores.

    Parameters
    ----------
    calibration_scores : ndarray of shape (M,)
        Nonconformity scores of the calibration texts, sorted ascending.
    scores : ndarray of shape (n,)
        Nonconformity scores of new texts.

    Returns
    -------
    ndarray of shape (n,)
        In ``[1 / (M + 1), 1]``; ties count as "at least as large" (conservative).

    Examples
    --------
    >>> import numpy as np
    >>> from fmmlearn.ood import conformal_pvalues
    >>> conformal_pvalues(np.array([1.0, 2.0, 3.0]), np.array([0.5, 2.0, 9.0])).tolist()
    [1.0, 0.75, 0.25]
    """
    calibration_scores = np.asarray(calibration_scores, dtype=np.float64)
    n_less = np.searchsorted(calibration_scores, np.asarray(scores, dtype=np.float64), side="left")
    m = len(calibration_scores)
    return (1.0 + m - n_less) / (m + 1)


@keyword_only
def conformal_null_share(n_calibration: int, *, alpha: float = 0.05) -> float:
    """The share of in-distribution texts a conformal test with ``n_calibration`` calibration texts flags at ``alpha``.

    ``(ceil(alpha (M + 1)) - 1) / (M + 1)``: the p-values are multiples of ``1 / (M + 1)``, each equally
    likely for an in-distribution text (no ties); ties make the share smaller, never larger.

    Parameters
    ----------
    n_calibration : int
        ``M``, the number of calibration texts.
    alpha : float in (0, 1], default=0.05

    Returns
    -------
    float

    Examples
    --------
    >>> from fmmlearn.ood import conformal_null_share
    >>> round(conformal_null_share(80), 4), conformal_null_share(19)
    (0.0494, 0.0)
    """
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha!r}.")
    m = int(n_calibration) + 1
    return float((math.ceil(alpha * m) - 1) / m)


def split_groups(groups: np.ndarray, share: float, random_state) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of two folds of whole groups: ``(1 - share)`` of the groups, then ``share`` of them.

    Parameters
    ----------
    groups : ndarray of shape (n,)
        Example id of every row (the copies of one text share an id and a fold).
    share : float in (0, 1)
        The second fold's share of the groups.
    random_state : int, RandomState or None

    Returns
    -------
    (first, second) : tuple of ndarray of int64
        Sorted row indices.
    """
    ids, group_of_row = np.unique(groups, return_inverse=True)
    n_second = int(round(share * len(ids)))
    order = check_random_state(random_state).permutation(len(ids))
    in_second = np.zeros(len(ids), dtype=bool)
    in_second[order[:n_second]] = True
    rows = in_second[group_of_row]
    return np.flatnonzero(~rows), np.flatnonzero(rows)


class ConformalDetector(BaseEstimator):
    """Base class of the split-conformal detectors: a fitted score and conformal p-values.

    Subclasses implement ``_fit_score(Z)`` and ``_score(Z)`` on the selected layers ``Z`` of shape
    ``(n, n_selected_layers, hidden_size)``; this class selects the layers, splits the data, holds the
    calibration scores and turns scores into p-values.  Features are arrays of shape
    ``(n_examples, n_layers, hidden_size)`` (a 2-D array is one layer) of the pooling named by the
    ``pooling`` parameter (:func:`fmmlearn.ood.hidden_state_features` computes them).

    Parameters
    ----------
    pooling : {"cls", "mean", "max", "cls+mean"}
        Which pooled features the detector reads (:data:`POOLINGS`); it only names them, the caller
        computes them.
    layers : "last", "all" or int
        The layer(s) scored: the last, every layer (scores summed after dividing each layer's by its
        median on the reference features), or one index into the layers.
    calibration_share : float in (0, 1)
        Without ``calibration=`` in :meth:`fit`: the share of the examples (whole groups) held out of
        the score for the conformal level.
    random_state : int, RandomState or None
        Seeds that split.
    """

    _parameter_constraints = {
        "pooling": [StrOptions(set(POOLINGS))],
        "layers": [StrOptions({"last", "all"}), numbers.Integral],
        "calibration_share": [StrictInterval(numbers.Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    }

    def fit(self, features, y=None, *, groups=None, calibration=None):
        """Fit the score on reference features and the conformal level on calibration features.

        Parameters
        ----------
        features : array-like of shape (n_examples, n_layers, hidden_size) or (n_examples, hidden_size)
            With ``calibration``: the reference features the score is fitted on (e.g. the training
            texts masked like the training batches, several copies).  Without: in-distribution
            features split by ``calibration_share`` into the score's and the conformal level's.
        y : None
            Ignored; present for scikit-learn compatibility.
        groups : array-like of shape (n_examples,), optional
            Example id of each row of ``features``: the copies of one text go to one fold (only used
            when ``features`` is split).
        calibration : array-like of shape (n_calibration, n_layers, hidden_size), optional
            Features of held-out in-distribution texts drawn exactly like the null (one row per
            text), never seen by the score.

        Returns
        -------
        self
        """
        self._validate_params()
        X = _check_features(features, "features")
        if calibration is None:
            groups = np.arange(len(X)) if groups is None else np.asarray(groups)
            if groups.shape != (len(X),):
                raise ValueError(f"groups must have one id per row of features ({len(X)}), got shape "
                                 f"{groups.shape}.")
            fit_rows, calibration_rows = split_groups(groups, self.calibration_share, self.random_state)
            reference, held_out = X[fit_rows], X[calibration_rows]
        else:
            reference = X
            held_out = _check_features(calibration, "calibration", expected=X.shape[1:], what=type(self).__name__)
        if len(held_out) < _MIN_CALIBRATION or len(reference) < _MIN_CALIBRATION:
            raise ValueError(f"{type(self).__name__} needs at least {_MIN_CALIBRATION} reference and "
                             f"{_MIN_CALIBRATION} calibration examples; got {len(reference)} and {len(held_out)}. "
                             "Give more in-distribution texts.")
        self.n_layers_, self.hidden_size_ = X.shape[1:]
        self.layer_indices_ = self._layer_indices(X.shape[1])
        Z = self._selected(reference)
        self._fit_score(Z)
        self.layer_scale_ = np.maximum(np.median(self._layer_scores(Z), axis=0), np.finfo(np.float64).tiny)
        self.n_reference_ = len(reference)
        self.calibration_scores_ = np.sort(self.nonconformity(held_out))
        self.n_calibration_ = len(held_out)
        self.pvalue_floor_ = 1.0 / (self.n_calibration_ + 1)
        return self

    def nonconformity(self, features) -> np.ndarray:
        """The score of every example: larger means less like the reference texts.

        Parameters
        ----------
        features : array-like of shape (n_examples, n_layers, hidden_size) or (n_examples, hidden_size)

        Returns
        -------
        ndarray of shape (n_examples,)
        """
        check_is_fitted(self, "layer_scale_")
        X = _check_features(features, "features", expected=(self.n_layers_, self.hidden_size_),
                            what=type(self).__name__)
        return (self._layer_scores(self._selected(X)) / self.layer_scale_).sum(axis=1)

    def pvalues(self, features) -> np.ndarray:
        """One conformal p-value per example; small means out of distribution.

        Parameters
        ----------
        features : array-like of shape (n_examples, n_layers, hidden_size) or (n_examples, hidden_size)
            Computed exactly like the calibration features.

        Returns
        -------
        ndarray of shape (n_examples,)
            In ``[1 / (M + 1), 1]``.
        """
        check_is_fitted(self, "calibration_scores_")
        return conformal_pvalues(self.calibration_scores_, self.nonconformity(features))

    def null_share(self, alpha: float = 0.05) -> float:
        """The share of in-distribution examples expected to get ``p < alpha`` (:func:`conformal_null_share`).

        Parameters
        ----------
        alpha : float in (0, 1], default=0.05

        Returns
        -------
        float
        """
        check_is_fitted(self, "calibration_scores_")
        return conformal_null_share(self.n_calibration_, alpha=alpha)

    # -- layers ------------------------------------------------------------------------------------

    def _layer_indices(self, n_layers: int) -> np.ndarray:
        if isinstance(self.layers, str):
            return np.arange(n_layers) if self.layers == "all" else np.array([n_layers - 1])
        if not -n_layers <= self.layers < n_layers:
            raise ValueError(f"layers={self.layers} is out of range for features of {n_layers} layer(s).")
        return np.array([self.layers % n_layers])

    def _selected(self, X) -> np.ndarray:
        Z = np.asarray(X[:, self.layer_indices_, :], dtype=np.float64)
        if not np.isfinite(Z).all():
            example, layer, dim = np.argwhere(~np.isfinite(Z))[0]
            raise ValueError(f"features contains NaN or infinite values (first at example {example}, layer "
                             f"{self.layer_indices_[layer]}, dimension {dim}).")
        return Z

    def _layer_scores(self, Z) -> np.ndarray:
        """(n, n_selected_layers) raw scores."""
        return np.stack([self._score(Z[:, i, :], i) for i in range(Z.shape[1])], axis=1)

    def _fit_score(self, Z):  # pragma: no cover - abstract
        raise NotImplementedError

    def _score(self, Z, layer):  # pragma: no cover - abstract
        raise NotImplementedError


class MahalanobisDetector(ConformalDetector):
    """Conformal test on the Mahalanobis distance of pooled hidden states (Podolskiy et al., AAAI 2021).

    The score is ``(z - mu)^T Sigma^-1 (z - mu)``, with ``mu`` the mean and ``Sigma`` the Ledoit-Wolf
    shrinkage covariance of the reference features (one Gaussian for all classes: the question is
    whether an input looks like the inputs, not which class it resembles).  P-values are split
    conformal (docs/ood.md).

    Parameters
    ----------
    pooling : {"cls", "mean", "max", "cls+mean"}, default="cls"
        Which pooled features it reads.
    layers : "last", "all" or int, default="last"
        The layer(s) scored (see :class:`ConformalDetector`).
    calibration_share : float in (0, 1), default=0.5
        Without ``calibration=`` in :meth:`fit`, the share held out for the conformal level.
    random_state : int, RandomState or None, default=0
        Seeds that split.

    Attributes
    ----------
    location_ : ndarray of shape (n_selected_layers, hidden_size)
        The reference features' mean per scored layer.
    precision_ : ndarray of shape (n_selected_layers, hidden_size, hidden_size)
        Inverse of the shrinkage covariance per scored layer.
    layer_indices_ : ndarray of int
        The scored layers.
    layer_scale_ : ndarray of shape (n_selected_layers,)
        The median score of the reference features per layer (divides each layer's score).
    calibration_scores_ : ndarray of shape (n_calibration,)
        Sorted scores of the calibration texts.
    n_reference_, n_calibration_ : int
        Texts (rows) behind the score and the conformal level.
    pvalue_floor_ : float
        ``1 / (n_calibration + 1)``, the smallest p-value.

    Examples
    --------
    >>> import numpy as np
    >>> from fmmlearn.ood import MahalanobisDetector
    >>> rng = np.random.default_rng(0)
    >>> detector = MahalanobisDetector().fit(rng.standard_normal((400, 16)),
    ...                                      calibration=rng.standard_normal((200, 16)))
    >>> p_in = detector.pvalues(rng.standard_normal((200, 16)))
    >>> p_out = detector.pvalues(rng.standard_normal((200, 16)) + 1.5)
    >>> bool(np.mean(p_in < 0.05) < 0.1), bool(np.mean(p_out < 0.05) > 0.9)
    (True, True)
    """

    def __init__(self, pooling="cls", *, layers="last", calibration_share=0.5, random_state=0):
        self.pooling = pooling
        self.layers = layers
        self.calibration_share = calibration_share
        self.random_state = random_state

    def _fit_score(self, Z):
        locations, precisions = [], []
        for i in range(Z.shape[1]):
            estimate = LedoitWolf(store_precision=True, assume_centered=False).fit(Z[:, i, :])
            locations.append(estimate.location_)
            precisions.append(estimate.precision_)
        self.location_, self.precision_ = np.stack(locations), np.stack(precisions)

    def _score(self, Z, layer):
        centred = Z - self.location_[layer]
        return ((centred @ self.precision_[layer]) * centred).sum(axis=1)  # a matrix product: BLAS, not einsum


class KNNDetector(ConformalDetector):
    """Conformal test on the distance to the k-th nearest reference feature (Sun et al., ICML 2022).

    Features are L2-normalised; the score is the Euclidean distance of a text's feature to its
    ``n_neighbors``-th nearest reference feature (for normalised vectors a monotone function of the
    cosine similarity).  P-values are split conformal (docs/ood.md).

    Parameters
    ----------
    n_neighbors : int, default=10
        ``k``.
    pooling : {"cls", "mean", "max", "cls+mean"}, default="cls"
        Which pooled features it reads.
    layers : "last", "all" or int, default="last"
        The layer(s) scored (see :class:`ConformalDetector`).
    calibration_share : float in (0, 1), default=0.5
        Without ``calibration=`` in :meth:`fit`, the share held out for the conformal level.
    random_state : int, RandomState or None, default=0
        Seeds that split.

    Attributes
    ----------
    reference_ : ndarray of shape (n_reference, n_selected_layers, hidden_size), float32
        The normalised reference features.
    layer_indices_, layer_scale_, calibration_scores_, n_reference_, n_calibration_, pvalue_floor_
        As for :class:`MahalanobisDetector`.

    Examples
    --------
    >>> import numpy as np
    >>> from fmmlearn.ood import KNNDetector
    >>> rng = np.random.default_rng(0)
    >>> inliers = lambda n: rng.standard_normal((n, 8)) + 3.0
    >>> detector = KNNDetector(n_neighbors=5).fit(inliers(400), calibration=inliers(200))
    >>> p_out = detector.pvalues(rng.standard_normal((100, 8)) - 3.0)
    >>> bool(np.mean(p_out < 0.05) > 0.9)
    True
    """

    _parameter_constraints = {**ConformalDetector._parameter_constraints,
                              "n_neighbors": [StrictInterval(numbers.Integral, 1, None, closed="left")]}

    def __init__(self, n_neighbors=10, *, pooling="cls", layers="last", calibration_share=0.5, random_state=0):
        self.n_neighbors = n_neighbors
        self.pooling = pooling
        self.layers = layers
        self.calibration_share = calibration_share
        self.random_state = random_state

    def _fit_score(self, Z):
        if len(Z) < self.n_neighbors:
            raise ValueError(f"n_neighbors={self.n_neighbors} but only {len(Z)} reference examples; give more "
                             "texts or a smaller n_neighbors.")
        self.reference_ = _normalised(Z).astype(np.float32)

    def _score(self, Z, layer):
        # Brute force on the stored references: exact, and cheap at a few thousand texts.
        search = NearestNeighbors(n_neighbors=self.n_neighbors, algorithm="brute")
        search.fit(self.reference_[:, layer, :])
        distances, _ = search.kneighbors(_normalised(Z).astype(np.float32))
        return distances[:, -1].astype(np.float64)


def _normalised(Z: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(Z, axis=-1, keepdims=True)
    return Z / np.maximum(norms, np.finfo(np.float64).tiny)

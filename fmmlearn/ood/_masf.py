"""MaSF (Max-Simes-Fisher): an in-distribution test on hidden-state features (numpy/scipy only)."""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted, check_random_state

from ..utils import StrictInterval, warn
from ._checks import _check_dtype, _check_features
from ._combine import _REFERENCE_FISHER_EPS, _simes_of_sorted
from ._detectors import split_groups
from ._ecdf import (_chunks, _count_less_equal_1d, _in_sample_counts, _right_tail_pvalues, _search_counts,
                    _tail_counts, _two_sided_from_tail, _two_sided_pvalues)
from ..utils import keyword_only

__all__ = ["CALIBRATIONS", "MaSF", "MaSFStatistics", "min_calibration_size", "null_share", "sized_fold_fractions"]

CALIBRATIONS = ("calibrated", "reference")
_MIN_FOLD_SIZE = 2


class MaSF(BaseEstimator):
    """Max-Simes-Fisher in-distribution test on hidden-state features.

    Fit on the features of in-distribution (calibration) examples, then
    :meth:`pvalues` gives one p-value per new example; a small p-value means
    the example does not look like the calibration data.

    Parameters
    ----------
    calibration : {"calibrated", "reference"}, default="calibrated"
        ``"calibrated"`` splits the calibration examples at random into three
        disjoint folds, one per level (all rows of one ``groups`` id in the
        same fold), and uses conformal p-values
        ``(1 + #{a >= s}) / (N + 1)`` (two-sided ones doubled and clipped to
        1), so an in-distribution example gets ``p <= alpha`` with probability
        at most ``alpha``.  ``"reference"`` is exactly the paper's procedure
        (docs/ood.md): all examples define all three levels in-sample, ECDF
        ``#{a < s} / N`` and ``min(F, 1 - F)`` two-sided p-values, Fisher
        with ``ln(p + 1e-8)``.  It is far from calibrated (many
        in-distribution examples get tiny p-values), so read its numbers as
        comparative only.  ``docs/ood.md`` has measured error rates and power.
    fold_fractions : tuple of 3 floats or "auto", default=(1/3, 1/3, 1/3)
        Calibrated mode only: the shares of the calibration examples for the
        level-1, level-2 and level-3 references.  They must be positive and
        sum to 1; every fold needs at least 2 examples.  ``"auto"``
        (:func:`sized_fold_fractions`) sizes the level-3 fold, near a third,
        so that the test's null share at 0.05 lies between 4 % and 5 %
        (p-values are multiples of ``1 / (N3 + 1)``: equal thirds of 100
        texts give 2.9 %).
    dtype : {"float32", "float16"}, default="float32"
        Precision the features are rounded to before anything is compared.
        ``"float16"`` mimics the reference's mixed-precision features, where
        rounding creates ties (docs/ood.md).
    chunk_size : int, default=1024
        Examples scored at once; bounds the temporary memory to roughly
        ``chunk_size * hidden_size * 100`` bytes.  Results do not depend on it.
    random_state : int, RandomState instance or None, default=0
        Seeds the assignment of calibration examples to folds (calibrated
        mode only; the reference mode is deterministic).

    Attributes
    ----------
    n_layers_ : int
        Number of layers (L + 1 for an L-layer transformer with embeddings).
    hidden_size_ : int
        Number of dimensions per layer.
    n_calibration_ : int
        Number of examples given to ``fit``.
    calibration_ : str
        The ``calibration`` used by ``fit`` (scoring follows it).
    dtype_ : numpy.dtype
        The ``dtype`` used by ``fit``.
    fold_indices_ : tuple of 3 ndarray
        Indices (into ``fit``'s features) of the examples that define the
        level-1, level-2 and level-3 references.  In reference mode all three
        are ``arange(n_calibration_)``.
    level1_reference_ : ndarray of shape (n_layers, hidden_size, N1), float32
        Sorted feature values per (layer, dimension).
    level2_reference_ : ndarray of shape (n_layers, N2)
        Sorted per-layer Simes statistics of the level-2 examples.
    level3_reference_ : ndarray of shape (N3,)
        Sorted Fisher statistics of the level-3 examples.
    pvalue_floor_ : float
        The smallest p-value the test can give: ``1 / (N3 + 1)`` when calibrated (an example can be
        flagged at ``alpha`` only if this is below ``alpha``), 0 for the reference procedure.
        :meth:`null_share` is the share of in-distribution examples expected below a level.

    Notes
    -----
    Features are an array of shape ``(n_examples, n_layers, hidden_size)``,
    e.g. the max-pooled hidden states of every layer (docs/ood.md).  A 2-D
    array ``(n_examples, hidden_size)`` is read as a single layer; Fisher's
    step then only re-calibrates that layer's p-value.

    Fitting sorts each (layer, dimension) column of the calibration features
    once, ``O(N log N)``, and reads every calibration example's ECDF counts off
    that order; scoring is a vectorised binary search, ``O(log N)`` per example
    and feature, over chunks of ``chunk_size`` examples.  The level-1
    references take as much memory as their features in float32
    (``n_layers * hidden_size * 4`` bytes per example); fitting needs about
    ``22 * N * hidden_size`` bytes of temporaries on top.

    Examples
    --------
    >>> import numpy as np
    >>> from fmmlearn.ood import MaSF
    >>> rng = np.random.default_rng(0)
    >>> masf = MaSF().fit(rng.standard_normal((300, 3, 16)))
    >>> p_in = masf.pvalues(rng.standard_normal((100, 3, 16)))
    >>> p_out = masf.pvalues(rng.standard_normal((100, 3, 16)) + 2.0)
    >>> bool(np.mean(p_in < 0.05) < 0.2), bool(np.mean(p_out < 0.05) > 0.9)
    (True, True)
    """

    _parameter_constraints = {
        "calibration": [StrOptions(set(CALIBRATIONS))],
        "fold_fractions": ["array-like", StrOptions({"auto"})],
        "dtype": [StrOptions({"float32", "float16"}), type, np.dtype],
        "chunk_size": [StrictInterval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, calibration="calibrated", *, fold_fractions=(1 / 3, 1 / 3, 1 / 3), dtype="float32",
                 chunk_size=1024, random_state=0):
        self.calibration = calibration
        self.fold_fractions = fold_fractions
        self.dtype = dtype
        self.chunk_size = chunk_size
        self.random_state = random_state

    # -- fitting -------------------------------------------------------------------------------------

    #: The pooled features MaSF reads: the max over the positions (docs/ood.md).
    pooling = "max"

    def fit(self, features, y=None, *, groups=None, calibration=None):
        """Build the three levels of reference statistics from calibration features.

        Parameters
        ----------
        features : array-like of shape (n_examples, n_layers, hidden_size) or (n_examples, hidden_size)
            Features of in-distribution examples (e.g. the validation split,
            masked like the training batches).  With ``calibration``: the
            features levels 1 and 2 are fitted on (e.g. the training texts
            masked like the training batches, several copies grouped by
            ``groups``).
        y : None
            Ignored; present for scikit-learn compatibility.
        groups : array-like of shape (n_examples,), optional
            Example id of each row.  Calibrated mode puts all rows of one id
            into the same fold, as it must when rows are differently masked
            copies of one example (``dist_repeats > 1``): copies are
            correlated, and a copy in another fold would make the folds
            dependent (docs/ood.md measures the effect).  Without ``groups``
            every row is its own example.  Ignored in reference mode.
        calibration : array-like of shape (n_calibration, n_layers, hidden_size), optional
            Calibrated mode only: held-out in-distribution texts (one row
            each) that alone make the level-3 (conformal) reference, while
            ``features`` are split between levels 1 and 2 in the proportion
            of the first two ``fold_fractions``.  The p-values stay valid (the
            score never sees these texts) and levels 1-2 can use far more
            texts (docs/ood.md).

        Returns
        -------
        self : MaSF
        """
        self._validate_params()
        self.dtype_ = _check_dtype(self.dtype)
        self.calibration_ = self.calibration
        X = _check_features(features, "features")
        if calibration is not None:
            X, folds = self._with_held_out_level3(X, _check_groups(groups, X.shape[0]), calibration)
        else:
            folds = self._fold_indices(X.shape[0], _check_groups(groups, X.shape[0]))
        self.n_calibration_, self.n_layers_, self.hidden_size_ = X.shape
        self.fold_indices_ = folds
        self.level1_reference_, simes = self._fit_level1(X, folds[0])
        self.level2_reference_ = np.ascontiguousarray(np.sort(simes[folds[1]], axis=0).T)
        level3 = self._fisher_from_layer_pvalues(self._layer_pvalues(simes[folds[2]]))
        self.level3_reference_ = np.sort(level3)
        # calibrated: the smallest conformal p-value, 1 / (N3 + 1); the reference procedure can reach 0
        self.pvalue_floor_ = 1.0 / (len(level3) + 1) if self.calibration_ == "calibrated" else 0.0
        return self

    def null_share(self, alpha: float = 0.05) -> float:
        """The share of in-distribution examples expected to get ``p < alpha``: the test's size at ``alpha``.

        Calibrated p-values take the values ``k / (N3 + 1)`` (``N3`` the level-3 fold), each with
        probability ``1 / (N3 + 1)`` for an in-distribution example, so the share below ``alpha`` is
        ``(ceil(alpha (N3 + 1)) - 1) / (N3 + 1)`` -- at most ``alpha``, and less when the fold is small
        (33 texts: 1/34 = 2.9 % at 0.05).  Ties in the features make it smaller still, never larger.
        NaN for ``calibration="reference"``, whose p-values are not calibrated (docs/ood.md).

        Parameters
        ----------
        alpha : float in (0, 1], default=0.05

        Returns
        -------
        float
        """
        check_is_fitted(self, "level3_reference_")
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}.")
        if self.calibration_ != "calibrated":
            return float("nan")
        return null_share(len(self.level3_reference_), alpha=alpha)

    def _fit_level1(self, X, reference_rows):
        """Sorted level-1 references and the Simes statistics of every calibration example.

        Every example is compared with the level-1 references by one sort of
        each (layer, dimension) column of all examples, rather than a binary
        search per example.
        """
        n, n_layers, hidden = X.shape
        is_reference = np.zeros(n, dtype=bool)
        is_reference[reference_rows] = True
        references = np.empty((n_layers, hidden, len(reference_rows)), dtype=np.float32)
        simes = np.empty((n, n_layers))
        for layer in range(n_layers):
            values = self._layer_values(X, slice(None), layer)
            references[layer] = (values if len(reference_rows) == n else values[reference_rows]).T
            references[layer].sort(axis=1)
            n_less, n_equal = _in_sample_counts(values, is_reference)
            del values
            for chunk in _chunks(n, self.chunk_size):
                simes[chunk, layer] = self._simes_of_counts(n_less[chunk], n_equal[chunk], len(reference_rows))
        return references, simes

    def _fold_indices(self, n, groups=None):
        """Indices of the level-1, -2 and -3 reference examples (identical in reference mode).

        With ``groups`` the groups, not the rows, are shuffled and split by
        ``fold_fractions``; without, every row is a group of its own (the
        same folds as ``groups=arange(n)``).
        """
        if self.calibration == "reference":
            if n < _MIN_FOLD_SIZE:
                raise ValueError(f"features has {n} example(s); calibration='reference' needs at least "
                                 f"{_MIN_FOLD_SIZE}.")
            everything = np.arange(n)
            return everything, everything, everything
        units = n if groups is None else len(np.unique(groups))
        fractions = _check_fold_fractions(self.fold_fractions, units)
        if groups is not None:
            return self._group_folds(groups, fractions)
        sizes = _fold_sizes(n, fractions)
        bounds = np.cumsum(sizes)
        if sizes.min() < _MIN_FOLD_SIZE:
            raise ValueError(
                f"features has {n} examples, too few for calibration='calibrated' with fold_fractions="
                f"({', '.join(f'{f:.3g}' for f in fractions)}): the folds would get {tuple(int(s) for s in sizes)} "
                f"examples and each needs at least {_MIN_FOLD_SIZE}, so at least "
                f"{min_calibration_size(fractions)} examples are needed. Give more calibration examples, "
                "change fold_fractions, or use calibration='reference'.")
        if 1.0 / (sizes[2] + 1) > 0.05:
            warn(f"The level-3 fold has only {sizes[2]} examples, so no p-value can be below "
                 f"{1.0 / (sizes[2] + 1):.3g}; use more calibration examples.")
        order = check_random_state(self.random_state).permutation(n)
        # Sorted indices keep memory access to the features in order.
        return tuple(np.sort(fold) for fold in np.split(order, bounds[:2]))

    def _with_held_out_level3(self, X, groups, calibration):
        """All rows (``X`` then ``calibration``) and the folds: levels 1-2 from ``X``, level 3 ``calibration``."""
        if self.calibration == "reference":
            raise ValueError("calibration= (a held-out level-3 set) needs calibration='calibrated'; the reference "
                             "procedure fits every level on the same examples.")
        held_out = _check_features(calibration, "calibration", expected=X.shape[1:])
        fractions = _check_fold_fractions((1 / 3, 1 / 3, 1 / 3) if isinstance(self.fold_fractions, str)
                                          else self.fold_fractions)
        level2_share = fractions[1] / (fractions[0] + fractions[1])
        level1, level2 = split_groups(np.arange(len(X)) if groups is None else groups, level2_share,
                                      self.random_state)
        if min(len(level1), len(level2), len(held_out)) < _MIN_FOLD_SIZE:
            raise ValueError(f"features ({len(X)} rows) and calibration ({len(held_out)} rows) are too few: levels "
                             f"1 and 2 get {len(level1)} and {len(level2)} rows and level 3 {len(held_out)}; each "
                             f"needs at least {_MIN_FOLD_SIZE}.")
        rows = np.concatenate([np.asarray(X), np.asarray(held_out, dtype=np.asarray(X).dtype)])
        return rows, (level1, level2, np.arange(len(X), len(rows)))

    def _group_folds(self, groups, fractions):
        """Folds of whole groups: the groups are shuffled and split by ``fractions`` of their number."""
        ids, group_of_row = np.unique(groups, return_inverse=True)
        sizes = _fold_sizes(len(ids), fractions)
        order = check_random_state(self.random_state).permutation(len(ids))
        fold_of_group = np.empty(len(ids), dtype=np.int64)
        fold_of_group[order] = np.repeat(np.arange(3), sizes)
        fold_of_row = fold_of_group[group_of_row]
        folds = tuple(np.flatnonzero(fold_of_row == k) for k in range(3))
        rows = np.array([len(f) for f in folds])
        if sizes.min() < 1 or rows.min() < _MIN_FOLD_SIZE:
            raise ValueError(
                f"features has {len(groups)} rows of {len(ids)} groups, too few for calibration='calibrated' "
                f"with fold_fractions=({', '.join(f'{f:.3g}' for f in fractions)}): whole groups give the folds "
                f"{tuple(int(r) for r in rows)} rows and each needs at least {_MIN_FOLD_SIZE}. Give more "
                "calibration examples, change fold_fractions, or use calibration='reference'.")
        if 1.0 / (rows[2] + 1) > 0.05:
            warn(f"The level-3 fold has only {rows[2]} examples, so no p-value can be below "
                 f"{1.0 / (rows[2] + 1):.3g}; use more calibration examples.")
        return folds

    # -- scoring -------------------------------------------------------------------------------------

    def pvalues(self, features):
        """One MaSF p-value per example; small means out-of-distribution.

        Parameters
        ----------
        features : array-like of shape (n_examples, n_layers, hidden_size) or (n_examples, hidden_size)
            Features computed exactly like the calibration features.

        Returns
        -------
        p : ndarray of shape (n_examples,)
            In ``[1 / (N3 + 1), 1]`` in calibrated mode, in ``[0, 1]`` in
            reference mode (``N3`` = number of level-3 reference examples).
        """
        return self.statistics(features).pvalues

    def statistics(self, features):
        """All intermediate MaSF statistics of new examples.

        Parameters
        ----------
        features : array-like of shape (n_examples, n_layers, hidden_size) or (n_examples, hidden_size)

        Returns
        -------
        stats : MaSFStatistics
            Named tuple with ``simes`` (n, n_layers): per-layer Simes
            statistics; ``layer_pvalues`` (n, n_layers): their p-values
            against the level-2 references; ``fisher`` (n,): the Fisher
            statistics; ``pvalues`` (n,): the final p-values.
        """
        check_is_fitted(self, "level3_reference_")
        X = _check_features(features, "features", expected=(self.n_layers_, self.hidden_size_))
        simes = self._simes_statistics(X)
        layer_p = self._layer_pvalues(simes)
        fisher = self._fisher_from_layer_pvalues(layer_p)
        n_less, _ = _count_less_equal_1d(self.level3_reference_, fisher)
        final = _right_tail_pvalues(n_less, self.level3_reference_.size, self.calibration_)
        return MaSFStatistics(simes, layer_p, fisher, final)

    def _simes_statistics(self, X):
        """Level 2 statistics of new examples: per-layer Simes combination of the dimension p-values."""
        out = np.empty((X.shape[0], X.shape[1]))
        for layer, references in enumerate(self.level1_reference_):
            for chunk in _chunks(X.shape[0], self.chunk_size):      # bounds the temporaries
                n_less, n_equal = _search_counts(references, self._layer_values(X, chunk, layer))
                out[chunk, layer] = self._simes_of_counts(n_less, n_equal, references.shape[1])
        return out

    def _simes_of_counts(self, n_less, n_equal, n_ref):
        """Per-example Simes statistic of the level-1 p-values given ECDF counts (m, hidden)."""
        tail = np.ascontiguousarray(_tail_counts(n_less, n_equal, n_ref, self.calibration_), dtype=np.int32)
        tail.sort(axis=1)                       # sorts the p-values too, see _tail_counts
        return _simes_of_sorted(_two_sided_from_tail(tail, n_ref, self.calibration_), axis=1)

    def _layer_pvalues(self, simes):
        """Level 2 p-values of Simes statistics (n, n_layers) against the level-2 references."""
        out = np.empty_like(simes)
        n_ref = self.level2_reference_.shape[1]
        for layer, reference in enumerate(self.level2_reference_):
            n_less, n_equal = _count_less_equal_1d(reference, simes[:, layer])
            out[:, layer] = _two_sided_pvalues(n_less, n_equal, n_ref, self.calibration_)
        return out

    def _fisher_from_layer_pvalues(self, layer_p):
        """Level 3 statistics: Fisher's ``-2 sum_l ln p_l`` (with the reference's +1e-8 if asked)."""
        eps = _REFERENCE_FISHER_EPS if self.calibration_ == "reference" else 0.0
        total = np.zeros(layer_p.shape[0])
        # An explicit loop over layers fixes the summation order (np.sum is pairwise),
        # which keeps results identical to a one-example-at-a-time computation.
        for layer in range(layer_p.shape[1]):
            total += np.log(layer_p[:, layer] + eps)
        return -2.0 * total

    def _layer_values(self, X, rows, layer):
        """One layer of some examples as float32 (rounded through ``dtype``), checked to be finite."""
        values = np.asarray(X[rows, layer, :], dtype=np.float32)
        if self.dtype_ != np.float32:
            with np.errstate(over="ignore"):          # overflow becomes inf, reported below
                values = values.astype(self.dtype_).astype(np.float32)
        if not np.isfinite(values).all():
            example, dim = np.argwhere(~np.isfinite(values))[0]
            example = np.arange(X.shape[0])[rows][example]
            where = "" if self.dtype_ == np.float32 else f" after rounding to {self.dtype_}"
            raise ValueError(f"features contains NaN or infinite values{where} (first at example {example}, "
                             f"layer {layer}, dimension {dim}).")
        return values


class MaSFStatistics(NamedTuple):
    """Intermediate statistics returned by :meth:`MaSF.statistics`.

    Attributes
    ----------
    simes : ndarray of shape (n, n_layers)
        Per-layer Simes statistics of the dimension p-values.
    layer_pvalues : ndarray of shape (n, n_layers)
        P-values of the Simes statistics against the level-2 references.
    fisher : ndarray of shape (n,)
        Fisher statistics of the layer p-values.
    pvalues : ndarray of shape (n,)
        Final MaSF p-values.
    """

    simes: np.ndarray
    layer_pvalues: np.ndarray
    fisher: np.ndarray
    pvalues: np.ndarray



def _fold_sizes(n, fractions):
    """Sizes of the level-1, -2 and -3 folds of ``n`` calibration examples (rounded cumulative shares)."""
    return np.diff(np.rint(np.cumsum(fractions) * n).astype(int), prepend=0)


@keyword_only
def null_share(n_level3: int, *, alpha: float = 0.05) -> float:
    """The share of in-distribution examples a calibrated MaSF with a level-3 fold of ``n_level3`` flags at ``alpha``.

    ``(ceil(alpha (N3 + 1)) - 1) / (N3 + 1)``: the conformal p-values are the multiples of
    ``1 / (N3 + 1)``, equally likely for an in-distribution example (:meth:`MaSF.null_share`).

    Examples
    --------
    >>> from fmmlearn.ood import null_share
    >>> round(null_share(33), 4), round(null_share(40), 4), null_share(19)
    (0.0294, 0.0488, 0.0)
    """
    m = int(n_level3) + 1
    return float((math.ceil(alpha * m) - 1) / m)


@keyword_only
def sized_fold_fractions(n: int, *, alpha: float = 0.05, null_share_range=(0.04, 0.05)) -> tuple:
    """Fold shares for ``n`` calibration units whose level-3 fold gives a null share in ``null_share_range``.

    The level-3 size is the one nearest ``n / 3`` between ``n / 5`` and ``n / 2`` whose
    :func:`null_share` at ``alpha`` lies in the range; levels 1 and 2 share the rest equally.  Where
    no size qualifies (fewer than about 60 units for 0.05), equal thirds.

    Examples
    --------
    >>> from fmmlearn.ood import sized_fold_fractions
    >>> [round(f * 100) for f in sized_fold_fractions(100)]
    [30, 30, 40]
    """
    low, high = null_share_range
    candidates = [k for k in range(max(2, math.ceil(n / 5)), n // 2 + 1) if low <= null_share(k, alpha=alpha) <= high]
    if not candidates:
        return (1 / 3, 1 / 3, 1 / 3)
    level3 = min(candidates, key=lambda k: (abs(k - n / 3), k))
    level1 = (n - level3) // 2
    return (level1 / n, (n - level3 - level1) / n, level3 / n)


def min_calibration_size(fold_fractions=(1 / 3, 1 / 3, 1 / 3)):
    """Fewest calibration examples with which ``MaSF(calibration="calibrated")`` can be fitted.

    Every fold needs at least 2 examples.  (To let an example reach
    ``p < alpha`` at all, the level-3 fold needs ``1 / alpha - 1`` examples,
    e.g. about 60 in all for ``alpha = 0.05`` with equal thirds.)

    Parameters
    ----------
    fold_fractions : tuple of 3 floats, default=(1/3, 1/3, 1/3)

    Returns
    -------
    int

    Examples
    --------
    >>> from fmmlearn.ood import min_calibration_size
    >>> min_calibration_size(), min_calibration_size((0.6, 0.2, 0.2))
    (6, 9)
    """
    if isinstance(fold_fractions, str) and fold_fractions == "auto":  # equal thirds below ~60 units
        fold_fractions = (1 / 3, 1 / 3, 1 / 3)
    return _fewest_examples(_check_fold_fractions(fold_fractions), _MIN_FOLD_SIZE)


def _fewest_examples(fractions, level3_size):
    """Smallest n whose folds all have 2 examples and the level-3 fold ``level3_size``."""
    n = _MIN_FOLD_SIZE * 3
    while _fold_sizes(n, fractions).min() < _MIN_FOLD_SIZE or _fold_sizes(n, fractions)[2] < level3_size:
        n += 1
    return n


def _check_groups(groups, n):
    """``groups`` as a 1-D array of ``n`` ids, or None."""
    if groups is None:
        return None
    groups = np.asarray(groups)
    if groups.ndim != 1 or len(groups) != n:
        raise ValueError(f"groups must be a 1-D array with one example id per row of features ({n}); got shape "
                         f"{groups.shape}.")
    return groups


def _check_fold_fractions(fold_fractions, n_units: int | None = None):
    """The fold shares as an array (``"auto"``: :func:`sized_fold_fractions` of ``n_units``)."""
    if isinstance(fold_fractions, str) and fold_fractions == "auto":
        fold_fractions = (1 / 3, 1 / 3, 1 / 3) if n_units is None else sized_fold_fractions(n_units)
    fractions = np.asarray(fold_fractions, dtype=np.float64)
    if (fractions.shape != (3,) or not np.all(np.isfinite(fractions)) or np.any(fractions <= 0)
            or abs(fractions.sum() - 1.0) > 1e-6):
        raise ValueError("fold_fractions must be 3 positive numbers summing to 1 (level-1, level-2 and "
                         f"level-3 shares); got {fold_fractions!r}.")
    return fractions

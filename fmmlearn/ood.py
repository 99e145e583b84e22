"""In-distribution tests for masked inputs: MaSF (SPEC.md section 6).

MaSF (Max-Simes-Fisher) turns hidden-state features into one p-value per
example, small meaning "out of distribution", in three levels:

1. per (layer, dimension): an empirical-CDF p-value of the feature against the
   calibration examples' values of that feature;
2. per layer: the Simes combination of the dimension p-values, turned into a
   p-value against the calibration examples' Simes values;
3. per example: the Fisher combination of the layer p-values, turned into the
   final right-sided p-value against the calibration examples' Fisher values.

This module holds the statistics, which only need numpy and scipy:
:class:`MaSF`, the dataset-level summaries :func:`simes_pvalue`,
:func:`fisher_pvalue` and :func:`summarize_pvalues`, and the column-wise
:func:`empirical_cdf`.  On top of them, for a fitted classifier:
:func:`hidden_state_features` (the features, SPEC.md 6.1),
:func:`mask_like_training` and :func:`calibration_features` (the calibration
set, 6.2) and :func:`in_distribution_report` (p-values of explainer-masked
test sets per masking ratio, 6.4).  See ``docs/ood.md`` for the choice
between the paper's in-sample procedure and the calibrated default, and for
comparing plain and masked fine-tuning.
"""

from __future__ import annotations

import numbers
import sys
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, check_random_state

__all__ = [
    "MaSF", "MaSFStatistics", "empirical_cdf", "fisher_pvalue", "min_calibration_size", "simes_pvalue",
    "summarize_pvalues",
    "calibration_features", "hidden_state_features", "in_distribution_report", "mask_like_training",
]

CALIBRATIONS = ("calibrated", "reference")
DEFAULT_THRESHOLDS = (0.001, 0.005, 0.01, 0.05, 0.1)
_MIN_FOLD_SIZE = 2
# The reference adds this inside ln(p) so that p = 0 gives a finite Fisher statistic.
_REFERENCE_FISHER_EPS = 1e-8
_SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))


class MaSF(BaseEstimator):
    """Max-Simes-Fisher in-distribution test on hidden-state features.

    Fit on the features of in-distribution (calibration) examples, then
    :meth:`pvalues` gives one p-value per new example; a small p-value means
    the example does not look like the calibration data.

    Parameters
    ----------
    calibration : {"calibrated", "reference"}, default="calibrated"
        ``"calibrated"`` splits the calibration examples at random into three
        disjoint folds, one per level, and uses conformal p-values
        ``(1 + #{a >= s}) / (N + 1)`` (two-sided ones doubled and clipped to
        1), so an in-distribution example gets ``p <= alpha`` with probability
        at most ``alpha``.  ``"reference"`` is exactly the paper's procedure
        (SPEC.md 6.3): all examples define all three levels in-sample, ECDF
        ``#{a < s} / N`` and ``min(F, 1 - F)`` two-sided p-values, Fisher
        with ``ln(p + 1e-8)``.  It is far from calibrated (many
        in-distribution examples get tiny p-values), so read its numbers as
        comparative only.  ``docs/ood.md`` has measured error rates and power.
    fold_fractions : tuple of 3 floats, default=(1/3, 1/3, 1/3)
        Calibrated mode only: the shares of the calibration examples for the
        level-1, level-2 and level-3 references.  They must be positive and
        sum to 1; every fold needs at least 2 examples.
    dtype : {"float32", "float16"}, default="float32"
        Precision the features are rounded to before anything is compared.
        ``"float16"`` mimics the reference's mixed-precision features, where
        rounding creates ties (SPEC.md 6.1).
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
    level1_reference_ : ndarray of shape (n_layers_, hidden_size_, N1), float32
        Sorted feature values per (layer, dimension).
    level2_reference_ : ndarray of shape (n_layers_, N2)
        Sorted per-layer Simes statistics of the level-2 examples.
    level3_reference_ : ndarray of shape (N3,)
        Sorted Fisher statistics of the level-3 examples.

    Notes
    -----
    Features are an array of shape ``(n_examples, n_layers, hidden_size)``,
    e.g. the max-pooled hidden states of every layer (SPEC.md 6.1).  A 2-D
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
        "fold_fractions": ["array-like"],
        "dtype": [StrOptions({"float32", "float16"}), type, np.dtype],
        "chunk_size": [Interval(numbers.Integral, 1, None, closed="left")],
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

    def fit(self, features, y=None):
        """Build the three levels of reference statistics from calibration features.

        Parameters
        ----------
        features : array-like of shape (n_examples, n_layers, hidden_size) or (n_examples, hidden_size)
            Features of in-distribution examples (e.g. the validation split,
            masked like the training batches).
        y : None
            Ignored; present for scikit-learn compatibility.

        Returns
        -------
        self : MaSF
        """
        self._validate_params()
        self.dtype_ = _check_dtype(self.dtype)
        self.calibration_ = self.calibration
        X = _check_features(features, "features")
        folds = self._fold_indices(X.shape[0])
        self.n_calibration_, self.n_layers_, self.hidden_size_ = X.shape
        self.fold_indices_ = folds
        self.level1_reference_, simes = self._fit_level1(X, folds[0])
        self.level2_reference_ = np.ascontiguousarray(np.sort(simes[folds[1]], axis=0).T)
        level3 = self._fisher_from_layer_pvalues(self._layer_pvalues(simes[folds[2]]))
        self.level3_reference_ = np.sort(level3)
        return self

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

    def _fold_indices(self, n):
        """Indices of the level-1, -2 and -3 reference examples (identical in reference mode)."""
        if self.calibration == "reference":
            if n < _MIN_FOLD_SIZE:
                raise ValueError(f"features has {n} example(s); calibration='reference' needs at least "
                                 f"{_MIN_FOLD_SIZE}.")
            everything = np.arange(n)
            return everything, everything, everything
        fractions = _check_fold_fractions(self.fold_fractions)
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
            warnings.warn(f"The level-3 fold has only {sizes[2]} examples, so no p-value can be below "
                          f"{1.0 / (sizes[2] + 1):.3g}; use more calibration examples.", UserWarning,
                          stacklevel=3)
        order = check_random_state(self.random_state).permutation(n)
        # Sorted indices keep memory access to the features in order.
        return tuple(np.sort(fold) for fold in np.split(order, bounds[:2]))

    # -- scoring -------------------------------------------------------------------------------------

    def pvalues(self, features):
        """One MaSF p-value per example; small means out-of-distribution.

        Parameters
        ----------
        features : array-like of shape (n_examples, n_layers_, hidden_size_) or (n_examples, hidden_size_)
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
        features : array-like of shape (n_examples, n_layers_, hidden_size_) or (n_examples, hidden_size_)

        Returns
        -------
        stats : MaSFStatistics
            Named tuple with ``simes`` (n, n_layers_): per-layer Simes
            statistics; ``layer_pvalues`` (n, n_layers_): their p-values
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


# -- p-values from counts ----------------------------------------------------------------------------


def _tail_counts(n_less, n_equal, n_ref, calibration):
    """Size of the smaller tail, given ``#{a < s}`` and ``#{a == s}`` among ``n_ref`` references.

    Reference: ``min(#{a < s}, #{a >= s})``, so that ``min(F, 1 - F) = tail / N``.
    Calibrated: ``min(#{a <= s}, #{a >= s})``.  Two-sided p-values are increasing
    in it, so sorting these integers sorts the p-values (faster than sorting floats).
    """
    lower = n_less if calibration == "reference" else n_less + n_equal
    return np.minimum(lower, n_ref - n_less)


def _two_sided_from_tail(tail, n_ref, calibration):
    """Two-sided p-values from :func:`_tail_counts`: ``min(F, 1 - F)`` or the doubled conformal one."""
    if calibration == "reference":
        return tail / n_ref
    return np.minimum(1.0, 2.0 * (1.0 + tail) / (n_ref + 1))


def _two_sided_pvalues(n_less, n_equal, n_ref, calibration):
    """Two-sided p-values of query values given ``#{a < s}`` and ``#{a == s}`` among ``n_ref`` references."""
    return _two_sided_from_tail(_tail_counts(n_less, n_equal, n_ref, calibration), n_ref, calibration)


def _right_tail_pvalues(n_less, n_ref, calibration):
    """Right-sided p-values given ``#{a < s}``: (conformal) fraction of references ``>= s``."""
    if calibration == "reference":
        return (n_ref - n_less) / n_ref
    return (1.0 + n_ref - n_less) / (n_ref + 1)


# -- counting in sorted references -------------------------------------------------------------------


def _order_keys(values):
    """uint32 keys with the same order as the float32 ``values`` (so -0.0 and 0.0 tie).

    Flipping the sign bit of non-negative floats and all bits of negative ones
    gives integers that sort like the floats; packed with a row number in the
    low bits, one integer sort yields both the order and the permutation.
    """
    bits = np.add(values, np.float32(0.0), dtype=np.float32).view(np.uint32)   # + 0.0 turns -0.0 into 0.0
    negative = bits >= np.uint32(0x80000000)
    np.invert(bits, out=bits, where=negative)
    np.bitwise_or(bits, np.uint32(0x80000000), out=bits, where=~negative)
    return bits


def _chunks(n, size):
    """Consecutive slices of at most ``size`` covering ``range(n)``."""
    return [slice(start, min(start + size, n)) for start in range(0, n, size)]


def _in_sample_counts(values, is_reference):
    """``#{a < v}`` and ``#{a == v}`` for every entry ``v`` of ``values`` among the reference rows.

    ``values`` is (n, columns) float32 and ``is_reference`` (n,) marks the rows
    that are references; counts are per column and returned as (n, columns)
    int32.  One sort per column of all rows replaces n binary searches.
    Temporaries are updated in place: this runs on whole calibration layers.
    """
    n, n_columns = values.shape
    packed = _order_keys(np.ascontiguousarray(values.T)).astype(np.uint64)
    packed <<= np.uint64(32)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort(axis=1)                                       # by value; the low word keeps the row
    keys = packed.view(np.uint32)[:, 1::2] if sys.byteorder == "little" else packed.view(np.uint32)[:, ::2]
    new_value = np.ones(packed.shape, dtype=bool)             # first of a run of equal values
    new_value[:, 1:] = keys[:, 1:] != keys[:, :-1]
    del keys
    packed &= np.uint64(0xFFFFFFFF)
    rows = packed.view(np.int64)
    reference = is_reference[rows]
    at_most = np.cumsum(reference, axis=1, dtype=np.int32)    # references at or before each position
    # Counts only grow along the sorted order, so a running max (min from the right)
    # copies the count at the start (end) of each run of equal values over the run.
    n_less = at_most - reference
    n_less *= new_value
    np.maximum.accumulate(n_less, axis=1, out=n_less)
    np.putmask(at_most[:, :-1], ~new_value[:, 1:], n)
    backwards = at_most[:, ::-1]
    np.minimum.accumulate(backwards, axis=1, out=backwards)
    at_most -= n_less                                         # now #{a == v}
    del reference, new_value, backwards
    rows += np.arange(0, n_columns * n, n, dtype=np.int64)[:, None]   # flat positions in (columns, n)
    less = _scatter(n_less, rows)
    del n_less
    return less, _scatter(at_most, rows)


def _scatter(sorted_counts, targets):
    """Put counts in sorted order back in row order; returns an (n, columns) view."""
    n_columns, n = sorted_counts.shape
    out = np.empty(n_columns * n, dtype=sorted_counts.dtype)
    out[targets] = sorted_counts
    return out.reshape(n_columns, n).T


def _count_at_most(flat, starts, n, needles, strict):
    """Branchless binary search: ``#{a < x}`` (strict) or ``#{a <= x}`` in ``flat[start:start + n]``.

    Each needle ``x`` has its own sorted range of length ``n`` starting at
    ``start``; all needles move in lock-step, ``ceil(log2 n)`` vectorised steps.
    """
    below = np.less if strict else np.less_equal
    base = starts.copy()
    size = n
    while size > 1:
        half = size // 2
        probe = base + half
        np.copyto(base, probe, where=below(flat[probe], needles))
        size -= half
    base += below(flat[base], needles)
    return base - starts


def _search_counts(sorted_columns, queries):
    """``#{a < s}`` and ``#{a == s}`` per column of sorted float32 references (columns, N).

    ``queries`` is (m, columns) float32; returns two int64 arrays of that shape.
    Needles are laid out column by column, so each column's searches stay
    within its own (cache-sized) stretch of references.
    """
    n_columns, n_ref = sorted_columns.shape
    m = queries.shape[0]
    flat = sorted_columns.ravel()
    needles = np.ascontiguousarray(queries.T).ravel()
    starts = np.repeat(np.arange(0, n_columns * n_ref, n_ref, dtype=np.intp), m)
    n_less = _count_at_most(flat, starts, n_ref, needles, strict=True)
    # Ties: rare for continuous features, the rule for discrete ones; only those need a second search.
    tied = flat[starts + np.minimum(n_less, n_ref - 1)] == needles
    n_equal = np.zeros_like(n_less)
    n_equal[tied] = _count_at_most(flat, starts[tied], n_ref, needles[tied], strict=False) - n_less[tied]
    return n_less.reshape(n_columns, m).T, n_equal.reshape(n_columns, m).T


def _count_less_equal_1d(sorted_reference, queries):
    """``#{a < s}`` and ``#{a == s}`` for 1-D sorted references (any float dtype)."""
    first = np.searchsorted(sorted_reference, queries, side="left")
    return first, np.searchsorted(sorted_reference, queries, side="right") - first


def empirical_cdf(reference, values):
    """Strict empirical CDF ``F(s) = #{a_j < s} / N``, column by column (SPEC.md 6.3).

    This is the ECDF MaSF uses at level 1, computed the same way (values are
    rounded to float32, all columns searched at once).

    Parameters
    ----------
    reference : array-like of shape (N,) or (N, n_columns)
        Reference sample(s).
    values : array-like of shape (m,) or (m, n_columns)
        Points at which to evaluate each column's ECDF.

    Returns
    -------
    cdf : ndarray of shape (m,) or (m, n_columns)

    Examples
    --------
    >>> from fmmlearn.ood import empirical_cdf
    >>> empirical_cdf([1.0, 2.0, 2.0, 3.0], [0.0, 2.0, 2.5, 9.0])
    array([0.  , 0.25, 0.75, 1.  ])
    """
    ref = _finite_float_array(reference, "reference", min_size=1)
    vals = _finite_float_array(values, "values", min_size=0)
    if ref.ndim not in (1, 2) or vals.ndim != ref.ndim or ref.shape[1:] != vals.shape[1:]:
        raise ValueError(f"reference and values must both be 1-D, or 2-D with the same number of columns; "
                         f"got shapes {ref.shape} and {vals.shape}.")
    sorted_columns = np.sort(ref.reshape(ref.shape[0], -1).T.astype(np.float32), axis=1)
    n_less, _ = _search_counts(sorted_columns, vals.reshape(vals.shape[0], -1).astype(np.float32))
    return (n_less / ref.shape[0]).reshape(vals.shape)


# -- combining p-values ------------------------------------------------------------------------------


def _simes(p, axis):
    """Simes' ``min_i p_(i) n / i`` along ``axis`` (no input checks)."""
    return _simes_of_sorted(np.sort(p, axis=axis), axis)


def _simes_of_sorted(p, axis):
    """Simes' statistic of p-values already sorted along ``axis``."""
    n = p.shape[axis]
    shape = [1] * p.ndim
    shape[axis] = n
    ranks = np.arange(1, n + 1, dtype=np.float64).reshape(shape)
    return np.min(p * n / ranks, axis=axis)


def simes_pvalue(p, axis=-1):
    """Simes' combined p-value ``min_i p_(i) n / i`` of n p-values.

    It is valid when the p-values are independent or positively dependent,
    and equals the smallest Benjamini-Hochberg adjusted p-value
    (``scipy.stats.false_discovery_control(p).min()``).

    Parameters
    ----------
    p : array-like
        P-values in [0, 1].
    axis : int, default=-1
        Axis along which to combine.

    Returns
    -------
    float or ndarray
        One combined p-value per slice along ``axis``.

    Examples
    --------
    >>> from fmmlearn.ood import simes_pvalue
    >>> float(simes_pvalue([0.01, 0.04, 0.3, 0.8]))
    0.04
    """
    p = _check_pvalues(p, "p")
    result = _simes(p, axis=axis)
    return float(result) if result.ndim == 0 else result


def fisher_pvalue(p):
    """Fisher's combined p-value: survival function of ``-2 sum ln p_i`` under chi-square(2n).

    Parameters
    ----------
    p : array-like of shape (n,)
        Independent p-values in [0, 1].  Any ``p = 0`` gives 0.

    Returns
    -------
    float

    See Also
    --------
    scipy.stats.combine_pvalues : used for the computation.

    Examples
    --------
    >>> from fmmlearn.ood import fisher_pvalue
    >>> round(fisher_pvalue([0.01, 0.2, 0.5]), 4)
    0.0318
    """
    p = _check_pvalues(p, "p").ravel()
    if np.any(p == 0):
        return 0.0          # ln 0 = -inf: the statistic is infinite, its p-value 0
    return float(stats.combine_pvalues(p, method="fisher").pvalue)


def _reference_fisher_pvalue(p):
    """The reference's dataset-level Fisher number: chi-square *CDF* of ``-2 sum ln(p + 1e-8)`` (a bug)."""
    statistic = -2.0 * np.sum(np.log(p + _REFERENCE_FISHER_EPS))
    return float(stats.chi2.cdf(statistic, df=2 * p.size))


def summarize_pvalues(p, thresholds=DEFAULT_THRESHOLDS, *, reference_fisher=False):
    """Dataset-level summary of per-example p-values (SPEC.md 6.4).

    Parameters
    ----------
    p : array-like of shape (n,)
        Per-example p-values, e.g. from :meth:`MaSF.pvalues`.
    thresholds : sequence of float, default=(0.001, 0.005, 0.01, 0.05, 0.1)
        Levels in (0, 1] at which to report the proportion of ``p < threshold``.
    reference_fisher : bool, default=False
        Also report ``fisher_p_reference``, the number the reference code
        reports: the chi-square CDF (not survival function) of
        ``-2 sum ln(p + 1e-8)``, i.e. roughly ``1 - fisher_p``.  For parity
        checks only.

    Returns
    -------
    summary : pandas.DataFrame
        One row per threshold with columns ``threshold``, ``proportion``
        (fraction of ``p < threshold``), ``simes_p`` (:func:`simes_pvalue` of
        all p) and ``fisher_p`` (:func:`fisher_pvalue` of all p); the last two
        are dataset-level and repeat on every row.  Small ``simes_p`` /
        ``fisher_p`` reject "the whole set is in-distribution".

    Examples
    --------
    >>> from fmmlearn.ood import summarize_pvalues
    >>> summarize_pvalues([0.002, 0.03, 0.2, 0.7], thresholds=(0.01, 0.05))
       threshold  proportion  simes_p  fisher_p
    0       0.01        0.25    0.008  0.002915
    1       0.05        0.50    0.008  0.002915
    """
    p = _check_pvalues(p, "p").ravel()
    levels = _check_thresholds(thresholds)
    summary = pd.DataFrame({
        "threshold": levels,
        "proportion": (p[None, :] < levels[:, None]).mean(axis=1),
        "simes_p": _simes(p, axis=0),
        "fisher_p": fisher_pvalue(p),
    })
    if reference_fisher:
        summary["fisher_p_reference"] = _reference_fisher_pvalue(p)
    return summary


# -- input checks ------------------------------------------------------------------------------------


def _check_features(features, name, expected=None):
    """Validate the rank and shape of a feature array; return it as an (n, layers, hidden) view.

    Finiteness is checked chunk by chunk while scoring, to avoid a full-size temporary.
    """
    X = np.asarray(features)
    if X.ndim == 2:
        X = X[:, None, :]
    elif X.ndim != 3:
        raise ValueError(f"{name} must be a 3-D array (n_examples, n_layers, hidden_size) or a 2-D array "
                         f"(n_examples, hidden_size); got {X.ndim} dimension(s), shape {X.shape}.")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold real numbers; got dtype {X.dtype}.")
    if X.shape[0] == 0 or X.shape[1] == 0 or X.shape[2] == 0:
        raise ValueError(f"{name} is empty: shape {np.shape(features)}.")
    if expected is not None and X.shape[1:] != tuple(expected):
        raise ValueError(f"{name} has {X.shape[1]} layer(s) of hidden size {X.shape[2]}, but this MaSF was "
                         f"fitted on {expected[0]} layer(s) of hidden size {expected[1]}.")
    return X


def _check_dtype(dtype):
    """``dtype`` as a numpy dtype, float32 or float16 (the precisions of features)."""
    try:
        checked = np.dtype(dtype)
    except TypeError:
        checked = None
    if checked not in _SUPPORTED_DTYPES:
        raise ValueError(f"dtype must be float32 or float16; got {dtype!r}.")
    return checked


def _check_thresholds(thresholds):
    levels = _finite_float_array(thresholds, "thresholds", min_size=1).ravel()
    if np.any((levels <= 0) | (levels > 1)):
        raise ValueError(f"thresholds must lie in (0, 1]; got {levels.tolist()}.")
    return levels


def _fold_sizes(n, fractions):
    """Sizes of the level-1, -2 and -3 folds of ``n`` calibration examples (rounded cumulative shares)."""
    return np.diff(np.rint(np.cumsum(fractions) * n).astype(int), prepend=0)


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
    return _fewest_examples(_check_fold_fractions(fold_fractions), _MIN_FOLD_SIZE)


def _fewest_examples(fractions, level3_size):
    """Smallest n whose folds all have 2 examples and the level-3 fold ``level3_size``."""
    n = _MIN_FOLD_SIZE * 3
    while _fold_sizes(n, fractions).min() < _MIN_FOLD_SIZE or _fold_sizes(n, fractions)[2] < level3_size:
        n += 1
    return n


def _check_fold_fractions(fold_fractions):
    fractions = np.asarray(fold_fractions, dtype=np.float64)
    if (fractions.shape != (3,) or not np.all(np.isfinite(fractions)) or np.any(fractions <= 0)
            or abs(fractions.sum() - 1.0) > 1e-6):
        raise ValueError("fold_fractions must be 3 positive numbers summing to 1 (level-1, level-2 and "
                         f"level-3 shares); got {fold_fractions!r}.")
    return fractions


def _finite_float_array(values, name, min_size):
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be numeric; got {type(values).__name__} ({error}).") from None
    if arr.size < min_size:
        raise ValueError(f"{name} is empty.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return arr


def _check_pvalues(p, name):
    arr = _finite_float_array(p, name, min_size=1)
    if np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"{name} must hold p-values in [0, 1]; got values from {arr.min():g} to {arr.max():g}.")
    return arr


# -- classifier integration (SPEC.md 6.1, 6.2, 6.4) --------------------------------------------------
# Built on the statistics above and the classifier's public low-level API only.  torch and the
# faithfulness loop are imported inside the functions, so the statistics stay usable (and quick to
# import) with numpy and scipy alone.

#: Columns of :func:`in_distribution_report`, in order (``model`` follows when ``model_name`` is given).
REPORT_COLUMNS = ("ratio", "threshold", "proportion", "simes_p", "fisher_p", "n_examples", "method", "calibration")
SEGMENTS = ("first", "all")


def hidden_state_features(clf, X=None, *, encoding=None, input_ids=None, batch_size=None, dtype=np.float32):
    """Max-pooled hidden states of every layer: the MaSF features of SPEC.md 6.1.

    For each example, the embedding output and each of the L transformer
    layers' outputs (``output_hidden_states=True``) are max-pooled over the
    non-padding positions, special tokens and mask tokens included.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs, optional
        Texts to encode with ``clf.encode``.  Give either ``X`` or ``encoding``.
    encoding : Encoding, optional
        Already encoded examples (from ``clf.encode``).
    input_ids : sequence of ndarray, optional
        Replacement ids per example of ``encoding`` (e.g. masked copies), each
        as long as the example.
    batch_size : int, optional
        Examples per forward pass; default ``clf.inference_batch_size_``.  A
        batch that runs out of memory is halved and retried.
    dtype : {numpy.float32, numpy.float16}, default=numpy.float32
        Dtype of the returned features.

    Returns
    -------
    features : ndarray of shape (n_examples, L + 1, hidden_size)
        In input order.

    Notes
    -----
    Examples run longest first in length-grouped batches under
    ``torch.inference_mode`` and the classifier's inference autocast
    (``clf.inference_dtype_``); each batch's pooled result goes straight into
    the output, so memory holds the hidden states of one batch only.

    *Precision.*  Under bf16/fp16 autocast the matrix products run in half
    precision, but PyTorch keeps LayerNorm outputs in float32, so for
    post-LayerNorm models (BERT, RoBERTa, MiniLM) the features are not rounded
    to 16 bits as in the reference's Keras mixed-precision policy.  They still
    differ from fp32 features by about the bf16 rounding of the inner products
    (roughly 1e-2 relative): compute calibration and test features at the
    same precision (:func:`in_distribution_report` does) and never mix them.
    For tie-for-tie parity with the reference's fp16 features pass
    ``dtype=numpy.float16`` (or fit ``MaSF(dtype="float16")``).

    Examples
    --------
    >>> features = hidden_state_features(clf, ["a fine film", "awful"])   # doctest: +SKIP
    >>> features.shape                                                    # doctest: +SKIP
    (2, 7, 384)
    """
    import torch

    from .encoding import collate, length_grouped_batches
    from .modeling import autocast, run_in_batches

    check_is_fitted(clf)
    encoding = _features_encoding(clf, X, encoding)
    input_ids = _check_input_ids(input_ids, encoding)
    dtype = _check_dtype(dtype)
    batch_size = clf.inference_batch_size_ if batch_size is None else _positive_int(batch_size, "batch_size")
    device, autocast_dtype, pad_token_id = clf.device_, clf.inference_dtype_, clf.tokenizer_.pad_token_id
    out = None

    def run(idx):
        nonlocal out
        batch = collate(encoding, idx, pad_token_id, input_ids=input_ids).to(device)
        with torch.inference_mode(), autocast(device, autocast_dtype):
            output = clf.model_(**batch.model_inputs(), output_hidden_states=True)
            pooled = _max_pool(_hidden_states_of(output), batch.attention_mask).cpu().numpy()
        if out is None:           # the first (longest) batch tells the shape
            out = np.empty((len(encoding),) + pooled.shape[1:], dtype=dtype)
        out[idx] = pooled

    run_in_batches(run, length_grouped_batches(encoding.lengths, batch_size))
    return out


def _max_pool(hidden_states, attention_mask):
    """(B, n_layers, H) float32: per layer the max over the positions with ``attention_mask == 1``."""
    import torch

    padding = ~attention_mask.bool()[:, :, None]
    return torch.stack([h.masked_fill(padding, float("-inf")).amax(dim=1).float() for h in hidden_states], dim=1)


def _hidden_states_of(output):
    hidden_states = getattr(output, "hidden_states", None)
    if not hidden_states:
        raise TypeError(f"clf.model_ ({type(output).__name__}) returned no hidden states with "
                        "output_hidden_states=True; MaSF features need a model that supports it (any Hugging "
                        "Face transformer does).")
    return hidden_states


def _features_encoding(clf, X, encoding):
    if (X is None) == (encoding is None):
        raise ValueError("pass exactly one of X (texts) or encoding (from clf.encode(X)); got "
                         f"{'both' if X is not None else 'neither'}.")
    if encoding is None:
        return clf.encode(X)
    if len(encoding) == 0:
        raise ValueError("encoding is empty; expected at least one example.")
    return encoding


def _check_input_ids(input_ids, encoding):
    """Replacement ids as int64 arrays, one per example and exactly as long as it (masking never removes)."""
    if input_ids is None:
        return None
    if len(input_ids) != len(encoding):
        raise ValueError(f"input_ids has {len(input_ids)} entries but the encoding has {len(encoding)} examples.")
    checked = []
    for i, (ids, original) in enumerate(zip(input_ids, encoding.input_ids)):
        ids = np.asarray(ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or len(ids) != len(original):
            raise ValueError(f"input_ids[{i}] must be a 1-D integer array of the example's {len(original)} "
                             f"token ids; got dtype {ids.dtype}, shape {ids.shape}.")
        checked.append(ids.astype(np.int64, copy=False))
    return checked


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    return int(value)


def _seed(random_state, clf):
    """An int seed: ``random_state`` or else ``clf.random_state``; an int is used as is, like ``fit`` does."""
    state = clf.random_state if random_state is None else random_state
    if isinstance(state, numbers.Integral) and not isinstance(state, bool):
        return int(state)
    return int(check_random_state(state).randint(0, 2**31 - 1))


def _sub_seed(seed, key):
    """An independent seed for one consumer (e.g. the ``rand`` measure) of a report's seed."""
    return int(np.random.SeedSequence([seed, key]).generate_state(1)[0])


def mask_like_training(clf, encoding, *, dist_repeats=1, random_state=None):
    """Mask encoded examples exactly like ``fit`` masks its training batches (SPEC.md 6.2).

    Per repeat, the examples are shuffled into length-grouped batches of
    ``clf.batch_size`` and each batch is masked with ``clf.masking_strategy``
    and ``clf.max_masking_ratio`` (``half-det``: the first half of each batch
    clean, the rest with random-max masking).  The generators are the
    training loop's: batch order ``numpy.random.default_rng(seed)``, masks
    ``torch.Generator().manual_seed(seed)``, so repeat ``k`` of the training
    set with the fit's seed draws exactly the masks of epoch ``k + 1``.  With
    ``max_masking_ratio=0`` (plain fine-tuning) every copy is clean.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted (its ``tokenizer_`` and masking parameters are used).
    encoding : Encoding
        From ``clf.encode``.
    dist_repeats : int, default=1
        Number of differently masked copies of the set (the reference's
        ``dist_repeats``).  Copies are identical without masking.
    random_state : int, RandomState or None, default=None
        Seed; default ``clf.random_state``.

    Returns
    -------
    repeated : Encoding
        ``dist_repeats`` copies of ``encoding``, one after the other.
    input_ids : list of ndarray of int64
        The masked ids, aligned with ``repeated``.
    """
    import torch

    from .encoding import collate, length_grouped_batches
    from .masking import apply_masking_strategy, maskable_positions

    dist_repeats = _positive_int(dist_repeats, "dist_repeats")
    seed = _seed(random_state, clf)
    n = len(encoding)
    repeated = encoding.subset(np.tile(np.arange(n), dist_repeats))
    masked = list(repeated.input_ids)
    if clf.max_masking_ratio == 0:
        return repeated, masked
    order_rng, mask_rng = np.random.default_rng(seed), torch.Generator(device="cpu").manual_seed(seed)
    lengths = encoding.lengths
    for repeat in range(dist_repeats):
        for idx in length_grouped_batches(lengths, clf.batch_size, shuffle=True, generator=order_rng):
            batch = collate(encoding, idx, clf.tokenizer_.pad_token_id)
            ids = apply_masking_strategy(
                batch.input_ids, maskable_positions(batch.attention_mask, batch.special_tokens_mask),
                strategy=clf.masking_strategy, max_ratio=float(clf.max_masking_ratio),
                mask_token_id=clf.tokenizer_.mask_token_id, generator=mask_rng).numpy()
            for row, i in enumerate(idx):
                masked[repeat * n + i] = ids[row, : lengths[i]]
    return repeated, masked


def calibration_features(clf, X_calib, *, dist_repeats=1, random_state=None, batch_size=None, dtype=np.float32):
    """MaSF calibration features: ``X_calib`` masked like the training batches, then max-pooled (SPEC.md 6.2).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X_calib : sequence of str, or sentence pairs
        In-distribution examples, e.g. the validation split used for model
        selection.  Labels are not needed.
    dist_repeats : int, default=1
        Differently masked copies of ``X_calib`` (see :func:`mask_like_training`).
    random_state : int, RandomState or None, default=None
        Seed of the masks; default ``clf.random_state``.
    batch_size : int, optional
        Forward-pass batch size (see :func:`hidden_state_features`).
    dtype : {numpy.float32, numpy.float16}, default=numpy.float32

    Returns
    -------
    features : ndarray of shape (len(X_calib) * dist_repeats, L + 1, hidden_size)
        Copy ``k`` of example ``i`` is row ``k * len(X_calib) + i``.

    Examples
    --------
    >>> masf = MaSF().fit(calibration_features(clf, X_valid))              # doctest: +SKIP
    >>> masf.pvalues(hidden_state_features(clf, X_test))                   # doctest: +SKIP
    """
    return _masked_features(clf, clf.encode(X_calib, "X_calib"), dist_repeats, random_state, batch_size, dtype)


def _masked_features(clf, encoding, dist_repeats, random_state, batch_size=None, dtype=np.float32):
    repeated, ids = mask_like_training(clf, encoding, dist_repeats=dist_repeats, random_state=random_state)
    return hidden_state_features(clf, encoding=repeated, input_ids=ids, batch_size=batch_size, dtype=dtype)


def in_distribution_report(clf, X_calib, X_test, y_test, method="rand", ratios=None, calibration="calibrated",
                           thresholds=DEFAULT_THRESHOLDS, segment="first", random_state=None, *, dist_repeats=1,
                           fold_fractions=(1 / 3, 1 / 3, 1 / 3), recursive=None, batch_size=None,
                           model_name=None, **method_params):
    """Are explainer-masked inputs in-distribution?  MaSF p-values per masking ratio (SPEC.md 6.4).

    MaSF is fitted on the features of ``X_calib`` masked like the training
    batches (:func:`calibration_features`).  ``X_test`` is then masked by the
    faithfulness loop of SPEC.md 5.1 (the top ``r`` share of segment-A tokens
    by ``method``'s importance for the gold label ``y_test``, the masks
    growing with ``r``), and each masked test set is scored: the share of
    examples with ``p < threshold`` and the dataset-level Simes and Fisher
    p-values.  In the paper, masked fine-tuned models mostly keep ``simes_p``
    above 0.05 across the ratios, while plain ones drop below it once tokens
    are masked (``docs/ood.md`` shows how to compare the two).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X_calib : sequence of str, or sentence pairs
        In-distribution calibration examples (e.g. the validation split).
        ``calibration="calibrated"`` needs at least
        ``min_calibration_size(fold_fractions)`` (6) of them times
        ``dist_repeats``, and about 60 before any p-value can reach 0.05.
    X_test : sequence of str, or sentence pairs
        Examples to mask and score.
    y_test : array-like of shape (len(X_test),)
        Gold labels of ``X_test``: the class whose importance ranks the tokens.
    method : str, default="rand"
        Importance measure of the masking (:func:`fmmlearn.importance_measures`);
        ``"rand"`` masks random tokens, as in the paper's figures.
    ratios : array-like of float, optional
        Masking ratios, strictly increasing in ``[0, 1]``; default
        ``0, 0.1, ..., 1``.  Ratio 0 scores the clean test set.
    calibration : {"calibrated", "reference"}, default="calibrated"
        See :class:`MaSF`; ``"reference"`` is the paper's (anti-conservative)
        procedure.
    thresholds : sequence of float, default=(0.001, 0.005, 0.01, 0.05, 0.1)
        Levels for ``proportion``.
    segment : {"first", "all"}, default="first"
        Mask segment A only (the paper) or every non-special token.
    random_state : int, RandomState or None, default=None
        Seeds the calibration masks, MaSF's folds and the ``rand`` measure;
        default ``clf.random_state``.
    dist_repeats : int, default=1
        Differently masked copies of ``X_calib`` in the calibration set.
    fold_fractions : tuple of 3 floats, default=(1/3, 1/3, 1/3)
        Calibrated mode: see :class:`MaSF`.
    recursive : bool, optional
        Recompute importances after every step; default the measure's own.
    batch_size : int, optional
        Batch size of the explainer masking (see
        :func:`fmmlearn.faithfulness.iter_explainer_masking`); features use
        ``clf.inference_batch_size_``.
    model_name : str, optional
        Adds a ``model`` column with this value, to stack the reports of
        several models (e.g. plain and masked) into one frame.
    **method_params
        Passed to the importance measure (and ``precision``,
        ``internal_batch_size``, ``importances`` to the masking loop).

    Returns
    -------
    report : pandas.DataFrame
        One row per (ratio, threshold), columns :data:`REPORT_COLUMNS`:
        ``ratio``, ``threshold``, ``proportion`` (share of test examples with
        ``p < threshold``), ``simes_p`` and ``fisher_p`` (dataset-level,
        repeated on each threshold's row), ``n_examples``, ``method``,
        ``calibration`` (and ``model``).

    Raises
    ------
    ValueError
        Naming the argument: too few calibration examples for the folds (and
        how many are needed), bad ratios, thresholds, segment, calibration or
        method parameters, labels that do not match ``X_test``, or non-finite
        features (e.g. an fp16 overflow).

    See Also
    --------
    fmmlearn.plotting.plot_in_distribution : draws a report (or several).

    Examples
    --------
    >>> plain = FaithfulTextClassifier(max_masking_ratio=0.0).fit(X_train, y_train)    # doctest: +SKIP
    >>> masked = FaithfulTextClassifier(max_masking_ratio=1.0).fit(X_train, y_train)   # doctest: +SKIP
    >>> reports = {name: in_distribution_report(model, X_valid, X_test, y_test)        # doctest: +SKIP
    ...            for name, model in {"plain": plain, "masked": masked}.items()}
    >>> plot_in_distribution(reports, path="ood.png")                                   # doctest: +SKIP
    """
    from .explanation import resolve_targets
    from .faithfulness import check_ratios, iter_explainer_masking
    from .importance import get_measure

    check_is_fitted(clf)
    grid, levels = check_ratios(ratios), _check_thresholds(thresholds)
    if not (isinstance(segment, str) and segment in SEGMENTS):
        raise ValueError(f"segment must be one of {SEGMENTS}; got {segment!r}.")
    dist_repeats = _positive_int(dist_repeats, "dist_repeats")
    seed = _seed(random_state, clf)
    masf = MaSF(calibration, fold_fractions=fold_fractions, random_state=seed)
    masf._validate_params()
    label = str(method) if "importances" in method_params else get_measure(method).name
    calib = clf.encode(X_calib, "X_calib")
    _check_calibration_size(len(calib), dist_repeats, calibration, fold_fractions)
    test = clf.encode(X_test, "X_test")
    if y_test is None:
        raise ValueError("y_test is None; the masking ranks tokens by their importance for the gold label.")
    target_idx = _in_context("y_test (the gold labels of X_test)", resolve_targets, clf, test, y_test)
    # Masking first: it validates the measure's parameters before any work and is the expensive part.
    steps = list(iter_explainer_masking(clf, test, target_idx, method, grid, recursive, segment,
                                        random_state=_sub_seed(seed, 1), batch_size=batch_size, **method_params))
    features = _masked_features(clf, calib, dist_repeats, seed)
    masf = _in_context("the calibration features of X_calib (masked like the training batches)", masf.fit, features)
    del features
    report = pd.concat([_ratio_rows(clf, masf, test, ratio, ids, levels) for ratio, ids in steps], ignore_index=True)
    report["method"], report["calibration"] = label, calibration
    if model_name is not None:
        report["model"] = str(model_name)
    return report


def _check_calibration_size(n_calib, dist_repeats, calibration, fold_fractions):
    """Fail before any model work when MaSF cannot be fitted on ``n_calib * dist_repeats`` examples."""
    n = n_calib * dist_repeats
    if calibration == "reference":
        needed, why = _MIN_FOLD_SIZE, ""
    else:
        needed = min_calibration_size(fold_fractions)
        # A level-3 fold of N3 examples gives p-values >= 1 / (N3 + 1): 19 are needed to reach 0.05.
        useful = _fewest_examples(_check_fold_fractions(fold_fractions), 19)
        why = (f" ({_MIN_FOLD_SIZE} per fold with fold_fractions={tuple(fold_fractions)}; about {useful} before "
               "any test example can reach p < 0.05)")
    if n < needed:
        raise ValueError(
            f"X_calib has {n_calib} example(s), {n} calibration input(s) with dist_repeats={dist_repeats}; "
            f"calibration={calibration!r} needs at least {needed}{why}. Give more calibration examples, "
            "raise dist_repeats (with a masked model), or use calibration='reference'.")


def _in_context(what, fn, *args):
    """``fn(*args)``, with ``what`` put in front of a ValueError's message."""
    try:
        return fn(*args)
    except ValueError as error:
        raise ValueError(f"{what}: {error}") from error


def _ratio_rows(clf, masf, encoding, ratio, input_ids, levels):
    """The summary rows of one masked test set."""
    features = hidden_state_features(clf, encoding=encoding, input_ids=input_ids)
    p = _in_context(f"the features of X_test masked at ratio {ratio:g}", masf.pvalues, features)
    rows = summarize_pvalues(p, levels)
    rows.insert(0, "ratio", ratio)
    rows["n_examples"] = len(encoding)
    return rows

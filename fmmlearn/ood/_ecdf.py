"""Empirical-CDF kernels: counting a query's rank among sorted references, vectorised.

All of MaSF's p-values are ranks: ``#{a < s}`` and ``#{a == s}`` of a query
``s`` among the references ``a``.  These kernels compute them for whole
layers at once, by one sort per column (calibration examples against each
other) or a branchless vectorised binary search (new examples), and turn the
counts into p-values in the reference's or the calibrated (conformal) way.
"""

from __future__ import annotations

import sys

import numpy as np

from ._checks import _finite_float_array

__all__ = ["empirical_cdf"]


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
    """Strict empirical CDF ``F(s) = #{a_j < s} / N``, column by column (docs/ood.md).

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

"""Input checks of the MaSF statistics (numpy only)."""

from __future__ import annotations

import numpy as np

__all__ = []  # private helpers of the ood package

_SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))


def _check_features(features, name, expected=None, what="MaSF"):
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
        raise ValueError(f"{name} has {X.shape[1]} layer(s) of hidden size {X.shape[2]}, but this {what} was "
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

"""Argument checks shared by several public functions, free of torch.

The masking-ratio grid and the segment names are used by the masking
primitives, faithfulness curves, ACU/RACU and the in-distribution report;
they are defined once here (torch-free, so ``acu``/``racu`` and MaSF import
without torch) and re-exported by :mod:`fmmlearn.masking`.
"""

from __future__ import annotations

import tempfile
from numbers import Integral
from pathlib import Path

import numpy as np
from sklearn.utils._param_validation import Interval
from ._deprecation import keyword_only

__all__ = ["DEFAULT_RATIOS", "SEGMENTS", "StrictInterval", "check_ratios", "check_segment", "check_writable_dir",
           "positive_int"]

#: The paper's masking ratios: 0, 0.1, ..., 1.0.
DEFAULT_RATIOS = tuple(k / 10 for k in range(11))

#: Which tokens explanation masking may hit: segment A only (the paper) or every non-special token.
SEGMENTS = ("first", "all")


@keyword_only
def check_ratios(ratios=None, *, name: str = "ratios", endpoints: bool = False) -> np.ndarray:
    """Validate a masking-ratio grid.

    Parameters
    ----------
    ratios : array-like of float, optional
        Strictly increasing values in ``[0, 1]``; ``None`` is
        :data:`DEFAULT_RATIOS`.
    name : str, default="ratios"
        Argument name used in error messages.
    endpoints : bool, default=False
        Also require the grid to start at 0 and end at 1 (ACU and RACU
        integrate over the whole ``[0, 1]``).

    Returns
    -------
    ndarray of float64

    Raises
    ------
    ValueError
        Naming ``name``, for an empty, unsorted, repeated, non-finite or
        out-of-range grid.
    """
    if ratios is None:
        ratios = DEFAULT_RATIOS
    try:
        grid = np.asarray(ratios, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numbers in [0, 1], got {ratios!r}.") from exc
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of numbers in [0, 1], got {ratios!r}.")
    if not np.all(np.isfinite(grid)) or grid.min() < 0 or grid.max() > 1:
        raise ValueError(f"{name} must lie in [0, 1], got {grid.tolist()}.")
    if np.any(np.diff(grid) <= 0):
        raise ValueError(f"{name} must be sorted in increasing order without repeats, got {grid.tolist()}.")
    if endpoints and (grid[0] != 0 or grid[-1] != 1):
        raise ValueError(f"{name} must start at 0 and end at 1 for ACU/RACU, got {grid.tolist()}.")
    return grid


def check_segment(segment, name: str = "segment") -> str:
    """``segment`` if it is one of :data:`SEGMENTS`, else a ``ValueError`` naming ``name``."""
    if not (isinstance(segment, str) and segment in SEGMENTS):
        raise ValueError(f"{name} must be one of {SEGMENTS}, got {segment!r}.")
    return segment


class StrictInterval(Interval):
    """scikit-learn's ``Interval`` constraint that also rejects booleans.

    ``True`` is an ``int`` to Python (and to ``Interval``), but
    ``batch_size=True`` is a mistake, not a batch of one.
    """

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)

    def __str__(self):
        return super().__str__() + " (not a bool)" if self.type is Integral else super().__str__()


def positive_int() -> StrictInterval:
    """The constraint "an int >= 1, not a bool", for ``validate_params``."""
    return StrictInterval(Integral, 1, None, closed="left")


def check_writable_dir(path, option: str) -> Path:
    """``path`` as a writable directory (created if needed), else a ValueError naming ``option``."""
    if path is None or not str(path).strip():
        raise ValueError(f"{option}: expected a directory path, got {path!r}.")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option}: {str(path)!r} exists and is not a directory.")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise ValueError(f"{option}: cannot write to {str(path)!r} ({exc.strerror or exc}).") from exc
    return path

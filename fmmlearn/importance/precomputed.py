"""Precomputed importances (e.g. from Captum) aligned to an encoding.

Scores computed outside fmmlearn come as one array per example, an
``(n_samples, T)`` array or the long frame of ``explain``; these helpers turn
them into one float64 array per example, aligned with
``Encoding.input_ids``, and check that every position masking may hit has a
score.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["check_covered", "importance_arrays"]


def importance_arrays(importances, encoding) -> list:
    """Precomputed importances as one float64 array per example, aligned to the encoding."""
    lengths = encoding.lengths
    if isinstance(importances, pd.DataFrame):
        return _importances_from_frame(importances, lengths)
    if isinstance(importances, np.ndarray) and importances.ndim == 2:
        if importances.shape[0] != len(lengths) or importances.shape[1] < lengths.max():
            raise ValueError(f"importances has shape {importances.shape}; expected ({len(lengths)}, T) with "
                             f"T >= {lengths.max()} (the longest encoded example).")
        rows = [importances[i, :n] for i, n in enumerate(lengths)]
    elif isinstance(importances, (list, tuple)):
        rows = list(importances)
    else:
        raise TypeError("importances must be a list of per-example arrays, an (n_samples, T) array or a "
                        f"DataFrame with columns example/position/importance, got {type(importances).__name__}.")
    if len(rows) != len(lengths):
        raise ValueError(f"importances has {len(rows)} entries but X has {len(lengths)} examples.")
    out = []
    for i, (row, n) in enumerate(zip(rows, lengths)):
        row = np.asarray(row, dtype=np.float64).ravel()
        if len(row) != n:
            raise ValueError(f"importances[{i}] has {len(row)} values but example {i} has {n} tokens "
                             "(special tokens included); align scores with clf.encode(X).input_ids.")
        out.append(row)
    return out


def _importances_from_frame(frame: pd.DataFrame, lengths) -> list:
    missing = {"example", "position", "importance"} - set(frame.columns)
    if missing:
        raise ValueError(f"importances DataFrame lacks column(s) {sorted(missing)}; expected the long format "
                         "of explain(): example, position, importance.")
    if "method" in frame.columns and frame["method"].nunique() > 1:
        raise ValueError("importances DataFrame holds several methods; pass one method's rows.")
    example = frame["example"].to_numpy(dtype=np.int64)
    position = frame["position"].to_numpy(dtype=np.int64)
    if len(frame) and (example.min() < 0 or example.max() >= len(lengths)
                       or position.min() < 0 or np.any(position >= lengths[example])):
        raise ValueError("importances DataFrame has example/position values outside the encoded input.")
    # NaN marks positions the frame does not cover; an eligible one among them is an error.
    out = [np.full(n, np.nan) for n in lengths]
    for i, p, v in zip(example, position, frame["importance"].to_numpy(dtype=np.float64)):
        out[i][p] = v
    return out


def check_covered(scores: list, eligible: list) -> list:
    """NaN (no score) is allowed only where nothing is masked; it becomes 0 there."""
    out = []
    for i, (row, elig) in enumerate(zip(scores, eligible)):
        gaps = np.flatnonzero(np.isnan(row) & elig)
        if len(gaps):
            raise ValueError(f"importances has no score (NaN or a missing row) for example {i} at maskable "
                             f"position(s) {gaps[:5].tolist()}; every token masking may hit needs one "
                             "(use -inf for 'mask last').")
        out.append(np.where(np.isnan(row), 0.0, row))
    return out

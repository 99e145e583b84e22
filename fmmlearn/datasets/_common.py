"""Shared helpers: Bunches built from one tidy frame, stratified subsets, splits.

Every loader keeps everything per-sample in ``frame`` (features, ``label``,
extras such as ``supporting_facts``) and derives the Bunch's ``data``/``target``
from it, so subsetting a Bunch is subsetting its frame.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch, check_random_state

LABEL = "label"


def frame_to_bunch(frame, *, feature_names, target_names, descr, as_frame=False, **meta) -> Bunch:
    """Build a scikit-learn style Bunch from a tidy frame.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per sample: the text columns ``feature_names``, ``"label"``
        and optional extra per-sample columns (copied to Bunch keys of the
        same name, as lists).
    feature_names : sequence of str
        One text column (single texts) or two (pairs: segment A, segment B).
    target_names : sequence of str
        The class labels.
    descr : str
        The ``DESCR`` text.
    as_frame : bool, default=False
        If True, ``data`` is a Series (one text column) or a DataFrame (pairs)
        and ``target`` a Series; otherwise ``data`` is a list of str or of
        ``(a, b)`` tuples and ``target`` a NumPy array of str.
    **meta
        Extra (not per-sample) Bunch keys.

    Returns
    -------
    sklearn.utils.Bunch
    """
    feature_names = list(feature_names)
    frame = frame.reset_index(drop=True)
    if as_frame:
        data = frame[feature_names[0]] if len(feature_names) == 1 else frame[feature_names]
        target = frame[LABEL]
    else:
        columns = [frame[name].tolist() for name in feature_names]
        data = columns[0] if len(columns) == 1 else list(zip(*columns))
        target = np.asarray(frame[LABEL].tolist(), dtype=str)
    extras = {c: frame[c].tolist() for c in frame.columns if c not in feature_names and c != LABEL}
    return Bunch(
        data=data,
        target=target,
        target_names=list(target_names),
        feature_names=feature_names,
        frame=frame,
        DESCR=descr,
        **{**extras, **meta},
    )


def subset_bunch(bunch, indices) -> Bunch:
    """Return a Bunch restricted to the rows ``indices`` of ``bunch.frame``, in that order.

    Parameters
    ----------
    bunch : sklearn.utils.Bunch
        A Bunch made by :func:`frame_to_bunch` (any fmmlearn loader).
    indices : array-like of int
        Row positions.

    Returns
    -------
    sklearn.utils.Bunch
    """
    frame = bunch.frame.iloc[np.asarray(indices, dtype=int)]
    per_sample = set(bunch.frame.columns) | {"data", "target", "frame", "feature_names", "target_names", "DESCR"}
    meta = {k: v for k, v in bunch.items() if k not in per_sample}
    as_frame = isinstance(bunch.data, (pd.Series, pd.DataFrame))
    return frame_to_bunch(
        frame,
        feature_names=bunch.feature_names,
        target_names=bunch.target_names,
        descr=bunch.DESCR,
        as_frame=as_frame,
        **meta,
    )


def sample_indices(labels, n_samples=None, *, shuffle=True, random_state=None) -> np.ndarray:
    """Row positions for a stratified subsample of ``n_samples`` rows.

    Parameters
    ----------
    labels : array-like of shape (n_rows,)
        Class of each row; the subsample keeps the class proportions.
    n_samples : int, default=None
        Number of rows to keep; None keeps all.
    shuffle : bool, default=True
        If False, the kept rows stay in their original order.
    random_state : int, RandomState instance or None, default=None
        Seed of the draw.

    Returns
    -------
    numpy.ndarray of int
    """
    labels = np.asarray(labels)
    n_rows = len(labels)
    if n_samples is not None:
        _check_n_samples(n_samples, n_rows)
    if n_samples is None or n_samples == n_rows:
        idx = check_random_state(random_state).permutation(n_rows) if shuffle else np.arange(n_rows)
    else:
        try:  # stratified: the files are often sorted by label
            idx, _ = train_test_split(
                np.arange(n_rows), train_size=n_samples, stratify=labels, random_state=random_state
            )
        except ValueError as exc:
            raise ValueError(f"n_samples={n_samples} is too small for a stratified subsample: {exc}") from exc
    return idx if shuffle else np.sort(idx)


def _check_n_samples(n_samples, n_rows):
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
        raise TypeError(f"n_samples must be an int or None; got {type(n_samples).__name__}.")
    if not 1 <= n_samples <= n_rows:
        raise ValueError(f"n_samples must be in [1, {n_rows}]; got {n_samples}.")


def train_test_split_bunch(bunch, *, test_size=0.25, train_size=None, random_state=None, stratify=True):
    """Split a dataset Bunch into a train and a test Bunch.

    A thin wrapper of :func:`sklearn.model_selection.train_test_split` on the
    rows of ``bunch.frame``; every per-sample field (``data``, ``target``,
    ``supporting_facts``, ...) is split alike.

    Parameters
    ----------
    bunch : sklearn.utils.Bunch
        A Bunch returned by an fmmlearn loader or :func:`~fmmlearn.datasets.make_babi`.
    test_size : float or int, default=0.25
        Fraction (float) or number (int) of samples in the test part.
    train_size : float or int, default=None
        Fraction or number of samples in the train part; None = the rest.
    random_state : int, RandomState instance or None, default=None
        Seed of the shuffle; an int makes the split deterministic.
    stratify : bool, default=True
        Keep the class proportions in both parts.

    Returns
    -------
    train, test : sklearn.utils.Bunch

    Examples
    --------
    >>> from fmmlearn.datasets import make_babi, train_test_split_bunch
    >>> train, test = train_test_split_bunch(make_babi(1, n_samples=100, random_state=0), test_size=0.2, random_state=0)
    >>> len(train.data), len(test.data)
    (80, 20)
    """
    if not isinstance(bunch.get("frame"), pd.DataFrame) or LABEL not in bunch.frame:
        raise TypeError("bunch must be a Bunch made by an fmmlearn loader (with a frame holding a 'label' column).")
    labels = bunch.frame[LABEL].to_numpy() if stratify else None
    train_idx, test_idx = train_test_split(
        np.arange(len(bunch.frame)),
        test_size=test_size,
        train_size=train_size,
        random_state=random_state,
        stratify=labels,
    )
    return subset_bunch(bunch, train_idx), subset_bunch(bunch, test_idx)

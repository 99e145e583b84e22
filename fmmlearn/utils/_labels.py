"""Labels and explanation targets: checking ``y`` and turning labels into class indices.

``fit`` checks ``y`` with :func:`check_labels`; ``explain``, faithfulness
curves and the in-distribution report turn gold labels or explicit targets
into indices of ``classes_`` with :func:`resolve_targets` /
:func:`gold_targets`.  Labels may be any hashable values (str, int, bool).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

__all__ = ["as_labels", "check_labels", "gold_targets", "label_indices", "resolve_targets"]


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _label_kind(value) -> type:
    """The Python kind of a label; numpy scalars count as their Python kind (``np.str_`` is a str)."""
    if isinstance(value, (bool, np.bool_)):
        return bool
    if isinstance(value, str):
        return str
    if isinstance(value, (int, np.integer)):
        return int
    if isinstance(value, (float, np.floating)):
        return float
    return type(value)


def _common_label_type(labels: np.ndarray, name: str) -> np.ndarray:
    """An object array of one label kind as a numpy array, so labels from numpy and Python mix freely."""
    kinds = {_label_kind(value) for value in labels}
    if len(kinds) > 1:
        raise TypeError(f"{name} mixes label types {sorted(k.__name__ for k in kinds)}; use one type (e.g. all str).")
    return np.asarray(labels.tolist())


def check_labels(y, n_samples: int, name: str = "y", *, owner: str = "FaithfulTextClassifier") -> np.ndarray:
    """Validate classification labels for ``n_samples`` texts.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
    n_samples : int
        Number of texts the labels belong to.
    name : str, default="y"
        Argument name used in error messages.
    owner : str
        Name of the estimator, for the message when ``y`` is None.

    Returns
    -------
    ndarray of shape (n_samples,)
        With a numpy dtype scikit-learn's encoders and metrics accept.

    Raises
    ------
    ValueError
        For ``y=None``, a length mismatch, a missing label, or a continuous target.
    TypeError
        For labels of mixed types (``["a", 1]``).
    """
    if y is None:
        raise ValueError(f"{owner} requires y to be passed, but the target {name} is None.")
    labels = column_or_1d(np.asarray(y, dtype=object) if not isinstance(y, np.ndarray) else y, warn=True)
    if len(labels) != n_samples:
        raise ValueError(f"X has {n_samples} texts but {name} has {len(labels)} labels; they must match.")
    missing = [i for i, v in enumerate(labels) if _is_missing(v)]
    if missing:
        raise ValueError(f"{name}[{missing[0]}] is missing ({labels[missing[0]]!r}); every text needs a label.")
    if labels.dtype == object:
        labels = _common_label_type(labels, name)
    try:
        check_classification_targets(labels)
    except ValueError as exc:  # scikit-learn's message does not say which argument
        raise ValueError(f"{name}: {exc}") from exc
    return labels


def as_labels(values, n_samples: int, name: str) -> list:
    """One label per text as a list (1-D, length checked)."""
    arr = values.to_numpy() if isinstance(values, (pd.Series, pd.DataFrame)) else np.asarray(values, dtype=object)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one label per text (1-D), got shape {arr.shape}.")
    if len(arr) != n_samples:
        raise ValueError(f"X has {n_samples} texts but {name} has {len(arr)} values; they must match.")
    return arr.tolist()


def label_indices(classes, labels, name: str) -> np.ndarray:
    """Indices of ``labels`` in ``classes``; an unknown label is an error naming it.

    Parameters
    ----------
    classes : ndarray
        A fitted classifier's ``classes_``.
    labels : sequence
    name : str
        Argument name used in error messages.

    Returns
    -------
    ndarray of int64
    """
    lookup = {c: i for i, c in enumerate(np.asarray(classes).tolist())}
    out = np.empty(len(labels), dtype=np.int64)
    for i, label in enumerate(labels):
        key = label.item() if hasattr(label, "item") else label
        if key not in lookup:
            where = name if len(labels) == 1 else f"{name}[{i}]"
            raise ValueError(f"{where} is {key!r}, which is not among classes_ {list(lookup)}.")
        out[i] = lookup[key]
    return out


def resolve_targets(clf, encoding, y=None, target=None) -> np.ndarray:
    """Class index to explain per example.

    Parameters
    ----------
    clf : FittedClassifier
        A fitted classifier (see :class:`fmmlearn.FittedClassifier`).
    encoding : Encoding
    y : array-like, optional
        Gold labels: explained when ``target`` is not given (the paper).
    target : label or array-like of labels, optional
        One class (a value of ``clf.classes_``) for every example, or one per
        example.  Takes precedence over ``y``.  With neither, the predicted
        class is explained.

    Returns
    -------
    ndarray of int64, shape (n_samples,)
        Indices into ``clf.classes_``.
    """
    n = len(encoding)
    gold = None if y is None else label_indices(clf.classes_, as_labels(y, n, "y"), "y")
    if target is not None:
        if isinstance(target, (str, bytes)) or np.ndim(target) == 0:
            return np.repeat(label_indices(clf.classes_, [target], "target"), n)
        return label_indices(clf.classes_, as_labels(target, n, "target"), "target")
    if gold is not None:
        return gold
    return clf.encoded_logits(encoding).argmax(axis=1).astype(np.int64)


def gold_targets(clf, encoding, y) -> tuple[np.ndarray, np.ndarray]:
    """Gold labels as class indices (the explanation target) and as ``classes_`` values (for metrics).

    Raises
    ------
    ValueError
        When ``y`` is None: faithfulness is measured against gold labels.
    """
    if y is None:
        raise ValueError("y is required: a faithfulness curve measures performance against the gold labels.")
    target_idx = resolve_targets(clf, encoding, y=y)
    return target_idx, clf.classes_[target_idx]

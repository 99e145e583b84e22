"""Metrics registry: the paper's metrics by name, computed with :mod:`sklearn.metrics`.

The paper selects checkpoints and computes RACU with one *primary metric* per
dataset (docs/datasets.md): ``accuracy``, ``macro_f1``, ``micro_f1`` or ``matthew``.
:func:`get_metric` turns such a name (or an alias, any scikit-learn scorer
name, or a callable) into a :class:`Metric`: a callable
``metric(y_true, y_pred, labels=None) -> float`` that also says whether it
needs probabilities and whether greater is better.

Examples
--------
>>> from fmmlearn.metrics import get_metric
>>> macro_f1 = get_metric("macro_f1")
>>> round(macro_f1(["a", "b", "b"], ["a", "b", "a"]), 4)
0.6667
>>> get_metric("loss").needs_proba, get_metric("loss").greater_is_better
(True, False)
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np
from sklearn.metrics import accuracy_score, f1_score, get_scorer, get_scorer_names, log_loss, matthews_corrcoef
from .utils import keyword_only

__all__ = ["Metric", "available_metrics", "get_metric", "greater_is_better", "vectorized_metric"]


@dataclass(frozen=True)
class Metric:
    """A named metric and how to call it.

    Parameters
    ----------
    name : str
        Canonical name (``"macro_f1"`` for the alias ``"f1_macro"``).
    func : callable
        ``func(y_true, y_pred_or_proba[, labels=...]) -> float``.
    needs_proba : bool, default=False
        If True, the second argument is an ``(n_samples, n_classes)`` array of
        class probabilities whose columns follow ``labels``; otherwise it is the
        predicted labels.
    greater_is_better : bool, default=True
        Whether a larger value is a better model (False for a loss).

    Examples
    --------
    >>> from sklearn.metrics import balanced_accuracy_score
    >>> m = Metric("balanced_accuracy", balanced_accuracy_score)
    >>> m([0, 1, 1], [0, 1, 0])
    0.75
    """

    name: str
    func: Callable
    needs_proba: bool = False
    greater_is_better: bool = True

    def __call__(self, y_true, y_pred, *, labels=None) -> float:
        """Compute the metric.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            Gold labels.
        y_pred : array-like
            Predicted labels, or probabilities of shape (n_samples, n_classes)
            when :attr:`needs_proba`.
        labels : array-like, default=None
            All class labels, in the column order of the probabilities. Passed
            on to metrics that take it: with ``labels``, macro F1 averages over
            every class (a class never predicted nor present scores 0, as in
            as the reference does); without it, over the classes present in either
            argument. Loss metrics need it whenever a class is absent from
            ``y_true``.

        Returns
        -------
        float
        """
        if labels is not None and _accepts_labels(self.func):
            return float(self.func(y_true, y_pred, labels=labels))
        return float(self.func(y_true, y_pred))

    def score(self, y_true, *, y_pred=None, y_proba=None, labels=None) -> float:
        """Compute the metric from whichever prediction it needs.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            Gold labels.
        y_pred : array-like of shape (n_samples,), default=None
            Predicted labels; required unless :attr:`needs_proba`.
        y_proba : array-like of shape (n_samples, n_classes), default=None
            Class probabilities; required if :attr:`needs_proba`.
        labels : array-like, default=None
            See :meth:`__call__`.

        Returns
        -------
        float
        """
        given, argname = (y_proba, "y_proba") if self.needs_proba else (y_pred, "y_pred")
        if given is None:
            raise ValueError(f"metric {self.name!r} needs {argname}; got None.")
        return self(y_true, given, labels=labels)


def _accepts_labels(func) -> bool:
    try:
        return "labels" in inspect.signature(func).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False


# canonical name -> Metric; the paper's four primary metrics plus the loss
_REGISTRY = {
    "accuracy": Metric("accuracy", accuracy_score),
    "macro_f1": Metric("macro_f1", partial(f1_score, average="macro", zero_division=0)),
    "micro_f1": Metric("micro_f1", partial(f1_score, average="micro", zero_division=0)),
    "matthew": Metric("matthew", matthews_corrcoef),
    "log_loss": Metric("log_loss", log_loss, needs_proba=True, greater_is_better=False),
}

_ALIASES = {
    "acc": "accuracy",
    "f1_macro": "macro_f1",
    "f1_micro": "micro_f1",
    "mcc": "matthew",
    "matthews": "matthew",
    "matthews_corrcoef": "matthew",
    "loss": "log_loss",
    "cross_entropy": "log_loss",
}


def available_metrics() -> list[str]:
    """List the registry's names and aliases.

    Any classification scorer name of :func:`sklearn.metrics.get_scorer_names`
    is accepted by :func:`get_metric` as well.

    Returns
    -------
    list of str
        Sorted canonical names followed by sorted aliases.

    Examples
    --------
    >>> available_metrics()[:5]
    ['accuracy', 'log_loss', 'macro_f1', 'matthew', 'micro_f1']
    """
    return sorted(_REGISTRY) + sorted(_ALIASES)


def get_metric(metric) -> Metric:
    """Resolve a metric name or callable to a :class:`Metric`.

    Parameters
    ----------
    metric : str, Metric or callable
        * a registry name: ``"accuracy"``, ``"macro_f1"``, ``"micro_f1"``,
          ``"matthew"``, ``"log_loss"``, or an alias (``"f1_macro"``,
          ``"f1_micro"``, ``"mcc"``, ``"matthews"``, ``"loss"``, ...);
          case and ``-``/``_`` are ignored;
        * a scikit-learn scorer name (``"balanced_accuracy"``,
          ``"neg_log_loss"``, ``"roc_auc_ovr"``, ...): the scorer's metric with
          its keyword arguments and sign, so ``neg_*`` names are negated and
          greater is always better, as in scikit-learn;
        * a :class:`Metric`, returned as is;
        * a callable ``metric(y_true, y_pred) -> float`` on labels, taken to be
          greater-is-better (wrap it in :class:`Metric` to say otherwise).

    Returns
    -------
    Metric

    Raises
    ------
    ValueError
        If ``metric`` is an unknown name (the message lists the valid ones).
    TypeError
        If ``metric`` is neither a string nor a callable, or is a scikit-learn
        scorer object (those take ``(estimator, X, y)``).

    Examples
    --------
    >>> get_metric("mcc").name
    'matthew'
    >>> get_metric("neg_log_loss").greater_is_better
    True
    """
    if isinstance(metric, Metric):
        return metric
    if isinstance(metric, str):
        return _metric_from_name(metric)
    if hasattr(metric, "_score_func"):  # a sklearn scorer: wrong calling convention
        raise TypeError(
            "metric is a scikit-learn scorer (called as scorer(estimator, X, y)); pass its name "
            "or a function metric(y_true, y_pred) instead."
        )
    if callable(metric):
        return Metric(getattr(metric, "__name__", "custom"), metric)
    raise TypeError(f"metric must be a metric name or a callable; got {type(metric).__name__}.")


def greater_is_better(metric) -> bool:
    """Whether a larger value of ``metric`` means a better model.

    Parameters
    ----------
    metric : str, Metric or callable
        Anything :func:`get_metric` accepts.

    Returns
    -------
    bool

    Examples
    --------
    >>> greater_is_better("accuracy"), greater_is_better("loss")
    (True, False)
    """
    return get_metric(metric).greater_is_better


def _metric_from_name(name: str) -> Metric:
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key in _REGISTRY:
        return _REGISTRY[key]
    if key in get_scorer_names():
        return _metric_from_scorer(key)
    raise ValueError(
        f"unknown metric {name!r}; valid names are {available_metrics()}, any classification "
        "scorer name of sklearn.metrics.get_scorer_names(), or a callable metric(y_true, y_pred)."
    )


def _metric_from_scorer(name: str) -> Metric:
    # sklearn keeps a scorer's metric, kwargs and sign in private attributes;
    # read them defensively so a sklearn change fails with a clear message.
    scorer = get_scorer(name)
    func = getattr(scorer, "_score_func", None)
    response = getattr(scorer, "_response_method", None)
    response = (response,) if isinstance(response, str) else tuple(response or ())
    if func is None or not response:
        raise ValueError(f"scorer {name!r} cannot be used as a metric(y_true, y_pred); pass a callable.")
    kwargs = dict(getattr(scorer, "_kwargs", {}))
    sign = getattr(scorer, "_sign", 1)
    if "predict_proba" in response:
        return Metric(name, partial(_proba_scorer_metric, func, sign, kwargs), needs_proba=True)
    if response == ("predict",):
        return Metric(name, partial(_label_scorer_metric, func, sign, kwargs))
    raise ValueError(f"scorer {name!r} needs decision scores, which fmmlearn does not provide.")


def _label_scorer_metric(func, sign, kwargs, y_true, y_pred, labels=None):
    if labels is not None and _accepts_labels(func):
        kwargs = {**kwargs, "labels": labels}
    return sign * func(y_true, y_pred, **kwargs)


def _proba_scorer_metric(func, sign, kwargs, y_true, y_proba, labels=None):
    y_proba = np.asarray(y_proba)
    # like sklearn's scorers: a binary problem is scored on the probability of
    # the second (positive) class only
    if y_proba.ndim == 2 and y_proba.shape[1] == 2:
        y_proba = y_proba[:, 1]
        if labels is not None and "pos_label" in inspect.signature(func).parameters:
            kwargs = {"pos_label": list(labels)[1], **kwargs}
    return _label_scorer_metric(func, sign, kwargs, y_true, y_proba, labels)


# --------------------------------------------------------------------------- many predictions at once


def _class_counts(pred, gold, n_classes: int):
    """Per class: true positives, predicted and gold counts over the last axis (shape ``(..., n_classes)``)."""
    classes = np.arange(n_classes).reshape((n_classes,) + (1,) * pred.ndim)
    is_pred, is_gold = pred == classes, gold == classes
    tp, predicted, true = (is_pred & is_gold).sum(-1), is_pred.sum(-1), is_gold.sum(-1)
    return (np.moveaxis(x, 0, -1).astype(np.float64) for x in (tp, predicted, true))


def _macro_f1(pred, gold, n_classes):
    """Macro F1 over every class (0/0 := 0, so a class neither predicted nor present scores 0)."""
    tp, predicted, true = _class_counts(pred, gold, n_classes)
    denominator = predicted + true
    return np.where(denominator > 0, 2 * tp / np.where(denominator > 0, denominator, 1), 0.0).mean(-1)


def _matthew(pred, gold, n_classes):
    """Multi-class Matthews correlation from the confusion counts (NaN -> 0)."""
    tp, predicted, true = _class_counts(pred, gold, n_classes)
    s = float(pred.shape[-1])
    c = tp.sum(-1)
    denominator = np.sqrt((s**2 - (predicted**2).sum(-1)) * (s**2 - (true**2).sum(-1)))
    return np.where(denominator > 0, (c * s - (true * predicted).sum(-1)) / np.where(denominator > 0, denominator, 1),
                    0.0)


@keyword_only
def vectorized_metric(metric, *, classes) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``score(pred, gold) -> values``: a label metric over the last axis, for any leading shape.

    Predictions and gold labels are class *indices* (into ``classes``).  The paper's metrics
    (accuracy, micro F1 -- equal to accuracy for single-label data --, macro F1 over every class and
    Matthews correlation) are computed from per-class counts, vectorised over resamples and
    ratios: exactly what :func:`get_metric` gives, many times at once (``tests/test_metrics.py``
    checks both against each other).  Any other label metric is called once per row (exact, slow).

    Parameters
    ----------
    metric : str or Metric
        A metric of predicted labels (:func:`get_metric`).
    classes : array-like
        The classifier's ``classes_``.

    Returns
    -------
    callable

    Examples
    --------
    >>> import numpy as np
    >>> score = vectorized_metric("macro_f1", classes=["neg", "pos"])
    >>> score(np.array([[0, 1, 1], [0, 0, 0]]), np.array([0, 1, 0])).round(4)
    array([0.6667, 0.4   ])
    """
    metric = get_metric(metric)
    if metric.needs_proba:
        raise ValueError(f"metric {metric.name!r} needs probabilities; a vectorized metric takes predicted labels.")
    n_classes = len(classes)
    if metric.name in ("accuracy", "micro_f1"):
        return lambda pred, gold: (pred == gold).mean(axis=-1)
    if metric.name == "macro_f1":
        return lambda pred, gold: _macro_f1(*np.broadcast_arrays(pred, gold), n_classes)
    if metric.name == "matthew":
        return lambda pred, gold: _matthew(*np.broadcast_arrays(pred, gold), n_classes)
    labels = np.asarray(classes)

    def score(pred, gold):
        pred, gold = np.broadcast_arrays(pred, gold)
        flat_pred, flat_gold = pred.reshape(-1, pred.shape[-1]), gold.reshape(-1, gold.shape[-1])
        out = [metric(labels[g], labels[p], labels=labels) for p, g in zip(flat_pred, flat_gold)]
        return np.asarray(out, dtype=np.float64).reshape(pred.shape[:-1])

    return score

"""Checks of the study's options: each bad value is a ValueError that names the option, raised before any work."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils._param_validation import validate_parameter_constraints

__all__ = ["STUDY_OWNED", "checked_classifier_params", "float_list", "int_list",
           "label_metric", "option_error", "str_list"]

#: FaithfulTextClassifier parameters the study sets itself.
STUDY_OWNED = ("model", "max_masking_ratio", "random_state", "device", "verbose")


def option_error(option: str, problem: str) -> ValueError:
    """``ValueError("<option>: <problem>")``."""
    return ValueError(f"{option}: {problem}")


def float_list(values, option) -> list[float]:
    """Distinct finite numbers (e.g. ``masking_ratios``)."""
    try:
        out = [float(v) for v in np.atleast_1d(np.asarray(values, dtype=np.float64))]
    except (TypeError, ValueError) as exc:
        raise option_error(option, f"expected numbers, got {values!r}.") from exc
    if not out or len(set(out)) != len(out) or not all(np.isfinite(out)):
        raise option_error(option, f"expected distinct finite numbers, got {values!r}.")
    return out


def int_list(values, option) -> list[int]:
    """Distinct non-negative integers (e.g. ``seeds``)."""
    items = list(np.atleast_1d(np.asarray(values, dtype=object)))
    if not items or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0 for v in items):
        raise option_error(option, f"expected distinct non-negative integers, got {values!r}.")
    if len(set(items)) != len(items):
        raise option_error(option, f"expected distinct values, got {values!r}.")
    return [int(v) for v in items]


def str_list(values, option) -> list[str]:
    """A non-empty list of names, repeats dropped (e.g. ``measures``)."""
    items = [values] if isinstance(values, str) else list(values)
    if not items or not all(isinstance(v, str) for v in items):
        raise option_error(option, f"expected a non-empty list of names, got {values!r}.")
    return list(dict.fromkeys(items))


def label_metric(get_metric, name):
    """The metric ``name``; it must be a greater-is-better metric of predicted labels (curves use labels)."""
    try:
        metric = get_metric(name)
    except (TypeError, ValueError) as exc:
        raise option_error("metric", str(exc)) from exc
    if metric.needs_proba or not metric.greater_is_better:
        raise option_error("metric", f"{metric.name!r} is not a greater-is-better metric of predicted labels; use "
                               "'accuracy', 'macro_f1', 'micro_f1' or 'matthew'.")
    return metric


def checked_classifier_params(params) -> dict:
    """``classifier_params`` checked against FaithfulTextClassifier's own constraints (the study sets the rest)."""
    from ..estimator import FaithfulTextClassifier

    params = dict(params or {})
    owned = sorted(set(params) & set(STUDY_OWNED))
    if owned:
        raise option_error("classifier_params", f"{owned} are set by the study itself (use model, masking_ratios, "
                                          "seeds, device and verbose of FaithfulnessStudy).")
    try:
        clf = FaithfulTextClassifier(**params)
    except TypeError as exc:
        raise option_error("classifier_params", str(exc)) from exc
    validate_parameter_constraints(FaithfulTextClassifier._parameter_constraints, clf.get_params(deep=False),
                                   caller_name="classifier_params of FaithfulnessStudy")
    return params

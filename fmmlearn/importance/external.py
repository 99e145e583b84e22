"""Explainers as values: your own functions and Captum attributions (docs/explainers.md).

An :class:`Explainer` is anything that scores the tokens of a batch for a
target class.  :func:`as_explainer` turns what a user passes as ``method=``
into one: an :class:`Explainer` as is, a Captum attribution class or object
into a :class:`CaptumExplainer`, any other callable into a
:class:`CallableExplainer`.  Every explainer has a stable ``name`` (its label
in frames and tables and its key in the study cache), a declared or inferred
signedness, and is called on whole batches.  Resolving an explainer registers
it under its name in this process, so the name works wherever a built-in
measure's name does (the study and the scorers keep names).
"""

from __future__ import annotations

from ._captum import CaptumExplainer, is_captum
from ._explainer import REDUCTIONS, CallableExplainer, Explainer

__all__ = ["REDUCTIONS", "CallableExplainer", "CaptumExplainer", "Explainer", "as_explainer", "is_explainer_like",
           "registered_explainer"]

_REGISTRY: dict = {}


def registered_explainer(name: str):
    """The explainer resolved under ``name`` in this process, or ``None``."""
    return _REGISTRY.get(name)


def is_explainer_like(obj) -> bool:
    """Whether ``obj`` is an explainer value (not a measure's name nor a ``ImportanceMethod``)."""
    if isinstance(obj, Explainer) or is_captum(obj):
        return True
    return callable(obj) and not isinstance(obj, str) and not hasattr(obj, "bind")


def as_explainer(obj) -> Explainer:
    """The :class:`Explainer` of a value given as ``method=``, registered under its name.

    Parameters
    ----------
    obj : Explainer, Captum attribution class or object, or callable
        A callable is ``fn(input_ids, attention_mask, target) -> scores``
        (see :class:`CallableExplainer`).

    Returns
    -------
    Explainer
        The same object for the same value within a process, so a signedness
        inferred on the first batch is kept.

    Raises
    ------
    TypeError
        For anything else.
    """
    if isinstance(obj, Explainer):
        explainer = obj
    else:
        known = [e for e in _REGISTRY.values() if e.source is obj]
        if known:
            return known[0]
        if is_captum(obj):
            explainer = CaptumExplainer(obj)
        elif callable(obj):
            explainer = CallableExplainer(obj)
        else:
            raise TypeError("an explainer must be a callable, a Captum attribution class or object or an "
                            f"Explainer, got {type(obj).__name__}.")
        explainer.source = obj
    _REGISTRY[explainer.name] = explainer
    return explainer

"""The importance methods by the paper's names, with their properties (docs/explain.md).

The old names ``Measure``, ``MEASURE_NAMES``, ``get_measure`` and ``importance_measures`` still work, with a
FutureWarning (docs/changes.md).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from . import beam, gradient, integrated, occlusion, random
from ..utils import renamed_attributes
from .external import as_explainer, is_explainer_like, registered_explainer

__all__ = ["ImportanceMethod", "METHOD_NAMES", "get_method", "importance_methods"]


@dataclass(frozen=True)
class ImportanceMethod:
    """One importance method (an explanation technique): how to compute it and how to use it.

    Attributes
    ----------
    name : str
        The paper's name, e.g. ``"int-grad-sign"`` or ``"beam-sign-10"``.
    signed : bool or None
        Whether the sign carries meaning (positive = evidence for the target);
        ``None`` for an explainer whose signedness is not yet inferred.
    recursive : bool
        Default for faithfulness curves: recompute on the partially masked
        input before every masking step (``True`` for all but beam search).
    cost : str
        Model evaluations per example (``n`` = number of explained tokens).
    fn : callable
        ``fn(problem, **params) -> Tensor (B, T)``.
    params : dict
        Parameters fixed by the name (e.g. ``{"absolute": True}``).
    uses_gradients : bool
        Needs a backward pass (so it runs in fp32 unless told otherwise).
        Forward-only measures run in fp32 too, even under ``precision="auto"``.
    description : str
    check : callable or None
        Validates user parameters before any computation.
    explainer : Explainer or None
        The explainer value behind the measure (docs/explainers.md); ``None``
        for the built-in measures.
    """

    name: str
    signed: bool
    recursive: bool
    cost: str
    fn: Callable = field(repr=False)
    params: dict = field(default_factory=dict)
    uses_gradients: bool = False
    description: str = ""
    check: Callable | None = field(default=None, repr=False)
    explainer: object = field(default=None, repr=False, compare=False)

    @property
    def precision_family(self) -> str:
        """``"gradient"`` for gradient measures, ``"forward"`` for the rest (see
        :data:`fmmlearn.modeling.PRECISION_FAMILIES`): forward-only measures rank
        tokens by target-logit differences and run in fp32 by default."""
        return "gradient" if self.uses_gradients else "forward"

    def accepted_params(self) -> list[str]:
        """Names of the keyword parameters a user may pass."""
        signature = inspect.signature(self.fn)
        names = [p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
        return [n for n in names if n not in self.params]

    def bind(self, method_params: dict) -> dict:
        """Validate user parameters and merge them with the fixed ones.

        Raises
        ------
        ValueError
            For a parameter the measure does not take, one its name already
            fixes, or an invalid value.
        """
        if self.explainer is not None:
            if method_params:
                raise ValueError(f"method {self.name!r} is an explainer value; it takes no parameters "
                                 f"{sorted(method_params)} here: give its options when building it "
                                 "(e.g. CaptumExplainer(cls, n_steps=20)).")
            return dict(self.params)
        fixed = sorted(set(method_params) & set(self.params))
        if fixed:
            raise ValueError(f"method {self.name!r} fixes {fixed} by its name; do not pass them again.")
        unknown = sorted(set(method_params) - set(self.accepted_params()))
        if unknown:
            accepted = self.accepted_params() or "none"
            raise ValueError(f"method {self.name!r} does not take parameter(s) {unknown}; it accepts {accepted}.")
        params = {**method_params, **self.params}
        if self.check is not None:
            self.check(**params)
        return params


def _entry(name, signed, recursive, cost, fn, params=None, uses_gradients=False, description="", check=None):
    return ImportanceMethod(name, signed, recursive, cost, fn, dict(params or {}), uses_gradients, description, check)


_FIXED = [
    _entry("rand", False, True, "none", random.uniform, description="i.i.d. Uniform[0, 1) scores (the baseline)."),
    _entry("grad-l2", False, True, "1 forward + backward", gradient.gradient_norm, {"norm": "l2"}, True,
           "L2 norm of the gradient w.r.t. the one-hot input, sqrt(g^T E^T E g)."),
    _entry("grad-l1", False, True, "1 forward + backward", gradient.gradient_norm, {"norm": "l1"}, True,
           "L1 norm of the gradient w.r.t. the one-hot input, sum_v |E_v . g|."),
    _entry("inp-grad-sign", True, True, "1 forward + backward", gradient.input_x_gradient, {"absolute": False},
           True, "input x gradient, e_t . g_t."),
    _entry("inp-grad-abs", False, True, "1 forward + backward", gradient.input_x_gradient, {"absolute": True},
           True, "|input x gradient|."),
    _entry("int-grad-sign", True, True, "n_steps forward + backward", integrated.integrated_gradients,
           {"absolute": False}, True, "integrated gradients from a baseline (default: [PAD] embedding).",
           integrated.check_params),
    _entry("int-grad-abs", False, True, "n_steps forward + backward", integrated.integrated_gradients,
           {"absolute": True}, True, "|integrated gradients|.", integrated.check_params),
    _entry("loo-sign", True, True, "n + 1 forwards", occlusion.leave_one_out, {"absolute": False},
           description="f_y(x) - f_y(x with token t replaced by the mask token)."),
    _entry("loo-abs", False, True, "n + 1 forwards", occlusion.leave_one_out, {"absolute": True},
           description="|leave-one-out|."),
]
_MEASURES = {m.name: m for m in _FIXED}
_BEAM = re.compile(r"beam-sign-(-?\d+)")

#: The names :func:`get_method` accepts (``K`` is any positive beam width).
METHOD_NAMES = tuple(_MEASURES) + ("beam-sign-K",)


def _beam_measure(width: int) -> ImportanceMethod:
    if width < 1:
        raise ValueError(f"the beam width of method 'beam-sign-{width}' must be at least 1, got {width}.")
    return _entry(f"beam-sign-{width}", True, False, f"~ {width} * n^2 / 2 forwards", beam.beam_search,
                  {"beam_size": width}, description="rank n..1 along the masking order found by beam search "
                  "that maximises the area between the clean and the masked target logit.")


def _explainer_scores(problem, *, explainer):
    return explainer.scores(problem)


def explainer_measure(explainer) -> ImportanceMethod:
    """The :class:`ImportanceMethod` of an explainer value (its signedness as known now)."""
    if explainer.name in _MEASURES or _BEAM.fullmatch(explainer.name):
        raise ValueError(f"an explainer may not take the built-in measure's name {explainer.name!r}; pass name=.")
    return ImportanceMethod(explainer.name, explainer.signed, True, explainer.cost, _explainer_scores,
                   {"explainer": explainer}, explainer.uses_gradients, repr(explainer), None, explainer)


def get_method(name) -> ImportanceMethod:
    """Look an importance measure up by its paper name, or make one of an explainer value.

    Parameters
    ----------
    name : str, ImportanceMethod or explainer value
        One of :data:`METHOD_NAMES`; ``beam-sign-K`` takes any beam width
        ``K >= 1`` (e.g. ``"beam-sign-10"``).  A :class:`ImportanceMethod` is returned
        as is.  An explainer value -- a callable ``fn(input_ids,
        attention_mask, target) -> scores``, a Captum attribution class or
        object, an :class:`~fmmlearn.importance.Explainer` -- becomes a
        measure named after it (docs/explainers.md), and that name is then
        known in this process.

    Returns
    -------
    ImportanceMethod

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones) or a beam
        width below 1.
    """
    if isinstance(name, ImportanceMethod):
        return name
    if isinstance(name, str):
        if name in _MEASURES:
            return _MEASURES[name]
        match = _BEAM.fullmatch(name)
        if match:
            return _beam_measure(int(match.group(1)))
        known = registered_explainer(name)
        if known is not None:
            return explainer_measure(known)
    elif is_explainer_like(name):
        return explainer_measure(as_explainer(name))
    raise ValueError(f"method must be one of {list(METHOD_NAMES)} (K = beam width, e.g. 'beam-sign-10'), "
                     "a callable fn(input_ids, attention_mask, target) -> scores, a Captum attribution class or "
                     f"object, or the name of an explainer used before, got {name!r}.")


def importance_methods() -> pd.DataFrame:
    """The available importance measures and their properties, one row each.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``name``; columns ``signed``, ``recursive`` (the default for
        faithfulness curves), ``uses_gradients``, ``cost`` (model evaluations
        per example, ``n`` explained tokens) and ``description``.

    Examples
    --------
    >>> from fmmlearn.importance import importance_methods
    >>> importance_methods().loc["loo-sign", "cost"]
    'n + 1 forwards'
    """
    rows = list(_MEASURES.values()) + [_beam_measure(1)]
    frame = pd.DataFrame(
        [
            {"name": m.name, "signed": m.signed, "recursive": m.recursive, "uses_gradients": m.uses_gradients,
             "cost": m.cost, "description": m.description}
            for m in rows
        ]
    )
    frame.loc[frame.index[-1], ["name", "cost"]] = ["beam-sign-K", "~ K * n^2 / 2 forwards"]
    return frame.set_index("name")


#: Old names (issue 36) -> new names; each still works, with a FutureWarning.
RENAMED = {"Measure": "ImportanceMethod", "MEASURE_NAMES": "METHOD_NAMES", "get_measure": "get_method",
           "importance_measures": "importance_methods"}

__getattr__ = renamed_attributes(__name__, RENAMED, globals())

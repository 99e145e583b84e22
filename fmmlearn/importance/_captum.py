"""Captum attributions as explainers (docs/explainers.md).

A Captum attribution class (or a configured object) is bound to the model
being explained, with the model's logits as forward function and the
explained class as ``target``:

* perturbation methods (``FeatureAblation``, ``Occlusion``,
  ``ShapleyValueSampling``, ``KernelShap``, ``Lime``, ...) perturb the input
  ids: one feature per token (``feature_mask``), the mask token as baseline;
* layer methods (``LayerIntegratedGradients``, ...) attribute the output of
  the model's input-embedding layer, the mask token's ids as baseline;
* the other gradient methods (``IntegratedGradients``, ``Saliency``,
  ``DeepLift``, ``GradientShap``, ``InputXGradient``, ...) attribute the word
  embeddings, the mask token's embedding as baseline.

Positions that may not be masked (special tokens, padding, segment B) keep
their own id or embedding in every baseline, so they are never perturbed.
Embedding-level attributions ``(B, T, D)`` are reduced to one score per
token by ``reduction`` (default ``"sum"`` over the embedding dimension, as in
Captum's tutorials).
"""

from __future__ import annotations

import copy
import inspect

import torch

from ..modeling import autocast, logits_of
from ._explainer import Explainer
from ._utils import embed, gradient_mode

__all__ = ["CaptumExplainer", "is_captum"]

KINDS = ("perturbation", "layer", "gradient")

# Captum's own names whose sampling is per example: called one text at a time by default.
_ONE_TEXT_AT_A_TIME = ("Lime", "KernelShap", "GradientShap", "DeepLiftShap", "LimeBase")


def is_captum(obj) -> bool:
    """Whether ``obj`` is a Captum attribution class or object (``False`` when Captum is not installed)."""
    try:
        from captum.attr import Attribution
    except ImportError:  # captum is optional
        return False
    return (isinstance(obj, type) and issubclass(obj, Attribution)) or isinstance(obj, Attribution)


def _kind(cls) -> str:
    from captum.attr import GradientAttribution, LayerAttribution, PerturbationAttribution

    if issubclass(cls, LayerAttribution):
        return "layer"
    if issubclass(cls, PerturbationAttribution):
        return "perturbation"
    if issubclass(cls, GradientAttribution):
        return "gradient"
    raise TypeError(f"Captum's {cls.__name__} is neither a perturbation, a layer nor a gradient attribution; "
                    "wrap it in a function fn(input_ids, attention_mask, target) -> scores instead.")


def _option_label(options: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(options.items()))


class _EmbeddingsToLogits(torch.nn.Module):
    """The model as a function of its word embeddings (a Module, as ``DeepLift`` needs)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, inputs_embeds, attention_mask, token_type_ids=None):
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return logits_of(self.model(inputs_embeds=inputs_embeds, attention_mask=attention_mask, **extra))


def _ids_to_logits(model):
    def forward(input_ids, attention_mask, token_type_ids=None):
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        return logits_of(model(input_ids=input_ids, attention_mask=attention_mask, **extra))

    return forward


class CaptumExplainer(Explainer):
    """A Captum attribution as an explainer.

    Parameters
    ----------
    attribution : Captum attribution class or object
        A class (e.g. ``captum.attr.FeatureAblation``) is built on the model;
        an object (e.g. ``IntegratedGradients(f, multiply_by_inputs=False)``)
        keeps its own settings (a layer method its layer) and gets the
        model's forward function in place of its own (on a copy).
    name : str, optional
        Default: the class name, followed by the ``attribute`` options.
    signed : bool, optional
        Default: inferred from the first batch.
    reduction : {"sum", "mean", "l2", "l1"}, callable or None, default="sum"
        Rule reducing embedding-level attributions ``(B, T, D)`` to tokens.
    batch_size : int, optional
        Texts per ``attribute`` call; default the whole batch, one text for
        ``Lime``, ``KernelShap``, ``GradientShap`` and ``DeepLiftShap``
        (their samples are drawn per call).
    **attribute_options
        Passed to ``attribute`` (e.g. ``n_steps=20``, ``n_samples=50``,
        ``perturbations_per_eval=8``, ``internal_batch_size=64``); they
        override the baselines, feature mask and target fmmlearn sets.

    Examples
    --------
    >>> from captum.attr import IntegratedGradients
    >>> from fmmlearn.importance import CaptumExplainer
    >>> CaptumExplainer(IntegratedGradients, n_steps=20).name
    'IntegratedGradients(n_steps=20)'
    """

    def __init__(self, attribution, *, name=None, signed=None, reduction="sum", batch_size=None,
                 **attribute_options):
        if not is_captum(attribution):
            raise TypeError(f"attribution must be a Captum attribution class or object, got {attribution!r}.")
        cls = attribution if isinstance(attribution, type) else type(attribution)
        self.attribution, self.kind, self.options = attribution, _kind(cls), dict(attribute_options)
        label = cls.__name__ + (f"({_option_label(self.options)})" if self.options else "")
        if batch_size is None and any(c.__name__ in _ONE_TEXT_AT_A_TIME for c in cls.__mro__):
            batch_size = 1
        cost = {"perturbation": "Captum, forward passes", "layer": "Captum, forward + backward",
                "gradient": "Captum, forward + backward"}[self.kind]
        super().__init__(name or label, signed=signed, reduction=reduction, batch_size=batch_size,
                         uses_gradients=self.kind != "perturbation", cost=cost)
        self._bound = (None, None)  # (model, the attribution bound to it)

    def bind(self, model):
        """The Captum object computing attributions of ``model`` (built once per model).

        Parameters
        ----------
        model : torch.nn.Module
            The sequence classifier whose logits are explained.

        Returns
        -------
        captum.attr.Attribution
            The user's class built on the model's forward function, or a copy of the user's object with
            that forward function (the user's object is left unchanged).
        """
        if self._bound[0] is model:
            return self._bound[1]
        forward = _EmbeddingsToLogits(model) if self.kind == "gradient" else _ids_to_logits(model)
        if isinstance(self.attribution, type):
            if self.kind == "layer":
                bound = self.attribution(forward, model.get_input_embeddings())
            else:
                bound = self.attribution(forward)
        else:
            bound = copy.copy(self.attribution)
            bound.forward_func = forward
            if hasattr(bound, "model"):
                bound.model = forward
        self._bound = (model, bound)
        return bound

    def attribute(self, problem, input_ids, attention_mask, target):
        bound = self.bind(problem.model)
        batch, eligible = problem.batch, problem.eligible
        extra = (attention_mask,) if batch.token_type_ids is None else (attention_mask, batch.token_type_ids)
        mask_ids = torch.full_like(input_ids, problem.mask_token_id)
        base_ids = torch.where(eligible, mask_ids, input_ids)
        if self.kind == "gradient":
            inputs = embed(problem.model, input_ids)
            baselines = torch.where(eligible[..., None], embed(problem.model, mask_ids), inputs)
            inputs = inputs.clone().requires_grad_(True)  # Captum would set it, with a warning
        else:
            inputs, baselines = input_ids, base_ids
        call = {"inputs": inputs, "target": target, "additional_forward_args": extra}
        accepted = inspect.signature(bound.attribute).parameters
        if "baselines" in accepted:
            call["baselines"] = baselines
        if "sliding_window_shapes" in accepted:  # Occlusion: windows of one token
            call["sliding_window_shapes"] = (1,)
        elif "feature_mask" in accepted and self.kind == "perturbation":
            # one feature per explained token (1..n); the rest share feature 0, whose baseline is itself
            call["feature_mask"] = eligible.long().cumsum(dim=1) * eligible
        call.update(self.options)
        grad = gradient_mode(problem.model) if self.uses_gradients else torch.no_grad()
        with grad, autocast(problem.device, problem.autocast_dtype):
            return bound.attribute(**call)


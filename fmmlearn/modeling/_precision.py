"""Numeric precision: ``precision="auto"`` resolved by measurement, per family of work (predict, gradient, forward).
"""

from __future__ import annotations

import torch

from . import _devices  # _devices.reduced_dtype looked up at call time: the one seam tests patch
from ._devices import cpu_info
from ._probes import MIN_SPEEDUP, _model_device, measure_forward_rates

__all__ = ["PRECISIONS", "PRECISION_FAMILIES", "autocast_dtype_for", "precision_report", "resolve_precision"]


#: Values of the ``precision`` parameter.
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


#: What a forward pass is for; each family gets its own dtype (docs/explain.md, "Precision").
#: ``predict``: logits of predictions and of masked sets; ``gradient``: the gradient measures;
#: ``forward``: leave-one-out and beam search, whose rankings come from target-logit differences.
PRECISION_FAMILIES = ("predict", "gradient", "forward")


def _check_precision(precision) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}.")


def resolve_precision(precision: str, device: torch.device, *, family: str = "predict",
                      model=None) -> torch.dtype | None:
    """Autocast dtype of one precision family for the ``precision`` parameter; ``None`` means fp32.

    Parameters
    ----------
    precision : {"auto", "fp32", "bf16", "fp16"}
        ``"fp32"``, ``"bf16"`` and ``"fp16"`` (CUDA only) force that precision on the
        ``predict`` and ``gradient`` families.  ``"auto"`` uses the device's native half
        precision (:func:`reduced_dtype`) only when it is measurably faster: with ``model``
        given, when :func:`measure_forward_rates` timed it at least :data:`MIN_SPEEDUP` times
        faster than fp32; without one (before a model is loaded), wherever it runs natively.
    device : torch.device
    family : {"predict", "gradient", "forward"}, default="predict"
        ``"forward"`` (leave-one-out, beam search) is fp32 whatever ``precision`` says: their
        rankings come from small differences of target logits, which bf16 forwards blur
        (Spearman 0.994-0.999 against fp32 on MiniLM, even with the classification head in fp32).
    model : torch.nn.Module, optional
        The model ``"auto"`` times.

    Returns
    -------
    torch.dtype or None
    """
    _check_precision(precision)
    if family not in PRECISION_FAMILIES:
        raise ValueError(f"family must be one of {PRECISION_FAMILIES}, got {family!r}.")
    device = torch.device(device)
    if precision == "fp16" and device.type != "cuda":
        raise ValueError("precision='fp16' needs a CUDA device; use 'bf16' or 'fp32' on the CPU.")
    if precision == "fp32" or family == "forward":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision == "fp16":
        return torch.float16
    candidate = _devices.reduced_dtype(device)
    if candidate is None or model is None:
        return candidate
    return candidate if measure_forward_rates(model, device).reduced_is_faster else None


def precision_report(model, device=None) -> dict:
    """What ``precision="auto"`` chooses for ``model`` per family, with the measured forward rates.

    Returns
    -------
    dict
        ``cpu`` (:func:`cpu_info`), ``torch`` (version), ``device``, ``rates``
        (:meth:`ForwardRates.as_dict`) and ``families``: ``{family: "fp32" | "bfloat16" | "float16"}``
        for prediction, gradient measures under ``precision="auto"`` and LOO/beam.
    """
    device = _model_device(model) if device is None else torch.device(device)
    rates = measure_forward_rates(model, device)
    name = lambda dtype: "fp32" if dtype is None else str(dtype).replace("torch.", "")  # noqa: E731
    families = {family: name(resolve_precision("auto", device, family=family, model=model))
                for family in PRECISION_FAMILIES}
    return {"cpu": cpu_info(), "torch": torch.__version__, "device": str(device), "rates": rates.as_dict(),
            "min_speedup": MIN_SPEEDUP, "families": families}


def autocast_dtype_for(clf, measure=None, precision: str | None = None) -> torch.dtype | None:
    """Autocast dtype for computing an importance measure on ``clf`` (``None`` = fp32).

    Parameters
    ----------
    clf : FittedClassifier
        Reads ``inference_dtype_`` (the classifier's measured prediction precision) and ``device_``.
    measure : ImportanceMethod, optional
        Only ``measure.uses_gradients`` is read: gradient measures are the ``"gradient"``
        family, all others (leave-one-out, beam search) the ``"forward"`` family.
    precision : {None, "auto", "fp32", "bf16", "fp16"}
        ``None``: fp32 for every measure (exact; the default).  ``"auto"``: gradient measures
        follow the classifier's inference precision (bf16 only where it was measured faster, or
        where the classifier was told ``precision="bf16"``); leave-one-out and beam search stay
        in fp32, so their rankings never depend on precision.  ``"fp32"``, ``"bf16"``,
        ``"fp16"``: that precision for every measure, an explicit trade of exactness for speed
        for leave-one-out and beam search.

    Returns
    -------
    torch.dtype or None
    """
    if precision is None:
        return None
    if precision == "auto":
        gradient = measure is not None and bool(getattr(measure, "uses_gradients", False))
        return clf.inference_dtype_ if gradient else None
    return resolve_precision(precision, clf.device_)

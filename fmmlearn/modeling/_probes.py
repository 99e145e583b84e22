"""Short measurements of this machine, cached per model: forward rates in fp32 and reduced precision, tokens per forward pass.

CPU kinds differ (bf16 is several times faster with AMX and many times slower with AVX2 only), so
nothing about speed is assumed: it is measured once per model, device and shape.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch

from . import _devices  # _devices.reduced_dtype looked up at call time: the one seam tests patch
from ._adapters import embedding_rows
from ._devices import autocast, eval_mode, is_oom

__all__ = ["DEFAULT_TOKENS_PER_FORWARD", "ForwardRates", "MIN_SPEEDUP", "PROBE_SHAPE", "TOKEN_BUDGETS", "clear_probe_cache", "measure_forward_rates", "tokens_per_forward"]


#: ``precision="auto"`` uses half precision only when the probe measured its forward at least this
#: many times faster than fp32, so that timing noise cannot pick a precision that is not faster.
MIN_SPEEDUP = 1.15


#: Shape ``(rows, tokens)`` of the precision probe: a small batch of short texts (well under 1 s).
PROBE_SHAPE = (8, 64)


#: Forward sizes (rows x tokens) tried by :func:`tokens_per_forward`, smallest first.
TOKEN_BUDGETS = (512, 1024, 2048)


#: Tokens per forward pass when no probe runs (models that are not Hugging Face models).
DEFAULT_TOKENS_PER_FORWARD = 2048


_RATES: dict = {}


_BUDGETS: dict = {}


@dataclass(frozen=True)
class ForwardRates:
    """Forward throughput of one model at one shape, measured by :func:`measure_forward_rates`.

    Attributes
    ----------
    shape : (int, int)
        Rows and tokens of the timed forward pass.
    device : str
    fp32 : float
        Tokens per second in fp32.
    reduced_dtype : str or None
        The half precision probed (``"bfloat16"``, ``"float16"``), ``None`` where none runs natively.
    reduced : float or None
        Its tokens per second.
    seconds : float
        Wall time of the probe.
    """

    shape: tuple
    device: str
    fp32: float
    reduced_dtype: str | None
    reduced: float | None
    seconds: float

    @property
    def speedup(self) -> float | None:
        """Half-precision over fp32 throughput (``None`` when not probed)."""
        return None if self.reduced is None else self.reduced / self.fp32

    @property
    def reduced_is_faster(self) -> bool:
        """Whether the half precision beat fp32 by at least :data:`MIN_SPEEDUP`."""
        return self.speedup is not None and self.speedup >= MIN_SPEEDUP

    def as_dict(self) -> dict:
        return {"shape": list(self.shape), "device": self.device, "fp32_tokens_per_s": self.fp32,
                "reduced_dtype": self.reduced_dtype, "reduced_tokens_per_s": self.reduced,
                "speedup": self.speedup, "probe_seconds": self.seconds}


def _model_key(model) -> tuple:
    """What forward speed depends on: the architecture (class, parameter shapes and dtypes), not the weights."""
    config = getattr(model, "config", None)
    return (type(model).__module__, type(model).__qualname__, getattr(config, "_attn_implementation", None),
            tuple((tuple(p.shape), str(p.dtype)) for p in model.parameters()))


def _model_device(model) -> torch.device:
    return next(iter(model.parameters()), torch.empty(0)).device


def _probe_inputs(model, device: torch.device, rows: int, width: int) -> dict:
    """Model inputs of the given shape: seeded random ids (speed does not depend on them), no padding."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if limit:
        width = max(1, min(width, int(limit) - 2))  # RoBERTa offsets positions by pad_token_id + 1
    vocab = embedding_rows(model)
    ids = torch.randint(0, vocab, (rows, width), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids.to(device), "attention_mask": torch.ones(rows, width, dtype=torch.long, device=device)}


def _timed_forward(model, inputs: dict, device: torch.device, dtype, timer) -> float:
    with torch.inference_mode(), autocast(device, dtype):
        start = timer()
        model(**inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return max(timer() - start, 1e-9)


def measure_forward_rates(model, device=None, *, shape=PROBE_SHAPE, repeats: int = 3, budget_s: float = 1.0,
                          timer: Callable[[], float] = time.perf_counter) -> ForwardRates:
    """Time fp32 against the native half precision on a short forward pass, once per process.

    One untimed warm-up per precision (kernel selection, allocator), then up to ``repeats``
    interleaved timed passes each, as many as ``budget_s`` leaves after the warm-ups (at least
    one); the fastest pass of each precision counts.  The half
    precision is skipped where it does not run natively (:func:`reduced_dtype`).  Results are
    cached by architecture (class, parameter shapes and dtypes), device, shape and torch's
    thread count, so every classifier of one architecture shares one probe.

    Parameters
    ----------
    model : torch.nn.Module
        Has ``get_input_embeddings()`` and takes ``input_ids=``, ``attention_mask=``.
    device : torch.device, optional
        Default: where the model's parameters are.
    shape : (int, int), default=PROBE_SHAPE
        Rows and tokens of the timed pass (tokens capped by the model's position limit).
    repeats : int, default=3
    budget_s : float, default=1.0
        Wall-time target of the whole probe.
    timer : callable, default=time.perf_counter
        Returns seconds; injectable for tests.

    Returns
    -------
    ForwardRates
    """
    device = _model_device(model) if device is None else torch.device(device)
    key = (_model_key(model), str(device), tuple(shape), torch.get_num_threads())
    if key in _RATES:
        return _RATES[key]
    candidate = _devices.reduced_dtype(device)
    dtypes = [None] if candidate is None else [None, candidate]
    inputs = _probe_inputs(model, device, *shape)
    started = timer()
    best = {}
    with eval_mode(model):
        for dtype in dtypes:
            _timed_forward(model, inputs, device, dtype, timer)
        warm_up = timer() - started
        repeats = max(1, min(repeats, int((budget_s - warm_up) / max(warm_up, 1e-9))))
        for _ in range(repeats):
            for dtype in dtypes:  # interleaved, so a change of load hits both alike
                best[dtype] = min(best.get(dtype, float("inf")), _timed_forward(model, inputs, device, dtype, timer))
    tokens = inputs["input_ids"].numel()
    rates = ForwardRates(shape=tuple(inputs["input_ids"].shape), device=str(device), fp32=tokens / best[None],
                         reduced_dtype=None if candidate is None else str(candidate).replace("torch.", ""),
                         reduced=None if candidate is None else tokens / best[candidate],
                         seconds=timer() - started)
    _RATES[key] = rates
    return rates


def clear_probe_cache() -> None:
    """Forget every measured forward rate and forward size (the next call measures again)."""
    _RATES.clear()
    _BUDGETS.clear()


def tokens_per_forward(model, make_inputs: Callable[[int, int], dict], *, device: torch.device,
                       dtype: torch.dtype | None, width: int = 32, budget_s: float = 1.0,
                       timer: Callable[[], float] = time.perf_counter) -> int:
    """Rows x tokens per forward pass: the smallest size within 10% of the best measured throughput.

    Forward passes of :data:`TOKEN_BUDGETS` tokens (``width`` tokens per row), largest first, are
    timed once per process per architecture, device, dtype and thread count; larger passes only
    cost memory once throughput has saturated.  A size that runs out of memory is skipped.  Models that are
    not Hugging Face models (toy modules in tests, wrappers that count calls) are not timed:
    they get :data:`DEFAULT_TOKENS_PER_FORWARD`.

    Parameters
    ----------
    model : torch.nn.Module
    make_inputs : callable
        ``make_inputs(rows, width) -> dict`` of model keyword arguments (valid inputs of that shape).
    device : torch.device
    dtype : torch.dtype or None
        Autocast dtype of the passes that will use the result.
    width : int, default=32
    budget_s : float, default=1.0
        Larger sizes are not tried once the probe has taken this long.
    timer : callable, default=time.perf_counter

    Returns
    -------
    int
    """
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel):
        return DEFAULT_TOKENS_PER_FORWARD
    key = (_model_key(model), str(device), str(dtype), torch.get_num_threads())
    if key in _BUDGETS:
        return _BUDGETS[key]
    rates, started = {}, timer()
    with eval_mode(model):
        _timed_forward(model, make_inputs(max(1, TOKEN_BUDGETS[0] // width), width), device, dtype, timer)
        for budget in sorted(TOKEN_BUDGETS, reverse=True):  # largest first: the reference throughput
            rows = max(1, budget // width)
            try:
                rates[budget] = rows * width / _timed_forward(model, make_inputs(rows, width), device, dtype, timer)
            except (torch.OutOfMemoryError, RuntimeError) as exc:
                if not is_oom(exc):
                    raise
                continue  # too large for this device: try a smaller one
            if timer() - started > budget_s:  # a slow model or a busy machine: keep the probe short
                break
    best = max(rates.values(), default=0.0)
    chosen = min((b for b, rate in rates.items() if rate >= 0.9 * best), default=TOKEN_BUDGETS[0])
    _BUDGETS[key] = chosen
    return chosen

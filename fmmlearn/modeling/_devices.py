"""Devices and what their CPU or GPU can do: the resolved device, the CPU's model and flags, the fast reduced dtype, autocast.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch

__all__ = ["autocast", "cpu_info", "eval_mode", "is_oom", "reduced_dtype", "resolve_device"]


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` picks CUDA when available, else the CPU; anything else goes to ``torch.device``.

    Under a multi-process launch ``"auto"`` is this process's GPU
    (``LOCAL_RANK``), so the processes of one machine do not share GPU 0.
    """
    if isinstance(device, str) and device == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        from ..utils import process_device_index

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


@contextlib.contextmanager
def eval_mode(model):
    """Evaluation mode (no dropout) for the duration, the caller's mode restored after."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def autocast(device: torch.device, dtype: torch.dtype | None):
    """An autocast context for ``dtype``, or a no-op context for fp32."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is an out-of-memory error (torch's, or a backend's message saying so).

    Parameters
    ----------
    exc : BaseException

    Returns
    -------
    bool
    """
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()

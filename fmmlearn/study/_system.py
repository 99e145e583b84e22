"""What a study ran on: library versions, CPU model and flags, threads, load.

Timings only mean something next to the machine that produced them (bf16 is
fast with AVX512-BF16 or AMX and very slow without), so every saved study and
benchmark records this.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

__all__ = ["library_versions", "load_average", "machine_info"]
_LIBRARIES = ("fmmlearn", "torch", "transformers", "scikit-learn", "skorch", "numpy", "scipy", "pandas")


def library_versions() -> dict:
    """Installed versions of fmmlearn and the libraries it builds on (``None`` if absent)."""
    versions = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    if versions["fmmlearn"] is None:  # running from a source tree that is not installed
        from .._version import __version__

        versions["fmmlearn"] = __version__
    return versions


def load_average() -> list | None:
    """1, 5 and 15-minute load averages (``None`` where the OS has none): how contended the CPU was."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine_info() -> dict:
    """Versions, CPU (:func:`fmmlearn.modeling.cpu_info`: model, kind, flags), torch threads, devices, load."""
    import torch

    from ..modeling import cpu_info

    return {
        "versions": library_versions(),
        "cpu": cpu_info(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "platform": platform.platform(),
        "executable": sys.executable,
        "load_average": load_average(),
    }

"""Render HTML the way a user sees it: headless Chromium screenshots and DOM dumps.

Tests call :func:`require_chromium` (skips with a clear reason only when no
Chromium can be found; ``.ci/run`` installs the Debian package), then
:func:`screenshot` and :func:`dump_dom` on a file.  :func:`image_stats`
summarises a screenshot so a test can assert it is not blank.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

__all__ = ["chromium_path", "dump_dom", "image_stats", "require_chromium", "screenshot"]

# Flags that keep headless Chromium off the (closed) network and away from a
# profile shared with other runs.
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--hide-scrollbars", "--force-device-scale-factor=1")


def chromium_path() -> str | None:
    """The Chromium executable, from ``$CHROMIUM`` or the PATH, or ``None``."""
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def require_chromium() -> str:
    """The Chromium executable; skips the calling test (with the reason) when there is none."""
    path = chromium_path()
    if path is None:
        pytest.skip("headless Chromium is not installed (apt-get install -y chromium); .ci/run installs it")
    return path


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        command = [require_chromium(), *_FLAGS, f"--user-data-dir={profile}", *args]
        return subprocess.run(command, capture_output=True, timeout=timeout, check=False)


def screenshot(html_file, png_file, *, width: int = 1280, height: int = 2000, timeout: float = 120) -> Path:
    """Screenshot ``html_file`` (a local path) at ``width x height`` CSS pixels into ``png_file``."""
    url = Path(html_file).resolve().as_uri()
    png_file = Path(png_file)
    result = _run([f"--screenshot={png_file}", f"--window-size={width},{height}", url], timeout)
    if not png_file.is_file():
        raise RuntimeError(f"Chromium wrote no screenshot (exit {result.returncode}): "
                           f"{result.stderr.decode(errors='replace')[-2000:]}")
    return png_file


def dump_dom(html_file, *, timeout: float = 120) -> str:
    """The DOM of ``html_file`` after Chromium has parsed (and run) it, serialised as HTML."""
    result = _run(["--dump-dom", Path(html_file).resolve().as_uri()], timeout)
    if result.returncode != 0 or not result.stdout:
        raise RuntimeError(f"Chromium --dump-dom failed (exit {result.returncode}): "
                           f"{result.stderr.decode(errors='replace')[-2000:]}")
    return result.stdout.decode("utf-8", errors="replace")


def image_stats(png_file) -> dict:
    """Size and colour content of a screenshot.

    Returns
    -------
    dict
        ``height``, ``width``, ``n_colors`` (distinct RGB colours), ``non_white_fraction``
        (share of pixels that are not near-white) and ``content_height`` (the last pixel row
        that is not plain background, +1).
    """
    from matplotlib.image import imread

    image = imread(str(png_file))[..., :3]
    if image.dtype != np.uint8:
        image = np.round(image * 255).astype(np.uint8)
    flat = image.reshape(-1, 3)
    non_white = np.any(image < 245, axis=2)
    rows = np.flatnonzero(non_white.any(axis=1))
    return {
        "height": image.shape[0],
        "width": image.shape[1],
        "n_colors": len(np.unique(flat.view([("r", "u1"), ("g", "u1"), ("b", "u1")]))),
        "non_white_fraction": float(non_white.mean()),
        "content_height": int(rows[-1] + 1) if len(rows) else 0,
    }

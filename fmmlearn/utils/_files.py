"""Writing files that either appear complete or not at all, and errors that name the path (docs/reliability.md).

A full disk, a read-only directory or a quota shows up as an ``OSError`` somewhere inside pandas,
matplotlib or transformers, often naming a temporary file or nothing.  Every fmmlearn write goes
through :func:`atomic_write` or :func:`reporting_write_errors`, so the error names the path the user
asked for and says that what was there before is unchanged.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

__all__ = ["atomic_write", "directory_lock", "reporting_write_errors"]

#: The lock file of a directory that one fmmlearn run writes; ``<LOCK_NAME>.json`` names its holder.
LOCK_NAME = ".fmmlearn.lock"


def write_failure(path, exc: OSError, kept: str) -> OSError:
    """``exc`` rewritten as ``cannot write <path>: <reason>; <kept>``, with its errno (so its type: PermissionError...)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    message = f"cannot write {os.fspath(path)}: {reason}; {kept}"
    error = OSError(message) if exc.errno is None else OSError(exc.errno, message)
    error.fmmlearn_reported = True  # an outer write leaves it as it is
    return error


@contextlib.contextmanager
def reporting_write_errors(path, kept: str | None = None, *, outermost: bool = False):
    """Turn an ``OSError`` raised inside the block into one that names ``path``.

    ``kept`` says what remains (default: whether ``path`` existed before, and is unchanged).  The innermost
    block names the path, unless an outer one says ``outermost=True`` (the inner path is then a temporary
    one the user never asked for).
    """
    if kept is None:
        kept = "what was there before is unchanged" if Path(path).exists() else "nothing was written there"
    try:
        yield
    except OSError as exc:
        reported = getattr(exc, "fmmlearn_reported", False)
        if reported and not outermost:
            raise
        original = exc.__cause__ if reported and isinstance(exc.__cause__, OSError) else exc
        raise write_failure(path, original, kept) from original


def _fsync(file: Path) -> None:
    with open(file, "rb") as handle:
        os.fsync(handle.fileno())


def atomic_write(path, write) -> Path:
    """Call ``write(tmp)`` on a temporary sibling of ``path`` and rename it over ``path`` when complete.

    The temporary name keeps the suffix (``.report.<hex>.tmp.html``), so writers that choose a format by
    suffix (pandas, matplotlib) still do.  A failure (a full disk, a read-only directory, an exception in
    ``write``) leaves ``path`` as it was and no temporary file; an ``OSError`` names ``path``.

    Returns
    -------
    pathlib.Path
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{uuid.uuid4().hex[:12]}.tmp{path.suffix}")
    with reporting_write_errors(path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write(tmp)
            _fsync(tmp)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
    return path


def _holder(directory: Path) -> str:
    """Who holds the lock of ``directory``, from the note the holder wrote (best effort)."""
    import json

    try:
        note = json.loads((directory / f"{LOCK_NAME}.json").read_text(encoding="utf-8"))
        return f"pid {note['pid']} on {note['host']}, since {note['since']}: {note['command']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "pid unknown"


def _write_holder_note(directory: Path) -> None:
    import json
    import socket
    import sys
    import time

    note = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": " ".join([os.path.basename(sys.argv[0] or "python"), *sys.argv[1:]])[:300]}
    atomic_write(directory / f"{LOCK_NAME}.json", lambda tmp: tmp.write_text(json.dumps(note), encoding="utf-8"))


@contextlib.contextmanager
def directory_lock(directory, *, timeout: float = 0, option: str = "directory"):
    """Hold the lock of ``directory`` (created if needed) for the block: one fmmlearn run writes it at a time.

    The lock is an OS file lock (:mod:`filelock`), released by the operating system when the holder dies,
    even by ``kill -9``, so a stale lock never blocks a rerun.

    Parameters
    ----------
    directory : path-like
    timeout : float, default=0
        Seconds to wait for another holder; 0 fails at once.
    option : str
        How the directory is named in the error (``--output``, ``directory``).

    Raises
    ------
    fmmlearn.exceptions.DirectoryInUseError
        Another process holds it: the message names the directory and the holder's pid.
    """
    from filelock import FileLock, Timeout

    from ..exceptions import DirectoryInUseError

    directory = Path(directory)
    with reporting_write_errors(directory):
        directory.mkdir(parents=True, exist_ok=True)
    lock = FileLock(directory / LOCK_NAME, timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise DirectoryInUseError(
            f"{option} {os.fspath(directory)} is in use by another fmmlearn run ({_holder(directory)}); wait for it "
            "to finish or choose another directory") from None
    try:
        _write_holder_note(directory)
        yield directory
    finally:
        with contextlib.suppress(OSError):
            (directory / f"{LOCK_NAME}.json").unlink()
        lock.release()

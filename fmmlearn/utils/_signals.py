"""Ctrl-C and SIGTERM as exceptions while a long job runs, so its ``finally`` blocks clean up (docs/reliability.md).

Python turns Ctrl-C (SIGINT) into :class:`KeyboardInterrupt`, but by default SIGTERM (what ``kill``, a
batch scheduler's time limit or ``docker stop`` send) ends the process at once: temporary files stay
behind.  Inside :func:`signals_as_interrupts` both raise :class:`~fmmlearn.exceptions.JobInterrupted`
(a ``KeyboardInterrupt``) in the main thread; what was finished is already on disk (the study cache
publishes whole entries), what was half-written is removed on the way out.
"""

from __future__ import annotations

import contextlib
import signal
import threading

from ..exceptions import JobInterrupted

__all__ = ["exit_status", "not_swallowed", "signal_name", "signals_as_interrupts"]

#: Signals turned into JobInterrupted so far (by :func:`signals_as_interrupts`), so that one a library
#: swallowed can be raised again (:func:`not_swallowed`).
_RECEIVED: list[int] = []

#: The handled signals; a process ended by one exits with ``128 + signal number`` (130, 143), as shells do.
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_status(error: BaseException) -> int:
    """The conventional exit status of a process stopped by ``error``: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + int(getattr(error, "signal_number", signal.SIGINT))


def signal_name(error: BaseException) -> str:
    """The name of the signal that stopped a job: ``"SIGTERM"``, else ``"SIGINT"`` (a plain Ctrl-C)."""
    return getattr(error, "signal_name", "SIGINT")


def _raise(signal_number, _frame):
    _RECEIVED.append(int(signal_number))
    raise JobInterrupted(signal_number)


@contextlib.contextmanager
def not_swallowed():
    """Raise again, after the block, an interrupt that code inside it caught and returned from normally.

    skorch's training loop catches ``KeyboardInterrupt`` and returns a half-trained net as if the fit had
    ended; inside a long job (:func:`signals_as_interrupts`) that net would be stored as finished, so the
    signal is raised again once the loop returns.  Outside a long job nothing changes (skorch's own Ctrl-C
    behaviour stays).
    """
    seen = len(_RECEIVED)
    yield
    if len(_RECEIVED) > seen:
        raise JobInterrupted(_RECEIVED[-1])


@contextlib.contextmanager
def signals_as_interrupts():
    """While the block runs, SIGINT and SIGTERM raise :class:`~fmmlearn.exceptions.JobInterrupted`.

    Only in the main thread (where Python runs signal handlers), and only for a signal whose handler is
    Python's default: a handler the application installed is left alone, and so is ours when nested.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    defaults = (signal.SIG_DFL, signal.default_int_handler)
    previous = {}
    for number in _SIGNALS:
        handler = signal.getsignal(number)
        if handler in defaults:
            previous[number] = signal.signal(number, _raise)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)

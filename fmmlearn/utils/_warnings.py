"""How fmmlearn warns: at the user's line, and once per call.

* :func:`warn` attributes a warning to the first frame outside the package
  (the user's line), however deep inside fmmlearn it is raised.
* :func:`reports_truncation_once` marks a public entry point: the inputs that
  tokenization truncates while it runs (however many times it encodes) are
  reported in one :class:`~fmmlearn.exceptions.TruncationWarning` when it
  returns, with the count and the first indices of each argument; and a
  warning :func:`warn` would repeat word for word during the call (one per
  curve of a report, say) is shown once.
* :func:`single_class_note` says whether predictions collapsed to one class,
  the usual reason why a model's faithfulness cannot be measured.
* :func:`command_line_warnings` shows warnings as one ``warning: <message>
  [<Category>]`` line each on stderr and honours ``-W`` options that name
  fmmlearn's classes (the ``fmmlearn`` command, ``benchmarks/reproduce.py``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from dataclasses import dataclass, field
import os
import sys
import warnings

import numpy as np
from sklearn.utils import _param_validation

from ..exceptions import TruncationWarning

__all__ = ["command_line_warnings", "record_truncation", "reports_truncation_once", "single_class_note", "warn"]

#: Frames that warnings skip: fmmlearn's own files (the package's folder, one above ``utils/``), and
#: scikit-learn's ``validate_params`` wrapper around fmmlearn's public functions.
_SKIPPED = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep, _param_validation.__file__)

#: How many truncated indices a warning lists per argument.
_SHOWN_INDICES = 10


def _user_stacklevel() -> int:
    """``stacklevel`` of the first frame outside fmmlearn, as seen from :func:`warn`'s ``warnings.warn``."""
    level, frame = 1, sys._getframe(1)  # level 1 is warn() itself
    while frame is not None and frame.f_code.co_filename.startswith(_SKIPPED):
        frame, level = frame.f_back, level + 1
    return level


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """Emit a warning attributed to the user's line (the first frame outside fmmlearn and its wrappers).

    Parameters
    ----------
    message : str
    category : Warning subclass, default=UserWarning
    """
    call = _CALL.get()
    if call is not None:
        if (category, message) in call.emitted:
            return
        call.emitted.add((category, message))
    if sys.version_info >= (3, 12):
        warnings.warn(message, category, skip_file_prefixes=_SKIPPED)
    else:  # Python 3.11 has no skip_file_prefixes: count the package's frames
        warnings.warn(message, category, stacklevel=_user_stacklevel())


def _show_one_line(message, category, filename, lineno, file=None, line=None) -> None:
    """:func:`warnings.showwarning` as one ``warning: <message> [<Category>]`` line, clear of progress bars."""
    stream = sys.stderr if file is None else file
    if stream is None:  # no stderr (pythonw): nowhere to show it, as warnings.showwarning does
        return
    from tqdm import tqdm

    try:  # tqdm.write clears the progress bars on that stream and redraws them below the line
        tqdm.write(f"warning: {message} [{category.__name__}]", file=stream)
        stream.flush()
    except OSError:  # stderr closed: a warning must not fail the run
        pass


def _apply_warning_options(options) -> None:
    """Apply the ``-W`` and ``PYTHONWARNINGS`` options again, now that their fmmlearn classes can be imported.

    Python reads them as it starts, before ``site`` puts fmmlearn on the path, and ignores one that
    names a class of a package (``Invalid -W option ignored: invalid module name: 'fmmlearn.exceptions'``).
    All are applied again in their order, so the last one still wins; only a bad one naming an fmmlearn
    class is reported (Python reported the others).
    """
    setoption = getattr(warnings, "_setoption", None)  # Python's own reader of -W options
    if setoption is None:
        return
    for option in options:
        try:
            setoption(option)
        except warnings._OptionError as exc:
            fields = option.split(":")
            if len(fields) > 2 and fields[2].strip().startswith("fmmlearn."):
                print(f"Invalid -W option ignored: {exc}", file=sys.stderr)


@contextlib.contextmanager
def command_line_warnings(options=None):
    """The warnings of a command: ``-W error::fmmlearn.exceptions.CacheWarning`` honoured, each shown as one line.

    The filters (``-W``, ``PYTHONWARNINGS``, :func:`warnings.simplefilter`) still decide what is shown
    or raised; the options that name an fmmlearn class, which Python itself could not apply, are
    applied here.  What passes is shown as one ``warning: <message> [<Category>]`` line on stderr:
    no source line of the library, and a line that no progress bar swallows.  It replaces
    :func:`warnings.showwarning`, so the lines reach ``sys.stderr`` also where a test runner records
    warnings.  Filters and display are restored when the block ends.

    Parameters
    ----------
    options : list of str, optional
        Warning options in ``-W`` syntax; default ``sys.warnoptions`` (``-W`` and ``PYTHONWARNINGS``).
    """
    with warnings.catch_warnings():
        _apply_warning_options(sys.warnoptions if options is None else options)
        warnings.showwarning = _show_one_line
        yield


# --------------------------------------------------------------------------- truncation, once per call

@dataclass
class _Call:
    """What the current public call has reported so far."""

    #: ``(name, n_inputs, max_length) -> set of truncated indices``
    truncations: dict = field(default_factory=dict)
    #: ``(category, message)`` of the warnings already shown
    emitted: set = field(default_factory=set)


#: The current public call; ``None`` outside one.  A context variable, so threads do not mix their records.
_CALL: contextvars.ContextVar = contextvars.ContextVar("fmmlearn_call", default=None)


def _truncation_text(name, n_inputs: int, max_length: int, indices) -> str:
    shown = sorted(indices)
    more = " ..." if len(shown) > _SHOWN_INDICES else ""
    where = f"{name}: " if name else ""
    return (f"{where}{len(shown)} of {n_inputs} input(s) are longer than max_length={max_length} tokens and "
            f"were truncated (indices {shown[:_SHOWN_INDICES]}{more})")


def record_truncation(name: str | None, n_inputs: int, max_length: int, indices) -> None:
    """Report that the inputs at ``indices`` of argument ``name`` were truncated.

    Inside a call decorated with :func:`reports_truncation_once` the indices
    are collected (the same input encoded twice counts once); outside one a
    :class:`~fmmlearn.exceptions.TruncationWarning` is emitted at once.

    Parameters
    ----------
    name : str or None
        The argument the inputs came from (``"X"``, ``"X_calib"``), for the message.
    n_inputs : int
        Number of inputs of that argument.
    max_length : int
        The token limit they exceeded.
    indices : iterable of int
        Positions of the truncated inputs in that argument.
    """
    indices = [int(i) for i in indices]
    if not indices:
        return
    call = _CALL.get()
    if call is None:
        warn(_truncation_text(name, n_inputs, max_length, indices) + ".", TruncationWarning)
    else:
        call.truncations.setdefault((name, int(n_inputs), int(max_length)), set()).update(indices)


def reports_truncation_once(func):
    """Decorate a public entry point so that it emits at most one truncation warning, and no repeats.

    The truncation warning is emitted when the outermost decorated call
    returns, at the caller's line; nested decorated calls (``score`` calling
    ``predict``) add to the outer call's record.  A call that raises emits
    none.  During the call, :func:`warn` shows each (category, message) once.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if _CALL.get() is not None:  # an outer call reports
            return func(*args, **kwargs)
        call = _Call()
        token = _CALL.set(call)
        try:
            result = func(*args, **kwargs)
        finally:
            _CALL.reset(token)
        if call.truncations:
            parts = [_truncation_text(name, n, length, idx) for (name, n, length), idx in call.truncations.items()]
            warn("; ".join(parts) + ".", TruncationWarning)
        return result

    return wrapper


# --------------------------------------------------------------------------- degenerate predictions


def single_class_note(predicted, gold=None, what: str = "examples") -> str | None:
    """A phrase saying that ``predicted`` holds a single class, or ``None``.

    Parameters
    ----------
    predicted : array-like of labels
        Predictions on clean (unmasked) inputs.
    gold : array-like of labels, optional
        The gold labels of the same inputs: the phrase then gives the share
        of the predicted class among them (the accuracy of always predicting
        it), and there is none when the gold labels hold a single class too.
    what : str, default="examples"
        What the inputs are, e.g. ``"validation examples"``.

    Returns
    -------
    str or None
        E.g. ``"the model predicts a single class ('neg') for all 48
        validation examples; 'neg' is 52% of their gold labels (the accuracy
        of always predicting it)"``.
    """
    predicted = np.asarray(predicted, dtype=object)
    if len(predicted) < 2 or len(set(map(str, predicted))) != 1:
        return None
    only = predicted[0]
    note = f"the model predicts a single class ({only!r}) for all {len(predicted)} {what}"
    if gold is not None:
        gold = [str(g) for g in np.asarray(gold, dtype=object)]
        if len(set(gold)) < 2:
            return None
        share = sum(g == str(only) for g in gold) / len(gold)
        note += f"; {only!r} is {share:.0%} of their gold labels (the accuracy of always predicting it)"
    return note

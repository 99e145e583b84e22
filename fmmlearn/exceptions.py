"""Warnings and errors of fmmlearn."""

from __future__ import annotations

from sklearn.exceptions import ConvergenceWarning

__all__ = ["CacheWarning", "DegenerateModelWarning", "DirectoryInUseError", "ExplainerError", "FaithfulnessWarning",
           "JobInterrupted", "TruncationWarning", "UncertifiedErasureWarning"]


class FaithfulnessWarning(UserWarning):
    """A faithfulness number could not be formed (e.g. a flat random curve); the result is NaN."""


class UncertifiedErasureWarning(FaithfulnessWarning):
    """Erasure metrics were computed without ``X_calib`` or a fitted ``masf``: nothing is certified in-distribution.

    Their ``ood_share`` is NaN and ``valid`` is ``<NA>`` (docs/erasure.md).  A subclass of
    :class:`FaithfulnessWarning`, so filters of that warning cover this one too; its own category lets
    a caller that knows it gave no calibration silence it alone.
    """


class DegenerateModelWarning(ConvergenceWarning):
    """A fitted model predicts a single class on its validation data.

    A subclass of scikit-learn's :class:`~sklearn.exceptions.ConvergenceWarning`
    (training ended without learning the task), so filters and tools that
    handle that warning, e.g. in ``GridSearchCV``, handle this one too.
    """


class TruncationWarning(UserWarning):
    """Inputs longer than ``max_length`` were truncated; raised once per call, naming them.

    A :class:`UserWarning`, so existing filters of that category cover it.  Silence it by its category
    (``warnings.simplefilter("ignore", TruncationWarning)``), never by a pattern of its message, which
    would also hide other warnings that mention truncation, such as a :class:`CacheWarning` about a
    truncated cache file.
    """


class CacheWarning(UserWarning):
    """A cache entry was corrupt (truncated, altered) or stale (made by other versions); it is recomputed.

    One warning per entry, naming it and why; ``fmmlearn demo`` prints it as one ``warning: ...
    [CacheWarning]`` line on stderr.  ``-W error::fmmlearn.exceptions.CacheWarning`` makes it an error
    that leaves the entry untouched (docs/reliability.md).
    """


class DirectoryInUseError(OSError):
    """Another process holds the lock of a study's output directory; the message names it and the holder's pid."""


class JobInterrupted(KeyboardInterrupt):
    """A long job was stopped by Ctrl-C (SIGINT) or SIGTERM; what it finished is kept (docs/reliability.md).

    A :class:`KeyboardInterrupt`, so code that handles Ctrl-C handles both signals.

    Parameters
    ----------
    signal_number : int
        The signal received (``signal.SIGINT`` or ``signal.SIGTERM``); also ``signal_name``.
    """

    def __init__(self, signal_number: int):
        import signal

        self.signal_number = int(signal_number)
        self.signal_name = signal.Signals(self.signal_number).name
        super().__init__(f"interrupted by {self.signal_name}")


class ExplainerError(RuntimeError):
    """An explainer given as a value (docs/explainers.md) raised; the message names the text, the cause chains."""

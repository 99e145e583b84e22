"""Warnings and errors of fmmlearn."""

from __future__ import annotations

from sklearn.exceptions import ConvergenceWarning

__all__ = ["CacheWarning", "DegenerateModelWarning", "ExplainerError", "FaithfulnessWarning", "TruncationWarning"]


class FaithfulnessWarning(UserWarning):
    """A faithfulness number could not be formed (e.g. a flat random curve); the result is NaN."""


class DegenerateModelWarning(ConvergenceWarning):
    """A fitted model predicts a single class on its validation data.

    A subclass of scikit-learn's :class:`~sklearn.exceptions.ConvergenceWarning`
    (training ended without learning the task), so filters and tools that
    handle that warning, e.g. in ``GridSearchCV``, handle this one too.
    """


class TruncationWarning(UserWarning):
    """Inputs longer than ``max_length`` were truncated; raised once per call, naming them."""


class CacheWarning(UserWarning):
    """A cache entry was corrupt (truncated, altered) or stale (made by other versions); it is recomputed."""


class ExplainerError(RuntimeError):
    """An explainer given as a value (docs/explainers.md) raised; the message names the text, the cause chains."""

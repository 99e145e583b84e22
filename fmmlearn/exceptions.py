"""Warnings and errors of fmmlearn."""

from __future__ import annotations

__all__ = ["FaithfulnessWarning"]


class FaithfulnessWarning(UserWarning):
    """A faithfulness number could not be formed (e.g. a flat random curve); the result is NaN."""

"""What several stages share: per-example outcomes of logits, and the test texts' key."""

from __future__ import annotations

import numpy as np

from ...modeling import probabilities
from .._cache import content_key

__all__ = ["gold_outcomes", "outcomes", "test_key"]


def test_key(splits) -> str:
    """The content key of the test split (texts and labels)."""
    return content_key(splits.X_test, splits.y_test.tolist())


def gold_outcomes(logits: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predicted class index (int16) and probability of the gold class (float32), per example."""
    proba = probabilities(logits)
    return logits.argmax(axis=1).astype(np.int16), proba[np.arange(len(gold)), gold].astype(np.float32)


def outcomes(clf, encoding, gold, input_ids=None):
    """:func:`gold_outcomes` of the classifier's logits of ``encoding`` (or of ``input_ids`` in its place)."""
    return gold_outcomes(clf.encoded_logits(encoding, input_ids=input_ids), gold)

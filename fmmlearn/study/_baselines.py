"""What a model must beat to count as trained: the best predictor that does not read the input.

For most data that is the majority class of the training labels.  For bAbI, a predictor that reads
the paragraph but ignores the question gets far more (about two thirds on short generated
paragraphs), so a model at that level has not learned the task; its input-blind baseline is the best
question-ignoring prediction (:func:`fmmlearn.datasets.question_blind_predictions`, when the data
says it is bAbI).
"""

from __future__ import annotations

import numpy as np

__all__ = ["blind_predictions"]


def _majority(y_train) -> object:
    values, counts = np.unique(np.asarray(y_train, dtype=object).astype(str), return_counts=True)
    label = values[np.argmax(counts)]  # ties: the first in sorted order
    return next(y for y in np.asarray(y_train).tolist() if str(y) == label)


def blind_predictions(splits) -> tuple[str, list]:
    """``(name, predicted labels of the test texts)`` of the best input-blind predictor of ``splits``."""
    question_blind = _question_blind(splits)
    if question_blind is not None:
        return question_blind
    label = _majority(splits.y_train)
    return "majority class", [label] * len(splits.y_test)


def _question_blind(splits):
    """bAbI's question-ignoring predictor, when the splits are bAbI and the generator offers one."""
    if not str(splits.name).startswith("babi"):
        return None
    try:
        from ..datasets import question_blind_predictions
    except ImportError:
        return None
    paragraphs = [x[0] if isinstance(x, tuple) else x for x in splits.X_test]
    return "question-blind", list(question_blind_predictions(paragraphs))

"""What a model must beat to count as trained: the best predictor that does not read the input.

For most data that is the majority class of the training labels.  For bAbI-1, a predictor that
reads the paragraph but ignores the question gets far more (about two thirds on short generated
paragraphs), so a model at that level has not learned the task; its input-blind predictor is the best
question-ignoring prediction (:func:`fmmlearn.datasets.blind_predictor`).
"""

from __future__ import annotations

__all__ = ["blind_predictions"]


def blind_predictions(splits) -> tuple[str, list]:
    """``(rule, predicted labels of the test texts)`` of the best input-blind predictor of ``splits``."""
    from ..datasets import blind_predictor

    distractors = bool(splits.test_info) and "answer_spans" in splits.test_info
    base = blind_predictor(splits.X_train, splits.y_train, splits.X_test, dataset_name=splits.name,
                          distractors=distractors)
    return base.rule, list(base.predictions)

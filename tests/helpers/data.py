"""Toy text data for the tests: sentiment decided by one polar word among filler words."""

import numpy as np

__all__ = ["FILLER", "NEGATIVE", "POSITIVE", "make_sentiment"]

POSITIVE = ["good", "great", "fine", "nice", "happy", "superb"]
NEGATIVE = ["bad", "awful", "poor", "sad", "ugly", "terrible"]
FILLER = ["the", "a", "movie", "plot", "was", "really", "and", "it", "very", "story", "of", "this"]


def make_sentiment(n, seed=0, min_words=3, max_words=9):
    """Texts whose label is decided by one polar word among filler words."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        label = i % 2
        words = list(rng.choice(FILLER, size=rng.integers(min_words, max_words)))
        words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(POSITIVE if label else NEGATIVE)))
        texts.append(" ".join(words))
        labels.append("pos" if label else "neg")
    return texts, np.array(labels)

"""Shared fixtures: a tiny randomly initialised BERT with the bundled tokenizer, toy data."""

import os

# Idle OpenMP threads sleep instead of spinning: on a shared 2-core machine spinning made
# forward passes 15x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest
import torch

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

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


@pytest.fixture(scope="session")
def bundled_tokenizer():
    from transformers import AutoTokenizer

    from fmmlearn.modeling import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("minilm"))


def build_tiny_model(path, tokenizer=None):
    """Save a 2-layer, 32-wide random BERT with the bundled WordPiece tokenizer to ``path``."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from fmmlearn.modeling import resolve_model_path

    tokenizer = tokenizer or AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=2,
        pad_token_id=tokenizer.pad_token_id,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, bundled_tokenizer):
    """A tiny random BERT saved to a temporary directory (see :func:`build_tiny_model`)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-bert"), bundled_tokenizer)


@pytest.fixture(scope="session")
def sentiment_data():
    return make_sentiment(160, seed=0)


@pytest.fixture
def tiny_params(tiny_model_dir):
    """Parameters for a fast, learnable fit of the tiny model."""
    return dict(model=tiny_model_dir, max_epochs=10, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0,
                precision="fp32", device="cpu", random_state=0)


@pytest.fixture(scope="session")
def fitted_tiny(tiny_model_dir, sentiment_data):
    """A tiny classifier fitted once per session (read-only for tests)."""
    from fmmlearn import FaithfulTextClassifier

    X, y = sentiment_data
    clf = FaithfulTextClassifier(model=tiny_model_dir, max_epochs=10, batch_size=16, learning_rate=3e-3,
                                 warmup_ratio=0.0, precision="fp32", device="cpu", random_state=0)
    return clf.fit(X, y)

"""Shared fixtures: a tiny randomly initialised BERT with the bundled tokenizer, toy data."""

import os

# Idle OpenMP threads sleep instead of spinning: on a shared 2-core machine spinning made
# forward passes 15x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch

from helpers.data import make_sentiment
from helpers.models import build_tiny_model


torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

@pytest.fixture(scope="session")
def bundled_tokenizer():
    from transformers import AutoTokenizer

    from fmmlearn.modeling import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("minilm"))


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

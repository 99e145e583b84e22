"""Integration: the real bundled MiniLM, fine-tuned briefly on real bundled texts."""

import numpy as np
import pytest

from fmmlearn import FaithfulTextClassifier

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bbc():
    from fmmlearn.datasets import load_bbc_news

    data = load_bbc_news(n_samples=300, random_state=0)
    X, y = list(data.data), np.asarray(data.target)
    return X[:100], y[:100], X[100:], y[100:]


def test_one_short_epoch_of_masked_fine_tuning_beats_chance(bbc):
    X, y, X_test, y_test = bbc
    clf = FaithfulTextClassifier(max_epochs=1, batch_size=8, learning_rate=2e-4, max_length=64,
                                 validation_fraction=0.0, random_state=0)
    with pytest.warns(UserWarning, match="truncated"):
        clf.fit(X, y)
    majority = max(np.mean(y_test == c) for c in np.unique(y_test))
    accuracy = clf.score(X_test, y_test)
    assert accuracy > majority + 0.1, (accuracy, majority)
    assert clf.model_.config.num_hidden_layers == 6 and clf.tokenizer_.mask_token == "[MASK]"

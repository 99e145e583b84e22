"""The faithfulness scorer: values, NaN semantics, pickling and model selection with scikit-learn."""

import math
import pickle

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.model_selection import GridSearchCV, cross_validate

from fmmlearn import FaithfulTextClassifier
from fmmlearn.utils._random import derive_seed
from fmmlearn.faithfulness import (
    FaithfulnessWarning,
    acu,
    faithful_refit,
    faithfulness_curve,
    faithfulness_score,
    make_faithfulness_scorer,
    racu,
)

from helpers.data import make_sentiment
from helpers.faithfulness import BagClassifier, bag  # noqa: F401 (bag is a fixture)


@pytest.fixture(scope="module")
def data():
    return make_sentiment(60, seed=2)


def test_default_score_is_racu_of_loo_against_rand(bag, data):
    score = faithfulness_score(bag, *data)
    assert score > 1  # loo-sign is the true ordering of this model (see test_faithfulness)
    seeds_used = make_faithfulness_scorer()  # the default scorer's settings
    assert score == seeds_used(bag, *data)


def test_scorer_equals_the_curves_it_is_made_of(bag, data):
    scorer = make_faithfulness_scorer("inp-grad-sign", random_state=7)
    curve = faithfulness_curve(bag, *data, method="inp-grad-sign")
    baseline = faithfulness_curve(bag, *data, method="rand", random_state=derive_seed(7, 0, 0))  # the scorer's stream
    assert scorer(bag, *data) == pytest.approx(racu(curve, baseline), abs=1e-12)
    unscaled = make_faithfulness_scorer("inp-grad-sign", relative=False, random_state=7)
    assert unscaled(bag, *data) == pytest.approx(acu(curve, baseline), abs=1e-12)


def test_more_random_curves_and_subsampling(bag, data):
    averaged = make_faithfulness_scorer("loo-sign", n_random=3)(bag, *data)
    assert averaged > 1
    sub = make_faithfulness_scorer("loo-sign", max_samples=20)
    assert sub(bag, *data) == sub(bag, *data) > 0  # a fixed subsample
    assert make_faithfulness_scorer("loo-sign", metric="loss")(bag, *data) > 0  # still greater-is-better


def test_nan_with_warning_when_no_curve_can_be_formed(bundled_tokenizer, bag, data):
    flat = BagClassifier(bundled_tokenizer, np.zeros(bundled_tokenizer.vocab_size, dtype=np.float32))
    with pytest.warns(FaithfulnessWarning, match="flat"):
        assert math.isnan(faithfulness_score(flat, *data))
    with pytest.warns(FaithfulnessWarning, match="no token"):
        assert math.isnan(faithfulness_score(bag, ["", " "], ["neg", "pos"]))


def test_repr_params_and_pickle(bag, data):
    scorer = make_faithfulness_scorer("int-grad-sign", n_random=2, n_steps=4, baseline="zero")
    assert callable(scorer) and not isinstance(scorer, type)
    assert repr(scorer) == ("make_faithfulness_scorer(method='int-grad-sign', metric=None, relative=True, "
                            "n_random=2, random_state=0, segment='first', recursive=None, max_samples=None, "
                            "n_steps=4, baseline='zero')")
    assert scorer.get_params()["n_steps"] == 4 and scorer.method == "int-grad-sign"
    clone = pickle.loads(pickle.dumps(scorer))
    assert repr(clone) == repr(scorer) and clone(bag, *data) == scorer(bag, *data)


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "loo"}, "method must be one of"),
    ({"metric": "accurasy"}, "unknown metric"),
    ({"ratios": [0, 0.5]}, "start at 0 and end at 1"),
    ({"ratios": [0, 0.7, 0.5, 1]}, "sorted"),
    ({"n_random": 0}, "n_random"),
    ({"max_samples": 0}, "max_samples"),
    ({"segment": "B"}, "segment"),
    ({"n_steps": 3}, "does not take"),
])
def test_scorer_argument_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_faithfulness_scorer(**kwargs)


def test_faithful_refit_applies_an_accuracy_floor():
    results = {"mean_test_accuracy": [0.90, 0.89, 0.80, 0.91], "mean_test_faithfulness": [0.3, 0.6, 0.9, np.nan]}
    assert faithful_refit(0.02)(results) == 1  # 0.80 is below the floor; NaN never wins
    assert faithful_refit(0.2)(results) == 2
    assert faithful_refit(0.0)(results) == 3  # only the most accurate is admissible
    with pytest.raises(ValueError, match="tolerance"):
        faithful_refit(-1)


@pytest.fixture(scope="module")
def tiny_search_params(tiny_model_dir):
    return dict(model=tiny_model_dir, max_epochs=1, batch_size=8, learning_rate=3e-3, warmup_ratio=0.0,
                validation_fraction=0, precision="fp32", device="cpu", random_state=0)


def test_grid_search_with_two_jobs(tiny_search_params):
    X, y = make_sentiment(24, seed=4, max_words=5)
    # The loss moves under masking even when the barely trained model's accuracy does not.
    scoring = {"accuracy": "accuracy", "faithfulness": make_faithfulness_scorer("inp-grad-sign", metric="loss")}
    search = GridSearchCV(FaithfulTextClassifier(**tiny_search_params), {"max_masking_ratio": [0.0, 1.0]},
                          scoring=scoring, refit=faithful_refit(1.0), cv=2, n_jobs=2, error_score="raise")
    with parallel_config(backend="loky", inner_max_num_threads=1):  # 2 workers x 1 torch thread on 2 cores
        search.fit(X, y)
    faith = search.cv_results_["mean_test_faithfulness"]
    assert np.isfinite(faith).all()
    assert search.best_index_ == int(np.argmax(faith))  # tolerance 1.0 admits every candidate
    assert hasattr(search.best_estimator_, "model_")


def test_cross_validate_keeps_nan_scores(tiny_search_params):
    # Empty texts: nothing can be masked, so the scorer warns and returns NaN; error_score is not needed.
    X, y = ["", "  "] * 4, ["neg", "pos"] * 4
    with pytest.warns(FaithfulnessWarning):
        result = cross_validate(FaithfulTextClassifier(**tiny_search_params), X, y, cv=2,
                                scoring={"accuracy": "accuracy", "faithfulness": faithfulness_score})
    assert np.isnan(result["test_faithfulness"]).all() and np.isfinite(result["test_accuracy"]).all()

"""FaithfulTextClassifier: the estimator contract, inputs, errors, persistence, determinism."""

import pickle

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_validate

from helpers.data import make_sentiment
from fmmlearn import FaithfulTextClassifier


@pytest.fixture(scope="module")
def heldout():
    return make_sentiment(80, seed=1)


def test_fit_learns_the_toy_task_and_reports_history(fitted_tiny, heldout):
    X, y = heldout
    assert fitted_tiny.score(X, y) > 0.9
    history = fitted_tiny.history_
    assert isinstance(history, pd.DataFrame) and len(history) == fitted_tiny.max_epochs
    assert {"train_loss", "valid_loss", "valid_accuracy", "valid_accuracy_best"} <= set(history.columns)
    assert history["train_loss"].iloc[-1] < history["train_loss"].iloc[0]


def test_predict_proba_columns_follow_classes(fitted_tiny, heldout):
    X, _ = heldout
    proba = fitted_tiny.predict_proba(X)
    assert proba.shape == (len(X), 2)
    assert np.allclose(proba.sum(axis=1), 1.0)
    assert list(fitted_tiny.classes_) == ["neg", "pos"]
    assert (fitted_tiny.predict(X) == fitted_tiny.classes_[proba.argmax(axis=1)]).all()
    assert fitted_tiny.model_.config.id2label == {0: "neg", 1: "pos"}


def test_prediction_order_is_the_input_order_despite_length_grouping(fitted_tiny, heldout):
    X, _ = heldout
    together = fitted_tiny.predict_proba(X)
    one_by_one = np.vstack([fitted_tiny.predict_proba([x]) for x in X[:12]])
    assert np.allclose(together[:12], one_by_one, atol=1e-5)


def test_binary_decision_function_is_the_logit_difference(fitted_tiny, heldout):
    X, _ = heldout
    scores = fitted_tiny.decision_function(X)
    logits = fitted_tiny.encoded_logits(fitted_tiny.encode(X))
    assert scores.shape == (len(X),)
    assert np.allclose(scores, logits[:, 1] - logits[:, 0])
    assert ((scores > 0) == (fitted_tiny.predict(X) == fitted_tiny.classes_[1])).all()


def test_best_epoch_weights_are_the_ones_kept(tiny_params, sentiment_data, heldout):
    X, y = sentiment_data
    Xv, yv = heldout
    params = dict(tiny_params, max_epochs=5, learning_rate=2e-2)  # a rate that overshoots late
    clf = FaithfulTextClassifier(**params, validation="clean").fit(X, y, validation_data=(Xv, yv))
    history = clf.history_
    best = history["valid_accuracy"].idxmax()  # first maximum: ties keep the earlier epoch
    assert history.loc[best, "valid_accuracy_best"]
    assert clf.score(Xv, yv) == pytest.approx(history.loc[best, "valid_accuracy"])


@pytest.mark.parametrize("labels", [
    lambda y: (y == "pos").astype(int) + 3,
    lambda y: y == "pos",
    lambda y: np.where(y == "pos", "yes", "no").tolist(),
])
def test_labels_of_any_hashable_type_round_trip(tiny_params, sentiment_data, labels):
    X, y = sentiment_data
    target = labels(y)
    clf = FaithfulTextClassifier(**dict(tiny_params, max_epochs=1)).fit(X[:64], target[:64])
    pred = clf.predict(X[:10])
    assert set(pred.tolist()) <= set(np.asarray(target).tolist())
    assert np.asarray(target).dtype.kind == clf.classes_.dtype.kind or clf.classes_.dtype.kind in "OU"


def test_multiclass_and_sentence_pairs(tiny_params):
    rng = np.random.default_rng(0)
    words = {"red": "a", "green": "b", "blue": "c"}
    first = [f"the {w} one" for w in rng.choice(list(words), 90)]
    second = ["which colour is it" for _ in first]
    y = [words[s.split()[1]] for s in first]
    pairs = list(zip(first, second))
    clf = FaithfulTextClassifier(**dict(tiny_params, max_epochs=15)).fit(pairs, y)
    assert list(clf.classes_) == ["a", "b", "c"]
    assert clf.predict_proba(pairs[:5]).shape == (5, 3)
    frame = pd.DataFrame({"premise": first, "hypothesis": second})
    assert (clf.predict(frame) == clf.predict(pairs)).all()
    assert clf.score(pairs, y) > 0.6
    with pytest.raises(ValueError, match="must hold sentence pairs"):
        clf.predict(first)


def test_same_random_state_gives_identical_predictions(tiny_params, sentiment_data, heldout):
    X, y = sentiment_data
    a = FaithfulTextClassifier(**dict(tiny_params, max_epochs=2)).fit(X, y)
    b = FaithfulTextClassifier(**dict(tiny_params, max_epochs=2)).fit(X, y)
    c = FaithfulTextClassifier(**dict(tiny_params, max_epochs=2, random_state=1)).fit(X, y)
    assert np.array_equal(a.predict_proba(heldout[0]), b.predict_proba(heldout[0]))
    assert not np.array_equal(a.predict_proba(heldout[0]), c.predict_proba(heldout[0]))


def test_plain_fine_tuning_is_ratio_zero(tiny_params, sentiment_data):
    X, y = sentiment_data
    for validation in ("both", "masked", "clean"):
        clf = FaithfulTextClassifier(**dict(tiny_params, max_epochs=1, max_masking_ratio=0.0, validation=validation))
        assert clf.fit(X[:48], y[:48]).history_["valid_accuracy"].notna().all()


def test_no_validation_keeps_the_last_epoch(tiny_params, sentiment_data):
    X, y = sentiment_data
    clf = FaithfulTextClassifier(**dict(tiny_params, max_epochs=2, validation_fraction=0.0)).fit(X, y)
    assert "valid_loss" not in clf.history_.columns or clf.history_["valid_loss"].isna().all()


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize("X, y, error, match", [
    ([], [], ValueError, "X is empty"),
    (["a", None, "c", "d"], [0, 1, 0, 1], ValueError, r"X\[1\] is None"),
    (["a", float("nan"), "c", "d"], [0, 1, 0, 1], ValueError, r"X\[1\] is nan"),
    (["a", 2, "c", "d"], [0, 1, 0, 1], TypeError, r"X\[1\] is of type int"),
    (["a", "b", "c"], [0, 1], ValueError, "3 texts but y has 2 labels"),
    (["a", "b", "c", "d"], [1, 1, 1, 1], ValueError, "single class"),
    (["a", "b", "c", "d"], [0, None, 1, 0], ValueError, r"y\[1\] is missing"),
    (["a", "b", "c", "d"], [0, "x", 1, 0], TypeError, "mixes label types"),
    ([("a", "b", "c")] * 4, [0, 1, 0, 1], ValueError, "exactly 2"),
    (pd.DataFrame({"t": list("abcd")}), [0, 1, 0, 1], ValueError, "1 column"),
])
def test_bad_input_is_a_clear_error(tiny_params, X, y, error, match):
    with pytest.raises(error, match=match):
        FaithfulTextClassifier(**tiny_params).fit(X, y)


@pytest.mark.parametrize("param, value, match", [
    ("max_masking_ratio", 1.5, "max_masking_ratio"),
    ("max_masking_ratio", -0.1, "max_masking_ratio"),
    ("masking_strategy", "random", "masking_strategy"),
    ("validation", "nomask", "validation"),
    ("precision", "fp8", "precision"),
    ("batch_size", 0, "batch_size"),
])
def test_bad_parameters_name_themselves(tiny_params, sentiment_data, param, value, match):
    X, y = sentiment_data
    with pytest.raises(ValueError, match=match):
        FaithfulTextClassifier(**dict(tiny_params, **{param: value})).fit(X, y)


def test_unfitted_use_raises_not_fitted():
    clf = FaithfulTextClassifier()
    for call in (lambda: clf.predict(["a"]), lambda: clf.predict_proba(["a"]), lambda: clf.save("x")):
        with pytest.raises(NotFittedError):
            call()


def test_unknown_model_offline_explains_how_to_use_the_bundled_one(sentiment_data):
    X, y = sentiment_data
    with pytest.raises(OSError, match="unavailable.*model='minilm'"):
        FaithfulTextClassifier(model="nobody/no-such-model-xyz").fit(X, y)


def test_truncation_warns_with_the_count(tiny_params, sentiment_data):
    X, y = sentiment_data
    X = list(X[:32])
    X[3] = " ".join(["word"] * 40)
    with pytest.warns(UserWarning, match=r"1 of 32 input\(s\) are longer than max_length=12"):
        FaithfulTextClassifier(**dict(tiny_params, max_epochs=1, max_length=12)).fit(X, y[:32])


def test_score_counts_unseen_labels_as_errors_with_a_warning(fitted_tiny, heldout):
    X, y = heldout
    y = y.astype(object)
    y[:8] = "neutral"
    with pytest.warns(UserWarning, match="not seen in training"):
        acc = fitted_tiny.score(X, y)
    assert acc <= 1 - 8 / len(y) + 1e-9


# ---------------------------------------------------------------------------- sklearn contract
def test_get_set_params_and_clone_of_fitted_is_unfitted(fitted_tiny):
    params = fitted_tiny.get_params()
    assert params["max_masking_ratio"] == 1.0 and "model_" not in params
    clone_ = clone(fitted_tiny)
    assert not hasattr(clone_, "model_")
    with pytest.raises(NotFittedError):
        clone_.predict(["a"])
    clone_.set_params(max_masking_ratio=0.5)
    assert clone_.max_masking_ratio == 0.5 and fitted_tiny.max_masking_ratio == 1.0


def test_string_input_is_declared_in_the_tags():
    tags = FaithfulTextClassifier().__sklearn_tags__()
    assert tags.input_tags.string and not tags.input_tags.two_d_array
    assert tags.estimator_type == "classifier"


def test_pickle_and_joblib_round_trip(fitted_tiny, heldout, tmp_path):
    X, _ = heldout
    expected = fitted_tiny.predict_proba(X)
    restored = pickle.loads(pickle.dumps(fitted_tiny))
    assert np.array_equal(restored.predict_proba(X), expected)
    joblib.dump(fitted_tiny, tmp_path / "clf.joblib")
    assert np.array_equal(joblib.load(tmp_path / "clf.joblib").predict_proba(X), expected)


def test_save_load_predicts_identically_without_pickle(fitted_tiny, heldout, tmp_path):
    X, _ = heldout
    path = fitted_tiny.save(tmp_path / "model")
    files = {p.name for p in path.iterdir()}
    assert {"model.safetensors", "config.json", "fmmlearn.json", "tokenizer.json"} <= files
    assert not any(name.endswith((".bin", ".pkl", ".pt")) for name in files)
    loaded = FaithfulTextClassifier.load(path, device="cpu")
    assert np.array_equal(loaded.predict_proba(X), fitted_tiny.predict_proba(X))
    assert list(loaded.classes_) == list(fitted_tiny.classes_)
    assert loaded.get_params()["max_masking_ratio"] == fitted_tiny.max_masking_ratio
    assert len(loaded.history_) == len(fitted_tiny.history_)


def test_load_rejects_directories_not_written_by_save(tmp_path):
    with pytest.raises(FileNotFoundError, match="fmmlearn.json"):
        FaithfulTextClassifier.load(tmp_path)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_grid_search_over_masking_ratio(tiny_params, sentiment_data, n_jobs):
    X, y = sentiment_data
    search = GridSearchCV(FaithfulTextClassifier(**dict(tiny_params, max_epochs=2)),
                          {"max_masking_ratio": [0.0, 1.0]}, scoring="accuracy", cv=2, n_jobs=n_jobs)
    search.fit(np.array(X[:96]), y[:96])
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_estimator_.predict(X[:3]).shape == (3,)


def test_cross_validate(tiny_params, sentiment_data):
    X, y = sentiment_data
    result = cross_validate(FaithfulTextClassifier(**dict(tiny_params, max_epochs=1)), pd.Series(X[:64]), y[:64],
                            cv=2, scoring=["accuracy", "f1_macro"])
    assert np.isfinite(result["test_accuracy"]).all() and np.isfinite(result["test_f1_macro"]).all()


@pytest.mark.parametrize("metric, column, pick", [("macro_f1", "valid_macro_f1", "idxmax"),
                                                  ("log_loss", "valid_log_loss", "idxmin")])
def test_selection_metric_by_name_including_a_loss(tiny_params, sentiment_data, metric, column, pick):
    X, y = sentiment_data
    clf = FaithfulTextClassifier(**dict(tiny_params, max_epochs=3, selection_metric=metric)).fit(X, y)
    history = clf.history_
    best = getattr(history[column], pick)()
    assert history.loc[best, column + "_best"]
    assert history[column + "_best"].sum() >= 1

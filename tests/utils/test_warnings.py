"""Warnings a person can act on: one truncation warning per call at the user's line, and degenerate models named."""

import math
import warnings

import numpy as np
import pytest

from helpers.data import make_sentiment
from fmmlearn import (
    DegenerateModelWarning,
    FaithfulnessWarning,
    FaithfulTextClassifier,
    TruncationWarning,
    faithfulness_report,
    make_faithfulness_scorer,
)
from fmmlearn.utils._warnings import reports_truncation_once, single_class_note, warn
from fmmlearn.encoding import encode
from fmmlearn.explanation import explain
from fmmlearn.faithfulness import faithfulness_curve
from fmmlearn.ood import in_distribution_report
from sklearn.exceptions import ConvergenceWarning

MAX_LENGTH = 16
LONG = " ".join(["really"] * 40) + " good"


def _truncations(records):
    return [w for w in records if issubclass(w.category, TruncationWarning)]


@pytest.fixture(scope="module")
def short_model(tiny_model_dir):
    """A learnable tiny fit with max_length=16 on texts of which two are too long, plus the warnings of fit."""
    X, y = make_sentiment(96, seed=5)
    X[7], X[30] = LONG, LONG + " and more"
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        clf = FaithfulTextClassifier(model=tiny_model_dir, max_epochs=10, learning_rate=3e-3, warmup_ratio=0.0,
                                     max_length=MAX_LENGTH, precision="fp32", device="cpu").fit(X, y)
    return clf, records


@pytest.fixture
def texts():
    X, y = make_sentiment(8, seed=9)
    X[1], X[4] = LONG, LONG
    return X, y


def test_fit_warns_once_with_count_indices_and_the_users_line(short_model):
    clf, records = short_model
    (truncation,) = _truncations(records)
    assert str(truncation.message) == (f"X: 2 of 96 input(s) are longer than max_length={MAX_LENGTH} tokens and "
                                       "were truncated (indices [7, 30]).")
    assert truncation.filename == __file__  # the fixture's line, not a line inside fmmlearn
    assert not [w for w in records if issubclass(w.category, DegenerateModelWarning)]  # it learned both classes


@pytest.mark.parametrize("call", ["predict", "predict_proba", "score", "explain", "explain_method",
                                  "faithfulness_curve", "faithfulness_report"])
def test_one_truncation_warning_per_call(short_model, texts, call):
    clf, _ = short_model
    X, y = texts
    run = {
        "predict": lambda: clf.predict(X),
        "predict_proba": lambda: clf.predict_proba(X),
        "score": lambda: clf.score(X, y),  # score calls predict: still one
        "explain": lambda: explain(clf, X, y, method="inp-grad-sign"),
        "explain_method": lambda: clf.explain(X, method="grad-l2", level="word"),
        "faithfulness_curve": lambda: faithfulness_curve(clf, X, y, method="inp-grad-sign", ratios=[0, 0.5, 1]),
        # one encode per curve: 2 baselines + 2 measures, still one warning
        "faithfulness_report": lambda: faithfulness_report(clf, X, y, methods=["grad-l2", "inp-grad-sign"],
                                                           n_repeats=2, ratios=[0, 0.5, 1]),
    }[call]
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        run()
    (truncation,) = _truncations(records)
    assert "X: 2 of 8 input(s)" in str(truncation.message) and "(indices [1, 4])" in str(truncation.message)
    assert truncation.filename == __file__


@pytest.mark.filterwarnings("ignore:The level-3 fold has only")
def test_in_distribution_report_names_each_argument_in_one_warning(short_model, texts):
    clf, _ = short_model
    X, y = texts
    X_calib, _ = make_sentiment(12, seed=11)
    X_calib[5] = LONG
    with pytest.warns(TruncationWarning) as records:
        in_distribution_report(clf, X_calib, X, y, ratios=[0, 1])
    (truncation,) = _truncations(records)
    message = str(truncation.message)
    assert "X_calib: 1 of 12 input(s)" in message and "(indices [5])" in message
    assert "X_test: 2 of 8 input(s)" in message and "(indices [1, 4])" in message
    assert truncation.filename == __file__


def test_calls_outside_a_public_call_still_warn_each_time(short_model, texts):
    clf, _ = short_model
    X, _ = texts
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        clf.encode(X)
        clf.encode(X, name="X_other")
        encode(clf.tokenizer_, X, is_pair=False, max_length=MAX_LENGTH)
    messages = [str(w.message) for w in _truncations(records)]
    assert len(messages) == 3 and messages[1].startswith("X_other: 2 of 8")
    assert messages[2].startswith("2 of 8 input(s)")  # encode without a name
    assert {w.filename for w in _truncations(records)} == {__file__}


def test_the_decorator_lists_ten_indices_shows_repeats_once_and_nothing_when_a_call_fails(short_model):
    clf, _ = short_model

    @reports_truncation_once
    def predict_twice(X):
        clf.predict(X)
        return clf.predict(X)

    with pytest.warns(TruncationWarning, match=r"X: 12 of 12 input\(s\).*indices \[0, 1, .*, 9\] \.\.\.\)"):
        predict_twice([LONG] * 12)

    @reports_truncation_once
    def repeats(message):
        for _ in range(3):
            warn(message, UserWarning)

    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        repeats("same words")
        repeats("same words")  # a new call shows it again
    assert [str(w.message) for w in records] == ["same words", "same words"]

    @reports_truncation_once
    def fails(X):
        clf.encode(X)
        raise RuntimeError("boom")

    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError):
            fails([LONG])
    assert not _truncations(records)


# --------------------------------------------------------------------------- degenerate models


@pytest.fixture(scope="module")
def collapsed(tiny_model_dir):
    """A fit too short to learn (learning rate 1e-9): the random head predicts one class everywhere."""
    X, y = make_sentiment(40, seed=1)
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        clf = FaithfulTextClassifier(model=tiny_model_dir, max_epochs=1, learning_rate=1e-9, warmup_ratio=0.0,
                                     precision="fp32", device="cpu").fit(X, y)
    return clf, records, (X, y)


def test_a_model_that_predicts_one_class_warns_at_the_end_of_fit(collapsed):
    clf, records, (X, y) = collapsed
    (degenerate,) = [w for w in records if issubclass(w.category, DegenerateModelWarning)]
    assert issubclass(DegenerateModelWarning, ConvergenceWarning)
    only = str(clf.predict(X)[0])
    message = str(degenerate.message)
    # validation_fraction=0.2 holds out 8 of the 40 examples, stratified: 4 of each class
    assert f"predicts a single class ({only!r}) for all 8 validation examples; {only!r} is 50% of their gold" \
        in message
    assert "max_epochs=1" in message and "learning_rate (now 1e-09)" in message
    assert degenerate.filename == __file__


def test_without_validation_data_the_check_uses_training_examples(tiny_model_dir):
    X, y = make_sentiment(24, seed=2)
    params = dict(model=tiny_model_dir, max_epochs=1, learning_rate=1e-9, warmup_ratio=0.0, precision="fp32",
                  device="cpu", validation_fraction=0)
    with pytest.warns(DegenerateModelWarning, match=r"for all 24 training examples \(no validation data\); "
                                                    r"'(neg|pos)' is 50% of their gold labels"):
        FaithfulTextClassifier(**params).fit(X, y)


def test_faithfulness_of_a_one_class_model_says_why_it_is_nan(collapsed):
    clf, _, (X, y) = collapsed
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        report = faithfulness_report(clf, X[:12], y[:12], methods=["inp-grad-sign", "grad-l2"], n_repeats=2)
    faith = [w for w in records if issubclass(w.category, FaithfulnessWarning)]
    assert len(faith) == 1  # one per report, not one per method and repeat
    message = str(faith[0].message)
    assert "RACU is NaN for inp-grad-sign (2 of 2 repeats), grad-l2 (2 of 2 repeats)" in message
    assert "the model predicts a single class" in message and faith[0].filename == __file__
    assert report.summary["racu"].isna().all() and (report.summary["n_repeats"] == 0).all()

    with pytest.warns(FaithfulnessWarning, match="RACU is undefined: the model predicts a single class") as scored:
        assert math.isnan(make_faithfulness_scorer("inp-grad-sign")(clf, X[:12], y[:12]))
    assert scored[0].filename == __file__


def test_a_flat_curve_of_a_model_that_predicts_several_classes_gives_the_generic_reason():
    from fmmlearn.faithfulness._area import flat_baseline_reason

    class Stub:  # predicts both classes; only encoded_logits and classes_ are used
        classes_ = np.array(["neg", "pos"])

        def encoded_logits(self, encoding):
            return np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])

    reason = flat_baseline_reason(Stub(), None, np.array([0, 1, 1]))
    assert reason == "the random curve is flat (masking does not change the metric)"


@pytest.mark.parametrize("predicted, gold, expected", [
    (["a", "a", "a", "a"], ["a", "b", "a", "a"],
     "the model predicts a single class ('a') for all 4 examples; 'a' is 75% of their gold labels "
     "(the accuracy of always predicting it)"),
    ([1, 1, 1], None, "the model predicts a single class (1) for all 3 examples"),
    (["a", "b"], ["a", "b"], None),
    (["a", "a"], ["b", "b"], None),  # one gold class: predicting one class is right
    (["a"], ["b"], None),  # a single example says nothing
])
def test_single_class_note(predicted, gold, expected):
    assert single_class_note(np.array(predicted), None if gold is None else np.array(gold)) == expected


def test_saving_shows_no_transformers_progress_bar(fitted_tiny, tmp_path, capfd):
    fitted_tiny.save(tmp_path / "model")
    out, err = capfd.readouterr()
    assert "Writing model shards" not in err + out and (tmp_path / "model").is_dir()


# --------------------------------------------------------------------------- warnings of a command


def test_a_commands_warnings_are_one_line_and_its_w_options_name_fmmlearns_classes(capsys):
    from fmmlearn.utils._warnings import command_line_warnings
    from fmmlearn.exceptions import CacheWarning

    with command_line_warnings([]):
        warn("cache entry x is stale; recomputing it.", CacheWarning)
    assert capsys.readouterr().err == "warning: cache entry x is stale; recomputing it. [CacheWarning]\n"
    with command_line_warnings(["error::fmmlearn.exceptions.CacheWarning"]), pytest.raises(CacheWarning):
        warn("cache entry y is stale; recomputing it.", CacheWarning)
    with command_line_warnings(["error::fmmlearn.CacheWarning", "ignore::UserWarning"]):
        warn("cache entry z is stale; recomputing it.", CacheWarning)  # the last option wins, as in Python
    with command_line_warnings(["error::fmmlearn.exceptions.NoSuchWarning", "error::no.such.Module"]):
        pass
    assert capsys.readouterr().err == ("Invalid -W option ignored: unknown warning category: "
                                       "'fmmlearn.exceptions.NoSuchWarning'\n")  # Python reported the other
    with pytest.warns(CacheWarning, match="entry w"):  # the filters and display are back
        warn("cache entry w is stale; recomputing it.", CacheWarning)
    assert capsys.readouterr().err == ""

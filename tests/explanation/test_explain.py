"""explain(): the long DataFrame, targets, word level, offsets and bad input."""

import copy

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from fmmlearn import FaithfulTextClassifier
from fmmlearn.explanation import explain, explain_encoded

TEXTS = ["the movie was superb and happy", "an awful, unwatchable plot", "fine"]
LABELS = ["pos", "neg", "pos"]
TOKEN_COLUMNS = ["example", "position", "token", "token_id", "segment", "word", "char_start", "char_end",
                 "importance", "target", "method", "truncated"]


@pytest.fixture(scope="module")
def loo(fitted_tiny):
    return explain(fitted_tiny, TEXTS, LABELS, method="loo-sign")


@pytest.fixture(scope="module")
def fitted_pairs(tiny_model_dir):
    pairs = [("a good one", "is it good"), ("bad", "so bad?"), ("nice plot", "ok"), ("sad story", "no")] * 2
    clf = FaithfulTextClassifier(tiny_model_dir, max_epochs=1, validation_fraction=0, precision="fp32", device="cpu")
    return clf.fit(pairs, ["p", "n", "p", "n"] * 2), pairs


def test_one_row_per_non_special_token_in_input_order(fitted_tiny, loo):
    assert loo.columns.tolist() == TOKEN_COLUMNS
    encoding = fitted_tiny.encode(TEXTS)
    expected = sum(int((~s).sum()) for s in encoding.special_tokens_mask)
    assert len(loo) == expected
    assert loo["example"].tolist() == sorted(loo["example"])
    assert not loo["token"].isin(fitted_tiny.tokenizer_.all_special_tokens).any()
    assert (loo["segment"] == "A").all() and (loo["method"] == "loo-sign").all()
    assert loo.groupby("example")["target"].first().tolist() == LABELS
    assert not loo["truncated"].any()


def test_character_offsets_slice_the_token_surface_form(loo):
    for row in loo.itertuples():
        surface = TEXTS[row.example][row.char_start : row.char_end].lower()
        assert surface == row.token.removeprefix("##")


def test_loo_rows_equal_re_evaluating_the_masked_text(fitted_tiny, loo):
    encoding = fitted_tiny.encode(TEXTS)
    clean = fitted_tiny.encoded_logits(encoding)
    target = [list(fitted_tiny.classes_).index(label) for label in LABELS]
    for row in loo.sample(6, random_state=0).itertuples():
        ids = [a.copy() for a in encoding.input_ids]
        ids[row.example][row.position] = fitted_tiny.tokenizer_.mask_token_id
        masked = fitted_tiny.encoded_logits(encoding, input_ids=ids)
        t = target[row.example]
        assert row.importance == pytest.approx(clean[row.example, t] - masked[row.example, t], abs=1e-5)


def test_target_defaults_to_prediction_and_accepts_labels(fitted_tiny):
    predicted = fitted_tiny.predict(TEXTS)
    frame = explain(fitted_tiny, TEXTS, method="inp-grad-sign")
    assert frame.groupby("example")["target"].first().tolist() == predicted.tolist()
    neg = explain(fitted_tiny, TEXTS, method="inp-grad-sign", target="neg")
    pos = explain(fitted_tiny, TEXTS, method="inp-grad-sign", target=["pos"] * 3)
    assert (neg["target"] == "neg").all() and (pos["target"] == "pos").all()
    assert not np.allclose(neg["importance"], pos["importance"])
    # target overrides y
    gold = explain(fitted_tiny, TEXTS, LABELS, method="inp-grad-sign", target="neg")
    np.testing.assert_allclose(gold["importance"], neg["importance"])


def test_word_level_sums_the_subword_scores(fitted_tiny, loo):
    words = explain(fitted_tiny, TEXTS, LABELS, method="loo-sign", level="word")
    sums = loo.groupby(["example", "word"])["importance"].sum()
    np.testing.assert_allclose(words.set_index(["example", "word"])["importance"].loc[sums.index], sums, atol=1e-9)
    for row in words.itertuples():
        assert row.text == TEXTS[row.example][row.char_start : row.char_end]
    assert "unwatchable" in words["text"].tolist()  # several subwords, one word
    assert words.loc[words["text"] == "unwatchable", "n_tokens"].item() > 1
    maxima = explain(fitted_tiny, TEXTS, LABELS, method="loo-sign", level="word", aggregate="max")
    np.testing.assert_allclose(maxima["importance"], loo.groupby(["example", "word"])["importance"].max().to_numpy())


def test_rand_is_reproducible_under_random_state(fitted_tiny):
    first = explain(fitted_tiny, TEXTS, method="rand", random_state=3)["importance"]
    again = explain(fitted_tiny, TEXTS, method="rand", random_state=3)["importance"]
    other = explain(fitted_tiny, TEXTS, method="rand", random_state=4)["importance"]
    assert first.equals(again) and not first.equals(other)
    assert ((first >= 0) & (first < 1)).all()


def test_every_measure_runs_through_explain(fitted_tiny):
    for method in ["grad-l2", "grad-l1", "inp-grad-abs", "int-grad-abs", "loo-abs", "beam-sign-1"]:
        params = {"n_steps": 2} if method.startswith("int-grad") else {}
        frame = explain(fitted_tiny, TEXTS[1:], method=method, **params)
        assert frame["importance"].notna().all() and (frame["method"] == method).all()
    ranks = explain(fitted_tiny, TEXTS[1:2], method="beam-sign-2")["importance"]
    assert sorted(ranks) == list(range(1, len(ranks) + 1))


def test_sentence_pairs_first_segment_or_all(fitted_pairs):
    clf, pairs = fitted_pairs
    first = explain(clf, pairs[:2], method="loo-sign")
    both = explain(clf, pairs[:2], method="loo-sign", segment="all")
    assert set(first["segment"]) == {"A"} and set(both["segment"]) == {"A", "B"}
    for row in both.itertuples():
        text = pairs[row.example][0 if row.segment == "A" else 1]
        assert text[row.char_start : row.char_end].lower() == row.token.removeprefix("##")
    np.testing.assert_allclose(both.loc[both["segment"] == "A", "importance"], first["importance"], atol=1e-5)


def test_truncation_is_flagged_and_mask_tokens_are_not_re_masked(fitted_tiny):
    clf = copy.copy(fitted_tiny)
    clf.max_length = clf.max_length_ = 6  # max_length_ is what a fitted model reads
    with pytest.warns(UserWarning, match="truncated"):
        frame = explain(clf, ["a b c d e f g h", "fine"], method="loo-sign")
    assert frame.groupby("example")["truncated"].first().tolist() == [True, False]
    masked = explain(fitted_tiny, ["a [MASK] plot"], method="loo-sign")
    assert masked.loc[masked["token"] == "[MASK]", "importance"].item() == 0


def test_progress_bar_when_verbose(fitted_tiny, capsys):
    clf = copy.copy(fitted_tiny)
    clf.verbose = 1
    explain(clf, TEXTS, method="rand")
    assert "explain (rand)" in capsys.readouterr().err


def test_explain_encoded_returns_full_length_arrays(fitted_tiny):
    encoding = fitted_tiny.encode(TEXTS)
    scores = explain_encoded(fitted_tiny, encoding, [0, 1, 0], method="loo-sign")
    assert [len(s) for s in scores] == [len(ids) for ids in encoding.input_ids]
    assert all(s[0] == 0 and s[-1] == 0 for s in scores)  # [CLS] and [SEP]
    with pytest.raises(ValueError, match="class indices"):
        explain_encoded(fitted_tiny, encoding, [0, 1, 2], method="loo-sign")


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "shap"}, "method must be one of.*loo-sign"),
    ({"method": "beam-sign-0"}, "beam width"),
    ({"method": "int-grad-sign", "n_steps": 0}, "n_steps"),
    ({"method": "loo-sign", "n_steps": 3}, "does not take"),
    ({"target": "maybe"}, "target is 'maybe'.*classes_"),
    ({"target": ["pos", "neg"]}, "target has 2 values"),
    ({"y": ["pos"]}, "y has 1 values"),
    ({"y": ["pos", "neg", "other"]}, r"y\[2\] is 'other'"),
    ({"segment": "second"}, "'segment' parameter of explain must be a str among"),
    ({"level": "sentence"}, "'level' parameter of explain must be a str among"),
    ({"aggregate": "median"}, "'aggregate' parameter of explain must be a str among"),
    ({"batch_size": True}, "'batch_size' parameter of explain must be an int in the range"),
    ({"random_state": "seed"}, "random_state"),
])
def test_bad_input_is_a_clear_value_error(fitted_tiny, kwargs, match):
    with pytest.raises(ValueError, match=match):
        explain(fitted_tiny, TEXTS, **kwargs)


def test_empty_input_and_unfitted_classifier(fitted_tiny):
    with pytest.raises(ValueError, match="X is empty"):
        explain(fitted_tiny, [])
    with pytest.raises(NotFittedError):
        explain(FaithfulTextClassifier(), TEXTS)


def test_frame_is_tidy_for_pandas_users(loo):
    top = loo.loc[loo.groupby("example")["importance"].idxmax()]
    assert len(top) == len(TEXTS)
    assert isinstance(loo.pivot_table(index="example", values="importance", aggfunc="sum"), pd.DataFrame)

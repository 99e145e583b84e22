"""The Explanation result: a DataFrame that keeps texts and predictions, renders, round-trips, aggregates."""

import copy
import io
import pickle
import sys
import types
import warnings

import numpy as np
import pandas as pd
import pytest

from fmmlearn import FaithfulTextClassifier
from fmmlearn.explanation import Explanation, explain
from helpers.browser import dump_dom, require_chromium
from helpers.heatmap import parse_heatmap

# Casing, punctuation and a double space the heatmap must keep as written.
TEXTS = ["The movie was SUPERB,  and happy!", "An awful, unwatchable plot...", "fine"]
LABELS = ["pos", "neg", "pos"]


@pytest.fixture(scope="module")
def loo(fitted_tiny):
    return explain(fitted_tiny, TEXTS, LABELS, method="loo-sign")


@pytest.fixture(scope="module")
def grad(fitted_tiny):
    return explain(fitted_tiny, TEXTS, LABELS, method="grad-l2")


@pytest.fixture(scope="module")
def truncated_clf(fitted_tiny):
    """The fitted model reading at most 8 tokens: another 'model' with other predictions on long texts."""
    clf = copy.copy(fitted_tiny)
    clf.max_length = clf.max_length_ = 8  # max_length_ is what a fitted model reads
    return clf


def explain_quietly(clf, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*truncated.*")
        return explain(clf, *args, **kwargs)


def assert_same_explanation(left, right):
    assert type(left) is Explanation and type(right) is Explanation
    pd.testing.assert_frame_equal(left, right, check_exact=True)
    pd.testing.assert_frame_equal(left.examples, right.examples, check_exact=True)


# --------------------------------------------------------------------------- what it is and knows


def test_explain_returns_an_explanation_with_the_same_rows(fitted_tiny, loo):
    assert isinstance(loo, Explanation) and isinstance(loo, pd.DataFrame)
    assert isinstance(fitted_tiny.explain(TEXTS[:1]), Explanation)
    plain = loo.frame
    assert type(plain) is pd.DataFrame
    pd.testing.assert_frame_equal(plain, pd.DataFrame(loo))
    plain.loc[0, "importance"] = 99.0          # a copy: the explanation is untouched
    assert loo.loc[0, "importance"] != 99.0
    assert loo.level == "token"


def test_examples_keep_texts_predictions_and_gold_labels(fitted_tiny, loo):
    table = loo.examples
    assert table["example"].tolist() == [0, 1, 2] and (table["method"] == "loo-sign").all()
    assert table["text"].tolist() == TEXTS and "text_pair" not in table.columns
    assert table["predicted"].tolist() == fitted_tiny.predict(TEXTS).tolist()
    np.testing.assert_allclose(table["probability"], fitted_tiny.predict_proba(TEXTS).max(axis=1), rtol=1e-6)
    assert table["gold"].tolist() == LABELS and table["signed"].all()
    assert table["n_tokens"].tolist() == fitted_tiny.encode(TEXTS).lengths.tolist()
    assert table["text_end"].tolist() == [len(t) for t in TEXTS] and not table["truncated"].any()
    # No y: no gold label; a target does not change the gold label.
    assert explain(fitted_tiny, TEXTS, method="rand").examples["gold"].isna().all()
    gold = explain(fitted_tiny, TEXTS, LABELS, method="rand", target="neg").examples["gold"]
    assert gold.tolist() == LABELS
    assert not explain(fitted_tiny, TEXTS, method="grad-l2").examples["signed"].any()


def test_pandas_operations_keep_the_type_only_while_it_is_an_explanation(loo):
    kept = [loo[loo["example"] == 1], loo.head(3), loo.copy(), loo.assign(model="m"), loo.sort_values("importance"),
            loo[["example", "token", "importance"]], loo.reset_index(drop=True)]
    for part in kept:
        assert isinstance(part, Explanation)
        pd.testing.assert_frame_equal(part.examples, loo.examples)
    assert type(loo[["token", "position"]]) is pd.DataFrame           # no scores: no explanation
    assert type(loo.describe()) is pd.DataFrame
    assert type(loo.groupby("example")["importance"].sum()) is pd.Series
    assert type(loo["importance"]) is pd.Series
    assert_same_explanation(pickle.loads(pickle.dumps(loo)), loo)


def test_concatenated_methods_keep_both_example_tables_and_render_side_by_side(loo, grad):
    both = pd.concat([loo, grad], ignore_index=True)
    assert isinstance(both, Explanation)
    assert both.examples.groupby("method")["signed"].first().to_dict() == {"grad-l2": False, "loo-sign": True}
    parts = parse_heatmap(both.to_html())
    assert parts["columns"] == ["loo-sign", "grad-l2"] and len(parts["panels"]) == 6
    assert [p["text"] for p in parts["panels"]] == [t for t in TEXTS for _ in range(2)]
    assert "unsigned" in parts["captions"][1] and "unsigned" not in parts["captions"][0]


def test_concatenated_models_keep_each_models_predictions(fitted_tiny, truncated_clf):
    full = explain(fitted_tiny, TEXTS, LABELS, method="loo-sign")
    short = explain_quietly(truncated_clf, TEXTS, LABELS, method="loo-sign")
    both = pd.concat([full.assign(model="full"), short.assign(model="short")], ignore_index=True)
    table = both.examples.set_index(["model", "example"])
    np.testing.assert_array_equal(table.loc["full", "probability"], full.examples["probability"])
    np.testing.assert_array_equal(table.loc["short", "probability"], short.examples["probability"])
    assert table.loc["short", "truncated"].tolist() == [True, True, False]
    parts = parse_heatmap(both.to_html())
    assert parts["columns"] == ["full", "short"]
    texts = [p["text"] for p in parts["panels"]]
    assert texts[0] == TEXTS[0] and texts[1] == "The movie was SUPERB,  and \u2026 [truncated at 8 tokens]"
    assert texts[4] == texts[5] == "fine"


# --------------------------------------------------------------------------- JSON and words


def test_json_round_trip_is_exact(tmp_path, loo, grad, fitted_tiny):
    words = explain(fitted_tiny, TEXTS, method="int-grad-sign", level="word", n_steps=2)
    stacked = pd.concat([loo.assign(model="a"), grad.assign(model="b")])   # repeated index labels too
    for explanation in (loo, words, stacked):
        assert_same_explanation(Explanation.read_json(explanation.to_json()), explanation)
    loo.to_json(tmp_path / "e.json", indent=1)
    assert_same_explanation(Explanation.read_json(tmp_path / "e.json"), loo)
    assert_same_explanation(Explanation.read_json(io.StringIO(loo.to_json())), loo)
    back = Explanation.read_json(explain(fitted_tiny, TEXTS, method="rand").to_json())
    assert back.examples["gold"].tolist() == [None, None, None]
    with pytest.raises(ValueError, match="not an explanation"):
        Explanation.read_json('{"columns": []}')


def test_words_equal_word_level_explain(fitted_tiny, loo, grad):
    for aggregate in ("sum", "max"):
        expected = explain(fitted_tiny, TEXTS, LABELS, method="loo-sign", level="word", aggregate=aggregate)
        assert_same_explanation(loo.words(aggregate), expected)
    # Stacked explanations are aggregated one by one.
    stacked = pd.concat([loo.assign(model="a"), grad.assign(model="b")], ignore_index=True).words()
    per_part = [explain(fitted_tiny, TEXTS, LABELS, method=m, level="word").assign(model=k)
                for m, k in (("loo-sign", "a"), ("grad-l2", "b"))]
    pd.testing.assert_frame_equal(stacked.frame, pd.concat(per_part, ignore_index=True).frame, check_exact=True)
    with pytest.raises(ValueError, match="token-level"):
        loo.words().words()
    with pytest.raises(ValueError, match="original texts"):
        Explanation(loo.frame).words()


# --------------------------------------------------------------------------- the heatmap of real explanations


def test_token_heatmap_shows_the_original_text_with_one_span_per_token(loo):
    panels = parse_heatmap(loo.to_html())["panels"]
    assert [p["text"] for p in panels] == TEXTS
    for example, panel in enumerate(panels):
        rows = loo[loo["example"] == example]
        assert [s["score"] for s in panel["spans"]] == rows["importance"].tolist()
        assert [s["text"] for s in panel["spans"]] == [TEXTS[example][a:b] for a, b in
                                                       zip(rows["char_start"], rows["char_end"])]
        subwords = ["fmm-hm-sub" in s["classes"] for s in panel["spans"]]
        assert subwords == rows["token"].str.startswith("##").tolist()


def test_word_level_heatmap_end_to_end(fitted_tiny, tmp_path):
    words = fitted_tiny.explain(TEXTS, LABELS, method="loo-sign", level="word")
    page = words.to_html(tmp_path / "words.html")
    parts = parse_heatmap(page)
    assert [p["text"] for p in parts["panels"]] == TEXTS
    assert [s["text"] for s in parts["panels"][1]["spans"]] == ["An", "awful", ",", "unwatchable", "plot", ".", ".",
                                                                "."]
    assert [s["score"] for p in parts["panels"] for s in p["spans"]] == words["importance"].tolist()
    predicted = fitted_tiny.predict_proba(TEXTS).max(axis=1)
    assert f"({predicted[0]:.2f})" in parts["headers"][0] and "gold pos" in parts["headers"][0]


def test_truncated_examples_are_marked_where_the_model_stopped_reading(truncated_clf):
    with pytest.warns(UserWarning, match="truncated"):
        e = explain(truncated_clf, TEXTS, method="loo-sign")
    texts = [p["text"] for p in parse_heatmap(e.to_html())["panels"]]
    # [CLS] the movie was superb , and [SEP] / [CLS] an awful , un ##watch ##able [SEP]
    assert texts == ["The movie was SUPERB,  and \u2026 [truncated at 8 tokens]",
                     "An awful, unwatchable \u2026 [truncated at 8 tokens]", "fine"]
    assert e.examples["text_end"].tolist() == [26, 21, 4]


def test_sentence_pairs_show_the_second_text_as_context(tiny_model_dir):
    pairs = [("a good one", "is it good"), ("bad", "so bad?"), ("nice plot", "ok"), ("sad story", "no")] * 2
    clf = FaithfulTextClassifier(tiny_model_dir, max_epochs=1, validation_fraction=0, precision="fp32",
                                 device="cpu").fit(pairs, ["p", "n", "p", "n"] * 2)
    first = parse_heatmap(explain(clf, pairs[:2], method="loo-sign").to_html())["panels"]
    assert [p["text"] for p in first] == ["a good one \u2016 is it good", "bad \u2016 so bad?"]
    assert [len(p["spans"]) for p in first] == [3, 1]     # segment B is context, not scored
    both = parse_heatmap(explain(clf, pairs[:2], method="loo-sign", segment="all").to_html())["panels"]
    assert [p["text"] for p in both] == ["a good one \u2016 is it good", "bad \u2016 so bad?"]
    assert [len(p["spans"]) for p in both] == [6, 4]      # bad | so bad ?


# --------------------------------------------------------------------------- display


def test_repr_html_is_the_heatmap_with_a_row_count(loo):
    page = loo._repr_html_()
    assert '<div class="fmm-hm"' in page and "<html" not in page
    assert f"{len(loo)} rows" in page and "3 examples" in page and ".frame" in page
    assert len(parse_heatmap(page)["panels"]) == 3
    # A frame the heatmap refuses still displays: pandas' table and the reason.
    odd = pd.concat([loo, loo])
    fallback = odd._repr_html_()
    assert "No heatmap" in fallback and "would interleave" in fallback and "<table" in fallback


def test_to_html_and_to_json_point_to_pandas_writers(loo):
    with pytest.raises(TypeError, match=r"not \['index'\].*frame\.to_html"):
        loo.to_html(index=False)
    assert "<table" in loo.frame.to_html(index=False)
    with pytest.raises(TypeError, match=r"\['lines', 'orient'\].*frame\.to_json"):
        loo.to_json(orient="records", lines=True)
    assert len(loo.frame.to_json(orient="records", lines=True).splitlines()) == len(loo)


def test_show_opens_a_file_outside_notebooks(loo, monkeypatch, capsys):
    opened = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    monkeypatch.setitem(sys.modules, "IPython", None)         # no IPython at all
    path = loo.show(title="Shown")
    try:
        assert opened == [path.as_uri()] and str(path) in capsys.readouterr().out
        assert parse_heatmap(path.read_text(encoding="utf-8"))["panels"][0]["text"] == TEXTS[0]
    finally:
        path.unlink()


def test_show_displays_inline_in_a_notebook(loo, monkeypatch):
    shown = []
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: types.SimpleNamespace(kernel=object())
    display = types.ModuleType("IPython.display")
    display.HTML = lambda data: ("HTML", data)
    display.display = shown.append
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    assert loo.show(max_examples=1) is None
    (kind, fragment), = shown
    assert kind == "HTML" and "<html" not in fragment and len(parse_heatmap(fragment)["panels"]) == 1


def test_chromium_dom_holds_the_original_words(fitted_tiny, tmp_path):
    require_chromium()
    html_file = tmp_path / "words.html"
    fitted_tiny.explain(TEXTS, LABELS, level="word").to_html(html_file)
    dom = parse_heatmap(dump_dom(html_file))
    assert [p["text"] for p in dom["panels"]] == TEXTS
    assert "unwatchable" in [s["text"] for s in dom["panels"][1]["spans"]]


def test_json_round_trip_keeps_categories_and_nullable_columns(loo):
    tagged = loo.assign(model=pd.Categorical(["a"] * len(loo), categories=["a", "b"]),
                        rank=pd.array([1] * (len(loo) - 1) + [None], dtype="Int64"))
    assert_same_explanation(Explanation.read_json(tagged.to_json()), tagged)
    with pytest.raises(TypeError, match="dtype"):
        loo.assign(when=pd.Timestamp("2024-01-01")).to_json()


def test_a_token_without_characters_is_an_empty_span_and_the_text_stays_as_written():
    # E.g. a tokenizer's whitespace token: it has a score but no characters of its own.
    rows = pd.DataFrame({"example": 0, "position": [1, 2, 3], "token": ["hi", "\u2581", "there"], "segment": "A",
                         "word": [0, 1, 1], "char_start": [0, 3, 4], "char_end": [2, 3, 9],
                         "importance": [0.5, 0.25, -1.0], "target": "pos", "method": "loo-sign", "truncated": False})
    table = pd.DataFrame({"example": [0], "method": ["loo-sign"], "text": ["hi  there"], "text_end": [9],
                          "n_tokens": [5], "truncated": [False], "predicted": ["pos"], "probability": [0.75],
                          "gold": [None], "signed": [True]})
    panel = parse_heatmap(Explanation(rows, examples=table).to_html())["panels"][0]
    assert panel["text"] == "hi  there"
    assert [s["text"] for s in panel["spans"]] == ["hi", "", "there"]
    assert "fmm-hm-empty" in panel["spans"][1]["classes"] and panel["spans"][1]["score"] == 0.25

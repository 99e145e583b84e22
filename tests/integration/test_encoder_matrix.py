"""The encoder matrix: fmmlearn on RoBERTa, DeBERTa-v2, DistilBERT, ELECTRA and ModernBERT.

Each family is a tiny random model with a tokenizer trained offline at test
time (``helpers.encoders``).  Every number fmmlearn reports is checked against
the model itself, run directly on the tokenizer's own output: leave-one-out
against explicit masked forwards, gradient measures against autograd on the
word embeddings, faithfulness curves on pairs against masking segment A by
hand.  Word groups must equal ``str.split()`` on plain ASCII text whatever the
tokenizer does with spaces.
"""

import json
import string

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.metrics import log_loss

from fmmlearn import FaithfulTextClassifier
from fmmlearn.encoding import SEGMENT_A, SEGMENT_B, encode
from fmmlearn.modeling import load_pretrained

from helpers.encoders import ENCODERS, build_encoder, build_model, build_tokenizer
from helpers.matrix import (
    FIT,
    EmbeddingInputs,
    assert_close_and_informative,
    direct_inputs,
    direct_logits,
    direct_loo,
    direct_gradients,
    scores_by_position,
    sentiment,
    sentiment_pairs,
)

#: Plain ASCII texts with irregular spacing and words split into several pieces.
ASCII_TEXTS = [
    "the movie was really good",
    "a  terrible   plot and xylophones zigzagging",
    "  superb acting in this wonderful film ",
    "unbelievably boring",
]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", params=ENCODERS)
def encoder(request, tmp_path_factory):
    """(family name, directory of a tiny random model and its trained tokenizer)."""
    return request.param, build_encoder(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def fitted(encoder):
    """A masked fit on single texts, with the word-embedding inputs seen during fit."""
    from transformers import AutoTokenizer

    name, path = encoder
    X, y = sentiment(48)
    clf = FaithfulTextClassifier(model=path, validation_fraction=0.25, **FIT)
    with EmbeddingInputs(len(AutoTokenizer.from_pretrained(path))) as seen:
        clf.fit(X, y)
    return name, clf, seen.batches


@pytest.fixture(scope="module")
def fitted_pairs(encoder):
    name, path = encoder
    X, y = sentiment_pairs(32)
    return name, FaithfulTextClassifier(model=path, validation_fraction=0, **FIT).fit(X, y)


# --------------------------------------------------------------------------- the matrix


def test_masked_fit_uses_the_family_model_and_masks_only_text_tokens(fitted):
    name, clf, seen = fitted
    expected = {"roberta": "Roberta", "deberta-v2": "DebertaV2", "distilbert": "DistilBert",
                "electra": "Electra", "modernbert": "ModernBert"}[name]
    assert type(clf.model_).__name__ == f"{expected}ForSequenceClassification"
    assert np.isfinite(clf.history_["train_loss"]).all()
    proba = clf.predict_proba(["a really good movie", "an awful plot"])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert set(clf.predict(["a really good movie", "an awful plot"])) <= set(clf.classes_)
    # The mask token entered the model during fit (masked fine-tuning happened) and
    # never replaced the first token or a separator.
    tok = clf.tokenizer_
    assert seen and any((b == tok.mask_token_id).any() for b in seen)
    assert all((b[:, 0] == tok.cls_token_id).all() for b in seen)
    assert all(((b == tok.sep_token_id).sum(dim=-1) == 1).all() for b in seen)


def test_loo_equals_the_explicit_masked_forward(fitted):
    _, clf, _ = fitted
    texts = ["the movie was really good", "a terrible plot and boring acting"]
    frame = clf.explain(texts, target=clf.classes_[1], method="loo-sign")
    for i, text in enumerate(texts):
        positions, expected = direct_loo(clf, text, 1)
        got_positions, got = scores_by_position(frame, i)
        np.testing.assert_array_equal(got_positions, positions)
        assert_close_and_informative(got, expected)


def test_gradient_measures_equal_autograd_on_the_word_embeddings(fitted):
    _, clf, _ = fitted
    text = "a really superb story of this movie"
    e, g, table, positions = direct_gradients(clf, text, 0)
    for method, expected in [("inp-grad-sign", (e * g).sum(-1)), ("grad-l2", (g @ table.T).norm(dim=-1))]:
        got_positions, got = scores_by_position(clf.explain([text], target=clf.classes_[0], method=method))
        np.testing.assert_array_equal(got_positions, positions.numpy())
        assert_close_and_informative(got, expected[positions].numpy(), rtol=1e-3)


def test_word_groups_equal_str_split_on_ascii_text(fitted):
    _, clf, _ = fitted
    words = clf.explain(ASCII_TEXTS, method="loo-sign", level="word")
    for i, text in enumerate(ASCII_TEXTS):
        rows = words[words["example"] == i]
        assert rows["text"].tolist() == text.split()
        # The spans are the words' own characters, never a neighbouring space.
        assert all(text[a:b] == w for a, b, w in zip(rows["char_start"], rows["char_end"], rows["text"]))


def test_token_spans_never_include_whitespace(fitted):
    _, clf, _ = fitted
    enc = clf.encode(ASCII_TEXTS)
    for i, text in enumerate(ASCII_TEXTS):
        keep = ~enc.special_tokens_mask[i]
        spans = [text[a:b] for a, b in enc.offsets[i][keep]]
        assert all(span == span.strip() for span in spans)
        assert set("".join(spans)) == set("".join(text.split()))  # every character of every word is covered


def test_pairs_explain_segment_a_by_default_and_both_on_request(fitted_pairs):
    _, clf = fitted_pairs
    pairs = [("the movie was really good", "this story was fine"), ("awful plot", "very  sad   and ugly")]
    first = clf.explain(pairs, method="loo-sign", level="word")
    assert set(first["segment"]) == {"A"}
    both = clf.explain(pairs, method="loo-sign", level="word", segment="all")
    for i, (a, b) in enumerate(pairs):
        rows = both[both["example"] == i]
        assert rows.loc[rows["segment"] == "A", "text"].tolist() == a.split()
        assert rows.loc[rows["segment"] == "B", "text"].tolist() == b.split()
    # Leave-one-out on segment A with segment B as context equals the direct masked forward.
    tokens = clf.explain(pairs, target=clf.classes_[0], method="loo-sign")
    for i, pair in enumerate(pairs):
        positions, expected = direct_loo(clf, pair, 0)
        got_positions, got = scores_by_position(tokens, i)
        np.testing.assert_array_equal(got_positions, positions)
        assert_close_and_informative(got, expected)


def test_pair_masking_masks_segment_a_and_leaves_b_intact(fitted_pairs):
    _, clf = fitted_pairs
    pairs = [("the movie was really good", "this story was fine"), ("a sad and awful plot", "very ugly")]
    y = clf.classes_[[1, 0]]
    curve = clf.faithfulness_curve(pairs, y, method="loo-sign", recursive=False, ratios=[0.0, 0.5, 1.0],
                                   metric="log_loss")
    expected, masked_b = {0.0: [], 0.5: [], 1.0: []}, []
    target = [int(np.flatnonzero(clf.classes_ == label)[0]) for label in y]
    for pair, t in zip(pairs, target):
        inputs, special, sequence = direct_inputs(clf, pair)
        ids = inputs["input_ids"][0]
        positions, loo = direct_loo(clf, pair, t)
        order = positions[np.argsort(-loo, kind="stable")]
        for ratio in expected:
            masked = ids.clone()
            masked[order[: int(np.floor(ratio * len(order)))]] = clf.tokenizer_.mask_token_id
            expected[ratio].append(torch.softmax(direct_logits(clf, inputs, masked[None]).double(), -1)[0])
        everything = ids.clone()
        everything[~special] = clf.tokenizer_.mask_token_id
        masked_b.append(torch.softmax(direct_logits(clf, inputs, everything[None]).double(), -1)[0])
    for ratio, proba in expected.items():
        value = curve.loc[curve["ratio"] == ratio, "value"].item()
        assert value == pytest.approx(log_loss(y, torch.stack(proba).numpy(), labels=clf.classes_), rel=1e-5)
    # Masking segment B as well would have given another loss: B really stayed intact.
    all_masked = log_loss(y, torch.stack(masked_b).numpy(), labels=clf.classes_)
    assert curve.loc[curve["ratio"] == 1.0, "value"].item() != pytest.approx(all_masked, rel=1e-5)


def test_save_load_round_trip_gives_identical_probabilities(fitted, tmp_path):
    _, clf, _ = fitted
    X = ["a really good movie", "an awful plot", "the story of this film"]
    loaded = FaithfulTextClassifier.load(clf.save(tmp_path / "clf"), device="cpu")
    assert type(loaded.model_) is type(clf.model_) and type(loaded.tokenizer_) is type(clf.tokenizer_)
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(loaded.classes_, clf.classes_)


def test_encoding_bookkeeping_matches_the_tokenizer(encoder):
    _, path = encoder
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    pair = ("the movie  was good", "yes it was")
    enc = encode(tok, [pair], is_pair=True, max_length=None)
    raw = tok(*pair, return_special_tokens_mask=True)
    assert enc.input_ids[0].tolist() == raw["input_ids"]
    assert enc.special_tokens_mask[0].tolist() == [bool(s) for s in raw["special_tokens_mask"]]
    seg = enc.segment_ids[0]
    assert seg.tolist() == [-1 if s is None else s for s in raw.sequence_ids()]
    assert (enc.token_type_ids is None) == ("token_type_ids" not in raw)
    for segment, text in ((SEGMENT_A, pair[0]), (SEGMENT_B, pair[1])):
        words = enc.word_ids[0][seg == segment]
        assert words.min() == 0 and (np.diff(words) >= 0).all()  # per segment, in reading order
        spans = enc.offsets[0][seg == segment]
        assert [text[spans[words == w, 0].min():spans[words == w, 1].max()] for w in np.unique(words)] \
            == text.split()


_LETTERS = st.text(alphabet=string.ascii_letters, min_size=1, max_size=12)
_SPACE = st.sampled_from([" ", "  ", "\t", "\n", " \n  ", "   "])


@st.composite
def ascii_texts(draw):
    """Letters-only words joined by irregular whitespace, with optional space around."""
    words = draw(st.lists(_LETTERS, min_size=1, max_size=8))
    text = "".join(w + draw(_SPACE) for w in words[:-1]) + words[-1]
    return draw(st.sampled_from(["", " ", "\n"])) + text + draw(st.sampled_from(["", " ", "  "]))


def test_words_are_str_split_for_any_letters_and_whitespace(encoder):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(encoder[1])

    @settings(max_examples=40, deadline=None, derandomize=True)
    @given(texts=st.lists(ascii_texts(), min_size=1, max_size=4))
    def check(texts):
        enc = encode(tok, texts, is_pair=False, max_length=None)
        for i, text in enumerate(texts):
            keep = ~enc.special_tokens_mask[i]
            words, spans = enc.word_ids[i][keep], enc.offsets[i][keep]
            assert [text[spans[words == w, 0].min():spans[words == w, 1].max()] for w in np.unique(words)] \
                == text.split()

    check()


@pytest.mark.parametrize("options", [dict(add_prefix_space=True), dict(trim_offsets=False),
                                     dict(add_prefix_space=True, trim_offsets=False)])
def test_roberta_variants_give_the_same_words(options):
    from transformers import RobertaTokenizerFast

    base = build_tokenizer("roberta")
    merges = [tuple(m) for m in json.loads(base.backend_tokenizer.to_str())["model"]["merges"]]
    variant = RobertaTokenizerFast(vocab=base.get_vocab(), merges=merges, **options)
    enc = encode(variant, ASCII_TEXTS, is_pair=False, max_length=None)
    for i, text in enumerate(ASCII_TEXTS):
        keep = ~enc.special_tokens_mask[i]
        words, spans = enc.word_ids[i][keep], enc.offsets[i][keep]
        assert [text[spans[words == w, 0].min():spans[words == w, 1].max()] for w in np.unique(words)] \
            == text.split()


# --------------------------------------------------------------------------- a loaded (model, tokenizer) pair


@pytest.fixture(scope="module")
def loaded_pair():
    tokenizer = build_tokenizer("roberta")
    return build_model("roberta", tokenizer, seed=1), tokenizer


def _state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_a_loaded_pair_fits_without_touching_the_callers_model(loaded_pair):
    net, tokenizer = loaded_pair
    before, config_before = _state(net), net.config.to_dict()
    X, _ = sentiment(30)
    y = np.array(["neg", "pos", "neutral"])[np.arange(30) % 3]  # 3 classes; the model has 2 outputs
    clf = FaithfulTextClassifier(model=(net, tokenizer), validation_fraction=0, **FIT).fit(X, y)
    assert clf.model_ is not net and clf.model_.config.num_labels == 3
    assert clf.predict_proba(X[:4]).shape == (4, 3)
    after = _state(net)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert net.config.to_dict() == config_before
    # The copy was trained: its encoder moved away from the caller's weights.
    trained = _state(clf.model_)
    assert not torch.equal(trained["roberta.embeddings.word_embeddings.weight"],
                           before["roberta.embeddings.word_embeddings.weight"])


def test_a_loaded_pair_keeps_a_head_of_the_right_size_and_reinitialises_another(loaded_pair):
    net, tokenizer = loaded_pair
    net.roberta.embeddings.word_embeddings.weight.requires_grad_(False)  # a user's frozen layer
    try:
        labels = {0: "a", 1: "b"}
        _, same = load_pretrained((net, tokenizer), num_labels=2, id2label=labels, label2id={"a": 0, "b": 1})
        original = net.state_dict()
        assert all(torch.equal(v, original[k]) for k, v in same.state_dict().items())
        assert all(v.data_ptr() != original[k].data_ptr() for k, v in same.state_dict().items())
        assert same.config.id2label == labels and net.config.id2label != labels
        three = {0: "a", 1: "b", 2: "c"}
        _, other = load_pretrained((net, tokenizer), num_labels=3, id2label=three,
                                   label2id={v: k for k, v in three.items()})
        assert other.classifier.out_proj.weight.shape == (3, 32) and net.classifier.out_proj.weight.shape == (2, 32)
        body = {k: v for k, v in other.state_dict().items() if not k.startswith("classifier.out_proj")}
        assert all(torch.equal(v, original[k]) for k, v in body.items())
        for copy in (same, other):
            assert not copy.roberta.embeddings.word_embeddings.weight.requires_grad
            assert copy.classifier.dense.weight.requires_grad
    finally:
        net.roberta.embeddings.word_embeddings.weight.requires_grad_(True)


def test_a_loaded_pair_survives_clone_and_save_records_its_origin(tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = build_encoder("distilbert", tmp_path / "distilbert")

    net, tokenizer = AutoModelForSequenceClassification.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    clf = FaithfulTextClassifier(model=(net, tokenizer), validation_fraction=0, **FIT)
    twin = clone(clf)
    assert twin.model[0] is not net and isinstance(twin.model, tuple)
    X, y = sentiment(24)
    twin.fit(X, y)
    saved = twin.save(tmp_path / "clf")
    assert json.loads((saved / "fmmlearn.json").read_text())["base_model"] == path
    loaded = FaithfulTextClassifier.load(saved, device="cpu")
    np.testing.assert_array_equal(loaded.predict_proba(X[:3]), twin.predict_proba(X[:3]))


@pytest.mark.parametrize("bad, error, match", [
    (lambda net, tok: (tok, net), TypeError, r"model\[0\] must be a transformers PreTrainedModel"),
    (lambda net, tok: (net.roberta, tok), TypeError, "not a model for sequence classification"),
    (lambda net, tok: (net, tok, tok), ValueError, "must be \\(model, tokenizer\\)"),
    (lambda net, tok: (net, "roberta-base"), TypeError, r"model\[1\] must be a transformers tokenizer"),
])
def test_a_bad_pair_is_rejected_with_an_error_naming_it(loaded_pair, bad, error, match):
    net, tokenizer = loaded_pair
    X, y = sentiment(8)
    with pytest.raises(error, match=match):
        FaithfulTextClassifier(model=bad(net, tokenizer), **FIT).fit(X, y)


def test_a_tokenizer_larger_than_the_embeddings_is_rejected(loaded_pair):
    net, tokenizer = loaded_pair
    bigger = build_tokenizer("roberta")
    bigger.add_tokens([f"newword{i}" for i in range(5)])
    with pytest.raises(ValueError, match=r"has 605 tokens but model\[0\] embeds only 600"):
        load_pretrained((net, bigger), num_labels=2, id2label={0: "a", 1: "b"}, label2id={"a": 0, "b": 1})

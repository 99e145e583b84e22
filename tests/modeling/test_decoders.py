"""The decoder matrix: fmmlearn on GPT-2, Llama, Qwen2 and Mistral sequence classifiers.

Each family is a tiny random model with a tokenizer trained offline at test
time (``helpers.decoders``); none of the tokenizers has a mask token, three
have no padding token.  As in the encoder matrix, every number is checked
against the model itself run on the tokenizer's own output.
"""

import pickle

import numpy as np
import pytest
import torch

from fmmlearn import FaithfulTextClassifier
from fmmlearn.faithfulness import erasure_metrics, racu
from fmmlearn.modeling import ADDED_MASK_TOKEN, ADDED_PAD_TOKEN, is_decoder, load_pretrained

from helpers.decoders import DECODERS, build_decoder, build_decoder_model, build_decoder_tokenizer
from helpers.encoders import build_model, build_tokenizer
from helpers.matrix import (
    FIT,
    EmbeddingInputs,
    assert_close_and_informative,
    direct_gradients,
    direct_loo,
    scores_by_position,
    sentiment,
    sentiment_pairs,
)

LABELS = dict(num_labels=2, id2label={0: "neg", 1: "pos"}, label2id={"neg": 0, "pos": 1})
TEXTS = ["the movie was really good", "bad", "a terrible plot and boring acting of this story", "superb film"]
MEASURES = ["loo-sign", "loo-abs", "grad-l2", "inp-grad-sign", "inp-grad-abs", "int-grad-sign", "int-grad-abs",
            "beam-sign-2"]


@pytest.fixture(scope="module", params=DECODERS)
def decoder(request, tmp_path_factory):
    """(family name, directory of a tiny random decoder and its trained tokenizer)."""
    return request.param, build_decoder(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def loaded(decoder):
    """The family's tokenizer and model as fmmlearn loads them (mask and padding added where missing)."""
    return load_pretrained(decoder[1], **LABELS)


@pytest.fixture(scope="module")
def fitted(decoder):
    name, path = decoder
    X, y = sentiment(48)
    clf = FaithfulTextClassifier(model=path, validation_fraction=0.25, **FIT)
    with EmbeddingInputs(len(load_pretrained(path, **LABELS)[0])) as seen:  # with the added tokens
        clf.fit(X, y)
    return name, clf, seen.batches


# --------------------------------------------------------------------------- loading


def test_the_missing_mask_token_is_added_with_the_mean_embedding(decoder, loaded):
    name, path = decoder
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    original = AutoTokenizer.from_pretrained(path)
    base = AutoModelForSequenceClassification.from_pretrained(path).get_input_embeddings().weight.detach()
    tokenizer, model = loaded
    assert original.mask_token_id is None and tokenizer.mask_token == ADDED_MASK_TOKEN
    assert is_decoder(model)
    weight = model.get_input_embeddings().weight.detach()
    assert weight.shape[0] == len(tokenizer) == model.config.vocab_size
    torch.testing.assert_close(weight[: base.shape[0]], base)  # the old rows are untouched
    torch.testing.assert_close(weight[tokenizer.mask_token_id], base.mean(dim=0))
    # The mask token is one special token wherever it stands in a text.
    ids = tokenizer(f"the {ADDED_MASK_TOKEN}movie", add_special_tokens=False)["input_ids"]
    assert tokenizer.mask_token_id in ids
    assert tokenizer(ADDED_MASK_TOKEN, add_special_tokens=False)["input_ids"] == [tokenizer.mask_token_id]
    # Padding: a dedicated token where there was none; Qwen2's own (end-of-text) is kept.
    if name == "qwen2":
        assert tokenizer.pad_token == original.pad_token == "<|endoftext|>"
    else:
        assert original.pad_token_id is None and tokenizer.pad_token == ADDED_PAD_TOKEN
    assert model.config.pad_token_id == tokenizer.pad_token_id


def _unpadded_logits(model, tokenizer, texts):
    with torch.no_grad():
        return torch.cat([model(**tokenizer([t], return_tensors="pt")).logits for t in texts])


@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_batches_give_the_logits_of_single_texts(loaded, side):
    tokenizer, model = loaded
    tokenizer = pickle.loads(pickle.dumps(tokenizer))  # a copy: padding_side is changed below
    expected = _unpadded_logits(model, tokenizer, TEXTS)
    tokenizer.padding_side = side
    batch = tokenizer(TEXTS, return_tensors="pt", padding=True)
    assert (batch["attention_mask"] == 0).any()
    with torch.no_grad():
        by_ids = model(**batch).logits
        # Gradient measures feed embeddings: transformers cannot see the padding then.
        embeds = model.get_input_embeddings()(batch["input_ids"])
        by_embeds = model(inputs_embeds=embeds, attention_mask=batch["attention_mask"]).logits
    torch.testing.assert_close(by_ids, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(by_embeds, expected, atol=1e-5, rtol=0)


def test_without_fmmlearns_pooling_right_padded_embeddings_read_a_padding_position(decoder, loaded):
    """The check above is not vacuous: transformers alone reads the last position for ``inputs_embeds``."""
    tokenizer, model = loaded
    plain = build_decoder_model(decoder[0], build_decoder_tokenizer(decoder[0]))
    plain.resize_token_embeddings(len(tokenizer))
    plain.load_state_dict(model.state_dict())
    plain.config.pad_token_id = tokenizer.pad_token_id
    tokenizer = pickle.loads(pickle.dumps(tokenizer))
    tokenizer.padding_side = "right"  # Llama's tokenizer pads on the left by default
    batch = tokenizer(TEXTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        by_embeds = plain(inputs_embeds=plain.get_input_embeddings()(batch["input_ids"]),
                          attention_mask=batch["attention_mask"]).logits
    assert not torch.allclose(by_embeds, _unpadded_logits(model, tokenizer, TEXTS), atol=1e-3)


def test_masking_a_token_changes_only_the_states_from_it_on(loaded):
    """Causal attention: the hidden states before a masked token are those of the clean text."""
    tokenizer, model = loaded
    ids = tokenizer(TEXTS[2], return_tensors="pt")["input_ids"]
    position = ids.shape[1] // 2
    masked = ids.clone()
    masked[0, position] = tokenizer.mask_token_id
    with torch.no_grad():
        clean = model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0]
        changed = model(input_ids=masked, output_hidden_states=True).hidden_states[-1][0]
    torch.testing.assert_close(changed[:position], clean[:position])
    assert (changed[position:] - clean[position:]).abs().amax(dim=-1).min() > 1e-4


def test_a_tokenizer_that_cannot_add_tokens_is_named_in_a_clear_error():
    tokenizer = build_decoder_tokenizer("gpt2")
    model = build_decoder_model("gpt2", tokenizer)
    tokenizer.add_special_tokens = lambda *args, **kwargs: 0  # a tokenizer that ignores added tokens
    with pytest.raises(ValueError, match=r"GPT2Tokenizer\) has no mask token and adding '<\|mask\|>'"):
        load_pretrained((model, tokenizer), **LABELS)


def test_an_encoder_keeps_its_own_mask_and_padding_tokens():
    tokenizer = build_tokenizer("roberta")
    model = build_model("roberta", tokenizer)
    loaded_tokenizer, net = load_pretrained((model, tokenizer), **LABELS)
    assert not is_decoder(net) and len(loaded_tokenizer) == len(tokenizer)
    assert loaded_tokenizer.mask_token == "<mask>" and not net.base_model._forward_hooks


# --------------------------------------------------------------------------- fit, explain, measure


def test_masked_fit_trains_with_the_added_mask_token(fitted):
    name, clf, seen = fitted
    assert type(clf.model_).__name__.lower().startswith(name.replace("-", ""))
    assert np.isfinite(clf.history_["train_loss"]).all()
    proba = clf.predict_proba(TEXTS)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    assert seen and any((b == clf.tokenizer_.mask_token_id).any() for b in seen)


def test_loo_equals_the_explicit_masked_forward(fitted):
    _, clf, _ = fitted
    frame = clf.explain(TEXTS[:3], target=clf.classes_[1], method="loo-sign")
    for i, text in enumerate(TEXTS[:3]):
        positions, expected = direct_loo(clf, text, 1)
        got_positions, got = scores_by_position(frame, i)
        np.testing.assert_array_equal(got_positions, positions)
        if len(expected) > 1:
            assert_close_and_informative(got, expected)


def test_gradient_measures_equal_autograd_on_the_word_embeddings(fitted):
    _, clf, _ = fitted
    text = "a really superb story of this movie"
    e, g, table, positions = direct_gradients(clf, text, 0)
    for method, expected in [("inp-grad-sign", (e * g).sum(-1)), ("grad-l2", (g @ table.T).norm(dim=-1))]:
        # Batched with longer texts, so the explained text is padded.
        frame = clf.explain([text, TEXTS[2] + " " + TEXTS[0]], target=clf.classes_[0], method=method)
        got_positions, got = scores_by_position(frame)
        np.testing.assert_array_equal(got_positions, positions.numpy())
        assert_close_and_informative(got, expected[positions].numpy(), rtol=1e-3)


def test_every_measure_curve_racu_erasure_and_masf(fitted):
    _, clf, _ = fitted
    X, y = sentiment(24, seed=5)
    for method in MEASURES:
        frame = clf.explain(X[:4], method=method)
        assert np.isfinite(frame["importance"]).all() and set(frame["example"]) == {0, 1, 2, 3}
    # log-loss: continuous, so the random curve is not flat even for a model near chance.
    curve = clf.faithfulness_curve(X[:8], y[:8], method="loo-sign", ratios=[0.0, 0.5, 1.0], metric="log_loss")
    random = clf.random_masking_curve(X[:8], y[:8], ratios=[0.0, 0.5, 1.0], metric="log_loss")
    assert np.isfinite(racu(curve, random))
    per_example, summary = erasure_metrics(clf, X[:6], y[:6], method="loo-sign", k=(0.2, 0.5), X_calib=X[8:20],
                                           alpha=0.3, n_bootstrap=99)
    assert np.isfinite(summary["mean"].astype(float)).all() and summary["n_perturbed"].gt(0).all()
    assert per_example["masf_p"].dropna().between(0, 1).all() and per_example["masf_p"].notna().any()
    report = clf.in_distribution_report(X[:12], X[12:20], y[12:20], ratios=[0.0, 0.5])
    assert set(report["ratio"]) == {0.0, 0.5} and report["proportion"].between(0, 1).all()


def test_masf_features_are_the_decoders_hidden_states(fitted):
    _, clf, _ = fitted
    from fmmlearn.ood import hidden_state_features

    features = hidden_state_features(clf, TEXTS)
    n_layers = clf.model_.config.num_hidden_layers
    assert features.shape == (len(TEXTS), n_layers + 1, clf.model_.config.hidden_size)
    with torch.no_grad():
        states = clf.model_(**clf.tokenizer_([TEXTS[1]], return_tensors="pt"), output_hidden_states=True).hidden_states
    np.testing.assert_allclose(features[1], torch.stack([h[0].max(dim=0).values for h in states]).numpy(),
                               rtol=1e-5, atol=1e-5)


def test_save_load_and_pickle_keep_the_added_tokens_and_the_probabilities(fitted, tmp_path):
    _, clf, _ = fitted
    loaded = FaithfulTextClassifier.load(clf.save(tmp_path / "clf"), device="cpu")
    copied = pickle.loads(pickle.dumps(clf))
    for other in (loaded, copied):
        assert other.tokenizer_.mask_token_id == clf.tokenizer_.mask_token_id
        assert other.tokenizer_.pad_token_id == clf.tokenizer_.pad_token_id
        np.testing.assert_array_equal(other.predict_proba(TEXTS), clf.predict_proba(TEXTS))
        # Pooling by the attention mask came back too: gradient measures on padded batches agree.
        np.testing.assert_allclose(other.explain(TEXTS, method="inp-grad-sign")["importance"],
                                   clf.explain(TEXTS, method="inp-grad-sign")["importance"], rtol=1e-6)


def test_pairs_explain_segment_a_and_loo_equals_the_direct_masked_forward(decoder):
    _, path = decoder
    X, y = sentiment_pairs(32)
    clf = FaithfulTextClassifier(model=path, validation_fraction=0, **FIT).fit(X, y)
    pairs = [("the movie was really good", "this story was fine"), ("awful plot", "very sad and ugly")]
    assert set(clf.explain(pairs, method="loo-sign", level="word")["segment"]) == {"A"}
    tokens = clf.explain(pairs, target=clf.classes_[0], method="loo-sign")
    for i, pair in enumerate(pairs):
        positions, expected = direct_loo(clf, pair, 0)
        got_positions, got = scores_by_position(tokens, i)
        np.testing.assert_array_equal(got_positions, positions)
        assert_close_and_informative(got, expected)

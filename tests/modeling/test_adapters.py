"""``peft_config``: masked fine-tuning of adapters, the head and the mask token's row; PEFT's format on disk."""

import pickle

import numpy as np
import pytest
import torch

peft = pytest.importorskip("peft")  # the test extra installs it; the library runs without it

from fmmlearn import FaithfulTextClassifier
from fmmlearn.modeling import embedding_matrix, load_pretrained

from helpers.decoders import build_decoder
from helpers.matrix import FIT, direct_gradients, scores_by_position, assert_close_and_informative, sentiment

TARGETS = {"gpt2": ["c_attn"], "llama": ["q_proj", "v_proj"]}
LABELS = dict(num_labels=2, id2label={0: "neg", 1: "pos"}, label2id={"neg": 0, "pos": 1})
TEXTS = ["the movie was really good", "bad", "a terrible plot and boring acting of this story"]


@pytest.fixture(scope="module", params=sorted(TARGETS))
def adapted(request, tmp_path_factory):
    """(family, model directory, the caller's LoraConfig, the classifier fitted with it)."""
    name = request.param
    path = build_decoder(name, tmp_path_factory.mktemp(name))
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS[name], fan_in_fan_out=name == "gpt2")
    X, y = sentiment(40)
    clf = FaithfulTextClassifier(model=path, validation_fraction=0, peft_config=config, **FIT).fit(X, y)
    return name, path, config, clf


def test_only_adapters_the_head_and_the_mask_row_train(adapted):
    _, path, config, clf = adapted
    assert config.task_type is None and config.trainable_token_indices is None  # the caller's config is untouched
    trainable = [n for n, p in clf.model_.named_parameters() if p.requires_grad]
    assert trainable and all(("lora_" in n) or ("score" in n) or ("trainable_tokens_delta" in n) for n in trainable)
    assert any("score" in n for n in trainable) and any("trainable_tokens_delta" in n for n in trainable)
    # The frozen base weights are those fmmlearn loaded (same seed: the same head initialisation too).
    _, reference = load_pretrained(path, **LABELS)
    base = clf.model_.get_base_model()
    for name, value in reference.state_dict().items():
        if "score" not in name and "embed" not in name and "wte" not in name and "q_proj" not in name \
                and "v_proj" not in name and "c_attn" not in name:
            torch.testing.assert_close(base.state_dict()[name], value, rtol=0, atol=0)
    # The mask token's row moved away from its start (the mean embedding); the others did not.
    mask = clf.tokenizer_.mask_token_id
    start = reference.get_input_embeddings().weight.detach()
    used = embedding_matrix(clf.model_).detach()
    assert not torch.allclose(used[mask], start[mask])
    torch.testing.assert_close(used[:mask], start[:mask], rtol=0, atol=0)


def test_gradient_measures_see_the_trained_mask_row(adapted):
    _, _, _, clf = adapted
    mask = clf.tokenizer_.mask_token_id
    table = clf.model_.get_input_embeddings()
    torch.testing.assert_close(embedding_matrix(clf.model_)[mask], table(torch.tensor([mask]))[0])
    e, g, _, positions = direct_gradients(clf, TEXTS[2], 0)
    weight = embedding_matrix(clf.model_).detach()
    got_positions, got = scores_by_position(clf.explain([TEXTS[2]], target=clf.classes_[0], method="grad-l2"))
    np.testing.assert_array_equal(got_positions, positions.numpy())
    assert_close_and_informative(got, (g @ weight.T).norm(dim=-1)[positions].numpy(), rtol=1e-3)


def test_save_writes_peft_format_that_peft_itself_reads(adapted, tmp_path):
    from transformers import AutoModelForSequenceClassification

    _, _, _, clf = adapted
    saved = clf.save(tmp_path / "clf")
    assert (saved / "adapter" / "adapter_config.json").is_file()
    assert (saved / "adapter" / "adapter_model.safetensors").is_file()
    # The grown embedding matrix lives in the base model's file, not again in the adapter's.
    from safetensors import safe_open

    with safe_open(saved / "adapter" / "adapter_model.safetensors", "pt") as f:
        assert not [k for k in f.keys() if k.endswith(("wte.weight", "embed_tokens.weight"))]
    base = AutoModelForSequenceClassification.from_pretrained(saved)
    from fmmlearn.modeling import prepare_model

    prepare_model(base, clf.tokenizer_)
    model = peft.PeftModel.from_pretrained(base, saved / "adapter").eval()
    inputs = clf.tokenizer_(TEXTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        proba = torch.softmax(model(**inputs).logits, -1).numpy()
    np.testing.assert_allclose(proba, clf.predict_proba(TEXTS), rtol=1e-5, atol=1e-6)


def test_load_and_pickle_give_identical_predictions_and_explanations(adapted, tmp_path):
    _, _, _, clf = adapted
    loaded = FaithfulTextClassifier.load(clf.save(tmp_path / "clf"), device="cpu")
    assert isinstance(loaded.peft_config, peft.LoraConfig) and loaded.peft_config.r == 4
    for other in (loaded, pickle.loads(pickle.dumps(clf))):
        np.testing.assert_array_equal(other.predict_proba(TEXTS), clf.predict_proba(TEXTS))
        np.testing.assert_allclose(other.explain(TEXTS, method="int-grad-sign")["importance"],
                                   clf.explain(TEXTS, method="int-grad-sign")["importance"], rtol=1e-6)


def test_a_peft_config_of_the_wrong_type_is_a_clear_error():
    X, y = sentiment(8)
    with pytest.raises(TypeError, match="peft_config"):
        FaithfulTextClassifier(peft_config={"r": 8}, **FIT).fit(X, y)

    class NotAPeftConfig:
        def to_dict(self):
            return {}

    with pytest.raises(TypeError, match="peft_config must be None or a peft.PeftConfig"):
        FaithfulTextClassifier(peft_config=NotAPeftConfig(), **FIT).fit(X, y)

"""Bad inputs and faults, tried as a hostile user would (docs/reliability.md).

Every case must end in correct behaviour or in a ``ValueError``/``TypeError``
whose message names the argument, raised by fmmlearn's own checks (or
scikit-learn's parameter validation), never an error from deep inside
torch, transformers, tokenizers or pandas, and never a silently wrong result.
"""

import copy
import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.data import make_sentiment
from fmmlearn import FaithfulTextClassifier
from fmmlearn.exceptions import FaithfulnessWarning, TruncationWarning
from fmmlearn.faithfulness import acu, racu
from fmmlearn.modeling import position_limit, resolve_max_length

from helpers.encoders import build_model, build_tokenizer

FIT = dict(max_epochs=1, batch_size=8, learning_rate=3e-3, warmup_ratio=0.0, validation_fraction=0,
           precision="fp32", device="cpu", random_state=0)

#: Where an error must not come from: the libraries fmmlearn hands validated data to.
FOREIGN = ("/torch/", "/transformers/", "/tokenizers/", "/pandas/", "/safetensors/", "/skorch/", "/numpy/")


def raises_clearly(call, *names, error=(ValueError, TypeError)):
    """Run ``call``; it must raise ``error`` from fmmlearn (or sklearn's validation) naming every one of ``names``."""
    with pytest.raises(error) as excinfo:
        call()
    origin = str(excinfo.traceback[-1].path)
    assert not any(part in origin for part in FOREIGN), f"raised inside a library: {origin}\n{excinfo.value}"
    message = str(excinfo.value)
    for name in names:  # as a word of its own: the "y" of "Maybe" does not name y
        assert re.search(rf"(?<!\w){re.escape(name)}(?!\w)", message), f"{name!r} not named in: {message}"
    return excinfo.value


def quiet_fit(clf, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # toy fits of one epoch may predict one class; not what is tested
        return clf.fit(X, y, **kwargs)


@pytest.fixture(scope="module")
def data():
    return make_sentiment(16, seed=5)


@pytest.fixture(scope="module")
def clf(tiny_model_dir, data):
    return quiet_fit(FaithfulTextClassifier(model=tiny_model_dir, **FIT), *data)


@pytest.fixture(scope="module")
def pair_clf(tiny_model_dir, data):
    X, y = data
    return quiet_fit(FaithfulTextClassifier(model=tiny_model_dir, **FIT), [(t, "the story") for t in X], y)


# --------------------------------------------------------------------------- estimator parameters


PARAMS = [
    ("batch_size", True), ("batch_size", 0), ("batch_size", -1), ("batch_size", 1.5), ("batch_size", "8"),
    ("batch_size", None), ("max_epochs", True), ("max_epochs", 0), ("max_epochs", 2.0),
    ("max_length", True), ("max_length", 1), ("max_length", "long"), ("max_masking_ratio", 1.5),
    ("max_masking_ratio", -0.1), ("max_masking_ratio", True), ("max_masking_ratio", "half"),
    ("max_masking_ratio", math.nan), ("masking_strategy", "everything"), ("masking_strategy", None),
    ("validation", "sometimes"), ("validation_fraction", 1.0), ("validation_fraction", -0.1),
    ("learning_rate", 0), ("learning_rate", -1e-5), ("weight_decay", -1), ("warmup_ratio", 2),
    ("lr_schedule", "cosine"), ("group_by_length", "yes"), ("precision", "fp64"), ("device", 42),
    ("device", "tpu"), ("random_state", "seed"), ("verbose", -1), ("model", 42), ("dataset", "imagenet"),
    ("selection_metric", "happiness"),
]


@pytest.mark.parametrize("name, value", PARAMS, ids=[f"{n}={v!r}" for n, v in PARAMS])
def test_invalid_estimator_parameters_fail_fit_naming_them(tiny_model_dir, data, name, value):
    params = {**FIT, "model": tiny_model_dir, name: value}
    clf = FaithfulTextClassifier(**params)
    named = "metric" if name == "selection_metric" else name  # get_metric names the metric it does not know
    raises_clearly(lambda: clf.fit(*data), named)


def test_unknown_parameters_are_type_errors():
    # __init__ only stores (scikit-learn's rule; **net_params takes net__ settings): fit refuses the name
    clf = FaithfulTextClassifier(model="/no/such/model", n_epochs=3)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['n_epochs'\]"):
        clf.fit(["a", "b"], [0, 1])
    with pytest.raises(ValueError, match="Invalid parameter 'n_epochs'"):
        FaithfulTextClassifier().set_params(n_epochs=3)


def test_cuda_without_cuda_is_an_error_naming_device_before_any_loading(data, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    # The model path does not exist: reaching the loading step would be an OSError instead.
    for device in ("cuda", "cuda:1", torch.device("cuda")):
        clf = FaithfulTextClassifier(model="/no/such/model", device=device, max_epochs=1)
        raises_clearly(lambda: clf.fit(*data), "device=", "CUDA", error=ValueError)


def test_a_cuda_index_beyond_the_visible_devices_is_named(data, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    clf = FaithfulTextClassifier(model="/no/such/model", device="cuda:3", max_epochs=1)
    raises_clearly(lambda: clf.fit(*data), "device='cuda:3'", "only 1 is visible", error=ValueError)


def test_a_missing_model_is_an_os_error_naming_it(data):
    clf = FaithfulTextClassifier(model="/no/such/model", device="cpu", max_epochs=1)
    with pytest.raises(OSError, match="/no/such/model"):
        clf.fit(*data)


@pytest.mark.parametrize("model, match", [((1, 2), r"model\[0\]"), ((1,), "model as a tuple")])
def test_a_malformed_model_pair_is_named(data, model, match):
    raises_clearly(lambda: FaithfulTextClassifier(model=model, device="cpu").fit(*data), match.replace("\\", ""))


# --------------------------------------------------------------------------- X and y


BAD_X = {
    "None": None, "int": 5, "str": "one text", "bytes": b"bytes", "empty": [], "ints": [1, 2],
    "None item": [None, "a"], "NaN item": ["ok", np.nan], "bytes item": [b"x", "y"], "set": {"a", "b"},
    "frozenset": frozenset({"a"}), "dict": {"a": "good", "b": "bad"}, "dict keys": {"a": 1}.keys(),
    "2-D (n, 3)": np.array([["a", "b", "c"]]), "3-D": np.zeros((2, 2, 2)), "frame 1 col": pd.DataFrame({"t": ["a"]}),
    "frame 3 cols": pd.DataFrame({"a": ["x"], "b": ["y"], "c": ["z"]}), "mixed kinds": [("a", "b"), "c"],
    "triple": [("a", "b", "c")], "pair with None": [("a", None)], "empty frame": pd.DataFrame(),
}


@pytest.mark.parametrize("case", list(BAD_X))
def test_malformed_texts_are_named_errors_in_predict_and_fit(clf, tiny_model_dir, case):
    X = BAD_X[case]
    raises_clearly(lambda: clf.predict(X), "X")
    raises_clearly(lambda: clf.explain(X), "X")
    raises_clearly(lambda: FaithfulTextClassifier(model=tiny_model_dir, **FIT).fit(X, ["a", "b"]), "X")


def test_sets_and_dicts_say_why_they_are_refused(clf):
    assert "order is undefined" in str(raises_clearly(lambda: clf.predict({"good", "bad"}), "X"))
    assert "keys" in str(raises_clearly(lambda: clf.predict({"good": 1}), "X"))


def test_pairs_for_a_single_text_model_and_back_are_named(clf, pair_clf):
    raises_clearly(lambda: clf.predict([("a", "b")]), "X", "single texts")
    raises_clearly(lambda: pair_clf.predict(["a"]), "X", "sentence pairs")


BAD_Y = {
    "None": None, "short": ["neg"], "2-D": np.ones((4, 2)), "NaN": [1.0, math.nan, 0.0, 1.0],
    "None item": ["a", None, "b", "a"], "mixed types": ["a", 1, "b", 2], "continuous": [0.1, 0.2, 0.3, 0.4],
    "one class": ["a"] * 4,
}


@pytest.mark.parametrize("case", list(BAD_Y))
def test_malformed_labels_are_named_errors(tiny_model_dir, case):
    X = ["good", "bad", "fine", "awful"]
    raises_clearly(lambda: FaithfulTextClassifier(model=tiny_model_dir, **FIT).fit(X, BAD_Y[case]), "y")


@pytest.mark.parametrize("validation_data, name", [
    (["good"], "validation_data"), ((["good"],), "validation_data"), (([("a", "b")], ["neg"]), "validation_data[0]"),
    ((["good"], ["zzz"]), "validation_data[1]"), ((["good", "bad"], ["neg"]), "validation_data[1]"),
])
def test_malformed_validation_data_is_named(tiny_model_dir, data, validation_data, name):
    clf = FaithfulTextClassifier(model=tiny_model_dir, **FIT)
    raises_clearly(lambda: clf.fit(*data, validation_data=validation_data), name)


def test_numpy_string_labels_mix_with_python_strings(tiny_model_dir, data):
    X, y = data
    mixed = [np.str_(v) if i % 2 else str(v) for i, v in enumerate(y)]
    clf = quiet_fit(FaithfulTextClassifier(model=tiny_model_dir, **FIT), X, mixed)
    assert list(clf.classes_) == ["neg", "pos"]
    assert clf.score(X, np.array(mixed, dtype=object)) == clf.score(X, y)


def test_unseen_labels_in_score_count_as_errors_with_a_warning(clf, data):
    X, y = data
    with pytest.warns(UserWarning, match="not seen in training"):
        assert clf.score(X[:2], ["zzz", "zzz"]) == 0.0
    raises_clearly(lambda: clf.score(X[:2], ["neg"]), "y")


# --------------------------------------------------------------------------- texts that must just work


def test_empty_whitespace_unicode_and_control_texts_predict_and_explain(clf):
    texts = ["", "   ", "\n\t", "😀🎬👍", "中文电影很好", "שלום עולם", "e\u0301 \u200b\u200d", "\x00\x07 nul",
             "good" * 50, "a" * 2000]
    proba = clf.predict_proba(texts)
    assert proba.shape == (len(texts), 2) and np.allclose(proba.sum(axis=1), 1)
    assert set(clf.predict(texts)) <= set(clf.classes_)
    frame = clf.explain(texts, method="loo-sign")
    assert set(frame["example"]) <= set(range(len(texts)))
    assert np.isfinite(frame["importance"]).all()


def test_a_huge_text_is_truncated_with_one_warning(clf):
    with pytest.warns(TruncationWarning, match=r"1 of 2 input\(s\) are longer than max_length=128") as record:
        assert clf.predict(["word " * 100_000, "good"]).shape == (2,)
    assert sum(issubclass(w.category, TruncationWarning) for w in record) == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60), min_size=1, max_size=4))
def test_any_unicode_text_gets_a_prediction_and_spans_inside_it(clf, texts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        proba = clf.predict_proba(texts)
        frame = clf.explain(texts, method="grad-l2")
    assert proba.shape == (len(texts), 2) and np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1)
    for row in frame.itertuples():
        text = texts[row.example]
        assert 0 <= row.char_start <= row.char_end <= len(text)
        assert row.char_start == row.char_end or not text[row.char_start:row.char_end].isspace()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(st.text(max_size=30), st.text(max_size=30)), min_size=1, max_size=3))
def test_any_pair_of_texts_gets_a_prediction(pair_clf, pairs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        proba = pair_clf.predict_proba(pairs)
    assert proba.shape == (len(pairs), 2) and np.isfinite(proba).all()


# --------------------------------------------------------------------------- explanations, curves, reports


CALLS = {
    "unknown method": (lambda c, X, y: c.explain(X, method="shapley"), "method"),
    "unknown parameter": (lambda c, X, y: c.explain(X, method="loo-sign", n_steps=3), "n_steps"),
    "level": (lambda c, X, y: c.explain(X, level="sentence"), "level"),
    "segment": (lambda c, X, y: c.explain(X, segment="second"), "segment"),
    "aggregate": (lambda c, X, y: c.explain(X, level="word", aggregate="median"), "aggregate"),
    "target": (lambda c, X, y: c.explain(X, target="zzz"), "target"),
    "batch_size True": (lambda c, X, y: c.explain(X, batch_size=True), "batch_size"),
    "batch_size 0": (lambda c, X, y: c.explain(X, batch_size=0), "batch_size"),
    "n_steps 0": (lambda c, X, y: c.explain(X, method="int-grad-sign", n_steps=0), "n_steps"),
    "n_steps True": (lambda c, X, y: c.explain(X, method="int-grad-sign", n_steps=True), "n_steps"),
    "rule": (lambda c, X, y: c.explain(X, method="int-grad-sign", rule="simpson"), "rule"),
    "baseline id too large": (lambda c, X, y: c.explain(X, method="int-grad-sign", baseline=10**9), "baseline"),
    "baseline id negative": (lambda c, X, y: c.explain(X, method="int-grad-sign", baseline=-1), "baseline"),
    "baseline name": (lambda c, X, y: c.explain(X, method="int-grad-abs", baseline="bos"), "baseline"),
    "ratios unsorted": (lambda c, X, y: c.faithfulness_curve(X, y, ratios=[0.5, 0.2]), "ratios"),
    "ratios out of range": (lambda c, X, y: c.faithfulness_curve(X, y, ratios=[0, 1.5]), "ratios"),
    "ratios NaN": (lambda c, X, y: c.faithfulness_curve(X, y, ratios=[0, math.nan]), "ratios"),
    "ratios empty": (lambda c, X, y: c.faithfulness_curve(X, y, ratios=[]), "ratios"),
    "ratios text": (lambda c, X, y: c.faithfulness_curve(X, y, ratios="abc"), "ratios"),
    "curve y None": (lambda c, X, y: c.faithfulness_curve(X, None), "y"),
    "curve y unknown": (lambda c, X, y: c.faithfulness_curve(X, ["zzz"] * len(X)), "y"),
    "curve y short": (lambda c, X, y: c.faithfulness_curve(X, y[:1]), "y"),
    "curve metric": (lambda c, X, y: c.faithfulness_curve(X, y, metric="happiness"), "metric"),
    "curve recursive": (lambda c, X, y: c.faithfulness_curve(X, y, recursive="yes"), "recursive"),
    "curve importances": (lambda c, X, y: c.faithfulness_curve(X, y, importances=np.ones((len(X), 1))),
                          "importances"),
    "random curve ratios": (lambda c, X, y: c.random_masking_curve(X, y, ratios=[2]), "ratios"),
    "report thresholds": (lambda c, X, y: c.in_distribution_report(X, X, y, thresholds=[1.5]), "thresholds"),
    "report thresholds text": (lambda c, X, y: c.in_distribution_report(X, X, y, thresholds="low"), "thresholds"),
    "report dist_repeats": (lambda c, X, y: c.in_distribution_report(X, X, y, dist_repeats=True), "dist_repeats"),
    "report calibration": (lambda c, X, y: c.in_distribution_report(X, X, y, calibration="magic"), "calibration"),
    "report X_calib empty": (lambda c, X, y: c.in_distribution_report([], X, y), "X_calib"),
    "save path int": (lambda c, X, y: c.save(42), "path"),
    "load path int": (lambda c, X, y: FaithfulTextClassifier.load(42), "path"),
}


@pytest.mark.parametrize("case", list(CALLS))
def test_bad_arguments_of_fitted_calls_are_named(clf, data, case):
    call, name = CALLS[case]
    X, y = data[0][:4], data[1][:4]
    raises_clearly(lambda: call(clf, X, y), name)


def test_bad_paths_are_named(clf, tmp_path):
    (tmp_path / "file.txt").write_text("x")
    raises_clearly(lambda: clf.save(tmp_path / "file.txt"), "path=", "existing file")
    raises_clearly(lambda: clf.save(tmp_path), "path=", "did not write")
    for missing in (tmp_path / "missing", tmp_path / "file.txt"):
        with pytest.raises(FileNotFoundError, match="not a directory"):
            FaithfulTextClassifier.load(missing)
    with pytest.raises(FileNotFoundError, match="holds no fmmlearn.json"):
        FaithfulTextClassifier.load(tmp_path)


def test_nan_logits_are_an_error_naming_the_examples_not_class_zero(clf, bundled_tokenizer):
    broken = copy.deepcopy(clf)
    awful = bundled_tokenizer.convert_tokens_to_ids("awful")
    with torch.no_grad():
        broken.model_.get_input_embeddings().weight[awful] = float("nan")  # a corrupt embedding row
    texts = ["a good film", "an awful film", "fine", "awful awful"]
    error = raises_clearly(lambda: broken.predict(texts), "non-finite logits", "2 of 4", "[1, 3]", error=ValueError)
    assert "corrupt" in str(error)
    raises_clearly(lambda: broken.predict_proba(texts[1:2]), "[0]", error=ValueError)
    assert broken.predict(["a good film", "fine"]).shape == (2,)  # the other examples are unaffected


def test_acu_and_racu_warn_on_curves_with_nan(data):
    with pytest.warns(FaithfulnessWarning, match=r"curve is not finite .* at ratio\(s\) \[0.5\]"):
        assert math.isnan(acu([1.0, math.nan, 0.5], [1.0, 1.0, 0.5]))
    with pytest.warns(FaithfulnessWarning, match=r"random_curve is not finite .* \[0.0\]"):
        assert math.isnan(racu([1.0, 0.8, 0.5], [math.nan, 1.0, 0.5]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FaithfulnessWarning)
        assert acu([1.0, 0.5, 0.5], [1.0, 1.0, 0.5]) == 0.25  # finite curves stay silent


@pytest.mark.parametrize("call, name", [
    (lambda: acu([1.0], [1.0]), "curve"),
    (lambda: acu([1.0, 0.5, 0.2], [1.0, 0.5]), "random_curve"),
    (lambda: acu([1.0, 0.5], [1.0, 0.5], ratios=[0, 0.5]), "ratios"),
    (lambda: racu(pd.DataFrame({"ratio": [0, 1]}), [1.0, 0.5]), "curve"),
])
def test_acu_and_racu_name_malformed_curves(call, name):
    raises_clearly(call, name)


def test_a_pair_curve_with_an_empty_first_segment_warns_naming_it(pair_clf, data):
    pairs = [("", "a good story"), ("an awful film", "the story"), ("", "")]
    with pytest.warns(FaithfulnessWarning, match=r"2 of 3 example\(s\) have an empty segment A.*\[0, 2\]"):
        curve = pair_clf.faithfulness_curve(pairs, ["pos", "neg", "neg"], method="grad-l2", ratios=[0, 1])
    assert list(curve["ratio"]) == [0.0, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FaithfulnessWarning)
        pair_clf.faithfulness_curve(pairs[1:2], ["neg"], method="grad-l2", ratios=[0, 1])


# --------------------------------------------------------------------------- lengths


def test_max_length_none_is_the_models_limit_not_the_tokenizers(clf, bundled_tokenizer):
    assert bundled_tokenizer.model_max_length == 512 and clf.model_.config.max_position_embeddings == 128
    assert clf.max_length_ == 128
    with pytest.warns(TruncationWarning, match="max_length=128"):
        assert clf.predict(["good " * 300]).shape == (1,)


def test_a_max_length_beyond_the_model_is_clamped_with_one_warning(tiny_model_dir, data):
    with pytest.warns(UserWarning) as record:
        clf = FaithfulTextClassifier(model=tiny_model_dir, max_length=1000, **FIT).fit(*data)
    clamping = [w for w in record if "max_length=1000" in str(w.message)]
    assert len(clamping) == 1 and "128 tokens" in str(clamping[0].message)
    assert clf.max_length == 1000 and clf.max_length_ == 128
    with pytest.warns(TruncationWarning, match="max_length=128"):
        assert clf.predict(["good " * 300]).shape == (1,)


@pytest.mark.parametrize("pair, max_length", [(False, 2), (True, 3)])
def test_a_max_length_without_room_for_text_is_an_error_naming_it(tiny_model_dir, data, pair, max_length):
    X, y = data
    X = [(t, t) for t in X] if pair else X
    clf = FaithfulTextClassifier(model=tiny_model_dir, max_length=max_length, **FIT)
    raises_clearly(lambda: clf.fit(X, y), f"max_length={max_length}", "special tokens", error=ValueError)


@pytest.fixture(scope="module")
def roberta():
    """A tiny RoBERTa whose tokenizer claims no limit: only the model's 130 - 2 positions bound the input."""
    tokenizer = build_tokenizer("roberta")
    tokenizer.model_max_length = int(1e30)
    return build_model("roberta", tokenizer), tokenizer


def test_robertas_padding_offset_is_taken_off_its_positions(roberta, data):
    net, tokenizer = roberta
    assert net.config.max_position_embeddings == 130 and net.config.pad_token_id == 1
    limit, source = position_limit(net)
    assert limit == 128 and "minus 2" in source
    clf = quiet_fit(FaithfulTextClassifier(model=(net, tokenizer), **FIT), *data)
    assert clf.max_length_ == 128
    with pytest.warns(TruncationWarning, match="max_length=128"):
        assert clf.predict(["good " * 300]).shape == (1,)
    with pytest.warns(UserWarning, match=r"max_length=130 is more than the model can take, 128 tokens"):
        assert resolve_max_length(130, net, tokenizer) == 128


def test_models_without_a_position_table_use_their_configs_limit():
    tokenizer = build_tokenizer("deberta-v2")
    net = build_model("deberta-v2", tokenizer)
    assert position_limit(net) == (128, "its config's max_position_embeddings=128")
    tokenizer.model_max_length = int(1e30)
    assert resolve_max_length(None, net, tokenizer) == 128

"""Persistence: atomic save, verified load, nothing executed; pickling after every public call (docs/reliability.md)."""

import hashlib
import json
import os
import pickle
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.model_selection import GridSearchCV

import fmmlearn.estimator._persistence as persistence
from helpers.data import make_sentiment
from fmmlearn import FaithfulTextClassifier
from fmmlearn.ood import hidden_state_features

FIT = dict(max_epochs=2, batch_size=8, learning_rate=3e-3, warmup_ratio=0.0, validation_fraction=0,
           precision="fp32", device="cpu", random_state=0)


def _fit(model_dir, X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a 2-epoch toy fit may predict one class; not what is tested here
        return FaithfulTextClassifier(model=model_dir, **{**FIT, **params}).fit(X, y)


@pytest.fixture(scope="module")
def data():
    return make_sentiment(24, seed=3)


@pytest.fixture(scope="module")
def clf(tiny_model_dir, data):
    return _fit(tiny_model_dir, *data)


@pytest.fixture(scope="module")
def other(tiny_model_dir, data):
    """A second model with other classes and other weights (a different seed)."""
    X, y = data
    return _fit(tiny_model_dir, X, np.where(y == "pos", "yes", "no"), random_state=1)


@pytest.fixture
def saved(clf, tmp_path):
    return clf.save(tmp_path / "model")


def _manifest(path):
    return json.loads((path / "fmmlearn.json").read_text())


def _write_manifest(path, manifest):
    (path / "fmmlearn.json").write_text(json.dumps(manifest))


def _siblings(path):
    return sorted(p.name for p in path.parent.iterdir())


# --------------------------------------------------------------------------- round trip and manifest


def test_round_trip_keeps_predictions_parameters_history_and_limits(clf, saved, data):
    X, _ = data
    loaded = FaithfulTextClassifier.load(saved, device="cpu")
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    assert list(loaded.classes_) == list(clf.classes_)
    assert loaded.is_pair_ is False and loaded.max_length_ == clf.max_length_ == 128
    params = {k: v for k, v in clf.get_params().items() if k != "model"}
    assert {k: v for k, v in loaded.get_params().items() if k != "model"} == params
    pd.testing.assert_frame_equal(loaded.history_, clf.history_, check_exact=True)


def test_manifest_records_the_format_version_and_the_sha256_of_every_file(saved):
    manifest = _manifest(saved)
    assert manifest["format_version"] == persistence.FORMAT_VERSION == 1
    on_disk = sorted(p.name for p in saved.iterdir() if p.name != "fmmlearn.json")
    assert sorted(manifest["files"]) == on_disk and {"model.safetensors", "README.md"} <= set(on_disk)
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((saved / name).read_bytes()).hexdigest() == digest


def test_saving_again_replaces_the_previous_save_and_leaves_nothing_beside_it(clf, other, saved, data):
    other.save(saved)
    assert list(FaithfulTextClassifier.load(saved, device="cpu").classes_) == ["no", "yes"]
    assert _siblings(saved) == ["model"]


# --------------------------------------------------------------------------- atomic save


def test_a_save_interrupted_mid_way_leaves_the_previous_save_intact(clf, other, saved, data, monkeypatch):
    X, _ = data
    before = {p.name: p.read_bytes() for p in saved.iterdir()}

    def crash(directory, *args, **kwargs):
        (Path(directory) / "tokenizer.json").write_text("{")  # half a file, then the disk fills up
        raise OSError("No space left on device")

    monkeypatch.setattr(other.tokenizer_, "save_pretrained", crash)
    with pytest.raises(OSError, match="No space left"):
        other.save(saved)
    assert {p.name: p.read_bytes() for p in saved.iterdir()} == before
    assert _siblings(saved) == ["model"]  # the temporary directory is gone
    loaded = FaithfulTextClassifier.load(saved, device="cpu")
    assert list(loaded.classes_) == ["neg", "pos"]
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


def test_a_failed_rename_puts_the_previous_save_back(other, saved, monkeypatch):
    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append((Path(src).name, Path(dst).name))
        if len(calls) == 2:  # the old directory is moved away; publishing the new one fails
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(persistence.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        other.save(saved)
    monkeypatch.undo()
    assert calls[0][0] == "model" and calls[0][1].startswith(".model.old-") and calls[2] == (calls[0][1], "model")
    assert list(FaithfulTextClassifier.load(saved, device="cpu").classes_) == ["neg", "pos"]
    assert _siblings(saved) == ["model"]


def test_save_refuses_to_replace_a_file_or_a_directory_it_did_not_write(clf, tmp_path):
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work")
    with pytest.raises(ValueError, match="did not write"):
        clf.save(foreign)
    assert (foreign / "thesis.tex").read_text() == "years of work"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="existing file"):
        clf.save(tmp_path / "file")
    with pytest.raises(TypeError, match="path must be"):
        clf.save(42)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (clf.save(empty) / "fmmlearn.json").is_file()


# --------------------------------------------------------------------------- verified load


def test_load_refuses_weights_with_flipped_bytes(saved):
    weights = saved / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="model.safetensors does not match the SHA-256"):
        FaithfulTextClassifier.load(saved, device="cpu")


@pytest.mark.parametrize("classes, match", [
    (["pos", "neg"], "disagrees with the classes"),
    (["neg", "pos", "zzz"], "num_labels=2 outputs, but fmmlearn.json has 3 classes"),
    (["neg", "neg"], "at least 2 distinct labels"),
])
def test_load_refuses_classes_that_disagree_with_the_model_config(saved, classes, match):
    manifest = _manifest(saved)
    manifest["classes"] = classes
    _write_manifest(saved, manifest)
    with pytest.raises(ValueError, match=match):
        FaithfulTextClassifier.load(saved, device="cpu")


def test_load_refuses_a_directory_mixing_two_models(other, saved):
    other.model_.save_pretrained(saved)  # model B's config and weights next to model A's fmmlearn.json
    with pytest.raises(ValueError, match="does not match the SHA-256"):
        FaithfulTextClassifier.load(saved, device="cpu")


def test_load_refuses_weights_files_that_save_did_not_write(saved):
    torch.save({"x": torch.zeros(1)}, saved / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"does not list \['pytorch_model.bin'\]"):
        FaithfulTextClassifier.load(saved, device="cpu")


def test_load_names_a_request_for_remote_code(saved):
    config = json.loads((saved / "config.json").read_text())
    config["auto_map"] = {"AutoModelForSequenceClassification": "modeling_evil.EvilModel"}
    (saved / "config.json").write_text(json.dumps(config))
    (saved / "modeling_evil.py").write_text("raise SystemExit('remote code ran')\n")
    with pytest.raises(ValueError, match="asks for remote code.*never executes code.*trust_remote_code"):
        FaithfulTextClassifier.load(saved, device="cpu")


def _edit(key, value):
    def edit(manifest):
        manifest[key] = value
    return edit


def _edit_param(name, value):
    def edit(manifest):
        manifest["params"][name] = value
    return edit


@pytest.mark.parametrize("edit, match", [
    (None, "fmmlearn.json is not valid JSON"),
    (lambda m: m.pop("classes"), "lacks the key 'classes'"),
    (_edit("params", [1, 2]), "'params' of JSON type list; expected dict"),
    (_edit("is_pair", "no"), "'is_pair' of JSON type str; expected bool"),
    (_edit("format_version", 99), "newer than the 1 this fmmlearn .* reads. Upgrade fmmlearn"),
    (_edit("format_version", "1"), "format_version='1'"),
    (_edit("files", None), "lacks the checksums"),
    (_edit("history", [1, 2]), "'history' that is not a list of JSON objects"),
    (_edit_param("batch_size", True), "invalid parameter.*'batch_size'"),
    (_edit_param("masking_strategy", "everything"), "invalid parameter.*'masking_strategy'"),
    (_edit_param("learning_rate_of_the_future", 1.0), r"parameters \['learning_rate_of_the_future'\]"),
    (lambda m: m["files"].update({"../outside.json": "0" * 64}), "invalid file entry '../outside.json'"),
    (lambda m: m["files"].pop("tokenizer.json"), r"does not list \['tokenizer.json'\]"),
])
def test_load_turns_a_damaged_manifest_into_one_value_error_naming_the_file(saved, edit, match):
    if edit is None:
        (saved / "fmmlearn.json").write_text('{"params": ')
    else:
        manifest = _manifest(saved)
        edit(manifest)
        _write_manifest(saved, manifest)
    with pytest.raises(ValueError, match=f"cannot load '.*model': .*{match}"):
        FaithfulTextClassifier.load(saved, device="cpu")


def _legacy(saved):
    """The directory as written before checksums existed (no format_version, no files)."""
    manifest = _manifest(saved)
    del manifest["format_version"], manifest["files"]
    _write_manifest(saved, manifest)


def test_a_save_without_checksums_loads_with_a_warning(saved, data):
    _legacy(saved)
    with pytest.warns(UserWarning, match="without checksums"):
        loaded = FaithfulTextClassifier.load(saved, device="cpu")
    assert loaded.predict(data[0]).shape == (len(data[0]),)


def test_unverified_corrupt_weights_are_one_value_error(saved):
    _legacy(saved)
    (saved / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.warns(UserWarning, match="without checksums"), \
            pytest.raises(ValueError, match="the model weights cannot be loaded"):
        FaithfulTextClassifier.load(saved, device="cpu")


def test_load_never_unpickles(saved, monkeypatch):
    """Pickled weights in place of safetensors are refused without torch.load ever running."""
    _legacy(saved)
    weights = torch.nn.Linear(1, 1).state_dict()
    (saved / "model.safetensors").unlink()
    torch.save(weights, saved / "pytorch_model.bin")

    def forbidden(*args, **kwargs):
        raise AssertionError("torch.load was called")

    monkeypatch.setattr(torch, "load", forbidden)
    with pytest.warns(UserWarning, match="without checksums"), \
            pytest.raises(ValueError, match="the model weights cannot be loaded"):
        FaithfulTextClassifier.load(saved, device="cpu")


def test_load_refuses_weights_that_do_not_fill_the_model(saved):
    """Weights of another architecture (the same file names) would leave layers randomly initialised."""
    from safetensors.torch import load_file, save_file

    _legacy(saved)
    tensors = load_file(saved / "model.safetensors")
    dropped = sorted(tensors)[0]
    del tensors[dropped]
    save_file(tensors, saved / "model.safetensors", metadata={"format": "pt"})
    with pytest.warns(UserWarning, match="without checksums"), \
            pytest.raises(ValueError, match="does not fit the architecture.*missing_keys"):
        FaithfulTextClassifier.load(saved, device="cpu")


def test_load_checks_the_device_before_reading_the_weights(saved, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device='cuda' asks for CUDA"):
        FaithfulTextClassifier.load(saved, device="cuda")
    with pytest.raises(FileNotFoundError, match="not a directory"):
        FaithfulTextClassifier.load(saved / "nothing-here")


def test_load_points_to_the_previous_version_an_interrupted_save_left(saved):
    moved = saved.with_name(".model.old-0123456789ab")
    saved.rename(moved)
    with pytest.raises(FileNotFoundError, match=r"previous version at '.*\.model\.old-0123456789ab'"):
        FaithfulTextClassifier.load(saved)


# --------------------------------------------------------------------------- pickling after every call


PUBLIC_CALLS = {
    "predict": lambda c, X, y: c.predict(X),
    "predict_proba": lambda c, X, y: c.predict_proba(X),
    "decision_function": lambda c, X, y: c.decision_function(X),
    "score": lambda c, X, y: c.score(X, y),
    "explain": lambda c, X, y: c.explain(X, method="int-grad-sign", n_steps=2),
    "faithfulness_curve": lambda c, X, y: c.faithfulness_curve(X, y, method="grad-l2", ratios=[0, 0.5, 1]),
    "random_masking_curve": lambda c, X, y: c.random_masking_curve(X, y, ratios=[0, 1]),
    "in_distribution_report": lambda c, X, y: c.in_distribution_report(X, X, y, ratios=[0, 1]),
    "hidden_state_features": lambda c, X, y: hidden_state_features(c, X),
    "model_card": lambda c, X, y: c.model_card(results={"accuracy": c.score(X, y)}, dataset="toy"),
}


@pytest.mark.parametrize("call", list(PUBLIC_CALLS))
def test_the_estimator_stays_picklable_after_every_public_call(clf, data, call):
    X, y = data[0][:8], data[1][:8]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few calibration examples
        PUBLIC_CALLS[call](clf, X, y)
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))


def test_stripped_hooks_come_back_when_hidden_states_are_asked_for_again(clf, data):
    X = data[0][:4]
    before = hidden_state_features(clf, X)  # installs transformers' output-capturing hooks
    restored = pickle.loads(pickle.dumps(clf))  # strips them from clf.model_
    np.testing.assert_array_equal(hidden_state_features(restored, X), before)
    np.testing.assert_array_equal(hidden_state_features(clf, X), before)
    assert before.shape == (4, clf.model_.config.num_hidden_layers + 1, clf.model_.config.hidden_size)


def test_a_loaded_pair_model_is_picklable_after_asking_it_for_hidden_states(tiny_model_dir, data):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    net = AutoModelForSequenceClassification.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    net(**tokenizer(["a fine film"], return_tensors="pt"), output_hidden_states=True)
    assert pickle.loads(pickle.dumps(FaithfulTextClassifier(model=(net, tokenizer)))).model[1] is not None


def test_grid_search_with_two_workers_after_an_in_distribution_report(clf, data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.in_distribution_report(X[:12], X[12:], y[12:], ratios=[0, 1])
        search = GridSearchCV(clf, {"max_epochs": [1]}, cv=2, n_jobs=2).fit(X, y)
    assert search.best_estimator_.predict(X[:2]).shape == (2,)

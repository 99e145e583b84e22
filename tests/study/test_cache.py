"""The study's cache checks itself and cannot run code: every fault is reported in one line and recomputed."""

import json
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

from helpers.data import make_sentiment
from helpers.tiny_study import FAULTS, damage_entry
from fmmlearn.exceptions import CacheWarning
from fmmlearn.explanation import Explanation
from fmmlearn.ood import MaSF
from fmmlearn.study import FaithfulnessStudy
from fmmlearn.study._cache import StageCache
from fmmlearn.study._codec import CorruptEntry, file_digest, read_payload, write_payload

TINY_FIT = dict(max_epochs=2, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32")


# --------------------------------------------------------------------------- the codec


def _payload():
    rng = np.random.default_rng(0)
    masf = MaSF(random_state=3).fit(rng.standard_normal((70, 2, 5)))
    frame = pd.DataFrame({"k": [0.1, 0.2, "AOPC"], "mean": [0.5, np.nan, 0.25], "valid": [True, None, False],
                          "flag": pd.array([True, pd.NA, False], dtype="boolean"), "n": np.array([1, 2, 3]),
                          "name": ["a", "b", "c"]})
    return {"pred": rng.integers(0, 3, (4, 5)).astype(np.int16), "proba": rng.random((4, 5)).astype(np.float32),
            "mask": rng.random(5) > 0.5, "frame": frame, "masf": masf, "nested": {"grid": (0.0, 0.5, 1.0),
            "names": ["x", "y"], "nan": float("nan"), "none": None}}


def test_a_payload_round_trips_exactly(tmp_path):
    payload = _payload()
    files = write_payload(payload, tmp_path)
    back = read_payload(tmp_path, files)
    for key in ("pred", "proba", "mask"):
        assert back[key].dtype == payload[key].dtype
        np.testing.assert_array_equal(back[key], payload[key])
    pd.testing.assert_frame_equal(back["frame"], payload["frame"], check_exact=True)
    assert back["nested"]["grid"] == (0.0, 0.5, 1.0) and back["nested"]["names"] == ["x", "y"]
    assert np.isnan(back["nested"]["nan"]) and back["nested"]["none"] is None
    new = np.random.default_rng(1).standard_normal((9, 2, 5))
    np.testing.assert_array_equal(back["masf"].pvalues(new), payload["masf"].pvalues(new))
    assert back["masf"].pvalue_floor_ == payload["masf"].pvalue_floor_
    assert not list(tmp_path.glob("*.pkl"))


def test_an_explanation_round_trips_with_its_texts(tmp_path, fitted_tiny):
    explanation = fitted_tiny.explain(["good movie", "the plot was awful"], method="inp-grad-sign")
    back = read_payload(tmp_path, write_payload({"frame": explanation}, tmp_path))["frame"]
    assert isinstance(back, Explanation)
    pd.testing.assert_frame_equal(pd.DataFrame(back), pd.DataFrame(explanation))
    pd.testing.assert_frame_equal(back.examples, explanation.examples)


@pytest.mark.parametrize("value, message", [
    (np.array([object()], dtype=object), "object array cannot be stored without pickle"),
    (object(), "cannot hold a object"),
    ({1: "a"}, "string keys"),
])
def test_what_only_pickle_could_store_is_refused_at_write_time(tmp_path, value, message):
    with pytest.raises(TypeError, match=message):
        write_payload({"x": value}, tmp_path)


def test_a_file_that_does_not_match_its_checksum_is_never_parsed(tmp_path):
    files = write_payload(_payload(), tmp_path)
    array = next(name for name in files if name.endswith(".npy"))
    data = bytearray((tmp_path / array).read_bytes())
    data[-1] ^= 0x01  # one bit
    (tmp_path / array).write_bytes(bytes(data))
    with pytest.raises(CorruptEntry, match=f"checksum of {array} does not match"):
        read_payload(tmp_path, files)


class _Sentinel:
    """Unpickling this writes a file: the proof that a planted pickle ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_a_planted_pickle_with_a_matching_checksum_is_refused_not_run(tmp_path):
    files = write_payload({"pred": np.arange(3)}, tmp_path)
    sentinel = tmp_path / "ran"
    (tmp_path / "a0.npy").write_bytes(pickle.dumps(_Sentinel(sentinel)))
    files["a0.npy"] = file_digest(tmp_path / "a0.npy")  # an attacker who also fixed the manifest
    with pytest.raises(CorruptEntry):
        read_payload(tmp_path, files)
    assert not sentinel.exists()


# --------------------------------------------------------------------------- a study's cache under faults


def _study(model_dir, cache):
    return FaithfulnessStudy(model_dir, masking_ratios=(1.0,), methods=["rand", "inp-grad-sign"], seeds=(0,),
                             n_train=60, n_valid=20, n_test=16, n_random=1, n_bootstrap=100, in_distribution=None,
                             erasure=None, n_explain=0, classifier_params=TINY_FIT, device="cpu", verbose=0,
                             cache_dir=cache)


@pytest.fixture(scope="module")
def cached_run(tiny_model_dir, tmp_path_factory):
    """A finished study and its cache directory."""
    cache = tmp_path_factory.mktemp("cache")
    data = make_sentiment(100, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = _study(tiny_model_dir, cache).run(*data)
    return result, cache, data


def _rerun(model_dir, cache, data):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _study(model_dir, cache).run(*data)
    return result, [w for w in caught if issubclass(w.category, CacheWarning)]


def _faithfulness_entries(cache):
    return sorted(p for p in (cache / "stages" / "faithfulness").iterdir() if not p.name.startswith("."))


def _same(a, b):
    for name in ("curves", "racu", "outcomes"):
        pd.testing.assert_frame_equal(a.frames[name], b.frames[name], check_exact=True, obj=name)


def test_an_intact_cache_is_read_without_a_word(tiny_model_dir, cached_run):
    result, cache, data = cached_run
    again, said = _rerun(tiny_model_dir, cache, data)
    assert said == [] and again.timings["cached"].all()
    _same(result, again)


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_bad_entry_is_reported_in_one_line_and_recomputed(tiny_model_dir, cached_run, tmp_path, fault):
    import shutil

    result, original, data = cached_run
    cache = tmp_path / "cache"
    shutil.copytree(original, cache)
    entry = _faithfulness_entries(cache)[0]
    damage_entry(entry, fault)
    again, said = _rerun(tiny_model_dir, cache, data)
    assert len(said) == 1
    message = str(said[0].message)
    assert str(entry) in message and "\n" not in message and "recomputing" in message
    assert FAULTS[fault] in message
    rows = again.timings[again.timings["stage"] == "faithfulness"]
    assert (~rows["cached"]).sum() == 1  # that entry alone was computed again
    _same(result, again)
    _, said = _rerun(tiny_model_dir, cache, data)
    assert said == []  # and stored again, intact


def test_a_corrupt_model_is_refitted_not_loaded(tiny_model_dir, cached_run, tmp_path):
    import shutil

    result, original, data = cached_run
    cache = tmp_path / "cache"
    shutil.copytree(original, cache)
    weights = next((cache / "models").glob("*/model/*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-16])
    again, said = _rerun(tiny_model_dir, cache, data)
    assert len(said) == 1 and "(model)" in str(said[0].message) and "checksum" in str(said[0].message)
    assert not again.timings.loc[again.timings["stage"] == "fit", "cached"].any()
    _same(result, again)


def test_no_pickle_is_written_anywhere_in_the_cache(cached_run):
    _, cache, _ = cached_run
    names = [p.name for p in cache.rglob("*") if p.is_file()]
    assert names and not [n for n in names if n.endswith((".pkl", ".pickle", ".joblib", ".bin", ".pt"))]
    suffixes = {p.suffix for p in cache.rglob("*") if p.is_file()}
    # .md: the model card (README.md) of each saved model, Markdown with YAML metadata (read by safe_load)
    assert suffixes <= {".json", ".md", ".npy", ".safetensors", ".txt"}, suffixes


def test_a_second_writer_of_the_same_entry_keeps_the_first_and_interleaves_nothing(tmp_path):
    store = StageCache(tmp_path)
    store.save("stage", "k", {"x": np.arange(3)})
    store.save("stage", "k", {"x": np.arange(3)})  # e.g. a concurrent run that computed the same job
    entries = [p for p in (tmp_path / "stages" / "stage").iterdir()]
    assert [p.name for p in entries] == ["k"]  # no temporary directory left behind
    np.testing.assert_array_equal(store.load("stage", "k")["x"], np.arange(3))


def test_every_entry_records_the_versions_and_the_base_models_fingerprint(tiny_model_dir, cached_run):
    from fmmlearn.study._cache import model_identity

    _, cache, _ = cached_run
    manifests = [json.loads(p.read_text()) for p in cache.rglob("manifest.json")]
    assert manifests and {m["kind"] for m in manifests} >= {"model", "stage faithfulness"}
    for manifest in manifests:
        assert set(manifest["versions"]) == {"fmmlearn", "torch", "transformers", "numpy"}
        assert all(manifest["versions"].values())
        assert manifest["model"] == model_identity(tiny_model_dir)  # a digest of the base model's files
    assert set(model_identity(tiny_model_dir)) == {"directory_sha256"}


def test_leftovers_of_a_killed_writer_are_removed_when_old_and_kept_while_fresh(tmp_path):
    import os
    import time

    old = [tmp_path / "models" / ".tmp-a-1", tmp_path / "stages" / "fit" / ".tmp-b-2",
           tmp_path / "stages" / "fit" / ".trash-c-3"]
    fresh = tmp_path / "stages" / "fit" / ".tmp-d-4"  # perhaps another process's write in progress
    for directory in [*old, fresh]:
        directory.mkdir(parents=True)
        (directory / "a0.npy").write_bytes(b"half")
    for directory in old:
        os.utime(directory, (time.time() - 2 * 3600,) * 2)
    StageCache(tmp_path)
    assert [d.exists() for d in old] == [False, False, False] and fresh.exists()


# --------------------------------------------------------------------------- fmmlearn demo: one line per bad entry

#: The smallest demo: the tiny model, few texts, one costly measure, no budget for more texts.
DEMO = ["--quick", "--measures", "rand", "inp-grad-sign", "--n-train", "40", "--n-valid", "30", "--n-test", "16",
        "--budget", "0", "--device", "cpu", "-q"]


@pytest.fixture(scope="module")
def demo_output(tiny_model_dir, tmp_path_factory):
    """The output directory (report, results, cache) of one ``fmmlearn demo`` run; tests damage copies of it."""
    from fmmlearn.cli import main

    output = tmp_path_factory.mktemp("demo") / "demo"
    assert main(["demo", "--model", tiny_model_dir, "--output", str(output), *DEMO]) == 0
    return output


def _cache_lines(err: str) -> list:
    return [line for line in err.splitlines() if "CacheWarning" in line]


def _line_of(entry, fault) -> str:
    """The start of the one line that reports ``entry``."""
    return f"warning: cache entry {entry} (stage 'faithfulness') is {'made with' if fault == 'stale' else 'corrupt:'} "


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_the_demo_prints_one_line_for_each_bad_entry_it_recomputes(tiny_model_dir, demo_output, tmp_path, capsys,
                                                                  fault):
    import shutil

    from fmmlearn.cli import main
    from fmmlearn.study import StudyResult

    output = tmp_path / "demo"
    shutil.copytree(demo_output, output)
    entry = _faithfulness_entries(output / "cache")[0]
    damage_entry(entry, fault)
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("always", CacheWarning)  # a second report of the entry would show too
        assert main(["demo", "--model", tiny_model_dir, "--output", str(output), *DEMO]) == 0
    lines = _cache_lines(capsys.readouterr().err)
    assert len(lines) == 1, lines
    assert lines[0].startswith(_line_of(entry, fault)) and FAULTS[fault] in lines[0]
    assert lines[0].endswith("; recomputing it. [CacheWarning]")
    timings = StudyResult.load(output / "results").timings
    assert (~timings.loc[timings["stage"] == "faithfulness", "cached"]).sum() == 1  # that entry alone, again


def test_the_demo_command_shows_the_line_and_w_error_stops_at_the_entry(tiny_model_dir, demo_output, tmp_path):
    """The issue's run, as a user types it: the demo's own filters and Python's ``-W`` in a fresh interpreter."""
    import shutil
    import subprocess
    import sys

    from helpers.tiny_study import process_env

    output = tmp_path / "demo"
    shutil.copytree(demo_output, output)
    entry = _faithfulness_entries(output / "cache")[0]
    damage_entry(entry, "truncated")
    damaged = {p.name: p.read_bytes() for p in entry.iterdir()}
    demo = ["-m", "fmmlearn", "demo", "--model", tiny_model_dir, "--output", str(output), *DEMO]

    def run(*options):
        return subprocess.run([sys.executable, *options, *demo], env=process_env(), cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)

    stopped = run("-W", "error::fmmlearn.exceptions.CacheWarning")
    assert stopped.returncode == 2, stopped.stderr
    assert f"error: cache entry {entry} (stage 'faithfulness') is corrupt: the checksum of" in stopped.stderr
    assert {p.name: p.read_bytes() for p in entry.iterdir()} == damaged  # left as it was, to be looked at
    shown = run("-W", "always")  # every warning shown, repeats too
    assert shown.returncode == 0, shown.stderr
    lines = _cache_lines(shown.stderr)
    assert len(lines) == 1 and lines[0].startswith(_line_of(entry, "truncated")), shown.stderr
    assert (entry / "manifest.json").is_file() and {p.name: p.read_bytes() for p in entry.iterdir()} != damaged

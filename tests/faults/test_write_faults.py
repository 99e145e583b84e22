"""Full disks and read-only places: a write that fails part way ends in an error naming the path, and what was
there before is intact (docs/reliability.md)."""

import errno
import warnings

import numpy as np
import pandas as pd
import pytest

from helpers.data import make_sentiment
from fmmlearn import FaithfulTextClassifier
from fmmlearn.cli import main
from fmmlearn.study import FaithfulnessStudy, load_study
from fmmlearn.study._cache import StageCache

TINY_FIT = dict(max_epochs=2, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32")
FULL = "No space left on device"


def _full_disk_after(n_bytes):
    """A writer for ``path`` that writes ``n_bytes`` of junk and then fails as a full disk does."""
    def write(path, *args, **kwargs):
        with open(path, "wb") as handle:
            handle.write(b"\0" * n_bytes)
        raise OSError(errno.ENOSPC, FULL)

    return write


def _leftovers(directory):
    """Temporary files or directories a failed write left behind."""
    return sorted(p.name for p in directory.rglob("*") if ".tmp" in p.name or ".saving-" in p.name
                  or p.name.startswith((".tmp-", ".trash-")) or ".old-" in p.name)


# --------------------------------------------------------------------------- a saved model


def test_a_save_that_fails_part_way_names_the_path_and_keeps_the_previous_save(fitted_tiny, tmp_path, monkeypatch):
    target = tmp_path / "model"
    fitted_tiny.save(target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    texts = ["good movie", "the plot was awful"]
    expected = fitted_tiny.predict_proba(texts)
    monkeypatch.setattr(type(fitted_tiny.tokenizer_), "save_pretrained",
                        lambda self, directory, **kw: _full_disk_after(100)(f"{directory}/tokenizer.json"))
    with pytest.raises(OSError, match=f"cannot write {target}: {FULL}; the previous save there is unchanged") as e:
        fitted_tiny.save(target)
    assert e.value.errno == errno.ENOSPC and "\n" not in str(e.value)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert _leftovers(tmp_path) == []
    np.testing.assert_array_equal(FaithfulTextClassifier.load(target, device="cpu").predict_proba(texts), expected)


def test_a_save_into_a_read_only_place_names_the_path(fitted_tiny, tmp_path, monkeypatch):
    import tempfile

    def read_only(*args, **kwargs):  # what mkdtemp raises in a read-only directory (the tests may run as root)
        raise PermissionError(errno.EACCES, "Permission denied", kwargs.get("dir"))

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    with pytest.raises(PermissionError, match=f"cannot write {tmp_path / 'new'}: Permission denied; nothing was"):
        fitted_tiny.save(tmp_path / "new")
    assert not (tmp_path / "new").exists()


# --------------------------------------------------------------------------- a study's results, report and cache


@pytest.fixture(scope="module")
def study_result(tiny_model_dir):
    study = FaithfulnessStudy(tiny_model_dir, masking_ratios=(1.0,), methods=["rand", "inp-grad-sign"], seeds=(0,),
                              n_train=60, n_valid=20, n_test=16, n_random=1, n_bootstrap=100, in_distribution=None,
                              erasure=None, n_explain=0, classifier_params=TINY_FIT, device="cpu", verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return study.run(*make_sentiment(100, seed=2))


def test_study_results_that_fail_part_way_keep_the_previous_files(study_result, tmp_path, monkeypatch):
    out = study_result.save(tmp_path / "results", format="csv")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(pd.DataFrame, "to_csv", lambda self, path, **kw: _full_disk_after(10)(path))
    with pytest.raises(OSError, match=f"cannot write {out / 'performance.csv'}: {FULL}; what was there before is "
                                      "unchanged"):
        study_result.save(out, format="csv")
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before and _leftovers(tmp_path) == []
    pd.testing.assert_frame_equal(load_study(out).racu, study_result.racu)


def test_a_report_that_fails_part_way_keeps_the_previous_report(study_result, tmp_path, monkeypatch):
    from pathlib import Path

    report = tmp_path / "report.html"
    study_result.to_html(report)
    before = report.read_bytes()
    monkeypatch.setattr(Path, "write_text", lambda self, *a, **k: _full_disk_after(50)(self))
    with pytest.raises(OSError, match=f"cannot write {report}: {FULL}"):
        study_result.to_html(report)
    monkeypatch.undo()
    assert report.read_bytes() == before and _leftovers(tmp_path) == []


def test_a_cache_write_that_fails_part_way_names_the_entry_and_leaves_the_cache_as_it_was(tmp_path, monkeypatch):
    from fmmlearn.study import _cache

    store = StageCache(tmp_path)
    store.save("stage", "kept", {"x": np.arange(3)})

    def failing(payload, directory):
        _full_disk_after(7)(directory / "a0.npy")

    monkeypatch.setattr(_cache, "write_payload", failing)
    with pytest.raises(OSError, match=f"cannot write {tmp_path / 'stages' / 'stage' / 'new'}: {FULL}; the entries"):
        store.save("stage", "new", {"x": np.arange(3)})
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "stages" / "stage").iterdir()) == ["kept"]
    np.testing.assert_array_equal(store.load("stage", "kept")["x"], np.arange(3))


# --------------------------------------------------------------------------- the command line


def test_a_command_whose_output_cannot_be_written_says_so_in_one_line(fitted_tiny, tmp_path, monkeypatch, capsys):
    model = fitted_tiny.save(tmp_path / "model")
    data = tmp_path / "t.csv"
    pd.DataFrame({"text": ["good", "bad"], "label": [1, 0]}).to_csv(data, index=False)
    predictions = tmp_path / "pred.csv"
    predictions.write_text("an earlier run's predictions\n")
    real = pd.DataFrame.to_csv

    def full_for_outputs(self, path=None, **kwargs):
        if path is not None and "pred" in str(path):
            return _full_disk_after(10)(path)
        return real(self, path, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_for_outputs)
    status = main(["predict", str(model), str(data), "-o", str(predictions), "-q"])
    err = capsys.readouterr().err
    assert status == 2 and err.strip().splitlines() == [
        f"error: [Errno {errno.ENOSPC}] cannot write {predictions}: {FULL}; what was there before is unchanged"]
    assert predictions.read_text() == "an earlier run's predictions\n" and _leftovers(tmp_path) == []


def test_a_model_cache_write_that_fails_names_the_entry_not_a_temporary_copy(fitted_tiny, tmp_path, monkeypatch):
    store = StageCache(tmp_path)
    monkeypatch.setattr(type(fitted_tiny.tokenizer_), "save_pretrained",
                        lambda self, directory, **kw: _full_disk_after(100)(f"{directory}/tokenizer.json"))
    with pytest.raises(OSError) as caught:
        store.fit_or_load("key", lambda: (fitted_tiny, {}), "cpu")
    assert str(caught.value) == (f"[Errno {errno.ENOSPC}] cannot write {tmp_path / 'models' / 'key'}: {FULL}; "
                                 "the entries already in the cache are unchanged")
    assert list((tmp_path / "models").iterdir()) == []

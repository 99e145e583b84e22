"""A tiny study run as its own process, for the fault tests (tests/faults/test_concurrency.py, tests/faults/test_interrupts.py,
tests/study/test_cache.py).

``python -m helpers.tiny_study MODEL_DIR CACHE OUT`` runs a small plain-vs-masked study of a tiny random
model on toy data with ``cache_dir=CACHE``, saves its frames to ``OUT/results`` (CSV) and its report to
``OUT/report.html``, then prints ``done``.

Fault injection (the test's, not the library's): ``TINY_STUDY_KILL=POINT:N`` sends this process
``SIGKILL`` -- ``kill -9``, nothing runs after it -- at the N-th time it reaches POINT:

* ``fit``: an optimiser step inside ``FaithfulTextClassifier.fit``;
* ``curve``: one masking step of a faithfulness curve (between two ratios);
* ``cache``: inside a stage's cache write, after its first array file is on disk;
* ``model``: inside the cache write of a fitted model, after the weights are on disk;
* ``report``: inside the write of ``report.html``, after half of the page is on disk.

``TINY_STUDY_SLOW=SECONDS`` sleeps that long at each curve step (to give a signal time to arrive), and
``TINY_STUDY_SIGNAL=POINT:N`` prints ``reached`` (flushed) at the N-th ``POINT`` instead of killing, so a
test can send a signal from outside while the study is inside it.

:func:`damage_entry` damages one cache entry by one of :data:`FAULTS` (a flipped byte, a truncated or
missing file, another version's manifest), for the tests of the cache's reports.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

#: The tests directory (the child processes import ``helpers`` from it).
TESTS = Path(__file__).resolve().parents[1]
#: The result frames a rerun must reproduce exactly.
FRAMES = ("performance", "curves", "racu", "outcomes")
TINY_FIT = dict(max_epochs=2, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32")
_COUNTS: dict = {}


def process_env(**extra) -> dict:
    """The environment of a child process: this fmmlearn, the tests' helpers, offline, one thread."""
    path = os.pathsep.join(filter(None, [str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1",
                TOKENIZERS_PARALLELISM="false", MPLBACKEND="Agg", **extra)


def like_a_terminal_job() -> None:
    """In the child: Ctrl-C handled by default, as in a terminal, even where the tests run under ``nohup``.

    A job started in the background of a non-interactive shell inherits SIGINT ignored; the child of such
    a test run would then rightly ignore Ctrl-C, which is not what the tests simulate.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_study(model_dir, cache, out, **hooks) -> subprocess.Popen:
    """This module as a process: the study of ``model_dir`` with ``cache``, written to ``out``; ``hooks``: env."""
    return subprocess.Popen([sys.executable, "-m", "helpers.tiny_study", str(model_dir), str(cache), str(out)],
                            cwd=TESTS, env=process_env(**hooks), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=like_a_terminal_job)


def assert_same_results(a, b) -> None:
    """The result frames agree exactly; measured times (``*seconds*`` columns) are not results."""
    import pandas as pd

    for name in FRAMES:
        left, right = getattr(a, name), getattr(b, name)
        timing = [c for c in left.columns if "seconds" in c]
        pd.testing.assert_frame_equal(left.drop(columns=timing), right.drop(columns=timing), check_exact=True,
                                      obj=name)


#: The faults :func:`damage_entry` makes, and a word the cache's report of each must hold.
FAULTS = {"bit flip": "checksum", "truncated": "checksum", "missing file": "missing", "stale": "torch 1.0.0"}


def damage_entry(entry, fault: str) -> None:
    """Damage the first array file of the cache ``entry`` by ``fault`` (a key of :data:`FAULTS`).

    ``"stale"`` leaves the files intact and records another torch version in the manifest.
    """
    import json

    entry = Path(entry)
    array = sorted(entry.glob("a*.npy"))[0]
    if fault == "bit flip":
        data_bytes = bytearray(array.read_bytes())
        data_bytes[len(data_bytes) // 2] ^= 0x10
        array.write_bytes(bytes(data_bytes))
    elif fault == "truncated":
        array.write_bytes(array.read_bytes()[:40])
    elif fault == "missing file":
        array.unlink()
    elif fault == "stale":  # made by another torch
        manifest = json.loads((entry / "manifest.json").read_text())
        manifest["versions"]["torch"] = "1.0.0"
        (entry / "manifest.json").write_text(json.dumps(manifest))
    else:
        raise ValueError(f"fault must be one of {sorted(FAULTS)}, got {fault!r}")


def study(model_dir, cache):
    from fmmlearn.study import FaithfulnessStudy

    return FaithfulnessStudy(model_dir, masking_ratios=(0.0, 1.0), methods=["rand", "inp-grad-sign"], seeds=(0,),
                             n_train=60, n_valid=20, n_test=16, n_random=1, n_bootstrap=100, in_distribution=None,
                             erasure=None, n_explain=0, classifier_params=TINY_FIT, device="cpu", verbose=0,
                             cache_dir=cache)


def data():
    from helpers.data import make_sentiment

    return make_sentiment(100, seed=2)


def _reached(point: str) -> None:
    """Count ``point``; kill this process (or say ``reached``) at the count the environment names."""
    _COUNTS[point] = _COUNTS.get(point, 0) + 1
    for variable, act in (("TINY_STUDY_KILL", lambda: os.kill(os.getpid(), signal.SIGKILL)),
                          ("TINY_STUDY_SIGNAL", lambda: print("reached", flush=True))):
        target = os.environ.get(variable, "")
        if target and target.split(":")[0] == point and int(target.split(":")[1]) == _COUNTS[point]:
            act()


def _install_hooks() -> None:
    import numpy as np
    import torch

    import fmmlearn.faithfulness as faithfulness
    from fmmlearn.study import _cache, _result

    step = torch.optim.AdamW.step

    def counted_step(self, *args, **kwargs):
        _reached("fit")
        return step(self, *args, **kwargs)

    torch.optim.AdamW.step = counted_step

    masking = faithfulness.iter_explainer_masking

    def counted_masking(*args, **kwargs):
        for item in masking(*args, **kwargs):
            _reached("curve")
            time.sleep(float(os.environ.get("TINY_STUDY_SLOW", "0")))
            yield item

    faithfulness.iter_explainer_masking = counted_masking

    write_payload = _cache.write_payload

    def counted_write_payload(payload, directory):
        save = np.save

        def save_then_reach(file, array, **kwargs):
            save(file, array, **kwargs)
            _reached("cache")

        np.save = save_then_reach
        try:
            return write_payload(payload, directory)
        finally:
            np.save = save

    _cache.write_payload = counted_write_payload

    files_of = _cache._files_of

    def counted_files_of(directory):  # called once the model's files are written, before its manifest
        _reached("model")
        return files_of(directory)

    _cache._files_of = counted_files_of

    atomic_write = _result.atomic_write

    def counted_atomic_write(path, write):
        if Path(path).name != "report.html":
            return atomic_write(path, write)

        def half_then_reach(tmp):
            write(tmp)
            text = Path(tmp).read_text(encoding="utf-8")
            Path(tmp).write_text(text[: len(text) // 2], encoding="utf-8")
            _reached("report")
            Path(tmp).write_text(text, encoding="utf-8")

        return atomic_write(path, half_then_reach)

    _result.atomic_write = counted_atomic_write


def main(argv=None) -> int:
    model_dir, cache, out = (argv or sys.argv[1:])[:3]
    _install_hooks()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = study(model_dir, cache).run(*data())
    result.save(Path(out) / "results", format="csv")
    result.to_html(Path(out) / "report.html")
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

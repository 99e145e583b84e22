"""Long jobs stopped by a signal or killed outright lose nothing (docs/reliability.md).

Ctrl-C and SIGTERM stop a study, ``fmmlearn demo`` and the reproduction with one line and the shell's exit
status, keeping what was finished; ``kill -9`` at any point (inside a fit, a curve, a cache write, the
report) and the same command again give result frames identical to an uninterrupted run's.  Every test
runs the job as its own process.
"""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.tiny_study import TESTS, assert_same_results, like_a_terminal_job, process_env, start_study
from fmmlearn.study import load_study

pytestmark = pytest.mark.slow  # each test starts several Python processes that import torch and fit


def _finished(process):
    out, err = process.communicate(timeout=600)  # a guard against a hang, not a measurement
    return process.returncode, out, err


def _wait_for_line(process, line: str) -> None:
    for got in process.stdout:
        if got.strip() == line:
            return
    pytest.fail(f"the process ended without printing {line!r}: {process.stderr.read()}")


def _leftovers(cache: Path) -> list:
    return [p for p in cache.rglob("*") if p.name.startswith((".tmp-", ".trash-"))]


# --------------------------------------------------------------------------- Ctrl-C and SIGTERM


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_study_keeping_what_it_finished(tiny_model_dir, tmp_path, signal_number):
    cache = tmp_path / "cache"
    study = start_study(tiny_model_dir, cache, tmp_path / "out", TINY_STUDY_SIGNAL="curve:3",
                        TINY_STUDY_SLOW="0.5")
    _wait_for_line(study, "reached")  # inside the faithfulness stage, between two masking steps
    study.send_signal(signal_number)
    status, out, err = _finished(study)
    assert status != 0 and "done" not in out
    assert err.strip().splitlines()[-1] == f"fmmlearn.exceptions.JobInterrupted: interrupted by " \
                                           f"{signal.Signals(signal_number).name}"
    models = [p for p in (cache / "models").iterdir() if (p / "manifest.json").is_file()]
    assert len(models) == 2  # both fits finished before the curves and are kept
    assert _leftovers(cache) == []  # the half-written entry was removed on the way out
    rerun = start_study(tiny_model_dir, cache, tmp_path / "out")
    status, out, err = _finished(rerun)
    assert status == 0 and out.strip() == "done", err
    timings = load_study(tmp_path / "out" / "results").timings
    assert timings.loc[timings["stage"] == "fit", "cached"].all()


DEMO = ["--quick", "--n-train", "60", "--n-valid", "20", "--n-test", "16", "--budget", "0", "--device", "cpu",
        "-q"]


@pytest.mark.parametrize("signal_number, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_demo_with_one_line_and_the_shells_status(tiny_model_dir, tmp_path, signal_number,
                                                                     status):
    output = tmp_path / "demo"
    demo = subprocess.Popen([sys.executable, "-m", "fmmlearn", "demo", "--model", tiny_model_dir, "--output",
                             str(output), *DEMO], env=process_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=like_a_terminal_job)
    models = output / "cache" / "models"
    while not any(models.glob("*/manifest.json")) and demo.poll() is None:  # the first fit is stored
        time.sleep(0.2)
    demo.send_signal(signal_number)
    code, _, err = _finished(demo)
    name = signal.Signals(signal_number).name
    assert code == status
    assert err.strip().splitlines()[-1] == (f"error: interrupted by {name}; the finished work is kept in "
                                            f"{output / 'cache'}: run the same command again to resume")
    assert "Traceback" not in err and any(models.glob("*/manifest.json")) and _leftovers(output / "cache") == []


def test_a_signal_stops_the_reproduction_with_one_line_and_the_shells_status(tiny_model_dir, tmp_path):
    script = TESTS.parent / "benchmarks" / "reproduce.py"
    run = subprocess.Popen([sys.executable, str(script), "--quick", "--model", tiny_model_dir, "--datasets", "tweets",
                            "--seeds", "0", "--epochs", "1", "--device", "cpu", "--precision", "fp32", "--measures",
                            "rand", "inp-grad-sign", "--n-bootstrap", "100", "--n-baseline", "1", "--output",
                            str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "-v", "0"],
                           env=process_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=like_a_terminal_job)
    models = tmp_path / "cache"
    while not any(models.rglob("models/*/manifest.json")) and run.poll() is None:
        time.sleep(0.2)
    run.send_signal(signal.SIGTERM)
    code, _, err = _finished(run)
    assert code == 143 and err.strip().splitlines()[-1].startswith("error: interrupted by SIGTERM; the finished work")
    assert any(models.rglob("models/*/manifest.json")) and _leftovers(models) == []


# --------------------------------------------------------------------------- kill -9


def _run_study(model_dir, cache, out, **hooks):
    process = start_study(model_dir, cache, out, **hooks)
    return _finished(process)


def test_kill_9_at_any_point_then_rerunning_gives_the_uninterrupted_frames(tiny_model_dir, tmp_path):
    status, _, err = _run_study(tiny_model_dir, tmp_path / "reference-cache", tmp_path / "reference")
    assert status == 0, err
    reference = load_study(tmp_path / "reference" / "results")

    cache, out = tmp_path / "cache", tmp_path / "out"
    # Each run resumes where the previous one was killed, so every point is reached in its turn.
    for point in ("fit:3", "model:1", "cache:2", "curve:3", "report:1"):
        status, out_text, err = _run_study(tiny_model_dir, cache, out, TINY_STUDY_KILL=point)
        assert status == -signal.SIGKILL and "done" not in out_text, (point, status, err)
    status, out_text, err = _run_study(tiny_model_dir, cache, out)
    assert status == 0 and out_text.strip() == "done", err
    assert_same_results(load_study(out / "results"), reference)
    assert (out / "report.html").read_text(encoding="utf-8").rstrip().endswith("</html>")

"""Two processes on one directory (docs/reliability.md): a study cache is shared safely, an output directory
is held by one run and a second one stops with an error naming it and the holder's pid; never interleaved
files.  Every test starts real processes."""

import subprocess
import sys
import textwrap
import time
import warnings

import pandas as pd
import pytest

from helpers import tiny_study
from helpers.tiny_study import assert_same_results, process_env, start_study
from fmmlearn.cli import main
from fmmlearn.exceptions import CacheWarning, DirectoryInUseError
from fmmlearn.study import load_study

HOLDER = textwrap.dedent("""
    import sys, time
    from fmmlearn.utils._files import directory_lock

    with directory_lock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
        print("releasing", time.time(), flush=True)  # still held: whatever waits for the lock comes after
""")


def hold(directory, seconds) -> subprocess.Popen:
    """Another process holding ``directory``'s lock for ``seconds``; returns once it holds it."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory), str(seconds)], env=process_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked", holder.stderr.read()
    return holder


def test_a_second_demo_on_the_same_output_stops_naming_the_directory_and_the_holders_pid(tiny_model_dir, tmp_path,
                                                                                         capsys):
    output = tmp_path / "demo"
    holder = hold(output, 600)
    try:
        status = main(["demo", "--output", str(output), "--model", tiny_model_dir, "--device", "cpu", "-q"])
        err = capsys.readouterr().err.strip().splitlines()
        assert status == 2 and len(err) == 1
        assert err[0].startswith(f"error: --output {output} is in use by another fmmlearn run (pid {holder.pid} on ")
        assert not (output / "cache").exists()  # the second run wrote nothing
    finally:
        holder.kill()  # kill -9: the operating system releases the lock with the process
        holder.wait()
    from fmmlearn.utils._files import directory_lock

    with directory_lock(output):  # so a dead run's lock never blocks the next one
        pass


def test_a_save_into_a_directory_another_process_is_saving_into_waits_for_it(tmp_path):
    from fmmlearn.study import StudyResult

    target = tmp_path / "results"
    holder = hold(target, 1.0)
    StudyResult(metadata={"run": "second"}, performance=pd.DataFrame({"value": [1.0]})).save(target, format="csv")
    saved_at = time.time()
    released = float(holder.stdout.readline().split()[1])
    holder.wait()
    assert released <= saved_at  # the save began its files only once the other process was done
    assert load_study(target).metadata["run"] == "second"
    with pytest.raises(DirectoryInUseError, match=f"directory {target} is in use"):
        second = hold(target, 30)
        try:
            from fmmlearn.utils._files import directory_lock

            with directory_lock(target):
                pass
        finally:
            second.kill()
            second.wait()


@pytest.mark.slow
def test_two_studies_on_one_cache_share_it_and_agree(tiny_model_dir, tmp_path):
    cache = tmp_path / "cache"
    runs = [start_study(tiny_model_dir, cache, tmp_path / name) for name in ("first", "second")]
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0 and out.strip() == "done", err
    first, second = (load_study(tmp_path / name / "results") for name in ("first", "second"))
    assert_same_results(first, second)
    leftovers = [p for p in cache.rglob("*") if p.name.startswith((".tmp-", ".trash-"))]
    assert leftovers == []
    with warnings.catch_warnings(record=True) as caught:  # every entry either process wrote is whole
        warnings.simplefilter("always")
        again = tiny_study.study(tiny_model_dir, cache).run(*tiny_study.data())
    assert not [w for w in caught if issubclass(w.category, CacheWarning)] and again.timings["cached"].all()
    assert_same_results(load_study(again.save(tmp_path / "again", format="csv")), first)

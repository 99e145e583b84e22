"""How a launched process ends: fmmlearn's exit hook (docs/scaling.md, "Rules that follow").

On a clean exit every process waits for the others at a barrier before the
group is destroyed (so no process tears down while another is still in a
collective); after an uncaught exception there is no barrier, the process
exits at once and the launcher stops the others.  Two gloo processes under
``torchrun``; each records, from an ``atexit`` function registered before
fmmlearn's hook (so it runs after it), when its exit hook was done.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers.launch import free_port

from fmmlearn.distributed import EXIT_BARRIER_TIMEOUT_S

pytestmark = pytest.mark.slow  # each launch starts two Python processes that import fmmlearn

SCRIPT = textwrap.dedent('''
    import atexit, json, os, sys, time
    from pathlib import Path

    out, mode, late_s = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    rank = int(os.environ["RANK"])

    def record(event):
        with open(out / f"rank{rank}.jsonl", "a") as f:
            f.write(json.dumps({"event": event, "time": time.time()}) + "\\n")

    atexit.register(record, "exit-hook-done")  # registered first, so it runs after fmmlearn's hook

    from fmmlearn.distributed import gather_objects, num_processes

    assert num_processes() == 2
    assert gather_objects(rank) == [0, 1]
    if rank == 1:
        time.sleep(late_s)  # the late process
        record("late-process-done")
    if mode == "error" and rank == 0:
        raise RuntimeError("rank 0 fails")
    record("script-end")
''')


def _launch(tmp_path, mode: str, late_s: float):
    (tmp_path / "run.py").write_text(SCRIPT)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
               str(free_port()), str(tmp_path / "run.py"), str(tmp_path), mode, str(late_s)]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    events = []
    for rank in (0, 1):
        path = tmp_path / f"rank{rank}.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        events.append({row["event"]: row["time"] for row in map(json.loads, lines)})
    return done, events


def test_a_clean_exit_waits_for_the_other_process_before_destroying_the_group(tmp_path):
    done, (early, late) = _launch(tmp_path, "clean", late_s=3)
    assert done.returncode == 0, done.stderr[-3000:]
    assert {"script-end", "exit-hook-done"} <= set(early)
    assert {"late-process-done", "script-end", "exit-hook-done"} <= set(late)
    # process 0 finished its script long before process 1 did, but its exit hook waited for it
    assert early["script-end"] < late["late-process-done"] <= early["exit-hook-done"]


def test_an_exit_after_an_uncaught_exception_does_not_wait_for_the_other_process(tmp_path):
    # shorter than the exit barrier's timeout: a hook that waited would let the late process finish
    late_s = EXIT_BARRIER_TIMEOUT_S / 3
    done, (failing, late) = _launch(tmp_path, "error", late_s=late_s)
    assert done.returncode != 0
    assert "rank 0 fails" in done.stderr
    assert "exit-hook-done" in failing and "script-end" not in failing
    # the failing process left at once: the launcher stopped the late one in its sleep
    assert "late-process-done" not in late

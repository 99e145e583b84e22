"""Lost workers (docs/reliability.md): a Dask worker killed in the middle of a grid search or of a study's
fits is replaced and its task retried, and the result equals the single-process one; a launched process
that dies stops the others with an error instead of leaving them waiting."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import joblib
import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

distributed = pytest.importorskip("distributed", reason="the distributed extra is part of the test extra")

from helpers.data import make_sentiment
from helpers.launch import free_port
from helpers.models import one_thread

from fmmlearn import FaithfulTextClassifier
from fmmlearn.study import FaithfulnessStudy

pytestmark = pytest.mark.slow  # worker processes with torch, killed and restarted

# Enough steps for the tiny model to learn 32 texts (tests/integration/test_dask.py): equal scores of models that learned.
CLASSIFIER = dict(max_epochs=12, batch_size=4, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32", device="cpu",
                  random_state=0, validation_fraction=0.0)


@pytest.fixture
def client():
    """Two worker processes under nannies (which restart a worker that dies), one thread each."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        yield client


class WorkerKiller(threading.Thread):
    """Sends ``kill -9`` to the first worker process seen running a task, once."""

    def __init__(self, client):
        super().__init__(daemon=True)
        self.client, self.killed = client, None
        self.pids = client.run(os.getpid)  # worker address -> pid
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            busy = [address for address, tasks in self.client.processing().items() if tasks]
            if busy:
                self.killed = self.pids[busy[0]]
                os.kill(self.killed, signal.SIGKILL)
                return
            time.sleep(0.05)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join()


def test_a_grid_search_whose_worker_is_killed_equals_the_single_process_search(client, tiny_model_dir):
    X, y = make_sentiment(64, seed=6)
    clf = FaithfulTextClassifier(model=tiny_model_dir, **CLASSIFIER)

    def search(n_jobs):
        return GridSearchCV(clf, {"max_masking_ratio": [0.0, 1.0]}, scoring="accuracy", refit=False, cv=2,
                            n_jobs=n_jobs).fit(X, y)

    with one_thread():
        local = search(1)
        with joblib.parallel_backend("dask"), WorkerKiller(client) as killer:
            remote = search(-1)
    assert killer.killed is not None and killer.killed not in client.run(os.getpid).values()  # it was replaced
    assert local.cv_results_["mean_test_score"].max() > 0.6  # models that learned, not two constant ones
    for key in ("split0_test_score", "split1_test_score", "mean_test_score"):
        np.testing.assert_array_equal(remote.cv_results_[key], local.cv_results_[key], err_msg=key)


def test_a_study_whose_fitting_worker_is_killed_equals_the_single_process_study(client, tiny_model_dir, tmp_path):
    X, y = make_sentiment(80, seed=7)

    def study(cache):
        return FaithfulnessStudy(tiny_model_dir, masking_ratios=(0.0, 1.0), methods=("rand", "inp-grad-sign"),
                                 seeds=(0,), in_distribution=None, erasure=None, n_explain=0, n_bootstrap=100,
                                 classifier_params={k: v for k, v in CLASSIFIER.items()
                                                    if k not in ("device", "random_state", "validation_fraction")},
                                 device="cpu", cache_dir=cache, verbose=0)

    with one_thread():
        local = study(tmp_path / "local").run(X, y)
        with joblib.parallel_backend("dask"), WorkerKiller(client) as killer:
            remote = study(tmp_path / "remote").run(X, y)
    assert killer.killed is not None and killer.killed not in client.run(os.getpid).values()
    assert not remote.timings.loc[remote.timings["stage"] == "fit", "cached"].any()  # fitted by the workers
    assert local.performance["value"].max() > 0.6  # models that learned
    assert remote.performance.drop(columns=["fit_seconds"]).equals(local.performance.drop(columns=["fit_seconds"]))
    assert remote.curves.equals(local.curves) and remote.racu.equals(local.racu)
    leftovers = [p for p in (tmp_path / "remote").rglob(".tmp-*")]
    assert all(p.parent.name == "models" for p in leftovers)  # at most the killed worker's half-written copy


DYING = textwrap.dedent('''
    import os, signal, sys

    from fmmlearn.distributed import gather_objects, num_processes

    rank = int(os.environ["RANK"])
    assert num_processes() == 2
    gather_objects(rank)  # both processes are up and connected
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # dies without a word, as an out-of-memory kill does
    for step in range(1000):  # the survivor keeps exchanging results with its dead peer
        gather_objects(step)
    print("the survivor finished without its peer", flush=True)
''')


def test_a_launched_process_that_dies_stops_the_other_with_an_error(tmp_path):
    (tmp_path / "run.py").write_text(DYING)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
               str(free_port()), str(tmp_path / "run.py")]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)  # no hang
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "the survivor finished" not in output
    assert "Signal 9 (SIGKILL) received by PID" in output and "rank" in output  # the launcher names the dead one

"""Model selection and the study's fits on a Dask cluster reproduce the local run (docs/scaling.md).

One ``LocalCluster`` of two worker processes (one thread each) serves every
test.  torch's reductions depend on the thread count, so the local reference
runs on one thread too; then the results are identical, not just close.
"""

import pickle

import joblib
import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

distributed = pytest.importorskip("distributed", reason="the distributed extra is part of the test extra")

from helpers.data import make_sentiment
from helpers.models import one_thread

from fmmlearn import FaithfulTextClassifier, make_faithfulness_scorer
from fmmlearn.study import FaithfulnessStudy

pytestmark = pytest.mark.slow  # starting two worker processes with torch takes 20-40 s here

CLASSIFIER = dict(max_epochs=2, batch_size=8, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32", device="cpu",
                  random_state=0)
# Enough steps for the tiny model to learn 32 texts per fold (RACU is undefined for a constant model).
LEARNING = dict(CLASSIFIER, max_epochs=12, batch_size=4, validation_fraction=0.0)
# A fixed internal batch size: by default a per-process timing probe sizes the forward passes.
LOO = {"internal_batch_size": 16}


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        yield client


def _search(clf, scoring, X, y, n_jobs):
    search = GridSearchCV(clf, {"max_masking_ratio": [0.0, 1.0]}, scoring=scoring, refit=False, cv=2,
                          n_jobs=n_jobs)  # no refit: it runs in this process either way
    return search.fit(X, y)


def test_grid_search_with_the_faithfulness_scorer_on_dask_reproduces_n_jobs_1(client, tiny_model_dir):
    X, y = make_sentiment(64, seed=6)
    clf = FaithfulTextClassifier(model=tiny_model_dir, **LEARNING)
    scoring = {"accuracy": "accuracy", "faithfulness": make_faithfulness_scorer(method="loo-sign", **LOO)}
    # what every task carries: parameters (the model by its path; each worker loads it), not weights
    assert len(pickle.dumps(clf)) < 4_000 and len(pickle.dumps(scoring)) < 4_000
    with one_thread():
        local = _search(clf, scoring, X, y, n_jobs=1)
        with distributed.get_task_stream(client) as tasks, joblib.parallel_backend("dask"):
            remote = _search(clf, scoring, X, y, n_jobs=-1)
    assert len(tasks.data) >= 4  # 2 candidates x 2 folds ran on the workers
    keys = [k for k in local.cv_results_ if k.startswith(("split", "mean_test", "rank_test", "param_"))]
    assert np.isfinite(local.cv_results_["mean_test_faithfulness"]).all()
    for key in keys:
        np.testing.assert_array_equal(remote.cv_results_[key], local.cv_results_[key], err_msg=key)


def _study(tiny_model_dir, cache_dir):
    return FaithfulnessStudy(tiny_model_dir, masking_ratios=(0.0, 1.0), methods=("rand", "loo-sign"), seeds=(0,),
                             method_params={"loo-sign": LOO}, in_distribution=None, n_explain=0, n_bootstrap=100,
                             classifier_params={k: v for k, v in CLASSIFIER.items()
                                                if k not in ("device", "random_state")},
                             device="cpu", cache_dir=cache_dir, verbose=0)


def test_the_studys_fits_run_as_dask_tasks_with_the_local_results(client, tiny_model_dir, tmp_path):
    X, y = make_sentiment(80, seed=7)
    with one_thread():
        local = _study(tiny_model_dir, tmp_path / "local").run(X, y)
        with distributed.get_task_stream(client) as tasks, joblib.parallel_backend("dask"):
            remote = _study(tiny_model_dir, tmp_path / "remote").run(X, y)
    assert len(tasks.data) >= 2  # the two (masking ratio, seed) fits
    fits = remote.timings[remote.timings["stage"] == "fit"]
    assert len(fits) == 2 and not fits["cached"].any()  # fitted by the workers in this run, not found in a cache
    assert sorted(p.name for p in (tmp_path / "remote" / "models").iterdir()) == \
        sorted(p.name for p in (tmp_path / "local" / "models").iterdir())  # the same fit keys
    timing = ["fit_seconds"]
    assert remote.performance.drop(columns=timing).equals(local.performance.drop(columns=timing))
    assert remote.racu.equals(local.racu)
    assert remote.curves.equals(local.curves)


@pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.DegenerateModelWarning")  # tiny model, 3 epochs of tweets
def test_demo_sends_its_fits_to_the_dask_scheduler(client, tiny_model_dir, tmp_path):
    from fmmlearn.cli import main
    from fmmlearn.study import StudyResult

    output = tmp_path / "demo"
    with distributed.get_task_stream(client) as tasks:
        assert main(["demo", "--quick", "--output", str(output), "--model", tiny_model_dir, "--device", "cpu",
                     "--measures", "rand", "inp-grad-sign", "--n-train", "60", "--n-test", "20", "--quiet",
                     "--dask-scheduler", client.scheduler.address]) == 0
    assert len(tasks.data) >= 2
    result = StudyResult.load(output / "results")
    assert not result.timings.loc[result.timings["stage"] == "fit", "cached"].any()

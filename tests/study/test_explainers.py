"""Explainer values in the study (docs/explainers.md): the same tables and verdicts, cost per text, a stable cache."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.data import make_sentiment
from helpers.explainers import earliest_first

from fmmlearn.study import FaithfulnessStudy

captum_attr = pytest.importorskip("captum.attr")
pytestmark = pytest.mark.filterwarnings("ignore:The level-3 fold has only:UserWarning")

TINY_FIT = dict(max_epochs=10, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32")
SETTINGS = dict(masking_ratios=(1.0,), seeds=(0,), n_train=100, n_valid=30, n_test=20, erasure=None,
                classifier_params=TINY_FIT, device="cpu", n_random=1, n_bootstrap=199, n_explain=0, verbose=0)
NAME = "helpers.explainers.earliest_first"


@pytest.fixture(scope="module")
def study_run(tiny_model_dir, tmp_path_factory):
    cache = tmp_path_factory.mktemp("explainer-study")
    study = FaithfulnessStudy(tiny_model_dir, methods=["loo-sign", captum_attr.Occlusion, earliest_first],
                              cache_dir=cache, **SETTINGS)
    return study.run(*make_sentiment(160, seed=0)), cache


def test_explainers_are_rows_of_the_same_tables(study_run):
    result, _ = study_run
    summary = result.racu_summary.set_index("method")
    assert {"loo-sign", "Occlusion", NAME} <= set(summary.index)
    # Occlusion with the mask token as baseline is leave-one-out: the same curve on the same (costly) texts
    for column in ("acu", "racu", "racu_low", "racu_high"):
        assert summary.loc["Occlusion", column] == summary.loc["loo-sign", column]
    assert np.isfinite(summary.loc["loo-sign", "acu"])
    assert summary.loc["Occlusion", "subset"] == summary.loc["loo-sign", "subset"]
    assert not summary.loc[NAME, "signed"]  # inferred: every score positive
    assert {"Occlusion", NAME} <= set(result.curves["method"])
    assert "Occlusion" in result.to_html() and NAME in result.summary() + result.to_html()


def test_the_cost_per_text_of_every_measure_is_reported(study_run):
    result, _ = study_run
    costs = result.costs().set_index("method")
    assert {"rand", "loo-sign", "Occlusion", NAME} <= set(costs.index)
    assert (costs["seconds_per_text"] > 0).all() and (costs.loc["loo-sign", "n_texts"] > 0)
    assert "s / text" in result.to_html()


def test_the_cache_key_of_an_explainer_is_stable_across_processes(study_run, tiny_model_dir):
    _, cache = study_run
    script = f"""
import json, sys
sys.path.insert(0, {str(Path(__file__).parents[1])!r})
from captum.attr import Occlusion
from helpers.data import make_sentiment
from helpers.explainers import earliest_first
from fmmlearn.study import FaithfulnessStudy
study = FaithfulnessStudy({tiny_model_dir!r}, methods=["loo-sign", Occlusion, earliest_first],
                          cache_dir={str(cache)!r}, **{SETTINGS!r})
result = study.run(*make_sentiment(160, seed=0))
jobs = result.timings[result.timings["stage"] == "faithfulness"]
print(json.dumps(jobs[["method", "cached"]].astype(str).values.tolist()))
"""
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    jobs = json.loads(out.stdout.strip().splitlines()[-1])
    assert {m for m, _ in jobs} >= {"Occlusion", NAME}
    assert all(cached == "True" for _, cached in jobs), jobs

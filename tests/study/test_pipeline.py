"""The study as a pipeline of stages: a stage defined here, outside fmmlearn, runs, caches, resumes and reports."""

import numpy as np
import pandas as pd
import pytest

from helpers.data import make_sentiment
from fmmlearn import FaithfulTextClassifier
from fmmlearn.study import STAGES, FaithfulnessStudy, Job, Stage, StudySettings, load_study, model_label
from fmmlearn.study._data import load_splits

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TINY_FIT = dict(max_epochs=2, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32")


class TokenCounts(Stage):
    """How many tokens the test texts of each model have, and how many of those it can mask.

    A stage of this test module only: fmmlearn knows nothing about it.
    """

    name = "token counts"
    requires = ("settings", "splits", "models", "fit_keys", "gold")
    provides = ("token_counts",)
    frames = ("token_counts",)
    calls = []  # (run, first text) of every compute, across instances: cache hits add nothing
    interrupt_at = None  # a run whose compute raises KeyboardInterrupt (a user pressing Ctrl-C)

    def jobs(self, context):
        sp = context["splits"]
        return [Job(run, ("tokens", len(sp.y_test)), n_examples=len(sp.y_test), label=model_label(run[0]))
                for run in context["settings"].runs]

    def compute(self, clf, job, context):
        if job.run == TokenCounts.interrupt_at:
            raise KeyboardInterrupt
        TokenCounts.calls.append(job.run)
        encoding = clf.encode(context["splits"].X_test)
        return {"lengths": encoding.lengths.astype(np.int64)}

    def finish(self, context, results):
        rows = [{"model": model_label(job.run[0]), "seed": job.run[1],
                 "mean_tokens": float(payload["lengths"].mean()), "texts": len(payload["lengths"])}
                for job, payload in results.items()]
        return {"token_counts": pd.DataFrame(rows)}


def _study(model_dir, cache, **options):
    settings = dict(masking_ratios=(0.0, 1.0), methods=["rand", "inp-grad-sign"], seeds=(0,), n_train=60,
                    n_valid=20, n_test=16, n_random=1, n_bootstrap=100, in_distribution=None, erasure=None,
                    n_explain=0, classifier_params=TINY_FIT, device="cpu", verbose=0, cache_dir=cache)
    return FaithfulnessStudy(model_dir, **{**settings, **options})


@pytest.fixture(scope="module")
def data():
    return make_sentiment(120, seed=5)


@pytest.fixture
def fresh_calls():
    TokenCounts.calls, TokenCounts.interrupt_at = [], None
    yield TokenCounts.calls
    TokenCounts.interrupt_at = None


def test_a_stage_defined_outside_fmmlearn_runs_and_its_frame_is_in_the_result(tiny_model_dir, data, tmp_path,
                                                                                fresh_calls):
    result = _study(tiny_model_dir, tmp_path / "cache", stages=[*STAGES, TokenCounts()]).run(*data)
    frame = result.token_counts
    assert frame is result.frames["token_counts"]
    assert list(frame["model"]) == ["plain", "masked"] and (frame["texts"] == 16).all()
    # the numbers are the stage's: the token counts of the test texts, computed independently here
    run = result.metadata["runs"][1]
    clf = FaithfulTextClassifier.load(tmp_path / "cache" / "models" / run["fit_key"] / "model", device="cpu")
    test = load_splits(*data, n_train=60, n_valid=20, n_test=16, random_state=0).X_test
    assert frame["mean_tokens"].iloc[1] == pytest.approx(clf.encode(test).lengths.mean())
    assert len(fresh_calls) == 2
    assert result.metadata["frames"][-2:] == ["token_counts", "timings"]
    assert [s["stage"] for s in result.metadata["pipeline"]][-1] == "token counts"


def test_a_rerun_serves_the_added_stage_from_the_cache(tiny_model_dir, data, tmp_path, fresh_calls):
    first = _study(tiny_model_dir, tmp_path / "cache", stages=[*STAGES, TokenCounts()]).run(*data)
    again = _study(tiny_model_dir, tmp_path / "cache", stages=[*STAGES, TokenCounts()]).run(*data)
    assert len(fresh_calls) == 2  # nothing computed the second time
    rows = again.timings[again.timings["stage"] == "token counts"]
    assert len(rows) == 2 and rows["cached"].all()
    pd.testing.assert_frame_equal(first.token_counts, again.token_counts)


def test_an_interrupted_stage_resumes_where_it_stopped(tiny_model_dir, data, tmp_path, fresh_calls):
    whole = _study(tiny_model_dir, tmp_path / "whole", stages=[*STAGES, TokenCounts()]).run(*data)
    fresh_calls.clear()
    TokenCounts.interrupt_at = (1.0, 0)  # Ctrl-C during the second model's job
    with pytest.raises(KeyboardInterrupt):
        _study(tiny_model_dir, tmp_path / "cache", stages=[*STAGES, TokenCounts()]).run(*data)
    assert fresh_calls == [(0.0, 0)]
    TokenCounts.interrupt_at = None
    resumed = _study(tiny_model_dir, tmp_path / "cache", stages=[*STAGES, TokenCounts()]).run(*data)
    assert fresh_calls == [(0.0, 0), (1.0, 0)]  # only the job that did not finish ran again
    rows = resumed.timings[resumed.timings["stage"] == "token counts"]
    assert rows["cached"].tolist() == [True, False]
    for name in ("token_counts", "curves", "racu", "outcomes"):
        pd.testing.assert_frame_equal(resumed.frames[name], whole.frames[name], check_exact=True, obj=name)
    pd.testing.assert_frame_equal(resumed.performance.drop(columns="fit_seconds"),
                                  whole.performance.drop(columns="fit_seconds"), check_exact=True)


def test_the_added_stage_has_a_report_section_and_survives_save_and_load(tiny_model_dir, data, tmp_path, fresh_calls):
    result = _study(tiny_model_dir, tmp_path / "cache", stages=[*STAGES, TokenCounts()]).run(*data)
    page = result.to_html()
    assert "<h2>token counts</h2>" in page
    assert "How many tokens the test texts of each model have" in page
    assert "mean_tokens" in page and f"{result.token_counts['mean_tokens'].iloc[0]:.3f}" in page
    loaded = load_study(result.save(tmp_path / "saved"))
    pd.testing.assert_frame_equal(loaded.token_counts, result.token_counts)
    assert "<h2>token counts</h2>" in loaded.to_html()


def test_the_built_in_stages_are_the_run_order_and_declare_their_data():
    names = [stage.name for stage in STAGES]
    assert names == ["fit", "performance", "random masking", "faithfulness", "calibration", "in-distribution",
                     "erasure", "explanations", "comparisons"]
    available = {"settings", "splits"}
    for stage in STAGES:  # every stage reads only what the context or an earlier stage provides
        assert set(stage.requires) <= available, stage.name
        assert set(stage.frames) <= set(stage.provides)
        available |= set(stage.provides)


def test_a_stage_before_the_stage_it_needs_fails_before_any_fit(tiny_model_dir, data, tmp_path, count_fits):
    with pytest.raises(ValueError, match=r"stages: stage 'token counts' requires \['gold'\], which no earlier"):
        _study(tiny_model_dir, tmp_path, stages=[STAGES[0], TokenCounts(), *STAGES[1:]]).run(*data)
    assert count_fits == []


@pytest.mark.parametrize("stages, message", [
    ([STAGES[0], STAGES[0]], "a name of its own"),
    (["fit"], "Stage instance"),
    ([*STAGES, type("Bad", (Stage,), {"name": "bad", "provides": ("gold",)})()], r"provides \['gold'\]"),
])
def test_bad_stage_lists_are_errors_naming_stages(tiny_model_dir, data, tmp_path, stages, message, count_fits):
    with pytest.raises(ValueError, match=message):
        _study(tiny_model_dir, tmp_path, stages=stages).run(*data)
    assert count_fits == []


def test_a_stage_that_does_not_provide_what_it_declares_is_an_error(tiny_model_dir, data, tmp_path):
    class Forgetful(Stage):
        name, requires, provides = "forgetful", ("settings",), ("something",)

    with pytest.raises(ValueError, match=r"'forgetful' declares provides=\['something'\] but returned \[\]"):
        _study(tiny_model_dir, tmp_path, stages=[*STAGES, Forgetful()]).run(*data)


def test_settings_are_frozen():
    import dataclasses

    fields = {f.name for f in dataclasses.fields(StudySettings)}
    assert {"masking_ratios", "seeds", "measures", "grid", "metric", "erasure", "n_bootstrap"} <= fields
    settings = StudySettings(**{name: None for name in fields})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.seeds = (1,)


@pytest.fixture
def count_fits(monkeypatch):
    calls = []
    original = FaithfulTextClassifier.fit

    def counting(self, *args, **kwargs):
        calls.append(self.max_masking_ratio)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FaithfulTextClassifier, "fit", counting)
    return calls

"""Reduced precision judged against the statistics: the probe keeps bf16 only where no verdict could flip."""

import pandas as pd
import pytest

TINY_FIT = dict(max_epochs=10, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32")


@pytest.fixture(scope="module")
def budget_data():
    from helpers.data import make_sentiment

    return make_sentiment(200, seed=11)


def _probe_study(model_dir, cache, **options):
    from fmmlearn.study import FaithfulnessStudy

    fit = {**TINY_FIT, "precision": "auto"}
    settings = dict(masking_ratios=(0.0, 1.0), methods=["rand", "inp-grad-sign", "loo-sign"], seeds=(0,),
                    n_train=100, n_valid=30, n_test=40, n_random=1, n_bootstrap=200, in_distribution=None,
                    erasure=None, n_explain=0, costly_examples=20, classifier_params=fit, device="cpu", verbose=0,
                    cache_dir=cache, precision_probe=True)
    return FaithfulnessStudy(model_dir, **{**settings, **options})


@pytest.fixture
def bf16_is_faster(monkeypatch):
    """This machine, as the study sees it, runs bf16 faster than fp32 (the probe's precondition)."""
    import fmmlearn.study.stages.performance as performance

    monkeypatch.setattr(performance, "_precision_name", lambda dtype: "bf16")


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("tolerance, accepted", [(float("inf"), True), (0.0, False)])
def test_the_probe_keeps_reduced_precision_only_within_a_tenth_of_the_half_width(
        tiny_model_dir, budget_data, tmp_path, monkeypatch, bf16_is_faster, tolerance, accepted):
    import fmmlearn.study._precision as probe_module

    monkeypatch.setattr(probe_module, "PROBE_TOLERANCE", tolerance)
    result = _probe_study(tiny_model_dir, tmp_path).run(*budget_data)
    probe = result.precision_probe
    assert set(probe["method"]) == {"loo-sign", "inp-grad-sign"} and len(probe) == 4   # every measure, per model
    loo = probe[probe["method"] == "loo-sign"]
    assert (loo["n_probe"] == 10).all() and (loo["n_planned"] == 20).all()      # max(10, 20 % of 20) texts
    assert probe["accepted"].eq(accepted).all()
    assert result.metadata["rounds"]["precision"]["loo-sign"] == ("bf16" if accepted else "fp32")
    jobs = result.timings.query("stage == 'faithfulness' and method == 'loo-sign'")
    assert (jobs["precision"] == "bf16").sum() == 2 * (2 if accepted else 1)  # the probe, then the rest
    # the probe texts keep their fp32 results: they equal an all-fp32 study's on the same texts
    exact = _probe_study(tiny_model_dir, tmp_path / "fp32",
                         classifier_params={**TINY_FIT, "precision": "fp32"}).run(*budget_data)
    assert exact.precision_probe.empty
    from types import SimpleNamespace

    from fmmlearn.study.stages.performance import subset_order

    probe_texts = subset_order(SimpleNamespace(random_state=0), 40)[:10].tolist()
    on = lambda r: r.outcomes.query("method == 'loo-sign'").set_index(["model", "ratio", "example"])[  # noqa: E731
        "gold_proba"].sort_index()
    ours, theirs = on(result), on(exact)
    chosen = ours.index.get_level_values("example").isin(probe_texts)
    pd.testing.assert_series_equal(ours[chosen], theirs[chosen])
    if not accepted:  # everything in fp32 after a rejected probe: the whole curve equals the fp32 study's
        pd.testing.assert_series_equal(ours, theirs)


def test_a_verdict_that_could_flip_sends_its_measure_back_to_fp32():
    from fmmlearn.study._precision import sensitive_measures

    probe = pd.DataFrame({"method": ["loo-sign", "loo-sign", "int-grad-sign"], "acu_change": [0.004, 0.01, 0.02]})
    comparisons = pd.DataFrame([
        # 0.045 + 0.01 crosses the margin 0.05: equivalent could become inconclusive
        {"kind": "measures", "first": "loo-sign", "second": "grad-l2", "ci_low": -0.02, "ci_high": 0.045,
         "margin": 0.05, "verdict": "equivalent"},
        # far from every threshold
        {"kind": "measures", "first": "int-grad-sign", "second": "grad-l2", "ci_low": 0.2, "ci_high": 0.3,
         "margin": 0.05, "verdict": "first ahead"},
    ])
    assert sensitive_measures(comparisons, probe, {"loo-sign": "bf16", "int-grad-sign": "bf16"}) == ["loo-sign"]
    assert sensitive_measures(comparisons, probe, {"loo-sign": None, "int-grad-sign": "bf16"}) == []

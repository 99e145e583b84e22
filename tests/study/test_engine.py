"""The faithfulness study engine (fmmlearn.study) and ``fmmlearn demo``, end to end on the tiny model."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from helpers.data import make_sentiment
from fmmlearn import FaithfulTextClassifier
from fmmlearn.faithfulness import acu, faithfulness_curve, racu, random_masking_curve
from fmmlearn.study import FRAMES, FaithfulnessStudy, load_study
from fmmlearn.study._data import load_splits
from fmmlearn.faithfulness import area_statistics as area_metrics
from fmmlearn.metrics import vectorized_metric as score_function
from fmmlearn.study._stats import example_ci
from fmmlearn.study._tables import most_faithful_rows as _most_faithful_rows
from fmmlearn.study.stages.faithfulness import rand_draw_seed
from fmmlearn.ood import DEFAULT_DETECTOR

# The toy validation split is small: MaSF says its p-values cannot go below 0.09 (expected here).
pytestmark = pytest.mark.filterwarnings("ignore:The level-3 fold has only:UserWarning")

RATIOS = [k / 10 for k in range(11)]
MEASURES = ["rand", "inp-grad-sign", "loo-sign", "beam-sign-2"]
CAPS = {"loo-sign": 20, "beam-sign-2": 8}
TINY_FIT = dict(max_epochs=10, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32")


@pytest.fixture(scope="module")
def toy_data():
    return make_sentiment(200, seed=0)


def tiny_study(model_dir, cache_dir, **options):
    settings = dict(methods=MEASURES, seeds=(0, 1), n_train=100, n_valid=30, n_test=40, max_examples=CAPS,
                    classifier_params=TINY_FIT, device="cpu", cache_dir=cache_dir, n_random=2, n_bootstrap=999,
                    verbose=0)
    return FaithfulnessStudy(model_dir, **{**settings, **options})


@pytest.fixture
def count_fits(monkeypatch):
    """The number of ``FaithfulTextClassifier.fit`` calls made while the test runs."""
    calls = []
    original = FaithfulTextClassifier.fit

    def counting(self, *args, **kwargs):
        calls.append(self.max_masking_ratio)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FaithfulTextClassifier, "fit", counting)
    return calls


@pytest.fixture(scope="module")
def study_run(tiny_model_dir, toy_data, tmp_path_factory):
    """Plain and masked tiny models, 2 seeds each, on toy data; the cache is kept for reruns."""
    cache = tmp_path_factory.mktemp("study-cache")
    result = tiny_study(tiny_model_dir, cache).run(*toy_data)
    return result, cache


def fitted_model(result, cache, model, seed):
    run = next(r for r in result.metadata["runs"] if r["model"] == model and r["seed"] == seed)
    return FaithfulTextClassifier.load(cache / "models" / run["fit_key"] / "model", device="cpu")


# --------------------------------------------------------------------------- frames


def test_every_frame_has_the_expected_rows_and_columns(study_run):
    result, _ = study_run
    assert set(FRAMES) <= set(vars(result))
    perf = result.performance
    assert len(perf) == 4 and set(zip(perf["model"], perf["seed"])) == {(m, s) for m in ("plain", "masked")
                                                                        for s in (0, 1)}
    assert {"metric", "value", "low", "high", "n_examples", "converged", "epochs", "fit_seconds"} <= set(perf.columns)
    assert (perf["n_examples"] == 40).all() and perf["converged"].all()

    curves = result.curves
    per_run = curves.groupby(["model", "seed"]).size()
    # random masking (11) + rand on each of the 3 subsets (33) + 3 measures (33)
    assert (per_run == 77).all() and len(per_run) == 4
    assert sorted(curves["ratio"].unique()) == pytest.approx(RATIOS)
    subsets = curves.drop_duplicates(["method", "subset"]).set_index("method")["subset"]
    assert subsets["inp-grad-sign"] == "all" and subsets["loo-sign"] == "random 20"
    # beam search takes the same nested random subset as every capped measure: compared on shared texts
    assert subsets["beam-sign-2"] == "random 8" and subsets["random-masking"] == "all"
    rand_subsets = set(curves.loc[curves["method"] == "rand", "subset"])
    assert rand_subsets == {"all", "random 20", "random 8"}
    n = curves.drop_duplicates(["method", "subset"]).set_index(["method", "subset"])["n_examples"]
    assert n[("loo-sign", "random 20")] == 20 and n[("rand", "random 8")] == 8 and n[("rand", "all")] == 40
    loo = set(result.outcomes.loc[result.outcomes["method"] == "loo-sign", "example"])
    beam = set(result.outcomes.loc[result.outcomes["method"] == "beam-sign-2", "example"])
    assert beam < loo  # nested

    assert len(result.racu) == 12 and set(result.racu["method"]) == set(MEASURES[1:])
    summary = result.racu_summary
    assert len(summary) == 6 and (summary["n_seeds"] == 2).all()
    assert {"racu", "racu_low", "racu_high", "racu_seed_low", "racu_seed_high", "acu", "most_faithful",
            "signed", "baseline_area", "baseline_area_low", "reliable"} <= set(summary.columns)
    assert summary.groupby("model")["most_faithful"].sum().tolist() == [1, 1]

    ood = result.in_distribution
    assert len(ood) == 4 * 11 * 5
    assert {"model", "seed", "ratio", "threshold", "proportion", "simes_p"} <= set(ood.columns)

    outcomes = result.outcomes
    per_run_outcomes = 11 * (2 * 40 + 40 + 20 + 8)  # two rand draws
    assert len(outcomes) == 4 * per_run_outcomes
    assert {"model", "seed", "method", "draw", "ratio", "example", "prediction", "correct",
            "gold_proba"} <= set(outcomes.columns)
    assert sorted(outcomes.loc[outcomes["method"] == "rand", "draw"].unique()) == [0, 1]

    expl = result.explanations
    assert set(expl["model"]) == {"plain", "masked"} and expl["example"].nunique() == 5
    assert expl.groupby("model")["test_index"].apply(lambda s: tuple(sorted(set(s)))).nunique() == 1
    assert result.metadata["explain_method"] in MEASURES[1:3]

    stages = result.timings.groupby("stage").size().to_dict()
    # one MaSF calibration per run, shared by the in-distribution report and the erasure stage (loo-sign,
    # the "auto" measure, and its rand baseline); comparisons need no model work
    assert stages == {"fit": 4, "performance": 4, "random masking": 4, "faithfulness": 4 * (2 + 3),
                      "calibration": 4, "in-distribution": 4, "erasure": 4 * 2, "explanations": 2}
    meta = result.metadata
    assert {"fmmlearn", "torch", "transformers", "scikit-learn"} <= set(meta["machine"]["versions"])
    assert {"avx2", "avx512_bf16", "amx"} <= set(meta["machine"]["cpu"]["flags"]) and meta["machine"]["cpu"]["kind"]
    assert meta["precision"]["measures"]["inp-grad-sign"] == "fp32" and meta["seeds"] == [0, 1]
    assert set(meta["stages"]) == set(stages) and meta["machine"]["torch_threads"] >= 1


def test_the_in_distribution_stage_reports_controls_power_and_a_verdict_per_model(study_run, toy_data):
    """docs/ood.md: the matched control at every inner ratio, the negative and random controls, the power curve."""
    from fmmlearn.ood import fit_detector, hidden_state_features, masked_set_features, masked_test_sets, \
        pvalue_frame, resolve_placeholder
    from fmmlearn.study.stages.in_distribution import CONTROLS

    result, cache = study_run
    controls = result.masf_controls
    assert len(controls) == 4 * 3  # negative, matched, random (no other-domain texts given)
    assert set(controls["control"]) == set(CONTROLS) - {"other domain"}
    matched = controls[controls["control"] == "matched"]
    assert (matched["n_examples"] == 40 * 9).all()  # every test text at the 9 ratios strictly inside (0, 1)
    curves = result.power_curves
    assert curves.groupby(["model", "seed"])["fraction"].apply(list).map(lambda f: f == [0.25, 0.5, 1.0]).all()
    ood = result.in_distribution
    inner = ood["ratio"].between(0.05, 0.95)
    assert ood.loc[inner, "matched_proportion"].notna().all() and ood.loc[~inner, "matched_proportion"].isna().all()
    verdicts = result.in_distribution_verdicts
    assert list(verdicts["model"]) == ["plain", "masked"] and (verdicts["detector"] == DEFAULT_DETECTOR).all()
    assert verdicts["verdict"].isin(["in-distribution", "out of distribution", "inconclusive", "not readable"]).all()
    np.testing.assert_allclose(verdicts["power"], verdicts["matched_share"])  # power: the matched control

    # the matched control's share equals a direct computation with the public functions
    splits = load_splits(*toy_data, n_train=100, n_valid=30, n_test=40, random_state=0)
    clf = fitted_model(result, cache, "masked", 1)
    detector = fit_detector(clf, DEFAULT_DETECTOR, splits.X_valid, X_train=splits.X_train, random_state=1)
    from fmmlearn.utils._random import derive_seed

    encoding, steps = masked_test_sets(clf, splits.X_test, splits.y_test.tolist(), ratios=RATIOS,
                                       random_state=derive_seed(1, 1))
    steps = [(r, ids) for r, ids in steps if 0 < r < 1]
    p = pvalue_frame(detector, masked_set_features(clf, encoding, steps, pooling=detector.pooling,
                                                   placeholder=resolve_placeholder(clf)))
    row = matched[(matched["model"] == "masked") & (matched["seed"] == 1)].iloc[0]
    assert row["flagged"] == pytest.approx(np.mean(p["p"] < 0.05))


def test_curve_examples_score_accuracy_on_every_test_text_and_mask_a_subset(tiny_model_dir, toy_data, tmp_path):
    """Claim 1 needs thousands of test texts at one forward pass each; the masking stages take a subset."""
    from types import SimpleNamespace

    from fmmlearn.study.stages.performance import subset_order

    study = tiny_study(tiny_model_dir, tmp_path, seeds=(0,), n_test=60, curve_examples=20,
                       methods=["rand", "inp-grad-sign", "loo-sign"], max_examples={"loo-sign": 8}, erasure=None)
    result = study.run(*toy_data)
    assert (result.performance["n_examples"] == 60).all()
    curves = result.curves.drop_duplicates(["model", "method", "subset"]).set_index(["model", "method"])
    assert (curves.xs("random-masking", level="method")["n_examples"] == 20).all()
    assert set(curves["subset"]) == {"random 20", "random 8"}
    chosen = set(subset_order(SimpleNamespace(random_state=study.random_state), 60)[:20].tolist())
    measured = result.outcomes.groupby(["model", "method"])["example"].apply(lambda e: set(e.tolist()))
    assert all(measured[(model, "rand")] == chosen for model in ("plain", "masked"))
    assert all(m <= chosen for m in measured)  # every measure on curve texts
    assert (result.in_distribution["n_examples"] == 20).all()
    assert (result.masf_controls.query("control == 'matched'")["n_examples"] == 20 * 9).all()


def test_curve_seeds_measure_the_curves_of_some_seeds_and_the_accuracy_of_all(study_run, tiny_model_dir, toy_data,
                                                                               count_fits):
    """The fits and their accuracy come from the cache of the full study; only seed 0's curves are measured."""
    result, cache = study_run
    one = tiny_study(tiny_model_dir, cache, curve_seeds=[0]).run(*toy_data)
    assert count_fits == []
    assert len(one.performance) == 4 and set(one.racu["seed"]) == {0} and set(one.curves["seed"]) == {0}
    models = one.comparisons.query("kind == 'models'")
    measures = one.comparisons.query("kind == 'measures'")
    assert (models["n_seeds"] == 2).all() and (measures["n_seeds"] == 1).all()
    pd.testing.assert_frame_equal(models.reset_index(drop=True),
                                  result.comparisons.query("kind == 'models'").reset_index(drop=True))
    full = result.racu.query("seed == 0").reset_index(drop=True)
    pd.testing.assert_frame_equal(one.racu.reset_index(drop=True), full)  # seed 0's numbers do not change
    with pytest.raises(ValueError, match="curve_seeds"):
        tiny_study(tiny_model_dir, cache, curve_seeds=[5]).run(*toy_data)


def test_curves_equal_the_public_faithfulness_functions(study_run, toy_data):
    """The per-example route reproduces faithfulness_curve / random_masking_curve / racu exactly."""
    result, cache = study_run
    splits = load_splits(*toy_data, n_train=100, n_valid=30, n_test=40, random_state=0)
    clf = fitted_model(result, cache, "masked", 1)
    rows = result.curves[(result.curves["model"] == "masked") & (result.curves["seed"] == 1)]

    def ours(method, subset):
        return rows[(rows["method"] == method) & (rows["subset"] == subset)].sort_values("ratio")

    draws = [faithfulness_curve(clf, splits.X_test, splits.y_test, method="rand", random_state=rand_draw_seed(1, d))
             for d in range(2)]
    rand = draws[0].assign(value=np.mean([d["value"] for d in draws], axis=0))  # the baseline: mean of the draws
    grad = faithfulness_curve(clf, splits.X_test, splits.y_test, method="inp-grad-sign", random_state=1)
    for public, method in ((rand, "rand"), (grad, "inp-grad-sign")):
        np.testing.assert_allclose(ours(method, "all")["value"], public["value"])
    np.testing.assert_allclose(ours("inp-grad-sign", "all")["mean_masked_fraction"], grad["mean_masked_fraction"])
    first_draw = result.outcomes.query("model == 'masked' and seed == 1 and method == 'rand' and draw == 0")
    np.testing.assert_allclose(first_draw.groupby("ratio")["correct"].mean(), draws[0]["value"])
    random = random_masking_curve(clf, splits.X_test, splits.y_test, random_state=1)
    np.testing.assert_allclose(ours("random-masking", "all")["value"], random["value"])
    row = result.racu[(result.racu["model"] == "masked") & (result.racu["seed"] == 1)
                      & (result.racu["method"] == "inp-grad-sign")].iloc[0]
    assert row["racu"] == pytest.approx(racu(grad, rand)) and row["acu"] == pytest.approx(acu(grad, rand))

    # the loo-sign subset: the public curve on those texts, the rand baseline restricted to them
    idx = result.outcomes.query("model == 'masked' and seed == 1 and method == 'loo-sign' and ratio == 0")["example"]
    X_sub, y_sub = [splits.X_test[i] for i in idx], splits.y_test[idx.to_numpy()]
    loo = faithfulness_curve(clf, X_sub, y_sub, method="loo-sign", random_state=1)
    np.testing.assert_allclose(ours("loo-sign", "random 20")["value"], loo["value"])


def test_confidence_intervals_contain_the_point_estimates(study_run):
    result, _ = study_run
    for frame, columns in ((result.performance, ("value", "low", "high")),
                           (result.racu, ("racu", "racu_low", "racu_high")),
                           (result.racu, ("acu", "acu_low", "acu_high")),
                           (result.racu_summary, ("racu", "racu_low", "racu_high")),
                           (result.racu_summary, ("racu", "racu_seed_low", "racu_seed_high")),
                           (result.racu_summary, ("acu", "acu_low", "acu_high"))):
        point, low, high = (frame[c].to_numpy(dtype=float) for c in columns)
        finite = np.isfinite(point)
        assert finite.any()
        assert np.all(low[finite] <= point[finite] + 1e-12) and np.all(point[finite] <= high[finite] + 1e-12)


def test_summary_means_are_the_means_over_seeds(study_run):
    result, _ = study_run
    per_seed = result.racu.groupby(["model", "method"])["racu"].mean()
    summary = result.racu_summary.set_index(["model", "method"])["racu"]
    np.testing.assert_allclose(summary.sort_index(), per_seed.sort_index())


def test_vectorised_areas_equal_acu_and_racu():
    rng = np.random.default_rng(0)
    grid = np.linspace(0, 1, 11)
    curves, baselines = rng.random((5, 11)), rng.random((5, 11))
    ours_acu, ours_racu, ours_area = area_metrics(curves, baselines, grid=grid)
    for c, b, a, r, m in zip(curves, baselines, ours_acu, ours_racu, ours_area):
        assert a == pytest.approx(acu(c, b)) and r == pytest.approx(racu(c, b))
        assert m == pytest.approx(acu(np.full(11, b[-1]), b))  # the area between the baseline and its end
    assert np.isnan(area_metrics(curves[:1], np.ones((1, 11)), grid=grid)[1][0])  # flat baseline: RACU undefined


def test_most_faithful_is_the_best_acu_that_no_comparison_puts_behind():
    frame = pd.DataFrame({"model": ["a", "a", "a", "b", "b"], "method": ["x", "y", "z", "x", "y"],
                          "racu": [0.9, 0.5, 3.0, 2.0, 0.1], "acu": [0.1, 0.2, 0.3, 0.05, 0.2],
                          "reliable": [True, True, True, True, False]})
    np.testing.assert_array_equal(_most_faithful_rows(frame), [False, False, True, False, True])
    # z has the best ACU on its own texts, but the paired comparison on shared texts puts it behind y
    comparisons = pd.DataFrame({"kind": ["measures"], "model": ["a"], "first": ["y"], "second": ["z"],
                                "estimate": [0.04], "ci_low": [0.01], "ci_high": [0.07], "margin": [0.05],
                                "verdict": ["first ahead"]})
    np.testing.assert_array_equal(_most_faithful_rows(frame, comparisons), [False, True, False, False, True])


def test_example_bootstrap_of_accuracy_matches_a_direct_computation():
    from fmmlearn.metrics import get_metric

    rng = np.random.default_rng(1)
    gold = rng.integers(0, 3, 60)
    pred = np.where(rng.random(60) < 0.7, gold, (gold + 1) % 3)
    score = score_function(get_metric("accuracy"), classes=np.array(["a", "b", "c"]))
    point, low, high = example_ci(score, pred[None], gold, n_resamples=2000)
    assert point == pytest.approx((pred == gold).mean())
    se = np.sqrt(point * (1 - point) / len(gold))  # the normal approximation, for scale only
    assert low < point < high and high - low == pytest.approx(2 * 1.96 * se, rel=0.3)


@pytest.mark.parametrize("name", ["micro_f1", "macro_f1", "matthew"])
def test_vectorised_paper_metrics_equal_the_registry_metrics(name):
    """Resampled curves are scored from per-class counts; they must equal sklearn's metric, absent classes too."""
    from fmmlearn.metrics import get_metric

    rng = np.random.default_rng(2)
    classes = np.array(["a", "b", "c", "d"])  # "d" is never gold
    gold = rng.integers(0, 3, 30)
    pred = rng.integers(0, 4, (2, 5, 30))
    pred[0, 0] = gold  # a perfect row
    ours = score_function(get_metric(name), classes=classes)(pred, gold)
    metric = get_metric(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # sklearn: "y_pred contains classes not in y_true"
        expected = [[metric(classes[gold], classes[p], labels=classes) for p in row] for row in pred]
    np.testing.assert_allclose(ours, expected, atol=1e-12)


# --------------------------------------------------------------------------- caching and resuming


def test_one_more_measure_reuses_every_fit_and_stage(study_run, tiny_model_dir, toy_data, count_fits):
    result, cache = study_run
    more = tiny_study(tiny_model_dir, cache, methods=MEASURES + ["grad-l2"]).run(*toy_data)
    assert count_fits == []
    timings = more.timings
    new = (timings["stage"] == "faithfulness") & (timings["method"] == "grad-l2")
    assert not timings.loc[new, "cached"].any() and new.sum() == 4
    assert timings.loc[~new & (timings["stage"] != "explanations"), "cached"].all()
    pd.testing.assert_frame_equal(more.performance, result.performance)
    old = more.racu_summary[more.racu_summary["method"] != "grad-l2"].reset_index(drop=True)
    pd.testing.assert_frame_equal(old.drop(columns="most_faithful"),
                                  result.racu_summary.drop(columns="most_faithful"))


def test_convergence_threshold_flags_runs_and_leaves_them_out(study_run, tiny_model_dir, toy_data, count_fits):
    result, cache = study_run
    threshold = float(result.performance["value"].min())
    flagged = tiny_study(tiny_model_dir, cache, convergence_threshold=threshold).run(*toy_data)
    assert count_fits == []
    perf = flagged.performance
    np.testing.assert_array_equal(perf["converged"], perf["value"] > threshold)
    dropped = perf[~perf["converged"]]
    assert len(dropped) >= 1
    kept_seeds = perf[perf["converged"]].groupby("model").size()
    n_seeds = flagged.racu_summary.groupby("model")["n_seeds"].first()
    for model in ("plain", "masked"):
        assert n_seeds[model] == kept_seeds.get(model, 0)
    assert not flagged.racu.loc[flagged.racu["seed"].isin(dropped["seed"])
                                & flagged.racu["model"].isin(dropped["model"]), "converged"].any()
    assert "Not counted (left out of every mean)" in flagged.summary()
    assert all(f"<= the threshold {threshold:g}" in r for r in dropped["reason"])


def test_an_interrupted_study_resumes_without_redoing_finished_work(tiny_model_dir, toy_data, tmp_path, monkeypatch,
                                                                   count_fits):
    import fmmlearn.faithfulness as faithfulness

    study = tiny_study(tiny_model_dir, tmp_path, methods=["rand", "inp-grad-sign"], seeds=(0,), max_examples=None)
    original_fit = FaithfulTextClassifier.fit  # the counting wrapper

    def fit_then_interrupt(self, *args, **kwargs):
        if len(count_fits) == 1:
            raise KeyboardInterrupt  # Ctrl-C during the second fit
        return original_fit(self, *args, **kwargs)

    monkeypatch.setattr(FaithfulTextClassifier, "fit", fit_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        study.run(*toy_data)
    models = sorted(p.name for p in (tmp_path / "models").iterdir())
    assert len(models) == 1 and not models[0].startswith(".tmp")  # one complete model, no half-written one

    monkeypatch.setattr(FaithfulTextClassifier, "fit", original_fit)
    original_masking = faithfulness.iter_explainer_masking

    def masking_then_interrupt(clf, encoding, target, *, method, **kwargs):
        if method == "inp-grad-sign":
            raise KeyboardInterrupt  # Ctrl-C in the middle of the faithfulness stage
        return original_masking(clf, encoding, target, method=method, **kwargs)

    monkeypatch.setattr(faithfulness, "iter_explainer_masking", masking_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        study.run(*toy_data)
    assert len(count_fits) == 2  # only the model that was missing

    monkeypatch.setattr(faithfulness, "iter_explainer_masking", original_masking)
    result = study.run(*toy_data)
    assert len(count_fits) == 2
    cached = result.timings.set_index(["stage", "model", "method"])["cached"]
    assert cached[("fit", "plain", None)] and cached[("fit", "masked", None)]
    assert cached[("performance", "plain", None)] and cached[("random masking", "masked", "random-masking")]
    assert cached[("faithfulness", "plain", "rand")].all()  # both baseline draws
    assert not cached[("faithfulness", "plain", "inp-grad-sign")] and not cached[("in-distribution", "plain", "rand")]
    assert not any(p.name.startswith(".") for p in (tmp_path / "models").iterdir())


def test_verbose_shows_one_bar_per_stage_and_zero_is_silent(study_run, tiny_model_dir, toy_data, capfd):
    _, cache = study_run
    tiny_study(tiny_model_dir, cache, verbose=0).run(*toy_data)
    assert capfd.readouterr().err == ""
    tiny_study(tiny_model_dir, cache, verbose=1).run(*toy_data)
    err = capfd.readouterr().err
    for stage in ("fit", "performance", "random masking", "faithfulness", "in-distribution", "erasure",
                  "explanations"):
        assert f"{stage}: 100%" in err


# --------------------------------------------------------------------------- erasure metrics

ERASURE_K = (0.2, 0.5)  # the toy texts have 4-9 tokens: 10 % would select none


def erasure_study(model_dir, cache_dir, **options):
    """One seed, a validation split large enough for MaSF to flag at p < 0.05 (a level-3 fold of 20)."""
    settings = dict(methods=["rand", "loo-sign"], seeds=(0,), n_valid=60, max_examples={"loo-sign": 20},
                    n_random=1, n_explain=0, erasure_k=ERASURE_K)
    return tiny_study(model_dir, cache_dir, **{**settings, **options})


@pytest.fixture(scope="module")
def erasure_run(tiny_model_dir, toy_data, tmp_path_factory):
    cache = tmp_path_factory.mktemp("erasure-cache")
    return erasure_study(tiny_model_dir, cache).run(*toy_data), cache


def test_erasure_frame_has_a_row_per_model_measure_mode_and_k(erasure_run):
    from fmmlearn.study.stages.erasure import ERASURE_COLUMNS

    result, _ = erasure_run
    frame = result.erasure
    assert tuple(frame.columns) == ERASURE_COLUMNS
    # 2 models x (loo-sign + its rand baseline) x 2 modes x (2 k + the AOPC row)
    assert len(frame) == 2 * 2 * 2 * 3
    assert frame.groupby(["model", "method", "mode"]).size().eq(3).all()
    assert set(frame["method"]) == {"loo-sign", "rand"} and set(frame["subset"]) == {"random 20"}
    assert (frame["removal"] == "mask").all() and frame["converged"].all() and (frame["seed"] == 0).all()
    aopc = frame[frame["aopc"]]
    assert aopc["k"].isna().all() and sorted(frame.loc[~frame["aopc"], "k"].unique()) == list(ERASURE_K)
    assert str(frame["valid"].dtype) == "boolean" and frame["valid"].notna().all()
    assert (frame["n_examples"] <= 20).all() and frame["ood_share"].between(0, 1).all()
    assert result.metadata["erasure"]["unchecked"] is None and result.metadata["erasure"]["measures"] == ["loo-sign"]
    stages = result.timings[result.timings["stage"] == "erasure"]
    assert stages["method"].tolist() == ["loo-sign", "rand"] * 2  # MaSF comes from the calibration stage
    assert (stages["forward_rows"] > 0).all()
    calibrations = result.timings[result.timings["stage"] == "calibration"]
    assert calibrations["method"].tolist() == [f"{DEFAULT_DETECTOR} calibration"] * 2


def test_erasure_metrics_equal_erasure_metrics_certified_by_the_in_distribution_calibration(erasure_run, toy_data):
    """The stage is erasure_metrics with the test that is exactly the one behind the in-distribution report:
    its score fitted on the training texts, its conformal level on the validation texts (docs/ood.md)."""
    from fmmlearn.faithfulness import erasure_metrics
    from fmmlearn.ood import fit_detector, hidden_state_features

    result, cache = erasure_run
    splits = load_splits(*toy_data, n_train=100, n_valid=60, n_test=40, random_state=0)
    clf = fitted_model(result, cache, "plain", 0)
    masf = fit_detector(clf, DEFAULT_DETECTOR, splits.X_valid, X_train=splits.X_train, random_state=0)

    # the in-distribution stage's calibration: the same p-values of the clean (ratio 0) test texts
    p = masf.pvalues(hidden_state_features(clf, splits.X_test, pooling=masf.pooling))
    ood = result.in_distribution.query("model == 'plain' and ratio == 0")
    np.testing.assert_allclose(ood["proportion"], [np.mean(p < t) for t in ood["threshold"]])

    idx = result.outcomes.query("model == 'plain' and method == 'loo-sign' and ratio == 0")["example"].to_numpy()
    for method in ("loo-sign", "rand"):
        direct = erasure_metrics(clf, [splits.X_test[i] for i in idx], splits.y_test[idx], method=method, k=ERASURE_K,
                                 masf=masf, random_state=0, n_bootstrap=999).summary
        ours = result.erasure.query("model == 'plain' and method == @method")
        for column in ("mean", "ci_low", "ci_high", "ood_share", "n_perturbed", "n_examples"):
            np.testing.assert_allclose(ours[column].to_numpy(dtype=float), direct[column].to_numpy(dtype=float),
                                       rtol=1e-12, err_msg=f"{method} {column}")
        assert ours["valid"].tolist() == direct["valid"].tolist()


def test_erasure_validity_is_the_flagged_share_against_twice_the_level(erasure_run):
    result, _ = erasure_run
    frame = result.erasure
    per_k = frame[~frame["aopc"]]
    np.testing.assert_array_equal(per_k["valid"].astype(bool), per_k["ood_share"] <= 2 * 0.05)
    for _, rows in frame.groupby(["model", "method", "mode"]):
        at_k, total = rows[~rows["aopc"]], rows[rows["aopc"]].iloc[0]
        assert bool(total["valid"]) == bool(at_k["valid"].all())  # an AOPC is valid when every k is
        pooled = (at_k["ood_share"] * at_k["n_perturbed"]).sum() / at_k["n_perturbed"].sum()
        assert total["ood_share"] == pytest.approx(pooled) and total["n_perturbed"] == at_k["n_perturbed"].sum()


def test_a_validation_split_too_small_for_the_test_leaves_erasure_unchecked_with_a_warning(tiny_model_dir, toy_data,
                                                                                          tmp_path):
    from fmmlearn.exceptions import FaithfulnessWarning
    from fmmlearn.study import erasure_by_model

    # 15 validation texts: the conformal level's smallest p-value is 1/16, so nothing can reach p < 0.05
    study = tiny_study(tiny_model_dir, tmp_path, n_valid=15, seeds=(0,), methods=["rand", "loo-sign"],
                       max_examples={"loo-sign": 10})
    with pytest.warns(FaithfulnessWarning, match="not certified"):
        result = study.run(*toy_data)
    assert len(result.erasure) and result.erasure["valid"].isna().all() and result.erasure["ood_share"].isna().all()
    assert np.isfinite(result.erasure["mean"]).any()  # the metrics themselves are computed
    assert erasure_by_model(result)["valid"].isna().all()
    assert "a conformal level of 15 texts" in result.metadata["erasure"]["unchecked"]
    assert "not checked" in result.summary() and "Not checked:" in result.to_html()


def test_a_new_erasure_grid_refits_nothing_and_reuses_the_calibration(erasure_run, tiny_model_dir, toy_data,
                                                                      count_fits):
    result, cache = erasure_run
    again = erasure_study(tiny_model_dir, cache).run(*toy_data)
    assert again.timings["cached"].all()
    pd.testing.assert_frame_equal(again.erasure, result.erasure)

    other = erasure_study(tiny_model_dir, cache, erasure_k=(0.3, 0.5)).run(*toy_data)
    assert count_fits == []
    timings = other.timings
    computed = (timings["stage"] == "erasure") & (timings["method"] != f"{DEFAULT_DETECTOR} calibration")
    assert not timings.loc[computed, "cached"].any() and computed.sum() == 4
    assert timings.loc[~computed, "cached"].all()  # fits, the other stages and the MaSF calibrations
    assert sorted(other.erasure["k"].dropna().unique()) == [0.3, 0.5]
    pd.testing.assert_frame_equal(other.performance, result.performance)


def test_erasure_none_skips_the_stage(erasure_run, tiny_model_dir, toy_data, count_fits):
    result, cache = erasure_run
    off = erasure_study(tiny_model_dir, cache, erasure=None).run(*toy_data)
    assert count_fits == [] and off.erasure.empty and "erasure" not in set(off.timings["stage"])
    assert off.metadata["erasure"] is None and "Erasure metrics" not in off.summary()
    assert "Erasure metrics were not computed" in off.to_html()
    with pytest.raises(ValueError, match="erasure=None"):
        off.plot_erasure()
    pd.testing.assert_frame_equal(off.racu_summary, result.racu_summary)


@pytest.mark.parametrize("format", ["parquet", "csv"])
def test_erasure_frame_survives_save_and_load(erasure_run, tmp_path, format):
    result, _ = erasure_run
    loaded = load_study(result.save(tmp_path / "saved", format=format))
    pd.testing.assert_frame_equal(loaded.erasure, result.erasure, check_exact=False, rtol=1e-6)
    assert loaded.metadata["erasure"] == result.metadata["erasure"]
    assert loaded.summary() == result.summary()


def test_summary_says_for_which_model_each_erasure_metric_is_valid(erasure_run):
    import re

    from fmmlearn.study import erasure_by_model

    result, _ = erasure_run
    text = result.summary()
    assert ("Erasure metrics (AOPC over the top k = 20%, 50% of the tokens; valid when the in-distribution test flags "
            "at most 10%") in text
    aopc = erasure_by_model(result).query("aopc and method == 'loo-sign'")
    for rec in aopc.itertuples():
        verdict = "valid" if rec.valid else "not valid"
        assert f"{rec.mode} {rec.mean:.3f} (rand " in text
        assert f" {verdict}, {rec.ood_share:.0%} flagged" in text
    closing = [line for line in text.splitlines() if " of loo-sign: " in line]  # e.g. "Sufficiency of loo-sign: ..."
    for mode, rows in aopc.groupby("mode"):
        line = next(line for line in closing if mode in line.lower())
        flags = rows["valid"].astype(bool)
        for models, pattern in ((rows.loc[flags, "model"], r"(?<!not )valid for "),
                                (rows.loc[~flags, "model"], "not valid for ")):
            if len(models):
                assert re.search(pattern + " and ".join(models), line), line


def test_report_erasure_table_and_plot_show_the_flags(erasure_run):
    import re

    from fmmlearn.study import erasure_by_model

    result, _ = erasure_run
    page = result.to_html()
    section = page[page.index('<section id="erasure">'):]
    section = section[: section.index("</section>")]
    table = section[section.index('<table class="erasure">'): section.index("</table>")]
    badges = re.findall(r'<span class="badge (valid|invalid|unchecked)">', table)
    aopc = erasure_by_model(result).query("aopc")
    expected = ["valid" if v else "invalid" for _, rows in aopc.groupby(["model", "method"], sort=False)
                for v in rows.set_index("mode").loc[["comprehensiveness", "sufficiency"], "valid"]]
    assert badges == expected
    assert section.count('src="data:image/png;base64,') == 1

    ax = result.plot_erasure()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == 4 and all("AOPC" in label for label in labels)
    assert len(result.plot_erasure(baseline=True).get_legend().get_texts()) == 8


# --------------------------------------------------------------------------- persistence and report


@pytest.mark.parametrize("format", ["parquet", "csv"])
def test_save_load_round_trip(study_run, tmp_path, format):
    result, _ = study_run
    path = result.save(tmp_path / "saved", format=format)
    assert (path / "metadata.json").is_file() and not list(path.glob(".*.tmp"))
    loaded = load_study(path)
    for name in FRAMES:
        expected, actual = pd.DataFrame(getattr(result, name)), pd.DataFrame(getattr(loaded, name))
        pd.testing.assert_frame_equal(actual, expected, check_exact=False, rtol=1e-6)
    assert loaded.metadata["stages"] == json.loads(json.dumps(result.metadata["stages"]))
    assert loaded.summary() == result.summary()
    assert "Example explanations" in loaded.to_html()


def test_summary_names_the_better_model_the_best_measures_and_the_verdicts(study_run):
    result, _ = study_run
    text = result.summary()
    best = result.racu_summary[result.racu_summary["most_faithful"]]
    for model, method in zip(best["model"], best["method"]):
        assert f"{model}: {method}" in text
    verdict = result.comparisons[result.comparisons["kind"] == "models"].iloc[0]
    assert f"masked - plain: masked is " in text and f"({verdict['n_examples']} test texts" in text
    assert "plain:" in text and "masked:" in text and "flagged" in text
    assert "unstable for every measure" not in text


def test_report_is_one_self_contained_page_with_every_section(study_run, tmp_path):
    result, _ = study_run
    page = result.to_html(tmp_path / "report.html")
    assert (tmp_path / "report.html").read_text(encoding="utf-8") == page
    for title in ("Setup", "Accuracy of the models", "Random masking", "Faithfulness curves",
                  "RACU: how faithful is each explanation?", "Which explanation is ahead? Paired comparisons",
                  "Are masked inputs in-distribution?",
                  "Erasure metrics: comprehensiveness and sufficiency", "Example explanations", "Cost"):
        assert f"<h2>{title}</h2>" in page
    assert page.count('src="data:image/png;base64,') == 6
    assert "<script" not in page and "http://" not in page and "https://" not in page.replace("arXiv", "")
    assert "<link" not in page and "@import" not in page


def test_the_report_template_reserves_a_block_for_erasure_metrics(study_run):
    from fmmlearn.utils._templates import environment as _environment
    from fmmlearn.study._report import report_context

    result, _ = study_run
    child = _environment().from_string('{% extends "report.html.j2" %}{% block erasure_metrics %}'
                                       '<section id="erasure"><h2>Erasure metrics</h2></section>{% endblock %}')
    page = child.render(**report_context(result))
    assert page.index('<section id="in-distribution">') < page.index('<section id="erasure">') \
        < page.index('<section id="explanations">')


# --------------------------------------------------------------------------- bad options


@pytest.mark.parametrize("options, data, match", [
    ({"methods": ["rand", "no-such-measure"]}, None, "methods"),
    ({"masking_ratios": (0.0, 1.5)}, None, "masking_ratios"),
    ({"ratios": [0.0, 0.5, 1.2]}, None, "ratios"),
    ({"ratios": [0.0, 0.5]}, None, "ratios"),
    ({"n_valid": 4}, None, "n_valid"),
    ({"classifier_params": {"random_state": 3}}, None, "classifier_params"),
    ({"classifier_params": {"max_epochs": 0}}, None, "max_epochs"),
    ({"max_examples": {"grad-l2": 10}}, None, "max_examples"),
    ({"method_params": {"inp-grad-sign": {"n_steps": 5}}}, None, "method_params"),
    ({"metric": "log_loss"}, None, "metric"),
    ({"seeds": ()}, None, "seeds"),
    ({"erasure": ["grad-l2"]}, None, "erasure"),
    ({"erasure": ["no-such-measure"]}, None, "erasure"),
    ({"erasure": 3}, None, "erasure"),
    ({"erasure_k": [0.0, 0.5]}, None, "erasure_k"),
    ({"erasure_k": [0.2, 1.5]}, None, "erasure_k"),
    ({"erasure_k": []}, None, "erasure_k"),
    ({}, "no-such-dataset", "dataset"),
])
def test_bad_options_are_clear_errors_before_any_fit(tiny_model_dir, toy_data, tmp_path, count_fits, options, data,
                                                     match):
    study = tiny_study(tiny_model_dir, tmp_path, **options)
    with pytest.raises(ValueError, match=match):
        study.run(*(toy_data if data is None else (data,)))
    assert count_fits == []


def test_an_unwritable_cache_dir_is_an_error_before_any_fit(tiny_model_dir, toy_data, tmp_path, count_fits):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(ValueError, match="cache_dir"):
        tiny_study(tiny_model_dir, not_a_dir).run(*toy_data)
    with pytest.raises(ValueError, match="cache_dir"):
        tiny_study(tiny_model_dir, "  ").run(*toy_data)
    assert count_fits == []


def test_dataset_names_give_stratified_seeded_splits():
    splits = load_splits("tweets", n_train=90, n_valid=30, n_test=60, random_state=0)
    assert splits.sizes() == {"train": 90, "valid": 30, "test": 60}
    shares = pd.Series(splits.y_test).value_counts(normalize=True)
    overall = pd.Series(splits.y_train).value_counts(normalize=True)
    assert (shares - overall).abs().max() < 0.05
    again = load_splits("tweets", n_train=90, n_valid=30, n_test=60, random_state=0)
    assert again.X_test == splits.X_test
    assert not set(splits.X_test) & set(splits.X_train)  # repeated tweets are dropped before splitting
    with pytest.raises(ValueError, match="y must be None"):
        load_splits("tweets", [0, 1])


# --------------------------------------------------------------------------- fmmlearn demo


def test_a_study_of_the_rand_baseline_alone_runs_and_reports(tiny_model_dir, toy_data, tmp_path):
    """``methods=["rand"]``: no measure to rank, so no heatmaps and no most faithful measure, but every frame."""
    result = tiny_study(tiny_model_dir, tmp_path / "cache", methods=["rand"], seeds=(0,), erasure=None,
                        max_examples=None).run(
        *toy_data)
    assert set(result.curves["method"]) == {"rand", "random-masking"} and result.explanations.empty
    assert result.metadata["explain_method"] is None
    text = result.summary()
    assert "Accuracy" in text or "accuracy" in text
    html = result.to_html(tmp_path / "report.html")
    assert "there is no curve to show" in (tmp_path / "report.html").read_text()

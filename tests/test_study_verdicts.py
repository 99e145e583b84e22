"""Verdicts a reader can trust: every rule on synthetic data where the answer is known."""

import json

import numpy as np
import pandas as pd
import pytest

from fmmlearn.metrics import vectorized_metric
from fmmlearn.study._comparisons import final_comparisons, measure_comparisons, model_comparisons
from fmmlearn.study._rules import RULES_FILE, comparison_verdict, load_rules, rules_digest, spent_level
from fmmlearn.study._stats import mean_over_texts, paired_difference, share_ci

GRID = np.linspace(0, 1, 11)
SCORE = vectorized_metric("accuracy", classes=["a", "b"])


def _curves(rng, gold, slope, n_seeds=2):
    """Predictions (seeds, ratios, texts) whose accuracy falls linearly from 0.9 by ``slope`` over the grid."""
    accuracy = np.clip(0.9 - slope * GRID, 0.5, 1)
    correct = rng.random((n_seeds, len(GRID), len(gold))) < accuracy[None, :, None]
    return np.where(correct, gold, 1 - gold)


class _Settings:
    def __init__(self, measures, masking_ratios=(1.0,), seeds=(0, 1), rules=None):
        self.measures, self.masking_ratios, self.seeds = ("rand", *measures), masking_ratios, seeds
        self.curve_seed_list = seeds
        self.grid, self.rules, self.confidence_level = GRID, rules or load_rules(), 0.95

        class metric:
            name = "accuracy"

        self.metric = metric


# --------------------------------------------------------------------------- the rule itself


@pytest.mark.parametrize("low, high, verdict", [
    (-0.01, 0.02, "equivalent"), (0.06, 0.12, "first ahead"), (0.01, 0.04, "equivalent"),
    (0.02, 0.09, "first ahead"), (-0.09, -0.06, "second ahead"), (-0.02, 0.09, "inconclusive"),
    (float("nan"), 0.01, "inconclusive"),
])
def test_comparison_verdict(low, high, verdict):
    assert comparison_verdict(low, high, 0.05) == verdict


def test_alpha_spending_levels_sum_to_at_most_alpha():
    spent = [1 - spent_level(0.95, r) for r in range(30)]
    assert spent[0] == pytest.approx(0.025) and spent[1] == pytest.approx(0.0125)
    assert sum(spent) < 0.05 and spent_level(0.95, None) == 0.95


# --------------------------------------------------------------------------- paired comparisons


def test_an_equivalent_pair_reads_equivalent_and_a_real_gap_reads_ahead():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 300)
    steep, same, flat = _curves(rng, gold, 0.4), None, _curves(rng, gold, 0.1)
    same = steep.copy()
    flip = rng.random(same.shape) < 0.02  # the same explanation, a few predictions apart
    same[flip] = 1 - same[flip]
    idx = np.arange(300)
    predictions = {((1.0, s), m): (idx, p[s]) for s in (0, 1) for m, p in
                   (("x", steep), ("y", same), ("z", flat))}
    frame = measure_comparisons(_Settings(["x", "y", "z"]), gold, SCORE, {(1.0, 0): True, (1.0, 1): True},
                                predictions, level=0.95, round_index=0)
    verdicts = {(r.first, r.second): r.verdict for r in frame.itertuples()}
    assert verdicts[("x", "y")] == "equivalent"
    assert verdicts[("x", "z")] == "first ahead" and verdicts[("y", "z")] == "first ahead"
    row = frame[(frame["first"] == "x") & (frame["second"] == "z")].iloc[0]
    # the ACU difference is the area between the two accuracy curves (the baseline cancels)
    areas = [np.trapezoid(SCORE(flat[s], gold) - SCORE(steep[s], gold), GRID) for s in (0, 1)]
    assert row["estimate"] == pytest.approx(np.mean(areas))
    assert row["ci_low"] < row["estimate"] < row["ci_high"] and row["n_seeds"] == 2


def test_measures_are_compared_on_the_texts_both_ran_on():
    rng = np.random.default_rng(1)
    gold = rng.integers(0, 2, 100)
    curves = _curves(rng, gold, 0.3, n_seeds=1)[0]
    few = np.array([3, 10, 17, 40, 41, 99])  # a costly measure's subset, in any order
    predictions = {((1.0, 0), "cheap"): (np.arange(100), curves), ((1.0, 0), "costly"): (few[::-1], curves[:, few[::-1]])}
    frame = measure_comparisons(_Settings(["cheap", "costly"], seeds=(0,)), gold, SCORE, {(1.0, 0): True},
                                predictions, level=0.95)
    assert frame["n_examples"].tolist() == [6]
    assert frame["estimate"].iloc[0] == pytest.approx(0.0)  # identical predictions on the shared texts


def test_model_comparison_is_paired_on_the_test_texts():
    rng = np.random.default_rng(2)
    gold = rng.integers(0, 2, 400)
    plain = np.where(rng.random((2, 400)) < 0.8, gold, 1 - gold)
    masked = plain.copy()
    masked[:, :8] = 1 - masked[:, :8]  # differs from plain on 8 of 400 texts only
    frame = model_comparisons(_Settings(["x"], masking_ratios=(0.0, 1.0)), gold, SCORE,
                              {(r, s): True for r in (0.0, 1.0) for s in (0, 1)},
                              {(0.0, s): plain[s] for s in (0, 1)} | {(1.0, s): masked[s] for s in (0, 1)}, level=0.95)
    row = frame.iloc[0]
    assert (row["first"], row["second"]) == ("masked", "plain") and row["verdict"] == "equivalent"
    assert abs(row["estimate"]) <= 8 / 400 and row["ci_high"] - row["ci_low"] < 0.05  # pairing: no text noise


def test_final_comparisons_keep_the_first_decision():
    first = pd.DataFrame([{"kind": "measures", "model": "m", "first": "a", "second": "b", "verdict": "inconclusive",
                           "round": 0}, {"kind": "measures", "model": "m", "first": "a", "second": "c",
                                         "verdict": "first ahead", "round": 0}])
    second = first.assign(verdict=["equivalent", "inconclusive"], round=1)
    final = final_comparisons([first, second]).set_index("second")
    assert final.loc["b", "verdict"] == "equivalent" and final.loc["b", "round"] == 1
    assert final.loc["c", "verdict"] == "first ahead" and final.loc["c", "round"] == 0


def test_error_control_survives_optional_stopping():
    """Under the null (two measures alike), stopping at the first round that decides 'ahead' at alpha-spent
    levels declares a winner in at most alpha of the runs; looking at the same level every round would not."""
    rng = np.random.default_rng(3)
    wrong_spent = wrong_naive = 0
    runs, rounds, block = 120, 6, 20
    for _ in range(runs):
        gold = rng.integers(0, 2, rounds * block)
        a, b = _curves(rng, gold, 0.3, n_seeds=1), _curves(rng, gold, 0.3, n_seeds=1)
        decided_spent = decided_naive = False
        for r in range(rounds):
            n = (r + 1) * block
            d = paired_difference(SCORE, a[..., :n], b[..., :n], gold[:n], grid=GRID, n_resamples=600,
                                  seed=int(rng.integers(1 << 30)))
            decided_spent |= comparison_verdict(*d.interval(spent_level(0.95, r)), 0.0) != "inconclusive"
            decided_naive |= comparison_verdict(*d.interval(0.95), 0.0) != "inconclusive"
        wrong_spent += decided_spent
        wrong_naive += decided_naive
    assert wrong_spent / runs <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / runs)
    assert wrong_naive > wrong_spent  # the reason for spending: repeated looks at one level inflate the error


# --------------------------------------------------------------------------- shares and controls


def test_share_intervals_cover_the_truth_at_their_level():
    rng = np.random.default_rng(4)
    hits = 0
    for _ in range(400):
        k = rng.binomial(60, 0.05)
        _, low, high = share_ci(k, 60)
        hits += low <= 0.05 <= high
    assert hits / 400 >= 0.9


def test_mean_over_texts_resamples_texts_and_seeds():
    values = np.array([[0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    share = mean_over_texts(values, n_resamples=2000)
    assert share.estimate == pytest.approx(0.75)
    low, high = share.interval(0.95)
    assert low < 0.75 < high and share.n_seeds == 2 and share.n_examples == 4


# --------------------------------------------------------------------------- the rules file


def test_the_shipped_rules_load_and_their_digest_is_the_files():
    import hashlib

    rules = load_rules()
    assert rules["version"] >= 1 and rules["comparisons"]["acu_margin"] > 0
    assert rules_digest() == hashlib.sha256(RULES_FILE.read_bytes()).hexdigest()


@pytest.mark.parametrize("change, message", [
    ({"comparisons": {"acu_margin": "wide"}}, "comparisons.acu_margin must be float"),
    ({"bootstrap": {"n_resamples": 1.5}}, "bootstrap.n_resamples must be int"),
    ({"confidence_level": 1.5}, "confidence_level must be in"),
    ({"stability": {"racu_max_ci_width": -1}}, "finite number >= 0"),
])
def test_bad_rules_are_named(change, message):
    with pytest.raises(ValueError, match=message):
        load_rules(change)


def test_a_rules_file_of_ones_own_is_read_and_checked(tmp_path):
    rules = json.loads(RULES_FILE.read_text())
    rules["comparisons"]["acu_margin"] = 0.01
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(rules))
    assert load_rules(path)["comparisons"]["acu_margin"] == 0.01
    del rules["budget"]
    path.write_text(json.dumps(rules))
    with pytest.raises(ValueError, match="budget.block is missing"):
        load_rules(path)


# --------------------------------------------------------------------------- the budget, on a tiny study

TINY_FIT = dict(max_epochs=10, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32")


def _budget_study(model_dir, cache, budget, **options):
    from fmmlearn.study import FaithfulnessStudy

    settings = dict(masking_ratios=(1.0,), methods=["rand", "inp-grad-sign", "inp-grad-abs", "loo-sign"],
                    seeds=(0,), n_train=100, n_valid=30, n_test=70, n_random=1, n_bootstrap=100,
                    in_distribution=None, erasure=None, n_explain=0, costly_examples=10, classifier_params=TINY_FIT,
                    device="cpu", verbose=0, cache_dir=cache, budget=budget)
    return FaithfulnessStudy(model_dir, **{**settings, **options})


@pytest.fixture(scope="module")
def budget_data():
    from helpers.data import make_sentiment

    return make_sentiment(200, seed=11)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_budget_adds_texts_to_the_costly_measures_while_comparisons_are_open(tiny_model_dir, budget_data,
                                                                                tmp_path):
    result = _budget_study(tiny_model_dir, tmp_path, budget=600.0).run(*budget_data)
    rounds = result.metadata["rounds"]
    assert rounds["rounds"] >= 2 and rounds["added"] and rounds["added"][0]["measures"] == ["loo-sign"]
    texts = rounds["texts"]["loo-sign"]
    assert texts == 10 + sum(step["added_texts"] for step in rounds["added"]) and texts <= 70
    assert result.metadata["subsets"]["loo-sign"]["n_examples"] == texts
    loo = result.outcomes[result.outcomes["method"] == "loo-sign"]["example"].nunique()
    assert loo == texts and texts > 10
    assert rounds["stopped"] in ("every comparison with a costly measure is decided", "no test text left to add") \
        or rounds["stopped"].startswith("the budget")
    comparisons = result.comparisons[result.comparisons["kind"] == "measures"]
    # each verdict comes with the level its round spent: 1 - 0.05 / 2^(r + 1)
    for row in comparisons.itertuples():
        assert row.confidence_level == pytest.approx(spent_level(0.95, int(row.round)))
    with_loo = comparisons[(comparisons["first"] == "loo-sign") | (comparisons["second"] == "loo-sign")]
    assert (with_loo["n_examples"] <= texts).all()
    summary = result.summary()
    added = sum(step["added_texts"] for step in rounds["added"])
    assert f"Budget 600 s: {rounds['rounds']} round(s), {added} texts added to the costly measures; " \
           f"stopped: {rounds['stopped']}." in summary
    still_open = comparisons[comparisons["verdict"] == "inconclusive"]
    assert ("Not decided:" in summary) == bool(len(still_open))
    for row in still_open.itertuples():
        assert f"{row.first} vs {row.second} ({row.model})" in summary
    again = _budget_study(tiny_model_dir, tmp_path, budget=600.0).run(*budget_data)
    assert again.timings["cached"].all()  # every added block is cached too
    pd.testing.assert_frame_equal(again.comparisons, result.comparisons)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_spent_budget_stops_after_the_first_round_and_says_why(tiny_model_dir, budget_data, tmp_path):
    result = _budget_study(tiny_model_dir, tmp_path, budget=1e-6).run(*budget_data)
    rounds = result.metadata["rounds"]
    assert rounds["rounds"] == 1 and rounds["added"] == []
    assert rounds["stopped"].startswith("the budget (1e-06 s) would be exceeded") or "decided" in rounds["stopped"]
    assert result.metadata["subsets"]["loo-sign"]["n_examples"] == 10
    assert "Budget 1e-06 s: 1 round(s), 0 texts added" in result.summary()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_budget_models_add_texts_to_the_models_whose_comparisons_decide(tiny_model_dir, budget_data, tmp_path):
    """Claim 3 is about the masked model: only its runs get the texts the rounds add."""
    result = _budget_study(tiny_model_dir, tmp_path, budget=600.0, masking_ratios=(0.0, 1.0),
                           budget_models=(1.0,), budget_pairs=[("loo-sign", "inp-grad-sign")]).run(*budget_data)
    rounds = result.metadata["rounds"]
    texts = rounds["texts_by_model"]
    assert rounds["added"]  # the pilot leaves loo-sign vs inp-grad-sign open on these toy data
    assert texts["masked"]["loo-sign"] > texts["plain"]["loo-sign"] == 10
    assert all(step["models"] == ["masked"] and step["measures"] == ["loo-sign"] for step in rounds["added"])
    measured = result.outcomes.query("method == 'loo-sign'").groupby("model")["example"].nunique()
    assert measured["masked"] == texts["masked"]["loo-sign"] and measured["plain"] == texts["plain"]["loo-sign"]
    racu = result.racu_summary.set_index(["model", "method"])
    assert racu.loc[("masked", "loo-sign"), "n_examples"] == texts["masked"]["loo-sign"]
    assert result.metadata["subsets"]["loo-sign"]["n_examples"] == texts["plain"]["loo-sign"]  # shared by both
    masked = result.comparisons.query("kind == 'measures' and model == 'masked' and first == 'inp-grad-sign' "
                                      "and second == 'loo-sign'")
    assert masked["n_examples"].iloc[0] == texts["masked"]["loo-sign"]


def test_the_next_round_is_sized_to_decide_the_open_comparisons():
    """From the pilot's estimate and standard error: the texts at which the next interval would decide."""
    from types import SimpleNamespace

    from scipy.stats import norm

    from fmmlearn.study.stages.faithfulness import _open_comparisons, _texts_to_decide

    z = norm.ppf(0.9875)  # round 0's level, 1 - 0.05 / 2
    row = {"kind": "measures", "model": "masked", "first": "loo-sign", "second": "int-grad-sign", "n_examples": 100,
           "estimate": -0.02, "ci_low": -0.02 - z * 0.02, "ci_high": -0.02 + z * 0.02, "margin": 0.05,
           "verdict": "inconclusive", "confidence_level": 0.975}
    cheap = {**row, "first": "inp-grad-sign", "second": "grad-l2"}
    frame = pd.DataFrame([row, cheap, {**row, "model": "plain"}])
    settings = SimpleNamespace(budget_models=(1.0,), budget_pairs=None, confidence_level=0.95)
    open_pairs = _open_comparisons(frame, ["loo-sign", "int-grad-sign"], settings)
    assert len(open_pairs) == 1 and open_pairs.iloc[0]["model"] == "masked"   # no costly measure; plain left out
    wanted = _texts_to_decide(open_pairs, settings, round_index=1)
    # equivalence needs a half-width below 0.05 - 0.02 = 0.03 at round 1's z (0.99375)
    expected = int(np.ceil(1.1 * 100 * (norm.ppf(1 - 0.0125 / 2) * 0.02 / 0.03) ** 2))
    assert wanted == {"loo-sign": expected, "int-grad-sign": expected}
    only = SimpleNamespace(budget_models=None, budget_pairs=(("grad-l2", "inp-grad-sign"),), confidence_level=0.95)
    assert _open_comparisons(frame, ["loo-sign", "int-grad-sign"], only).empty


# --------------------------------------------------------------------------- in-distribution (rules version 2)


def _verdict(flagged, power=(0.95, 0.9, 0.98), negative=None, multiplier=1.0, expected=0.049):
    from fmmlearn.study.stages.in_distribution import in_distribution_verdict

    negative = negative or {"share": 0.05, "low": 0.01, "high": 0.16, "n": 40}
    return in_distribution_verdict(flagged, expected, negative, power, multiplier, load_rules()["in_distribution"])


@pytest.mark.parametrize("flagged, power, negative, multiplier, verdict, reason", [
    # out of distribution needs no positive control: a low power changes nothing
    ((0.40, 0.30, 0.50), (0.10, 0.05, 0.15), None, 1.0, "out of distribution", "flagged 30.0% at least"),
    # in-distribution needs a powered test
    ((0.01, 0.0, 0.03), (0.95, 0.90, 0.98), None, 1.0, "in-distribution", "power 95%"),
    ((0.01, 0.0, 0.03), (0.60, 0.55, 0.65), None, 2.7, "inconclusive", "about 2.7x as many"),
    ((0.01, 0.0, 0.03), (0.60, 0.55, 0.65), None, float("inf"), "inconclusive", "another detector is needed"),
    ((0.01, 0.0, 0.03), (0.82, 0.78, 0.86), None, 1.0, "inconclusive", "more test texts would narrow it"),
    # a share whose interval straddles the limit
    ((0.09, 0.05, 0.14), (0.95, 0.9, 0.98), None, 1.0, "inconclusive", "straddles"),
    # a test that does not hold its level is not read at all
    ((0.40, 0.30, 0.50), (0.95, 0.9, 0.98), {"share": 0.3, "low": 0.2, "high": 0.4, "n": 40}, 1.0, "not readable",
     "does not hold its level"),
])
def test_in_distribution_verdicts_follow_the_rules(flagged, power, negative, multiplier, verdict, reason):
    got, why = _verdict(flagged, power, negative, multiplier)
    assert got == verdict and reason in why


def test_a_negative_control_within_the_rules_excess_holds_the_level():
    """5 of 30 held-out texts flagged (Wilson [7.3%, 33.6%]) against a null share of 5 %: not clearly above the
    null share plus the 5 points the verdicts tolerate, so the plain model's 87 % still reads out of distribution."""
    got, _ = _verdict((0.87, 0.86, 0.89), negative={"share": 5 / 30, "low": 0.073, "high": 0.336, "n": 30},
                      expected=0.05)
    assert got == "out of distribution"


def test_a_negative_control_below_the_null_share_holds_the_level():
    """A conservative test (fewer flags than the null share) is not a reason to distrust it."""
    got, _ = _verdict((0.01, 0.0, 0.03), negative={"share": 0.0, "low": 0.0, "high": 0.09, "n": 40})
    assert got == "in-distribution"


def test_rules_version_2_records_why_the_in_distribution_rule_changed():
    rules = load_rules()
    assert rules["version"] == 2 and rules["in_distribution"]["min_power"] == 0.8
    assert "matched positive control" in rules["changes"]["2"] and "not readable" in rules["changes"]["2"]


# --------------------------------------------------------------------------- reduced precision, judged


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

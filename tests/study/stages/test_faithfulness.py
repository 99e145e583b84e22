"""The faithfulness stage's budget (docs/quickstart.md): rounds that add texts to the costly measures while their
comparisons are open, sized to decide them."""

import numpy as np
import pandas as pd
import pytest

from fmmlearn.study._rules import spent_level


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



"""SupportingFactsStage: a tiny study on distractor bAbI-1 scores every model, seed and measure on its curves' texts."""

import numpy as np
import pandas as pd
import pytest

from fmmlearn import FaithfulTextClassifier
from fmmlearn.datasets import answer_occurrences, load_babi
from fmmlearn.explanation import explain
from fmmlearn.faithfulness import supporting_fact_score
from fmmlearn.study import STAGES, FaithfulnessStudy
from fmmlearn.study._data import load_splits
from fmmlearn.study.stages.supporting_facts import (
    SUPPORTING_FACTS_COLUMNS,
    SupportingFactsStage,
    occurrences_in_test_split,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TINY_FIT = dict(max_epochs=1, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32")
SIZES = dict(n_train=60, n_valid=20, n_test=16)


def _study(model_dir, cache, **options):
    settings = dict(masking_ratios=(0.0, 1.0), methods=["rand", "loo-sign", "inp-grad-sign"], seeds=(0,),
                    max_examples={"loo-sign": 10}, n_random=1, n_bootstrap=200, in_distribution=None,
                    erasure=None, n_explain=0, classifier_params=TINY_FIT, device="cpu", verbose=0, cache_dir=cache,
                    stages=[*STAGES, SupportingFactsStage()], **SIZES)
    return FaithfulnessStudy(model_dir, **{**settings, **options})


@pytest.fixture(scope="module")
def distracted():
    return load_babi(1, distractors=True)


@pytest.fixture(scope="module")
def result(tiny_model_dir, distracted, tmp_path_factory):
    cache = tmp_path_factory.mktemp("supporting-study")
    return _study(tiny_model_dir, cache).run(distracted), cache


def test_the_splits_carry_the_occurrences_of_their_test_texts(distracted):
    splits = load_splits(distracted, **SIZES, random_state=0)
    spans, flags = occurrences_in_test_split(splits)
    assert len(spans) == len(splits.X_test) == 16
    for (paragraph, _), answer, where, supporting in zip(splits.X_test, splits.y_test, spans, flags):
        assert [paragraph[s:e] for s, e in where] == [answer, answer] and sorted(supporting) == [False, True]
    # without answer_spans (the default stories) they are found from the supporting spans
    plain = load_splits("babi-1", **SIZES, random_state=0)
    paragraphs = [p for p, _ in plain.X_test]
    assert occurrences_in_test_split(plain) == answer_occurrences(paragraphs, plain.y_test, plain.test_info["supporting_spans"])
    assert load_splits(["a", "b", "c", "d"] * 5, ["x", "y"] * 10, random_state=0).test_info is None


def test_every_model_seed_and_measure_is_scored_on_the_texts_of_its_curves(result):
    result, _ = result
    frame = result.supporting_facts
    assert list(frame.columns) == list(SUPPORTING_FACTS_COLUMNS)
    assert len(frame) == 2 * 3 and set(frame["method"]) == {"rand", "loo-sign", "inp-grad-sign"}
    curves = result.racu.set_index(["model", "method"])["subset"]
    for row in frame[frame["method"] != "rand"].itertuples():
        assert row.subset == curves[(row.model, row.method)]
    assert (frame.loc[frame["method"] == "loo-sign", "n_examples"] == 10).all()
    assert (frame["chance"] == 0.5).all() and (frame["n_scored"] == frame["n_examples"]).all()
    examples = result.supporting_fact_examples
    loo = examples[(examples["model"] == "masked") & (examples["method"] == "loo-sign")]
    outcomes = result.outcomes
    assert sorted(loo["example"]) == sorted(outcomes.loc[(outcomes["method"] == "loo-sign")
                                                         & (outcomes["model"] == "masked"), "example"].unique())


def test_the_numbers_are_those_of_explain_and_the_score(result, distracted):
    """Recomputed here from the saved model: explain the gold class of the same texts, score the occurrences."""
    result, cache = result
    run = next(r for r in result.metadata["runs"] if r["model"] == "masked")
    clf = FaithfulTextClassifier.load(cache / "models" / run["fit_key"] / "model", device="cpu")
    splits = load_splits(distracted, **SIZES, random_state=0)
    examples = result.supporting_fact_examples
    for method in ("loo-sign", "inp-grad-sign"):
        idx = np.sort(examples.loc[(examples["model"] == "masked") & (examples["method"] == method), "example"])
        explanation = explain(clf, [splits.X_test[i] for i in idx], splits.y_test[idx], method=method, random_state=0)
        report = supporting_fact_score(explanation, [splits.test_info["answer_spans"][i] for i in idx],
                                       [splits.test_info["answer_supporting"][i] for i in idx], n_resamples=200)
        row = result.supporting_facts.set_index(["model", "method"]).loc[("masked", method)]
        assert row["hit_rate"] == pytest.approx(report.summary["hit_rate"])
        assert row["n_scored"] == report.summary["n_scored"]
        got = examples[(examples["model"] == "masked") & (examples["method"] == method)].sort_values("example")
        np.testing.assert_array_equal(got["hit"].to_numpy(), report.per_example["hit"].to_numpy())


def test_a_rerun_is_served_from_the_cache_and_the_report_has_the_section(result, tiny_model_dir, distracted):
    first, cache = result
    again = _study(tiny_model_dir, cache).run(distracted)
    rows = again.timings[again.timings["stage"] == "supporting facts"]
    assert len(rows) == 6 and rows["cached"].all()
    pd.testing.assert_frame_equal(again.supporting_facts, first.supporting_facts)
    section = SupportingFactsStage().report_section(again.frames)
    assert section.title == "supporting facts" and section.frame == "supporting_facts"
    assert "A model that ignores the question scores chance" in section.intro


def test_a_study_on_data_without_supporting_facts_says_what_it_needs(tiny_model_dir, tmp_path):
    from helpers.data import make_sentiment

    with pytest.raises(ValueError, match=r"needs bAbI test texts with supporting_spans.*load_babi\(1, distractors"):
        _study(tiny_model_dir, tmp_path, methods=["rand"], max_examples={}).run(*make_sentiment(120, seed=5))

"""The supporting-fact test: exact on hand-made explanations, chance for models that ignore the question."""

import itertools
import re

import numpy as np
import pandas as pd
import pytest
from helpers.babi_models import BagOfLocations, LatestLocations, QuestionReader, babi_classifier
from hypothesis import given
from hypothesis import strategies as st

from fmmlearn.datasets import answer_occurrences, make_babi
from fmmlearn.explanation import explain
from fmmlearn.faithfulness import (
    SUPPORTING_FACT_COLUMNS,
    occurrence_credit,
    supporting_fact_credits,
    supporting_fact_score,
)

# ---------------------------------------------------------------- the credit of one example, by hand


@pytest.mark.parametrize("importances, supporting, expected", [
    ([0.9, 0.1], [True, False], (1.0, 0.5)),             # the supporting occurrence strictly on top
    ([0.1, 0.9], [True, False], (0.0, 0.5)),             # the distractor on top
    ([0.4, 0.4], [True, False], (0.5, 0.5)),             # a tie shares the credit
    ([0.4, 0.4, 0.4], [False, True, False], (1 / 3, 1 / 3)),
    ([-1.0, -2.0, -3.0], [False, True, False], (0.0, 1 / 3)),  # signed scores: the largest, not the largest |.|
    ([0.0, 0.0], [False, True], (0.5, 0.5)),             # nothing scored: every occurrence ties
    ([0.3, 0.3 + 1e-9], [True, False], (0.5, 0.5)),       # equal up to rounding
    ([0.5, 0.5, 0.1], [True, True, False], (1.0, 2 / 3)),  # two supporting occurrences tie on top
])
def test_occurrence_credit_by_hand(importances, supporting, expected):
    assert occurrence_credit(importances, supporting) == pytest.approx(expected)


@given(st.lists(st.tuples(st.integers(-3, 3), st.booleans()), min_size=1, max_size=5).filter(
    lambda pairs: any(flag for _, flag in pairs)))
def test_a_ranking_blind_to_which_occurrence_supports_scores_chance_exactly(pairs):
    """Averaged over every way of giving the scores to the occurrences, the credit is s / n (ties included)."""
    values, flags = [float(v) for v, _ in pairs], [f for _, f in pairs]
    credits = [occurrence_credit(order, flags)[0] for order in itertools.permutations(values)]
    assert all(0.0 <= c <= 1.0 for c in credits)
    assert np.mean(credits) == pytest.approx(sum(flags) / len(flags))
    assert occurrence_credit(values, flags)[1] == sum(flags) / len(flags)


def test_no_supporting_occurrence_or_a_missing_score_cannot_be_scored():
    assert np.isnan(occurrence_credit([0.3, 0.2], [False, False])).all()
    assert np.isnan(occurrence_credit([0.3, np.nan], [True, False])).all()
    with pytest.raises(ValueError, match="same length"):
        occurrence_credit([0.1, 0.2], [True])


# ---------------------------------------------------------------- a hand-made explanation frame


PARAGRAPH = "Mary went to the garden. John moved to the garden. Daniel went to the office."
#                              ^17-23                      ^43-49
SPANS, FLAGS = answer_occurrences([PARAGRAPH], ["garden"], [[(25, 50)]])


def hand_frame(garden_scores, example=0, extra=()):
    """A token frame of PARAGRAPH: every word a token, the two "garden"s scored as given, the rest 0.1."""
    rows, scores = [], iter(garden_scores)
    for match in re.finditer(r"\w+|\.", PARAGRAPH):
        score = next(scores) if match.group() == "garden" else 0.1
        rows.append({"example": example, "segment": "A", "char_start": match.start(), "char_end": match.end(),
                     "importance": score, "method": "loo-sign"})
    return pd.DataFrame([*rows, *extra])


def test_a_hand_made_explanation_is_scored_exactly():
    assert SPANS == [[(17, 23), (43, 49)]] and FLAGS == [[False, True]]
    report = supporting_fact_score(hand_frame([0.2, 0.7]), SPANS, FLAGS)
    assert list(report.per_example.columns) == list(SUPPORTING_FACT_COLUMNS)
    assert report.per_example.iloc[0].tolist() == [0, 2, 1, True, 1.0, 0.5]
    assert supporting_fact_score(hand_frame([0.7, 0.2]), SPANS, FLAGS).per_example["hit"].tolist() == [0.0]
    assert supporting_fact_score(hand_frame([0.5, 0.5]), SPANS, FLAGS).per_example["hit"].tolist() == [0.5]


def test_subword_tokens_of_an_occurrence_are_summed_and_segment_b_is_ignored():
    frame = hand_frame([0.2, 0.3])
    split = frame[frame["char_start"] == 43].index[0]   # the second "garden" as "gar" + "##den"
    frame = pd.concat([frame.drop(index=split),
                       pd.DataFrame([{**frame.loc[split], "char_end": 46, "importance": 0.15},
                                     {**frame.loc[split], "char_start": 46, "importance": 0.15}])])
    question = {"example": 0, "segment": "B", "char_start": 0, "char_end": 30, "importance": 99.0,
                "method": "loo-sign"}  # offsets in the question, which would overlap the first "garden"
    frame = pd.concat([frame, pd.DataFrame([question])], ignore_index=True)
    # the supporting "garden" is 0.15 + 0.15 = 0.3 (sum) or 0.15 (max), against 0.2
    assert supporting_fact_score(frame, SPANS, FLAGS).per_example["hit"].tolist() == [1.0]
    assert supporting_fact_score(frame, SPANS, FLAGS, aggregate="max").per_example["hit"].tolist() == [0.0]


def test_an_occurrence_the_explanation_lacks_leaves_the_example_unscored():
    truncated = hand_frame([0.2, 0.7])
    truncated = truncated[truncated["char_start"] < 40]    # cut before the second "garden"
    two = pd.concat([truncated, hand_frame([0.2, 0.7], example=1)], ignore_index=True)
    report = supporting_fact_score(two, SPANS * 2, FLAGS * 2)
    assert report.per_example["scored"].tolist() == [False, True]
    assert report.summary["n_scored"] == 1 and report.summary["hit_rate"] == 1.0


def test_summary_is_the_mean_with_bootstrap_cis():
    frames = [hand_frame(scores, example=i) for i, scores in enumerate([[0.2, 0.7]] * 3 + [[0.7, 0.2]])]
    report = supporting_fact_score(pd.concat(frames, ignore_index=True), SPANS * 4, FLAGS * 4, n_resamples=999)
    s = report.summary
    assert (s["n_examples"], s["n_scored"], s["n_informative"]) == (4, 4, 4)
    assert s["hit_rate"] == 0.75 and s["chance"] == 0.5 and s["lift"] == 0.25
    assert s["hit_low"] <= 0.75 <= s["hit_high"] and s["lift_low"] == pytest.approx(s["hit_low"] - 0.5)


def test_bad_inputs_are_errors_naming_them():
    with pytest.raises(TypeError, match="explanation must be the frame of explain"):
        supporting_fact_score(pd.DataFrame({"example": [0]}), SPANS, FLAGS)
    two = pd.concat([hand_frame([0.2, 0.7]), hand_frame([0.2, 0.7]).assign(method="rand")])
    with pytest.raises(ValueError, match="several measures"):
        supporting_fact_score(two, SPANS, FLAGS)
    with pytest.raises(ValueError, match="one flag per span"):
        supporting_fact_score(hand_frame([0.2, 0.7]), SPANS, [[True]])
    with pytest.raises(ValueError, match="example 1 but answer_spans only 1"):
        supporting_fact_score(hand_frame([0.2, 0.7], example=1), SPANS, FLAGS)
    with pytest.raises(ValueError, match="'aggregate' parameter of supporting_fact_score must be a str among"):
        supporting_fact_score(hand_frame([0.2, 0.7]), SPANS, FLAGS, aggregate="median")
    with pytest.raises(ValueError, match="'n_resamples' parameter of supporting_fact_score must be an int"):
        supporting_fact_score(hand_frame([0.2, 0.7]), SPANS, FLAGS, n_resamples=True)
    with pytest.raises(ValueError, match="'tie_rtol' parameter of occurrence_credit must be a float"):
        occurrence_credit([0.1], [True], tie_rtol=-1.0)


# ---------------------------------------------------------------- models that ignore the question, and one that reads it


@pytest.fixture(scope="module")
def distracted():
    return make_babi(1, n_samples=300, distractors=True, random_state=8)


def scored(tokenizer, model_class, babi, method="loo-sign", **options):
    clf = babi_classifier(tokenizer, model_class)
    explanation = explain(clf, babi.data, babi.target, method=method, random_state=0)
    return supporting_fact_score(explanation, babi.answer_spans, babi.answer_supporting, **options)


def test_a_bag_of_words_ignoring_the_question_ties_every_occurrence_exactly_chance(bundled_tokenizer, distracted):
    report = scored(bundled_tokenizer, BagOfLocations, distracted)
    np.testing.assert_array_equal(report.per_example["hit"], report.per_example["chance"])
    assert report.summary["chance"] == 0.5 and report.summary["lift"] == 0.0


def test_a_decisive_model_that_ignores_the_question_scores_chance_within_its_ci(bundled_tokenizer, distracted):
    """It ranks the later occurrence first: right exactly when the supporting move came second (a fair coin)."""
    report = scored(bundled_tokenizer, LatestLocations, distracted, n_resamples=2000)
    assert set(report.per_example["hit"]) == {0.0, 1.0}     # no ties: a decision on every example
    second = [flags[1] for flags in distracted.answer_supporting]
    np.testing.assert_array_equal(report.per_example["hit"], np.asarray(second, dtype=float))
    s = report.summary
    assert s["hit_low"] <= s["chance"] == 0.5 <= s["hit_high"]
    assert s["lift_low"] <= 0 <= s["lift_high"]


def test_a_model_that_reads_the_question_scores_far_above_chance(bundled_tokenizer, distracted):
    clf = babi_classifier(bundled_tokenizer, QuestionReader)
    assert (clf.classes_[clf.encoded_logits(clf.encode(distracted.data)).argmax(1)] == distracted.target).all()
    report = scored(bundled_tokenizer, QuestionReader, distracted, n_resamples=2000)
    assert report.summary["hit_rate"] == 1.0 and report.summary["lift_low"] == 0.5
    # the random measure has no idea either: at chance
    rand = scored(bundled_tokenizer, QuestionReader, distracted, method="rand", n_resamples=2000).summary
    assert rand["lift_low"] <= 0 <= rand["lift_high"]


def test_token_and_word_level_explanations_give_the_same_scores(bundled_tokenizer, distracted):
    clf = babi_classifier(bundled_tokenizer, LatestLocations)
    tokens = explain(clf, distracted.data[:40], distracted.target[:40], method="loo-sign")
    words = explain(clf, distracted.data[:40], distracted.target[:40], method="loo-sign", level="word")
    by_tokens = supporting_fact_credits(tokens, distracted.answer_spans[:40], distracted.answer_supporting[:40])
    by_words = supporting_fact_credits(words, distracted.answer_spans[:40], distracted.answer_supporting[:40])
    pd.testing.assert_frame_equal(by_tokens, by_words)


def test_the_old_test_could_not_fail_this_one_can(bundled_tokenizer, distracted):
    """The top token inside a supporting fact (the old test): a question-blind model "passes" it."""
    clf = babi_classifier(bundled_tokenizer, LatestLocations)
    explanation = explain(clf, distracted.data, distracted.target, method="loo-sign")
    old_hits, old_chance = [], []
    for i, rows in explanation.groupby("example"):
        (start, end), = distracted.supporting_spans[i]
        inside = ((rows["char_start"] < end) & (rows["char_end"] > start)).to_numpy()
        top = rows["importance"].to_numpy() == rows["importance"].max()
        old_hits.append(inside[top].mean())
        old_chance.append(inside.mean())
    assert np.mean(old_hits) > np.mean(old_chance) + 0.2    # "far above chance" for a model blind to the question
    new = supporting_fact_score(explanation, distracted.answer_spans, distracted.answer_supporting).summary
    assert new["lift_low"] <= 0 <= new["lift_high"]

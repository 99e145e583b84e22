"""Input-blind predictors: the question-blind posterior of bAbI-1 is exact, calibrated, and no blind rule beats it."""

import collections
import re

import numpy as np
import pytest

from fmmlearn.datasets import (
    BABI_LOCATIONS,
    blind_predictor,
    load_babi,
    majority_class,
    make_babi,
    question_blind_predictions,
    question_blind_proba,
)

LOCATIONS = list(BABI_LOCATIONS)


def moves(paragraph):
    return [(s.split()[0], s.rstrip(".").split()[-1]) for s in re.split(r"(?<=\.) ", paragraph)]


def proba_of(paragraph, **options):
    return dict(zip(LOCATIONS, question_blind_proba([paragraph], **options)[0]))


def test_the_posterior_by_hand():
    two = "Mary went to the garden. John moved to the office."
    assert proba_of(two) == pytest.approx({**dict.fromkeys(LOCATIONS, 0.0), "garden": 0.5, "office": 0.5})
    # question 1 (after 2 sentences) asked Mary or John; question 2 prefers who was not asked:
    # Mary 1/4, John 1/4, Daniel 1/2 -> office (John, Daniel) 3/4, kitchen (Mary) 1/4
    four = two + " Mary went back to the kitchen. Daniel journeyed to the office."
    assert proba_of(four) == pytest.approx({**dict.fromkeys(LOCATIONS, 0.0), "office": 0.75, "kitchen": 0.25})
    alone = "Mary went to the garden. Mary moved to the office."
    assert proba_of(alone)["office"] == 1.0
    # with distractors the first question follows sentence 4: everyone equally likely
    couples = "Mary went to the garden. John went to the garden. Daniel moved to the office. Sandra moved to the office."
    assert proba_of(couples, distractors=True)["garden"] == pytest.approx(0.5)


def brute_force_posterior(paragraph, first_question=2):
    """P(asked person) by enumerating every sequence of earlier questions (a path, not a set, at a time)."""
    steps = moves(paragraph)
    times = list(range(first_question, len(steps), 2)) + [len(steps)]
    posterior = collections.defaultdict(float)

    def walk(k, asked, probability):
        present = list(dict.fromkeys(p for p, _ in steps[:times[k]]))
        pool = [p for p in present if p not in asked] or present
        for person in pool:
            if k == len(times) - 1:
                posterior[person] += probability / len(pool)
            else:
                walk(k + 1, asked + [person], probability / len(pool))

    walk(0, [], 1.0)
    latest = dict(steps)
    return {loc: sum(p for person, p in posterior.items() if latest[person] == loc) for loc in LOCATIONS}


@pytest.fixture(scope="module")
def generated():
    babi = make_babi(1, n_samples=40000, random_state=12)
    paragraphs = [p for p, _ in babi.data]
    return paragraphs, np.asarray(babi.target), question_blind_proba(paragraphs)


def test_the_posterior_equals_brute_force_enumeration(generated):
    paragraphs, _, proba = generated
    for i in range(0, 40000, 97):
        expected = brute_force_posterior(paragraphs[i])
        np.testing.assert_allclose(proba[i], [expected[loc] for loc in LOCATIONS], atol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_the_posterior_is_calibrated_on_generated_data(generated):
    """What the posterior expects is what happens: its accuracy, and the probability it gives the truth."""
    _, y, proba = generated
    correct = np.asarray(LOCATIONS)[proba.argmax(axis=1)] == y
    given = proba[np.arange(len(y)), [LOCATIONS.index(t) for t in y]]
    for observed, expected in ((correct, proba.max(axis=1)), (given, (proba ** 2).sum(axis=1))):
        difference = observed - expected
        assert abs(difference.mean()) < 4 * difference.std() / np.sqrt(len(y))


def most_frequent_final(paragraph):
    counts = collections.Counter(dict(moves(paragraph)).values())
    return max(LOCATIONS, key=lambda loc: counts.get(loc, 0))


def last_named(paragraph):
    return moves(paragraph)[-1][1]


def newest_person(paragraph):
    """The location of whoever appeared last (certainly not asked before)."""
    steps = moves(paragraph)
    return dict(steps)[list(dict.fromkeys(p for p, _ in steps))[-1]]


def pattern(paragraph):
    """The paragraph up to renaming people and places (a blind rule can only use this)."""
    people, places = {}, {}
    key = tuple((people.setdefault(p, len(people)), places.setdefault(loc, len(places))) for p, loc in moves(paragraph))
    return key, list(places)


def test_no_question_blind_rule_beats_it(generated):
    paragraphs, y, proba = generated
    four = np.flatnonzero([p.count(".") == 4 for p in paragraphs])   # the reproduction's short paragraphs
    train, test = four[: len(four) // 2], four[len(four) // 2:]
    table = collections.defaultdict(collections.Counter)
    for i in train:  # a lookup table learnt from data: the most frequent answer per pattern
        key, places = pattern(paragraphs[i])
        table[key][places.index(y[i])] += 1
    learnt = []
    for i in test:
        key, places = pattern(paragraphs[i])
        learnt.append(places[table[key].most_common(1)[0][0]] if key in table else places[0])
    best = np.asarray(LOCATIONS)[proba[test].argmax(axis=1)] == y[test]
    rules = {"lookup": np.asarray(learnt), **{rule.__name__: np.asarray([rule(paragraphs[i]) for i in test])
                                              for rule in (most_frequent_final, last_named, newest_person)}}
    for name, predictions in rules.items():
        gain = (predictions == y[test]).astype(float) - best
        assert gain.mean() < 3 * gain.std() / np.sqrt(len(gain)), name
    assert 0.6 < best.mean() < 0.67   # about 0.63 on 4-sentence paragraphs


def test_distractor_paragraphs_leave_two_equally_likely_places(generated):
    babi = make_babi(1, n_samples=4000, distractors=True, random_state=3)
    paragraphs = [p for p, _ in babi.data]
    proba = question_blind_proba(paragraphs, distractors=True)
    assert ((proba == 0.5).sum(axis=1) == 2).all()
    accuracy = (question_blind_predictions(paragraphs, distractors=True) == babi.target).mean()
    from scipy.stats import binomtest

    assert binomtest(int(accuracy * 4000), 4000, 0.5).pvalue > 1e-3


def test_majority_class_and_bad_inputs():
    assert majority_class(["b", "a", "b", "a", "c"], n_samples=3).tolist() == ["a", "a", "a"]   # ties: the smallest
    with pytest.raises(ValueError, match="y_train must be a non-empty 1-D"):
        majority_class([], n_samples=2)
    with pytest.raises(ValueError, match="'n_samples' parameter of majority_class must be an int"):
        majority_class(["a"], n_samples=1.5)
    with pytest.raises(ValueError, match=r"paragraphs\[1\]: 'Mary took the apple.' is not a bAbI-1 move"):
        question_blind_proba(["Mary went to the garden.", "Mary took the apple."])
    with pytest.raises(TypeError, match="not a single str"):
        question_blind_proba("Mary went to the garden.")
    with pytest.raises(TypeError, match="'distractors' parameter of question_blind_proba must be an instance of"):
        question_blind_proba(["Mary went to the garden."], distractors=1)


def test_blind_predictor_picks_the_rule_of_the_dataset():
    babi = load_babi(1)
    base = blind_predictor(babi.train.data, babi.train.target, babi.test.data, babi.test.target, dataset_name="babi-1")
    paragraphs = [p for p, _ in babi.test.data]
    assert base.rule == "question-blind"
    np.testing.assert_array_equal(base.predictions, question_blind_predictions(paragraphs))
    assert base.accuracy == pytest.approx(np.mean(base.predictions == babi.test.target))
    other = blind_predictor(["x"] * 3, ["pos", "neg", "pos"], ["y", "z"], ["pos", "neg"], dataset_name="tweets")
    assert other.rule == "majority class" and other.predictions.tolist() == ["pos", "pos"] and other.accuracy == 0.5
    assert blind_predictor(["x"], ["a"], ["y"]).accuracy is None
    with pytest.raises(ValueError, match="y_test has 1 labels but X_test 2"):
        blind_predictor(["x"], ["a"], ["y", "z"], ["a"])
    with pytest.raises(TypeError, match="'dataset_name' parameter of blind_predictor must be an instance of 'str'"):
        blind_predictor(["x"], ["a"], ["y"], dataset_name=1)

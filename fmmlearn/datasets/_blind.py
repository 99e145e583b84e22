"""Input-blind predictors: the best a predictor can do without the part of the input the task is about.

A fine-tuned model has learnt the task only if it beats them (docs/datasets.md, "Input-blind
predictors"):

* :func:`majority_class` -- always the most frequent training label (any labelled data);
* :func:`question_blind_proba` / :func:`question_blind_predictions` -- generated bAbI-1 from the
  paragraphs alone: the exact posterior of the answer given the paragraph under
  :func:`~fmmlearn.datasets.make_babi`'s way of choosing questions, and its most likely answer;
* :func:`blind_predictor` -- the one of them that applies to a dataset, as a :class:`BlindPredictor`.

The old names ``blind_baseline`` and ``BlindBaseline`` still work, with a FutureWarning.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from numbers import Integral

import numpy as np
from sklearn.dummy import DummyClassifier
from sklearn.utils._param_validation import validate_params

from ..utils import StrictInterval, keyword_only, renamed_attributes
from .babi import BABI_LOCATIONS
from ..utils import keyword_only

__all__ = ["BlindPredictor", "blind_predictor", "majority_class", "question_blind_predictions",
           "question_blind_proba"]

_SENTENCE = re.compile(r"(?<=\.) ")
_MOVE = re.compile(r"^(\S+) .*\bto the (\w+)\.$")
_LOCATION_INDEX = {location: k for k, location in enumerate(BABI_LOCATIONS)}


def _moves(paragraph: str, i: int) -> list:
    """``[(person, location), ...]`` of a bAbI-1 paragraph, one per sentence."""
    moves = []
    for sentence in _SENTENCE.split(paragraph.strip()):
        match = _MOVE.match(sentence)
        if match is None or match.group(2) not in _LOCATION_INDEX:
            raise ValueError(f"paragraphs[{i}]: {sentence!r} is not a bAbI-1 move (expected '<person> ... to the "
                             f"<location>.' with a location among {list(BABI_LOCATIONS)}).")
        moves.append(match.groups())
    return moves


def _present(moves, t: int) -> list:
    """The people named in the first ``t`` sentences, in order of appearance."""
    return list(dict.fromkeys(person for person, _ in moves[:t]))


def _asked_person_posterior(moves, first_question: int) -> dict:
    """``P(the question is about p | paragraph)`` under make_babi's question rule.

    A question follows sentence ``first_question`` and then every second sentence; each asks about a
    person present then, uniformly among those not asked yet in the story (among all present once
    everyone was).  The paragraph ends at a question; the earlier questions are unseen, so their
    draws are summed over: a distribution over the set already asked, updated question by question.
    """
    asked_sets = {frozenset(): 1.0}
    for t in range(first_question, len(moves), 2):
        present, updated = _present(moves, t), defaultdict(float)
        for asked, probability in asked_sets.items():
            pool = [p for p in present if p not in asked] or present
            for person in pool:
                updated[asked | {person}] += probability / len(pool)
        asked_sets = updated
    present, posterior = _present(moves, len(moves)), defaultdict(float)
    for asked, probability in asked_sets.items():
        pool = [p for p in present if p not in asked] or present
        for person in pool:
            posterior[person] += probability / len(pool)
    return posterior


@validate_params({"distractors": ["boolean"]}, prefer_skip_nested_validation=True)
def question_blind_proba(paragraphs, *, distractors=False) -> np.ndarray:
    """Probability of each answer of generated bAbI-1 given the paragraph alone (no question).

    Exact under :func:`~fmmlearn.datasets.make_babi` (task 1): a question asks where a person present
    is, uniformly among those not asked yet in the story; the answer is that person's latest move.
    So ``P(answer = L | paragraph)`` sums, over the people whose latest move is to ``L``, the
    probability that the question is about them, with the unseen earlier questions of the story summed
    over.  No rule that ignores the question can be right more often, on average, than predicting the
    most probable answer (:func:`question_blind_predictions`).

    Parameters
    ----------
    paragraphs : sequence of str
        Segment A of bAbI-1 samples (sentences ``"<person> ... to the <location>."``).
    distractors : bool, default=False
        The paragraphs come from ``make_babi(1, distractors=True)``, whose first question follows the
        fourth sentence (not the second).  There every person present is equally likely to be asked,
        whatever the rule, so two locations are equally likely.

    Returns
    -------
    numpy.ndarray of shape (n_samples, 6)
        Columns in :data:`~fmmlearn.datasets.BABI_LOCATIONS` order; rows sum to 1.

    Raises
    ------
    ValueError
        A sentence that is not a bAbI-1 move.

    Examples
    --------
    >>> from fmmlearn.datasets import question_blind_proba
    >>> p = question_blind_proba(["Mary went to the garden. John moved to the office."])
    >>> p[0, :4].round(2).tolist()   # garden, hallway, kitchen, office
    [0.5, 0.0, 0.0, 0.5]
    """
    if isinstance(paragraphs, str):
        raise TypeError("paragraphs must be a sequence of str, not a single str.")
    proba = np.zeros((len(paragraphs), len(BABI_LOCATIONS)))
    for i, paragraph in enumerate(paragraphs):
        moves = _moves(paragraph, i)
        latest = dict(moves)  # person -> location of their latest move
        for person, probability in _asked_person_posterior(moves, 4 if distractors else 2).items():
            proba[i, _LOCATION_INDEX[latest[person]]] += probability
    return proba


@validate_params({"distractors": ["boolean"]}, prefer_skip_nested_validation=True)
def question_blind_predictions(paragraphs, *, distractors=False) -> np.ndarray:
    """The best question-ignoring answer of generated bAbI-1: the most probable one given the paragraph.

    The argmax of :func:`question_blind_proba` (ties: the first location in
    :data:`~fmmlearn.datasets.BABI_LOCATIONS` order).  Its accuracy is the ceiling of every model that
    ignores segment B: a fine-tuned model has learnt to read the question only if it does better.

    Parameters
    ----------
    paragraphs : sequence of str
    distractors : bool, default=False
        See :func:`question_blind_proba`.

    Returns
    -------
    numpy.ndarray of str, shape (n_samples,)

    Examples
    --------
    >>> from fmmlearn.datasets import make_babi, question_blind_predictions
    >>> babi = make_babi(1, n_samples=2000, random_state=0)
    >>> pred = question_blind_predictions([paragraph for paragraph, _ in babi.data])
    >>> bool(0.6 < (pred == babi.target).mean() < 0.7)
    True
    """
    proba = question_blind_proba(paragraphs, distractors=distractors)
    return np.asarray(BABI_LOCATIONS)[proba.argmax(axis=1)]


@keyword_only
@validate_params({"n_samples": [StrictInterval(Integral, 0, None, closed="left")]},
                 prefer_skip_nested_validation=True)
def majority_class(y_train, *, n_samples: int) -> np.ndarray:
    """``n_samples`` predictions of the most frequent label of ``y_train`` (ties: the smallest label).

    Parameters
    ----------
    y_train : array-like of labels
    n_samples : int
        Number of predictions.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> majority_class(["a", "b", "b"], n_samples=2).tolist()
    ['b', 'b']
    """
    y_train = np.asarray(y_train)
    if y_train.ndim != 1 or len(y_train) == 0:
        raise ValueError(f"y_train must be a non-empty 1-D array of labels; got shape {y_train.shape}.")
    dummy = DummyClassifier(strategy="most_frequent").fit(np.zeros((len(y_train), 1)), y_train)
    return dummy.predict(np.zeros((n_samples, 1)))


@dataclass(frozen=True)
class BlindPredictor:
    """What an input-blind predictor gets on a test split (:func:`blind_predictor`).

    Attributes
    ----------
    predictions : numpy.ndarray
        One label per test example, aligned with ``X_test``.
    rule : str
        ``"question-blind"`` (bAbI-1 paragraphs) or ``"majority class"``.
    accuracy : float or None
        Share of ``predictions`` equal to ``y_test`` (None without ``y_test``).
    """

    predictions: np.ndarray
    rule: str
    accuracy: float | None


#: Datasets whose best blind rule is :func:`question_blind_predictions` (names of the study and the paper).
_QUESTION_BLIND = ("babi-1", "babi1")


@keyword_only
@validate_params({"dataset_name": [str, None], "distractors": ["boolean"]}, prefer_skip_nested_validation=True)
def blind_predictor(X_train, y_train, X_test, y_test=None, *, dataset_name=None, distractors=False) -> BlindPredictor:
    """The best input-blind prediction of each test example of a dataset.

    For bAbI-1 (``dataset_name="babi-1"``) the best question-ignoring prediction from the paragraph
    (:func:`question_blind_predictions`; exact for generated data, a question-ignoring rule for
    Facebook's); for every other dataset the majority class of ``y_train``, which every model beats
    unless it ignores its input (for other pair tasks and bAbI-2/3 a model that ignores segment B can
    do better than that: the majority class is then a lower bound of the blind ceiling).

    Parameters
    ----------
    X_train : sequence of str or pairs
        Unused by both rules (kept so that a learnt blind rule fits the same call).
    y_train : array-like of labels
    X_test : sequence of str or ``(paragraph, question)`` pairs
    y_test : array-like of labels, optional
        Gold labels: ``accuracy`` is filled in.
    dataset_name : str, optional
        A name of :func:`fmmlearn.study.dataset_names` (``"babi-1"`` selects the question-blind rule).
    distractors : bool, default=False
        bAbI-1 generated with ``distractors=True`` (see :func:`question_blind_proba`).

    Returns
    -------
    BlindPredictor

    Examples
    --------
    >>> from fmmlearn.datasets import blind_predictor, load_babi
    >>> babi = load_babi(1)
    >>> base = blind_predictor(babi.train.data, babi.train.target, babi.test.data, babi.test.target,
    ...                        dataset_name="babi-1")
    >>> base.rule, 0.6 < base.accuracy < 0.7
    ('question-blind', True)
    """
    if dataset_name is not None and dataset_name.strip().lower().replace("_", "-") in _QUESTION_BLIND:
        paragraphs = [x[0] if isinstance(x, (tuple, list)) else x for x in X_test]
        predictions, rule = question_blind_predictions(paragraphs, distractors=distractors), "question-blind"
    else:
        predictions, rule = majority_class(y_train, n_samples=len(X_test)), "majority class"
    accuracy = None
    if y_test is not None:
        y_test = np.asarray(y_test)
        if len(y_test) != len(predictions):
            raise ValueError(f"y_test has {len(y_test)} labels but X_test {len(predictions)} examples.")
        accuracy = float(np.mean(predictions == y_test))
    return BlindPredictor(predictions=predictions, rule=rule, accuracy=accuracy)


#: Old names (issue 36) -> new names; they still work (pickles too), with a FutureWarning.
RENAMED = {"BlindBaseline": "BlindPredictor", "blind_baseline": "blind_predictor"}

__getattr__ = renamed_attributes(__name__, RENAMED, globals())

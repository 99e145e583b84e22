"""The supporting-fact test: does an explanation single out the occurrence of the answer the answer rests on?

On bAbI the answer word (a location) can occur several times in the paragraph: once in the
supporting fact, and elsewhere in sentences that are not (distractors, ``make_babi(1,
distractors=True)``).  Per example, the occurrences are ranked by their importance; the example
scores 1 when a supporting occurrence is ranked strictly above every other occurrence, and ``s / k``
when ``k`` occurrences tie at the top, ``s`` of them supporting.  Chance, the score of a ranking that
cannot tell occurrences apart, is the share of supporting occurrences (``1 / n`` with one supporting
occurrence among ``n``).  A model that ignores the question cannot know which occurrence the
question is about, so on distractor paragraphs it scores chance however its explanation is made;
only a model that reads the question can score above it (docs/faithfulness.md, "The supporting-fact
test").
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
import pandas as pd
from sklearn.utils._param_validation import StrOptions, validate_params

from ..utils import StrictInterval, mean_ci, positive_int

__all__ = ["SUPPORTING_FACT_COLUMNS", "SupportingFactReport", "occurrence_credit", "summarize_credits",
           "supporting_fact_credits", "supporting_fact_score"]

#: Columns of :attr:`SupportingFactReport.per_example`, in order.
SUPPORTING_FACT_COLUMNS = ("example", "n_occurrences", "n_supporting", "scored", "hit", "chance")
_AGGREGATES = {"sum": np.sum, "max": np.max, "mean": np.mean}
_TIES = {"tie_rtol": [StrictInterval(Real, 0, None, closed="left")]}
_SCORING = {**_TIES, "aggregate": [StrOptions(set(_AGGREGATES))]}
_SUMMARY = {"confidence_level": [StrictInterval(Real, 0, 1, closed="neither")], "n_resamples": [positive_int()],
            "random_state": [StrictInterval(Integral, 0, None, closed="left")]}


class SupportingFactReport(NamedTuple):
    """Result of :func:`supporting_fact_score`; unpacks as ``per_example, summary``.

    Attributes
    ----------
    per_example : pandas.DataFrame
        One row per example, columns :data:`SUPPORTING_FACT_COLUMNS`: ``n_occurrences`` of the answer
        in segment A, ``n_supporting`` of them in a supporting fact, ``scored`` (False when the example
        has no supporting occurrence or an occurrence has no token in the explanation, e.g. cut by
        truncation: then ``hit`` and ``chance`` are NaN), ``hit`` (the credit, in [0, 1]) and
        ``chance`` (``n_supporting / n_occurrences``).
    summary : dict
        ``n_examples``, ``n_scored``, ``n_informative`` (scored examples with chance below 1),
        ``hit_rate`` with its bootstrap CI ``hit_low``-``hit_high``, ``chance`` (mean), and
        ``lift = hit_rate - chance`` with the CI of the mean per-example difference
        ``lift_low``-``lift_high`` (above chance when ``lift_low > 0``).
    """

    per_example: pd.DataFrame
    summary: dict


@validate_params(_TIES, prefer_skip_nested_validation=True)
def occurrence_credit(importances, supporting, *, tie_rtol: float = 1e-5) -> tuple[float, float]:
    """``(hit, chance)`` of one example from the importances of the answer's occurrences.

    Parameters
    ----------
    importances : array-like of float
        One importance per occurrence of the answer.
    supporting : array-like of bool
        Whether each occurrence lies in a supporting fact.
    tie_rtol : float, default=1e-5
        Occurrences within ``tie_rtol * max |importance|`` of the top one tie with it (scores of equal
        contributions computed by different forward passes differ by rounding).

    Returns
    -------
    (hit, chance) : tuple of float
        ``hit`` = the share of supporting occurrences among those at the top; ``chance`` = the share
        of supporting occurrences.  NaN for an example without occurrences or supporting occurrences.

    Examples
    --------
    >>> occurrence_credit([0.9, 0.1], [True, False])
    (1.0, 0.5)
    >>> occurrence_credit([0.5, 0.5, 0.1], [False, True, False])
    (0.5, 0.3333333333333333)
    """
    importances = np.asarray(importances, dtype=np.float64)
    supporting = np.asarray(supporting, dtype=bool)
    if importances.shape != supporting.shape or importances.ndim != 1:
        raise ValueError(f"importances and supporting must be 1-D of the same length; got shapes "
                         f"{importances.shape} and {supporting.shape}.")
    if not supporting.any() or not np.isfinite(importances).all():
        return float("nan"), float("nan")
    top = importances.max()
    at_top = importances >= top - tie_rtol * np.abs(importances).max()
    return float(supporting[at_top].mean()), float(supporting.mean())


def _check_explanation(explanation) -> pd.DataFrame:
    needed = ["example", "char_start", "char_end", "importance"]
    if not isinstance(explanation, pd.DataFrame) or any(c not in explanation.columns for c in needed):
        raise TypeError(f"explanation must be the frame of explain() (columns {needed}); got "
                        f"{type(explanation).__name__}"
                        + (f" with columns {list(explanation.columns)}" if isinstance(explanation, pd.DataFrame)
                           else "") + ".")
    if "method" in explanation.columns and explanation["method"].nunique() > 1:
        raise ValueError(f"explanation holds several measures {sorted(explanation['method'].unique())}; score "
                         "one at a time (explanation[explanation.method == name]).")
    rows = explanation[explanation["segment"] == "A"] if "segment" in explanation.columns else explanation
    return pd.DataFrame(rows[needed])


@validate_params(_SCORING, prefer_skip_nested_validation=True)
def supporting_fact_credits(explanation, answer_spans, answer_supporting, *, aggregate: str = "sum",
                            tie_rtol: float = 1e-5) -> pd.DataFrame:
    """The per-example part of :func:`supporting_fact_score`: one row per example, :data:`SUPPORTING_FACT_COLUMNS`.

    Parameters are those of :func:`supporting_fact_score`.

    Returns
    -------
    pandas.DataFrame
    """
    rows = _check_explanation(explanation)
    if len(answer_spans) != len(answer_supporting) or any(
            len(s) != len(f) for s, f in zip(answer_spans, answer_supporting)):
        raise ValueError("answer_spans and answer_supporting must have the same length, and one flag per span "
                         "for every example.")
    if len(rows) and rows["example"].max() >= len(answer_spans):
        raise ValueError(f"the explanation has example {int(rows['example'].max())} but answer_spans only "
                         f"{len(answer_spans)} examples; pass the occurrences of the texts that were explained.")
    reduce, by_example = _AGGREGATES[aggregate], dict(tuple(rows.groupby("example", sort=False)))
    records = []
    for i, (spans, flags) in enumerate(zip(answer_spans, answer_supporting)):
        part = by_example.get(i)
        values = [_occurrence_importance(part, start, end, reduce) for start, end in spans]
        hit, chance = occurrence_credit(values, flags, tie_rtol=tie_rtol) if len(spans) else (np.nan, np.nan)
        records.append((i, len(spans), int(np.sum(flags, dtype=int)), bool(np.isfinite(hit)), hit, chance))
    return pd.DataFrame(records, columns=list(SUPPORTING_FACT_COLUMNS))


@validate_params({**_SCORING, **_SUMMARY}, prefer_skip_nested_validation=True)
def supporting_fact_score(explanation, answer_spans, answer_supporting, *, aggregate: str = "sum",
                          tie_rtol: float = 1e-5, confidence_level: float = 0.95, n_resamples: int = 9999,
                          random_state: int = 0) -> SupportingFactReport:
    """Score an explanation against the occurrences of the answer word (the supporting-fact test).

    Parameters
    ----------
    explanation : Explanation or pandas.DataFrame
        From :func:`fmmlearn.explain` (token or word level) of the texts whose occurrences are given,
        one measure; its ``example`` column indexes ``answer_spans``.  Only segment-A rows count
        (``char_start``/``char_end`` are offsets in the paragraph).
    answer_spans : sequence of sequences of (int, int)
        Per example, the character spans of every occurrence of the answer in the paragraph
        (``answer_spans`` of ``make_babi(1, distractors=True)``, or
        :func:`fmmlearn.datasets.answer_occurrences` for any bAbI data).
    answer_supporting : sequence of sequences of bool
        Per example and occurrence, whether it lies in a supporting fact.
    aggregate : {"sum", "max", "mean"}, default="sum"
        How the importances of the tokens of one occurrence combine (all occurrences of one answer
        word have the same tokens, so no choice favours one).
    tie_rtol : float, default=1e-5
        See :func:`occurrence_credit`.
    confidence_level : float, default=0.95
    n_resamples : int, default=9999
        Bootstrap resamples of the CIs (BCa over examples, seeded by ``random_state``).
    random_state : int, default=0

    Returns
    -------
    SupportingFactReport

    Raises
    ------
    TypeError
        ``explanation`` is not an explanation frame.
    ValueError
        Several measures in one frame, ``answer_spans`` and ``answer_supporting`` of different
        shapes, an ``example`` beyond ``answer_spans``, or an unknown ``aggregate``.

    Examples
    --------
    >>> import pandas as pd
    >>> e = pd.DataFrame({"example": 0, "char_start": [0, 10, 20], "char_end": [6, 16, 26],
    ...                   "importance": [0.2, 0.1, 0.9]})
    >>> report = supporting_fact_score(e, [[(0, 6), (20, 26)]], [[False, True]])
    >>> report.per_example[["hit", "chance"]].iloc[0].tolist()
    [1.0, 0.5]
    """
    per_example = supporting_fact_credits(explanation, answer_spans, answer_supporting, aggregate=aggregate,
                                          tie_rtol=tie_rtol)
    return SupportingFactReport(per_example, summarize_credits(per_example, confidence_level=confidence_level,
                                                               n_resamples=n_resamples, random_state=random_state))


def _occurrence_importance(part, start: int, end: int, reduce) -> float:
    """The combined importance of the explanation's tokens that overlap ``[start, end)`` (NaN if none)."""
    if part is None:
        return float("nan")
    inside = (part["char_start"].to_numpy() < end) & (part["char_end"].to_numpy() > start)
    return float(reduce(part["importance"].to_numpy()[inside])) if inside.any() else float("nan")


@validate_params(_SUMMARY, prefer_skip_nested_validation=True)
def summarize_credits(per_example: pd.DataFrame, *, confidence_level: float = 0.95, n_resamples: int = 9999,
                      random_state: int = 0) -> dict:
    """The summary of :class:`SupportingFactReport` from its per-example frame (hit rate, chance, lift, CIs)."""
    scored = per_example[per_example["scored"]]
    hit, chance = scored["hit"].to_numpy(), scored["chance"].to_numpy()
    options = {"confidence_level": confidence_level, "n_resamples": n_resamples, "random_state": random_state}
    hit_rate, hit_low, hit_high = mean_ci(hit, **options)
    lift, lift_low, lift_high = mean_ci(hit - chance, **options)
    return {"n_examples": len(per_example), "n_scored": len(scored), "n_informative": int((chance < 1).sum()),
            "hit_rate": hit_rate, "hit_low": hit_low, "hit_high": hit_high,
            "chance": float(chance.mean()) if len(chance) else float("nan"),
            "lift": lift, "lift_low": lift_low, "lift_high": lift_high}

"""The long frames of an explanation: one row per token or word, and the per-example table (texts,
predictions, gold labels) that travels with them (:class:`~fmmlearn.explanation.Explanation`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..encoding import SEGMENT_A, SEGMENT_B
from ..modeling import probabilities
from ..utils import keyword_only

__all__ = ["AGGREGATES", "aggregate_words", "example_table", "token_frame", "word_frame"]

#: How the subword scores of a word combine (``explain(..., level="word")``, :meth:`Explanation.words`).
AGGREGATES = ("sum", "mean", "max")


_SEGMENT_NAMES = {SEGMENT_A: "A", SEGMENT_B: "B"}


def _segment_text(encoding, i: int, segment_id: int) -> str:
    text = encoding.texts[i]
    return text[segment_id] if encoding.is_pair else text


@keyword_only
def token_frame(clf, encoding, scores, targets_idx, *, method: str, segment: str = "first") -> pd.DataFrame:
    """One row per explained token: the long format :func:`explain` returns.

    Parameters
    ----------
    clf : FaithfulTextClassifier
    encoding : Encoding
    scores : list of ndarray
        From :func:`explain_encoded`.
    targets_idx : ndarray of int
    method : str
    segment : {"first", "all"}

    Returns
    -------
    pandas.DataFrame
    """
    parts = []
    for i, ids in enumerate(encoding.input_ids):
        seg = encoding.segment_ids[i]
        keep = (seg == SEGMENT_A) | ((seg == SEGMENT_B) & (segment == "all"))
        keep &= ~encoding.special_tokens_mask[i]
        pos = np.flatnonzero(keep)
        parts.append(pd.DataFrame({
            "example": i,
            "position": pos,
            "token_id": ids[pos],
            "segment": seg[pos],
            "word": encoding.word_ids[i][pos],
            "char_start": encoding.offsets[i][pos, 0],
            "char_end": encoding.offsets[i][pos, 1],
            "importance": scores[i][pos].astype(np.float64),
        }))
    frame = pd.concat(parts, ignore_index=True)
    frame.insert(2, "token", clf.tokenizer_.convert_ids_to_tokens(frame["token_id"].tolist()))
    frame["segment"] = frame["segment"].map(_SEGMENT_NAMES)
    frame["target"] = clf.classes_[np.asarray(targets_idx)[frame["example"].to_numpy()]]
    frame["method"] = method
    frame["truncated"] = encoding.truncated[frame["example"].to_numpy()]
    return frame


_WORD_COLUMNS = ["example", "segment", "word", "text", "position", "n_tokens", "char_start", "char_end",
                 "importance", "target", "method", "truncated"]


def aggregate_words(frame: pd.DataFrame, segment_texts, aggregate: str) -> pd.DataFrame:
    """Group a token frame into words; ``segment_texts(words)`` gives each word's segment text.

    Columns beyond the token format (e.g. ``model`` of concatenated
    explanations) become grouping keys, so several explanations stacked in
    one frame are aggregated each on its own.
    """
    extra = [c for c in frame.columns if c not in _TOKEN_COLUMNS]
    run = [c for c in ("method", *extra) if c in frame.columns]
    keys = ["example", "segment", "word", *run]
    words = frame.groupby(keys, sort=False, as_index=False, dropna=False).agg(
        position=("position", "min"),
        n_tokens=("position", "size"),
        char_start=("char_start", "min"),
        char_end=("char_end", "max"),
        importance=("importance", aggregate),
        target=("target", "first"),
        truncated=("truncated", "first"),
    )
    words["text"] = [text[a:b] for text, a, b in zip(segment_texts(words), words["char_start"], words["char_end"])]
    if run:  # keep the stacked explanations in their order, each sorted like explain() sorts
        words["_run"] = words.groupby(run, sort=False, dropna=False).ngroup()
    order = (["_run"] if run else []) + ["example", "position"]
    words = words.sort_values(order, kind="stable").reset_index(drop=True)
    return words[[c for c in _WORD_COLUMNS if c in words.columns] + extra]


@keyword_only
def word_frame(frame: pd.DataFrame, encoding, *, aggregate: str = "sum") -> pd.DataFrame:
    """Aggregate a token frame to words (the tokenizer's word ids within each segment).

    Parameters
    ----------
    frame : pandas.DataFrame
        From :func:`token_frame`.
    encoding : Encoding
    aggregate : {"sum", "mean", "max"}, default="sum"
        How the subword scores of a word combine.

    Returns
    -------
    pandas.DataFrame
        One row per word: ``example``, ``segment``, ``word``, ``text`` (the
        original text slice), ``position`` (of the first subword), ``n_tokens``,
        ``char_start``, ``char_end``, ``importance``, ``target``, ``method``,
        ``truncated``.
    """
    def segment_texts(words):
        segment_ids = words["segment"].map(_SEGMENT_IDS)
        return [_segment_text(encoding, i, s) for i, s in zip(words["example"], segment_ids)]

    return aggregate_words(frame, segment_texts, aggregate)


_TOKEN_COLUMNS = ["example", "position", "token", "token_id", "segment", "word", "char_start", "char_end",
                  "importance", "target", "method", "truncated"]


_SEGMENT_IDS = {name: sid for sid, name in _SEGMENT_NAMES.items()}


def _segment_end(encoding, i: int, segment_id: int) -> int:
    """Where the model's view of a segment's text ends: the last character of its last token."""
    ends = encoding.offsets[i][encoding.segment_ids[i] == segment_id, 1]
    return int(ends.max()) if len(ends) else 0


@keyword_only
def example_table(clf, encoding, logits, gold_idx, *, measure) -> pd.DataFrame:
    """The per-example facts an :class:`Explanation` keeps (see :attr:`Explanation.examples`).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    encoding : Encoding
    logits : ndarray of shape (n_samples, n_classes)
        ``clf.encoded_logits(encoding)``.
    gold_idx : ndarray of int or None
        Gold labels as class indices, if known.
    measure : ImportanceMethod

    Returns
    -------
    pandas.DataFrame
    """
    proba = probabilities(logits)
    best = proba.argmax(axis=1)
    n = len(encoding)
    table = {"example": np.arange(n, dtype=np.int64), "method": measure.name}
    if encoding.is_pair:
        table["text"] = [t[0] for t in encoding.texts]
        table["text_pair"] = [t[1] for t in encoding.texts]
    else:
        table["text"] = list(encoding.texts)
    table["text_end"] = np.array([_segment_end(encoding, i, SEGMENT_A) for i in range(n)], dtype=np.int64)
    if encoding.is_pair:
        table["text_pair_end"] = np.array([_segment_end(encoding, i, SEGMENT_B) for i in range(n)], dtype=np.int64)
    table["n_tokens"] = encoding.lengths
    table["truncated"] = np.asarray(encoding.truncated, dtype=bool)
    table["predicted"] = clf.classes_[best]
    table["probability"] = proba[np.arange(n), best]
    table["gold"] = clf.classes_[gold_idx] if gold_idx is not None else np.full(n, None, dtype=object)
    table["signed"] = bool(measure.signed)
    return pd.DataFrame(table)

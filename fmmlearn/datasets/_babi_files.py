"""The original bAbI data (Weston et al., 2015) as the paper's (paragraph, question) examples.

Facebook's bAbI files hold stories of numbered lines: statements, and
questions with their answer and the line numbers of the supporting facts::

    1 Mary moved to the bathroom.
    2 John went to the hallway.
    3 Where is Mary? \tbathroom\t1

A story restarts at line 1.  The Hugging Face dataset ``facebook/babi_qa``
keeps one row per story with the lines as parallel lists (``story`` =
``{"id", "type", "text", "supporting_ids", "answer"}``, ``type`` 0 for a
statement and 1 for a question).  Both become one example per question, as in
the paper: the paragraph is the story's statements so far joined by single
spaces (questions are not added), the question is segment B, and the
supporting facts are re-indexed to paragraph sentences, exactly like
:func:`fmmlearn.datasets.make_babi`'s examples.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["BABI_HUB_PATH", "babi_hub_config", "examples_from_stories", "find_babi_files", "read_babi_text"]

#: Hugging Face dataset id of Facebook's bAbI tasks.
BABI_HUB_PATH = "facebook/babi_qa"
_STORY_FIELDS = ("id", "type", "text", "supporting_ids", "answer")
_QUESTION = (1, "question")


def babi_hub_config(task: int) -> str:
    """Configuration of ``facebook/babi_qa`` for the paper's bAbI-``task``: the 10k-example English set."""
    return f"en-10k-qa{task}"


def read_babi_text(path) -> pd.DataFrame:
    """One of Facebook's original bAbI files (e.g. ``en-10k/qa1_single-supporting-fact_train.txt``).

    Returns
    -------
    pandas.DataFrame
        One row per story, column ``story`` in the hub's layout.
    """
    path = Path(path)
    stories, current = [], None
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            head, _, rest = line.rstrip("\n").partition(" ")
            if not head.isdigit():
                raise ValueError(f"{path}, line {number}: expected '<line id> <text>' as in the bAbI files; "
                                 f"got {line.strip()!r}.")
            if head == "1" or current is None:
                current = {field: [] for field in _STORY_FIELDS}
                stories.append(current)
            parts = rest.split("\t")
            question = len(parts) > 1
            current["id"].append(head)
            current["type"].append(1 if question else 0)
            current["text"].append(parts[0].strip())
            current["answer"].append(parts[1].strip() if question else "")
            current["supporting_ids"].append(parts[2].split() if question and len(parts) > 2 else [])
    return pd.DataFrame({"story": stories})


def _story_lines(story, where):
    """``(id, is_question, text, answer, supporting_ids)`` per line of a story in either layout."""
    if isinstance(story, Mapping):           # the hub's parallel lists (numpy arrays after to_pandas)
        missing = [f for f in _STORY_FIELDS if f not in story]
        if missing:
            raise ValueError(f"{where}: a story lacks field(s) {missing}; expected the layout of "
                             f"{BABI_HUB_PATH!r} ({', '.join(_STORY_FIELDS)}).")
        columns = [list(story[f]) for f in _STORY_FIELDS]
        lines = [dict(zip(_STORY_FIELDS, values)) for values in zip(*columns)]
    else:                                    # a list of line records
        lines = list(story)
    for line in lines:
        kind = line["type"]
        kind = kind.item() if hasattr(kind, "item") else kind
        yield (str(line["id"]), kind in _QUESTION, str(line["text"]).strip(), str(line["answer"]).strip(),
               [str(i) for i in np.ravel(line["supporting_ids"])])


def examples_from_stories(stories, where: str = "bAbI") -> pd.DataFrame:
    """One example per question of the given stories, in story order.

    Parameters
    ----------
    stories : sequence
        Stories in the hub's layout (a mapping of parallel lists) or as lists
        of line records with the same keys.
    where : str
        Names the source in error messages.

    Returns
    -------
    pandas.DataFrame
        Columns ``paragraph``, ``question``, ``answer``, ``supporting_facts``
        (sorted 0-based paragraph sentence indices), ``supporting_spans``
        (their ``(start, end)`` character spans in the paragraph) and
        ``story`` (the story's position in ``stories``).

    Raises
    ------
    ValueError
        If a question's supporting line is not a statement seen before it.
    """
    rows = []
    for story_id, story in enumerate(stories):
        sentences, sentence_of, starts = [], {}, []
        paragraph = ""
        for line_id, is_question, text, answer, supporting in _story_lines(story, where):
            if not is_question:
                sentence_of[line_id] = len(sentences)
                starts.append(len(paragraph) + (1 if paragraph else 0))
                paragraph = f"{paragraph} {text}" if paragraph else text
                sentences.append(text)
                continue
            unknown = [i for i in supporting if i not in sentence_of]
            if unknown:
                raise ValueError(f"{where}: story {story_id}, question {text!r} names supporting line(s) {unknown} "
                                 "that are not statements before it.")
            facts = sorted({sentence_of[i] for i in supporting})
            spans = [(starts[j], starts[j] + len(sentences[j])) for j in facts]
            rows.append((paragraph, text, answer, facts, spans, story_id))
    return pd.DataFrame(rows, columns=["paragraph", "question", "answer", "supporting_facts", "supporting_spans",
                                       "story"])


def find_babi_files(data_dir: Path, task: int, source_split: str) -> list[Path]:
    """Facebook's original file of ``task`` and ``source_split`` under ``data_dir`` (the en-10k set).

    Looks for ``qa<task>_*_<split>.txt`` (e.g. in the extracted
    ``tasks_1-20_v1-2/en-10k/``); when several sets are present, the one in
    a directory named ``en-10k`` wins.

    Raises
    ------
    ValueError
        If several candidates remain.
    """
    found = sorted(data_dir.rglob(f"qa{task}_*_{source_split}.txt"))
    if len(found) <= 1:
        return found
    en_10k = [path for path in found if path.parent.name == "en-10k"]
    if len(en_10k) == 1:
        return en_10k
    raise ValueError(f"data_dir {data_dir} holds several bAbI files for task {task}, split {source_split!r} "
                     f"({', '.join(str(p.relative_to(data_dir)) for p in found)}); point data_dir at the "
                     "'en-10k' directory of the extracted tasks_1-20_v1-2 archive.")

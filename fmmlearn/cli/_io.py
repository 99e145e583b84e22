"""Reading and writing the commands' tables (CSV, TSV, JSON Lines, JSON, Parquet, through pandas) and checking output paths before any model work.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

__all__ = ["DATA_SUFFIXES", "HTML_SUFFIXES", "TABLE_SUFFIXES", "check_model_dir", "check_output_path", "empty_text_rows", "has_parquet", "labels_from", "plot_suffixes", "read_table", "records", "subsample", "summary_path", "texts_from", "write_table"]


#: Data files the commands read, by suffix.
DATA_SUFFIXES = (".csv", ".txt", ".tsv", ".jsonl", ".ndjson", ".json", ".parquet", ".pq")


#: Tables the commands write, by suffix.
TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".parquet", ".pq", ".html", ".htm")


#: HTML pages.
HTML_SUFFIXES = (".html", ".htm")


_INTEGER = re.compile(r"[+-]?\d+")


def _read_frame(path: Path, suffix: str):
    """The raw table; delimited text is read as strings, empty fields as ``""`` (never NaN)."""
    import pandas as pd

    if suffix in (".csv", ".txt", ".tsv"):
        # index_col=False: a row with more fields than the header is an error, not a silent index.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype=str, keep_default_na=False,
                                index_col=False)
        for warning in caught:
            if issubclass(warning.category, pd.errors.ParserWarning):
                raise ValueError(str(warning.message))
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        return frame
    if suffix in (".jsonl", ".ndjson", ".json"):
        # dtype=False: "12" stays a string, and no column is guessed to hold dates.
        return pd.read_json(path, lines=suffix != ".json", dtype=False)
    return pd.read_parquet(path)


def read_table(path: str, columns=()):
    """Read a data table by suffix and check that it has ``columns``.

    CSV and TSV are read as text: every value is a string (``"12"``,
    ``"None"`` and ``"NA"`` stay texts, an empty field is ``""``).  JSON and
    Parquet keep their stored types.

    Raises
    ------
    FileNotFoundError, ValueError
        A missing file, an unsupported suffix, an unreadable table or a
        missing column (the message lists the table's columns).
    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in DATA_SUFFIXES:
        raise ValueError(f"unsupported data file type {suffix or '(none)'!r} of {path!r}; use "
                         ".csv, .tsv, .jsonl, .json or .parquet")
    if not file.is_file():
        raise FileNotFoundError(f"data file {path!r} does not exist")
    try:
        frame = _read_frame(file, suffix)
    except (ValueError, OSError) as error:  # pandas' and pyarrow's parse errors are ValueErrors
        if isinstance(error, FileNotFoundError):
            raise
        hint = " (is it UTF-8 text?)" if isinstance(error, UnicodeDecodeError) else ""
        raise ValueError(f"cannot read {path} as a {suffix[1:].upper()} table: {error}{hint}") from error
    missing = [c for c in dict.fromkeys(columns) if c is not None and c not in frame.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in {path}; its columns are {list(map(str, frame.columns))} "
                         "(choose them with --text-col, --pair-col, --label-col)")
    return frame


def texts_from(frame, text_col: str, pair_col: str | None, path: str = "the data"):
    """The X of a table: a text column, or two columns for sentence pairs; every value must be a string."""
    for col in filter(None, (text_col, pair_col)):
        bad = [i for i, v in enumerate(frame[col].tolist()) if not isinstance(v, str)]
        if bad:
            value = frame[col].iloc[bad[0]]
            raise ValueError(f"column {col!r} of {path} must hold texts, but row(s) {bad[:5]} hold "
                             f"{value!r} ({type(value).__name__}); store them as strings")
    if pair_col:
        return frame[[text_col, pair_col]]
    return frame[text_col]


def empty_text_rows(frame, columns) -> list:
    """Rows (0-based, header not counted) whose cell in any of ``columns`` is empty or whitespace only."""
    rows = set()
    for col in filter(None, columns):
        rows.update(i for i, v in enumerate(frame[col].tolist()) if isinstance(v, str) and not v.strip())
    return sorted(rows)


def labels_from(frame, label_col: str, path: str = "the data", classes=None):
    """The y of a table, as the labels the model knows.

    Without ``classes`` (fitting), string labels that are all integers
    (``"0"``, ``"-1"``) become ints and other strings stay strings.  With a
    fitted model's ``classes``, each label is matched to the class of the
    same text (``"1"`` -> ``1``), so a table read as text meets a model
    trained on ints; an unknown label is left as is (the library names it).
    """
    import numpy as np

    values = frame[label_col].tolist()
    missing = [i for i, v in enumerate(values) if v is None or v == "" or (isinstance(v, float) and np.isnan(v))]
    if missing:
        raise ValueError(f"column {label_col!r} of {path} has no label in row(s) {missing[:5]}"
                         f"{' ...' if len(missing) > 5 else ''}")
    if classes is not None:
        by_text = {str(c): c for c in classes.tolist()}
        return np.asarray([by_text.get(str(v), v) for v in values], dtype=object)
    if all(isinstance(v, str) for v in values) and all(_INTEGER.fullmatch(v.strip()) for v in values):
        return np.asarray([int(v) for v in values], dtype=np.int64)
    return np.asarray(values, dtype=object)


def write_table(frame, path: str) -> None:
    """Write a DataFrame by suffix (CSV, TSV, JSON Lines, Parquet or HTML); the path is checked beforehand."""
    from ..utils import atomic_write

    suffix = Path(path).suffix.lower()
    writers = {
        ".csv": lambda tmp: frame.to_csv(tmp, index=False),
        ".tsv": lambda tmp: frame.to_csv(tmp, sep="\t", index=False),
        ".jsonl": lambda tmp: frame.to_json(tmp, orient="records", lines=True, force_ascii=False),
        ".parquet": lambda tmp: frame.to_parquet(tmp, index=False),
        ".html": lambda tmp: tmp.write_text(frame.to_html(index=False), encoding="utf-8"),
    }
    writers.update({".ndjson": writers[".jsonl"], ".pq": writers[".parquet"], ".htm": writers[".html"]})
    if suffix not in writers:  # check_output_path rejects these before any work
        raise ValueError(f"unsupported output type {suffix!r}; use one of {', '.join(TABLE_SUFFIXES)}")
    atomic_write(path, writers[suffix])  # a failed write leaves the previous file; the error names ``path``


def plot_suffixes() -> tuple:
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted("." + s for s in FigureCanvasBase.get_supported_filetypes()))


def _check_writable_dir(directory: Path, option: str, path) -> None:
    """``directory`` exists and is writable, or can be created (its first existing ancestor is a writable dir)."""
    existing = directory.resolve()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{option} {str(path)!r}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {str(path)!r}: cannot write into {existing} (permission denied)")


def _same_file(a, b) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def check_output_path(path, option: str, suffixes, inputs=()) -> None:
    """Fail before any work when ``path`` cannot be written: wrong suffix, a directory, an input, no write access."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in suffixes:
        raise ValueError(f"{option} {str(path)!r}: unsupported file type {suffix or '(none)'!r}; use one of "
                         f"{', '.join(suffixes)}")
    if target.is_dir():
        raise ValueError(f"{option} {str(path)!r} is a directory; give a file name")
    for source in inputs:
        if source is not None and target.exists() and _same_file(target, source):
            raise ValueError(f"{option} {str(path)!r} is also an input; writing it would destroy the input")
    _check_writable_dir(target.parent, option, path)


def check_model_dir(path, option: str = "--output") -> None:
    """A directory a model may be saved to: new, empty, or holding a saved fmmlearn model (which is replaced)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise ValueError(f"{option} {str(path)!r} is a file; give a directory to save the model in")
    if target.is_dir() and any(target.iterdir()) and not (target / "fmmlearn.json").is_file():
        raise ValueError(f"{option} {str(path)!r} is a non-empty directory that holds no saved fmmlearn model; "
                         "refusing to write into it: choose a new directory")
    _check_writable_dir(target if target.exists() else target.parent, option, path)


def summary_path(curves_path: str) -> str:
    """Where the faithfulness summary goes by default: ``curves.csv`` -> ``curves.summary.csv``."""
    curves = Path(curves_path)
    return str(curves.with_name(f"{curves.stem}.summary{curves.suffix}"))


def records(frame) -> list:
    """A DataFrame as JSON records (NaN as null, numpy types as Python's)."""
    return json.loads(frame.to_json(orient="records", force_ascii=False))


def subsample(X, y, max_samples, random_state):
    """At most ``max_samples`` examples, drawn stratified by label and kept in input order."""
    import numpy as np
    from sklearn.utils import resample

    if max_samples is None or max_samples >= len(y):
        return X, y
    if max_samples < 1:
        raise ValueError(f"--max-samples must be a positive integer, got {max_samples}")
    keep = np.sort(resample(np.arange(len(y)), replace=False, n_samples=max_samples,
                            stratify=np.asarray(y).astype(str), random_state=random_state))
    return X.iloc[keep].reset_index(drop=True), y[keep]


def has_parquet() -> bool:
    import importlib.util

    return any(importlib.util.find_spec(name) is not None for name in ("pyarrow", "fastparquet"))

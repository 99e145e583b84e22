"""The data an :class:`~fmmlearn.explanation.Explanation` carries besides its rows (pandas only).

An explanation frame has one row per token (or word).  What a reader needs to
make sense of it lives once per *example* in a small side table: the original
texts, how far the model saw them (truncation), the predicted label and its
probability, the gold label and whether the measure is signed.  This module
defines that table, finds the row of the table that belongs to a group of
frame rows, merges the tables of concatenated explanations, and writes frames
to JSON and back exactly (the heatmap, ``_heatmap``, reads the table
too, so nothing here imports torch or the explanation code).
"""

from __future__ import annotations

import json
import math
import numbers

import numpy as np
import pandas as pd

__all__ = ["EXAMPLE_VALUES", "ROW_COLUMNS", "dumps", "frame_from_dict", "frame_to_dict", "key_columns", "lookup",
           "merge_example_tables", "tag_run_columns"]

#: Per-example facts (everything in an example table that is not a key).
EXAMPLE_VALUES = ("text", "text_pair", "text_end", "text_pair_end", "n_tokens", "truncated", "predicted",
                  "probability", "gold", "signed")

#: Columns of token- and word-level frames that vary from row to row (never a run key).
ROW_COLUMNS = frozenset({"example", "position", "token", "token_id", "segment", "word", "text", "n_tokens",
                         "char_start", "char_end", "importance", "target", "truncated"})


# --------------------------------------------------------------------------- the example table


def key_columns(table: pd.DataFrame) -> list[str]:
    """``example`` followed by the run keys of ``table`` (``method``, ``model``, ...)."""
    return ["example"] + [c for c in table.columns if c not in EXAMPLE_VALUES and c != "example"]


def tag_run_columns(table: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """Copy the run-identifying columns of ``frame`` into its example table.

    A column that is not a per-row column and holds a single value in
    ``frame`` (e.g. ``model`` added with ``frame.assign(model="masked")``)
    tells this frame's examples apart from those of another frame once both
    are concatenated, so it becomes a key of the table.
    """
    if len(frame) == 0:
        return table
    tags = {}
    for column in frame.columns:
        if column in ROW_COLUMNS or column in table.columns:
            continue
        values = frame[column]
        first = values.iloc[0]
        try:
            hash(first)
        except TypeError:
            continue
        if values.nunique(dropna=False) == 1:
            tags[column] = first
    return table.assign(**tags) if tags else table


def merge_example_tables(objs) -> pd.DataFrame | None:
    """The example table of ``pd.concat(objs)``: every input's table, tagged with its run columns."""
    tables = []
    for obj in objs:
        table = getattr(obj, "_examples", None)
        if isinstance(table, pd.DataFrame):
            tables.append(tag_run_columns(table, obj) if isinstance(obj, pd.DataFrame) else table)
    if not tables:
        return None
    if len(tables) == 1:
        return tables[0]
    merged = pd.concat(tables, ignore_index=True)
    return merged.drop_duplicates(ignore_index=True)


def lookup(table: pd.DataFrame, keys: pd.DataFrame, columns) -> pd.DataFrame:
    """The example-table ``columns`` for each row of ``keys``, in the order of ``keys``.

    Rows are matched on ``example`` and on every run key the table and
    ``keys`` share (a table key that ``keys`` lacks is ignored).  Rows without
    a match get missing values.

    Raises
    ------
    ValueError
        When one key matches rows of the table that disagree (the frame mixes
        explanations that nothing in it tells apart).
    """
    columns = [c for c in columns if c in table.columns]
    on = [c for c in key_columns(table) if c in keys.columns]
    candidates = table[on + columns].drop_duplicates()
    clash = candidates.duplicated(subset=on, keep=False)
    if clash.any():
        first = candidates.loc[clash, on].iloc[0].to_dict()
        raise ValueError(
            f"the explanation's per-example data is ambiguous for {first}: several explanations with different "
            f"texts or predictions share these keys. Before concatenating explanations of different models or "
            f"texts, give each a distinguishing column (e.g. explanation.assign(model='masked')) or renumber "
            f"'example'.")
    return keys[on].merge(candidates, on=on, how="left", sort=False)[columns]


# --------------------------------------------------------------------------- exact JSON


def _is_missing(value) -> bool:
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def _plain(value):
    """A JSON-ready Python value (numpy scalars unwrapped, missing values as ``None``)."""
    if isinstance(value, np.generic):
        value = value.item()
    if _is_missing(value):
        return None
    if isinstance(value, (str, bool, numbers.Integral, float)):
        return value
    raise TypeError(f"cannot write a value of type {type(value).__name__} ({value!r}) to JSON; convert the "
                    f"column to str, numbers or bool first.")


def _column_to_dict(values: pd.Series | pd.Index) -> dict:
    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return {"dtype": "category", "ordered": bool(dtype.ordered),
                "categories": _column_to_dict(pd.Index(dtype.categories)),
                "values": [_plain(v) for v in values.astype(object).tolist()]}
    if dtype.kind in "mM" or str(dtype).startswith(("datetime", "timedelta", "period", "interval")):
        raise TypeError(f"cannot write a column of dtype {dtype} to JSON; convert it to str first.")
    return {"dtype": str(dtype), "values": [_plain(v) for v in values.tolist()]}


def _column_from_dict(spec: dict):
    if spec["dtype"] == "category":
        categories = pd.Index(_column_from_dict(spec["categories"]))
        return pd.Categorical(spec["values"], categories=categories, ordered=spec["ordered"])
    if spec["dtype"] == "object":
        values = np.empty(len(spec["values"]), dtype=object)
        values[:] = spec["values"]
        return values
    return pd.array(spec["values"], dtype=spec["dtype"])


def _index_to_dict(index: pd.Index) -> dict:
    if isinstance(index, pd.MultiIndex):
        raise ValueError("cannot write a frame with a MultiIndex to JSON; call reset_index() first.")
    if isinstance(index, pd.RangeIndex):
        return {"range": [index.start, index.stop, index.step], "name": _plain(index.name)}
    return {"name": _plain(index.name), **_column_to_dict(index)}


def _index_from_dict(spec: dict) -> pd.Index:
    if "range" in spec:
        return pd.RangeIndex(*spec["range"], name=spec["name"])
    return pd.Index(_column_from_dict(spec), name=spec["name"])


def frame_to_dict(frame: pd.DataFrame) -> dict:
    """A JSON-ready dict that :func:`frame_from_dict` turns back into an equal frame (dtypes, index, floats).

    Floats are written by :mod:`json` (shortest repr that round-trips), not
    by pandas' writer, which keeps at most 15 significant digits.
    """
    names = list(frame.columns)
    for name in names:
        if not isinstance(name, (str, numbers.Integral)) or isinstance(name, bool):
            raise TypeError(f"cannot write column name {name!r} to JSON; use str column names.")
    return {
        "index": _index_to_dict(frame.index),
        "columns_dtype": str(frame.columns.dtype),
        "columns": [{"name": _plain(name), **_column_to_dict(frame.iloc[:, j])} for j, name in enumerate(names)],
    }


def frame_from_dict(data: dict) -> pd.DataFrame:
    """The frame :func:`frame_to_dict` wrote."""
    index = _index_from_dict(data["index"])
    names = [column["name"] for column in data["columns"]]
    frame = pd.DataFrame({j: _column_from_dict(column) for j, column in enumerate(data["columns"])}, index=index)
    frame.columns = pd.Index(names, dtype=data["columns_dtype"])
    return frame


def dumps(document: dict, indent=None) -> str:
    """``json.dumps`` that refuses NaN (missing values are already ``None``)."""
    return json.dumps(document, indent=indent, allow_nan=False, ensure_ascii=False)

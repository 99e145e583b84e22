"""Self-contained HTML: explanation heatmaps and notebook displays of reports.

:func:`explanation_html` draws token (or word) importances over the
**original text**: the spans come from the character offsets, so spacing,
punctuation and casing are the user's.  One colour scale per page (per
measure) by default, with a numeric colour bar; a diverging blue-red palette
for signed measures and a sequential green one for unsigned measures (both
ColorBrewer, colour-blind safe), the sign taken from the measure's registry
entry (:func:`fmmlearn.importance.get_method`).  Several methods or models
are shown side by side as facets.  :func:`report_html` renders a faithfulness
or in-distribution report as a table plus its plot.

The HTML has no scripts and loads nothing: a scoped ``<style>`` block (every
class starts with ``fmm-``) and inline colours, rendered from Jinja2
templates with autoescaping, so it looks the same in Jupyter, VS Code, Colab,
a browser or an e-mail attachment.  This module needs only pandas, numpy and
jinja2; matplotlib when a report plot is drawn, and the measure registry
(:mod:`fmmlearn.importance`) only for a plain frame whose signedness is not
recorded.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..utils import environment, number, write_page
from ._data import EXAMPLE_VALUES, ROW_COLUMNS, lookup

__all__ = ["SIGNED_PALETTE", "UNSIGNED_PALETTE", "explanation_html"]

#: Diverging palette of signed measures, from most negative to most positive (ColorBrewer RdBu, 9 classes):
#: blue speaks against the explained class, red for it.
SIGNED_PALETTE = ("#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d", "#b2182b")
#: Sequential palette of unsigned measures, from 0 to the largest score (ColorBrewer Greens, 9 classes).
UNSIGNED_PALETTE = ("#f7fcf5", "#e5f5e0", "#c7e9c0", "#a1d99b", "#74c476", "#41ab5d", "#238b45", "#006d2c", "#00441b")

SCALES = ("page", "example")
#: Columns that identify one explanation among several stacked in a frame (candidates for facets).
RUN_COLUMNS = ("model", "method")

# Black (not the page's dark grey) on light cells: with black or white, every background reaches WCAG AA (4.5:1).
_DARK_TEXT, _LIGHT_TEXT = "#000000", "#ffffff"
_SEGMENT_ORDER = {"A": 0, "B": 1}


# --------------------------------------------------------------------------- colours


def _rgb(palette) -> np.ndarray:
    return np.array([[int(h[i:i + 2], 16) for i in (1, 3, 5)] for h in palette], dtype=np.float64)


def _interpolate(palette, x: np.ndarray) -> np.ndarray:
    """RGB rows of ``palette`` linearly interpolated at ``x`` in [0, 1]."""
    stops = _rgb(palette)
    grid = np.linspace(0.0, 1.0, len(stops))
    return np.stack([np.interp(x, grid, stops[:, k]) for k in range(3)], axis=-1)


def _hex(rgb: np.ndarray) -> list[str]:
    return ["#%02x%02x%02x" % tuple(int(round(c)) for c in row) for row in np.atleast_2d(rgb)]


def _relative_luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG 2 relative luminance of sRGB rows (0-255)."""
    c = np.asarray(rgb, dtype=np.float64) / 255.0
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def _text_colors(rgb: np.ndarray) -> list[str]:
    """Dark or white text, whichever has the higher WCAG contrast ratio with each background."""
    lum = _relative_luminance(rgb)
    dark = _relative_luminance(_rgb([_DARK_TEXT]))[0]
    with_dark = (lum + 0.05) / (dark + 0.05)
    with_white = 1.05 / (lum + 0.05)
    return [_LIGHT_TEXT if w > d else _DARK_TEXT for w, d in zip(with_white, with_dark)]


def _positions(values: np.ndarray, vmax: float, signed: bool) -> np.ndarray:
    """Where each score falls on its palette, in [0, 1]."""
    t = np.nan_to_num(np.asarray(values, dtype=np.float64) / vmax, nan=0.0, posinf=1.0, neginf=-1.0)
    return (np.clip(t, -1, 1) + 1) / 2 if signed else np.clip(t, 0, 1)


def _colors(values, vmax: float, signed: bool) -> tuple[list[str], list[str]]:
    """Background and text colour per score."""
    rgb = _interpolate(SIGNED_PALETTE if signed else UNSIGNED_PALETTE, _positions(values, vmax, signed))
    return _hex(rgb), _text_colors(rgb)


# --------------------------------------------------------------------------- checking the input


def _check_frame(explanations) -> tuple[pd.DataFrame, str]:
    if not isinstance(explanations, pd.DataFrame):
        raise TypeError(f"explanations must be a DataFrame from explain() (an Explanation or a plain DataFrame), "
                        f"got {type(explanations).__name__}.")
    missing = [c for c in ("example", "importance") if c not in explanations.columns]
    if "token" not in explanations.columns and "text" not in explanations.columns:
        missing.append("token (token level) or text (word level)")
    if missing:
        raise ValueError(f"explanations lacks column(s) {missing}; expected the frame returned by explain(), "
                         f"got columns {list(explanations.columns)}.")
    return explanations, ("token" if "token" in explanations.columns else "word")


def _facet_columns(frame: pd.DataFrame, facet) -> list:
    if facet is None:
        return [c for c in RUN_COLUMNS if c in frame.columns and frame[c].nunique(dropna=False) > 1]
    if facet is False:
        return []
    columns = [facet] if isinstance(facet, str) else list(facet) if isinstance(facet, (list, tuple)) else None
    if columns is None:
        raise TypeError(f"facet must be None, False, a column name or a list of column names, got {facet!r}.")
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise ValueError(f"facet names column(s) {absent} that explanations lacks; columns are {list(frame.columns)}.")
    return columns


def _check_one_explanation_per_panel(frame: pd.DataFrame, facets: list, level: str, facet) -> None:
    """A panel (one example under one facet value) must hold one explanation: never interleave tokens."""
    for column in RUN_COLUMNS:
        if column in frame.columns and column not in facets and frame[column].nunique(dropna=False) > 1:
            values = pd.unique(frame[column]).tolist()
            raise ValueError(
                f"explanations mixes {len(values)} values of {column!r} ({values[:4]}) but facet={facet!r} does not "
                f"put them side by side; pass facet={[*facets, column] if facets else column!r}, or select one, e.g. "
                f"frame[frame[{column!r}] == {values[0]!r}].")
    unit = [c for c in ("segment", "position" if level == "token" else "word") if c in frame.columns]
    if not unit and "char_start" in frame.columns:
        unit = ["char_start"]
    if not unit:
        return
    keys = ["example", *facets, *unit]
    repeated = frame.duplicated(subset=keys, keep=False)
    if repeated.any():
        rows = frame[repeated]
        first = rows.iloc[0]
        same = rows[(rows[keys] == first[keys]).all(axis=1)]
        differ = [c for c in same.columns if c not in keys and c not in ROW_COLUMNS
                  and same[c].astype(str).nunique() > 1]
        hint = (f"column(s) {differ} differ between them: pass facet={differ[0]!r} to show them side by side"
                if differ else "if they come from different models, tag each part before concatenating "
                "(pd.concat([a.assign(model='a'), b.assign(model='b')])); if from different texts, renumber "
                "'example'")
        where = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in first[keys].items()}
        raise ValueError(f"explanations holds several rows for {where} in one panel, so their tokens "
                         f"would interleave; {hint}, or select one explanation.")


def _check_options(examples, max_examples, scale, signed, full_page, vmax) -> None:
    if max_examples is not None and (isinstance(max_examples, bool) or not isinstance(max_examples, numbers.Integral)
                                     or max_examples < 1):
        raise ValueError(f"max_examples must be a positive integer or None, got {max_examples!r}.")
    if not (isinstance(scale, str) and scale in SCALES):
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}.")
    if signed is not None and not isinstance(signed, (bool, np.bool_)):
        raise TypeError(f"signed must be None (from the measure's registry entry) or a bool, got {signed!r}.")
    if not isinstance(full_page, (bool, np.bool_)):
        raise TypeError(f"full_page must be a bool, got {full_page!r}.")
    if vmax is not None:
        if scale == "example":
            raise ValueError("vmax fixes one colour scale for the page; it cannot be combined with scale='example'.")
        if isinstance(vmax, bool) or not isinstance(vmax, numbers.Real) or not (math.isfinite(vmax) and vmax > 0):
            raise ValueError(f"vmax must be a positive finite number or None, got {vmax!r}.")
    if examples is not None and isinstance(examples, (str, bytes)):
        raise TypeError(f"examples must be a sequence of example ids, got {examples!r}.")


def _select_examples(frame: pd.DataFrame, examples, max_examples) -> tuple[list, int]:
    available = pd.unique(frame["example"]).tolist()
    if examples is None:
        return (available if max_examples is None else available[:max_examples]), len(available)
    wanted = list(examples)
    unknown = [e for e in wanted if e not in set(available)]
    if unknown:
        raise ValueError(f"examples {unknown[:10]} are not in explanations (its examples are "
                         f"{available[:10]}{' ...' if len(available) > 10 else ''}).")
    return wanted, len(available)


# --------------------------------------------------------------------------- scales


@dataclass
class _Scale:
    label: str
    signed: bool
    vmax: float
    inferred: bool = False
    relative: bool = False


def _registry_signed(method) -> bool | None:
    # Imported here: the registry sits above this module (it loads torch), and only a plain frame whose
    # signedness is not recorded needs it.
    from ..importance import get_method

    try:
        return bool(get_method(method).signed)
    except (ValueError, TypeError):
        return None


def _largest(values) -> float:
    finite = np.abs(np.asarray(values, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    largest = float(finite.max()) if finite.size else 0.0
    return largest if largest > 0 else 1.0


def _method_of(rows: pd.DataFrame):
    """The ``method`` of a group of rows (``None`` when the frame has none)."""
    value = rows["method"].iloc[0] if "method" in rows.columns else None
    return value if _is_known(value) else None


def _scales(shown: pd.DataFrame, scale: str, signed, vmax, table) -> dict:
    """One colour scale per measure (``method`` value): different measures have different units."""
    groups = shown.groupby("method", sort=False, dropna=False) if "method" in shown.columns else [(None, shown)]
    scales = {}
    for method, rows in groups:
        method = _method_of(rows)
        inferred = False
        sign = signed
        if sign is None and table is not None and "signed" in table.columns:
            known = table.loc[table["method"] == method, "signed"] if "method" in table.columns else table["signed"]
            sign = bool(known.iloc[0]) if len(known) and known.nunique() == 1 else None
        if sign is None and method is not None:
            sign = _registry_signed(method)
        if sign is None:  # an unknown measure: negative scores mean the sign carries meaning
            sign, inferred = bool((rows["importance"] < 0).any()), True
        label = "importance" if method is None else str(method)
        top = 1.0 if scale == "example" else (float(vmax) if vmax is not None else _largest(rows["importance"]))
        scales[method] = _Scale(label, sign, top, inferred, relative=scale == "example")
    return scales


def _colour_bar(s: _Scale) -> dict:
    palette = SIGNED_PALETTE if s.signed else UNSIGNED_PALETTE
    gradient = ",".join(f"{c} {100 * i / (len(palette) - 1):g}%" for i, c in enumerate(palette))
    fractions = (-1, -0.5, 0, 0.5, 1) if s.signed else (0, 0.25, 0.5, 0.75, 1)
    if s.relative:
        texts = [("\u2212" if f < 0 else "") + f"{abs(f):.0%}" if f else "0" for f in fractions]
    else:
        texts = [number(f * s.vmax, 2, significant=True, unicode_minus=True) if f else "0" for f in fractions]
    ticks = [{"at": f"{(f + 1) * 50 if s.signed else f * 100:g}", "text": t} for f, t in zip(fractions, texts)]
    unit = " of each example's largest |score|" if s.relative else ""
    if s.signed:
        meaning = "signed: red = evidence for the explained class, blue = against it"
        aria = f"colour scale of {s.label}: blue {texts[0]} through white 0 to red {texts[-1]}{unit}"
    else:
        meaning = "unsigned: darker green = more important, either direction"
        aria = f"colour scale of {s.label}: white 0 to dark green {texts[-1]}{unit}"
    caption = f"{s.label} \u2014 {meaning}" + (" (sign inferred from the scores)" if s.inferred else "")
    if s.relative:
        caption += "; scaled per example"
    return {"caption": caption, "gradient": gradient, "ticks": ticks, "aria": aria}


# --------------------------------------------------------------------------- cells


@dataclass
class _Cell:
    pieces: list = field(default_factory=list)
    facts: dict = field(default_factory=dict)


def _is_known(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value is not pd.NA


def _sorted_rows(rows: pd.DataFrame) -> pd.DataFrame:
    keys = []
    if "segment" in rows.columns:
        rows = rows.assign(_seg=rows["segment"].map(_SEGMENT_ORDER).fillna(2))
        keys.append("_seg")
    for column in ("position", "char_start"):
        if column in rows.columns:
            keys.append(column)
            break
    return rows.sort_values(keys, kind="stable") if keys else rows


def _token_pieces(rows: pd.DataFrame, level: str, s: _Scale) -> list[dict]:
    """One coloured span per row (surface text filled in by the caller)."""
    values = rows["importance"].to_numpy(dtype=np.float64)
    top = _largest(values) if s.relative else s.vmax
    backgrounds, foregrounds = _colors(values, top, s.signed)
    tokens = rows["token"].astype(str).tolist() if level == "token" else [None] * len(rows)
    n_tokens = rows["n_tokens"].tolist() if level == "word" and "n_tokens" in rows.columns else [None] * len(rows)
    pieces = []
    for value, bg, fg, token, count in zip(values, backgrounds, foregrounds, tokens, n_tokens):
        score = number(value, 3, significant=True, unicode_minus=True, missing="no score")
        if level == "token":
            what = f"token {token}"
        else:
            what = "word" + (f" ({count} token{'s' if count != 1 else ''})" if _is_known(count) else "")
        pieces.append({"kind": "token", "bg": bg if np.isfinite(value) else "transparent",
                       "fg": fg if np.isfinite(value) else _DARK_TEXT, "score": repr(float(value)),
                       "title": f"{what}: {score}", "score_text": score, "token": token, "sub": False,
                       "empty": False})
    return pieces


def _cut_marker(n_tokens) -> dict:
    text = f" \u2026 [truncated at {int(n_tokens)} tokens]" if _is_known(n_tokens) else " \u2026 [truncated]"
    return {"kind": "cut", "text": text,
            "title": "the model's input ends here (max_length); the rest of the text was not seen or explained"}


def _fill_from_text(text: str, rows: pd.DataFrame, pieces: list[dict], level: str, end: int | None,
                    cut: dict | None) -> list[dict]:
    """Interleave the coloured spans with the original text between them (whitespace kept as written)."""
    out, cursor, previous_word = [], 0, None
    starts = rows["char_start"].to_numpy(dtype=np.int64)
    ends = rows["char_end"].to_numpy(dtype=np.int64)
    words = rows["word"].tolist() if "word" in rows.columns else [None] * len(rows)
    for piece, start, stop, word in zip(pieces, starts, ends, words):
        start = max(int(start), cursor)
        if start > cursor:
            out.append({"kind": "plain", "text": text[cursor:start]})
        elif out and out[-1]["kind"] == "token" and level == "token":
            piece["sub"] = word is not None and word == previous_word
        if stop > start:
            surface = text[start:stop]
        else:  # a token without characters (e.g. one that stands for whitespace): a thin bar, the text untouched
            surface, piece["empty"] = "", True
        label = surface or (piece["token"] or "empty token")
        out.append({**piece, "text": surface, "aria": f"{label}: {piece['score_text']}"})
        cursor, previous_word = max(cursor, int(stop)), word
    limit = len(text) if end is None else max(cursor, end)
    if cursor < limit:
        out.append({"kind": "plain", "text": text[cursor:limit]})
    if cut is not None and text[limit:].strip():
        out.append(cut)
    elif limit < len(text) and cut is None:
        out.append({"kind": "plain", "text": text[limit:]})
    return out


def _fill_without_text(rows: pd.DataFrame, pieces: list[dict], level: str) -> list[dict]:
    """Old frames without their texts: tokens (``##`` pieces glued) or words, spaced by the offsets."""
    out, previous_end = [], None
    surfaces = rows["token"].astype(str) if level == "token" else rows["text"].astype(str)
    starts = rows["char_start"].tolist() if "char_start" in rows.columns else [None] * len(rows)
    ends = rows["char_end"].tolist() if "char_end" in rows.columns else [None] * len(rows)
    for piece, surface, start, stop in zip(pieces, surfaces, starts, ends):
        continuation = level == "token" and surface.startswith("##")
        text = surface[2:] if continuation else surface
        if previous_end is not None:
            gap = (start > previous_end) if _is_known(start) and _is_known(previous_end) else not continuation
            if gap:
                out.append({"kind": "plain", "text": " "})
            elif out and out[-1]["kind"] == "token" and level == "token":
                piece["sub"] = continuation
        out.append({**piece, "text": text, "aria": f"{text}: {piece['score_text']}"})
        previous_end = stop if _is_known(stop) else previous_end
    return out


_SEPARATOR = {"kind": "sep", "text": " \u2016 ", "title": "second text of the pair"}


def _cell_pieces(rows: pd.DataFrame, level: str, s: _Scale, facts: dict | None) -> list[dict]:
    rows = _sorted_rows(rows)
    segments = rows["segment"] if "segment" in rows.columns else pd.Series("A", index=rows.index)
    out = []
    if facts is not None and _is_known(facts.get("text")):
        truncated = bool(facts.get("truncated")) if _is_known(facts.get("truncated")) else False
        cut = _cut_marker(facts.get("n_tokens")) if truncated else None
        parts = [("A", facts["text"], facts.get("text_end"))]
        if _is_known(facts.get("text_pair")):
            parts.append(("B", facts["text_pair"], facts.get("text_pair_end")))
        for name, text, end in parts:
            mine = rows[segments == name]
            end = int(end) if _is_known(end) else None
            if name == "B":
                out.append(dict(_SEPARATOR))
            if len(mine):
                out += _fill_from_text(text, mine, _token_pieces(mine, level, s), level, end, cut)
            else:  # a segment that was not explained: shown as context
                seen = text if end is None or not cut else text[:end]
                out.append({"kind": "ctx", "text": seen, "title": "context (not explained)"})
                if cut is not None and text[len(seen):].strip():
                    out.append(cut)
        return out
    for name in pd.unique(segments):
        mine = rows[segments == name]
        if out:
            out.append(dict(_SEPARATOR))
        out += _fill_without_text(mine, _token_pieces(mine, level, s), level)
    if "truncated" in rows.columns and len(rows) and bool(rows["truncated"].iloc[0]):
        out.append(_cut_marker(None))
    return out


def _cell_facts(rows: pd.DataFrame, facts: dict | None) -> dict:
    """What is said about a cell: gold label, prediction with probability, explained class."""
    said = {}
    gold = facts.get("gold") if facts else None
    if _is_known(gold):
        said["gold"] = (str(gold), "")
    if facts and _is_known(facts.get("predicted")):
        predicted = facts["predicted"]
        text = f"{predicted} ({facts['probability']:.2f})" if _is_known(facts.get("probability")) else str(predicted)
        mark, cls = ("", "")
        if _is_known(gold):
            mark, cls = (" \u2713", "ok") if predicted == gold else (" \u2717", "bad")
        said["predicted"] = (text + mark, cls)
    if "target" in rows.columns and len(rows):
        said["explains"] = (str(rows["target"].iloc[0]), "")
    return said


def _items(said: dict) -> list[dict]:
    return [{"key": k, "value": v, "cls": c} for k, (v, c) in said.items()]


# --------------------------------------------------------------------------- rendering


def _facts_per_cell(table, cells: pd.DataFrame) -> list[dict | None]:
    """The example-table row of each cell (``None`` where unknown)."""
    if table is None or not len(cells):
        return [None] * len(cells)
    records = lookup(table, cells, EXAMPLE_VALUES).to_dict("records")
    return [r if any(_is_known(v) for v in r.values()) else None for r in records]


def explanation_html(explanations, *, examples=None, path=None, title: str | None = None, max_examples: int = 50,
                     facet=None, scale: str = "page", signed: bool | None = None, full_page: bool = True,
                     vmax: float | None = None) -> str:
    """Render importances as a heatmap over the original text (HTML, no scripts, no network).

    Parameters
    ----------
    explanations : Explanation or pandas.DataFrame
        From :func:`fmmlearn.explanation.explain` (token or word level), or
        several of them concatenated (e.g. two ``method`` values, or two
        models told apart by a ``model`` column).  A plain DataFrame needs
        ``example``, ``importance`` and ``token`` (or ``text`` for words);
        ``position``, ``segment``, ``word``, ``char_start``/``char_end``,
        ``target``, ``method`` and ``truncated`` improve it.  Only an
        :class:`~fmmlearn.explanation.Explanation` knows the original texts
        and the predictions; without them the text is rebuilt from the tokens.
    examples : sequence, optional
        Which examples to show, in this order (default: the first ``max_examples``).
    path : str or path-like, optional
        Also write the HTML to this file.
    title : str, optional
    max_examples : int or None, default=50
        At most this many examples when ``examples`` is not given (``None``: all).
    facet : None, False, str or list of str, default=None
        Column(s) whose values are shown side by side (one column per value,
        one row per example).  ``None``: those of ``model`` and ``method``
        that hold several values.  ``False``: no facets.  A frame that holds
        several explanations of one example in one panel is an error.
    scale : {"page", "example"}, default="page"
        ``"page"``: one colour scale for all examples and facets, per measure
        (different measures have different units), so colours compare across
        examples and models.  ``"example"``: each panel scaled to its own
        largest ``|score|``.
    signed : bool, optional
        Override the measure's signedness.  Default: from the explanation
        (the measure's registry entry, :func:`fmmlearn.importance.get_method`);
        for a measure the registry does not know, signed when any score is
        negative.  Signed: diverging blue-white-red from ``-vmax`` to
        ``vmax``; unsigned: white to dark green from 0 to ``vmax``.
    full_page : bool, default=True
        A complete HTML document, or an embeddable fragment (``<div>`` with a
        scoped ``<style>``; what the notebook display uses).
    vmax : float, optional
        The score at full colour (default: the largest ``|score|`` shown).

    Returns
    -------
    str
        The HTML.  Every token (or word) is one ``<span>`` with its score in
        ``title``, ``aria-label`` and ``data-score``; at token level, thin
        lines separate the subwords of a word.

    Raises
    ------
    ValueError
        For missing columns, unknown examples or facet columns, bad options,
        or several explanations of one example in one panel.
    TypeError
        For an input that is not a DataFrame.

    Examples
    --------
    >>> from fmmlearn.explanation import explanation_html
    >>> e = pd.concat([clf.explain(X, method="loo-sign"), clf.explain(X, method="int-grad-sign")])  # doctest: +SKIP
    >>> explanation_html(e, path="compare.html", title="LOO vs IG")                                # doctest: +SKIP
    """
    frame, level = _check_frame(explanations)
    _check_options(examples, max_examples, scale, signed, full_page, vmax)
    table = getattr(explanations, "examples", None)
    table = table if isinstance(table, pd.DataFrame) and "example" in table.columns else None
    facets = _facet_columns(frame, facet)
    _check_one_explanation_per_panel(frame, facets, level, facet)
    ids, n_available = _select_examples(frame, examples, max_examples)
    shown = frame[frame["example"].isin(ids)]
    scales = _scales(shown, scale, signed, vmax, table)

    runs = [c for c in RUN_COLUMNS if c in shown.columns and c not in facets]
    keys = ["example", *facets]
    groups = {k if isinstance(k, tuple) else (k,): rows for k, rows in shown.groupby(keys, sort=False, dropna=False)}
    column_keys = list(dict.fromkeys(k[1:] for k in groups)) or [()]
    cells_index = pd.DataFrame([{**dict(zip(keys, k)), **{c: rows[c].iloc[0] for c in runs}}
                                for k, rows in groups.items()])
    facts = dict(zip(groups, _facts_per_cell(table, cells_index)))

    rows_out = []
    for example in ids:
        cells, said = [], []
        for column_key in column_keys:
            key = (example, *column_key)
            rows = groups.get(key)
            if rows is None:
                cells.append(_Cell(pieces=[{"kind": "ctx", "text": "(not explained)", "title": ""}]))
                said.append({})
                continue
            s = scales[_method_of(rows)]
            cells.append(_Cell(pieces=_cell_pieces(rows, level, s, facts.get(key))))
            said.append(_cell_facts(rows, facts.get(key)))
        shared = {k: v for k, v in said[0].items() if all(d.get(k) == v for d in said)} if said else {}
        for cell, own in zip(cells, said):
            cell.facts = {k: v for k, v in own.items() if k not in shared}
        rows_out.append({"example": example, "items": _items(shared),
                         "cells": [{"pieces": c.pieces, "items": _items(c.facts)} for c in cells]})

    columns = [{"label": " \u00b7 ".join(map(str, k)),
                "title": ", ".join(f"{name} = {value}" for name, value in zip(facets, k))} for k in column_keys]
    shown_note = (f"{len(ids)} of {n_available} examples" if len(ids) < n_available
                  else f"{len(ids)} example{'s' if len(ids) != 1 else ''}")
    hover = "hover a token for its score; thin lines mark subword boundaries" if level == "token" \
        else "hover a word for its score"
    page = environment().get_template("heatmap.html.j2").render(
        title=title, full_page=bool(full_page), note=f"{shown_note} \u00b7 {level} level \u00b7 {hover}",
        bars=[_colour_bar(s) for s in scales.values()], columns=columns, show_header=bool(facets), rows=rows_out,
    )
    write_page(page, path)
    return page

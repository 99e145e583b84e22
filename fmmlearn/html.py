"""Self-contained HTML token heatmaps rendered from explanation DataFrames.

The HTML uses inline styles only (no scripts, no external CSS), so it looks
the same in Jupyter, VS Code, Colab, a browser or an e-mail attachment.
"""

from __future__ import annotations

import html as _html
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["explanation_html"]

_REQUIRED = ("example", "token", "importance")


def _color(value: float, scale: float, signed: bool) -> str:
    """Background colour: red for positive evidence, blue for negative (signed), red only otherwise."""
    strength = 0.0 if scale == 0 else min(1.0, abs(value) / scale)
    alpha = round(0.85 * strength, 3)
    rgb = "214,39,40" if value >= 0 or not signed else "31,119,180"
    return f"rgba({rgb},{alpha})"


def _surface(rows: pd.DataFrame) -> list[tuple[str, str]]:
    """(text, separator-before) per row; spaces come back from character offsets when known."""
    out, previous_end, previous_segment = [], None, None
    for row in rows.itertuples(index=False):
        token = str(row.token)
        text = token[2:] if token.startswith("##") else token
        start = getattr(row, "char_start", None)
        segment = getattr(row, "segment", None)
        if previous_end is None:
            sep = ""
        elif segment != previous_segment:
            sep = " ‖ "
        elif start is not None and not pd.isna(start):
            sep = " " if start > previous_end else ""
        else:
            sep = "" if token.startswith("##") else " "
        end = getattr(row, "char_end", None)
        previous_end = end if end is not None and not pd.isna(end) else previous_end
        previous_segment = segment
        out.append((text, sep))
    return out


def explanation_html(explanations: pd.DataFrame, *, examples=None, path=None, title: str | None = None,
                     max_examples: int = 50) -> str:
    """Render token importances as a coloured-text HTML page.

    Parameters
    ----------
    explanations : DataFrame
        Long format with at least ``example``, ``token`` and ``importance``
        columns (the output of ``FaithfulTextClassifier.explain``); optional
        ``position``, ``char_start``/``char_end``, ``segment``, ``method``,
        ``target`` columns improve the rendering.
    examples : sequence of int, optional
        Which examples to show (default: the first ``max_examples``).
    path : str or path-like, optional
        Also write the page to this file.
    title : str, optional
    max_examples : int, default=50

    Returns
    -------
    str
        The HTML document.
    """
    missing = [c for c in _REQUIRED if c not in explanations.columns]
    if missing:
        raise ValueError(f"explanations lacks column(s) {missing}; expected the DataFrame returned by explain().")
    frame = explanations
    ids = list(pd.unique(frame["example"])) if examples is None else list(examples)
    ids = ids[:max_examples]
    signed = bool((frame["importance"] < 0).any())
    blocks = []
    for example in ids:
        rows = frame[frame["example"] == example]
        if "position" in rows:
            rows = rows.sort_values("position")
        scale = float(np.nanmax(np.abs(rows["importance"].to_numpy()))) if len(rows) else 0.0
        spans = []
        for (text, sep), value in zip(_surface(rows), rows["importance"].to_numpy()):
            spans.append(
                f'{_html.escape(sep)}<span title="{value:.4g}" style="background:{_color(value, scale, signed)};'
                f'padding:1px 2px;border-radius:3px">{_html.escape(text)}</span>'
            )
        meta = []
        for column in ("target", "method"):
            if column in rows and len(rows):
                meta.append(f"{column}: <b>{_html.escape(str(rows[column].iloc[0]))}</b>")
        header = f"example {example}" + (" &middot; " + " &middot; ".join(meta) if meta else "")
        blocks.append(
            f'<div style="margin:0 0 14px 0"><div style="color:#555;font-size:12px">{header}</div>'
            f'<div style="line-height:1.9">{"".join(spans)}</div></div>'
        )
    legend = ("red = supports the target class, blue = speaks against it" if signed
              else "darker = more important")
    heading = f"<h3 style=\"margin:0 0 8px 0\">{_html.escape(title)}</h3>" if title else ""
    page = (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>fmmlearn explanations</title></head>'
        '<body><div style="font-family:system-ui,sans-serif;font-size:15px;max-width:60em">'
        f'{heading}<div style="color:#777;font-size:12px;margin-bottom:10px">{legend}; hover a token for its score'
        f'</div>{"".join(blocks)}</div></body></html>'
    )
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(page, encoding="utf-8")
    return page

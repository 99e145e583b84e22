"""HTML token heatmaps are self-contained and faithful to the frame they render."""

import pandas as pd
import pytest

from fmmlearn.html import explanation_html


def frame():
    return pd.DataFrame({
        "example": [0, 0, 0, 1],
        "position": [1, 2, 3, 1],
        "token": ["un", "##believ", "<great>", "bad"],
        "char_start": [0, 2, 9, 0],
        "char_end": [2, 8, 16, 3],
        "segment": ["A", "A", "A", "A"],
        "importance": [0.5, -1.0, 0.0, 2.0],
        "target": ["pos", "pos", "pos", "neg"],
        "method": "loo-sign",
    })


def test_html_is_self_contained_and_escapes_tokens(tmp_path):
    page = explanation_html(frame(), path=tmp_path / "e.html", title="Demo")
    assert (tmp_path / "e.html").read_text(encoding="utf-8") == page
    assert "<script" not in page and "stylesheet" not in page
    assert "&lt;great&gt;" in page and "<great>" not in page
    # Sub-words are glued back together, words separated as in the original text.
    assert "believ</span>" in page and "##" not in page
    assert page.count('title="') == 4


def test_signed_scores_use_two_colours_scaled_per_example():
    page = explanation_html(frame())
    assert "rgba(31,119,180,0.85)" in page      # the most negative token of example 0
    assert "rgba(214,39,40,0.425)" in page      # half the largest magnitude
    assert "rgba(214,39,40,0.85)" in page       # example 1 scaled on its own


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="importance"):
        explanation_html(pd.DataFrame({"example": [0], "token": ["a"]}))

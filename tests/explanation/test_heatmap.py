"""HTML heatmaps and report displays: faithful to the frame, one colour scale, accessible, self-contained.

These tests use hand-built frames (no model): the ones in
``tests/explanation/test_result.py`` render real explanations.
"""

import base64
import re

import numpy as np
import pandas as pd
import pytest

from fmmlearn.faithfulness import FaithfulnessReport
from fmmlearn.explanation import SIGNED_PALETTE, UNSIGNED_PALETTE, explanation_html
from fmmlearn.plotting import report_html
from helpers.browser import dump_dom, image_stats, require_chromium, screenshot
from helpers.heatmap import contrast_ratio, parse_heatmap


def token_frame(method="loo-sign", scores=(0.5, -1.0, 0.0, 2.0)):
    """Two examples, old-style (no texts known): 'unbeliev <great>' and 'bad'."""
    return pd.DataFrame({
        "example": [0, 0, 0, 1],
        "position": [1, 2, 3, 1],
        "token": ["un", "##believ", "<great>", "bad"],
        "word": [0, 0, 1, 0],
        "char_start": [0, 2, 9, 0],
        "char_end": [2, 8, 16, 3],
        "segment": ["A", "A", "A", "A"],
        "importance": list(scores),
        "target": ["pos", "pos", "pos", "neg"],
        "method": method,
    })


def scored(example_scores, method="loo-sign"):
    """One token 'w<i>' per score and example."""
    rows = [{"example": ex, "position": i + 1, "token": f"w{i}", "importance": s, "method": method}
            for ex, scores in enumerate(example_scores) for i, s in enumerate(scores)]
    return pd.DataFrame(rows)


def spans_by_token(page):
    return {(p, s["text"]): s for p, panel in enumerate(parse_heatmap(page)["panels"]) for s in panel["spans"]}


def rgb(hex_colour):
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


# --------------------------------------------------------------------------- content and safety


def test_plain_frame_page_is_self_contained_escaped_and_written(tmp_path):
    page = explanation_html(token_frame(), path=tmp_path / "e.html", title="Demo <b>")
    assert (tmp_path / "e.html").read_text(encoding="utf-8") == page
    assert page.startswith("<!DOCTYPE html>")
    for forbidden in ("<script", "<link", "@import", "url(", "http://", "https://", "<b>"):
        assert forbidden not in page
    assert "Demo &lt;b&gt;" in page and "&lt;great&gt;" in page and "<great>" not in page
    panels = parse_heatmap(page)["panels"]
    # Without the original text, subwords are glued back and words spaced by the offsets.
    assert [p["text"] for p in panels] == ["unbeliev <great>", "bad"]
    assert [s["score"] for p in panels for s in p["spans"]] == [0.5, -1.0, 0.0, 2.0]


def test_every_span_carries_its_score_in_title_aria_and_data():
    for panel in parse_heatmap(explanation_html(token_frame()))["panels"]:
        for span in panel["spans"]:
            shown = f"{span['score']:.3g}".replace("-", "\u2212")
            assert span["title"].endswith(shown) and span["aria-label"] == f"{span['text']}: {shown}"


def test_subword_boundaries_are_marked_and_the_raw_token_is_in_the_title():
    spans = parse_heatmap(explanation_html(token_frame()))["panels"][0]["spans"]
    assert ["fmm-hm-sub" in s["classes"] for s in spans] == [False, True, False]
    assert spans[1]["title"].startswith("token ##believ")


def test_word_level_frame_renders_without_a_token_column():
    words = pd.DataFrame({"example": [0, 0, 0], "segment": "A", "word": [0, 1, 2], "text": ["Hello", ",", "world"],
                          "position": [1, 2, 3], "n_tokens": [1, 1, 2], "char_start": [0, 5, 7],
                          "char_end": [5, 6, 12], "importance": [0.1, 0.0, -0.3], "method": "loo-sign"})
    panel = parse_heatmap(explanation_html(words))["panels"][0]
    assert panel["text"] == "Hello, world"
    assert [s["text"] for s in panel["spans"]] == ["Hello", ",", "world"]
    assert panel["spans"][2]["title"] == "word (2 tokens): \u22120.3"


def test_fragment_has_scoped_css_and_no_document_wrapper():
    fragment = explanation_html(token_frame(), full_page=False)
    assert fragment.lstrip().startswith('<div class="fmm-hm"')
    assert "<html" not in fragment and "<body" not in fragment and "<head" not in fragment
    css = re.search(r"<style>(.*?)</style>", fragment, re.S).group(1)
    selectors = [s.strip() for rule in css.split("}") if "{" in rule for s in rule.split("{")[0].split(",")]
    assert selectors and all(s.startswith(".fmm-hm") for s in selectors)


def test_truncated_examples_end_with_a_marker():
    frame = token_frame().assign(truncated=[True, True, True, False])
    texts = [p["text"] for p in parse_heatmap(explanation_html(frame))["panels"]]
    assert texts[0].endswith("\u2026 [truncated]") and "truncated" not in texts[1]


# --------------------------------------------------------------------------- colour


def test_one_scale_per_page_gives_the_same_colour_to_the_same_score():
    frame = scored([[0.5, 1.0], [0.5, 4.0, -4.0]])
    spans = spans_by_token(explanation_html(frame))
    assert spans[(0, "w0")]["bg"] == spans[(1, "w0")]["bg"]
    # Hand-computed on the 9-stop RdBu ramp, vmax = 4: 0.5 sits halfway between stops 4 and 5.
    assert spans[(0, "w0")]["bg"] == "#fae9df"
    assert spans[(1, "w1")]["bg"] == SIGNED_PALETTE[-1] and spans[(1, "w2")]["bg"] == SIGNED_PALETTE[0]
    per_example = spans_by_token(explanation_html(frame, scale="example"))
    assert per_example[(0, "w0")]["bg"] != per_example[(1, "w0")]["bg"]
    assert per_example[(0, "w1")]["bg"] == SIGNED_PALETTE[-1]  # each example saturates on its own maximum
    ticks = parse_heatmap(explanation_html(frame, scale="example"))["ticks"]
    assert ticks == [["\u2212100%", "\u221250%", "0", "50%", "100%"]]


def test_vmax_fixes_the_scale():
    spans = spans_by_token(explanation_html(scored([[4.0, 8.0]]), vmax=8))
    assert spans[(0, "w0")]["bg"] == SIGNED_PALETTE[6] and spans[(0, "w1")]["bg"] == SIGNED_PALETTE[-1]


def test_colour_bar_has_numeric_ticks():
    parts = parse_heatmap(explanation_html(scored([[1.0, -4.0]])))
    assert parts["ticks"] == [["\u22124", "\u22122", "0", "2", "4"]]
    assert "loo-sign" in parts["captions"][0] and "signed" in parts["captions"][0]
    unsigned = parse_heatmap(explanation_html(scored([[1.0, 4.0]], method="grad-l2")))
    assert unsigned["ticks"] == [["0", "1", "2", "3", "4"]]


@pytest.mark.parametrize("method", ["grad-l2", "inp-grad-abs", "loo-abs", "rand"])
def test_unsigned_measures_never_use_the_signed_palette(method):
    # Negative values too: the registry says the measure is unsigned, so the data cannot make it diverging.
    page = explanation_html(scored([[0.0, 0.2, 1.0], [-0.5, 0.7]], method=method))
    spans = [s for p in parse_heatmap(page)["panels"] for s in p["spans"]]
    assert {s["bg"] for s in spans} >= {UNSIGNED_PALETTE[0], UNSIGNED_PALETTE[-1]}
    for span in spans:  # every cell is a green: no red ("supports") and no blue
        r, g, b = rgb(span["bg"])
        assert g >= r and g >= b
    assert not any(c in page for c in SIGNED_PALETTE if c not in UNSIGNED_PALETTE)
    assert "unsigned" in parse_heatmap(page)["captions"][0]


def test_signedness_comes_from_the_registry_then_the_override_then_the_data():
    positive = scored([[0.2, 1.0]], method="inp-grad-sign")   # signed measure, no negative score
    assert SIGNED_PALETTE[-1] in explanation_html(positive)
    assert SIGNED_PALETTE[-1] not in explanation_html(positive, signed=False)
    unknown = scored([[-0.2, 1.0]], method="my-shap")
    caption = parse_heatmap(explanation_html(unknown))["captions"][0]
    assert "signed" in caption and "inferred" in caption


def test_text_switches_to_white_on_dark_cells_and_always_has_contrast():
    frame = scored([np.linspace(-1, 1, 21)])
    for method in ("loo-sign", "grad-l1"):
        spans = [s for p in parse_heatmap(explanation_html(frame.assign(method=method)))["panels"] for s in p["spans"]]
        assert {s["fg"] for s in spans} == {"#ffffff", "#000000"}
        assert min(contrast_ratio(s["fg"], s["bg"]) for s in spans) >= 4.5   # WCAG AA for normal text


# --------------------------------------------------------------------------- facets and mixtures


def test_methods_are_facets_side_by_side_each_with_its_scale():
    frame = pd.concat([token_frame("loo-sign"), token_frame("grad-l2", scores=(0.1, 0.3, 0.2, 0.4))])
    parts = parse_heatmap(explanation_html(frame))
    assert parts["columns"] == ["loo-sign", "grad-l2"]
    assert len(parts["panels"]) == 4   # 2 examples x 2 methods, row by row
    assert [len(p["spans"]) for p in parts["panels"]] == [3, 3, 1, 1]
    assert [s["score"] for s in parts["panels"][1]["spans"]] == [0.1, 0.3, 0.2]
    assert len(parts["captions"]) == 2 and "unsigned" in parts["captions"][1]


def test_models_and_methods_facet_together():
    parts_of = [token_frame(m).assign(model=name) for name in ("plain", "masked") for m in ("loo-sign", "rand")]
    parts = parse_heatmap(explanation_html(pd.concat(parts_of)))
    assert parts["columns"] == ["plain \u00b7 loo-sign", "plain \u00b7 rand", "masked \u00b7 loo-sign",
                                "masked \u00b7 rand"]
    assert len(parts["panels"]) == 8


def test_mixed_methods_without_a_facet_are_an_error():
    frame = pd.concat([token_frame("loo-sign"), token_frame("grad-l2")])
    with pytest.raises(ValueError, match=r"mixes 2 values of 'method'.*facet='method'"):
        explanation_html(frame, facet=False)
    with pytest.raises(ValueError, match=r"mixes 2 values of 'method'"):
        explanation_html(frame.assign(model="m"), facet="model")
    # Two explanations that nothing tells apart would interleave: refused, with a way out.
    with pytest.raises(ValueError, match=r"would interleave.*column\(s\) \['seed'\]"):
        explanation_html(pd.concat([token_frame().assign(seed=0), token_frame().assign(seed=1)]))
    with pytest.raises(ValueError, match=r"would interleave.*assign\(model="):
        explanation_html(pd.concat([token_frame(), token_frame()]))


# --------------------------------------------------------------------------- options and errors


def test_examples_and_max_examples_choose_what_is_shown():
    frame = token_frame()
    assert [p["text"] for p in parse_heatmap(explanation_html(frame, examples=[1]))["panels"]] == ["bad"]
    page = explanation_html(frame, max_examples=1)
    assert len(parse_heatmap(page)["panels"]) == 1 and "1 of 2 examples" in page
    assert len(parse_heatmap(explanation_html(frame, max_examples=None))["panels"]) == 2


@pytest.mark.parametrize("kwargs, error, match", [
    ({"scale": "row"}, ValueError, "scale must be one of"),
    ({"max_examples": 0}, ValueError, "max_examples must be a positive integer"),
    ({"facet": "seed"}, ValueError, r"facet names column\(s\) \['seed'\]"),
    ({"facet": 3}, TypeError, "facet must be"),
    ({"vmax": 1.0, "scale": "example"}, ValueError, "vmax"),
    ({"vmax": -1}, ValueError, "vmax must be a positive"),
    ({"signed": "yes"}, TypeError, "signed must be"),
    ({"examples": [7]}, ValueError, r"examples \[7\] are not in explanations"),
])
def test_bad_options_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        explanation_html(token_frame(), **kwargs)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['importance'\]"):
        explanation_html(pd.DataFrame({"example": [0], "token": ["a"]}))
    with pytest.raises(ValueError, match="token .token level. or text .word level."):
        explanation_html(pd.DataFrame({"example": [0], "importance": [1.0]}))
    with pytest.raises(TypeError, match="must be a DataFrame"):
        explanation_html([{"example": 0}])


# --------------------------------------------------------------------------- reports


def faithfulness_report_by_hand():
    ratios = np.linspace(0, 1, 6)
    rows = [dict(method="rand", ratio=r, value=0.9 - 0.4 * r, metric="accuracy", repeat=k, role="baseline")
            for k in range(2) for r in ratios]
    rows += [dict(method="loo-sign", ratio=r, value=0.9 - 0.4 * np.sqrt(r), metric="accuracy", repeat=0,
                  role="method") for r in ratios]
    summary = pd.DataFrame([dict(method="loo-sign", metric="accuracy", signed=True, recursive=True, n_repeats=2,
                                 racu=0.3104, racu_low=0.29, racu_high=0.33, acu=0.05, acu_low=0.04, acu_high=0.06)])
    return FaithfulnessReport(pd.DataFrame(rows), summary)


def embedded_png(page):
    data = re.search(r'src="data:image/png;base64,([^"]+)"', page).group(1)
    return base64.b64decode(data)


def test_faithfulness_report_renders_table_and_plot_and_displays_in_notebooks(tmp_path):
    report = faithfulness_report_by_hand()
    page = report_html(report, path=tmp_path / "r.html", title="Faithfulness")
    assert (tmp_path / "r.html").read_text(encoding="utf-8") == page and "<script" not in page
    assert "0.310 [0.290, 0.330]" in page and "loo-sign" in page
    assert embedded_png(page).startswith(b"\x89PNG\r\n\x1a\n")
    fragment = report._repr_html_()
    assert "<html" not in fragment and "fmm-rep-table" in fragment and embedded_png(fragment)


def test_in_distribution_report_renders_one_row_per_ratio():
    rows = [dict(ratio=r, threshold=t, proportion=0.1 + r / 2, simes_p=0.6 - r / 2, geomean_p=0.5 - r / 2,
                 n_examples=40, method="rand", calibration="calibrated")
            for r in (0.0, 0.5, 1.0) for t in (0.05, 0.1)]
    page = report_html(pd.DataFrame(rows), full_page=False)
    header = re.findall(r"<th>(.*?)</th>", page)
    tbody = page[page.index("<tbody>"):page.index("</tbody>")]
    body = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", tbody, re.S)]
    assert header[:6] == ["method", "calibration", "ratio", "simes_p", "geomean_p", "n_examples"]
    assert "share p &lt; 0.05" in header
    assert [row[2] for row in body] == ["0", "0.5", "1"] and [row[3] for row in body] == ["0.6", "0.35", "0.1"]
    assert embedded_png(page).startswith(b"\x89PNG")
    with pytest.raises(TypeError, match="FaithfulnessReport"):
        report_html(pd.DataFrame({"a": [1]}))


# --------------------------------------------------------------------------- in a browser


def test_chromium_renders_a_readable_faceted_page(tmp_path):
    require_chromium()
    frame = pd.concat([token_frame("loo-sign"), token_frame("grad-l2", scores=(0.1, 0.3, 0.2, 0.4))])
    html_file = tmp_path / "facets.html"
    explanation_html(frame, path=html_file, title="Facets")
    stats = image_stats(screenshot(html_file, tmp_path / "facets.png", width=900, height=500))
    assert stats["n_colors"] > 50 and stats["non_white_fraction"] > 0.01 and 100 < stats["content_height"] < 500
    dom = parse_heatmap(dump_dom(html_file))
    assert [p["text"] for p in dom["panels"]] == ["unbeliev <great>"] * 2 + ["bad"] * 2
    assert [s["text"] for s in dom["panels"][0]["spans"]] == ["un", "believ", "<great>"]

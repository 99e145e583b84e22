"""Read an explanation heatmap back: panels, their visible text and one record per coloured span.

The parser is the standard library's, so a test checks the HTML a browser
would get, not strings the renderer happens to write.
"""

from __future__ import annotations

from html.parser import HTMLParser

__all__ = ["contrast_ratio", "parse_heatmap"]


class _HeatmapParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.panels, self.columns, self.headers, self.captions, self.ticks = [], [], [], [], []
        self._in_text = self._in_thead = self._in_caption = False
        self._span = self._header = self._tick = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "div" and "fmm-hm-text" in classes:
            self._in_text = True
            self.panels.append({"text": "", "spans": [], "pieces": []})
        elif tag == "span" and self._in_text:
            self._span = {**attrs, "classes": classes, "text": ""}
            if "fmm-hm-t" in classes:
                self.panels[-1]["spans"].append(self._span)
            self.panels[-1]["pieces"].append(self._span)
        elif tag == "thead":
            self._in_thead = True
        elif tag == "th" and self._in_thead:
            self.columns.append("")
        elif tag == "tr" and "fmm-hm-ex" in classes:
            self._header = ""
        elif tag == "figcaption":
            self._in_caption = True
            self.captions.append("")
        elif tag == "span" and self._tick is not None:
            self.ticks[-1].append("")
        elif tag == "div" and "fmm-hm-ticks" in classes:
            self._tick = True
            self.ticks.append([])

    def handle_endtag(self, tag):
        if tag == "div" and self._in_text:
            self._in_text = False
        elif tag == "div" and self._tick is not None:
            self._tick = None
        elif tag == "span" and self._span is not None:
            self._span = None
        elif tag == "thead":
            self._in_thead = False
        elif tag == "tr" and self._header is not None:
            self.headers.append(self._header)
            self._header = None
        elif tag == "figcaption":
            self._in_caption = False

    def handle_data(self, data):
        if self._in_text:
            self.panels[-1]["text"] += data
            if self._span is not None:
                self._span["text"] += data
        elif self._in_thead and self.columns:
            self.columns[-1] += data
        elif self._header is not None:
            self._header += data
        elif self._in_caption:
            self.captions[-1] += data
        elif self._tick is not None and self.ticks and self.ticks[-1]:
            self.ticks[-1][-1] += data


def parse_heatmap(page: str) -> dict:
    """The parts of an :func:`fmmlearn.html.explanation_html` page.

    Returns
    -------
    dict
        ``panels``: per panel (example x facet, in reading order) its visible
        ``text`` and ``spans`` (attributes of each token/word span plus its
        ``text``, ``classes``, ``bg``/``fg`` colours); ``columns`` (facet
        headers), ``headers`` (per-example header lines), ``captions`` and
        ``ticks`` of the colour bars.
    """
    parser = _HeatmapParser()
    parser.feed(page)
    parser.close()
    for panel in parser.panels:
        for span in panel["spans"]:
            style = dict(part.split(":", 1) for part in span.get("style", "").split(";") if ":" in part)
            span["bg"], span["fg"] = style.get("background"), style.get("color")
            span["score"] = float(span["data-score"])
    return {"panels": parser.panels, "columns": parser.columns, "headers": parser.headers,
            "captions": parser.captions, "ticks": parser.ticks}


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 to 21)."""
    high, low = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)

"""The one Jinja2 environment of every HTML page, the one way a figure goes into a page, and a page into a file.

Templates live in ``fmmlearn/templates/`` (package data). Pages are self-contained: inline CSS,
figures as PNG data URIs, no scripts, nothing loaded from the network (docs/reliability.md).
"""

from __future__ import annotations

import base64
import io
from functools import cache

from ._files import atomic_write
from ._formatting import interval, number, percent

__all__ = ["FIGURE_DPI", "environment", "figure_data_uri", "write_page"]

#: Resolution of the figures embedded in pages.
FIGURE_DPI = 110


@cache
def environment():
    """The Jinja2 environment (autoescaped, strict: an undefined name is an error) with the number filters.

    Filters: ``num`` (:func:`fmmlearn.utils._formatting.number`), ``pct``
    (:func:`~fmmlearn.utils._formatting.percent`) and ``ci`` (:func:`~fmmlearn.utils._formatting.interval`).
    """
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("fmmlearn", "templates"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=number, pct=percent, ci=interval)
    return env


def figure_data_uri(figure, *, dpi: int = FIGURE_DPI, close: bool = True) -> str:
    """A matplotlib figure as a ``data:image/png;base64,...`` URI.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
    dpi : int, default=110
    close : bool, default=True
        Close the figure if pyplot manages it (a figure made without pyplot needs no closing).

    Returns
    -------
    str
    """
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    if close:
        import matplotlib.pyplot as plt

        plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def write_page(page: str, path) -> None:
    """Write a rendered page to ``path`` atomically (UTF-8); nothing when ``path`` is ``None``.

    Parameters
    ----------
    page : str
    path : str, path-like or None
    """
    if path is not None:
        atomic_write(path, lambda tmp: tmp.write_text(page, encoding="utf-8"))

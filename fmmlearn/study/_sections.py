"""A section a study stage adds to the HTML report (the report's own sections live in its template)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReportSection"]


@dataclass(frozen=True)
class ReportSection:
    """A section of the HTML report: a title, a paragraph on how to read it, and the frame shown as a table.

    Parameters
    ----------
    title : str
        The section's heading.
    intro : str
        The paragraph above the table.
    frame : str
        The name of the result frame shown.
    """

    title: str
    intro: str
    frame: str

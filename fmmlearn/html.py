"""Self-contained HTML: the path of the heatmaps and report displays before they moved into packages.

:func:`~fmmlearn.explanation.explanation_html` (and the palettes) live in :mod:`fmmlearn.explanation`,
:func:`~fmmlearn.plotting.report_html` in :mod:`fmmlearn.plotting`; this module keeps ``from
fmmlearn.html import explanation_html`` working.
"""

from .explanation import SIGNED_PALETTE, UNSIGNED_PALETTE, explanation_html
from .plotting import report_html

__all__ = ["SIGNED_PALETTE", "UNSIGNED_PALETTE", "explanation_html", "report_html"]

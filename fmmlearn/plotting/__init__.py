"""Figures rendered from fmmlearn's tidy result frames, and reports shown as their table plus their plot.

matplotlib is imported only when a function is called, so ``import fmmlearn`` stays light; nothing
here needs a display (the Agg backend works).

* ``_figures`` -- the matplotlib figures: faithfulness curves, in-distribution p-values, erasure
  metrics and the study's summaries;
* ``_report`` -- :func:`report_html`, a faithfulness or in-distribution report as self-contained HTML
  (the reports' notebook display).
"""

from ._figures import (plot_erasure, plot_faithfulness, plot_faithfulness_grid, plot_in_distribution, plot_performance,
                       plot_racu, plot_random_masking)
from ._report import report_html

__all__ = ["plot_erasure", "plot_faithfulness", "plot_faithfulness_grid", "plot_in_distribution", "plot_performance",
           "plot_racu", "plot_random_masking", "report_html"]

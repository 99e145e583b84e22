"""Faithfulness by explainer masking: curves, ACU/RACU, scorers, reports.

An explanation is faithful when the tokens it calls important really matter
to the model.  For a classifier fine-tuned with masking, masked inputs are
in-distribution, so this can be measured directly: mask the top ``r`` share
of segment-A tokens by importance, for ``r = 0, 0.1, ..., 1``, and follow the
performance on the masked set.  The faster it drops compared with masking
random tokens (the ``rand`` measure), the more faithful the explanation; the
area between the two curves is ACU, and its ratio to the largest possible
area is RACU (Madsen, Reddy & Chandar, 2024; ``docs/faithfulness.md``).

One concept per module, from the bottom:

* the explainer-masking loop of :mod:`fmmlearn.explanation` (below this package, shared
  with the in-distribution report) -- :func:`iter_batch_masking` (one padded batch, any
  model) and :func:`iter_explainer_masking` (a whole encoded set of a fitted
  classifier, yielding ``(ratio, masked ids)`` per step), re-exported here;
* :mod:`fmmlearn.importance.precomputed` -- precomputed scores (e.g. Captum's)
  aligned to an encoding;
* ``_curves`` -- :func:`faithfulness_curve`, :func:`random_masking_curve`, and the per-example outcomes
  every curve aggregates (:func:`step_outcomes`, :func:`masked_fractions`; the study reads them too);
* ``_area`` -- :func:`acu`, :func:`racu` (numpy and pandas only);
* ``_scorer`` -- :func:`make_faithfulness_scorer`, :func:`faithfulness_score`,
  :func:`faithful_refit` for ``GridSearchCV`` / ``cross_validate``;
* ``_report`` -- :func:`faithfulness_report`: several measures, repeats, CIs;
* ``_erasure`` -- :func:`erasure_metrics`: comprehensiveness, sufficiency and
  AOPC (ERASER, ferret) with a MaSF validity flag (``docs/erasure.md``);
  ``_token_lists`` aligns ferret-style token lists to the tokenization;
* ``_erasure_scorer`` -- :func:`make_erasure_scorer` for ``GridSearchCV``;
* ``_supporting`` -- :func:`supporting_fact_score`: does an explanation rank the
  supporting occurrence of a bAbI answer above its other occurrences (numpy and
  pandas only).

Only the classifier interface of :class:`fmmlearn.FittedClassifier`
is used.  Names are imported on first use, so ``from fmmlearn.faithfulness
import acu, racu`` does not load torch.
"""

from ..exceptions import FaithfulnessWarning
from ..utils import DEFAULT_RATIOS, attach, check_ratios
from ._area import acu, area_statistics, racu
from ._supporting import (
    SUPPORTING_FACT_COLUMNS,
    SupportingFactReport,
    occurrence_credit,
    summarize_credits,
    supporting_fact_credits,
    supporting_fact_score,
)

# public name -> submodule that defines it (loaded on first access: these need torch)
_LAZY = {
    "BASELINE": "._curves",
    "CURVE_COLUMNS": "._curves",
    "RANDOM_MASKING": "._curves",
    "faithfulness_curve": "._curves",
    "masked_fractions": "._curves",
    "random_masking_curve": "._curves",
    "step_outcomes": "._curves",
    "iter_batch_masking": "..explanation",
    "iter_explainer_masking": "..explanation",
    "faithful_refit": "._scorer",
    "faithfulness_score": "._scorer",
    "make_faithfulness_scorer": "._scorer",
    "DEFAULT_REPORT_METHODS": "._report",
    "FaithfulnessReport": "._report",
    "faithfulness_report": "._report",
    "AOPC": "._erasure",
    "DEFAULT_K": "._erasure",
    "ERASURE_MODES": "._erasure",
    "PER_EXAMPLE_COLUMNS": "._erasure",
    "REMOVALS": "._erasure",
    "SUMMARY_COLUMNS": "._erasure",
    "check_k": "._erasure",
    "ErasureReport": "._erasure",
    "erasure_metrics": "._erasure",
    "make_erasure_scorer": "._erasure_scorer",
}

__all__ = sorted(["DEFAULT_RATIOS", "FaithfulnessWarning", "SUPPORTING_FACT_COLUMNS", "SupportingFactReport", "acu",
                  "area_statistics", "check_ratios", "occurrence_credit", "racu", "summarize_credits",
                  "supporting_fact_credits", "supporting_fact_score", *_LAZY])


__getattr__, __dir__ = attach(__name__, _LAZY, globals())

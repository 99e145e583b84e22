"""Stage ``comparisons``: every pair of measures and of models, paired, with a verdict from the rules."""

from __future__ import annotations

import pandas as pd

from .._comparisons import final_comparisons, model_comparisons
from .._pipeline import Stage

__all__ = ["ComparisonsStage"]


class ComparisonsStage(Stage):
    """Paired comparisons with a verdict: ``first ahead``, ``second ahead``, ``equivalent`` or ``inconclusive``.

    Measures: every pair of a model's measures by ACU, on the texts both ran on (a paired bootstrap
    over texts and seeds; the verdict of the first round that decided it when a budget added texts).
    Models: every more-masked model against every less-masked one by the clean test metric, on the
    same test texts.  The margins and the level are the rules' (``fmmlearn/study/verdict_rules.json``).
    """

    name = "comparisons"
    requires = ("settings", "gold", "score", "converged", "test_predictions", "comparison_rounds")
    provides = ("comparisons",)
    frames = ("comparisons",)

    def finish(self, context, results) -> dict:
        settings = context["settings"]
        models = model_comparisons(settings, context["gold"], context["score"], context["converged"],
                                   context["test_predictions"], level=settings.confidence_level)
        measures = final_comparisons(context["comparison_rounds"])
        frame = pd.concat([models, measures], ignore_index=True) if len(measures) else models
        frame["round"] = frame["round"].astype(float)  # NaN: decided in one look (model comparisons, no budget)
        return {"comparisons": frame}

"""The study's stages, one module each, and :data:`STAGES`, the order they run in.

Each stage is a :class:`~fmmlearn.study.Stage` that declares what it reads and provides
(docs/quickstart.md, "The study as a pipeline"):

1. :class:`FitStage` (``fit``) -- every (masking ratio, seed) model, from the model store or fitted;
2. :class:`PerformanceStage` (``performance``) -- clean test predictions, the gold labels, the subsets;
3. :class:`RandomMaskingStage` (``random masking``) -- the paper's check that a model tolerates masks;
4. :class:`FaithfulnessStage` (``faithfulness``) -- every measure's explainer-masking curve, RACU/ACU;
5. :class:`InDistributionStage` (``in-distribution``) -- the MaSF report of masked test sets;
6. :class:`ErasureStage` (``erasure``) -- comprehensiveness, sufficiency, AOPC, certified by MaSF;
7. :class:`ExplanationsStage` (``explanations``) -- a few heatmaps per model.
"""

from .erasure import ErasureStage
from .explanations import ExplanationsStage
from .faithfulness import FaithfulnessStage
from .fit import FitStage
from .in_distribution import InDistributionStage
from .performance import PerformanceStage
from .random_masking import RandomMaskingStage

__all__ = ["STAGES", "ErasureStage", "ExplanationsStage", "FaithfulnessStage", "FitStage", "InDistributionStage",
           "PerformanceStage", "RandomMaskingStage"]

#: The stages of a study, in the order they run.
STAGES = (FitStage(), PerformanceStage(), RandomMaskingStage(), FaithfulnessStage(), InDistributionStage(),
          ErasureStage(), ExplanationsStage())

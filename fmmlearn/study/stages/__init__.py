"""The study's stages, one module each, and :data:`STAGES`, the order they run in.

Each stage is a :class:`~fmmlearn.study.Stage` that declares what it reads and provides
(docs/quickstart.md, "The study as a pipeline"):

1. :class:`FitStage` (``fit``) -- every (masking ratio, seed) model, from the model store or fitted;
2. :class:`PerformanceStage` (``performance``) -- clean test predictions, the gold labels, the subsets,
   which fits count (against the input-blind predictor);
3. :class:`RandomMaskingStage` (``random masking``) -- the paper's check that a model tolerates masks;
4. :class:`FaithfulnessStage` (``faithfulness``) -- every measure's explainer-masking curve, RACU/ACU
   (and, with a budget, rounds that add texts while comparisons are open);
5. :class:`CalibrationStage` (``calibration``) -- one MaSF per model;
6. :class:`InDistributionStage` (``in-distribution``) -- the MaSF report of masked test sets, with its
   negative and positive controls;
7. :class:`ErasureStage` (``erasure``) -- comprehensiveness, sufficiency, AOPC, certified by MaSF;
8. :class:`ExplanationsStage` (``explanations``) -- a few heatmaps per model;
9. :class:`ComparisonsStage` (``comparisons``) -- paired comparisons of measures and models, with verdicts.

Their modules: ``fit``, ``performance``, ``random_masking``, ``faithfulness``, ``calibration``,
``in_distribution``, ``erasure``, ``explanations``, ``comparisons``; ``supporting_facts`` holds
``SupportingFactsStage`` (not in :data:`STAGES`; add it for bAbI), ``_common`` what several stages share.
"""

from .calibration import CalibrationStage
from .comparisons import ComparisonsStage
from .erasure import ErasureStage
from .explanations import ExplanationsStage
from .faithfulness import FaithfulnessStage
from .fit import FitStage
from .in_distribution import InDistributionStage
from .performance import PerformanceStage
from .random_masking import RandomMaskingStage

__all__ = ["STAGES", "CalibrationStage", "ComparisonsStage", "ErasureStage", "ExplanationsStage",
           "FaithfulnessStage", "FitStage", "InDistributionStage", "PerformanceStage", "RandomMaskingStage"]

#: The stages of a study, in the order they run.
STAGES = (FitStage(), PerformanceStage(), RandomMaskingStage(), FaithfulnessStage(), CalibrationStage(),
          InDistributionStage(), ErasureStage(), ExplanationsStage(), ComparisonsStage())

"""Faithfulness studies: plain vs masked fine-tuning, every explanation measured, one report.

:class:`FaithfulnessStudy` fine-tunes a model with and without masking (and any other masking
ratios and seeds), measures the faithfulness of each importance measure by explainer masking
(RACU with bootstrap CIs over test examples and over seeds), whether masked inputs are
in-distribution (MaSF) and ERASER's comprehensiveness and sufficiency, each flagged valid only when
MaSF finds the erased inputs in-distribution.  Its :class:`StudyResult` holds tidy DataFrames,
draws the figures, writes a self-contained HTML report and saves/loads itself.  ``fmmlearn demo``
is such a study on the bundled MiniLM and tweets; see ``docs/quickstart.md``.

The study is a pipeline of :class:`Stage` objects (:data:`STAGES`, in run order), each declaring
the context values it reads and provides and the frames it contributes; ``stages=`` runs others.

Examples
--------
>>> from fmmlearn.study import FaithfulnessStudy, load_study
>>> study = FaithfulnessStudy(n_train=300, n_valid=90, n_test=120, cache_dir="cache")   # doctest: +SKIP
>>> result = study.run("tweets")                                                     # doctest: +SKIP
>>> print(result.summary())                                                          # doctest: +SKIP
>>> result.to_html("report.html"); result.save("results")                            # doctest: +SKIP
>>> load_study("results").racu_summary                                               # doctest: +SKIP
"""

from ._data import dataset_names
from ._engine import DEFAULT_ERASURE_K, DEFAULT_ERASURE_MEASURES, DEFAULT_MEASURES, FaithfulnessStudy, model_label
from ._pipeline import Context, Job, Stage
from ._sections import ReportSection
from ._result import FRAMES, StudyResult, erasure_by_model, load_study
from ._settings import StudySettings
from .stages import STAGES

__all__ = ["DEFAULT_ERASURE_K", "DEFAULT_ERASURE_MEASURES", "DEFAULT_MEASURES", "FRAMES", "STAGES", "Context",
           "FaithfulnessStudy", "Job", "ReportSection", "Stage", "StudyResult", "StudySettings", "dataset_names",
           "erasure_by_model", "load_study", "model_label"]

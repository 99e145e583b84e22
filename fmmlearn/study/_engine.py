"""The study runner: fine-tune plain and masked models, measure how faithful each explanation is.

:class:`FaithfulnessStudy` holds the settings (scikit-learn style: ``__init__`` only stores them);
:meth:`FaithfulnessStudy.run` checks them into a frozen :class:`~fmmlearn.study._settings.StudySettings`,
splits the data and runs the stages of :data:`~fmmlearn.study.STAGES` (or the ``stages`` given) with
:func:`~fmmlearn.study._pipeline.run_stages`: each stage for all models before the next, one progress
bar per stage, every job cached on disk by content (see :mod:`fmmlearn.study._cache`), so adding a
method reruns only that method and an interrupted run resumes.
"""

from __future__ import annotations

import numbers
import os
import time

import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Hidden, StrOptions

from ..ood import DEFAULT_DETECTOR
from ..utils import DEPRECATED, StrictInterval, signals_as_interrupts
from ._cache import StageCache, model_identity
from ._metadata import study_metadata
from ._names import model_label
from ._pipeline import Context, Stage, check_order, run_stages
from ._runtime import Runtime
from ._result import StudyResult
from ._settings import DEFAULT_ERASURE_K, DEFAULT_ERASURE_MEASURES, DEFAULT_MEASURES, resolve_settings
from .stages import STAGES

__all__ = ["DEFAULT_ERASURE_K", "DEFAULT_ERASURE_MEASURES", "DEFAULT_MEASURES", "FaithfulnessStudy", "STAGES",
           "model_label"]


class FaithfulnessStudy(BaseEstimator):
    """Which explanation is faithful, for a plain and a masked fine-tuned model?  A reproducible study.

    For every masking ratio of fine-tuning (default: plain ``0.0`` and the
    paper's masked ``1.0``) and every seed, the study fine-tunes a
    :class:`~fmmlearn.FaithfulTextClassifier`, measures its clean test
    performance and its random-masking curve, the faithfulness curve of every
    importance measure against the ``rand`` baseline, RACU with bootstrap CIs
    over test examples (and the spread over seeds), the MaSF
    in-distribution report (Madsen et al., ICML 2024, sections 3-6), and
    ERASER's comprehensiveness and sufficiency, each flagged valid only when
    MaSF finds its erased inputs in-distribution (docs/erasure.md).  Stages
    are cached on disk by content, so adding a measure does not refit and an
    interrupted run resumes.

    Parameters
    ----------
    model : str or path-like, default="minilm"
        Base model of every run (see :class:`~fmmlearn.FaithfulTextClassifier`).
    masking_ratios : sequence of float in [0, 1], default=(0.0, 1.0)
        ``max_masking_ratio`` of each fine-tuned model; ``0`` is plain
        fine-tuning.
    methods : sequence, default=("rand", "grad-l2", "inp-grad-sign", "int-grad-sign", "loo-sign")
        Importance methods (:func:`fmmlearn.importance_methods`) and
        explainer values (a callable, a Captum attribution class or object,
        an ``Explainer``: docs/explainers.md), the latter under their names
        in every frame (costly by default); ``rand`` is added when missing,
        as it is the baseline of RACU.
    seeds : sequence of int, default=(0,)
        Fine-tuning seeds (also the seeds of the masks and of ``rand``).
    ratios : sequence of float, optional
        Masking ratios of the curves; must start at 0 and end at 1. Default
        ``0, 0.1, ..., 1``.
    metric : str, optional
        Performance metric of the curves: ``"accuracy"`` or another label
        metric of :func:`fmmlearn.metrics.get_metric` (``"macro_f1"``,
        ``"micro_f1"``, ``"matthew"``). Default: the dataset's primary metric
        for the paper's datasets, else accuracy.  These four are
        bootstrapped vectorised; any other label metric is recomputed per
        resample (slow: lower ``n_bootstrap``).
    n_train, n_valid, n_test : int, optional
        Split sizes (stratified).  ``None``: the dataset's own split, or for
        texts / the bundled corpora 25 % test, 20 % of the rest validation,
        the remainder training.  The validation split selects the best
        epoch and calibrates MaSF.
    max_examples : dict of str to int, optional
        Per measure, the number of test examples it is measured on: a seeded
        random subset, the same nested one for every measure (the first ``k``
        of one permutation), so two measures are always compared on the texts
        they share.  ``beam-sign-K`` gets 20 unless told (its cost grows like
        ``K n^2 / 2``).  The ``rand`` baseline covers all test examples, so
        every subset has its own baseline.
    costly_examples : int, optional
        The number of test examples of every costly measure (leave-one-out,
        integrated gradients, beam search) that ``max_examples`` does not
        cap: they share one subset, so they are compared on the same texts,
        while the cheap measures run on all texts (and so on that subset too).
    curve_examples : int, optional
        The test texts of the masking stages (random masking, every faithfulness curve and its
        ``rand`` baseline, the in-distribution report, erasure): a seeded random subset, the one every
        measure's subset is a prefix of.  The performance stage scores every test text, so a large
        ``n_test`` with a modest ``curve_examples`` measures accuracy (one forward pass per text) on
        thousands of texts while the curves stay affordable.  ``None``: every test text.
    curve_seeds : sequence of int, optional
        The seeds whose models the masking stages measure (a subset of ``seeds``); the others are
        fitted and scored on the test texts only.  The accuracy comparison of the models reads every
        seed (fine-tuning noise is its largest error), the comparisons of measures within a model
        mostly vary with the texts.  ``None``: every seed.
    precision_probe : bool, default=False
        Where this machine runs bf16 faster (``classifier_params`` precision ``"auto"``), compute each
        measure's first texts in fp32 and in bf16, and run its other texts in bf16 only when that moves
        its ACU and RACU by less than a tenth of their planned interval's half-width; a measure goes
        back to fp32 when its reduced precision could flip a verdict (docs/benchmarks.md, "Reduced
        precision").  A rejected probe costs its bf16 pass; on MiniLM with AVX512-BF16 the probe rejects
        leave-one-out, integrated gradients and input x gradient, so it is off by default.
    method_params : dict of str to dict, optional
        Parameters per method, e.g. ``{"int-grad-sign": {"n_steps": 20}}``.
    classifier_params : dict, optional
        Other :class:`~fmmlearn.FaithfulTextClassifier` parameters
        (``max_epochs``, ``learning_rate``, ``max_length``, ...).
    in_distribution : str or None, default="rand"
        Measure whose masking the in-distribution report tests (the paper:
        ``rand``); ``None`` skips the report.
    detector : str, default="mahalanobis-cls-mean-all"
        The in-distribution test of the report and of the erasure metrics' validity, a name of
        :data:`fmmlearn.ood.DETECTORS` (``"masf"`` is the paper's).  Its score is fitted on the
        training texts masked like the training batches, its conformal level on the validation
        texts (docs/ood.md).  The default had the most power on the matched controls
        (``benchmarks/ood_power.py``).
    placeholder : {"auto", "unused", "mean-embedding"}, default="auto"
        The token of the matched positive control, put where the masking put the mask token: the
        test's power against it decides whether "not flagged" can be read as in-distribution
        (docs/ood.md).
    other_domain : str, sequence of str or None, default=None
        Texts of another domain, a reported control: a bundled corpus (``"tweets"``,
        ``"bbc-news"``: as many texts as the test split) or the texts themselves.
    erasure : "auto", str, sequence of str or None, default="auto"
        Measures whose erasure metrics (:func:`fmmlearn.faithfulness.erasure_metrics`:
        comprehensiveness, sufficiency, their AOPC; removal by the mask token,
        the gold label as target) are measured, on the same test texts as
        their curves; each must be among ``methods``.  ``rand`` is added as
        the baseline, on the same texts.  Every erased input is scored by a
        MaSF fitted once per model on the validation split masked like the
        training batches (the calibration of the in-distribution report); a
        number is ``valid`` when at most 10 % of its erased inputs get
        ``p < 0.05``.  ``"auto"``: ``loo-sign`` when it is among the measures,
        else none.  ``None`` skips the stage.
    erasure_k : float or sequence of float in (0, 1], default=(0.1, 0.2, 0.5)
        Rationale sizes of the erasure metrics, as shares of the eligible
        tokens; AOPC averages over them.
    explain_method : str, optional
        Measure of the example heatmaps; default the most faithful measure of
        the most masked model (beam search excluded, for its cost).
    n_explain : int, default=5
        Test examples explained for the heatmaps.
    convergence_threshold : float, None or "auto", default="auto"
        Which fits count.  ``"auto"``: a fit counts when it beats the best
        input-blind predictor of the data (the majority class; for bAbI the
        best question-ignoring predictor) by the rules' convergence margin,
        with a paired bootstrap CI over the test texts (docs/quickstart.md,
        "Verdicts").  A number: the paper's rule, the clean test metric must
        be above it (0.5 for bAbI).  ``None``: every fit counts.  A fit that
        does not count is flagged ``converged=False``, left out of every mean
        and listed apart with the reason.
    budget : float, optional
        Seconds of computation the faithfulness stage may spend, counted
        as its jobs took when first computed (a rerun over a cache plans
        the same rounds as the run that filled it).  Its first round measures
        every measure on its texts (the pilot); while time is left and
        comparisons that involve a costly measure are undecided, further
        rounds add texts to the costly measures of those comparisons: as
        many as the pilot's estimates and standard errors say would decide
        them at the next round's level (at least ``rules["budget"]["block"]``,
        cut to what the budget pays for).  The rounds spend the error rate
        alpha-wise (round ``r`` decides at level ``1 - alpha / 2^(r+1)``), so
        the verdicts stay valid however the rounds stop.  ``None``: one round
        at the rules' confidence level.
    budget_pairs : sequence of (str, str), optional
        The comparisons the budget rounds try to decide (e.g. those a claim
        needs); ``None``: every comparison with a costly measure.
    budget_models : sequence of float, optional
        The masking ratios of fine-tuning whose comparisons the rounds try
        to decide (the texts are added for every model); ``None``: all.
    rules : path-like or dict, optional
        The verdict rules (margins, levels, widths): default the shipped
        ``fmmlearn/study/verdict_rules.json``; a path to a complete rules
        file, or a dict of changes to the shipped one.
    segment : {"first", "all"}, default="first"
        Tokens explainer masking may hit (segment A only, as in the paper).
    n_random : int, default=5
        Independent ``rand`` curves averaged into the random curve RACU is
        relative to (one draw is noisy on a few dozen texts; ``rand`` is the
        cheapest method).  Draw 0 uses the run's seed, draw ``d`` the seed
        ``SeedSequence([seed, d])`` gives.  (The frames call this averaged
        curve the ``baseline``: ``baseline_area`` is its area.)
    measures, measure_params, n_baseline : deprecated
        The old names of ``methods``, ``method_params`` and ``n_random``; set, they are used with a
        FutureWarning (removed in fmmlearn 0.3).
    n_bootstrap : int, default=9999
        Bootstrap resamples of the CIs over examples.
    confidence_level : float, default=0.95
    device : str, default="auto"
    cache_dir : path-like, optional
        Where stages are cached; ``None`` caches nothing.
    random_state : int, default=0
        Seed of the data splits and example subsets (not of fine-tuning:
        that is ``seeds``).
    verbose : int, default=1
        ``0`` silent, ``1`` one progress bar per stage, ``2`` also the
        classifier's own bars.
    n_jobs : int or None, default=None
        joblib's ``n_jobs`` for the (masking ratio, seed) fits.  ``None`` fits
        them one after the other, except inside a joblib backend context:
        under ``joblib.parallel_backend("dask")`` they run as Dask tasks,
        which write the models into the store (on a cluster ``cache_dir``
        must be a directory every worker can write; docs/scaling.md).  The
        models are the same as local fits with the same torch thread count.
    stages : sequence of Stage, optional
        The stages to run, in order; default :data:`~fmmlearn.study.STAGES`.  A study with more
        stages is ``FaithfulnessStudy(stages=[*STAGES, MyStage()])``: a :class:`~fmmlearn.study.Stage`
        declares what it reads and provides, its jobs are cached and resumed like the built-in ones,
        and its frames appear in the result and in the report (docs/quickstart.md).

    Examples
    --------
    >>> from fmmlearn.study import FaithfulnessStudy
    >>> study = FaithfulnessStudy(methods=["rand", "inp-grad-sign", "loo-sign"], n_train=300, n_valid=60,
    ...                           n_test=80, cache_dir="study-cache")                       # doctest: +SKIP
    >>> result = study.run("tweets")                                                       # doctest: +SKIP
    >>> result.racu_summary[["model", "method", "racu", "racu_low", "racu_high"]]          # doctest: +SKIP
    >>> result.to_html("report.html")                                                       # doctest: +SKIP
    """

    _parameter_constraints = {
        "model": [str, os.PathLike],
        "masking_ratios": ["array-like"],
        "methods": ["array-like"],
        "seeds": ["array-like"],
        "ratios": ["array-like", None],
        "metric": [str, None],
        "n_train": [StrictInterval(numbers.Integral, 1, None, closed="left"), None],
        "n_valid": [StrictInterval(numbers.Integral, 1, None, closed="left"), None],
        "n_test": [StrictInterval(numbers.Integral, 2, None, closed="left"), None],
        "max_examples": [dict, None],
        "method_params": [dict, None],
        "classifier_params": [dict, None],
        "in_distribution": [str, None],
        "detector": [str],
        "placeholder": [str],
        "other_domain": [str, "array-like", None],
        "erasure": [str, "array-like", None],
        "erasure_k": [numbers.Real, "array-like"],
        "explain_method": [str, None],
        "n_explain": [StrictInterval(numbers.Integral, 0, None, closed="left")],
        "convergence_threshold": [StrictInterval(numbers.Real, None, None, closed="neither"), StrOptions({"auto"}),
                                  None],
        "segment": [StrOptions({"first", "all"})],
        "n_random": [StrictInterval(numbers.Integral, 1, None, closed="left")],
        "measures": ["array-like", Hidden(StrOptions({DEPRECATED}))],
        "measure_params": [dict, None, Hidden(StrOptions({DEPRECATED}))],
        "n_baseline": [StrictInterval(numbers.Integral, 1, None, closed="left"), Hidden(StrOptions({DEPRECATED}))],
        "n_bootstrap": [StrictInterval(numbers.Integral, 100, None, closed="left")],
        "confidence_level": [StrictInterval(numbers.Real, 0, 1, closed="neither")],
        "device": [str],
        "cache_dir": [str, os.PathLike, None],
        "random_state": [StrictInterval(numbers.Integral, 0, None, closed="left")],
        "verbose": [StrictInterval(numbers.Integral, 0, None, closed="left")],
        "n_jobs": [StrictInterval(numbers.Integral, None, None, closed="neither"), None],
        "stages": ["array-like", None],
        "costly_examples": [StrictInterval(numbers.Integral, 2, None, closed="left"), None],
        "curve_examples": [StrictInterval(numbers.Integral, 2, None, closed="left"), None],
        "curve_seeds": ["array-like", None],
        "precision_probe": ["boolean"],
        "budget": [StrictInterval(numbers.Real, 0, None, closed="neither"), None],
        "budget_pairs": ["array-like", None],
        "budget_models": ["array-like", None],
        "rules": [str, os.PathLike, dict, None],
    }

    def __init__(self, model="minilm", *, masking_ratios=(0.0, 1.0), methods=DEFAULT_MEASURES, seeds=(0,),
                 ratios=None, metric=None, n_train=None, n_valid=None, n_test=None, max_examples=None,
                 method_params=None, classifier_params=None, in_distribution="rand", detector=DEFAULT_DETECTOR,
                 placeholder="auto", other_domain=None, erasure="auto",
                 erasure_k=DEFAULT_ERASURE_K, explain_method=None, n_explain=5, convergence_threshold="auto",
                 segment="first", n_random=5, n_bootstrap=9999, confidence_level=0.95, device="auto",
                 cache_dir=None, random_state=0, verbose=1, n_jobs=None, stages=None, costly_examples=None,
                 curve_examples=None, curve_seeds=None, precision_probe=False, budget=None, budget_pairs=None,
                 budget_models=None, rules=None, measures=DEPRECATED, measure_params=DEPRECATED,
                 n_baseline=DEPRECATED):
        self.model = model
        self.masking_ratios = masking_ratios
        self.methods = methods
        self.seeds = seeds
        self.ratios = ratios
        self.metric = metric
        self.n_train = n_train
        self.n_valid = n_valid
        self.n_test = n_test
        self.max_examples = max_examples
        self.method_params = method_params
        self.classifier_params = classifier_params
        self.in_distribution = in_distribution
        self.detector = detector
        self.placeholder = placeholder
        self.other_domain = other_domain
        self.erasure = erasure
        self.erasure_k = erasure_k
        self.explain_method = explain_method
        self.n_explain = n_explain
        self.convergence_threshold = convergence_threshold
        self.segment = segment
        self.n_random = n_random
        self.n_bootstrap = n_bootstrap
        self.confidence_level = confidence_level
        self.device = device
        self.cache_dir = cache_dir
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self.stages = stages
        self.costly_examples = costly_examples
        self.curve_examples = curve_examples
        self.curve_seeds = curve_seeds
        self.precision_probe = precision_probe
        self.budget = budget
        self.budget_pairs = budget_pairs
        self.budget_models = budget_models
        self.rules = rules
        self.measures = measures
        self.measure_params = measure_params
        self.n_baseline = n_baseline

    # ------------------------------------------------------------------ running
    def _stages(self) -> tuple:
        stages = STAGES if self.stages is None else tuple(self.stages)
        wrong = [s for s in stages if not isinstance(s, Stage)]
        if wrong:
            raise ValueError(f"stages: every stage must be a fmmlearn.study.Stage instance, got {wrong[:3]}.")
        names = [s.name for s in stages]
        if not all(names) or len(set(names)) != len(names):
            raise ValueError(f"stages: every stage needs a name of its own, got {names}.")
        try:
            check_order(stages, {"settings", "splits"})
        except ValueError as exc:
            raise ValueError(f"stages: {exc}") from None
        return stages

    def run(self, data, y=None):
        """Run (or resume) the study.

        Parameters
        ----------
        data : str, PaperDataset or sequence of str or sentence pairs
            A dataset name (``"tweets"``, ``"bbc-news"``, or one of
            :func:`fmmlearn.datasets.list_paper_datasets`), a loaded
            :class:`~fmmlearn.datasets.PaperDataset` (its splits are kept,
            e.g. ``load_babi(1, source="facebook")``) or texts.
        y : array-like, optional
            Labels of ``data`` when it holds texts.

        Returns
        -------
        StudyResult

        Raises
        ------
        ValueError
            Naming the option, for anything the study cannot run with -- before any model is fitted.
        fmmlearn.exceptions.JobInterrupted
            On Ctrl-C or SIGTERM (a ``KeyboardInterrupt``): every finished job is in ``cache_dir``, so the
            same ``run`` resumes there.
        """
        from ._system import load_average, machine_info

        self._validate_params()
        stages = self._stages()
        settings, splits = resolve_settings(self, data, y)
        started, load_start, t0 = time.strftime("%Y-%m-%dT%H:%M:%S%z"), load_average(), time.perf_counter()
        cache = StageCache(settings.cache_dir, identity=model_identity(settings.model))
        runtime = Runtime(cache, verbose=settings.verbose, release_models=len(settings.runs) > 4)
        # Ctrl-C or SIGTERM raise JobInterrupted: finished entries stay in the cache, half-written ones are removed.
        try:
            with signals_as_interrupts():
                context = run_stages(stages, Context({"settings": settings, "splits": splits}), runtime)
            frames = {name: context[name] for stage in stages for name in stage.frames}
            frames["timings"] = timings = pd.DataFrame(runtime.timings)
            metadata = study_metadata(settings, splits, context, stages, frames, timings, started=started,
                                      load_start=load_start, wall=time.perf_counter() - t0, machine=machine_info())
            return StudyResult(metadata=metadata, **frames)
        finally:
            cache.close()

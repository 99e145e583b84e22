"""The study runner: fine-tune plain and masked models, measure how faithful each explanation is.

:class:`FaithfulnessStudy` holds the settings (scikit-learn style: ``__init__``
only stores them); :meth:`FaithfulnessStudy.run` validates everything, splits
the data and runs the stages below for every (masking ratio, seed) model, each
stage for all models before the next, with one progress bar per stage:

1. **fit** -- ``FaithfulTextClassifier(max_masking_ratio=r, random_state=seed)``
   on the training split, best epoch selected on the validation split;
2. **performance** -- clean test predictions;
3. **random masking** -- the paper's check that the model tolerates masking;
4. **faithfulness** -- the explainer-masking curve of every measure, kept per
   example so that RACU gets bootstrap CIs over examples (``rand`` is the
   baseline, on the same examples);
5. **in-distribution** -- the MaSF report of ``rand``-masked test sets,
   calibrated on the validation split masked like the training batches;
6. **erasure** -- comprehensiveness, sufficiency and AOPC (ERASER's erasure
   metrics, removal by the mask token) of the ``erasure`` measures and of
   ``rand``, each with the share of its erased inputs that MaSF (fitted once
   per model on the same validation split, masked the same way) flags, and a
   validity flag;
7. **explanations** -- a few test examples explained by every model, for the
   report's heatmaps.

Every stage is cached on disk by content (see :mod:`fmmlearn.study._cache`), so
adding a measure reruns only that measure, and an interrupted run resumes.
"""

from __future__ import annotations

import numbers
import os
import time

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from .._validation import check_writable_dir
from . import _stages
from ._cache import StageCache, content_key, model_identity
from ._data import Splits, check_dataset_name, load_splits
from ._frames import FramesMixin, model_label
from ._options import checked_classifier_params, float_list, int_list, label_metric, option_error, str_list
from ._parallel import fit_in_parallel
from ._stats import score_function

__all__ = ["DEFAULT_ERASURE_K", "DEFAULT_ERASURE_MEASURES", "DEFAULT_MEASURES", "FaithfulnessStudy", "STAGES",
           "model_label"]

#: Measures of a study when none are given (``rand`` is always added: it is the baseline).
DEFAULT_MEASURES = ("rand", "grad-l2", "inp-grad-sign", "int-grad-sign", "loo-sign")
#: The stages, in the order they run.
STAGES = ("fit", "performance", "random masking", "faithfulness", "in-distribution", "erasure", "explanations")
#: Measures of the erasure stage with ``erasure="auto"`` (those among the study's measures).
DEFAULT_ERASURE_MEASURES = ("loo-sign",)
#: Rationale sizes of the erasure stage: shares of the eligible tokens (ERASER's 1 % and 5 % bins are empty
#: for texts of fewer than 100 and 20 tokens, such as tweets).
DEFAULT_ERASURE_K = (0.1, 0.2, 0.5)
#: MaSF level of the erasure stage's validity flag, and how far above it the flagged share may go.
ERASURE_ALPHA, ERASURE_MAX_INVALID_FACTOR = 0.05, 2.0
#: Test examples beam search gets when ``max_examples`` does not say: the shortest ones (~K n^2 / 2 forwards).
DEFAULT_BEAM_EXAMPLES = 20
# The paper drops bAbI runs whose unmasked test metric is at most 0.5.
_PAPER_CONVERGENCE = {"babi-1": 0.5, "babi-2": 0.5, "babi-3": 0.5}


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
    measures : sequence of str, default=("rand", "grad-l2", "inp-grad-sign", "int-grad-sign", "loo-sign")
        Importance measures (:func:`fmmlearn.importance_measures`); ``rand``
        is added when missing, as it is the baseline of RACU.
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
        random subset (the same, nested, for every measure), except for
        ``beam-sign-K``, which gets the shortest texts (its cost grows like
        ``K n^2 / 2``; 20 of them unless told).  The ``rand`` baseline covers
        all test examples, so every subset has its own baseline.
    measure_params : dict of str to dict, optional
        Parameters per measure, e.g. ``{"int-grad-sign": {"n_steps": 20}}``.
    classifier_params : dict, optional
        Other :class:`~fmmlearn.FaithfulTextClassifier` parameters
        (``max_epochs``, ``learning_rate``, ``max_length``, ...).
    in_distribution : str or None, default="rand"
        Measure whose masking the MaSF report tests (the paper: ``rand``);
        ``None`` skips the report.
    erasure : "auto", str, sequence of str or None, default="auto"
        Measures whose erasure metrics (:func:`fmmlearn.faithfulness.erasure_metrics`:
        comprehensiveness, sufficiency, their AOPC; removal by the mask token,
        the gold label as target) are measured, on the same test texts as
        their curves; each must be among ``measures``.  ``rand`` is added as
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
        Runs whose clean test metric is at or below it are flagged
        ``converged=False`` and left out of every mean (reported separately).
        ``"auto"``: 0.5 for bAbI (as in the paper), else no threshold.
    segment : {"first", "all"}, default="first"
        Tokens explainer masking may hit (segment A only, as in the paper).
    n_baseline : int, default=5
        Independent ``rand`` curves averaged into the baseline of RACU (one
        draw is noisy on a few dozen texts; ``rand`` is the cheapest measure).
        Draw 0 uses the run's seed, draw ``d`` the seed
        ``SeedSequence([seed, d])`` gives.
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

    Examples
    --------
    >>> from fmmlearn.study import FaithfulnessStudy
    >>> study = FaithfulnessStudy(measures=["rand", "inp-grad-sign", "loo-sign"], n_train=300, n_valid=60,
    ...                           n_test=80, cache_dir="study-cache")                       # doctest: +SKIP
    >>> result = study.run("tweets")                                                       # doctest: +SKIP
    >>> result.racu_summary[["model", "method", "racu", "racu_low", "racu_high"]]          # doctest: +SKIP
    >>> result.to_html("report.html")                                                       # doctest: +SKIP
    """

    _parameter_constraints = {
        "model": [str, os.PathLike],
        "masking_ratios": ["array-like"],
        "measures": ["array-like"],
        "seeds": ["array-like"],
        "ratios": ["array-like", None],
        "metric": [str, None],
        "n_train": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "n_valid": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "n_test": [Interval(numbers.Integral, 2, None, closed="left"), None],
        "max_examples": [dict, None],
        "measure_params": [dict, None],
        "classifier_params": [dict, None],
        "in_distribution": [str, None],
        "erasure": [str, "array-like", None],
        "erasure_k": [numbers.Real, "array-like"],
        "explain_method": [str, None],
        "n_explain": [Interval(numbers.Integral, 0, None, closed="left")],
        "convergence_threshold": [numbers.Real, StrOptions({"auto"}), None],
        "segment": [StrOptions({"first", "all"})],
        "n_baseline": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_bootstrap": [Interval(numbers.Integral, 100, None, closed="left")],
        "confidence_level": [Interval(numbers.Real, 0, 1, closed="neither")],
        "device": [str],
        "cache_dir": [str, os.PathLike, None],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
        "verbose": [Interval(numbers.Integral, 0, None, closed="left")],
        "n_jobs": [numbers.Integral, None],
    }

    def __init__(self, model="minilm", *, masking_ratios=(0.0, 1.0), measures=DEFAULT_MEASURES, seeds=(0,),
                 ratios=None, metric=None, n_train=None, n_valid=None, n_test=None, max_examples=None,
                 measure_params=None, classifier_params=None, in_distribution="rand", erasure="auto",
                 erasure_k=DEFAULT_ERASURE_K, explain_method=None, n_explain=5, convergence_threshold="auto",
                 segment="first", n_baseline=5, n_bootstrap=9999, confidence_level=0.95, device="auto",
                 cache_dir=None, random_state=0, verbose=1, n_jobs=None):
        self.model = model
        self.masking_ratios = masking_ratios
        self.measures = measures
        self.seeds = seeds
        self.ratios = ratios
        self.metric = metric
        self.n_train = n_train
        self.n_valid = n_valid
        self.n_test = n_test
        self.max_examples = max_examples
        self.measure_params = measure_params
        self.classifier_params = classifier_params
        self.in_distribution = in_distribution
        self.erasure = erasure
        self.erasure_k = erasure_k
        self.explain_method = explain_method
        self.n_explain = n_explain
        self.convergence_threshold = convergence_threshold
        self.segment = segment
        self.n_baseline = n_baseline
        self.n_bootstrap = n_bootstrap
        self.confidence_level = confidence_level
        self.device = device
        self.cache_dir = cache_dir
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ validation
    def _checked(self, data, y) -> dict:
        """Every option checked, before any data is loaded or model fitted; the resolved settings."""
        from ..faithfulness import check_ratios
        from ..importance import get_measure
        from ..metrics import get_metric

        self._validate_params()
        if isinstance(data, str):
            check_dataset_name(data)
        masking = float_list(self.masking_ratios, "masking_ratios")
        if any(not 0 <= r <= 1 for r in masking):
            raise option_error("masking_ratios", f"every ratio must lie in [0, 1], got {masking}.")
        seeds = int_list(self.seeds, "seeds")
        measures = []
        for name in ["rand", *[m for m in str_list(self.measures, "measures") if m != "rand"]]:
            try:
                measures.append(get_measure(name).name)
            except ValueError as exc:
                raise option_error("measures", str(exc)) from exc
        grid = check_ratios(self.ratios, "ratios", endpoints=True)
        metric = None
        if self.metric is not None:
            metric = label_metric(get_metric, self.metric)
        params = {}
        for name, value in (self.measure_params or {}).items():
            if name not in measures:
                raise option_error("measure_params", f"{name!r} is not among the measures {measures}.")
            if not isinstance(value, dict):
                raise option_error("measure_params", f"the parameters of {name!r} must be a dict, got {value!r}.")
            kw = {k: v for k, v in value.items() if k not in ("precision", "internal_batch_size")}
            try:
                get_measure(name).bind(kw)
            except (TypeError, ValueError) as exc:
                raise option_error("measure_params", str(exc)) from exc
            params[name] = dict(value)
        caps = {}
        for name, cap in (self.max_examples or {}).items():
            if name not in measures:
                raise option_error("max_examples", f"{name!r} is not among the measures {measures}.")
            if name == "rand":
                raise option_error("max_examples", "rand is the baseline of every subset and always covers all test "
                                             "examples; do not cap it.")
            if isinstance(cap, bool) or not isinstance(cap, numbers.Integral) or cap < 2:
                raise option_error("max_examples", f"{name!r} needs an integer of at least 2, got {cap!r}.")
            caps[name] = int(cap)
        for name in measures:
            if name.startswith("beam-") and name not in caps:
                caps[name] = DEFAULT_BEAM_EXAMPLES
        for option in ("in_distribution", "explain_method"):
            value = getattr(self, option)
            if value is not None:
                try:
                    get_measure(value)
                except ValueError as exc:
                    raise option_error(option, str(exc)) from exc
        erasure, erasure_k = self._checked_erasure(measures)
        clf_params = checked_classifier_params(self.classifier_params)
        cache_dir = None if self.cache_dir is None else check_writable_dir(self.cache_dir, "cache_dir")
        return {"masking_ratios": masking, "seeds": seeds, "measures": measures, "grid": grid, "metric": metric,
                "measure_params": params, "max_examples": caps, "classifier_params": clf_params,
                "erasure": erasure, "erasure_k": erasure_k, "cache_dir": cache_dir}

    def _checked_erasure(self, measures: list) -> tuple[list, list]:
        """The erasure stage's measures (``rand``, the baseline, last; empty: no stage) and its ``k`` grid."""
        from ..faithfulness import check_k
        from ..importance import get_measure

        grid = [float(v) for v in check_k(self.erasure_k, "erasure_k")]
        if self.erasure is None:
            return [], grid
        auto = isinstance(self.erasure, str) and self.erasure == "auto"
        if auto:
            names = [m for m in DEFAULT_ERASURE_MEASURES if m in measures]
        else:
            names = []
            for name in str_list(self.erasure, "erasure"):
                try:
                    name = get_measure(name).name
                except ValueError as exc:
                    raise option_error("erasure", str(exc)) from exc
                if name not in measures:
                    raise option_error("erasure", f"{name!r} is not among the measures {measures}; the erasure "
                                                  "metrics of a measure are computed on the test texts of its "
                                                  "curves (add it to measures).")
                names.append(name)
        names = [m for m in names if m != "rand"]
        if auto and not names:
            return [], grid
        return [*names, "rand"], grid

    def _checked_splits(self, splits: Splits, settings: dict) -> None:
        """Checks that need the data: enough examples for MaSF calibration, the explanations, each class."""
        from ..ood import min_calibration_size

        sizes = splits.sizes()
        if sizes["test"] < 2:
            raise option_error("n_test", f"the test split has {sizes['test']} example(s); curves need at least 2.")
        if self.in_distribution is not None and sizes["valid"] < min_calibration_size():
            raise option_error("n_valid", f"the validation split has {sizes['valid']} examples, but MaSF calibration "
                                    f"needs at least {min_calibration_size()} (about 60 before any test example "
                                    "can reach p < 0.05); raise n_valid or pass in_distribution=None.")
        if self.n_explain > sizes["test"]:
            raise option_error("n_explain", f"{self.n_explain} examples asked for, the test split has {sizes['test']}.")
        missing = sorted(set(splits.y_test.tolist()) - set(splits.y_train.tolist()), key=str)
        if missing:
            raise option_error("data", f"test labels {missing} never occur in the training split.")

    # ------------------------------------------------------------------ running
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
            Naming the option, for anything the study cannot run with --
            before any model is fitted.
        """
        settings = self._checked(data, y)
        splits = load_splits(data, y, n_train=self.n_train, n_valid=self.n_valid, n_test=self.n_test,
                             random_state=self.random_state)
        self._checked_splits(splits, settings)
        if settings["metric"] is None:
            from ..metrics import get_metric

            settings["metric"] = label_metric(get_metric, splits.primary_metric or "accuracy")
        threshold = self.convergence_threshold
        if isinstance(threshold, str):
            threshold = _PAPER_CONVERGENCE.get(splits.name)
        settings["convergence_threshold"] = threshold
        runner = _Runner(self, splits, settings)
        try:
            return runner.run()
        finally:
            runner.cache.close()


# --------------------------------------------------------------------------- the runner


class _Runner(FramesMixin):
    """One run of a study: the stages over all models, then the result frames (:class:`FramesMixin`)."""

    def __init__(self, study: FaithfulnessStudy, splits: Splits, settings: dict):
        self.study, self.splits, self.s = study, splits, settings
        self.cache = StageCache(settings["cache_dir"])
        self.runs = [(r, seed) for r in settings["masking_ratios"] for seed in settings["seeds"]]
        self.timings: list[dict] = []
        self.handles: dict = {}
        self.outputs: dict = {}

    # ---------------------------------------------------------------- helpers
    def _bar(self, stage: str, total: int):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=f"{stage:>15}", unit="job", disable=not self.study.verbose, leave=True)

    def _record(self, stage, run, method, cached, wall, payload_or_info, n_examples):
        counts = payload_or_info.get("counts", {})
        ratio, seed = run
        self.timings.append({"stage": stage, "model": model_label(ratio), "max_masking_ratio": ratio, "seed": seed,
                             "method": method, "cached": cached, "seconds": wall,
                             "compute_seconds": payload_or_info.get("seconds", np.nan), "n_examples": n_examples,
                             **{k: counts.get(k, 0) for k in ("forward_rows", "forward_tokens", "gradient_rows")}})

    def _call(self, stage, func, run, method, n_examples, *args):
        """Run a cached stage function for ``run``; record whether it was a hit and how long it took."""
        cached_func = self.cache.stage(func)
        handle = self.handles[run]
        hit = self.cache.is_cached(cached_func, handle, *args)
        start = time.perf_counter()
        payload = cached_func(handle, *args)
        self._record(stage, run, method, hit, time.perf_counter() - start, payload, n_examples)
        return payload

    def _release(self):
        if len(self.runs) > 4:  # keep memory bounded for big grids; reloading a model is cheap
            for handle in self.handles.values():
                handle.release()

    # ---------------------------------------------------------------- stages
    def fit_all(self):
        """Stage 1: fit (or load from the model store) every (masking ratio, seed) model."""
        from .._version import __version__
        from ..classifier import FaithfulTextClassifier
        from ..modeling import resolve_device

        sp, study = self.splits, self.study
        data_key = content_key(sp.X_train, sp.y_train.tolist(), sp.X_valid, sp.y_valid.tolist())
        identity = model_identity(study.model)
        device = str(resolve_device(study.device))
        self.fit_keys, unfitted = {}, {}
        for run in self.runs:
            ratio, seed = run
            params = dict(self.s["classifier_params"], model=study.model, max_masking_ratio=ratio,
                          random_state=seed, device=study.device, verbose=1 if study.verbose >= 2 else 0)
            clf = FaithfulTextClassifier(**params)
            fit_params = {k: v for k, v in clf.get_params().items() if k not in ("model", "verbose")}
            fit_params["device"] = device  # "auto" and "cpu" train the same model on a CPU-only machine
            key = content_key("fit", __version__, identity, data_key, sorted(fit_params.items(), key=str))
            self.fit_keys[run], unfitted[run] = key, clf
        # The scale-out hook (docs/scaling.md): with n_jobs, or inside joblib.parallel_backend("dask"), the
        # fits the store lacks run as joblib tasks that write into it; the loop below then loads them.
        remote = fit_in_parallel(self.cache, {self.fit_keys[r]: c for r, c in unfitted.items()},
                                 (sp.X_train, sp.y_train, sp.X_valid, sp.y_valid), study.n_jobs, _fit_info,
                                 study.device)
        with self._bar("fit", len(self.runs)) as bar:
            for run in self.runs:
                (ratio, seed), clf, key = run, unfitted[run], self.fit_keys[run]
                bar.set_postfix_str(f"{model_label(ratio)} seed {seed}")

                def fit(clf=clf):
                    """Fit on the training split, selecting the best epoch on the validation split."""
                    clf.fit(sp.X_train, sp.y_train, validation_data=(sp.X_valid, sp.y_valid))
                    return clf, _fit_info(clf, len(sp.y_train), len(sp.y_valid))

                start = time.perf_counter()
                handle, hit = self.cache.fit_or_load(key, fit, study.device)
                self.handles[run] = handle
                info = handle.fit_info
                self._record("fit", run, None, hit and key not in remote, time.perf_counter() - start, info,
                             len(sp.y_train))
                bar.update()

    def performance_all(self):
        """Stage 2: clean test predictions; also fixes the gold labels, the scorer and the example subsets."""
        sp = self.splits
        with self._bar("performance", len(self.runs)) as bar:
            for run in self.runs:
                self.outputs[("performance", run)] = self._call(
                    "performance", _stages.performance_stage, run, None, len(sp.y_test),
                    self.fit_keys[run], sp.X_test, sp.y_test.tolist())
                bar.update()
        first = self.outputs[("performance", self.runs[0])]
        self.gold, self.classes, self.lengths = first["gold"], np.asarray(first["classes"]), first["lengths"]
        self.score = score_function(self.s["metric"], self.classes)
        self._choose_subsets()
        self._release()

    def _choose_subsets(self):
        """Test examples of each measure: all, a nested random subset, or the shortest (beam search)."""
        n = len(self.gold)
        order = np.random.default_rng([self.study.random_state, 1]).permutation(n)
        self.subsets = {}
        for method in self.s["measures"]:
            cap = self.s["max_examples"].get(method)
            if cap is None or cap >= n:
                self.subsets[method] = ("all", np.arange(n))
            elif method.startswith("beam-"):
                shortest = np.sort(np.argsort(self.lengths, kind="stable")[:cap])
                self.subsets[method] = (f"shortest {cap}", shortest)
            else:
                self.subsets[method] = (f"random {cap}", np.sort(order[:cap]))

    def random_masking_all(self):
        """Stage 3: the random-masking curve of every model."""
        sp, s = self.splits, self.s
        with self._bar("random masking", len(self.runs)) as bar:
            for run in self.runs:
                self.outputs[("random masking", run)] = self._call(
                    "random masking", _stages.random_masking_stage, run, "random-masking", len(sp.y_test),
                    self.fit_keys[run], sp.X_test, sp.y_test.tolist(), s["grid"].tolist(), s["metric"].name, run[1])
                bar.update()
        self._release()

    def faithfulness_all(self):
        """Stage 4: per-example outcomes of every measure's explainer masking, on its subset of test texts."""
        sp, s = self.splits, self.s
        jobs = [("rand", d) for d in range(self.study.n_baseline)] + [(m, 0) for m in s["measures"][1:]]
        with self._bar("faithfulness", len(self.runs) * len(jobs)) as bar:
            for run in self.runs:
                for method, draw in jobs:
                    _, idx = self.subsets[method]
                    name = method if method != "rand" else f"rand (baseline draw {draw + 1})"
                    bar.set_postfix_str(f"{model_label(run[0])} seed {run[1]}: {name} ({len(idx)} examples)")
                    self.outputs[("faithfulness", run, method, draw)] = self._call(
                        "faithfulness", _stages.faithfulness_stage, run, method, len(idx), self.fit_keys[run],
                        [sp.X_test[i] for i in idx], sp.y_test[idx].tolist(), method, s["grid"].tolist(),
                        baseline_seed(run[1], draw), self.study.segment, s["measure_params"].get(method, {}))
                    bar.update()
        self._release()

    def in_distribution_all(self):
        """Stage 5: the MaSF report of every model (skipped with ``in_distribution=None``)."""
        sp, method = self.splits, self.study.in_distribution
        if method is None:
            return
        with self._bar("in-distribution", len(self.runs)) as bar:
            for run in self.runs:
                self.outputs[("in-distribution", run)] = self._call(
                    "in-distribution", _stages.in_distribution_stage, run, method, len(sp.y_test),
                    self.fit_keys[run], sp.X_valid, sp.X_test, sp.y_test.tolist(), method, self.s["grid"].tolist(),
                    run[1], self.study.segment, model_label(run[0]))
                bar.update()
        self._release()

    def erasure_all(self):
        """Stage 6: erasure metrics of every model, certified by one MaSF per model (none: skipped).

        MaSF is fitted on the validation split masked like the training
        batches, with the run's seed: the calibration of the in-distribution
        report.  When the split is too small for MaSF to flag anything at
        ``p < 0.05``, the metrics are computed but not certified (``valid`` is
        ``<NA>``), with one warning.
        """
        from .._warnings import warn
        from ..exceptions import FaithfulnessWarning
        from ..ood import min_calibration_size

        sp, s, study = self.splits, self.s, self.study
        self.erasure_jobs = _erasure_jobs(s["erasure"], self.subsets)
        self.erasure_unchecked = None
        if not self.erasure_jobs:
            return
        n_valid = len(sp.y_valid)
        calibrate = n_valid >= min_calibration_size()
        if not calibrate:
            self.erasure_unchecked = (f"the validation split has {n_valid} texts, MaSF needs at least "
                                      f"{min_calibration_size()}")
        with self._bar("erasure", len(self.runs) * (len(self.erasure_jobs) + calibrate)) as bar:
            for run in self.runs:
                where = f"{model_label(run[0])} seed {run[1]}"
                masf = None
                if calibrate:
                    bar.set_postfix_str(f"{where}: MaSF calibration ({n_valid} texts)")
                    masf = self._call("erasure", _stages.masf_stage, run, "MaSF calibration", n_valid,
                                      self.fit_keys[run], sp.X_valid, run[1])["masf"]
                    bar.update()
                    if not _can_flag(masf, ERASURE_ALPHA):
                        self.erasure_unchecked = (f"the validation split has {n_valid} texts: MaSF's level-3 fold "
                                                  f"of {len(masf.level3_reference_)} gives no p-value below "
                                                  f"{ERASURE_ALPHA:g}")
                        masf = None
                for method, (subset, idx) in self.erasure_jobs:
                    bar.set_postfix_str(f"{where}: {method} ({len(idx)} examples)")
                    self.outputs[("erasure", run, method, subset)] = self._call(
                        "erasure", _stages.erasure_stage, run, method, len(idx), self.fit_keys[run], masf,
                        [sp.X_test[i] for i in idx], sp.y_test[idx].tolist(), method, s["erasure_k"], run[1],
                        study.segment, s["measure_params"].get(method, {}), ERASURE_ALPHA,
                        ERASURE_MAX_INVALID_FACTOR, study.n_bootstrap, study.confidence_level)
                    bar.update()
        if self.erasure_unchecked:
            warn(f"erasure metrics are not certified in-distribution ({self.erasure_unchecked}; about 60 are "
                 "needed): their valid column is <NA>. Raise n_valid.", FaithfulnessWarning)
        self._release()

    def explanations_all(self, performance: pd.DataFrame, racu_summary: pd.DataFrame):
        """Stage 7: a few test texts explained by each model (its first converged seed), for the heatmaps."""
        study, sp = self.study, self.splits
        self.explain_method = study.explain_method or _most_faithful(racu_summary, self.s["masking_ratios"])
        if study.n_explain == 0 or self.explain_method is None:
            return pd.DataFrame()
        chosen = _explanation_examples(self.lengths, self.gold, study.n_explain, study.random_state)
        self.explained = chosen
        models = {}
        for run in self.runs:  # the first converged seed of each model (else its first seed)
            row = performance[(performance["max_masking_ratio"] == run[0]) & (performance["seed"] == run[1])]
            label = model_label(run[0])
            if label not in models or (not models[label][1] and bool(row["converged"].iloc[0])):
                models[label] = (run, bool(row["converged"].iloc[0]))
        frames = []
        with self._bar("explanations", len(models)) as bar:
            for label, (run, _) in models.items():
                payload = self._call("explanations", _stages.explanation_stage, run, self.explain_method,
                                     len(chosen), self.fit_keys[run], [sp.X_test[i] for i in chosen],
                                     sp.y_test[chosen].tolist(), self.explain_method, run[1], study.segment,
                                     self.s["measure_params"].get(self.explain_method, {}))
                # constant columns become keys of an Explanation's per-example table, so concat keeps both
                frame = payload["frame"].assign(model=label, seed=run[1])
                frame["test_index"] = chosen[frame["example"].to_numpy()]
                frames.append(frame)
                bar.update()
        return pd.concat(frames, ignore_index=True)

    # ---------------------------------------------------------------- assembling
    def run(self):
        """All stages, then the :class:`StudyResult`."""
        from ._result import StudyResult
        from ._system import load_average, machine_info

        started, load_start, t0 = time.strftime("%Y-%m-%dT%H:%M:%S%z"), load_average(), time.perf_counter()
        self.fit_all()
        self.performance_all()
        self.random_masking_all()
        self.faithfulness_all()
        self.in_distribution_all()
        self.erasure_all()
        performance = self._performance_frame()
        converged = {(r, s): c for r, s, c in performance[["max_masking_ratio", "seed", "converged"]].itertuples(
            index=False)}
        curves, outcomes = self._curve_frames(converged)
        racu = self._racu_frame(converged)
        racu_summary = self._racu_summary(racu, converged)
        in_distribution = self._in_distribution_frame(converged)
        erasure = self._erasure_frame(converged)
        explanations = self.explanations_all(performance, racu_summary)
        timings = pd.DataFrame(self.timings)
        metadata = self._metadata(timings, started, load_start, time.perf_counter() - t0, machine_info())
        return StudyResult(performance=performance, curves=curves, racu=racu, racu_summary=racu_summary,
                           in_distribution=in_distribution, erasure=erasure, explanations=explanations,
                           outcomes=outcomes, timings=timings, metadata=metadata)


def _fit_info(clf, n_train: int, n_valid: int) -> dict:
    """Epochs, the selected epoch and forward counts of a fit (rows through the model, analytically)."""
    history = clf.history_
    best_columns = [c for c in history.columns if c.startswith("valid_") and c.endswith("_best")
                    and c != "valid_loss_best"]
    best = None
    if best_columns and history[best_columns[0]].any():
        best = int(history.index[history[best_columns[0]].to_numpy(dtype=bool)][-1])
    n_valid_rows = n_valid * (2 if clf.validation == "both" and clf.max_masking_ratio > 0 else 1)
    epochs = len(history)
    return {"epochs": epochs, "best_epoch": best, "n_train": n_train, "n_valid": n_valid,
            "counts": {"forward_rows": epochs * (n_train + n_valid_rows), "gradient_rows": epochs * n_train,
                       "forward_tokens": 0}}


def _erasure_jobs(measures: list, subsets: dict) -> list:
    """``(method, (subset, indices))`` of the erasure stage: each measure on its texts, ``rand`` on each of them."""
    if not measures:  # erasure=None, or "auto" without a default erasure measure
        return []
    jobs = [(m, subsets[m]) for m in measures if m != "rand"]
    texts = list({name: (name, idx) for _, (name, idx) in jobs}.values()) or [subsets["rand"]]
    return jobs + [("rand", pair) for pair in texts]


def _can_flag(masf, alpha: float) -> bool:
    """Whether a fitted calibrated MaSF can give a p-value below ``alpha`` (its level-3 fold is large enough)."""
    return 1.0 / (len(masf.level3_reference_) + 1) < alpha


def baseline_seed(seed: int, draw: int) -> int:
    """Seed of ``rand`` baseline draw ``draw`` of a run with ``seed`` (draw 0: the seed itself)."""
    return int(seed) if draw == 0 else int(np.random.SeedSequence([seed, draw]).generate_state(1)[0])


def _most_faithful(summary: pd.DataFrame, masking_ratios) -> str | None:
    """The most faithful measure of the most masked model (beam search excluded: it is costly to explain)."""
    from ._frames import _most_faithful_rows

    if summary.empty:  # only the rand baseline was measured: nothing to rank
        return None
    rows = summary[(summary["max_masking_ratio"] == max(masking_ratios))
                   & ~summary["method"].astype(str).str.startswith("beam-")]
    rows = rows.dropna(subset=["acu"]).reset_index(drop=True)
    if rows.empty:
        return None
    return str(rows.loc[_most_faithful_rows(rows), "method"].iloc[0])


def _explanation_examples(lengths, gold, n: int, seed: int) -> np.ndarray:
    """``n`` test examples for the heatmaps: classes in turn, texts of moderate length first."""
    rng = np.random.default_rng([seed, 2])
    moderate = (lengths >= 8) & (lengths <= 40)
    picked = []
    pools = {c: list(rng.permutation(np.flatnonzero(gold == c))) for c in np.unique(gold)}
    for pool in pools.values():  # moderate lengths first, keeping the random order otherwise
        pool.sort(key=lambda i: not moderate[i])
    while len(picked) < n and any(pools.values()):
        for pool in pools.values():
            if pool and len(picked) < n:
                picked.append(pool.pop(0))
    return np.asarray(sorted(picked), dtype=np.int64)

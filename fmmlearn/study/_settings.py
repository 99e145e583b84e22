"""A study's settings, checked once and frozen: what every stage reads instead of the estimator.

:func:`resolve_settings` validates every option of a :class:`~fmmlearn.study.FaithfulnessStudy`
(each bad value is a ValueError naming the option, raised before any data is loaded or model
fitted), loads the splits, checks what needs the data, and returns a :class:`StudySettings`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from ..utils import check_writable_dir, renamed_parameter
from ._data import Splits, check_dataset_name, load_splits, other_domain_texts
from ._options import checked_classifier_params, float_list, int_list, label_metric, option_error, str_list
from ._rules import load_rules

__all__ = ["COSTLY_FAMILIES", "DEFAULT_BEAM_EXAMPLES", "DEFAULT_ERASURE_K", "DEFAULT_ERASURE_MEASURES",
           "DEFAULT_MEASURES", "StudySettings", "is_costly", "resolve_settings"]

#: Measures of a study when none are given (``rand`` is always added: it is the baseline).
DEFAULT_MEASURES = ("rand", "grad-l2", "inp-grad-sign", "int-grad-sign", "loo-sign")
#: Measures of the erasure stage with ``erasure="auto"`` (those among the study's measures).
DEFAULT_ERASURE_MEASURES = ("loo-sign",)
#: Rationale sizes of the erasure stage: shares of the eligible tokens (ERASER's 1 % and 5 % bins are empty
#: for texts of fewer than 100 and 20 tokens, such as tweets).
DEFAULT_ERASURE_K = (0.1, 0.2, 0.5)
#: Test examples beam search gets when ``max_examples`` does not say: the shortest ones (~K n^2 / 2 forwards).
DEFAULT_BEAM_EXAMPLES = 20


def _frozen_dict(values) -> MappingProxyType:
    return MappingProxyType(dict(values))


@dataclass(frozen=True)
class StudySettings:
    """Everything a study's stages read, resolved and checked (see :class:`~fmmlearn.study.FaithfulnessStudy`).

    ``measures``, ``measure_params`` and ``n_baseline`` hold the study's ``methods``, ``method_params`` and
    ``n_random``: the fields keep their first names, as the metadata of saved studies does.
    """

    model: object
    masking_ratios: tuple
    seeds: tuple
    measures: tuple  # "rand" (the baseline) first
    grid: np.ndarray
    metric: object  # fmmlearn.metrics.Metric, resolved from the data when not given
    measure_params: MappingProxyType
    max_examples: MappingProxyType
    classifier_params: MappingProxyType
    in_distribution: str | None
    detector: str  # a name of fmmlearn.ood.DETECTORS: the in-distribution test of the report and erasure
    placeholder: str  # the matched positive control's placeholder (fmmlearn.ood.PLACEHOLDERS)
    other_domain: tuple  # texts of another domain, a reported control (may be empty)
    erasure: tuple  # empty: no erasure stage; else the measures with "rand" last
    erasure_k: tuple
    explain_method: str | None
    n_explain: int
    convergence_threshold: float | str | None  # "auto": beat the input-blind predictor
    segment: str
    n_baseline: int
    n_bootstrap: int
    confidence_level: float
    device: str
    cache_dir: Path | None
    random_state: int
    verbose: int
    n_jobs: int | None
    costly_examples: int | None = None
    curve_examples: int | None = None  # test texts of the masking stages (None: all); performance scores all
    curve_seeds: tuple | None = None  # seeds of the masking stages (None: all); fits and performance use all
    precision_probe: bool = False  # judge bf16 per measure by a probe (fmmlearn.study._precision)
    budget: float | None = None
    budget_pairs: tuple | None = None  # the comparisons the budget rounds try to decide (None: every one)
    budget_models: tuple | None = None  # the masking ratios whose comparisons they try to decide (None: all)
    rules: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    params: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))  # the estimator's get_params()

    @property
    def runs(self) -> list:
        """``(max_masking_ratio, seed)`` of every fine-tuned model, masking ratio by masking ratio."""
        return [(r, seed) for r in self.masking_ratios for seed in self.seeds]

    @property
    def curve_seed_list(self) -> tuple:
        """The seeds whose models the masking stages measure (``curve_seeds``, else every seed)."""
        return self.seeds if self.curve_seeds is None else self.curve_seeds

    @property
    def curve_runs(self) -> list:
        """``(max_masking_ratio, seed)`` of the models the masking stages measure."""
        return [(r, seed) for r in self.masking_ratios for seed in self.curve_seed_list]


def _checked_measures(values) -> tuple:
    """The measures' names, ``rand`` first; explainer values (docs/explainers.md) by their registered names."""
    from ..importance import get_method

    items = [values] if isinstance(values, str) or not isinstance(values, (list, tuple)) else list(values)
    if not items:
        raise option_error("methods", f"expected a non-empty list of measures, got {values!r}.")
    measures = ["rand"]
    for value in items:
        try:
            name = get_method(value).name
        except (TypeError, ValueError) as exc:
            raise option_error("methods", str(exc)) from exc
        if name not in measures:
            measures.append(name)
    return tuple(measures)


def _checked_measure_params(values, measures) -> dict:
    from ..importance import get_method

    params = {}
    for name, value in (values or {}).items():
        if name not in measures:
            raise option_error("method_params", f"{name!r} is not among the measures {list(measures)}.")
        if not isinstance(value, dict):
            raise option_error("method_params", f"the parameters of {name!r} must be a dict, got {value!r}.")
        kw = {k: v for k, v in value.items() if k not in ("precision", "internal_batch_size")}
        try:
            get_method(name).bind(kw)
        except (TypeError, ValueError) as exc:
            raise option_error("method_params", str(exc)) from exc
        params[name] = dict(value)
    return params


#: Measure families whose cost per text is high: they share one subset of the test texts.
COSTLY_FAMILIES = ("loo-", "int-grad-", "beam-")


def is_costly(measure: str) -> bool:
    """Whether ``measure`` is one of the costly families (leave-one-out, integrated gradients, beam search)
    or an explainer value declared costly (the default of every explainer, docs/explainers.md)."""
    from ..importance.external import registered_explainer

    explainer = registered_explainer(measure)
    return explainer.costly if explainer is not None else measure.startswith(COSTLY_FAMILIES)


def _checked_caps(values, measures, costly_examples=None) -> dict:
    caps = {}
    for name, cap in (values or {}).items():
        if name not in measures:
            raise option_error("max_examples", f"{name!r} is not among the measures {list(measures)}.")
        if name == "rand":
            raise option_error("max_examples", "rand is the baseline of every subset and always covers all test "
                                               "examples; do not cap it.")
        if isinstance(cap, bool) or not isinstance(cap, numbers.Integral) or cap < 2:
            raise option_error("max_examples", f"{name!r} needs an integer of at least 2, got {cap!r}.")
        caps[name] = int(cap)
    for name in measures:
        if is_costly(name) and name not in caps and costly_examples is not None:
            caps[name] = int(costly_examples)
        elif name.startswith("beam-") and name not in caps:
            caps[name] = DEFAULT_BEAM_EXAMPLES
    return caps


def _checked_erasure(erasure, erasure_k, measures) -> tuple[tuple, tuple]:
    """The erasure stage's measures (``rand``, the baseline, last; empty: no stage) and its ``k`` grid."""
    from ..faithfulness import check_k
    from ..importance import get_method

    grid = tuple(float(v) for v in check_k(erasure_k, name="erasure_k"))
    if erasure is None:
        return (), grid
    auto = isinstance(erasure, str) and erasure == "auto"
    if auto:
        names = [m for m in DEFAULT_ERASURE_MEASURES if m in measures]
    else:
        names = []
        for name in str_list(erasure, "erasure"):
            try:
                name = get_method(name).name
            except ValueError as exc:
                raise option_error("erasure", str(exc)) from exc
            if name not in measures:
                raise option_error("erasure", f"{name!r} is not among the measures {list(measures)}; the erasure "
                                              "metrics of a measure are computed on the test texts of its "
                                              "curves (add it to measures).")
            names.append(name)
    names = [m for m in names if m != "rand"]
    if auto and not names:
        return (), grid
    return (*names, "rand"), grid


def _checked_measure_option(study, option: str) -> None:
    from ..importance import get_method

    value = getattr(study, option)
    if value is not None:
        try:
            get_method(value)
        except ValueError as exc:
            raise option_error(option, str(exc)) from exc


def _checked_curve_seeds(curve_seeds, seeds) -> tuple | None:
    """``curve_seeds`` as a tuple of the study's seeds (``None``: all of them)."""
    if curve_seeds is None:
        return None
    chosen = tuple(int_list(curve_seeds, "curve_seeds"))
    if not chosen or not set(chosen) <= set(seeds):
        raise option_error("curve_seeds", f"expected a non-empty subset of the seeds {list(seeds)}, got {list(chosen)}.")
    return tuple(s for s in seeds if s in chosen)


def _checked_pairs(pairs, measures) -> tuple | None:
    """``budget_pairs`` as a tuple of ``(measure, measure)`` pairs of the study's measures."""
    if pairs is None:
        return None
    out = []
    for pair in pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not all(m in measures for m in pair):
            raise option_error("budget_pairs", f"expected pairs of the study's measures {list(measures)}, got "
                                               f"{pair!r}.")
        out.append(tuple(pair))
    return tuple(out)


def _checked_detector_options(study) -> None:
    from ..ood import DETECTORS, PLACEHOLDERS

    if study.detector not in DETECTORS:
        raise option_error("detector", f"expected one of {sorted(DETECTORS)}, got {study.detector!r}.")
    if study.placeholder not in PLACEHOLDERS:
        raise option_error("placeholder", f"expected one of {list(PLACEHOLDERS)}, got {study.placeholder!r}.")


def _checked_options(study) -> StudySettings:
    """Every option checked (no data needed); metric and convergence threshold still unresolved."""
    from ..faithfulness import check_ratios
    from ..metrics import get_metric

    masking = float_list(study.masking_ratios, "masking_ratios")
    if any(not 0 <= r <= 1 for r in masking):
        raise option_error("masking_ratios", f"every ratio must lie in [0, 1], got {masking}.")
    seeds = int_list(study.seeds, "seeds")
    measures = _checked_measures(renamed_parameter(study, "measures", "methods"))
    grid = check_ratios(study.ratios, name="ratios", endpoints=True)
    grid.flags.writeable = False
    metric = None if study.metric is None else label_metric(get_metric, study.metric)
    params = _checked_measure_params(renamed_parameter(study, "measure_params", "method_params"), measures)
    caps = _checked_caps(study.max_examples, measures, study.costly_examples)
    for option in ("in_distribution", "explain_method"):
        _checked_measure_option(study, option)
    _checked_detector_options(study)
    erasure, erasure_k = _checked_erasure(study.erasure, study.erasure_k, measures)
    clf_params = checked_classifier_params(study.classifier_params)
    cache_dir = None if study.cache_dir is None else check_writable_dir(study.cache_dir, "cache_dir")
    return StudySettings(
        model=study.model, masking_ratios=tuple(masking), seeds=tuple(seeds), measures=measures, grid=grid,
        metric=metric, measure_params=_frozen_dict(params), max_examples=_frozen_dict(caps),
        classifier_params=_frozen_dict(clf_params), in_distribution=study.in_distribution,
        detector=study.detector, placeholder=study.placeholder, other_domain=(), erasure=erasure,
        erasure_k=erasure_k, explain_method=study.explain_method, n_explain=study.n_explain,
        convergence_threshold=study.convergence_threshold, segment=study.segment,
        n_baseline=renamed_parameter(study, "n_baseline", "n_random"),
        n_bootstrap=study.n_bootstrap, confidence_level=study.confidence_level, device=study.device,
        cache_dir=cache_dir, random_state=study.random_state, verbose=study.verbose, n_jobs=study.n_jobs,
        costly_examples=study.costly_examples, curve_examples=study.curve_examples,
        curve_seeds=_checked_curve_seeds(study.curve_seeds, seeds), precision_probe=study.precision_probe,
        budget=study.budget,
        budget_pairs=_checked_pairs(study.budget_pairs, measures),
        budget_models=None if study.budget_models is None else tuple(float_list(study.budget_models,
                                                                                "budget_models")),
        rules=_frozen_dict(load_rules(study.rules)),
        params=_frozen_dict(study.get_params()))


def _checked_splits(settings: StudySettings, splits: Splits) -> None:
    """Checks that need the data: enough examples for MaSF calibration, the explanations, each class."""
    from ..ood import min_calibration_size

    sizes = splits.sizes()
    if sizes["test"] < 2:
        raise option_error("n_test", f"the test split has {sizes['test']} example(s); curves need at least 2.")
    if settings.in_distribution is not None and sizes["valid"] < min_calibration_size():
        raise option_error("n_valid", f"the validation split has {sizes['valid']} examples, but the in-distribution "
                                      f"test needs at least {min_calibration_size()} to calibrate (about 20 before any "
                                      "test example can reach p < 0.05); raise n_valid or pass in_distribution=None.")
    if settings.n_explain > sizes["test"]:
        raise option_error("n_explain", f"{settings.n_explain} examples asked for, the test split has "
                                        f"{sizes['test']}.")
    missing = sorted(set(splits.y_test.tolist()) - set(splits.y_train.tolist()), key=str)
    if missing:
        raise option_error("data", f"test labels {missing} never occur in the training split.")


def resolve_settings(study, data, y=None) -> tuple[StudySettings, Splits]:
    """The checked settings and the splits of ``study.run(data, y)`` (see :meth:`FaithfulnessStudy.run`).

    Raises
    ------
    ValueError
        Naming the option, for anything the study cannot run with -- before any model is fitted.
    """
    study._validate_params()
    if isinstance(data, str):
        check_dataset_name(data)
    settings = _checked_options(study)
    splits = load_splits(data, y, n_train=study.n_train, n_valid=study.n_valid, n_test=study.n_test,
                         random_state=study.random_state)
    _checked_splits(settings, splits)
    other = other_domain_texts(study.other_domain, len(splits.y_test), study.random_state)
    if other and isinstance(splits.X_test[0], tuple):
        raise option_error("other_domain", "the data are sentence pairs; give pairs of another domain as a list of "
                                           "(a, b) tuples, not a corpus of single texts.")
    settings = replace(settings, other_domain=other)
    metric = settings.metric
    if metric is None:
        from ..metrics import get_metric

        metric = label_metric(get_metric, splits.primary_metric or "accuracy")
    return replace(settings, metric=metric), splits

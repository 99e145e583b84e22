"""The study as a declared pipeline: stages that read named inputs and provide named outputs.

A :class:`Stage` declares its ``name``, the context values it ``requires``, the ones it
``provides`` (some of which are result ``frames``) and a ``version``.  Its work is a list of
:class:`Job` objects (one per fitted model and measure, typically), each computed by
:meth:`Stage.compute` on one fitted classifier and cached by content; :meth:`Stage.finish` turns
the jobs' payloads into the values it provides.  :func:`run_stages` is the whole runner: stage after
stage, each sees an immutable :class:`Context` of what the stages before it provided.

A new stage is a subclass in any module (``FaithfulnessStudy(stages=STAGES + (MyStage(),))``): it
runs, caches, resumes and shows up in the result's frames and in the report (through
:meth:`Stage.report_section`) without a change to fmmlearn.
"""

from __future__ import annotations

import hashlib
import inspect
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["Context", "Job", "ReportSection", "Runtime", "Stage", "check_order", "forward_counter", "run_stages"]


class Context(Mapping):
    """What the stages so far provided, by name; read-only (a stage adds values by returning them).

    Parameters
    ----------
    values : dict, optional
        Name -> value.
    origin : dict, optional
        Name -> the stage that provided it (error messages name it).
    """

    def __init__(self, values=None, *, origin: dict | None = None):
        self._values, self._origin = dict(values or {}), dict(origin or {})

    def __getitem__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"no stage provided {name!r}; the context holds {sorted(self._values)}") from None

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def extended(self, values: dict, by: str) -> "Context":
        """A new context with ``values`` added by stage ``by`` (an existing name is an error).

        Parameters
        ----------
        values : dict
            Name -> value of what the stage provides.
        by : str
            The stage's name (error messages name it).

        Returns
        -------
        Context
            This context's values and ``values``.
        """
        clash = sorted(set(values) & set(self._values))
        if clash:
            raise ValueError(f"stage {by!r} provides {clash}, which stage(s) "
                             f"{sorted({self._origin.get(k, '?') for k in clash})} already provided.")
        return Context({**self._values, **values}, origin={**self._origin, **{k: by for k in values}})


@dataclass(frozen=True)
class Job:
    """One cached unit of a stage's work.

    Parameters
    ----------
    run : tuple of (float, int) or None
        ``(max_masking_ratio, seed)`` of the fitted model it runs on; ``None`` for work that needs no
        model (its payload is computed by :meth:`Stage.compute` with ``clf=None``).
    key : tuple
        What, besides the stage and the model, determines the payload (texts, measure, ratios,
        seeds); hashed into the cache key, so it must hold plain values.
    method : str or None
        The measure, for the timings table and the progress bar.
    n_examples : int
        Texts the job covers (timings).
    label : str
        Progress-bar text.
    data : dict
        Inputs that are not part of the key because the key already covers them (e.g. a fitted MaSF
        whose own key is in ``key``).
    """

    run: tuple | None
    key: tuple
    method: str | None = None
    n_examples: int = 0
    label: str = ""
    data: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "key", _frozen(self.key))
        if self.run is not None:
            object.__setattr__(self, "run", (float(self.run[0]), int(self.run[1])))


def _frozen(value):
    """Lists (and arrays) as tuples, all the way down, so a job key is hashable."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    return value


@dataclass(frozen=True)
class ReportSection:
    """A section of the HTML report: a title, a paragraph on how to read it, and the frame shown as a table.

    Parameters
    ----------
    title : str
        The section's heading.
    intro : str
        The paragraph above the table.
    frame : str
        The name of the result frame shown.
    """

    title: str
    intro: str
    frame: str


class Stage:
    """A step of the study.  Subclasses set the class attributes and override what they need.

    ``requires`` / ``provides`` name context values; ``frames`` names the provided values that are
    result frames (DataFrames saved with the result).  ``version`` is part of every cache key: bump it
    when the computation's meaning changes without its source code changing.
    """

    name: str = ""
    requires: tuple = ()
    provides: tuple = ()
    frames: tuple = ()
    version: str = "1"

    def jobs(self, context: Context) -> list:
        """The jobs of this stage (default: none).

        Parameters
        ----------
        context : Context
            What the earlier stages provided (read-only).

        Returns
        -------
        list of Job
            The stage's units of work, each computed (and cached) on one fitted model.
        """
        return []

    def compute(self, clf, job: Job, context: Context) -> dict:
        """The payload of one job: a dict of arrays, frames, numbers, strings (cached as such).

        Parameters
        ----------
        clf : FaithfulTextClassifier
            The fitted model of the job's run.
        job : Job
            The job.
        context : Context
            What the earlier stages provided (read-only).

        Returns
        -------
        dict
            The payload, cached by the job's content key.
        """
        raise NotImplementedError(f"stage {self.name!r} has jobs but no compute()")

    def finish(self, context: Context, results: dict) -> dict:
        """The values this stage provides, from ``results`` (job -> payload).

        Parameters
        ----------
        context : Context
            What the earlier stages provided (read-only).
        results : dict
            Job -> the payload :meth:`compute` returned for it.

        Returns
        -------
        dict
            Name -> value, for every name in :attr:`provides`.
        """
        return {}

    def execute(self, context: Context, runtime: "Runtime") -> dict:
        """Run the jobs (cached, one progress bar), then :meth:`finish`.  Stages with dependent jobs override it.

        Parameters
        ----------
        context : Context
            What the earlier stages provided (read-only).
        runtime : Runtime
            The runner's cache, progress bars and fitted models.

        Returns
        -------
        dict
            What :meth:`finish` returned.
        """
        jobs = self.jobs(context)
        with runtime.progress(self.name, len(jobs)) as bar:
            results = runtime.run_jobs(self, jobs, context, bar)
        return self.finish(context, results)

    def report_section(self, frames: dict) -> ReportSection | None:
        """The report section of a stage added to a study: by default its first non-empty frame as a table.

        Titled by the stage's name, introduced by the first paragraph of its docstring (built-in stages
        have sections of their own in the report template).

        Parameters
        ----------
        frames : dict
            Name -> frame of the study's result.

        Returns
        -------
        ReportSection or None
            The section, or ``None`` when the stage's frames are empty.
        """
        shown = [name for name in self.frames if name in frames and len(frames[name])]
        if not shown:
            return None
        intro = " ".join((type(self).__doc__ or "").strip().split("\n\n")[0].split())
        return ReportSection(title=self.name, intro=intro, frame=shown[0])

    def code_digest(self) -> str:
        """SHA-256 of the source of :meth:`compute` (a changed computation is a new cache key).

        Returns
        -------
        str
            The hex digest.
        """
        try:
            source = inspect.getsource(type(self).compute)
        except (OSError, TypeError):  # defined interactively: the qualified name stands in
            source = type(self).compute.__qualname__
        return hashlib.sha256(source.encode()).hexdigest()


# --------------------------------------------------------------------------- counting model work


class _Counts:
    def __init__(self):
        self.forward_rows = self.forward_tokens = self.gradient_rows = 0

    def as_dict(self) -> dict:
        return {"forward_rows": self.forward_rows, "forward_tokens": self.forward_tokens,
                "gradient_rows": self.gradient_rows}


@contextmanager
def forward_counter(module):
    """Count the sequences (and padded tokens) that go through ``module``'s forward pass.

    ``gradient_rows`` counts the rows of forward passes run with gradients enabled (each is followed
    by a backward pass).
    """
    counts = _Counts()

    def hook(_module, args, kwargs):
        for x in (kwargs.get("input_ids"), kwargs.get("inputs_embeds"), args[0] if args else None):
            if isinstance(x, torch.Tensor):
                counts.forward_rows += int(x.shape[0])
                counts.forward_tokens += int(x.shape[0] * x.shape[1])
                counts.gradient_rows += int(x.shape[0]) if torch.is_grad_enabled() else 0
                break

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield counts
    finally:
        handle.remove()


@contextmanager
def _measured(clf):
    """``info`` filled with the block's wall ``seconds``, its ``cpu_seconds`` (every thread of the process) and
    the model's ``counts``."""
    info = {}
    start, cpu_start = time.perf_counter(), time.process_time()
    if clf is None:
        yield info
        info["counts"] = _Counts().as_dict()
    else:
        with forward_counter(clf.model_) as counts:
            yield info
        info["counts"] = counts.as_dict()
    info["seconds"] = time.perf_counter() - start
    info["cpu_seconds"] = time.process_time() - cpu_start


# --------------------------------------------------------------------------- the runtime and the runner


class Runtime:
    """What the stages share while a study runs: the cache, the models, the timings, the progress bars.

    Parameters
    ----------
    cache : StageCache
    verbose : int
    release_models : bool
        Drop the fitted models from memory after each stage (big grids; reloading is cheap).
    """

    def __init__(self, cache, *, verbose: int = 0, release_models: bool = False):
        self.cache, self.verbose, self.release_models = cache, verbose, release_models
        self.timings: list[dict] = []

    @contextmanager
    def progress(self, stage: str, total: int):
        """One tqdm bar per stage (``verbose=0``: silent)."""
        from tqdm.auto import tqdm

        with tqdm(total=total, desc=f"{stage:>15}", unit="job", disable=not self.verbose, leave=True) as bar:
            yield bar

    def record(self, stage: str, run, method, cached: bool, wall: float, info: dict, n_examples: int,
               precision: str | None = None) -> None:
        """One row of the timings table (``precision``: a measure forced to a reduced precision, else fp32)."""
        from ._names import model_label

        counts = info.get("counts", {})
        ratio, seed = run if run is not None else (np.nan, None)
        self.timings.append({"stage": stage, "model": None if run is None else model_label(ratio),
                             "max_masking_ratio": ratio, "seed": seed, "method": method,
                             "precision": precision or "fp32", "cached": cached,
                             "seconds": wall, "compute_seconds": info.get("seconds", np.nan),
                             "compute_cpu_seconds": info.get("cpu_seconds", np.nan),
                             "n_examples": n_examples,
                             **{k: counts.get(k, 0) for k in ("forward_rows", "forward_tokens", "gradient_rows")}})

    @staticmethod
    def job_key(stage: Stage, job: Job, context: Context) -> str:
        """The cache key of ``job``: the stage (name, version, code), the model's fit key and the job's key."""
        from ._cache import content_key

        fit_key = None if job.run is None else context["fit_keys"][job.run]
        return content_key("stage", stage.name, stage.version, stage.code_digest(), fit_key, job.key)

    def run_job(self, stage: Stage, job: Job, context: Context) -> dict:
        """The payload of ``job``: from the cache, or computed on its model (``context["models"]``) and stored."""
        key = self.job_key(stage, job, context)
        start = time.perf_counter()
        payload = self.cache.load(stage.name, key)
        cached = payload is not None
        if payload is None:
            clf = None if job.run is None else context["models"][job.run].get()
            with _measured(clf) as info:
                out = stage.compute(clf, job, context)
            self.cache.save(stage.name, key, {**out, "seconds": info["seconds"], "cpu_seconds": info["cpu_seconds"],
                                              "counts": info["counts"]})
            # what was stored, read back: a fresh run and a resumed one see the very same payload
            payload = self.cache.load(stage.name, key)
        self.record(stage.name, job.run, job.method, cached, time.perf_counter() - start, payload, job.n_examples,
                    precision=job.data.get("precision"))
        return payload

    def run_jobs(self, stage: Stage, jobs: list, context: Context, bar) -> dict:
        """``{job: payload}`` of every job, in order, advancing ``bar``."""
        results = {}
        for job in jobs:
            if job.label:
                bar.set_postfix_str(job.label)
            results[job] = self.run_job(stage, job, context)
            bar.update()
        return results

    def release(self, context: Context) -> None:
        """Drop the fitted models from memory (when asked to): the next stage reloads what it needs."""
        if self.release_models:
            for handle in context.get("models", {}).values():
                handle.release()


def check_order(stages, available: set) -> None:
    """Every stage's ``requires`` are provided by the context or an earlier stage, and no name twice.

    Checked before any stage runs, so a misplaced stage fails before a model is fitted.
    """
    available, origin = set(available), {}
    for stage in stages:
        missing = [name for name in stage.requires if name not in available]
        if missing:
            raise ValueError(f"stage {stage.name!r} requires {missing}, which no earlier stage provides "
                             f"(available: {sorted(available)}); put it after the stage that does.")
        twice = sorted(set(stage.provides) & available)
        if twice:
            raise ValueError(f"stage {stage.name!r} provides {twice}, which "
                             f"{sorted({origin.get(n, 'the context') for n in twice})} already provide(s).")
        unknown = sorted(set(stage.frames) - set(stage.provides))
        if unknown:
            raise ValueError(f"stage {stage.name!r} lists frames {unknown} it does not provide.")
        available |= set(stage.provides)
        origin.update({name: stage.name for name in stage.provides})


def run_stages(stages, context: Context, runtime: Runtime) -> Context:
    """Run ``stages`` in order; each reads the context the ones before it extended.

    Raises
    ------
    ValueError
        A stage that requires a value no earlier stage provides, or that does not provide what it
        declares (checked before and after it runs).
    """
    check_order(stages, set(context))
    for stage in stages:
        values = stage.execute(context, runtime) or {}
        undeclared = sorted(set(values) - set(stage.provides))
        absent = sorted(set(stage.provides) - set(values))
        if undeclared or absent:
            raise ValueError(f"stage {stage.name!r} declares provides={list(stage.provides)} but returned "
                             f"{sorted(values)}.")
        context = context.extended(values, by=stage.name)
        runtime.release(context)
    return context

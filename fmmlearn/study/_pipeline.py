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
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ._sections import ReportSection
from ..utils import keyword_only

__all__ = ["Context", "Job", "Stage", "check_order", "run_stages"]


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

    @keyword_only
    def extended(self, values: dict, *, by: str) -> "Context":
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
        _refuse_clash(by, values, self._values, self._origin)
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

    def execute(self, context: Context, runtime) -> dict:
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


def _refuse_clash(stage: str, provides, available, origin: dict) -> None:
    """The one rule of names: no stage provides a name that the context or an earlier stage already holds."""
    twice = sorted(set(provides) & set(available))
    if twice:
        raise ValueError(f"stage {stage!r} provides {twice}, which "
                         f"{sorted({origin.get(n, 'the context') for n in twice})} already provide(s).")


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
        _refuse_clash(stage.name, stage.provides, available, origin)
        unknown = sorted(set(stage.frames) - set(stage.provides))
        if unknown:
            raise ValueError(f"stage {stage.name!r} lists frames {unknown} it does not provide.")
        available |= set(stage.provides)
        origin.update({name: stage.name for name in stage.provides})


def run_stages(stages, context: Context, runtime) -> Context:
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

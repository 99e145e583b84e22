"""What the stages share while a study runs: the cache, the fitted models, the timings, the progress bars."""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np

from ._counting import measured
from ._pipeline import Context, Job, Stage

__all__ = ["Runtime"]


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
            with measured(clf) as info:
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

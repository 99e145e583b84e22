"""On-disk caching of the study's stages, keyed by content.

Two stores under one directory:

* ``models/<key>/`` -- fitted classifiers: ``model/`` as written by
  :meth:`FaithfulTextClassifier.save`, and ``study_fit.json`` (fit time,
  epochs, forward counts).  ``key`` hashes the base model's identity, the
  training and validation data and every fit parameter, so a rerun with
  another measure finds the model and never refits.  Each ``<key>`` directory
  is written as a temporary sibling and moved into place with
  :func:`os.replace`, so an interrupted run leaves either a complete model or
  none.
* ``stages/`` -- a :class:`joblib.Memory` store for everything computed from a
  fitted model (curves, reports, explanations).  joblib keys each call by the
  function's code and a hash of its arguments (the model enters as its fit
  key) and writes every output to a temporary file that is then renamed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from importlib import metadata
from pathlib import Path

import joblib

from ..modeling import quiet_transformers

__all__ = ["ModelHandle", "StageCache", "content_key", "model_identity"]

_FIT_INFO = "study_fit.json"
_MODEL = "model"


def content_key(*parts) -> str:
    """A hex digest of ``parts`` (any picklable content: texts, labels, parameter dicts)."""
    return joblib.hash(parts)


def _directory_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        with open(file, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def model_identity(model) -> dict:
    """What the ``model`` parameter points to, for cache keys.

    A bundled name is identified by its package version, a local directory by
    a digest of its files (so retraining the base model invalidates the cache),
    a hub name by the name itself.
    """
    from ..modeling import BUNDLED_MODELS

    name = os.fspath(model)
    if name in BUNDLED_MODELS:
        package = BUNDLED_MODELS[name]
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = None
        return {"bundled": name, "package": package, "version": version}
    if Path(name).is_dir():
        return {"directory_sha256": _directory_digest(Path(name))}
    return {"hub": name}


class ModelHandle:
    """A fitted classifier that is loaded from the model store only when a stage needs it."""

    def __init__(self, path: Path, device, clf=None):
        self.path, self.device, self._clf = Path(path), device, clf  # path: the models/<key> directory

    def get(self):
        """The classifier (loaded on first use)."""
        if self._clf is None:
            from ..classifier import FaithfulTextClassifier

            with quiet_transformers():
                self._clf = FaithfulTextClassifier.load(self.path / _MODEL, device=self.device)
        return self._clf

    def release(self) -> None:
        """Drop the in-memory classifier (it is reloaded on the next :meth:`get`)."""
        self._clf = None

    @property
    def fit_info(self) -> dict:
        """What the fit stage recorded: seconds, epochs, forward counts."""
        return json.loads((self.path / _FIT_INFO).read_text())


class StageCache:
    """The model store and the joblib stage store under ``location`` (``None``: nothing is cached).

    Parameters
    ----------
    location : path-like or None
    """

    def __init__(self, location):
        self.location = None if location is None else Path(location)
        self._tmp = None
        if self.location is None:
            import tempfile

            # Without a cache the fitted models still live on disk for the run (reloading is cheap).
            self._tmp = tempfile.TemporaryDirectory(prefix="fmmlearn-study-")
        self.models = (self.location or Path(self._tmp.name)) / "models"
        self.models.mkdir(parents=True, exist_ok=True)
        self.memory = joblib.Memory(None if self.location is None else self.location / "stages", verbose=0)

    def stage(self, func):
        """``func`` cached by its arguments; its first argument, the model handle, is not hashed."""
        return self.memory.cache(func, ignore=["handle"])

    @staticmethod
    def is_cached(cached_func, *args, **kwargs) -> bool:
        """Whether ``cached_func(*args, **kwargs)`` would be read from the store."""
        try:
            return bool(cached_func.check_call_in_cache(*args, **kwargs))
        except Exception:  # noqa: BLE001 - NotMemorizedFunc without a store, or an unreadable entry
            return False

    def model_dir(self, key: str) -> Path:
        return self.models / key

    def has_model(self, key: str) -> bool:
        return (self.model_dir(key) / _FIT_INFO).is_file()

    def fit_or_load(self, key: str, fit, device) -> tuple[ModelHandle, bool]:
        """The classifier of ``key``: from the store, or ``fit()`` then stored atomically.

        ``fit() -> (clf, info)``; ``info`` (JSON-ready) is stored next to the model.

        Returns
        -------
        handle : ModelHandle
        cached : bool
        """
        final = self.model_dir(key)
        if self.has_model(key):
            return ModelHandle(final, device), True
        start = time.perf_counter()
        clf, info = fit()
        info = {**info, "seconds": time.perf_counter() - start}
        tmp = final.parent / f".tmp-{final.name}-{uuid.uuid4().hex}"
        try:
            with quiet_transformers():
                clf.save(tmp / _MODEL)
            (tmp / _FIT_INFO).write_text(json.dumps(info, indent=2))
            try:
                os.replace(tmp, final)
            except OSError:
                if not self.has_model(key):  # not a concurrent run that finished first
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return ModelHandle(final, device, clf), False

    def close(self) -> None:
        """Remove the temporary model store of an uncached study."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

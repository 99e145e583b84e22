"""The study's on-disk cache, keyed by content, in formats that cannot run code (docs/reliability.md).

Two stores under one directory:

* ``models/<key>/`` -- fitted classifiers: ``model/`` as :meth:`FaithfulTextClassifier.save` writes it
  (safetensors and JSON), ``study_fit.json`` (fit time, epochs, forward counts) and
  ``manifest.json``.  ``key`` hashes the base model's identity, the training and validation data and
  every fit parameter, so a rerun with another measure finds the model and never refits.
* ``stages/<stage>/<key>/`` -- everything a stage computed from one fitted model (curves, reports,
  explanations), written by :mod:`fmmlearn.study._codec`: JSON and ``.npy`` files, never pickle.
  ``key`` hashes the stage's name and version, the source code of its computation, the model's fit
  key and the job's own parameters (its texts, measure, ratios, seeds).

Every entry has a ``manifest.json`` with the SHA-256 of each of its files and the versions that made
it (fmmlearn, torch, transformers, numpy; the base model's identity).  It is written as a temporary
sibling and moved into place with one :func:`os.replace`, so a reader sees a complete entry or none,
and two processes computing the same entry cannot interleave files (the second one's rename finds the
entry there and drops its own copy).  On reading, a missing, truncated or altered file, or an entry
made by other versions, is reported in one :class:`~fmmlearn.exceptions.CacheWarning` line and the
entry is recomputed -- never loaded into a table.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
import uuid
from importlib import metadata
from pathlib import Path

import joblib

from ..exceptions import CacheWarning
from ..modeling import quiet_transformers
from ..utils import reporting_write_errors, warn
from ._codec import CorruptEntry, file_digest, read_payload, write_payload

__all__ = ["ModelHandle", "StageCache", "content_key", "model_identity", "provenance"]

_FIT_INFO = "study_fit.json"
_MODEL = "model"
_MANIFEST = "manifest.json"
_FORMAT = "fmmlearn.cache-entry"
_FORMAT_VERSION = 1
#: Libraries whose version is recorded with every entry; an entry made by another version is stale.
_VERSIONED = ("fmmlearn", "torch", "transformers", "numpy")
#: What a failed cache write leaves (the entry's temporary copy is removed).
_UNCHANGED = "the entries already in the cache are unchanged"


def content_key(*parts) -> str:
    """A hex digest of ``parts`` (texts, labels, parameter dicts): joblib's hash, which reads nothing back."""
    return joblib.hash(parts)


def _directory_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(file_digest(file).encode())
    return digest.hexdigest()


def model_identity(model) -> dict:
    """What the ``model`` parameter points to, for cache keys.

    A bundled name is identified by its package version, a local directory by a digest of its files
    (so retraining the base model invalidates the cache), a hub name by the name itself.
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


def provenance() -> dict:
    """The versions an entry records (see :data:`_VERSIONED`)."""
    from ._system import library_versions

    versions = library_versions()
    return {name: versions.get(name) for name in _VERSIONED}


def _files_of(directory: Path) -> dict:
    return {str(p.relative_to(directory)): file_digest(p) for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != _MANIFEST}


def _write_manifest(directory: Path, kind: str, files: dict, identity: dict) -> None:
    manifest = {"format": _FORMAT, "format_version": _FORMAT_VERSION, "kind": kind, "files": files,
                "versions": provenance(), "model": identity, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (directory / _MANIFEST).write_text(json.dumps(manifest, indent=1, default=str), encoding="utf-8")


def _checked_manifest(directory: Path) -> dict:
    """The manifest of a complete entry whose files all match; :class:`CorruptEntry` otherwise."""
    try:
        manifest = json.loads((directory / _MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptEntry(f"its manifest cannot be read ({type(exc).__name__})") from exc
    if manifest.get("format") != _FORMAT or manifest.get("format_version") != _FORMAT_VERSION:
        raise CorruptEntry("it is not an fmmlearn cache entry of this format")
    return manifest


def _stale_reason(manifest: dict) -> str | None:
    made, now = manifest.get("versions", {}), provenance()
    changed = [f"{name} {made.get(name)} (now {now[name]})" for name in _VERSIONED if made.get(name) != now[name]]
    return f"made with {', '.join(changed)}" if changed else None


def _publish(tmp: Path, final: Path) -> bool:
    """Move the finished ``tmp`` entry to ``final``; False when another process published it first."""
    try:
        os.replace(tmp, final)
        return True
    except OSError:
        if (final / _MANIFEST).is_file():  # a concurrent run finished the same entry: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        raise


#: Name prefixes of an entry being written and of one being removed (leftovers of a killed process).
_TMP, _TRASH = ".tmp-", ".trash-"


@contextlib.contextmanager
def _staged(final: Path, unchanged: str):
    """A temporary sibling of entry ``final`` to write into; published as ``final`` when the block ends.

    A failed write is reported naming ``final`` (``unchanged``: what is left there); the temporary copy is
    removed in every case.
    """
    tmp = final.parent / f"{_TMP}{final.name}-{uuid.uuid4().hex}"
    try:
        with reporting_write_errors(final, unchanged, outermost=True):
            yield tmp
            _publish(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _discard(entry: Path) -> None:
    """Move a bad entry out of the way (atomically) before removing it, so no reader sees it half-deleted."""
    trash = entry.with_name(f"{_TRASH}{entry.name}-{uuid.uuid4().hex}")
    try:
        os.replace(entry, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


#: A temporary entry older than this was left by a killed process (a live one renames it within seconds).
_LEFTOVER_AGE_S = 3600


def _remove_leftovers(models: Path, stages: Path) -> None:
    """Remove the temporary copies that a killed process (``kill -9``, a power cut) left in the stores."""
    now = time.time()
    for leftover in [*models.glob(f"{_TMP}*"), *models.glob(f"{_TRASH}*"), *stages.glob(f"*/{_TMP}*"),
                     *stages.glob(f"*/{_TRASH}*")]:
        try:
            if now - leftover.stat().st_mtime > _LEFTOVER_AGE_S:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:  # removed meanwhile by another process
            pass


class ModelHandle:
    """A fitted classifier that is loaded from the model store only when a stage needs it."""

    def __init__(self, path: Path, device, clf=None):
        self.path, self.device, self._clf = Path(path), device, clf  # path: the models/<key> directory

    def get(self):
        """The classifier (loaded on first use)."""
        if self._clf is None:
            from ..estimator import FaithfulTextClassifier

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
    """The model store and the stage store under ``location`` (``None``: nothing is kept after the run).

    Parameters
    ----------
    location : path-like or None
    identity : dict, optional
        The base model's :func:`model_identity`, recorded in every manifest.
    """

    def __init__(self, location, identity: dict | None = None):
        self.location = None if location is None else Path(location)
        self.identity = identity or {}
        self._tmp = None
        if self.location is None:
            import tempfile

            # Without a cache the fitted models and payloads still live on disk for the run.
            self._tmp = tempfile.TemporaryDirectory(prefix="fmmlearn-study-")
        root = self.location or Path(self._tmp.name)
        self.models, self.stages = root / "models", root / "stages"
        with reporting_write_errors(root, "nothing was written there"):
            self.models.mkdir(parents=True, exist_ok=True)
            self.stages.mkdir(parents=True, exist_ok=True)
        _remove_leftovers(self.models, self.stages)

    # ---------------------------------------------------------------- checking entries
    def _usable(self, entry: Path, what: str) -> dict | None:
        """The manifest of ``entry`` if it is complete, intact and current; else report, discard, ``None``."""
        if not (entry / _MANIFEST).is_file():
            return None
        try:
            manifest = _checked_manifest(entry)
            missing = [name for name in manifest["files"] if not (entry / name).is_file()]
            if missing:
                raise CorruptEntry(f"{missing[0]} is missing")
            if what == "model":  # a stage payload's files are checked by read_payload as it reads them
                bad = [n for n, d in manifest["files"].items() if file_digest(entry / n) != d]
                if bad:
                    raise CorruptEntry(f"the checksum of {bad[0]} does not match (the file was truncated or altered)")
            reason = _stale_reason(manifest)
        except CorruptEntry as exc:
            reason = f"corrupt: {str(exc).rstrip('.')}"
        if reason is None:
            return manifest
        warn(f"cache entry {entry} ({what}) is {reason}; recomputing it.", CacheWarning)
        _discard(entry)
        return None

    # ---------------------------------------------------------------- fitted models
    def model_dir(self, key: str) -> Path:
        return self.models / key

    def has_model(self, key: str) -> bool:
        """Whether the store holds an intact, current model for ``key`` (a bad one is reported and discarded)."""
        return self._usable(self.model_dir(key), "model") is not None

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
        start, cpu_start = time.perf_counter(), time.process_time()
        clf, info = fit()
        info = {**info, "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu_start}
        with _staged(final, _UNCHANGED) as tmp, quiet_transformers():
            clf.save(tmp / _MODEL)
            (tmp / _FIT_INFO).write_text(json.dumps(info, indent=2))
            _write_manifest(tmp, "model", _files_of(tmp), self.identity)
        return ModelHandle(final, device, clf), False

    # ---------------------------------------------------------------- stage payloads
    def _entry(self, stage: str, key: str) -> Path:
        return self.stages / stage.replace(" ", "-") / key

    def load(self, stage: str, key: str):
        """The stored payload of ``(stage, key)``, or ``None`` (absent; corrupt or stale ones are reported)."""
        entry = self._entry(stage, key)
        manifest = self._usable(entry, f"stage {stage!r}")
        if manifest is None:
            return None
        try:
            return read_payload(entry, manifest["files"])
        except CorruptEntry as exc:
            warn(f"cache entry {entry} (stage {stage!r}) is corrupt: {str(exc).rstrip('.')}; recomputing it.",
                 CacheWarning)
            _discard(entry)
            return None

    def has(self, stage: str, key: str) -> bool:
        """Whether ``(stage, key)`` has a complete entry (not verified: :meth:`load` does that)."""
        return (self._entry(stage, key) / _MANIFEST).is_file()

    def save(self, stage: str, key: str, payload: dict) -> None:
        """Store ``payload`` for ``(stage, key)`` atomically (a concurrent writer's identical entry is kept)."""
        final = self._entry(stage, key)
        with _staged(final, _UNCHANGED) as tmp:
            tmp.mkdir(parents=True)
            files = write_payload(payload, tmp)
            _write_manifest(tmp, f"stage {stage}", files, self.identity)

    def close(self) -> None:
        """Remove the temporary stores of an uncached study."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

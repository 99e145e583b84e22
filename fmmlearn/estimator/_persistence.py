"""Saving and loading a fitted :class:`~fmmlearn.FaithfulTextClassifier` (no pickle).

A saved classifier is a directory: the fine-tuned model in Hugging Face
format (``config.json`` + ``model.safetensors``), its tokenizer, its Hugging
Face model card ``README.md``, and ``fmmlearn.json`` with the estimator's
parameters, ``classes_``, whether it was trained on sentence pairs, the
training history, a format version and the SHA-256 of every other file
(docs/reliability.md).

* **Atomic save.**  Everything is written into a temporary sibling
  directory, which then replaces the target with ``os.replace``: an
  interrupted save leaves the previous complete directory (or none), never a
  mix of two models.
* **Verified load.**  The checksums, the labels (``classes_`` against the
  model config's ``num_labels`` and ``id2label``), the stored parameters
  (the estimator's ``_parameter_constraints``) and the weights themselves
  (every parameter of the model filled, nothing left over) are checked;
  any problem is one ``ValueError`` naming the file and what to do.  The
  model card is checksummed too, but a card edited after saving (the Hub
  invites that) is read, not refused: it holds no weights, labels or code.
* **Nothing executed.**  Only JSON and safetensors weights are read
  (``use_safetensors=True``, never a pickle), nothing is downloaded
  (``local_files_only=True``) and remote code never runs
  (``trust_remote_code=False``; a config that asks for it is refused).

Pickling (``pickle``, ``joblib``, ``copy.deepcopy``) is supported too:
:func:`picklable_state` strips the hooks transformers attaches to a model on
its first ``output_hidden_states=True`` call, which cannot be pickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.utils._param_validation import InvalidParameterError, validate_parameter_constraints
from sklearn.utils.validation import check_is_fitted

from .._version import __version__
from ..modeling import (ADAPTER_DIR, base_model_state, has_adapters, load_adapters, prepare_model,
                       quiet_transformers, save_adapters, resolve_device, resolve_max_length, resolve_model_path)
from ..utils import is_main_process, reporting_write_errors, warn
from ._net_routing import NET_PREFIX

__all__ = ["CARD_FILE", "CONFIG_FILE", "FORMAT_VERSION", "base_model_name", "load_classifier", "picklable_state",
           "save_classifier", "strip_output_capturing_hooks"]

#: Name of the estimator's own file in a saved directory.
CONFIG_FILE = "fmmlearn.json"

#: Name of the Hugging Face model card in a saved directory (what the Hub shows as the model's page).
CARD_FILE = "README.md"

#: Version of the saved-directory layout; ``load`` refuses newer ones.  Version 1 added the checksums.
FORMAT_VERSION = 1

#: Suffixes of files that loading a model or tokenizer may read: a saved directory holding one that
#: ``save`` did not write (and checksum) is refused, since it could belong to another model.
_LOADABLE_SUFFIXES = frozenset({".json", ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack",
                                ".model", ".txt", ".py", ".tiktoken"})

_DAMAGED = ("The directory is damaged or mixes files of different models; restore it from a backup or save the "
            "classifier again.")


# --------------------------------------------------------------------------- pickling


def strip_output_capturing_hooks(model) -> None:
    """Remove the output-capturing hooks transformers attached to ``model`` (in place).

    Transformers 5 installs forward hooks (local closures, which cannot be
    pickled) on a model's layers the first time it is asked for hidden
    states or attentions, and marks the model as hooked.  Removing both the
    hooks and the mark is invisible to the model's behaviour: transformers
    installs them again on the next call that needs them.  Hooks of any
    other origin are left alone.

    Parameters
    ----------
    model : torch.nn.Module
    """
    for module in model.modules():
        hooks = module._forward_hooks
        for key in [k for k, hook in hooks.items() if _is_capturing_hook(hook)]:
            del hooks[key]
            module._forward_hooks_with_kwargs.pop(key, None)
            module._forward_hooks_always_called.pop(key, None)
        module.__dict__.pop("_output_capturing_hooks_installed", None)


def _is_capturing_hook(hook) -> bool:
    return getattr(hook, "__module__", "") == "transformers.utils.output_capturing"


def picklable_state(clf, state: dict) -> dict:
    """``state`` (from ``BaseEstimator.__getstate__``) after stripping unpicklable hooks from the models.

    Both the fitted ``model_`` and a model passed as ``model=(model,
    tokenizer)`` are stripped in place (see :func:`strip_output_capturing_hooks`).
    """
    import torch

    candidates = [state.get("model_")]
    if isinstance(state.get("model"), tuple) and state["model"]:
        candidates.append(state["model"][0])
    for model in candidates:
        if isinstance(model, torch.nn.Module):
            strip_output_capturing_hooks(model)
    return state


# --------------------------------------------------------------------------- save


def _json_value(value):
    """A numpy scalar as its Python value; anything else unchanged."""
    return value.item() if hasattr(value, "item") else value


def _stored_params(clf) -> dict:
    """The estimator parameters that JSON can hold (the base model is stored separately)."""
    params = {k: v for k, v in clf.get_params().items() if k != "model"}
    params["device"] = str(params["device"])
    if callable(params.get("selection_metric")):
        params["selection_metric"] = "accuracy"
    return {k: _json_value(v) for k, v in params.items()
            if isinstance(v, (str, int, float, bool, type(None))) or hasattr(v, "item")}


def _json_classes(classes) -> list:
    values = [_json_value(c) for c in classes]
    if not all(isinstance(c, (str, int, float, bool)) for c in values):
        kinds = sorted({type(c).__name__ for c in values})
        raise TypeError(f"save() stores classes_ as JSON; labels must be str, int, float or bool, got {kinds}.")
    return values


def _history_records(history: pd.DataFrame) -> list[dict]:
    """The history as JSON records at full float precision (NaN as null)."""
    def plain(value):
        value = _json_value(value)
        return None if isinstance(value, float) and not np.isfinite(value) else value

    return [{str(k): plain(v) for k, v in row.items()} for row in history.reset_index().to_dict(orient="records")]


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _files_of(directory: Path) -> list[str]:
    """Relative POSIX names of every regular file under ``directory``, sorted."""
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())


def _fsync_tree(directory: Path) -> None:
    """Flush every file and then the directory itself to disk, so that the rename publishes complete files."""
    for name in _files_of(directory):
        with open(directory / name, "rb") as handle:
            os.fsync(handle.fileno())
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # directories cannot be opened on Windows; NTFS journals the rename anyway
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_target(path) -> Path:
    """``path`` as a Path that ``save`` may replace: new, empty, or a directory written by ``save``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or path-like directory name, got {type(path).__name__}.")
    path = Path(path)
    if os.fspath(path) in ("", ".", "..") or path.name in ("", ".", ".."):
        raise ValueError(f"path={os.fspath(path)!r} names no directory of its own; pass e.g. path='my-model'.")
    if path.exists() and not path.is_dir():
        raise ValueError(f"path={os.fspath(path)!r} is an existing file; save() writes a directory.")
    if path.is_dir() and any(path.iterdir()) and not (path / CONFIG_FILE).is_file():
        raise ValueError(
            f"path={os.fspath(path)!r} is a non-empty directory that save() did not write (it has no "
            f"{CONFIG_FILE}); save() replaces the whole directory, so it refuses to delete those files. "
            "Choose a new or empty directory."
        )
    return path


def base_model_name(clf) -> str:
    """The model ``fit`` started from; for a loaded classifier, the one its save recorded (not the save's path)."""
    if getattr(clf, "_loaded_base_model", None) is not None:
        return clf._loaded_base_model
    # A loaded (model, tokenizer) pair is recorded by the name_or_path it came from.
    return resolve_model_path(clf.model) if isinstance(clf.model, tuple) else str(clf.model)


def _write(clf, directory: Path, classes: list, card) -> None:
    """Write the model, the tokenizer, the model card and then, last, ``fmmlearn.json`` with the checksums."""
    adapters = has_adapters(clf.model_)
    with quiet_transformers():  # no "writing shards" bar
        if adapters:  # the base model here, the adapters in PEFT's format in adapter/ (docs/decoders.md)
            clf.model_.get_base_model().save_pretrained(directory, state_dict=base_model_state(clf.model_),
                                                        safe_serialization=True)
            save_adapters(clf.model_, directory / ADAPTER_DIR)
        else:
            clf.model_.save_pretrained(directory, safe_serialization=True)
    clf.tokenizer_.save_pretrained(directory)
    if card is not None:
        card.save(directory / CARD_FILE)
    manifest = {
        "format_version": FORMAT_VERSION,
        "fmmlearn_version": __version__,
        "params": _stored_params(clf),
        "base_model": base_model_name(clf),
        "classes": classes,
        "is_pair": bool(clf.is_pair_),
        "adapters": adapters,
        "history": _history_records(clf.history_),
        "files": {name: _sha256(directory / name) for name in _files_of(directory)},
    }
    (directory / CONFIG_FILE).write_text(json.dumps(manifest, indent=2))
    _fsync_tree(directory)


def _replace_directory(staging: Path, path: Path) -> None:
    """Put the complete directory ``staging`` at ``path``, moving an existing one away first.

    At every instant ``path`` is the old complete directory, the new one, or
    (between the two renames) absent with the old one kept beside it as
    ``.<name>.old-*`` until the new one is in place.
    """
    if not path.exists():
        os.replace(staging, path)
        return
    old = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:12]}")
    os.replace(path, old)
    try:
        os.replace(staging, path)
    except BaseException:
        os.replace(old, path)  # put the previous version back
        raise
    shutil.rmtree(old, ignore_errors=True)


def save_classifier(clf, path, *, card=None) -> Path:
    """Write a fitted classifier to the directory ``path``, atomically (docs/reliability.md).

    The files are written into a temporary sibling directory (flushed to
    disk), which then replaces ``path`` by renames: an interrupted save
    leaves the previous complete save, never a directory mixing two models.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    path : str or path-like
        A new directory (parents are created), an empty one, or one written by
        an earlier ``save``, which is replaced.
    card : huggingface_hub.ModelCard, optional
        Written as ``README.md``; none without it.

    Returns
    -------
    pathlib.Path
        Under a multi-process launch only the main process writes; the others
        check ``path`` and return it.

    Raises
    ------
    ValueError
        When ``path`` is a file, or a non-empty directory that ``save`` did not
        write (its files are never deleted).
    TypeError
        For labels JSON cannot hold, or a ``card`` that is not a ``ModelCard``.
    """
    check_is_fitted(clf)
    classes = _json_classes(clf.classes_)
    if card is not None:
        from huggingface_hub import ModelCard

        if not isinstance(card, ModelCard):
            raise TypeError(f"card must be a huggingface_hub.ModelCard (e.g. from model_card()), got "
                            f"{type(card).__name__}.")
    path = _check_target(path)
    if not is_main_process():  # under a multi-process launch only rank 0 writes (docs/scaling.md)
        return path
    kept = "the previous save there is unchanged" if path.exists() else "nothing was written there"
    with reporting_write_errors(path, kept):  # a full disk or read-only place: an error naming ``path``
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.saving-", dir=path.parent))
        try:
            _write(clf, staging, classes, card)
            _replace_directory(staging, path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # nothing left once renamed into place
    return path


# --------------------------------------------------------------------------- load


def _refuse(path: Path, file: str, problem: str, advice: str = _DAMAGED) -> ValueError:
    return ValueError(f"cannot load {os.fspath(path)!r}: {file} {problem.rstrip('.')}. {advice}")


def _leftover_hint(path: Path) -> str:
    """A sentence about a previous version that an interrupted save left beside ``path``, if any."""
    parent = path.parent if path.parent.is_dir() else None
    old = sorted(parent.glob(f".{path.name}.old-*")) if parent is not None else []
    return (f" An interrupted save left the previous version at {os.fspath(old[-1])!r}; rename it to "
            f"{os.fspath(path)!r} to use it." if old else "")


def _saved_directory(path) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or path-like directory name, got {type(path).__name__}.")
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"path={os.fspath(path)!r} is not a directory; pass a directory written by "
                                f"FaithfulTextClassifier.save().{_leftover_hint(path)}")
    if not (path / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"{os.fspath(path)!r} holds no {CONFIG_FILE}; it was not written by "
                                "FaithfulTextClassifier.save().")
    return path


def _read_json(path: Path, name: str) -> dict:
    try:
        content = json.loads((path / name).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise _refuse(path, name, "is missing") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _refuse(path, name, f"is not valid JSON ({exc})") from exc
    if not isinstance(content, dict):
        raise _refuse(path, name, f"holds a JSON {type(content).__name__}, not an object")
    return content


#: Keys of ``fmmlearn.json`` and the JSON types their values must have.
_MANIFEST_KEYS = {"params": dict, "classes": list, "is_pair": bool, "history": list}


def _read_manifest(path: Path) -> dict:
    manifest = _read_json(path, CONFIG_FILE)
    version = manifest.get("format_version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise _refuse(path, CONFIG_FILE, f"has format_version={version!r}; expected a non-negative integer")
    if version > FORMAT_VERSION:
        raise _refuse(path, CONFIG_FILE, f"has format_version={version} (written by fmmlearn "
                      f"{manifest.get('fmmlearn_version', '?')}), newer than the {FORMAT_VERSION} this fmmlearn "
                      f"{__version__} reads", "Upgrade fmmlearn to load it.")
    for key, kind in _MANIFEST_KEYS.items():
        if key not in manifest:
            raise _refuse(path, CONFIG_FILE, f"lacks the key {key!r}")
        if not isinstance(manifest[key], kind):
            raise _refuse(path, CONFIG_FILE, f"has {key!r} of JSON type {type(manifest[key]).__name__}; "
                          f"expected {kind.__name__}")
    if version >= 1 and not isinstance(manifest.get("files"), dict):
        raise _refuse(path, CONFIG_FILE, "lacks the checksums ('files') its format version requires")
    return manifest


def _verify_files(path: Path, manifest: dict) -> None:
    """Every file listed has its recorded SHA-256, and no loadable file is unlisted."""
    if manifest.get("format_version", 0) < 1:
        warn(f"{os.fspath(path)!r} was saved by fmmlearn {manifest.get('fmmlearn_version', '?')} without "
             "checksums, so its files cannot be verified; save it again to add them.")
        return
    listed = manifest["files"]
    for name, digest in listed.items():
        parts = Path(name).parts
        if not isinstance(digest, str) or Path(name).is_absolute() or ".." in parts or not parts:
            raise _refuse(path, CONFIG_FILE, f"lists an invalid file entry {name!r}: {digest!r}")
        file = path / name
        if name == CARD_FILE:
            continue  # documentation the Hub invites to edit or delete: read as it is (_read_card)
        if not file.is_file():
            raise _refuse(path, name, f"is missing (listed in {CONFIG_FILE})")
        if _sha256(file) != digest:
            raise _refuse(path, name, f"does not match the SHA-256 recorded in {CONFIG_FILE} when it was saved")
    unlisted = [name for name in _files_of(path) if name != CONFIG_FILE and name not in listed
                and Path(name).suffix.lower() in _LOADABLE_SUFFIXES]
    if unlisted:
        raise _refuse(path, f"{CONFIG_FILE}", f"does not list {unlisted}, which save() did not write: they may "
                      "belong to another model", "Remove them, or save the classifier again.")
    weights = [name for name in listed if name.endswith(".safetensors")]
    if "config.json" not in listed or not weights:
        raise _refuse(path, CONFIG_FILE, "lists no config.json or no .safetensors weights")


def _check_labels_agree(path: Path, model_config: dict, classes: list) -> None:
    """``classes`` against the model config: ``num_labels`` outputs, ``id2label[i] == str(classes[i])``."""
    if len(classes) < 2 or len({json.dumps(c) for c in classes}) != len(classes):
        raise _refuse(path, CONFIG_FILE, f"has classes {classes[:10]}; expected at least 2 distinct labels")
    if not all(isinstance(c, (str, int, float, bool)) for c in classes):
        raise _refuse(path, CONFIG_FILE, "has classes that are not str, int, float or bool")
    id2label = model_config.get("id2label")
    if not isinstance(id2label, dict):
        raise _refuse(path, "config.json", "has no id2label mapping (the class names of the model's outputs)")
    try:
        names = {int(k): v for k, v in id2label.items()}
    except (TypeError, ValueError) as exc:
        raise _refuse(path, "config.json", f"has an id2label with non-integer keys {list(id2label)[:5]}") from exc
    if len(names) != len(classes):
        raise _refuse(path, "config.json", f"describes a model with num_labels={len(names)} outputs, but "
                      f"{CONFIG_FILE} has {len(classes)} classes")
    expected = {i: str(c) for i, c in enumerate(classes)}
    if names != expected:
        raise _refuse(path, "config.json", f"has id2label={names}, which disagrees with the classes "
                      f"{classes} of {CONFIG_FILE}")


def _read_model_config(path: Path) -> dict:
    model_config = _read_json(path, "config.json")
    if "auto_map" in model_config:
        raise _refuse(path, "config.json", f"asks for remote code (auto_map={model_config['auto_map']})",
                      "fmmlearn never executes code shipped with a model (it has no trust_remote_code option); "
                      "use a model whose architecture transformers implements.")
    return model_config


def _checked_params(cls, path: Path, manifest: dict, device) -> dict:
    """The stored parameters, validated with the estimator's constraints; ``model`` and ``device`` set."""
    params = dict(manifest["params"])
    known = set(cls._get_param_names())
    unknown = sorted(name for name in set(params) - known if not name.startswith(NET_PREFIX))
    if unknown:
        raise _refuse(path, CONFIG_FILE, f"has parameters {unknown} that {cls.__name__} does not take (written by "
                      f"fmmlearn {manifest.get('fmmlearn_version', '?')})", "Upgrade fmmlearn to load it.")
    params.pop("model", None)
    params["device"] = device
    try:
        validate_parameter_constraints(cls._parameter_constraints, {**params, "model": os.fspath(path)},
                                       caller_name=cls.__name__)
    except InvalidParameterError as exc:
        if "'device' parameter" in str(exc):
            raise  # the caller's own argument, not the file's
        raise _refuse(path, CONFIG_FILE, f"holds an invalid parameter: {exc}",
                      f"Correct it in {CONFIG_FILE}, or save the classifier again.") from exc
    return params


def _load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False, local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise _refuse(path, "the tokenizer files", f"cannot be read ({type(exc).__name__}: {exc})") from exc
    if not getattr(tokenizer, "is_fast", False) or tokenizer.mask_token_id is None:
        raise _refuse(path, "the tokenizer", "is not a fast tokenizer with a mask token")
    return tokenizer


def _load_model(path: Path):
    """The sequence classifier from safetensors weights that fill every parameter exactly."""
    from safetensors import SafetensorError
    from transformers import AutoModelForSequenceClassification

    try:
        with quiet_transformers():
            model, info = AutoModelForSequenceClassification.from_pretrained(
                path, trust_remote_code=False, use_safetensors=True, local_files_only=True, output_loading_info=True)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, SafetensorError) as exc:
        raise _refuse(path, "the model weights", f"cannot be loaded ({type(exc).__name__}: {exc})") from exc
    problems = {kind: sorted(map(str, info.get(kind) or []))[:5]
                for kind in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    problems = {kind: keys for kind, keys in problems.items() if keys}
    if problems:
        raise _refuse(path, "model.safetensors", f"does not fit the architecture of config.json ({problems})")
    return model


def _read_card(path: Path):
    """The model card ``README.md`` (None when there is none); one that cannot be parsed is named in a warning."""
    file = path / CARD_FILE
    if not file.is_file():
        return None
    import yaml  # huggingface_hub's own dependency: it parses the metadata with yaml.safe_load
    from huggingface_hub import ModelCard

    try:
        return ModelCard.load(file)
    except (OSError, ValueError, TypeError, UnicodeDecodeError, yaml.YAMLError) as exc:  # e.g. a broken hand edit
        warn(f"{os.fspath(file)!r} is not a valid model card ({type(exc).__name__}: {exc}); the classifier loads "
             "without it (model_card_ is None) and a later save writes a new one.")
        return None


def _load_adapters(path: Path, model):
    """``model`` wrapped with the adapters of ``path/adapter`` (PEFT's format)."""
    try:
        return load_adapters(model, path / ADAPTER_DIR)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise _refuse(path, ADAPTER_DIR, f"holds adapters that cannot be loaded ({type(exc).__name__}: {exc})") from exc


def _history(path: Path, records: list) -> pd.DataFrame:
    if not all(isinstance(r, dict) for r in records):
        raise _refuse(path, CONFIG_FILE, "has a 'history' that is not a list of JSON objects")
    history = pd.DataFrame(records)
    return history.set_index("epoch") if "epoch" in history else history


def load_classifier(cls, path, *, device="auto"):
    """Read and verify a classifier written by :func:`save_classifier` (docs/reliability.md).

    Parameters
    ----------
    cls : type
        The estimator class to instantiate (``FaithfulTextClassifier`` or a subclass).
    path : str or path-like
    device : str or torch.device, default="auto"

    Returns
    -------
    FaithfulTextClassifier
        Fitted; its ``model`` parameter is ``path``.

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a directory written by ``save``.
    ValueError
        Naming the file, when a checksum, the labels, a parameter, the JSON
        or the weights do not check out, or when the model config asks for
        remote code; or when ``device`` asks for a device this machine lacks.
    """
    path = _saved_directory(path)
    manifest = _read_manifest(path)
    model_config = _read_model_config(path)  # a request for remote code is named before the checksums
    _verify_files(path, manifest)
    _check_labels_agree(path, model_config, manifest["classes"])
    params = _checked_params(cls, path, manifest, device)
    history = _history(path, manifest["history"])
    torch_device = resolve_device(device)  # a missing GPU is reported before the weights are read
    tokenizer, model = _load_tokenizer(path), _load_model(path)
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        raise _refuse(path, "the tokenizer", f"has {len(tokenizer)} tokens but the model embeds only "
                      f"{model.get_input_embeddings().num_embeddings}")
    prepare_model(model, tokenizer)  # padding and, for decoders, last-token pooling (not saved by transformers)
    if manifest.get("adapters") is True:
        model = _load_adapters(path, model)
        params["peft_config"] = model.peft_config["default"]
    clf = cls(model=os.fspath(path), **params)
    clf.tokenizer_ = tokenizer
    clf.model_ = model.to(torch_device).eval()
    clf.classes_ = np.asarray(manifest["classes"])
    clf.is_pair_ = manifest["is_pair"]
    clf.history_ = history
    clf.model_card_ = _read_card(path)
    clf._loaded_base_model = manifest.get("base_model")
    clf.max_length_ = resolve_max_length(clf.max_length, model, tokenizer, is_pair=clf.is_pair_, warn=False)
    return clf

"""Saving and loading a fitted :class:`~fmmlearn.classifier.FaithfulTextClassifier` (no pickle).

A saved classifier is a directory: the fine-tuned model in Hugging Face
format (``config.json`` + ``model.safetensors``), its tokenizer, and
``fmmlearn.json`` with the estimator's parameters, ``classes_``, whether it
was trained on sentence pairs and the training history.  Loading reads only
safetensors weights and JSON and never executes remote code.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from ._version import __version__
from .modeling import quiet_transformers, resolve_device, resolve_model_path

__all__ = ["CONFIG_FILE", "load_classifier", "save_classifier"]

#: Name of the estimator's own file in a saved directory.
CONFIG_FILE = "fmmlearn.json"


def _json_value(value):
    """A numpy scalar as its Python value; anything else unchanged."""
    return value.item() if hasattr(value, "item") else value


def _stored_params(clf) -> dict:
    """The estimator parameters that JSON can hold (the base model is stored separately)."""
    params = {k: v for k, v in clf.get_params().items() if k != "model"}
    params["device"] = str(params["device"])
    if callable(params["selection_metric"]):
        params["selection_metric"] = "accuracy"
    return {k: _json_value(v) for k, v in params.items()
            if isinstance(v, (str, int, float, bool, type(None))) or hasattr(v, "item")}


def save_classifier(clf, path) -> Path:
    """Write a fitted classifier to the directory ``path`` (created if needed).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    path : str or path-like

    Returns
    -------
    pathlib.Path
    """
    check_is_fitted(clf)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    classes = [_json_value(c) for c in clf.classes_]
    if not all(isinstance(c, (str, int, float, bool)) for c in classes):
        raise TypeError("save() stores classes_ as JSON; labels must be str, int, float or bool.")
    config = {
        "fmmlearn_version": __version__,
        "params": _stored_params(clf),
        # A loaded (model, tokenizer) pair is recorded by the name_or_path it came from.
        "base_model": resolve_model_path(clf.model) if isinstance(clf.model, tuple) else str(clf.model),
        "classes": classes,
        "is_pair": clf.is_pair_,
        "history": json.loads(clf.history_.reset_index().to_json(orient="records")),
    }
    clf.model_.save_pretrained(path, safe_serialization=True)
    clf.tokenizer_.save_pretrained(path)
    (path / CONFIG_FILE).write_text(json.dumps(config, indent=2))
    return path


def load_classifier(cls, path, *, device="auto"):
    """Read a classifier written by :func:`save_classifier`.

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
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = Path(path)
    config_file = path / CONFIG_FILE
    if not config_file.is_file():
        raise FileNotFoundError(f"{path} holds no {CONFIG_FILE}; it was not written by FaithfulTextClassifier.save().")
    config = json.loads(config_file.read_text())
    params = dict(config["params"])
    params["device"] = device
    clf = cls(model=str(path), **params)
    clf.tokenizer_ = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    with quiet_transformers():
        model = AutoModelForSequenceClassification.from_pretrained(path, trust_remote_code=False, use_safetensors=True)
    clf.model_ = model.to(resolve_device(device)).eval()
    clf.classes_ = np.asarray(config["classes"])
    clf.is_pair_ = bool(config["is_pair"])
    history = pd.DataFrame(config["history"])
    clf.history_ = history.set_index("epoch") if "epoch" in history else history
    return clf

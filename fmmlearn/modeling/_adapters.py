"""Parameter-efficient fine-tuning with ``peft``: adapters, the classification head and the mask embedding row.

``FaithfulTextClassifier(peft_config=LoraConfig(...))`` wraps the loaded
classifier with :func:`attach_adapters` before masked fine-tuning; ``save``
writes the base model (the pretrained weights with the grown embeddings and
the initial head, without the adapters) and, in ``adapter/``, the adapters in
PEFT's own format (``adapter_config.json`` + ``adapter_model.safetensors``);
``load`` puts them back together (docs/decoders.md).
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from pathlib import Path

import torch

__all__ = ["ADAPTER_DIR", "attach_adapters", "base_embedding", "base_model_state", "check_peft_config", "embedding_matrix",
           "embedding_rows", "has_adapters", "load_adapters", "save_adapters"]

#: Sub-directory of a saved classifier holding its adapters in PEFT's format.
ADAPTER_DIR = "adapter"

_PEFT_HINT = "peft_config needs the peft package: pip install 'fmmlearn[peft]'"

#: Parts of the state-dict keys of a PEFT-wrapped model that belong to the adapters, not the base model.
_ADAPTER_PARTS = ("modules_to_save", "trainable_tokens_delta", "trainable_tokens_original")
#: Parts of those keys that name a wrapper around a base module (``x.base_layer.weight`` is ``x.weight``).
_WRAPPER_PARTS = ("base_layer", "original_module", "token_adapter")
_ADAPTER_PREFIXES = ("lora_", "ia3_", "oft_", "boft_", "vera_", "hra_", "loha_", "lokr_")


def _peft():
    try:
        import peft
    except ImportError as exc:
        raise ImportError(_PEFT_HINT) from exc
    return peft


def check_peft_config(peft_config) -> None:
    """Raise a ``TypeError`` unless ``peft_config`` is ``None`` or a ``peft.PeftConfig``.

    Parameters
    ----------
    peft_config : peft.PeftConfig or None
        The classifier's ``peft_config``.

    Raises
    ------
    TypeError
        When ``peft_config`` is something else.
    """
    if peft_config is None:
        return
    peft = _peft()
    if not isinstance(peft_config, peft.PeftConfig):
        raise TypeError(f"peft_config must be None or a peft.PeftConfig (e.g. peft.LoraConfig(r=8)), "
                        f"got {type(peft_config).__name__}.")


def has_adapters(model) -> bool:
    """Whether ``model`` is wrapped by peft (a ``PeftModel``).

    Parameters
    ----------
    model : torch.nn.Module
        A sequence classifier, wrapped or not.

    Returns
    -------
    bool
        True when it carries adapters.
    """
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def attach_adapters(model, peft_config, mask_token_id: int):
    """Wrap ``model`` for parameter-efficient masked fine-tuning; the caller's ``peft_config`` is not modified.

    The copy of ``peft_config`` gets ``task_type="SEQ_CLS"`` (so peft trains
    and saves the classification head, ``classifier`` or ``score``), and, for
    configurations that support it (LoRA), ``trainable_token_indices`` set to
    the mask token when the caller left it empty: masked fine-tuning then
    trains the mask token's embedding row (and only that row of the
    embedding matrix) along with the adapters and the head.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    peft_config : peft.PeftConfig
    mask_token_id : int

    Returns
    -------
    peft.PeftModel
    """
    peft = _peft()
    config = copy.deepcopy(peft_config)
    if config.task_type is None:
        config.task_type = peft.TaskType.SEQ_CLS
    if hasattr(config, "trainable_token_indices") and not config.trainable_token_indices:
        config.trainable_token_indices = [int(mask_token_id)]
    with _quiet_peft():
        return peft.get_peft_model(model, config)


@contextlib.contextmanager
def _quiet_peft():
    """peft asks transformers a deprecated question (``is_gradient_checkpointing``); nothing for the user to do."""
    with warnings.catch_warnings():
        # A third-party warning with no category of its own: filtered by category and the module that warns
        # (transformers' modeling_utils, during peft's calls only), never by its message (tests/architecture/test_architecture.py).
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\.modeling_utils")
        yield


def save_adapters(model, directory: Path) -> None:
    """Write ``model``'s adapters to ``directory`` in PEFT's format, without the (grown) embedding matrix.

    The embedding matrix is in the base model's own file (:func:`base_model_state`).

    Parameters
    ----------
    model : peft.PeftModel
        The wrapped classifier.
    directory : pathlib.Path
        Where ``adapter_config.json`` and ``adapter_model.safetensors`` are written.
    """
    with _quiet_peft():
        model.save_pretrained(directory, safe_serialization=True, save_embedding_layers=False)


def embedding_matrix(model) -> torch.Tensor:
    """The input embedding matrix as the model uses it: trained token rows of an adapter included.

    Parameters
    ----------
    model : torch.nn.Module
        A sequence classifier, wrapped by peft or not.

    Returns
    -------
    torch.Tensor
        The matrix of shape ``(vocabulary size, hidden size)``.
    """
    table = model.get_input_embeddings()
    merged = getattr(table, "get_merged_weights", None)
    return merged(table.active_adapters) if callable(merged) else table.weight


def base_embedding(model) -> torch.nn.Embedding:
    """The ``nn.Embedding`` of the input embeddings, inside a peft wrapper where there is one.

    Its weight has the shape, dtype and device of :func:`embedding_matrix` without building the merged
    copy that a peft wrapper makes on every call.

    Parameters
    ----------
    model : torch.nn.Module
        A sequence classifier, wrapped by peft or not.

    Returns
    -------
    torch.nn.Embedding
    """
    table = model.get_input_embeddings()
    return next(m for m in table.modules() if isinstance(m, torch.nn.Embedding))


def embedding_rows(model) -> int:
    """Rows of the input embedding matrix (a peft wrapper of the embedding has no ``num_embeddings``)."""
    return base_embedding(model).num_embeddings


def _base_key(key: str) -> str | None:
    """The base model's name of a key of a wrapped model's state dict; ``None`` for an adapter's own weight."""
    parts = key.split(".")
    if any(p in _ADAPTER_PARTS or p.startswith(_ADAPTER_PREFIXES) for p in parts):
        return None
    return ".".join(p for p in parts if p not in _WRAPPER_PARTS)


def base_model_state(model) -> dict:
    """The state dict of the base model under a ``PeftModel``, keyed as the unwrapped model.

    Parameters
    ----------
    model : peft.PeftModel
        The wrapped classifier.

    Returns
    -------
    dict
        Parameter name to tensor, the names of a fresh model of the base class.

    Raises
    ------
    ValueError
        When the keys do not come out as those of a fresh model of the same class (an adapter type whose
        weights this function does not recognise).
    """
    base = model.get_base_model()
    state = {}
    for key, value in base.state_dict().items():
        name = _base_key(key)
        if name is not None:
            state[name] = value
    with torch.device("meta"):
        expected = set(type(base)(base.config).state_dict())
    if set(state) != expected:
        unknown = sorted(set(state) ^ expected)[:5]
        raise ValueError(f"cannot separate the base model from its adapters ({type(model).__name__}): keys {unknown} "
                         "are not those of the base model.")
    return state


def load_adapters(model, directory: Path):
    """Wrap ``model`` with the adapters saved in ``directory`` (PEFT format), for inference.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The base model, as saved next to the adapters.
    directory : pathlib.Path
        The ``adapter/`` folder of a saved classifier.

    Returns
    -------
    peft.PeftModel
        ``model`` with the adapters, not trainable.
    """
    peft = _peft()
    with _quiet_peft():
        return peft.PeftModel.from_pretrained(model, directory, is_trainable=False)

"""Decoder classifiers (GPT-2, Llama, Qwen2, Mistral, ...): an added mask token, padding and last-token pooling.

A decoder's sequence-classification head reads the hidden state of the last
real token.  Transformers finds it by looking for the rightmost id that is not
the pad id, which fails when the model gets ``inputs_embeds`` (gradient
measures, integrated gradients) instead of ids: it then reads the last
position, a padding position under right padding.  :class:`LastTokenPooling`
makes the pooling depend on the attention mask only (docs/decoders.md).
"""

from __future__ import annotations

import torch

__all__ = ["ADDED_MASK_TOKEN", "ADDED_PAD_TOKEN", "LastTokenPooling", "add_missing_special_tokens", "is_decoder",
           "prepare_model"]

#: The mask token added to a tokenizer that has none (docs/decoders.md).
ADDED_MASK_TOKEN = "<|mask|>"
#: The padding token added to a tokenizer that has none: a token of its own, so it never stands for text.
ADDED_PAD_TOKEN = "<|pad|>"


def is_decoder(model) -> bool:
    """Whether ``model`` is a causal (decoder-only) language model with a sequence-classification head.

    A family is a decoder when transformers knows a causal-LM head for it and
    no masked-LM head (BERT-like encoders have both).

    Parameters
    ----------
    model : torch.nn.Module
        A sequence classifier (its ``config.model_type`` is read).

    Returns
    -------
    bool
        True for GPT-2, Llama, Qwen2, Mistral and the other decoder families.
    """
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def _add_token(tokenizer, role: str, text: str, source: str) -> None:
    """Add ``text`` as the tokenizer's ``role`` token (``"mask_token"``, ``"pad_token"``); check it took."""
    from tokenizers import AddedToken

    try:
        tokenizer.add_special_tokens({role: AddedToken(text, special=True, normalized=False)})
    except (TypeError, ValueError, AttributeError, NotImplementedError) as exc:
        raise ValueError(f"the tokenizer of {source} ({type(tokenizer).__name__}) has no {role.replace('_', ' ')} "
                         f"and cannot add one ({type(exc).__name__}: {exc}); fmmlearn needs one.") from exc
    token_id = getattr(tokenizer, f"{role}_id", None)
    if token_id is None or tokenizer(text, add_special_tokens=False)["input_ids"] != [token_id]:
        raise ValueError(f"the tokenizer of {source} ({type(tokenizer).__name__}) has no {role.replace('_', ' ')} "
                         f"and adding {text!r} did not give it one (the tokenizer does not take added tokens); "
                         "fmmlearn replaces tokens by the mask token and batches with the padding token.")


def add_missing_special_tokens(tokenizer, model, source: str) -> list[str]:
    """Give ``tokenizer`` a mask and a padding token where it lacks them; grow ``model``'s embeddings to match.

    The added mask token is :data:`ADDED_MASK_TOKEN`, the added padding token
    :data:`ADDED_PAD_TOKEN` (a token of its own, so padding can never be
    confused with text).  Their embedding rows start as the mean of the
    existing input embeddings: the centre of what the model has seen, and the
    same for every token it replaces, so a masked input starts close to the
    model's inputs and masked fine-tuning teaches it what the token means.
    ``tokenizer`` and ``model`` are modified in place.

    Parameters
    ----------
    tokenizer : transformers fast tokenizer
    model : transformers.PreTrainedModel
    source : str
        Names the model in error messages.

    Returns
    -------
    list of str
        The roles added (``"mask_token"``, ``"pad_token"``), in that order.

    Raises
    ------
    ValueError
        Naming the model and the tokenizer class, when the tokenizer cannot add a token.
    """
    added = []
    for role, text in (("mask_token", ADDED_MASK_TOKEN), ("pad_token", ADDED_PAD_TOKEN)):
        if getattr(tokenizer, f"{role}_id", None) is None:
            _add_token(tokenizer, role, text, source)
            added.append(role)
    table = model.get_input_embeddings()
    old_rows = table.num_embeddings
    if len(tokenizer) > old_rows:
        with torch.no_grad():
            mean = table.weight[:old_rows].float().mean(dim=0)
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
        with torch.no_grad():
            weight = model.get_input_embeddings().weight
            weight[old_rows:] = mean.to(weight.dtype)
    return added


class LastTokenPooling:
    """Hooks on a decoder's backbone: position ids and the pooled state follow the attention mask.

    Installed by :func:`prepare_model` on ``model.base_model`` (the decoder
    under the classification head):

    * before the forward pass (:meth:`before`), when no position ids are
      given, they are counted over the real tokens (``cumsum(mask) - 1``), so
      left padding does not shift positions (GPT-2's absolute ones);
    * after it (:meth:`after`), every position after the last real token
      gets that token's final hidden state, so the head reads it whether it
      looks for the rightmost non-padding id or takes the last position (as
      it does for ``inputs_embeds``).  Hidden states of real tokens and the
      per-layer ``hidden_states`` are unchanged; autograd flows through the copy.

    A plain class (no closure), so a model with these hooks pickles and deep-copies.
    """

    @staticmethod
    def _mask(kwargs):
        mask = kwargs.get("attention_mask")
        return mask if isinstance(mask, torch.Tensor) and mask.dim() == 2 else None

    def before(self, module, args, kwargs):
        mask = self._mask(kwargs)
        if mask is None or kwargs.get("position_ids") is not None or kwargs.get("past_key_values") is not None:
            return None
        positions = (mask.long().cumsum(dim=-1) - 1).clamp(min=0)
        return args, {**kwargs, "position_ids": positions}

    def after(self, module, args, kwargs, output):
        mask = self._mask(kwargs)
        if mask is None:
            return None
        hidden = output[0]
        steps = torch.arange(hidden.shape[1], device=hidden.device)
        last = (steps * (mask.to(hidden.device) != 0)).argmax(dim=-1)
        last_state = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        after_last = (steps[None, :] > last[:, None])[..., None]
        pooled = torch.where(after_last, last_state[:, None, :], hidden)
        if isinstance(output, tuple):
            return (pooled, *output[1:])
        output["last_hidden_state"] = pooled
        return output


def _installed(module) -> bool:
    return any(isinstance(getattr(hook, "__self__", None), LastTokenPooling)
               for hook in module._forward_hooks.values())


def prepare_model(model, tokenizer) -> None:
    """Make ``model`` read ``tokenizer``'s padding, and pool decoders by the attention mask (in place).

    Sets ``model.config.pad_token_id``; on a decoder (:func:`is_decoder`)
    installs :class:`LastTokenPooling` once.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    tokenizer : transformers tokenizer
    """
    model.config.pad_token_id = tokenizer.pad_token_id
    if not is_decoder(model):
        return
    backbone = model.base_model
    if backbone is model or _installed(backbone):
        return
    hooks = LastTokenPooling()
    backbone.register_forward_pre_hook(hooks.before, with_kwargs=True)
    backbone.register_forward_hook(hooks.after, with_kwargs=True)

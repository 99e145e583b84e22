"""Tiny random decoder classifiers of four families, with tokenizers trained offline at test time.

Like ``helpers.encoders``: a small tokenizer trained with the ``tokenizers``
library on :func:`helpers.encoders.default_corpus`, wrapped in the class
``from_pretrained`` picks for the real checkpoints, and a 2-layer, 32-wide
random ``...ForSequenceClassification`` saved next to it.  None of the
tokenizers has a mask token (fmmlearn adds one); only Qwen2's has a padding
token, which is its end-of-text token, as for the real Qwen2 checkpoints.

=========  =======================================  ==========================================
family     tokenizer                                what it exercises
=========  =======================================  ==========================================
gpt2       byte-level BPE, ``<|endoftext|>``, no    no special tokens around the text, absolute
           padding, no template                     positions (left padding shifts them)
llama      BPE over the ``▁`` metaspace with byte   no special tokens around the text, rotary
           fallback (``LlamaTokenizer``)            positions, grouped-query attention
qwen2      byte-level BPE (``Qwen2Tokenizer``),     the padding token is end-of-text (reused)
           padding = ``<|endoftext|>``
mistral    Unigram with the ``▁`` metaspace in a    a generic fast tokenizer with a
           generic fast tokenizer                   ``<s> A </s> <s> B`` template, sliding window
=========  =======================================  ==========================================
"""

from __future__ import annotations

from pathlib import Path

import torch

from helpers.encoders import _train, _train_byte_level_bpe, default_corpus

__all__ = ["DECODERS", "build_decoder", "build_decoder_model", "build_decoder_tokenizer"]

#: Names of the decoder families :func:`build_decoder` knows.
DECODERS = ("gpt2", "llama", "qwen2", "mistral")

_VOCAB_SIZE = 600
_MAX_POSITIONS = 128
_INIT_RANGE = 0.2  # as helpers.encoders: the families' 0.02 leaves a tiny model blind to its input


def _gpt2_tokenizer(corpus):
    from transformers import GPT2Tokenizer

    trained = _train_byte_level_bpe(["<|endoftext|>"], corpus)
    return GPT2Tokenizer(vocab=trained["vocab"], merges=[tuple(m) for m in trained["merges"]],
                         model_max_length=_MAX_POSITIONS)


def _llama_tokenizer(corpus):
    from tokenizers import models, pre_tokenizers, trainers
    from transformers import LlamaTokenizer

    trained = _train(
        models.BPE(byte_fallback=True),
        trainers.BpeTrainer(vocab_size=_VOCAB_SIZE, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False),
        pre_tokenizer=pre_tokenizers.Metaspace(),
        corpus=corpus,
    )
    return LlamaTokenizer(vocab=trained["vocab"], merges=[tuple(m) for m in trained["merges"]],
                          model_max_length=_MAX_POSITIONS)


def _qwen2_tokenizer(corpus):
    from transformers import Qwen2Tokenizer

    trained = _train_byte_level_bpe(["<|endoftext|>"], corpus)
    return Qwen2Tokenizer(vocab=trained["vocab"], merges=[tuple(m) for m in trained["merges"]],
                          model_max_length=_MAX_POSITIONS)


def _mistral_tokenizer(corpus):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    trained = _train(
        models.Unigram(),
        trainers.UnigramTrainer(vocab_size=_VOCAB_SIZE, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>",
                                show_progress=False),
        pre_tokenizer=pre_tokenizers.Metaspace(),
        corpus=corpus,
    )
    tok = Tokenizer(models.Unigram([tuple(v) for v in trained["vocab"]], unk_id=trained["unk_id"]))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    ids = {piece: i for i, (piece, _) in enumerate(trained["vocab"])}
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A:0", pair="<s> $A:0 </s>:0 <s>:1 $B:1",
        special_tokens=[("<s>", ids["<s>"]), ("</s>", ids["</s>"])],
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   model_input_names=["input_ids", "attention_mask"],
                                   model_max_length=_MAX_POSITIONS)


_TOKENIZERS = {"gpt2": _gpt2_tokenizer, "llama": _llama_tokenizer, "qwen2": _qwen2_tokenizer,
               "mistral": _mistral_tokenizer}


def _config(name: str, tokenizer):
    from transformers import GPT2Config, LlamaConfig, MistralConfig, Qwen2Config

    common = dict(vocab_size=len(tokenizer), num_labels=2, initializer_range=_INIT_RANGE,
                  pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id)
    rotary = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, max_position_embeddings=_MAX_POSITIONS, **common)
    if name == "gpt2":
        return GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=_MAX_POSITIONS, **common)
    if name == "llama":
        return LlamaConfig(**rotary)
    if name == "qwen2":
        return Qwen2Config(**rotary)
    if name == "mistral":
        return MistralConfig(**rotary, sliding_window=16)
    raise ValueError(f"unknown decoder {name!r}; expected one of {DECODERS}.")


def build_decoder_tokenizer(name: str, corpus=None):
    """Train the tokenizer of decoder family ``name`` on ``corpus`` (default :func:`default_corpus`)."""
    if name not in _TOKENIZERS:
        raise ValueError(f"unknown decoder {name!r}; expected one of {DECODERS}.")
    return _TOKENIZERS[name](list(default_corpus() if corpus is None else corpus))


def build_decoder_model(name: str, tokenizer, seed: int = 0):
    """A random tiny decoder sequence classifier of family ``name`` whose vocabulary fits ``tokenizer``."""
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(seed)
    return AutoModelForSequenceClassification.from_config(_config(name, tokenizer)).eval()


def build_decoder(name: str, path, corpus=None, seed: int = 0) -> str:
    """Save a tiny random decoder classifier of family ``name`` and its trained tokenizer to ``path``."""
    from fmmlearn.modeling import quiet_transformers

    tokenizer = build_decoder_tokenizer(name, corpus)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():
        build_decoder_model(name, tokenizer, seed).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)

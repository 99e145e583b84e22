"""Tiny random encoders of five families, with tokenizers trained offline at test time.

Each builder trains a small tokenizer with the ``tokenizers`` library on a
corpus of a few hundred bundled tweets plus the toy-sentiment vocabulary of
``conftest.py`` (:func:`default_corpus`), wraps it in the family's own
``transformers`` tokenizer class (the class ``from_pretrained`` would pick for
a real checkpoint, so special tokens, post-processor, ``special_tokens_mask``,
``sequence_ids``, ``word_ids`` and ``offset_mapping`` behave as they do for
the real model), builds a 2-layer, 32-wide random model of the family and
saves both to a directory that ``FaithfulTextClassifier(model=path)`` loads.

=============  =====================================  ===========================================
family         tokenizer                              what it exercises
=============  =====================================  ===========================================
roberta        byte-level BPE, ``<s> </s> <mask>``    pair format ``<s> A </s></s> B </s>``,
                                                      no token type ids, position-id offset
deberta-v2     Unigram with the ``▁`` metaspace,      offsets that include the ``▁`` space,
               ``[CLS] [SEP] [MASK]``                 relative attention, ``type_vocab_size=0``
distilbert     WordPiece                              no ``token_type_ids`` (the model rejects them)
electra        WordPiece                              embeddings (16) narrower than the hidden size
modernbert     byte-level BPE, ``[CLS] [SEP]``,       offsets that include the leading space,
               template post-processor                rotary positions, local attention
=============  =====================================  ===========================================

Builders are plain functions (no fixtures) so any test module can register
them at the scope it needs: ``build_encoder(name, tmp_path)``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import torch

__all__ = ["ENCODERS", "build_encoder", "build_tokenizer", "default_corpus"]

#: Names of the encoder families :func:`build_encoder` knows.
ENCODERS = ("roberta", "deberta-v2", "distilbert", "electra", "modernbert")

#: ASCII words the unit tests write their examples with (the toy sentiment
#: vocabulary); in the corpus so that they tokenize into few pieces.
TEST_WORDS = (
    "good great fine nice happy superb bad awful poor sad ugly terrible the a movie plot was really "
    "and it very story of this premise hypothesis yes no maybe wonderful film boring acting"
).split()

_VOCAB_SIZE = 600
_MAX_POSITIONS = 128
_TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
#: Weight scale of the random models.  The families' default (0.02) leaves a
#: 2-layer, 32-wide model almost blind to its input (masking a token moves a
#: logit by ~1e-5, so every comparison would be vacuous); at 0.2 it moves by ~0.1.
_INIT_RANGE = 0.2


@lru_cache(maxsize=1)
def default_corpus(n_tweets: int = 300) -> tuple[str, ...]:
    """A few hundred bundled tweets plus :data:`TEST_WORDS`, the tokenizers' training text."""
    from fmmlearn.datasets import load_tweet_sentiment

    tweets = load_tweet_sentiment(n_samples=n_tweets, random_state=0).data
    return tuple(tweets) + (" ".join(TEST_WORDS),) * 20


def _train(model, trainer, *, normalizer=None, pre_tokenizer, corpus) -> dict:
    """Train a ``tokenizers`` model and return its JSON ``model`` section (vocab, merges)."""
    from tokenizers import Tokenizer

    tok = Tokenizer(model)
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.train_from_iterator(corpus, trainer)
    return json.loads(tok.to_str())["model"]


def _train_byte_level_bpe(specials, corpus) -> dict:
    """A byte-level BPE (RoBERTa's and ModernBERT's kind) trained on ``corpus``, specials first."""
    from tokenizers import models, pre_tokenizers, trainers

    return _train(
        models.BPE(),
        trainers.BpeTrainer(vocab_size=_VOCAB_SIZE, special_tokens=specials, show_progress=False,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
        pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=False),
        corpus=corpus,
    )


def _roberta_tokenizer(corpus):
    from tokenizers import AddedToken
    from transformers import RobertaTokenizerFast

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # roberta-base's ids 0, 1, 2, 3; mask last there
    trained = _train_byte_level_bpe(specials, corpus)
    # The class builds roberta-base's pipeline itself (ByteLevel pre-tokenizer and
    # decoder, RobertaProcessing with trim_offsets=True); roberta-base's <mask>
    # swallows the space before it.
    return RobertaTokenizerFast(vocab=trained["vocab"], merges=[tuple(m) for m in trained["merges"]],
                                mask_token=AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False),
                                model_max_length=_MAX_POSITIONS)


def _deberta_tokenizer(corpus):
    from tokenizers import models, pre_tokenizers, trainers
    from transformers import DebertaV2TokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # deberta-v3's ids 0..3; [MASK] is last there
    trained = _train(
        models.Unigram(),
        trainers.UnigramTrainer(vocab_size=_VOCAB_SIZE, special_tokens=specials, unk_token="[UNK]",
                                show_progress=False),
        pre_tokenizer=pre_tokenizers.Metaspace(),
        corpus=corpus,
    )
    # The class builds deberta-v3's pipeline (whitespace-collapsing normalizer,
    # Metaspace "▁" with prepend_scheme="always", [CLS] A [SEP] B [SEP] template).
    return DebertaV2TokenizerFast(vocab=[tuple(v) for v in trained["vocab"]], unk_id=trained["unk_id"],
                                  model_max_length=_MAX_POSITIONS)


def _wordpiece_vocab(corpus) -> dict:
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    return _train(
        models.WordPiece(unk_token="[UNK]"),
        trainers.WordPieceTrainer(vocab_size=_VOCAB_SIZE, show_progress=False,
                                  special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]),
        normalizer=normalizers.BertNormalizer(lowercase=True),
        pre_tokenizer=pre_tokenizers.BertPreTokenizer(),
        corpus=corpus,
    )["vocab"]


def _distilbert_tokenizer(corpus):
    from transformers import DistilBertTokenizerFast

    # DistilBertTokenizer's model_input_names leave token_type_ids out, as for distilbert-base-uncased.
    return DistilBertTokenizerFast(vocab=_wordpiece_vocab(corpus), model_max_length=_MAX_POSITIONS)


def _electra_tokenizer(corpus):
    from transformers import ElectraTokenizerFast

    return ElectraTokenizerFast(vocab=_wordpiece_vocab(corpus), do_lower_case=True,
                                model_max_length=_MAX_POSITIONS)


def _modernbert_tokenizer(corpus):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    # answerdotai/ModernBERT-base has no tokenizer class of its own: a generic fast
    # tokenizer over this pipeline (NFC, ByteLevel without the RoBERTa
    # post-processor, so offsets keep the leading space; a [CLS]/[SEP] template).
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    trained = _train_byte_level_bpe(specials, corpus)
    vocab = trained["vocab"]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) for m in trained["merges"]], unk_token="[UNK]"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
        mask_token="[MASK]", model_input_names=["input_ids", "attention_mask"], model_max_length=_MAX_POSITIONS,
    )


_TOKENIZERS = {
    "roberta": _roberta_tokenizer,
    "deberta-v2": _deberta_tokenizer,
    "distilbert": _distilbert_tokenizer,
    "electra": _electra_tokenizer,
    "modernbert": _modernbert_tokenizer,
}


def _config(name: str, tokenizer):
    """A tiny configuration of family ``name`` for ``tokenizer`` (2 labels)."""
    from transformers import DebertaV2Config, DistilBertConfig, ElectraConfig, ModernBertConfig, RobertaConfig

    common = dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, num_labels=2,
                  initializer_range=_INIT_RANGE)
    if name == "roberta":
        # RoBERTa's position ids start after padding_idx: two extra rows, as in roberta-base (514 = 512 + 2).
        return RobertaConfig(**_TINY, **common, max_position_embeddings=_MAX_POSITIONS + 2, type_vocab_size=1,
                             bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    if name == "deberta-v2":
        # deberta-v3-base's attention layout, scaled down.
        return DebertaV2Config(**_TINY, **common, max_position_embeddings=_MAX_POSITIONS, type_vocab_size=0,
                               relative_attention=True, position_buckets=32, pos_att_type=["p2c", "c2p"],
                               norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False)
    if name == "distilbert":
        return DistilBertConfig(**common, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                max_position_embeddings=_MAX_POSITIONS)
    if name == "electra":
        return ElectraConfig(**_TINY, **common, embedding_size=16, max_position_embeddings=_MAX_POSITIONS)
    if name == "modernbert":
        return ModernBertConfig(**_TINY, **common, max_position_embeddings=_MAX_POSITIONS, local_attention=16,
                                global_attn_every_n_layers=2, cls_token_id=tokenizer.cls_token_id,
                                sep_token_id=tokenizer.sep_token_id, bos_token_id=tokenizer.cls_token_id,
                                eos_token_id=tokenizer.sep_token_id)
    raise ValueError(f"unknown encoder {name!r}; expected one of {ENCODERS}.")


def build_tokenizer(name: str, corpus=None):
    """Train the tokenizer of family ``name`` on ``corpus`` (default :func:`default_corpus`).

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        Of the family's own class (``RobertaTokenizerFast``, ``DebertaV2TokenizerFast``, ...).
    """
    if name not in _TOKENIZERS:
        raise ValueError(f"unknown encoder {name!r}; expected one of {ENCODERS}.")
    return _TOKENIZERS[name](list(default_corpus() if corpus is None else corpus))


def build_model(name: str, tokenizer, seed: int = 0):
    """A random tiny sequence classifier of family ``name`` whose vocabulary fits ``tokenizer``."""
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(seed)
    return AutoModelForSequenceClassification.from_config(_config(name, tokenizer)).eval()


def build_encoder(name: str, path, corpus=None, seed: int = 0) -> str:
    """Save a tiny random model of family ``name`` and its trained tokenizer to ``path``.

    Parameters
    ----------
    name : str
        One of :data:`ENCODERS`.
    path : path-like
        Directory, created if needed.
    corpus : sequence of str, optional
        Tokenizer training text; default :func:`default_corpus`.
    seed : int, default=0
        Seeds the random weights.

    Returns
    -------
    str
        ``path``, ready for ``FaithfulTextClassifier(model=path)``.
    """
    from fmmlearn.modeling import quiet_transformers

    tokenizer = build_tokenizer(name, corpus)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():  # no "writing shards" progress bar
        build_model(name, tokenizer, seed).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)

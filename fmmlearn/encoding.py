"""Tokenization and batching: texts in, token-id batches out.

Text is tokenized exactly once per call.  Everything after this module works
on token ids (masking never decodes and re-tokenizes).  An
:class:`Encoding` keeps, per example, the ids together with the bookkeeping
that masking and explanations need: which positions are special tokens, which
segment (A or B) a token belongs to, its word index and its character span in
the original text.  :func:`collate` pads a subset of examples into a
:class:`Batch` of tensors; :func:`length_grouped_batches` chooses subsets of
similar length so that padding stays small, and the batch samplers of masked
fine-tuning (:func:`training_batch_sampler`, one ``iter()`` per epoch) draw them
for training and for the MaSF calibration alike.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Set
from dataclasses import dataclass, field, replace
from typing import Iterator, Sequence

import numpy as np
import pandas as pd
import torch

from .utils import record_truncation
from .utils import keyword_only

__all__ = [
    "SEGMENT_A",
    "SEGMENT_B",
    "SEGMENT_NONE",
    "Batch",
    "Encoding",
    "LengthGroupedBatchSampler",
    "UniformBatchSampler",
    "collate",
    "encode",
    "length_grouped_batches",
    "training_batch_sampler",
    "validate_texts",
]

#: Segment id of the first text of an input (the one explanations mask).
SEGMENT_A = 0
#: Segment id of the second text of a pair.
SEGMENT_B = 1
#: Segment id of special tokens and padding.
SEGMENT_NONE = -1


# --------------------------------------------------------------------------- input validation


def _check_text(item, where: str) -> str:
    if isinstance(item, str):
        return item
    if item is None or (isinstance(item, float) and np.isnan(item)):
        raise ValueError(f"{where} is {item!r}; expected a string (missing texts are not allowed).")
    raise TypeError(f"{where} is of type {type(item).__name__}; expected a string.")


def _unordered_input(X, name: str) -> TypeError:
    """The error for a set or mapping as texts: no defined order (sets) or no defined texts (keys or values?)."""
    if isinstance(X, Mapping):
        return TypeError(f"{name} is a {type(X).__name__}; pass the texts as a list, e.g. {name}=list(d.values()) "
                         "or list(d.keys()) (which one is meant cannot be guessed).")
    return TypeError(f"{name} is a {type(X).__name__}, whose order is undefined, so outputs could not be matched "
                     f"to inputs; pass a list, e.g. {name}=sorted(texts).")


@keyword_only
def validate_texts(X, *, name: str = "X") -> tuple[list, bool]:
    """Check text input and return it as a list plus a pair flag.

    Parameters
    ----------
    X : sequence of str, pandas Series, ndarray, sequence of 2-tuples or DataFrame
        Single texts (a list, 1-D array or Series of ``str``) or sentence pairs
        (a sequence of ``(segment_a, segment_b)`` tuples, an ``(n, 2)`` array or
        a two-column DataFrame whose first column is segment A).
    name : str, default="X"
        Argument name used in error messages.

    Returns
    -------
    texts : list of str or list of tuple of (str, str)
    is_pair : bool
        Whether the input holds sentence pairs.

    Raises
    ------
    ValueError, TypeError
        For empty input, missing or non-string items, malformed pairs, and
        sets or mappings (no defined order or meaning); the message names the
        offending item.
    """
    if isinstance(X, (str, bytes)):
        raise TypeError(
            f"{name} must be a sequence of texts, got a single {type(X).__name__}; "
            f"wrap it in a list: {name}=[text]."
        )
    if isinstance(X, pd.DataFrame):
        if X.shape[1] != 2:
            raise ValueError(
                f"{name} is a DataFrame with {X.shape[1]} column(s); expected exactly 2 columns "
                f"(segment A, segment B) for sentence pairs. For single texts pass a Series, "
                f"e.g. {name}=df[{list(X.columns)[0]!r}]." if X.shape[1] else
                f"{name} is a DataFrame with no columns; expected 2 columns (segment A, segment B)."
            )
        rows = list(X.itertuples(index=False, name=None))
    elif isinstance(X, pd.Series):
        rows = X.tolist()
    elif isinstance(X, np.ndarray):
        if X.ndim == 2 and X.shape[1] != 2:
            raise ValueError(f"{name} has shape {X.shape}; expected (n,) texts or (n, 2) pairs.")
        if X.ndim > 2:
            raise ValueError(f"{name} has shape {X.shape}; expected (n,) texts or (n, 2) pairs.")
        rows = [tuple(r) for r in X] if X.ndim == 2 else X.tolist()
    elif isinstance(X, (Mapping, Set)):
        raise _unordered_input(X, name)
    elif isinstance(X, Sequence) or hasattr(X, "__iter__"):
        rows = list(X)
    else:
        raise TypeError(f"{name} must be a sequence of strings or pairs, got {type(X).__name__}.")
    if len(rows) == 0:
        raise ValueError(f"{name} is empty; expected at least one text.")

    is_pair = isinstance(rows[0], (tuple, list))
    out = []
    for i, item in enumerate(rows):
        if isinstance(item, (tuple, list)) != is_pair:
            kind = "pairs" if is_pair else "single texts"
            raise ValueError(f"{name}[{i}] is {item!r}, but {name}[0] makes {name} a sequence of {kind}; "
                             f"do not mix single texts and pairs.")
        if is_pair:
            if len(item) != 2:
                raise ValueError(f"{name}[{i}] has {len(item)} elements; a sentence pair needs exactly 2 "
                                 f"(segment A, segment B).")
            out.append((_check_text(item[0], f"{name}[{i}][0]"), _check_text(item[1], f"{name}[{i}][1]")))
        else:
            out.append(_check_text(item, f"{name}[{i}]"))
    return out, is_pair


# --------------------------------------------------------------------------- encoding


@dataclass
class Encoding:
    """Tokenized examples, one ragged array per field and example.

    Attributes
    ----------
    input_ids : list of ndarray of int64
    special_tokens_mask : list of ndarray of bool
        True at special tokens added by the tokenizer (``[CLS]``, ``[SEP]``, ...).
    segment_ids : list of ndarray of int64
        :data:`SEGMENT_A`, :data:`SEGMENT_B` or :data:`SEGMENT_NONE` (special).
    word_ids : list of ndarray of int64
        Word index within the token's own segment (``0, 1, ...`` in reading
        order), ``-1`` for special tokens.  Words are the tokenizer's own
        (``word_ids()`` of its pre-tokenizer), except that a word made only
        of whitespace (byte-level BPE's lone ``Ġ`` for a double space) joins
        the word that follows it.
    offsets : list of ndarray of int64, shape (n_tokens, 2)
        Character span of each token in its own segment's text, without
        surrounding whitespace (SentencePiece's ``▁`` and byte-level BPE's
        ``Ġ`` stand for a space that the span leaves out).  A token that
        stands for whitespace only gets the empty span at the start of its
        word.  Special tokens get ``(0, 0)``.
    token_type_ids : list of ndarray of int64 or None
        Present when the tokenizer produces them (BERT pairs).
    truncated : ndarray of bool
        Which examples were cut to ``max_length``.
    texts : list
        The validated input (str or pairs), kept for character offsets.
    """

    input_ids: list
    special_tokens_mask: list
    segment_ids: list
    word_ids: list
    offsets: list
    token_type_ids: list | None
    truncated: np.ndarray
    texts: list = field(repr=False)
    is_pair: bool = False

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> np.ndarray:
        """Number of tokens (special tokens included) per example."""
        return np.fromiter((len(ids) for ids in self.input_ids), dtype=np.int64, count=len(self))

    def subset(self, indices) -> "Encoding":
        """Return the examples at ``indices`` as a new Encoding."""
        idx = np.asarray(indices, dtype=np.int64)
        pick = (lambda seq: [seq[i] for i in idx]) if len(idx) else (lambda seq: [])
        return replace(
            self,
            input_ids=pick(self.input_ids),
            special_tokens_mask=pick(self.special_tokens_mask),
            segment_ids=pick(self.segment_ids),
            word_ids=pick(self.word_ids),
            offsets=pick(self.offsets),
            token_type_ids=None if self.token_type_ids is None else pick(self.token_type_ids),
            truncated=self.truncated[idx],
            texts=pick(self.texts),
        )


def _tokenize(tokenizer, texts, is_pair, truncation, max_length):
    if is_pair:
        first, second = [t[0] for t in texts], [t[1] for t in texts]
    else:
        first, second = texts, None
    return tokenizer(
        first,
        second,
        truncation=truncation,
        max_length=max_length if truncation else None,
        return_special_tokens_mask=True,
        return_offsets_mapping=True,
        return_attention_mask=False,
        verbose=False,
    )


def _check_not_empty(input_ids, name: str | None) -> None:
    """Refuse an input of no token at all: a decoder's tokenizer (GPT-2, Qwen2) adds nothing to an empty text."""
    empty = [i for i, ids in enumerate(input_ids) if len(ids) == 0]
    if empty:
        raise ValueError(f"{name or 'texts'}[{empty[0]}] gives no token at all ({len(empty)} such input(s)): the "
                         "tokenizer adds no special token to an empty text, so the model has nothing to classify; "
                         "drop empty texts or give them some text.")


def encode(tokenizer, texts: list, *, is_pair: bool, max_length: int | None, warn: bool = True,
           name: str | None = None) -> Encoding:
    """Tokenize validated texts once and keep the bookkeeping masking needs.

    Parameters
    ----------
    tokenizer : transformers fast tokenizer
        Must support ``return_offsets_mapping`` (all fast tokenizers do).
    texts : list of str or list of (str, str)
        Output of :func:`validate_texts`.
    is_pair : bool
        Whether ``texts`` holds sentence pairs.
    max_length : int or None
        Longest allowed sequence in tokens, special tokens included; ``None``
        uses ``tokenizer.model_max_length``.  Longer inputs are truncated
        (pairs: longest segment first) and a warning says how many.
    warn : bool, default=True
        Report truncated inputs: one :class:`~fmmlearn.exceptions.TruncationWarning`
        at the caller's line, or, inside a public call of fmmlearn (``fit``,
        ``predict``, ``explain``, ...), collected into that call's single
        warning.
    name : str, optional
        The argument ``texts`` came from (``"X"``), named in the warning.

    Returns
    -------
    Encoding
    """
    if max_length is None:
        max_length = int(min(tokenizer.model_max_length, 1_000_000))
    # Tokenize without truncation first: it tells exactly which inputs are too
    # long, and only those are tokenized a second time.
    enc = _tokenize(tokenizer, texts, is_pair, truncation=False, max_length=None)
    _check_not_empty(enc["input_ids"], name)
    too_long = np.array([len(ids) > max_length for ids in enc["input_ids"]], dtype=bool)
    encodings = {i: (enc, i) for i in range(len(texts))}
    if too_long.any():
        long_idx = np.flatnonzero(too_long)
        enc_long = _tokenize(tokenizer, [texts[i] for i in long_idx], is_pair, True, max_length)
        for j, i in enumerate(long_idx):
            encodings[i] = (enc_long, j)
        if warn:
            record_truncation(name, len(texts), max_length, long_idx)

    fields = {k: [] for k in ("input_ids", "special_tokens_mask", "segment_ids", "word_ids", "offsets")}
    has_types = "token_type_ids" in enc
    token_types = [] if has_types else None
    for i in range(len(texts)):
        src, j = encodings[i]
        fields["input_ids"].append(np.asarray(src["input_ids"][j], dtype=np.int64))
        fields["special_tokens_mask"].append(np.asarray(src["special_tokens_mask"][j], dtype=bool))
        seq = src.sequence_ids(j)
        segments = np.array([SEGMENT_NONE if s is None else s for s in seq], dtype=np.int64)
        words = np.array([-1 if w is None else w for w in src.word_ids(j)], dtype=np.int64)
        offsets = np.asarray(src["offset_mapping"][j], dtype=np.int64).reshape(-1, 2)
        special = fields["special_tokens_mask"][-1]
        words, offsets = _normalise_words(texts[i], is_pair, segments, words, offsets, special)
        fields["segment_ids"].append(segments)
        fields["word_ids"].append(words)
        fields["offsets"].append(offsets)
        if has_types:
            token_types.append(np.asarray(src["token_type_ids"][j], dtype=np.int64))
    return Encoding(**fields, token_type_ids=token_types, truncated=too_long, texts=texts, is_pair=is_pair)


# --------------------------------------------------------------------------- words and character spans

#: ``_IS_SPACE[c]``: whether code point ``c`` is whitespace (``str.isspace``; none lies above U+3000).
_IS_SPACE = np.array([chr(c).isspace() for c in range(0x3001)] + [False])


def _non_space_positions(text: str) -> np.ndarray:
    """Indices of the characters of ``text`` that are not whitespace."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    return np.flatnonzero(~_IS_SPACE[np.minimum(codes, len(_IS_SPACE) - 1)])


def _trim_spans(text: str, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spans without leading/trailing whitespace, and which spans hold nothing else.

    Parameters
    ----------
    text : str
    spans : ndarray (n, 2)
        ``[start, end)`` character spans into ``text``.

    Returns
    -------
    trimmed : ndarray (n, 2)
        Each span shrunk to its first and last non-space character.
    blank : ndarray of bool (n,)
        Spans that are empty or whitespace only (their ``trimmed`` row is
        meaningless and must be replaced).
    """
    solid = _non_space_positions(text)
    first = np.searchsorted(solid, spans[:, 0], side="left")  # first non-space at or after the start
    last = np.searchsorted(solid, spans[:, 1], side="left") - 1  # last non-space before the end
    blank = first > last
    if not len(solid):
        return spans.copy(), blank
    starts = solid[np.minimum(first, len(solid) - 1)]
    ends = solid[np.maximum(last, 0)] + 1
    return np.stack([starts, ends], axis=1), blank


def _join_blank_words(words: np.ndarray, blank: np.ndarray) -> np.ndarray:
    """Word ids (of one segment, in token order) with whitespace-only words merged and renumbered.

    A word all of whose tokens are ``blank`` joins the next word, or the
    previous one at the end of the segment; ids are then renumbered
    ``0, 1, ...`` in order of appearance.
    """
    order = list(dict.fromkeys(words.tolist()))  # word ids in order of appearance
    solid = set(words[~blank].tolist())
    if not solid:
        return words
    target, following = {}, None
    for w in reversed(order):  # each blank word joins the next solid word ...
        following = w if w in solid else following
        target[w] = following
    preceding = None
    for w in order:  # ... or, at the end of the segment, the previous one
        preceding = w if w in solid else preceding
        target[w] = preceding if target[w] is None else target[w]
    dense = {w: n for n, w in enumerate(dict.fromkeys(target[w] for w in order))}
    return np.array([dense[target[w]] for w in words.tolist()], dtype=np.int64)


def _normalise_words(text, is_pair: bool, segments, words, offsets, special):
    """Whitespace-free character spans and whitespace-free words, segment by segment.

    Tokenizers disagree about spaces: WordPiece spans never include them,
    SentencePiece's ``▁word`` and byte-level BPE's ``Ġword`` include the space
    unless the tokenizer trims offsets (RoBERTa does, DeBERTa and ModernBERT do
    not), and byte-level BPE makes a double space a word of its own.  This
    brings every tokenizer to WordPiece's convention, so a word's span is the
    word and nothing else (``text.split()`` on plain ASCII text).

    Returns
    -------
    words, offsets : ndarray
        New arrays; special tokens keep word ``-1`` and get span ``(0, 0)``.
    """
    words, offsets = words.copy(), offsets.copy()
    offsets[special] = 0
    for segment in (SEGMENT_A, SEGMENT_B) if is_pair else (SEGMENT_A,):
        pos = np.flatnonzero((segments == segment) & ~special & (words >= 0))
        if not len(pos):
            continue
        trimmed, blank = _trim_spans(text[segment] if is_pair else text, offsets[pos])
        if blank.any():
            seg_words = words[pos]
            has_solid = np.zeros(seg_words.max() + 1, dtype=bool)
            has_solid[seg_words[~blank]] = True
            if not has_solid[seg_words].all():  # a word of whitespace only (byte-level BPE's lone "Ġ")
                seg_words = _join_blank_words(seg_words, blank)
                words[pos] = seg_words
            # A blank token gets the empty span at the start of its word, so
            # that the word's span (first to last token) stays the word itself.
            word_start = np.full(seg_words.max() + 1, np.iinfo(np.int64).max)
            np.minimum.at(word_start, seg_words[~blank], trimmed[~blank, 0])
            fallback = offsets[pos, 1]  # a segment of whitespace only keeps the tokenizer's end
            starts = np.where(word_start[seg_words] == np.iinfo(np.int64).max, fallback, word_start[seg_words])
            trimmed[blank] = starts[blank, None]
        offsets[pos] = trimmed
    return words, offsets


# --------------------------------------------------------------------------- batches


@dataclass
class Batch:
    """A padded batch of examples as tensors of shape (B, T).

    Attributes
    ----------
    input_ids : LongTensor
    attention_mask : LongTensor
        1 at real tokens, 0 at padding.
    special_tokens_mask : BoolTensor
        True at special tokens **and** padding: never masked, never explained.
    segment_ids : LongTensor
        :data:`SEGMENT_A`, :data:`SEGMENT_B`, or :data:`SEGMENT_NONE` at
        special tokens and padding.
    token_type_ids : LongTensor or None
    index : LongTensor, shape (B,)
        Position of each row in the caller's input, to restore order.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    special_tokens_mask: torch.Tensor
    segment_ids: torch.Tensor
    token_type_ids: torch.Tensor | None
    index: torch.Tensor

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def model_inputs(self, input_ids: torch.Tensor | None = None) -> dict:
        """Keyword arguments for a Hugging Face model's ``forward``.

        Parameters
        ----------
        input_ids : LongTensor, optional
            Replacement ids (e.g. a masked copy); default the batch's own.
        """
        inputs = {
            "input_ids": self.input_ids if input_ids is None else input_ids,
            "attention_mask": self.attention_mask,
        }
        if self.token_type_ids is not None:
            inputs["token_type_ids"] = self.token_type_ids
        return inputs

    def to(self, device) -> "Batch":
        """Return the batch with every tensor moved to ``device``."""
        move = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        return Batch(*(move(getattr(self, f)) for f in _BATCH_FIELDS))

    def with_input_ids(self, input_ids: torch.Tensor) -> "Batch":
        """Return a copy whose ``input_ids`` are replaced (e.g. masked)."""
        return replace(self, input_ids=input_ids)


_BATCH_FIELDS = ("input_ids", "attention_mask", "special_tokens_mask", "segment_ids", "token_type_ids", "index")


def _pad(arrays, fill, dtype, width):
    out = np.full((len(arrays), width), fill, dtype=dtype)
    for row, a in enumerate(arrays):
        out[row, : len(a)] = a
    return torch.from_numpy(out)


@keyword_only
def collate(encoding: Encoding, indices, *, pad_token_id: int, input_ids: Sequence | None = None) -> Batch:
    """Pad the examples at ``indices`` to their longest length (dynamic padding).

    Parameters
    ----------
    encoding : Encoding
    indices : sequence of int
    pad_token_id : int
    input_ids : sequence of ndarray, optional
        Per-example ids to use instead of ``encoding.input_ids`` (indexed like
        the encoding), e.g. masked copies.

    Returns
    -------
    Batch
    """
    idx = np.asarray(indices, dtype=np.int64)
    source = encoding.input_ids if input_ids is None else input_ids
    width = int(max(len(encoding.input_ids[i]) for i in idx))
    ids = _pad([source[i] for i in idx], pad_token_id, np.int64, width)
    lengths = torch.tensor([len(encoding.input_ids[i]) for i in idx])
    attention = (torch.arange(width)[None, :] < lengths[:, None]).long()
    special = _pad([encoding.special_tokens_mask[i] for i in idx], True, bool, width)
    segments = _pad([encoding.segment_ids[i] for i in idx], SEGMENT_NONE, np.int64, width)
    types = None
    if encoding.token_type_ids is not None:
        types = _pad([encoding.token_type_ids[i] for i in idx], 0, np.int64, width)
    return Batch(ids, attention, special, segments, types, torch.from_numpy(idx.copy()))


@keyword_only
def length_grouped_batches(
    lengths,
    *, batch_size: int,
    shuffle: bool = False,
    generator: np.random.Generator | None = None,
    megabatch_factor: int = 50,
) -> list[np.ndarray]:
    """Split example indices into batches of similar length.

    Parameters
    ----------
    lengths : array-like of int
        Token count per example.
    batch_size : int
    shuffle : bool, default=False
        ``False`` (inference): sort all examples by length, longest first, so
        padding is minimal and memory problems show up in the first batch.
        ``True`` (training): like Hugging Face's ``LengthGroupedSampler``, shuffle,
        sort within random "megabatches" of ``megabatch_factor * batch_size``
        examples, then shuffle the batch order and the rows inside each batch
        (the ``half-det`` strategy splits a batch by row position, so rows must
        not be ordered by length).
    generator : numpy Generator, optional
        Required when ``shuffle=True``.
    megabatch_factor : int, default=50

    Returns
    -------
    list of ndarray of int64
    """
    lengths = np.asarray(lengths)
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    if not shuffle:
        order = np.argsort(-lengths, kind="stable")
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if generator is None:
        raise ValueError("length_grouped_batches(shuffle=True) needs a numpy generator.")
    perm = generator.permutation(len(lengths))
    mega = batch_size * megabatch_factor
    batches = []
    for start in range(0, len(perm), mega):
        chunk = perm[start : start + mega]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    order = generator.permutation(len(batches))
    return [generator.permutation(batches[i]) for i in order]


def iterate_batches(encoding: Encoding, batch_size: int, pad_token_id: int) -> Iterator[Batch]:
    """Yield inference batches of ``encoding`` grouped by length (longest first)."""
    for idx in length_grouped_batches(encoding.lengths, batch_size=batch_size):
        yield collate(encoding, idx, pad_token_id=pad_token_id)


# --------------------------------------------------------------------------- batch samplers


class _EpochBatchSampler:
    """A batch sampler over example lengths; each ``iter()`` is one epoch's batches from ``generator``."""

    def __init__(self, lengths: np.ndarray, batch_size: int, shuffle: bool, generator: np.random.Generator):
        self.lengths = np.asarray(lengths)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.generator = generator

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)


class LengthGroupedBatchSampler(_EpochBatchSampler):
    """Batch sampler over :func:`~fmmlearn.encoding.length_grouped_batches`.

    Each ``iter()`` (one per epoch) draws a new shuffle from the same generator,
    so epochs differ but the whole run is reproducible.
    """

    def __iter__(self):
        yield from length_grouped_batches(
            self.lengths, batch_size=self.batch_size, shuffle=self.shuffle, generator=self.generator
        )


class UniformBatchSampler(_EpochBatchSampler):
    """The reference's batch order: a fresh uniform permutation per epoch, cut into consecutive batches.

    Batch membership is independent of length (unlike
    :class:`LengthGroupedBatchSampler`); padding is still per batch.  Same
    constructor as :class:`LengthGroupedBatchSampler`; without ``shuffle``
    the examples come in input order.
    """

    def __iter__(self):
        n = len(self.lengths)
        order = self.generator.permutation(n) if self.shuffle else np.arange(n)
        for start in range(0, n, self.batch_size):
            yield order[start : start + self.batch_size]


@keyword_only
def training_batch_sampler(lengths, *, batch_size: int, generator: np.random.Generator, group_by_length: bool = True):
    """The batch sampler of masked fine-tuning, one ``iter()`` per epoch (shared with MaSF calibration).

    ``group_by_length=True`` draws length-grouped batches
    (:class:`LengthGroupedBatchSampler`, less padding); ``False`` draws
    uniformly shuffled ones like the paper's reference code
    (:class:`UniformBatchSampler`).  :func:`fmmlearn.ood.mask_like_training`
    calls this with the estimator's setting, so calibration batches are
    the training batches.
    """
    kind = LengthGroupedBatchSampler if group_by_length else UniformBatchSampler
    return kind(lengths, batch_size, shuffle=True, generator=generator)

"""Tokenization bookkeeping and length-grouped batching."""

import numpy as np
import pandas as pd
import pytest

from fmmlearn.encoding import (
    SEGMENT_A,
    SEGMENT_B,
    SEGMENT_NONE,
    collate,
    encode,
    length_grouped_batches,
    validate_texts,
)


def test_validate_accepts_lists_arrays_series_and_pairs():
    assert validate_texts(["a", "b"]) == (["a", "b"], False)
    assert validate_texts(np.array(["a", "b"])) == (["a", "b"], False)
    assert validate_texts(pd.Series(["a", "b"], index=[5, 9])) == (["a", "b"], False)
    assert validate_texts([("a", "b"), ["c", "d"]]) == ([("a", "b"), ("c", "d")], True)
    assert validate_texts(pd.DataFrame({"p": ["a"], "h": ["b"]})) == ([("a", "b")], True)
    assert validate_texts(np.array([["a", "b"]])) == ([("a", "b")], True)


@pytest.mark.parametrize(
    "X, error, match",
    [
        ([], ValueError, "X is empty"),
        ("just one string", TypeError, "single str"),
        (["ok", None], ValueError, r"X\[1\] is None"),
        (["ok", float("nan")], ValueError, r"X\[1\] is nan"),
        (["ok", 3], TypeError, r"X\[1\] is of type int"),
        ([("a", "b", "c")], ValueError, r"X\[0\] has 3 elements"),
        ([("a", "b"), "c"], ValueError, "do not mix"),
        ([("a", None)], ValueError, r"X\[0\]\[1\] is None"),
        (pd.DataFrame({"text": ["a"]}), ValueError, "1 column"),
        (pd.DataFrame({"a": ["a"], "b": ["b"], "c": ["c"]}), ValueError, "3 column"),
        (np.array([["a", "b", "c"]]), ValueError, r"shape \(1, 3\)"),
        (42, TypeError, "sequence"),
    ],
)
def test_validate_rejects_bad_input_with_a_named_item(X, error, match):
    with pytest.raises(error, match=match):
        validate_texts(X)


def test_encode_marks_specials_segments_words_and_offsets(bundled_tokenizer):
    texts = [("Hello [MASK] world, unbelievable!", "second seg here")]
    enc = encode(bundled_tokenizer, texts, is_pair=True, max_length=None)
    ids, special, seg = enc.input_ids[0], enc.special_tokens_mask[0], enc.segment_ids[0]
    tokens = bundled_tokenizer.convert_ids_to_tokens(ids.tolist())
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    # Special-ness comes from the tokenizer, so a literal [MASK] in the text is a normal token.
    assert special.tolist() == [t in ("[CLS]", "[SEP]") for t in tokens]
    assert tokens[2] == "[MASK]" and not special[2]
    assert set(seg[special]) == {SEGMENT_NONE}
    assert (seg[~special] >= 0).all() and seg.tolist().index(SEGMENT_B) > seg.tolist().index(SEGMENT_A)
    for pos in np.flatnonzero(~special):
        text = texts[0][seg[pos]]
        start, end = enc.offsets[0][pos]
        surface = text[start:end].lower()
        assert surface == tokens[pos].removeprefix("##").lower() or tokens[pos] == "[MASK]"
    # "unbelievable" is split into word pieces that share one word id.
    assert enc.word_ids[0][-1] == -1


def test_long_inputs_are_truncated_with_a_warning_that_counts_them(bundled_tokenizer):
    texts = ["short text", " ".join(["word"] * 50), " ".join(["other"] * 80)]
    with pytest.warns(UserWarning, match=r"2 of 3 input\(s\) are longer than max_length=16"):
        enc = encode(bundled_tokenizer, texts, is_pair=False, max_length=16)
    assert enc.truncated.tolist() == [False, True, True]
    assert enc.lengths.tolist()[1:] == [16, 16]
    assert bundled_tokenizer.convert_ids_to_tokens([int(enc.input_ids[1][-1])]) == ["[SEP]"]


def test_pairs_are_truncated_longest_segment_first(bundled_tokenizer):
    pair = [(" ".join(["long"] * 40), "short question")]
    with pytest.warns(UserWarning, match="truncated"):
        enc = encode(bundled_tokenizer, pair, is_pair=True, max_length=20)
    seg = enc.segment_ids[0]
    assert (seg == SEGMENT_B).sum() == 2 and len(seg) == 20


def test_collate_pads_dynamically_and_keeps_the_caller_index(bundled_tokenizer):
    enc = encode(bundled_tokenizer, ["a", "a b c d", "a b"], is_pair=False, max_length=None)
    batch = collate(enc, [2, 0], pad_token_id=bundled_tokenizer.pad_token_id)
    assert batch.input_ids.shape == (2, 4)  # longest of the two, not of the dataset
    assert batch.index.tolist() == [2, 0]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert batch.special_tokens_mask[1].tolist() == [True, False, True, True]
    assert batch.segment_ids[1, 3].item() == SEGMENT_NONE
    assert batch.input_ids[1, 3].item() == bundled_tokenizer.pad_token_id


@pytest.mark.parametrize("shuffle", [False, True])
def test_length_grouped_batches_cover_every_index_once(shuffle):
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 200, size=1000)
    batches = length_grouped_batches(lengths, batch_size=16, shuffle=shuffle, generator=np.random.default_rng(1))
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(1000))
    assert all(len(b) <= 16 for b in batches)
    # Grouping keeps padding far below that of random batches.
    waste = sum(lengths[b].max() * len(b) - lengths[b].sum() for b in batches)
    random_waste = sum(lengths[b].max() * len(b) - lengths[b].sum() for b in np.array_split(rng.permutation(1000), 63))
    assert waste < 0.25 * random_waste


def test_inference_batches_run_longest_first():
    batches = length_grouped_batches([3, 9, 5, 7], batch_size=2)
    assert [b.tolist() for b in batches] == [[1, 3], [2, 0]]


def test_shuffled_batches_differ_per_epoch_but_are_reproducible():
    lengths = np.arange(100)
    a = length_grouped_batches(lengths, batch_size=8, shuffle=True, generator=np.random.default_rng(3))
    b = length_grouped_batches(lengths, batch_size=8, shuffle=True, generator=np.random.default_rng(3))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    gen = np.random.default_rng(3)
    first, second = (length_grouped_batches(lengths, batch_size=8, shuffle=True, generator=gen) for _ in range(2))
    assert not all(np.array_equal(x, y) for x, y in zip(first, second))


def test_rows_inside_a_training_batch_are_not_length_ordered():
    # half-det masks the second half of each batch by position; rows sorted by
    # length would make the masked half systematically shorter.
    lengths = np.arange(1000)
    batches = length_grouped_batches(lengths, batch_size=16, shuffle=True, generator=np.random.default_rng(0))
    sorted_rows = sum(np.all(np.diff(lengths[b]) <= 0) for b in batches if len(b) == 16)
    assert sorted_rows < 3


def test_bad_batch_size_is_rejected():
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        length_grouped_batches([1, 2], batch_size=0)

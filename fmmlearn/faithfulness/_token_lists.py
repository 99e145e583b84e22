"""Importances given as token lists (ferret-style), aligned to a classifier's tokenization.

ferret's explanations carry the tokens they score (``Explanation.tokens`` and
``Explanation.scores``, special tokens included).  To score them here, every
token list must be the classifier's own tokenization of the same text, with or
without its special tokens: tokens are matched by string and order, never by
decoding and re-tokenizing.  A mismatch is an error that names the example and
the first token that differs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["is_token_list_form", "token_list_scores"]

_FRAME_COLUMNS = ("example", "token", "importance")


def _is_token_pair(item) -> bool:
    """``(tokens, scores)`` with ``tokens`` a sequence of str."""
    if not (isinstance(item, (tuple, list)) and len(item) == 2):
        return False
    tokens = item[0]
    return (isinstance(tokens, Sequence) and not isinstance(tokens, str)
            and all(isinstance(t, str) for t in tokens))


def _has_tokens(item) -> bool:
    """An object with ``tokens`` and ``scores`` (ferret's ``Explanation``)."""
    return hasattr(item, "tokens") and hasattr(item, "scores")


def is_token_list_form(importances) -> bool:
    """Whether ``importances`` holds token lists (a frame without positions, explanations, or pairs)."""
    if isinstance(importances, pd.DataFrame):
        return "position" not in importances.columns and "token" in importances.columns
    if isinstance(importances, (list, tuple)) and len(importances):
        first = importances[0]
        return _has_tokens(first) or _is_token_pair(first)
    return False


def _per_example_lists(importances, n_examples: int) -> list:
    """``[(tokens, scores)]`` per example, from any of the token-list forms."""
    if isinstance(importances, pd.DataFrame):
        missing = set(_FRAME_COLUMNS) - set(importances.columns)
        if missing:
            raise ValueError(f"importances DataFrame lacks column(s) {sorted(missing)}; a token-list frame needs "
                             "example, token, importance (or the long frame of explain(), with position).")
        example = pd.to_numeric(importances["example"], errors="coerce").to_numpy()
        outside = sorted({e for e in example.tolist() if not (e == e and 0 <= e < n_examples and e == int(e))},
                         key=str)
        if outside:
            raise ValueError(f"importances DataFrame has example value(s) {outside[:5]} outside 0..{n_examples - 1} "
                             "(the positions of X).")
        groups = {int(e): rows for e, rows in importances.groupby(example.astype(np.int64), sort=True)}
        absent = [i for i in range(n_examples) if i not in groups]
        if absent:
            raise ValueError(f"importances DataFrame has no tokens for example(s) {absent[:5]}; give one row per "
                             "token of every example of X.")
        return [(groups[i]["token"].astype(str).tolist(), groups[i]["importance"].to_numpy())
                for i in range(n_examples)]
    if len(importances) != n_examples:
        raise ValueError(f"importances has {len(importances)} entries but X has {n_examples} examples.")
    out = []
    for i, item in enumerate(importances):
        if _has_tokens(item):
            out.append((list(item.tokens), item.scores))
        elif _is_token_pair(item):
            out.append((list(item[0]), item[1]))
        else:
            raise TypeError(f"importances[{i}] is a {type(item).__name__}; importances[0] makes importances a "
                            "list of token lists, so every entry must be a (tokens, scores) pair or an object "
                            "with .tokens and .scores (a ferret Explanation).")
    return out


def _first_difference(given: list, reference: list) -> int:
    for j, (a, b) in enumerate(zip(given, reference)):
        if a != b:
            return j
    return min(len(given), len(reference))


def _align_one(i: int, tokens: list, scores, model_tokens: list, special: np.ndarray) -> np.ndarray:
    """Scores at the model's positions (NaN where none was given) for one example."""
    tokens = [str(t) for t in tokens]
    try:
        values = np.asarray(scores, dtype=np.float64).ravel()
    except (TypeError, ValueError) as error:
        raise ValueError(f"importances: the scores of example {i} are not numbers ({error}).") from None
    if len(values) != len(tokens):
        raise ValueError(f"importances: example {i} has {len(tokens)} tokens but {len(values)} scores.")
    out = np.full(len(model_tokens), np.nan)
    plain = np.flatnonzero(~special)
    plain_tokens = [model_tokens[p] for p in plain]
    if tokens == model_tokens:
        out[:] = values
        return out
    if tokens == plain_tokens:
        out[plain] = values
        return out
    # Report against the form the list seems to follow: with special tokens if it starts like the model's.
    with_special = bool(len(tokens)) and bool(special[0]) and tokens[0] == model_tokens[0]
    reference, positions = (model_tokens, np.arange(len(model_tokens))) if with_special else (plain_tokens, plain)
    j = _first_difference(tokens, reference)
    if j >= len(tokens) or j >= len(reference):
        detail = f"it has {len(tokens)} tokens where the model's tokenizer gives {len(reference)}"
    else:
        detail = (f"token {j} is {tokens[j]!r} where the model's tokenizer gives {reference[j]!r} "
                  f"(position {positions[j]} of clf.encode(X).input_ids[{i}])")
    shown = reference[max(0, j - 2): j + 3]
    raise ValueError(f"importances: the tokens of example {i} do not match the classifier's tokenization: "
                     f"{detail}; the model's tokens around there are {shown}. Token lists must come from the "
                     "classifier's own tokenizer (clf.tokenizer_), with or without its special tokens.")


def token_list_scores(importances, encoding, tokenizer) -> list:
    """Scores of token-list importances at the encoding's positions, one float64 array per example.

    Parameters
    ----------
    importances : DataFrame, list of Explanation, or list of (tokens, scores)
        A frame with columns ``example``, ``token``, ``importance`` (tokens
        of an example in order); objects with ``tokens`` and ``scores`` (such
        as ferret's ``Explanation``); or ``(tokens, scores)`` pairs.  Each
        token list is the tokenization of the example, with or without the
        special tokens.
    encoding : Encoding
    tokenizer : transformers tokenizer
        The classifier's (``clf.tokenizer_``).

    Returns
    -------
    list of ndarray of float64
        NaN at positions the list does not score (special tokens when the
        list has none).

    Raises
    ------
    ValueError
        Naming the first example and token where the lists and the
        tokenization differ, or a missing example.
    """
    lists = _per_example_lists(importances, len(encoding))
    return [_align_one(i, tokens, scores, tokenizer.convert_ids_to_tokens(ids.tolist()), special)
            for i, ((tokens, scores), ids, special)
            in enumerate(zip(lists, encoding.input_ids, encoding.special_tokens_mask))]

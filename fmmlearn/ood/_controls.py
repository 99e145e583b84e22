"""Controls of an in-distribution test: inputs it must flag, built from the test texts (docs/ood.md).

* The **matched positive control** asks the question the test is used for.  Masked fine-tuning
  claims that the model's own mask token no longer shifts its representations; a token the model
  never saw in fine-tuning, put at the very same positions, should.  So the control is the masked
  test set with every mask token replaced by a *placeholder*: an unused vocabulary entry where the
  vocabulary has one (BERT's ``[unused0]``), else a token at the mean input embedding (as the mask
  token fmmlearn adds to decoders starts out).  A test's flagged share on it is its power against
  exactly the shift it must rule out.
* **Random tokens**: every maskable token replaced by a random vocabulary token (a gross shift,
  reported beside the matched control).

Another domain's texts (e.g. news articles fed to a tweet classifier) need no construction: they
are scored as they are.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

import numpy as np
import torch
from ..utils import keyword_only

__all__ = ["PLACEHOLDERS", "Placeholder", "placeholder_ids", "placeholder_inputs", "random_token_ids",
           "resolve_placeholder"]

#: Kinds of placeholder token: ``"auto"`` (an unused vocabulary entry where there is one, else the
#: mean embedding), ``"unused"`` and ``"mean-embedding"``.
PLACEHOLDERS = ("auto", "unused", "mean-embedding")

# Vocabulary entries reserved and never trained: BERT's "[unused12]", Gemma's "<unused3>", Llama 3's
# "<|reserved_special_token_7|>".
_UNUSED = re.compile(r"^(\[unused\d+\]|<unused\d+>|<\|reserved_special_token_\d+\|>)$")


@dataclass(frozen=True)
class Placeholder:
    """The token a matched positive control puts where the mask token was.

    Parameters
    ----------
    kind : {"unused", "mean-embedding"}
        An unused vocabulary entry, or a token at the mean input embedding.
    token_id : int
        ``"unused"``: the vocabulary id put in.  ``"mean-embedding"``: the mask token's id, whose
        embedding is swapped for the mean input embedding while the control runs
        (:func:`placeholder_inputs`).
    token : str
        The token's text, for reports.
    """

    kind: str
    token_id: int
    token: str

    def describe(self) -> str:
        """Plain words for reports.

        Returns
        -------
        str
        """
        if self.kind == "unused":
            return f"an unused vocabulary entry ({self.token})"
        return "a token at the mean input embedding"


@keyword_only
def resolve_placeholder(clf, *, kind: str = "auto") -> Placeholder:
    """The placeholder of ``clf``'s matched positive control.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    kind : {"auto", "unused", "mean-embedding"}, default="auto"
        ``"auto"``: the first unused vocabulary entry (which no text ever tokenizes to, so fine-tuning
        never saw it) where the vocabulary has one, else ``"mean-embedding"``.

    Returns
    -------
    Placeholder

    Raises
    ------
    ValueError
        For ``kind="unused"`` with a vocabulary that has no unused entry, or an unknown kind.
    """
    if kind not in PLACEHOLDERS:
        raise ValueError(f"placeholder must be one of {list(PLACEHOLDERS)}, got {kind!r}.")
    tokenizer = clf.tokenizer_
    if kind in ("auto", "unused"):
        special = set(tokenizer.all_special_ids)
        unused = sorted((i, t) for t, i in tokenizer.get_vocab().items() if _UNUSED.match(t) and i not in special)
        if unused:
            return Placeholder("unused", int(unused[0][0]), unused[0][1])
        if kind == "unused":
            raise ValueError(f"placeholder='unused': the vocabulary of {type(tokenizer).__name__} has no unused "
                             "entry ([unusedN], <unusedN>, <|reserved_special_token_N|>); use 'mean-embedding'.")
    return Placeholder("mean-embedding", int(tokenizer.mask_token_id), "mean embedding")


@keyword_only
def placeholder_ids(masked_ids, original_ids, *, mask_token_id: int, placeholder: Placeholder) -> list:
    """Per example, ``masked_ids`` with every token masked by the masking put back as the placeholder.

    Positions whose original token already was the mask token are left alone, so the control
    changes exactly the positions the masking changed.

    Parameters
    ----------
    masked_ids, original_ids : sequence of ndarray
        Per example, the masked and the original ids (equal lengths).
    mask_token_id : int
    placeholder : Placeholder

    Returns
    -------
    list of ndarray of int64
    """
    out = []
    for masked, original in zip(masked_ids, original_ids):
        masked, original = np.asarray(masked), np.asarray(original)
        changed = (masked == mask_token_id) & (original != mask_token_id)
        out.append(np.where(changed, placeholder.token_id, masked).astype(np.int64))
    return out


@keyword_only
@contextlib.contextmanager
def placeholder_inputs(model, *, placeholder: Placeholder):
    """Within the block, ``model`` embeds the placeholder as the mean input embedding (``"mean-embedding"`` only).

    A forward hook on the input embedding swaps the rows of ``placeholder.token_id`` for the mean of
    the embedding matrix; the model's weights are never changed.  For ``"unused"`` placeholders the
    block does nothing.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The classifier's model (``clf.model_``).
    placeholder : Placeholder
        From :func:`resolve_placeholder`.

    Yields
    ------
    None
    """
    if placeholder.kind != "mean-embedding":
        yield
        return
    table = model.get_input_embeddings()
    with torch.no_grad():
        mean = _embedding_weight(table).float().mean(dim=0)

    def swap(module, args, output):
        ids = args[0] if args else None
        if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
            return None  # called with embeddings, not ids: nothing to swap
        hit = (ids == placeholder.token_id)[..., None]
        return torch.where(hit, mean.to(device=output.device, dtype=output.dtype), output)

    handle = table.register_forward_hook(swap)
    try:
        yield
    finally:
        handle.remove()


def _embedding_weight(table) -> torch.Tensor:
    weight = getattr(table, "weight", None)
    if isinstance(weight, torch.Tensor):
        return weight
    return next(m for m in table.modules() if isinstance(m, torch.nn.Embedding)).weight


@keyword_only
def random_token_ids(clf, encoding, *, seed: int, segment: str) -> list:
    """Per example, its ids with every maskable token replaced by a random non-special vocabulary token.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted (its tokenizer gives the vocabulary and the special ids).
    encoding : Encoding
    seed : int
    segment : {"first", "all"}
        Which tokens are maskable (docs/faithfulness.md).

    Returns
    -------
    list of ndarray of int64
    """
    from ..encoding import collate
    from ..masking import eligible_positions

    batch = collate(encoding, np.arange(len(encoding)), pad_token_id=clf.tokenizer_.pad_token_id)
    eligible = eligible_positions(batch, segment=segment)
    special = set(clf.tokenizer_.all_special_ids)
    vocabulary = torch.tensor([i for i in range(len(clf.tokenizer_)) if i not in special])
    rng = torch.Generator().manual_seed(int(seed))
    draws = vocabulary[torch.randint(len(vocabulary), batch.input_ids.shape, generator=rng)]
    ids = torch.where(eligible, draws, batch.input_ids).numpy()
    return [ids[i, :n] for i, n in enumerate(encoding.lengths)]

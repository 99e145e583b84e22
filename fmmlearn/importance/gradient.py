"""Gradient measures: ``grad-l2``, ``grad-l1``, ``inp-grad-sign``, ``inp-grad-abs`` (docs/explain.md).

All four need ``g_t = d f_y / d e_t``, the gradient of the target logit with
respect to the word embedding of token ``t``, from one forward and one
backward pass.  The gradient with respect to the one-hot input is ``E g_t``
(``V`` entries per token); it is never materialised: its L2 norm comes from
the ``H x H`` Gram matrix, its L1 norm from a loop over vocabulary chunks.
"""

from __future__ import annotations

import weakref

import torch

from ..modeling import embedding_matrix
from ._utils import Problem, embed, weighted_gradients

__all__ = ["embedding_gradients", "gradient_norm", "input_x_gradient"]

# Gram matrices E^T E by id of their owner (the embedding weight, or the
# embedding module whose parameters make E): (weak reference, versions, Gram).
# A version counter moves on every in-place update (an optimiser step), which
# invalidates the entry; a finalizer drops it with the owner.  (A
# WeakKeyDictionary would compare tensors with ``==`` on hash collisions.)
_GRAM_CACHE: dict[int, tuple] = {}

#: Elements of one (tokens x vocabulary chunk) block in ``grad-l1`` (4 MiB in fp32).
L1_BLOCK_ELEMENTS = 2**20


def embedding_gradients(problem: Problem) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings ``e`` and target-logit gradients ``g`` of every token.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    e, g : Tensor (B, T, H)
    """
    ids = problem.batch.input_ids
    e = embed(problem.model, ids)
    rows = torch.arange(ids.shape[0], device=problem.device)
    ones = torch.ones(ids.shape[0], device=problem.device)
    g = weighted_gradients(problem, rows, ones, lambda r, ex, width: e[ex, :width])
    return e, g


def _versions(owner) -> tuple:
    if isinstance(owner, torch.Tensor):
        return (owner._version,)
    return tuple((id(p), p._version) for p in owner.parameters())


def _gram(owner, matrix=None) -> torch.Tensor:
    """``E^T E``, cached per ``owner`` until it changes in place.

    ``owner`` is the matrix ``E`` itself, or the embedding module whose
    parameters make it, with ``matrix()`` building ``E`` (a peft wrapper merges
    its trained rows into a new tensor on every call, so that tensor cannot key
    the cache).
    """
    key, versions = id(owner), _versions(owner)
    cached = _GRAM_CACHE.get(key)
    if cached is not None and cached[0]() is owner and cached[1] == versions:
        return cached[2]
    w = (owner if matrix is None else matrix()).detach()
    gram = w.T @ w
    if cached is None or cached[0]() is not owner:
        weakref.finalize(owner, _GRAM_CACHE.pop, key, None)
    _GRAM_CACHE[key] = (weakref.ref(owner), versions, gram)
    return gram


def _l1_norms(g: torch.Tensor, weight: torch.Tensor, block_elements: int) -> torch.Tensor:
    """``sum_v |E_v . g_n|`` for rows ``g`` (N, H), one vocabulary chunk at a time."""
    out = torch.zeros(g.shape[0], dtype=g.dtype, device=g.device)
    chunk = max(1, block_elements // max(1, g.shape[0]))
    for start in range(0, weight.shape[0], chunk):
        out += (g @ weight[start : start + chunk].T).abs_().sum(dim=1)
    return out


def gradient_norm(problem: Problem, *, norm: str, block_elements: int = L1_BLOCK_ELEMENTS) -> torch.Tensor:
    """``grad-l2`` / ``grad-l1``: the norm of the gradient w.r.t. the one-hot input, ``||E g_t||``.

    Parameters
    ----------
    problem : Problem
    norm : {"l2", "l1"}
        Fixed by the measure's name.
    block_elements : int, default=2**20
        ``grad-l1`` only: size of the largest (tokens x vocabulary) block held
        at once; bounds the extra memory (4 MiB in fp32).

    Returns
    -------
    Tensor (B, T)
    """
    if not isinstance(block_elements, int) or block_elements < 1:
        raise ValueError(f"block_elements must be a positive integer, got {block_elements!r}.")
    _, g = embedding_gradients(problem)
    if norm == "l2":
        # ||E g||^2 = g^T (E^T E) g; clamp tiny negative round-off before the root.
        gram = _gram(problem.model.get_input_embeddings(), lambda: embedding_matrix(problem.model)).to(g.dtype)
        return ((g @ gram) * g).sum(dim=-1).clamp_min(0).sqrt()
    # Only the explained tokens are worth the O(V H) work per token.
    weight = embedding_matrix(problem.model).detach()
    scores = torch.zeros(g.shape[:2], dtype=g.dtype, device=g.device)
    scores[problem.eligible] = _l1_norms(g[problem.eligible], weight.to(g.dtype), block_elements)
    return scores


def input_x_gradient(problem: Problem, *, absolute: bool) -> torch.Tensor:
    """``inp-grad-sign`` / ``inp-grad-abs``: ``e_t . g_t`` (one-hot input times gradient).

    Parameters
    ----------
    problem : Problem
    absolute : bool
        Fixed by the measure's name.

    Returns
    -------
    Tensor (B, T)
    """
    e, g = embedding_gradients(problem)
    scores = (e.to(g.dtype) * g).sum(dim=-1)
    return scores.abs() if absolute else scores

"""Beam search over masking orders: ``beam-sign-K`` (docs/explain.md).

A state is the set of masked positions together with the order they were
masked in; its score is ``S = sum_j [f_y(x) - f_y(x with the first j masked)]``,
the discrete area between the clean target logit and the logit along the
masking path.  Each iteration expands every state of the beam by every
still-unmasked position, keeps the first child per mask *set* (parents are
visited best first, so that child inherits the best score), evaluates all
children and keeps the ``K`` best (stable sort: ties keep generation order).
After ``n`` iterations the surviving order gives ranks ``n, n-1, ..., 1``.
Examples are searched independently (each gets its own ranks; the reference
code interleaved the ranks of equally long examples) but their children are
evaluated together in shared forward chunks.
"""

from __future__ import annotations

import torch

from ._utils import Problem, evaluate_rows

__all__ = ["beam_search", "beam_search_orders"]


def _expand(beam: list, candidates: list) -> list:
    """Children of every state of ``beam`` (best first), one per new mask set, in generation order."""
    children, seen = [], set()
    for key, order, score in beam:
        for j, position in enumerate(candidates):
            child = key | (1 << j)
            if child == key or child in seen:
                continue
            seen.add(child)
            children.append((child, order + (position,), score))
    return children


def beam_search_orders(problem: Problem, beam_size: int) -> list[tuple[tuple, float]]:
    """The best masking order found per example, with its area score ``S``.

    Parameters
    ----------
    problem : Problem
    beam_size : int

    Returns
    -------
    list of (order, score)
        ``order``: positions in masking order (eligible, not already masked).
    """
    ids = problem.batch.input_ids
    n_examples = ids.shape[0]
    free = problem.eligible & (ids != problem.mask_token_id)
    candidates = [torch.nonzero(free[i])[:, 0].tolist() for i in range(n_examples)]
    rows = torch.arange(n_examples, device=ids.device)
    clean = evaluate_rows(problem, rows, lambda r, ex, width: ids[ex, :width]).tolist()
    # A state is (bit set over the example's candidates, order, score).
    beams = [[(0, (), 0.0)] for _ in range(n_examples)]
    for step in range(1, max(map(len, candidates), default=0) + 1):
        active = [i for i in range(n_examples) if len(candidates[i]) >= step]
        children = {i: _expand(beams[i], candidates[i]) for i in active}
        flat = [(i, c) for i in active for c in children[i]]
        example_of_row = torch.tensor([i for i, _ in flat], device=ids.device)
        masked = torch.tensor([c[1] for _, c in flat], device=ids.device).reshape(len(flat), step)

        def make_ids(r, ex, width):
            return ids[ex, :width].clone().scatter_(1, masked[r], problem.mask_token_id)

        logits = iter(evaluate_rows(problem, example_of_row, make_ids).tolist())
        for i in active:
            scored = [(key, order, score + clean[i] - next(logits)) for key, order, score in children[i]]
            scored.sort(key=lambda state: -state[2])  # list.sort is stable: ties keep generation order
            beams[i] = scored[:beam_size]
    return [(beam[0][1], beam[0][2]) for beam in beams]


def beam_search(problem: Problem, *, beam_size: int) -> torch.Tensor:
    """``beam-sign-K``: rank ``n`` for the first token of the best masking order, ``1`` for the last.

    Parameters
    ----------
    problem : Problem
    beam_size : int
        Fixed by the name (``beam-sign-10`` has ``beam_size=10``).

    Returns
    -------
    FloatTensor (B, T)
        0 at non-eligible and already-masked positions.
    """
    scores = torch.zeros(problem.batch.input_ids.shape, device=problem.device)
    for i, (order, _) in enumerate(beam_search_orders(problem, beam_size)):
        if order:
            ranks = torch.arange(len(order), 0, -1, dtype=scores.dtype, device=scores.device)
            scores[i, torch.tensor(order, device=scores.device)] = ranks
    return scores

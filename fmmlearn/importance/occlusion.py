"""Leave-one-out by masking: ``loo-sign``, ``loo-abs`` (docs/explain.md).

``score_t = f_y(x) - f_y(x with x_t := [MASK])``: the token is *replaced* by
the mask token, never deleted, so positions and length stay as they are.  All
copies of all examples of the batch (one clean copy each, plus one per
explained token) are evaluated together in forward-only chunks.
"""

from __future__ import annotations

import torch

from ._utils import Problem, evaluate_rows

__all__ = ["leave_one_out"]


def leave_one_out(problem: Problem, *, absolute: bool) -> torch.Tensor:
    """Leave-one-out importance of every eligible token not already masked.

    Tokens that already hold the mask token score 0 without evaluation (masking
    them again changes nothing).  Cost: ``n + 1`` forward passes per example.

    Parameters
    ----------
    problem : Problem
    absolute : bool
        Fixed by the name (``loo-abs``).

    Returns
    -------
    FloatTensor (B, T)
    """
    ids = problem.batch.input_ids
    n_examples = ids.shape[0]
    examples, positions = torch.nonzero(problem.eligible & (ids != problem.mask_token_id), as_tuple=True)
    # Rows 0..B-1 are the clean inputs (position -1), then one row per occluded token.
    example_of_row = torch.cat([torch.arange(n_examples, device=ids.device), examples])
    position_of_row = torch.cat([torch.full((n_examples,), -1, device=ids.device), positions])

    def make_ids(rows, row_examples, width):
        out = ids[row_examples, :width].clone()
        pos = position_of_row[rows]
        hit = pos >= 0
        out[hit.nonzero()[:, 0], pos[hit]] = problem.mask_token_id
        return out

    logits = evaluate_rows(problem, example_of_row, make_ids)
    scores = torch.zeros(ids.shape, dtype=logits.dtype, device=ids.device)
    scores[examples, positions] = logits[:n_examples][examples] - logits[n_examples:]
    return scores.abs() if absolute else scores

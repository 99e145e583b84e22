"""``rand``: the random baseline explanation (docs/explain.md)."""

from __future__ import annotations

import torch

from ._utils import Problem

__all__ = ["uniform"]


def uniform(problem: Problem) -> torch.Tensor:
    """I.i.d. ``Uniform[0, 1)`` scores, drawn from ``problem.generator``.

    Drawn on the generator's device, so the same seed gives the same scores on
    CPU and GPU runs.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    FloatTensor (B, T)
    """
    generator = problem.generator
    device = generator.device if generator is not None else problem.device
    scores = torch.rand(problem.eligible.shape, generator=generator, device=device)
    return scores.to(problem.device)

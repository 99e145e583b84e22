"""Integrated gradients: ``int-grad-sign``, ``int-grad-abs`` (docs/explain.md).

Standard IG (the default) attributes ``f_y(x) - f_y(baseline)`` to the tokens:

    score_t = (e_t - b_t) . sum_k w_k grad_{z_t} f_y(b + s_k (e - b))

and satisfies completeness (the scores sum to that difference as the number of
steps grows).  Which positions are interpolated is a choice: by default only
the explained (eligible) positions move from the baseline to their embedding,
while special tokens, padding and unexplained segments keep their own
embeddings, so the input stays a well-formed sequence along the path and
completeness holds for exactly the positions that receive scores.  The paper
interpolated every position ("all").  ``variant="reference"`` reproduces the
reference code's non-standard formula (an extra factor ``s_k``, times ``e_t``
instead of ``e_t - b_t``), for parity only.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from ..modeling import base_embedding
from ._utils import Problem, embed, weighted_gradients

__all__ = ["RULES", "check_params", "integrated_gradients", "path_points"]

#: Quadrature rules over the path parameter ``s`` in [0, 1] (Captum's names).
RULES = ("riemann_right", "riemann_left", "riemann_middle", "riemann_trapezoid", "gausslegendre")
BASELINES = ("pad", "mask", "zero")
VARIANTS = ("standard", "reference")
BASELINE_POSITIONS = ("eligible", "all")


def check_params(*, absolute=False, n_steps=20, baseline="pad", rule="riemann_right", variant="standard",
                 baseline_positions=None, pad_token_id=None):
    """Raise ``ValueError`` for invalid integrated-gradients parameters (see :func:`integrated_gradients`)."""
    if isinstance(n_steps, bool) or not isinstance(n_steps, numbers.Integral) or n_steps < 1:
        raise ValueError(f"n_steps must be an integer >= 1, got {n_steps!r}.")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}.")
    if rule == "riemann_trapezoid" and n_steps < 2:
        raise ValueError(f"rule='riemann_trapezoid' needs n_steps >= 2, got {n_steps}.")
    if not (baseline in BASELINES or (isinstance(baseline, numbers.Integral) and not isinstance(baseline, bool))):
        raise ValueError(f"baseline must be one of {BASELINES} or a token id, got {baseline!r}.")
    if isinstance(baseline, numbers.Integral) and baseline < 0:
        raise ValueError(f"baseline={baseline} is not a token id: ids are >= 0.")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}.")
    if baseline_positions is not None and baseline_positions not in BASELINE_POSITIONS:
        raise ValueError(f"baseline_positions must be one of {BASELINE_POSITIONS} or None, got {baseline_positions!r}.")


def path_points(n_steps: int, rule: str = "riemann_right") -> tuple[np.ndarray, np.ndarray]:
    """Points ``s_k`` in [0, 1] and weights ``w_k`` (summing to 1) of a quadrature rule.

    Parameters
    ----------
    n_steps : int
    rule : str, default="riemann_right"
        One of :data:`RULES`; ``"riemann_right"`` (``s_k = k / K``) is the paper's.

    Returns
    -------
    points, weights : ndarray of float64, shape (n_steps,)
    """
    k = np.arange(1, n_steps + 1, dtype=np.float64)
    uniform = np.full(n_steps, 1.0 / n_steps)
    if rule == "riemann_right":
        return k / n_steps, uniform
    if rule == "riemann_left":
        return (k - 1) / n_steps, uniform
    if rule == "riemann_middle":
        return (k - 0.5) / n_steps, uniform
    if rule == "riemann_trapezoid":
        weights = np.full(n_steps, 1.0 / (n_steps - 1))
        weights[[0, -1]] /= 2
        return np.linspace(0.0, 1.0, n_steps), weights
    nodes, weights = np.polynomial.legendre.leggauss(n_steps)
    return (nodes + 1) / 2, weights / 2


def _checked_token_id(token: int, vocab_size: int) -> int:
    """``token`` if the embedding table has a row for it, else a ``ValueError`` naming ``baseline``."""
    if not 0 <= token < vocab_size:
        raise ValueError(f"baseline={token} is not a token id of the model: its embeddings hold ids 0 to "
                         f"{vocab_size - 1}.")
    return token


def _baseline_vector(problem: Problem, baseline, pad_token_id) -> torch.Tensor:
    weight = base_embedding(problem.model).weight  # its shape, dtype and device only
    if baseline == "zero":
        return torch.zeros(weight.shape[1], dtype=weight.dtype, device=weight.device)
    if baseline == "mask":
        token = problem.mask_token_id
    elif baseline == "pad":
        token = pad_token_id if pad_token_id is not None else getattr(
            getattr(problem.model, "config", None), "pad_token_id", None)
        if token is None:
            raise ValueError("baseline='pad' needs the padding token id: the model config has no "
                             "pad_token_id, so pass pad_token_id=...")
    else:
        token = _checked_token_id(int(baseline), weight.shape[0])
    ids = torch.tensor([token], device=problem.device)
    return embed(problem.model, ids)[0]


def integrated_gradients(
    problem: Problem,
    *,
    absolute: bool,
    n_steps: int = 20,
    baseline="pad",
    rule: str = "riemann_right",
    variant: str = "standard",
    baseline_positions: str | None = None,
    pad_token_id: int | None = None,
) -> torch.Tensor:
    """Integrated gradients of the target logit w.r.t. the word embeddings.

    Parameters
    ----------
    problem : Problem
    absolute : bool
        Fixed by the name (``int-grad-abs``).
    n_steps : int, default=20
        Number of path points ``K`` (the paper's 20).
    baseline : {"pad", "mask", "zero"} or int, default="pad"
        Embedding the path starts from: the padding token's (the paper), the
        mask token's, the zero vector, or the embedding of a given token id.
    rule : str, default="riemann_right"
        Quadrature over the path, one of :data:`RULES`; ``"gausslegendre"``
        converges much faster for the same ``n_steps``.
    variant : {"standard", "reference"}, default="standard"
        ``"reference"``: the reference code's formula
        ``(1/K) sum_k s_k grad f(z_k) . e_t`` (no completeness; parity only).
    baseline_positions : {"eligible", "all"} or None
        Which positions start at the baseline: only the explained ones
        (default for the standard variant) or every position, special tokens
        and padding included (the paper; default for ``variant="reference"``).
    pad_token_id : int, optional
        For ``baseline="pad"`` when the model config does not name one.

    Returns
    -------
    Tensor (B, T)
    """
    check_params(n_steps=n_steps, baseline=baseline, rule=rule, variant=variant,
                 baseline_positions=baseline_positions, pad_token_id=pad_token_id)
    if baseline_positions is None:
        baseline_positions = "all" if variant == "reference" else "eligible"
    ids = problem.batch.input_ids
    e = embed(problem.model, ids)
    moving = problem.eligible if baseline_positions == "eligible" else torch.ones_like(problem.eligible)
    b = torch.where(moving[..., None], _baseline_vector(problem, baseline, pad_token_id), e)

    points, weights = path_points(n_steps, rule)
    if variant == "reference":
        weights = weights * points  # d z / d e = s_k: the reference differentiates w.r.t. e
    points = torch.as_tensor(points, dtype=e.dtype, device=problem.device)
    # Row r = (example r // K, step r % K): an example's steps are adjacent, so
    # chunks hold few distinct lengths.
    example_of_row = torch.arange(ids.shape[0], device=problem.device).repeat_interleave(n_steps)
    step_of_row = torch.arange(n_steps, device=problem.device).repeat(ids.shape[0])
    weight_of_row = torch.as_tensor(weights, device=problem.device)[step_of_row]

    def path(rows, examples, width):
        s = points[step_of_row[rows]][:, None, None]
        base = b[examples, :width]
        return base + s * (e[examples, :width] - base)

    grads = weighted_gradients(problem, example_of_row, weight_of_row, path)
    delta = e if variant == "reference" else e - b
    scores = (delta.to(grads.dtype) * grads).sum(dim=-1)
    return scores.abs() if absolute else scores

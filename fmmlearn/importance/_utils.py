"""Shared machinery of the importance measures.

Every measure receives a :class:`Problem` (model, batch, target classes,
eligible positions and the knobs common to all measures) and evaluates the
model on *rows*: copies of the batch's examples, each with its own ids or
embeddings (a masked copy for leave-one-out, an interpolation step for
integrated gradients).  :func:`plan_chunks` packs the rows into forward
passes longest first, by exact length across examples (no padding inside a
pass) wherever a length has enough rows, so short examples are never run at
the batch's padded width; the size of a pass is ``internal_batch_size`` rows,
or, by default, the number of tokens a one-off probe found fastest
(:func:`fmmlearn.modeling.tokens_per_forward`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from ..encoding import Batch
from ..modeling import autocast, base_embedding, eval_mode, logits_of, run_in_batches, tokens_per_forward

__all__ = [
    "Problem",
    "embed",
    "evaluate_rows",
    "gradient_mode",
    "inference_context",
    "model_kwargs",
    "plan_chunks",
    "weighted_gradients",
]


@dataclass(frozen=True)
class Problem:
    """What every importance measure receives.

    Attributes
    ----------
    model : torch.nn.Module
        Has ``get_input_embeddings()`` and accepts ``input_ids=`` or
        ``inputs_embeds=`` plus ``attention_mask=`` (and ``token_type_ids=``
        when the batch has them).
    batch : fmmlearn.encoding.Batch
    target : LongTensor (B,)
        Class index whose logit is explained, per example.
    eligible : BoolTensor (B, T)
        Positions that may be explained (and masked).
    mask_token_id : int
    generator : torch.Generator or None
    autocast_dtype : torch.dtype or None
    internal_batch_size : int or None
        Rows (example copies) per forward pass; ``None``: as many rows as
        fill the probed number of tokens per pass (:meth:`rows_per_forward`).
    """

    model: torch.nn.Module
    batch: Batch
    target: torch.Tensor
    eligible: torch.Tensor
    mask_token_id: int
    generator: torch.Generator | None
    autocast_dtype: torch.dtype | None
    internal_batch_size: int | None

    @property
    def device(self) -> torch.device:
        return self.batch.input_ids.device

    @property
    def widths(self) -> torch.Tensor:
        """Per example, one past the last attended position (its unpadded length)."""
        mask = self.batch.attention_mask.bool()
        cols = torch.arange(1, mask.shape[1] + 1, device=mask.device)
        return (mask * cols).amax(dim=1).clamp_min(1)

    def rows_per_forward(self) -> Callable[[int], int]:
        """Rows per forward pass as a function of the rows' width (see :func:`plan_chunks`)."""
        if self.internal_batch_size is not None:
            return lambda width: self.internal_batch_size
        widths = self.widths
        longest = int(widths.argmax())
        probe_width = min(32, int(widths[longest]))

        def make_inputs(rows, width):
            # The batch's longest example, cut to `width` and repeated: valid inputs for any model.
            inputs = {"input_ids": self.batch.input_ids[longest : longest + 1, :width].expand(rows, width),
                      "attention_mask": torch.ones(rows, width, dtype=torch.long, device=self.device)}
            if self.batch.token_type_ids is not None:
                inputs["token_type_ids"] = self.batch.token_type_ids[longest : longest + 1, :width].expand(rows, width)
            return inputs

        tokens = tokens_per_forward(self.model, make_inputs, device=self.device, dtype=self.autocast_dtype,
                                    width=probe_width)
        return lambda width: max(1, tokens // max(1, int(width)))


def model_kwargs(batch: Batch, rows: torch.Tensor, width: int) -> dict:
    """``attention_mask`` (and ``token_type_ids``) of ``rows``, cut to ``width`` columns."""
    kwargs = {"attention_mask": batch.attention_mask[rows, :width]}
    if batch.token_type_ids is not None:
        kwargs["token_type_ids"] = batch.token_type_ids[rows, :width]
    return kwargs


def embed(model: torch.nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """Word embeddings ``E[input_ids]`` (before position embeddings), without gradient."""
    with torch.no_grad():
        return model.get_input_embeddings()(input_ids)


def plan_chunks(widths, rows_per_forward: Callable[[int], int]) -> list[np.ndarray]:
    """Rows per forward pass: longest first, by exact width, small remainders merged downwards.

    Rows of one width fill passes of ``rows_per_forward(width)`` rows, so a pass
    holds a single length (no padding) whenever that width has rows enough.
    What is left of a width becomes its own pass when it fills at least half
    of one; a smaller remainder (the gradient measures have one row per
    example) is topped up with the next, shorter rows, padded to its width,
    rather than run as a pass of a few rows.

    Parameters
    ----------
    widths : array-like of int
        Unpadded length of every row.
    rows_per_forward : callable
        ``rows_per_forward(width) -> int``, at least 1.

    Returns
    -------
    list of ndarray of int64
        Row indices per pass; every row exactly once, the widest pass first.
    """
    widths = np.asarray(widths, dtype=np.int64)
    order = np.argsort(-widths, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(widths[order]) != 0])
    chunks, pending, capacity = [], np.empty(0, dtype=np.int64), 0
    for group in np.split(order, starts[1:]) if len(order) else []:
        if len(pending):
            if 2 * len(pending) < capacity:  # too few rows for a pass of their own: top up with this width
                take = capacity - len(pending)
                pending, group = np.concatenate([pending, group[:take]]), group[take:]
            if 2 * len(pending) >= capacity or len(pending) == capacity:
                chunks.append(pending)
                pending = np.empty(0, dtype=np.int64)
        if not len(group):
            continue
        capacity = max(1, int(rows_per_forward(int(widths[group[0]]))))
        full = len(group) - len(group) % capacity
        chunks.extend(group[i : i + capacity] for i in range(0, full, capacity))
        pending = group[full:]
    if len(pending):
        chunks.append(pending)
    return chunks


def _target_logits(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return logits.gather(1, target[:, None])[:, 0].float()


# The runtime's evaluation-mode context, under the name the measures use.
inference_context = eval_mode


def evaluate_rows(
    problem: Problem,
    example_of_row: torch.Tensor,
    make_ids: Callable[[np.ndarray, torch.Tensor, int], torch.Tensor],
) -> torch.Tensor:
    """Target logits of many perturbed copies of the batch's examples (forward only).

    Parameters
    ----------
    problem : Problem
    example_of_row : LongTensor (R,)
        Which example each row copies.
    make_ids : callable
        ``make_ids(rows, examples, width) -> LongTensor (len(rows), width)``:
        the ids of the given rows (``examples = example_of_row[rows]``).

    Returns
    -------
    FloatTensor (R,)
        ``f_y`` of every row, ``y`` the target of the row's example.
    """
    out = torch.empty(len(example_of_row), device=problem.device)
    widths = problem.widths[example_of_row]

    def run(rows):
        rows_t = torch.as_tensor(rows, device=problem.device)
        examples = example_of_row[rows_t]
        width = int(widths[rows_t].max())
        ids = make_ids(rows_t, examples, width)
        with torch.inference_mode(), autocast(problem.device, problem.autocast_dtype):
            logits = logits_of(problem.model(input_ids=ids, **model_kwargs(problem.batch, examples, width)))
        out[rows_t] = _target_logits(logits, problem.target[examples])

    # Writing into `out` inside `run` keeps memory flat; a chunk that runs out
    # of memory is halved before anything of it was written.
    run_in_batches(run, plan_chunks(widths.cpu().numpy(), problem.rows_per_forward()))
    return out


@contextlib.contextmanager
def gradient_mode(model: torch.nn.Module):
    """Gradients on (even inside ``torch.inference_mode``), parameters frozen.

    Freezing the parameters for the duration means autograd keeps only what the
    input gradient needs (no weight-gradient bookkeeping); the caller's
    ``requires_grad`` flags are restored afterwards.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        with torch.inference_mode(False), torch.enable_grad():
            yield
    finally:
        for p in params:
            p.requires_grad_(True)


def weighted_gradients(
    problem: Problem,
    example_of_row: torch.Tensor,
    weight_of_row: torch.Tensor,
    make_embeds: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor],
) -> torch.Tensor:
    """``sum_r w_r * d f_y(z_r) / d z_r`` accumulated per example.

    Parameters
    ----------
    problem : Problem
    example_of_row : LongTensor (R,)
    weight_of_row : Tensor (R,)
    make_embeds : callable
        ``make_embeds(rows, examples, width) -> Tensor (len(rows), width, H)``:
        the input embeddings ``z_r`` of the given rows.

    Returns
    -------
    Tensor (B, T, H)
        Zero beyond each example's length.
    """
    batch = problem.batch
    hidden = base_embedding(problem.model).weight  # its width and dtype only: no merged copy of a peft table
    total = torch.zeros(*batch.input_ids.shape, hidden.shape[1], dtype=hidden.dtype, device=problem.device)
    widths = problem.widths[example_of_row]

    def run(rows):
        rows_t = torch.as_tensor(rows, device=problem.device)
        examples = example_of_row[rows_t]
        width = int(widths[rows_t].max())
        with gradient_mode(problem.model):
            z = make_embeds(rows_t, examples, width).detach().clone().requires_grad_(True)
            kwargs = {k: v.clone() for k, v in model_kwargs(batch, examples, width).items()}
            with autocast(problem.device, problem.autocast_dtype):
                logits = logits_of(problem.model(inputs_embeds=z, **kwargs))
            # Rows are independent, so one backward pass of the summed target
            # logits gives every row's own gradient.
            (grad,) = torch.autograd.grad(_target_logits(logits, problem.target[examples]).sum(), z)
        weights = weight_of_row[rows_t].to(grad.dtype)[:, None, None]
        total[:, :width].index_add_(0, examples, (grad * weights).to(total.dtype))

    run_in_batches(run, plan_chunks(widths.cpu().numpy(), problem.rows_per_forward()))
    return total

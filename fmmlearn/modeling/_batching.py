"""Batched inference: a function over many examples in length-grouped batches, longest first, halving on
out-of-memory, one progress bar, rows back in the caller's order (:func:`map_batches`); logits.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ._devices import autocast, is_oom

__all__ = ["check_finite_logits", "forward_logits", "logits_of", "map_batches", "predict_logits", "probabilities",
           "progress_bar", "run_in_batches"]


def probabilities(logits) -> np.ndarray:
    """Class probabilities of logits: the softmax over the last axis, computed in float64.

    The one softmax of fmmlearn (predictions, curves, erasure, explanations), so every probability of
    one logit row is the same number wherever it is read.

    Parameters
    ----------
    logits : ndarray or Tensor of shape (..., n_classes)

    Returns
    -------
    ndarray of float64
    """
    values = logits.detach().cpu() if isinstance(logits, torch.Tensor) else torch.from_numpy(np.asarray(logits))
    return torch.softmax(values.double(), dim=-1).numpy()


def logits_of(output) -> torch.Tensor:
    """The logits of a model output (a ``ModelOutput``, a tuple or a tensor)."""
    if isinstance(output, torch.Tensor):
        return output
    if hasattr(output, "logits"):
        return output.logits
    return output[0]


def forward_logits(model, inputs: dict, device: torch.device, dtype: torch.dtype | None) -> torch.Tensor:
    """Run ``model(**inputs)`` under inference mode and autocast; return fp32 logits."""
    with torch.inference_mode(), autocast(device, dtype):
        return logits_of(model(**inputs)).float()


def run_in_batches(fn: Callable[[np.ndarray], torch.Tensor], order: list[np.ndarray]) -> list:
    """Call ``fn(indices)`` per batch, halving a batch that runs out of memory.

    Parameters
    ----------
    fn : callable
        Takes an index array, returns a result for those examples.
    order : list of ndarray
        Batches of example indices.

    Returns
    -------
    list of (indices, result)
    """
    results = []
    pending = list(order)
    while pending:
        idx = pending.pop(0)
        try:
            results.append((idx, fn(idx)))
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if not is_oom(exc) or len(idx) == 1:
                raise
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            half = len(idx) // 2
            pending[:0] = [idx[:half], idx[half:]]
    return results


def progress_bar(total: int, desc: str, verbose=0):
    """A tqdm bar counting examples, shown only when ``verbose``; the same bar for every long loop."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="example", leave=False, disable=not verbose)


def _to_numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def map_batches(fn: Callable, lengths, batch_size: int, *, ragged: bool = False, desc: str = "batches",
                verbose=0, generator: torch.Generator | None = None):
    """Run ``fn`` over length-grouped batches of examples and put the rows back in input order.

    Examples run longest first (so memory problems show up in the first
    batch), ``batch_size`` at a time; a batch that runs out of memory is
    halved and retried (:func:`run_in_batches`).  A progress bar counts the
    examples when ``verbose``.  Under a multi-process launch (``accelerate
    launch``) each process runs its share of the batches and every process
    gets all rows back (:mod:`fmmlearn.distributed`, docs/scaling.md).

    Parameters
    ----------
    fn : callable
        ``fn(indices) -> rows`` for an int64 array of example indices, where
        ``rows`` is an array or tensor of shape ``(len(indices), ...)``, or a
        list/tuple of them (several outputs, e.g. one per masking step).
    lengths : array-like of int
        Token count per example (``Encoding.lengths``).
    batch_size : int
    ragged : bool, default=False
        ``False``: rows have the same shape in every batch and are stacked
        into one array.  ``True``: rows are padded to their batch's width;
        row ``i`` is cut to ``lengths[i]`` along its first axis and returned
        as a list of per-example arrays.
    desc : str, default="batches"
        Progress-bar label.
    verbose : int or bool, default=0
    generator : torch.Generator, optional
        The random source ``fn`` draws from, reseeded before every batch from
        its seed and the batch's first example
        (:func:`~fmmlearn.utils._random.derive_seed`), so the draws of a batch do not
        depend on which process runs it or after which other batches.

    Returns
    -------
    ndarray or list of ndarray, or a list of those (one per output of ``fn``)
        Indexed like ``lengths``.
    """
    from ..encoding import length_grouped_batches
    from ..utils import batches_for_this_process, derive_seed, gather_objects, is_main_process

    lengths = np.asarray(lengths, dtype=np.int64)
    outputs, several = None, False

    def collect(idx, result):
        nonlocal outputs, several
        if outputs is None:
            several = isinstance(result, (list, tuple))
        parts = [_to_numpy(r) for r in (result if several else [result])]
        if outputs is None:  # the first (longest) batch tells the number and shape of the outputs
            outputs = [[None] * len(lengths) if ragged else np.empty((len(lengths),) + p.shape[1:], dtype=p.dtype)
                       for p in parts]
        for out, part in zip(outputs, parts):
            if ragged:
                for row, i in enumerate(idx):
                    out[i] = part[row, : lengths[i]].copy()  # a copy frees the padded batch
            else:
                out[idx] = part

    batches, split = batches_for_this_process(length_grouped_batches(lengths, batch_size=batch_size), lengths,
                                              what=desc)
    seed = None if generator is None else generator.initial_seed()
    mine = []  # this process's (indices, rows) when the batches are split across processes
    with progress_bar(sum(map(len, batches)), desc, verbose and is_main_process()) as bar:
        def run(idx):
            if generator is not None:
                generator.manual_seed(derive_seed(seed, int(idx[0])))
            result = fn(idx)
            if split:
                mine.append((idx, [_to_numpy(r) for r in result] if isinstance(result, (list, tuple))
                             else _to_numpy(result)))
            else:
                collect(idx, result)  # written only after fn succeeded: a halved batch is never half-written
            bar.update(len(idx))

        run_in_batches(run, batches)
    for shard in gather_objects(mine) if split else ():
        for idx, result in shard:
            collect(idx, result)
    if outputs is None:
        return [] if ragged else np.empty((0,))
    return outputs if several else outputs[0]


def predict_logits(
    model,
    encoding,
    *,
    pad_token_id: int,
    batch_size: int,
    device: torch.device,
    dtype: torch.dtype | None,
    input_ids: list | None = None,
    verbose=0,
) -> np.ndarray:
    """Logits for every example of an :class:`~fmmlearn.encoding.Encoding`, in input order.

    Parameters
    ----------
    model : torch.nn.Module
        A Hugging Face sequence classifier (already on ``device``, eval mode).
    encoding : Encoding
    pad_token_id : int
    batch_size : int
    device : torch.device
    dtype : torch.dtype or None
        Autocast dtype, ``None`` for fp32.
    input_ids : list of ndarray, optional
        Replacement ids per example (e.g. masked copies).
    verbose : int, default=0
        Show a progress bar.

    Returns
    -------
    ndarray of float32, shape (n_examples, n_classes)

    Raises
    ------
    ValueError
        When the model returns NaN or infinite logits, naming the examples
        (an argmax over NaN would silently predict class 0).
    """
    from ..encoding import collate

    def run(idx):
        batch = collate(encoding, idx, pad_token_id=pad_token_id, input_ids=input_ids).to(device)
        return forward_logits(model, batch.model_inputs(), device, dtype)

    return check_finite_logits(map_batches(run, encoding.lengths, batch_size, desc="predict", verbose=verbose), dtype)


def check_finite_logits(logits: np.ndarray, dtype: torch.dtype | None = None) -> np.ndarray:
    """``logits`` if every value is finite, else a ``ValueError`` naming the examples.

    Parameters
    ----------
    logits : ndarray, shape (n_examples, n_classes)
    dtype : torch.dtype or None
        The autocast dtype they were computed in (``None`` = fp32), for the advice in the message.

    Returns
    -------
    ndarray
        ``logits`` itself.
    """
    bad = np.flatnonzero(~np.isfinite(logits).all(axis=tuple(range(1, logits.ndim))))
    if len(bad):
        shown = bad[:10].tolist()
        cause = (f"the {str(dtype).replace('torch.', '')} autocast may have overflowed: try precision='fp32'"
                 if dtype is not None else "its weights may be corrupt (NaN or inf), or an input overflowed")
        raise ValueError(
            f"the model returned non-finite logits (NaN or inf) for {len(bad)} of {len(logits)} example(s) "
            f"(indices {shown}{' ...' if len(bad) > 10 else ''}); {cause}. No prediction is made from them."
        )
    return logits

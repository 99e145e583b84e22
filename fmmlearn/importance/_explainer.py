"""The explainer value type and callables as explainers (docs/explainers.md).

An :class:`Explainer` is anything that scores the tokens of a batch for a
target class.  :func:`as_explainer` turns what a user passes as ``method=``
into one: an :class:`Explainer` as is, a Captum attribution class or object
into a :class:`CaptumExplainer`, any other callable into a
:class:`CallableExplainer`.  Every explainer has a stable :attr:`~Explainer.name`
(its label in frames and tables and its key in the study cache), a declared
or inferred signedness, and is called on whole batches.  Resolving an
explainer registers it under its name, so the name works wherever a built-in
measure's name does (the study and the scorers keep names).
"""

from __future__ import annotations

import numbers
from typing import Callable

import numpy as np
import torch

from ..exceptions import ExplainerError
from ..modeling import is_oom
from ._utils import Problem

__all__ = ["REDUCTIONS", "CallableExplainer", "Explainer"]

#: Rules that reduce per-embedding scores ``(B, T, D)`` to one score per token ``(B, T)``.
REDUCTIONS = {
    "sum": lambda a: a.sum(dim=-1),          # Captum's tutorials: attributions summed over the embedding
    "mean": lambda a: a.mean(dim=-1),
    "l2": lambda a: a.norm(dim=-1),
    "l1": lambda a: a.abs().sum(dim=-1),
}

def _check_signed(signed):
    if signed is not None and not isinstance(signed, (bool, np.bool_)):
        raise ValueError(f"signed must be True, False or None (inferred), got {signed!r}.")
    return None if signed is None else bool(signed)


def _check_reduction(reduction):
    if reduction is None or callable(reduction) or (isinstance(reduction, str) and reduction in REDUCTIONS):
        return reduction
    raise ValueError(f"reduction must be one of {sorted(REDUCTIONS)}, a callable (B, T, D) -> (B, T) or None, "
                     f"got {reduction!r}.")


def _check_batch_size(batch_size):
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be None or a positive integer, got {batch_size!r}.")
    return int(batch_size)


class Explainer:
    """Base class of explainers: an importance method given as a value (docs/explainers.md).

    Wherever a method is asked for (``method=``, ``methods=``) a name of
    :data:`~fmmlearn.importance.METHOD_NAMES` or an explainer goes; "explainer"
    is the word Captum and ferret use for such objects.

    Subclasses implement :meth:`attribute`; everything else (batching, shape
    and NaN checks, the reduction, signedness, naming which text failed) is
    done here.

    Parameters
    ----------
    name : str
        Stable label (frames, tables, the study's cache key).
    signed : bool or None
        Whether the sign of a score carries meaning; ``None``: inferred on the
        first batch (signed when any score of an explained position is
        negative), see :attr:`signed`.
    reduction : {"sum", "mean", "l2", "l1"}, callable or None
        How per-embedding scores ``(B, T, D)`` become one score per token;
        ``None``: the explainer must return ``(B, T)``.
    batch_size : int or None
        Most texts per call (``None``: the whole batch fmmlearn hands over).
    uses_gradients : bool
        Needs a backward pass (batch size and precision of the gradient measures).
    costly : bool
        Runs on the study's shared subset of costly measures.
    cost : str
        What one call costs, in words (shown next to the measure, e.g. "Captum, forward passes").
    """

    def __init__(self, name: str, *, signed=None, reduction=None, batch_size=None, uses_gradients=False,
                 costly=True, cost="external"):
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str, got {name!r}.")
        self.name = name
        self.declared_signed = _check_signed(signed)
        self.inferred_signed = None
        self.reduction = _check_reduction(reduction)
        self.batch_size = _check_batch_size(batch_size)
        self.uses_gradients = bool(uses_gradients)
        self.costly = bool(costly)
        self.cost = cost
        self.source = None  # the value the user passed (as_explainer finds it again)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, signed={self.declared_signed})"

    @property
    def signed(self):
        """Declared signedness, else the one inferred from the first batch, else ``None`` (not yet known)."""
        return self.declared_signed if self.declared_signed is not None else self.inferred_signed

    def attribute(self, problem: Problem, input_ids, attention_mask, target):
        """Scores of one chunk: ``(B, T)`` or ``(B, T, D)`` (tensor or array).

        Parameters
        ----------
        problem : fmmlearn.importance.Problem
            The model, the batch and its maskable positions.
        input_ids, attention_mask : torch.Tensor
            The chunk's token ids and attention mask, shape ``(B, T)``.
        target : torch.Tensor
            The explained class of each text, shape ``(B,)``.

        Returns
        -------
        torch.Tensor or numpy.ndarray
            Larger = more important for ``target``.
        """
        raise NotImplementedError

    def scores(self, problem: Problem) -> torch.Tensor:
        """Scores ``(B, T)`` of the problem's batch, chunk by chunk, checked.

        Parameters
        ----------
        problem : fmmlearn.importance.Problem
            The model, the batch and its maskable positions.

        Returns
        -------
        torch.Tensor
            One float32 score per position; positions that may not be masked are 0.
        """
        ids = problem.batch.input_ids
        size = self.batch_size or len(ids)
        out = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
        for start in range(0, len(ids), size):
            rows = torch.arange(start, min(start + size, len(ids)), device=ids.device)
            width = int(problem.widths[rows].max()) if len(rows) else ids.shape[1]
            out[rows, :width] = self._chunk(problem, rows, width)
        eligible = problem.eligible
        if self.declared_signed is None and self.inferred_signed is None and eligible.any():
            self.inferred_signed = bool((out[eligible] < 0).any())
        return out

    def _chunk(self, problem, rows, width) -> torch.Tensor:
        batch = problem.batch
        args = (batch.input_ids[rows, :width], batch.attention_mask[rows, :width], problem.target[rows])
        sub = _sub_problem(problem, rows, width)
        try:
            raw = self.attribute(sub, *args)
        except Exception as exc:  # locate the text that fails, keep the original as the cause
            if is_oom(exc):
                raise  # the runtime halves the batch and retries
            raise self._failure(sub, args, exc) from exc
        return self._checked(raw, (len(rows), width), sub.eligible)

    def _failure(self, sub, args, exc) -> Exception:
        index = sub.batch.index
        if len(args[0]) > 1:
            for row in range(len(args[0])):
                one = torch.tensor([row], device=args[0].device)
                try:
                    self.attribute(_sub_problem(sub, one, sub.batch.input_ids.shape[1]), *(a[one] for a in args))
                except Exception as single:  # noqa: BLE001 - reported with its text
                    return ExplainerError(f"explainer {self.name!r} raised {type(single).__name__} on text "
                                          f"{int(index[row])} (index into X): {single}")
        texts = [int(i) for i in index]
        return ExplainerError(f"explainer {self.name!r} raised {type(exc).__name__} on the batch of texts "
                              f"{texts[:10]}{' ...' if len(texts) > 10 else ''} (indices into X): {exc}")

    def _checked(self, raw, shape, eligible) -> torch.Tensor:
        expected = f"({shape[0]}, {shape[1]}) (texts, positions)"
        if isinstance(raw, (tuple, list)) and len(raw) == 1 and isinstance(raw[0], torch.Tensor):
            raw = raw[0]  # Captum returns a 1-tuple for tuple inputs
        try:
            scores = raw.detach() if isinstance(raw, torch.Tensor) else torch.as_tensor(np.asarray(raw, dtype=float))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"explainer {self.name!r} returned {type(raw).__name__}; expected scores of shape "
                             f"{expected} as a tensor or array.") from exc
        if scores.ndim == 3 and tuple(scores.shape[:2]) == shape:
            if self.reduction is None:
                raise ValueError(f"explainer {self.name!r} returned per-embedding scores of shape "
                                 f"{tuple(scores.shape)}; expected {expected}: pass reduction= (one of "
                                 f"{sorted(REDUCTIONS)} or a callable) to reduce them to one score per token.")
            reduce = REDUCTIONS[self.reduction] if isinstance(self.reduction, str) else self.reduction
            scores = torch.as_tensor(reduce(scores))
        if tuple(scores.shape) != shape:
            raise ValueError(f"explainer {self.name!r} returned scores of shape {tuple(scores.shape)}; expected "
                             f"{expected}.")
        scores = scores.to(device=eligible.device, dtype=torch.float32)
        bad = torch.isnan(scores) & eligible
        if bad.any():
            row, col = (int(v) for v in torch.nonzero(bad)[0])
            raise ValueError(f"explainer {self.name!r} returned NaN at {int(bad.sum())} explained position(s) "
                             f"(first: row {row}, position {col}) of scores of shape {expected}.")
        return torch.where(eligible, scores, torch.zeros_like(scores))


def _sub_problem(problem: Problem, rows, width) -> Problem:
    batch = problem.batch
    pick = lambda t: None if t is None else t[rows][:, :width]  # noqa: E731
    sub = type(batch)(batch.input_ids[rows, :width], batch.attention_mask[rows, :width],
                      batch.special_tokens_mask[rows, :width], batch.segment_ids[rows, :width],
                      pick(batch.token_type_ids), batch.index[rows.to(batch.index.device)])
    return Problem(problem.model, sub, problem.target[rows], problem.eligible[rows, :width], problem.mask_token_id,
                   problem.generator, problem.autocast_dtype, problem.internal_batch_size)


def _callable_name(fn) -> str:
    target = fn if hasattr(fn, "__qualname__") else type(fn)
    return f"{getattr(target, '__module__', None) or 'builtins'}.{target.__qualname__}"


class CallableExplainer(Explainer):
    """A function ``fn(input_ids, attention_mask, target) -> scores`` as an explainer.

    ``input_ids`` and ``attention_mask`` are LongTensors ``(B, T)`` (padding
    cut to the longest text of the call), ``target`` a LongTensor ``(B,)`` of
    class indices; ``scores`` is a tensor or array ``(B, T)``, larger = more
    important for ``target``.  Scores at positions that may not be masked
    (special tokens, padding, segment B) are ignored.

    Parameters
    ----------
    fn : callable
    name : str, optional
        Default ``module.qualname`` of ``fn`` (of its class for a callable object).
    signed : bool, optional
        Default: inferred from the first batch.
    reduction : str or callable, optional
        For a function returning per-embedding scores ``(B, T, D)``.
    batch_size : int, optional
        Most texts per call (e.g. ``1`` for a function of one text).
    uses_gradients : bool, default=False
    costly : bool, default=True

    Examples
    --------
    >>> import torch
    >>> from fmmlearn.importance import CallableExplainer
    >>> def length_prior(input_ids, attention_mask, target):
    ...     return attention_mask.float().cumsum(dim=1)
    >>> CallableExplainer(length_prior, signed=False).name.endswith(".length_prior")
    True
    """

    def __init__(self, fn: Callable, *, name=None, signed=None, reduction=None, batch_size=None, uses_gradients=False,
                 costly=True):
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}.")
        self.fn = fn
        super().__init__(name or _callable_name(fn), signed=signed, reduction=reduction, batch_size=batch_size,
                         uses_gradients=uses_gradients, costly=costly)

    def attribute(self, problem, input_ids, attention_mask, target):
        return self.fn(input_ids, attention_mask, target)



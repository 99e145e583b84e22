"""Learning-rate schedules of masked fine-tuning: warm-up, then linear decay.

Counted in optimisation steps, or, bug for bug, the reference code's way;
:func:`lr_multiplier` picks one by the estimator's ``lr_schedule`` (docs/classifier.md).
"""

from __future__ import annotations

from typing import Callable

from ..utils import warn

__all__ = ["LR_SCHEDULES", "linear_warmup_decay", "lr_multiplier", "reference_warmup_decay"]

#: Values of ``FaithfulTextClassifier(lr_schedule=...)`` (docs/classifier.md).
LR_SCHEDULES = ("linear", "reference")


def linear_warmup_decay(total_steps: int, warmup_ratio: float) -> Callable[[int], float]:
    """Linear warm-up then linear decay of the learning rate, counted in optimisation steps.

    ``s / W`` for ``s < W``, else ``max(0, (S - s) / max(1, S - W))`` with
    ``W = int(warmup_ratio * S)``.

    Parameters
    ----------
    total_steps : int
        ``S``, the number of optimisation steps (batches) of the whole run.
    warmup_ratio : float

    Returns
    -------
    callable
        For :class:`torch.optim.lr_scheduler.LambdaLR`.
    """
    warmup = int(warmup_ratio * total_steps)

    def multiplier(step: int) -> float:
        if step < warmup:
            return step / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return multiplier


def reference_warmup_decay(total_examples: int, warmup_ratio: float) -> Callable[[int], float]:
    """The paper's reference schedule, bug for bug: :func:`linear_warmup_decay` with ``S`` counted in examples.

    The reference code passes ``S = max_epochs * n_train_examples`` where the
    number of optimisation steps was meant, so with batches of ``B`` only
    ``S / B`` steps run and the learning rate climbs linearly for the first
    ``W = int(warmup_ratio * S)`` of them -- about ``warmup_ratio * B`` of the
    run (96 % for the paper's 0.06 and 16) -- then barely decays.  Its second
    quirk is kept too: with ``W = 0`` (``S < 1 / warmup_ratio``) the
    multiplier is the step number ``s`` itself, so the learning rate grows as
    ``lr * s``; a warning says so.  For parity only (docs/classifier.md).

    Parameters
    ----------
    total_examples : int
        ``S = max_epochs * n_train_examples``.
    warmup_ratio : float

    Returns
    -------
    callable
        ``step -> multiplier`` for :class:`torch.optim.lr_scheduler.LambdaLR`.
    """
    warmup = int(warmup_ratio * total_examples)
    if warmup == 0:
        warn(f"lr_schedule='reference' with S = max_epochs * n_train_examples = {total_examples} and warmup_ratio="
             f"{warmup_ratio:g} gives W = 0 warm-up steps, where the reference schedule returns lr * step (the "
             "learning rate grows without bound); use lr_schedule='linear' unless you need this quirk.")

        def step_itself(step: int) -> float:
            return float(step)

        return step_itself
    return linear_warmup_decay(total_examples, warmup_ratio)


def lr_multiplier(schedule: str, *, max_epochs: int, n_train_examples: int, batch_size: int,
                  warmup_ratio: float, steps_per_epoch: int | None = None) -> Callable[[int], float]:
    """The learning-rate multiplier per optimisation step of one fit (docs/classifier.md).

    Parameters
    ----------
    schedule : {"linear", "reference"}
        ``"linear"``: warm-up over ``warmup_ratio`` of the optimisation steps,
        ``S = max_epochs * ceil(n_train_examples / batch_size)``, then linear
        decay to 0 (:func:`linear_warmup_decay`).  ``"reference"``: the
        reference code's schedule with ``S = max_epochs * n_train_examples``
        (:func:`reference_warmup_decay`).
    max_epochs, n_train_examples, batch_size : int
    warmup_ratio : float
    steps_per_epoch : int, optional
        Optimisation steps per epoch of ``"linear"``; default
        ``ceil(n_train_examples / batch_size)``.  Data-parallel training and
        gradient accumulation take fewer
        (:func:`fmmlearn.distributed.optimizer_steps_per_epoch`).

    Returns
    -------
    callable
        ``step -> multiplier``; the learning rate of step ``s`` (from 0) is
        ``lr * multiplier(s)``.
    """
    if schedule == "reference":
        return reference_warmup_decay(max_epochs * n_train_examples, warmup_ratio)
    if schedule != "linear":
        raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {schedule!r}.")
    if steps_per_epoch is None:
        steps_per_epoch = -(-n_train_examples // batch_size)
    return linear_warmup_decay(max_epochs * steps_per_epoch, warmup_ratio)

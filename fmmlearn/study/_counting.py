"""Instrumentation of a study's jobs: the rows through the model, and the wall and CPU seconds."""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch

__all__ = ["forward_counter", "measured"]


class _Counts:
    def __init__(self):
        self.forward_rows = self.forward_tokens = self.gradient_rows = 0

    def as_dict(self) -> dict:
        return {"forward_rows": self.forward_rows, "forward_tokens": self.forward_tokens,
                "gradient_rows": self.gradient_rows}


@contextmanager
def forward_counter(module):
    """Count the sequences (and padded tokens) that go through ``module``'s forward pass.

    ``gradient_rows`` counts the rows of forward passes run with gradients enabled (each is followed
    by a backward pass).
    """
    counts = _Counts()

    def hook(_module, args, kwargs):
        for x in (kwargs.get("input_ids"), kwargs.get("inputs_embeds"), args[0] if args else None):
            if isinstance(x, torch.Tensor):
                counts.forward_rows += int(x.shape[0])
                counts.forward_tokens += int(x.shape[0] * x.shape[1])
                counts.gradient_rows += int(x.shape[0]) if torch.is_grad_enabled() else 0
                break

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield counts
    finally:
        handle.remove()


@contextmanager
def measured(clf):
    """``info`` filled with the block's wall ``seconds``, its ``cpu_seconds`` (every thread of the process) and
    the model's ``counts``."""
    info = {}
    start, cpu_start = time.perf_counter(), time.process_time()
    if clf is None:
        yield info
        info["counts"] = _Counts().as_dict()
    else:
        with forward_counter(clf.model_) as counts:
            yield info
        info["counts"] = counts.as_dict()
    info["seconds"] = time.perf_counter() - start
    info["cpu_seconds"] = time.process_time() - cpu_start

"""Processes working together under ``accelerate launch`` or ``torchrun``: who they are, and batched work split between them.

The runtime (:func:`fmmlearn.modeling.map_batches`) hands each process whole length-grouped
batches and gathers the rows back in the caller's order, so every caller scales out unchanged.
These facts sit below the runtime; the training side of scale-out (the Accelerate mixin) and Dask
live in :mod:`fmmlearn.distributed`, which re-exports the names here (docs/scaling.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib
import os
import sys

import numpy as np
import torch

__all__ = ["DISTRIBUTED_EXTRA", "EXIT_BARRIER_TIMEOUT_S", "batches_for_this_process", "gather_objects", "is_main_process",
           "launched_processes", "local_only", "num_processes", "process_device_index", "process_index", "require",
           "shard_batches", "use_cpu"]


#: The pip extra that installs the scale-out engines (Accelerate, Dask distributed).
DISTRIBUTED_EXTRA = "fmmlearn[distributed]"


# import name -> what pip installs
_PACKAGES = {"accelerate": "accelerate", "distributed": "dask[distributed]", "dask": "dask[distributed]"}


_LOCAL_ONLY = contextvars.ContextVar("fmmlearn_local_only", default=False)


def require(module: str, feature: str):
    """Import an optional scale-out engine, or fail with a message naming the extra to install.

    Parameters
    ----------
    module : {"accelerate", "distributed", "dask"}
        Import name.
    feature : str
        What needs it, for the message (e.g. ``"accelerator='auto'"``).

    Returns
    -------
    module

    Raises
    ------
    ImportError
        ``"<feature> needs <package>: pip install "fmmlearn[distributed]""``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = _PACKAGES.get(module, module)
        raise ImportError(f"{feature} needs {package}, which is not installed; install the scale-out extra: "
                          f"pip install \"{DISTRIBUTED_EXTRA}\"") from exc


def launched_processes() -> int:
    """Processes of the launch this process belongs to (``WORLD_SIZE`` of ``accelerate launch``/``torchrun``), else 1."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def process_device_index() -> int | None:
    """This process's GPU under a multi-process launch (``LOCAL_RANK``); ``None`` outside one."""
    if launched_processes() < 2:
        return None
    try:
        return int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        return 0


def use_cpu() -> bool:
    """Whether this process runs on the CPU: ``ACCELERATE_USE_CPU`` set, or no CUDA device."""
    flag = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")
    return flag or not torch.cuda.is_available()


def _process_group():
    """``torch.distributed``, initialised, when this process is one of several; else ``None``.

    A launched process whose group nobody initialised yet (no ``Accelerator``
    created) gets it from Accelerate's ``PartialState``: NCCL on GPUs, gloo on
    CPUs.
    """
    import torch.distributed as dist

    if not dist.is_available():
        return None
    if not dist.is_initialized():
        if launched_processes() < 2:
            return None
        accelerate = require("accelerate", "running under a multi-process launch")
        accelerate.PartialState(cpu=use_cpu())
    if dist.is_initialized() and dist.get_world_size() > 1:
        _destroy_group_at_exit(dist)
        return dist
    return None


_EXIT_HOOK = []


#: How long the exit barrier waits for the other processes before giving up (and exiting anyway).
EXIT_BARRIER_TIMEOUT_S = 60


def _exiting_after_an_error() -> bool:
    """Whether the interpreter is exiting because of an uncaught exception (it sets ``sys.last_value``)."""
    return getattr(sys, "last_exc", None) is not None or getattr(sys, "last_value", None) is not None


def _destroy_group_at_exit(dist) -> None:
    """At interpreter exit, wait for the other processes, then destroy the group (once per process).

    Why: a model wrapped in ``DistributedDataParallel`` keeps the gloo backend
    (and its worker threads) alive even after ``destroy_process_group``.  A
    worker thread that still holds the tensors of the script's last
    collective when the interpreter starts tearing down takes the GIL too late
    and aborts the process ("terminate called without an active exception",
    SIGABRT) after its work is done, failing the launch (PyTorch pull request
    179291 describes the crash).  A barrier on a clean exit makes every
    process finish its collectives, and gives the workers time to drop those
    tensors, while the interpreter is whole.  After an uncaught exception
    there is no barrier: the other processes may be inside another
    collective, and the launcher stops them when this one exits.
    """
    if _EXIT_HOOK:
        return
    import atexit
    import datetime

    def wait_and_destroy():
        if not dist.is_initialized():
            return
        # at exit, a peer that left first or a failed teardown must not mask the run's result
        with contextlib.suppress(Exception):
            if not _exiting_after_an_error() and dist.get_backend() == "gloo":
                dist.monitored_barrier(timeout=datetime.timedelta(seconds=EXIT_BARRIER_TIMEOUT_S))
        with contextlib.suppress(Exception):
            dist.destroy_process_group()

    atexit.register(wait_and_destroy)
    _EXIT_HOOK.append(wait_and_destroy)


def num_processes() -> int:
    """Processes working together (the launch's world size); 1 for a plain process."""
    group = _process_group()
    return 1 if group is None else group.get_world_size()


def process_index() -> int:
    """This process's rank among :func:`num_processes` (0 for a plain process)."""
    group = _process_group()
    return 0 if group is None else group.get_rank()


def is_main_process() -> bool:
    """Whether this process is rank 0 (the one that writes files and prints)."""
    return process_index() == 0


@contextlib.contextmanager
def local_only():
    """Run batched work (predict, explain, curves, ...) on this process alone, even under a launch.

    Under a multi-process launch every process must call the batched
    functions together, with the same inputs (they exchange results).  Code
    that runs on one process only, e.g. inside ``if is_main_process():``,
    must wrap those calls in this context.

    Examples
    --------
    >>> from fmmlearn.distributed import is_main_process, local_only
    >>> if is_main_process():                                  # doctest: +SKIP
    ...     with local_only():
    ...         clf.explain(X_few).to_html("few.html")
    """
    token = _LOCAL_ONLY.set(True)
    try:
        yield
    finally:
        _LOCAL_ONLY.reset(token)


def gather_objects(obj) -> list:
    """``obj`` of every process, indexed by rank (``[obj]`` for a plain process); a collective call."""
    group = _process_group()
    if group is None:
        return [obj]
    out = [None] * group.get_world_size()
    group.all_gather_object(out, obj)
    return out


def shard_batches(batches: list, lengths, n_processes: int) -> list[list[int]]:
    """Assign whole batches to processes, balancing their padded tokens.

    Batches go in the given order (longest first, as
    :func:`~fmmlearn.encoding.length_grouped_batches` makes them) to the
    process with the fewest padded tokens so far (ties: the lowest rank), the
    longest-processing-time rule.  Batches are never split, so every example
    is computed in exactly the batch (same rows, same padding) a single
    process would use: the results are identical.

    Parameters
    ----------
    batches : list of ndarray of int
        Example indices per batch.
    lengths : array-like of int
        Token count per example.
    n_processes : int

    Returns
    -------
    list of list of int
        Per process, the positions (into ``batches``) of its batches, in order.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    loads = np.zeros(n_processes, dtype=np.int64)
    shards: list[list[int]] = [[] for _ in range(n_processes)]
    for position, idx in enumerate(batches):
        target = int(np.argmin(loads))
        shards[target].append(position)
        loads[target] += len(idx) * int(lengths[idx].max()) if len(idx) else 0
    return shards


def batches_for_this_process(batches: list, lengths, *, what: str) -> tuple[list, bool]:
    """This process's share of ``batches``, and whether the work is split across processes.

    Outside a multi-process launch, or inside :func:`local_only`, that is all
    of them.  Under a launch it checks first that every process was given the
    same work (a mismatch would mix results silently) and raises otherwise.

    Parameters
    ----------
    batches : list of ndarray of int
    lengths : array-like of int
    what : str
        Names the work in the error message (e.g. the progress-bar label).

    Returns
    -------
    batches : list of ndarray of int
    split : bool
        ``True``: the other processes hold the other batches; gather the
        results with :func:`gather_objects`.

    Raises
    ------
    ValueError
        When the processes of the launch were given different examples.
    """
    if _LOCAL_ONLY.get():
        return batches, False
    group = _process_group()
    if group is None:
        return batches, False
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    signature = (len(lengths), len(batches), hashlib.sha1(lengths.tobytes()).hexdigest())
    seen = gather_objects(signature)
    if any(s != signature for s in seen):
        sizes = [s[0] for s in seen]
        raise ValueError(
            f"{what}: the {len(seen)} processes of this launch were given different examples (sizes {sizes}); "
            "under a multi-process launch every process must make the same call with the same inputs, or wrap a "
            "call made on some processes only in fmmlearn.distributed.local_only().")
    positions = shard_batches(batches, lengths, group.get_world_size())[group.get_rank()]
    return [batches[p] for p in positions], True

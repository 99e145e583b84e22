"""Scale-out: data-parallel training and batched work across processes, Dask for model selection (docs/scaling.md).

fmmlearn runs on the engines its users already scale with: Hugging Face
Accelerate for several processes (GPUs or CPU cores, on one machine or on
several) and joblib's Dask backend for model selection on a cluster.  Under
``accelerate launch`` (or ``torchrun``) every process runs the same script;
this module is what makes them cooperate.

* **Process facts**: :func:`num_processes`, :func:`process_index`,
  :func:`is_main_process`.  A launched process initialises its process group
  through Accelerate the first time it asks.
* **Batched work** (logits, explanations, faithfulness curves, hidden-state
  features, all through :func:`fmmlearn.modeling.map_batches`): each process
  takes whole length-grouped batches (:func:`shard_batches`, balanced by padded
  tokens) and the rows are gathered back in the caller's order
  (:func:`gather_objects`), so every process gets the single-process result.
  :func:`local_only` turns the splitting off for code that runs on one
  process only.
* **Training**: :class:`AcceleratedTrainingMixin` trains a skorch net
  data-parallel with an ``accelerate.Accelerator`` -- each process its disjoint
  share of every epoch's batches (:func:`split_training_batches`) and its own
  masking stream (:func:`process_seed`), mixed precision and gradient
  accumulation by Accelerate.  :func:`make_accelerator` resolves the
  estimator's ``accelerator`` parameter.
* **Dask**: :func:`dask_backend` connects to a scheduler and sends joblib's
  tasks there (``GridSearchCV(n_jobs=-1)``, the study's fits).

Accelerate and Dask are optional: ``pip install "fmmlearn[distributed]"``.
Without them, the options that need them fail with a message naming that
extra.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import importlib
import os
import sys
import warnings

import numpy as np
import torch
from skorch.callbacks import LRScheduler, ProgressBar
from skorch.hf import AccelerateMixin
from skorch.utils import TeeGenerator
from torch.utils.data import DataLoader

from ._random import derive_seed

__all__ = [
    "DISTRIBUTED_EXTRA",
    "AcceleratedTrainingMixin",
    "ProcessBatchSampler",
    "accelerated_net_options",
    "batches_for_this_process",
    "dask_backend",
    "gather_objects",
    "is_main_process",
    "launched_processes",
    "local_only",
    "make_accelerator",
    "num_processes",
    "optimizer_steps_per_epoch",
    "process_device_index",
    "process_index",
    "process_seed",
    "require",
    "shard_batches",
    "split_training_batches",
]

#: The pip extra that installs the scale-out engines (Accelerate, Dask distributed).
DISTRIBUTED_EXTRA = "fmmlearn[distributed]"

# import name -> what pip installs
_PACKAGES = {"accelerate": "accelerate", "distributed": "dask[distributed]", "dask": "dask[distributed]"}

# A derive_seed key of its own for the per-process masking streams, apart from the
# (seed, 0 | 1 | 2 | 3, ...) paths of the explanation and faithfulness code.
_PROCESS_STREAM = 1009

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


# --------------------------------------------------------------------------- process facts


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


def _use_cpu() -> bool:
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
        accelerate.PartialState(cpu=_use_cpu())
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


# --------------------------------------------------------------------------- batched work


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


# --------------------------------------------------------------------------- training


def split_training_batches(batches: list, n_processes: int) -> list[list[np.ndarray]]:
    """Each process's disjoint share of one epoch's training batches, the same number of steps for all.

    Every process draws the same epoch of batches (same sampler, same seed);
    batch ``i * n + r`` goes to process ``r``.  The last ``len(batches) % n``
    batches, too few for a round, are pooled and cut into ``n`` near-equal
    parts, one more batch per process, so every process runs
    ``ceil(len(batches) / n)`` steps (distributed data parallelism needs equal
    step counts) and no example is duplicated.  If that pool holds fewer than
    ``n`` examples, they sit this epoch out.

    Parameters
    ----------
    batches : list of ndarray of int
        One epoch, as the training batch sampler yields it.
    n_processes : int

    Returns
    -------
    list of list of ndarray
        Per process, its batches in order.
    """
    rounds = len(batches) // n_processes
    shards = [[np.asarray(batches[i * n_processes + r]) for i in range(rounds)] for r in range(n_processes)]
    rest = batches[rounds * n_processes:]
    if rest:
        pool = np.concatenate([np.asarray(b) for b in rest])
        if len(pool) >= n_processes:
            for shard, part in zip(shards, np.array_split(pool, n_processes)):
                shard.append(part)
    return shards


def optimizer_steps_per_epoch(n_batches: int, n_processes: int = 1, gradient_accumulation_steps: int = 1) -> int:
    """Optimisation steps of one process in one epoch of ``n_batches`` batches.

    ``ceil(ceil(n_batches / n_processes) / gradient_accumulation_steps)``:
    each process runs its share of the batches (:func:`split_training_batches`)
    and steps the optimizer every ``gradient_accumulation_steps`` of them and
    at the epoch's last one.
    """
    per_process = -(-int(n_batches) // int(n_processes))
    return -(-per_process // int(gradient_accumulation_steps))


def process_seed(seed: int, index: int, n_processes: int) -> int:
    """The masking seed of process ``index``: ``seed`` when it trains alone, else ``derive_seed(seed, key, index)``.

    Every process masks its batches from its own stream, so two processes
    never draw the same masks, and a run is reproducible per seed and process
    count.  One process keeps ``seed`` itself: a one-process Accelerate fit is
    the plain fit.
    """
    if n_processes == 1:
        return int(seed)
    return derive_seed(seed, _PROCESS_STREAM, index)


class ProcessBatchSampler:
    """One process's share of a training batch sampler's batches (:func:`split_training_batches`), per epoch.

    Parameters
    ----------
    sampler : iterable of ndarray
        The net's batch sampler; each ``iter()`` draws one epoch, the same on
        every process (same seed).
    process_index, num_processes : int
    """

    def __init__(self, sampler, process_index: int, num_processes: int):
        self.sampler = sampler
        self.process_index = process_index
        self.num_processes = num_processes

    def __iter__(self):
        yield from split_training_batches(list(self.sampler), self.num_processes)[self.process_index]

    def __len__(self) -> int:
        return -(-len(self.sampler) // self.num_processes)


_END = object()


@functools.cache
def _epoch_loader_class():
    """A ``DataLoader`` that tells Accelerate's gradient state where each epoch ends.

    Built on first use (Accelerate is optional).  Accelerate's own prepared
    loaders do this, so gradient accumulation synchronises on an epoch's last
    batch; ours cannot be prepared (Accelerate would re-shard the batches).
    """
    from accelerate.data_loader import DataLoaderStateMixin
    from accelerate.state import GradientState

    class EpochLoader(DataLoaderStateMixin, DataLoader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.gradient_state = GradientState()

        def __iter__(self):
            self.begin()
            try:
                batches = super().__iter__()
                current = next(batches, _END)
                while current is not _END:
                    following = next(batches, _END)
                    self.end_of_dataloader = following is _END
                    yield current
                    current = following
            finally:
                self.end()

    return EpochLoader


class AcceleratedTrainingMixin(AccelerateMixin):
    """Data-parallel training of a skorch net with Hugging Face Accelerate (docs/scaling.md).

    skorch's :class:`~skorch.hf.AccelerateMixin` (prepared model, optimizer
    and criterion; ``accelerator.autocast`` and ``accelerator.backward``;
    printing on the main process), with what fmmlearn's training loop needs
    on top.  Mix it in front of a net whose ``get_iterator`` returns a
    ``DataLoader`` with a batch sampler, e.g.
    :class:`~fmmlearn.training.MaskedFineTuningNet`.

    * **Training batches.**  Every process draws the same epoch of batches
      from the net's own sampler (same seed; length grouping applies) and
      keeps its disjoint share (:func:`split_training_batches`); the loader
      tells Accelerate where the epoch ends.
    * **Validation is not split**: every process evaluates the whole
      validation set, so the selection metric and the best epoch are the same
      on every process (the weights are: gradients are averaged at every
      synchronised step).
    * **Gradient accumulation** (``Accelerator(gradient_accumulation_steps=k)``):
      the optimizer steps, then zeroes the gradients, after the backward pass
      of every ``k``-th batch and of the epoch's last one.
      ``AccelerateMixin`` zeroes them *before* each backward pass, which
      discards what was accumulated.  ``on_grad_computed`` callbacks run on
      synchronised steps only, with unscaled gradients under fp16.
    * **Learning-rate schedule**: advances once per optimizer step (its length
      must be counted in those, :func:`optimizer_steps_per_epoch`).
    * **Unwrapping** happens after every ``on_train_end`` callback, so a
      best-epoch restore loads into the wrapped model it copied from.
    * **Preparation** skips criteria without trainable parameters (distributed
      data parallelism refuses to wrap them).
    * **Devices**: pass ``device=str(accelerator.device)``; the net places the
      model and batches itself, so ``AccelerateMixin``'s device check is
      skipped.
    * Progress bars and skorch's epoch table (``verbose``) show on the main process only.

    Parameters
    ----------
    accelerator : accelerate.Accelerator
    **kwargs
        Of :class:`~skorch.hf.AccelerateMixin` and of the net.

    Notes
    -----
    Like every net prepared by Accelerate it is not meant to be pickled;
    fmmlearn keeps only the unwrapped model after ``fit``.
    """

    def initialize(self):
        # AccelerateMixin.initialize re-implements NeuralNet.initialize and so
        # skips the net's own (MaskedFineTuningNet seeds its generators there).
        super(AccelerateMixin, self).initialize()
        self._wrapped_with_accelerator = False  # a fresh model and optimizer: prepare them (again)
        self._initialize_accelerator()
        return self

    def _initialize_accelerator(self):
        """Prepare modules, optimizers and the criteria that have trainable parameters.

        ``AccelerateMixin`` prepares every criterion, and a parameter-free one
        (``CrossEntropyLoss``) makes distributed data parallelism refuse to
        start; it has nothing to synchronise anyway.
        """
        if self._wrapped_with_accelerator:
            return self
        for kind, names in (("module", self._modules), ("criterion", self._criteria)):
            with self._current_init_context(kind):
                for name in names:
                    module = getattr(self, name + "_")
                    if isinstance(module, torch.nn.Module) and any(p.requires_grad for p in module.parameters()):
                        setattr(self, name + "_", self.accelerator.prepare(module))
        with self._current_init_context("optimizer"):
            for name in self._optimizers:
                optimizer = getattr(self, name + "_")
                if isinstance(optimizer, torch.optim.Optimizer):
                    setattr(self, name + "_", self.accelerator.prepare(optimizer))
        self._wrapped_with_accelerator = True
        return self

    def _validate_params(self):
        # The net places model and batches on ``device`` (the accelerator's) itself.
        super(AccelerateMixin, self)._validate_params()

    def _initialize_callbacks(self):
        if self.callbacks__print_log__sink == "auto":
            # PrintLog prints to any sink but print() whatever ``verbose`` says: keep skorch's rule.
            self.callbacks__print_log__sink = self._print_log
        super()._initialize_callbacks()
        if not self.accelerator.is_main_process:  # one progress bar per launch, not one per process
            self.callbacks_ = [(name, cb) for name, cb in self.callbacks_ if not isinstance(cb, ProgressBar)]
        return self

    def _print_log(self, *args, **kwargs):
        """skorch's epoch table (``verbose``), printed by the main process only."""
        if self.verbose:
            self.accelerator.print(*args, **kwargs)

    def get_iterator(self, dataset, training=False):
        loader = super(AccelerateMixin, self).get_iterator(dataset, training=training)
        if not training:
            return loader
        sampler = ProcessBatchSampler(loader.batch_sampler, self.accelerator.process_index,
                                      self.accelerator.num_processes)
        return _epoch_loader_class()(loader.dataset, batch_sampler=sampler, collate_fn=loader.collate_fn)

    def train_step(self, batch, **fit_params):
        with self.accelerator.accumulate(self.module_):
            step = self.train_step_single(batch, **fit_params)  # AccelerateMixin's: autocast, accelerator.backward
            optimizers = [getattr(self, name + "_") for name in self._optimizers]
            if self.accelerator.sync_gradients:
                if self.accelerator.scaler is not None:
                    self.accelerator.unscale_gradients(optimizers)
                self.notify("on_grad_computed", named_parameters=TeeGenerator(self.get_all_learnable_params()),
                            batch=batch)
            for optimizer in optimizers:  # Accelerate's optimizers skip both between synchronisations
                optimizer.step()
                optimizer.zero_grad()
        return step

    def notify(self, method_name, **cb_kwargs):
        super().notify(method_name, **cb_kwargs)
        if method_name == "on_train_begin":  # the callbacks have built their schedulers by now
            self._step_schedulers_with_optimizer()
        elif method_name == "on_train_end":
            self._unwrap_accelerator()

    def _step_schedulers_with_optimizer(self):
        from accelerate.scheduler import AcceleratedScheduler

        optimizers = [getattr(self, name + "_") for name in self._optimizers]
        for _, callback in self.callbacks_:
            scheduler = getattr(callback, "lr_scheduler_", None)
            if isinstance(callback, LRScheduler) and scheduler is not None \
                    and not isinstance(scheduler, AcceleratedScheduler):
                # split_batches=True: one scheduler step per optimizer step, whatever the process count.
                callback.lr_scheduler_ = AcceleratedScheduler(scheduler, optimizers, step_with_optimizer=True,
                                                              split_batches=True)


def accelerated_net_options(accelerator, seed: int) -> dict:
    """Keyword arguments that make a net built with :class:`AcceleratedTrainingMixin` train on ``accelerator``.

    Its device, this process's masking seed (:func:`process_seed`), mixed
    precision left to Accelerate, and unwrapping left to the mixin.
    """
    return {"accelerator": accelerator, "device": str(accelerator.device), "autocast_dtype": None,
            "mask_seed": process_seed(seed, accelerator.process_index, accelerator.num_processes),
            "unwrap_after_train": False}


_MIXED_PRECISION = {None: "no", torch.bfloat16: "bf16", torch.float16: "fp16"}


def make_accelerator(accelerator, *, device="auto", precision="auto", gradient_accumulation_steps: int = 1):
    """The ``Accelerator`` a fit trains with, and whether the fit created it (and so frees it afterwards).

    Parameters
    ----------
    accelerator : None, "auto" or accelerate.Accelerator
        ``None``: no Accelerate (then ``gradient_accumulation_steps`` must be
        1; under a multi-process launch a warning says that every process
        then trains alone).  ``"auto"``: a new ``Accelerator`` for this fit --
        on the process's device (``device="cpu"`` forces the CPU), with mixed
        precision from ``precision`` (``"auto"`` defers to the launch's
        ``--mixed_precision``, ``"no"`` unless it says otherwise) and
        ``gradient_accumulation_steps``.  An
        ``Accelerator``: used as it is (its mixed precision and accumulation
        govern training).
    device : str or torch.device, default="auto"
        The estimator's ``device``: ``"auto"`` or ``"cpu"`` with an accelerator
        (Accelerate places one model per process).
    precision : {"auto", "fp32", "bf16", "fp16"}, default="auto"
    gradient_accumulation_steps : int, default=1

    Returns
    -------
    accelerator : accelerate.Accelerator or None
    created : bool

    Raises
    ------
    ImportError
        When Accelerate is not installed (naming the extra).
    ValueError
        For a device other than ``"auto"``/``"cpu"``, accumulation without an
        accelerator, or an accumulation that contradicts the given accelerator.
    """
    if accelerator is None:
        if gradient_accumulation_steps != 1:
            raise ValueError(f"gradient_accumulation_steps={gradient_accumulation_steps} needs an accelerator: pass "
                             "accelerator='auto' (Hugging Face Accelerate accumulates the gradients).")
        if launched_processes() > 1:
            warnings.warn(f"this process is one of {launched_processes()} launched together, but accelerator=None: "
                          "every process trains its own model on all the data; pass accelerator='auto' to train "
                          "data-parallel (docs/scaling.md).", UserWarning, stacklevel=3)
        return None, False
    accelerate = require("accelerate", f"accelerator={accelerator!r}")
    if str(device) not in ("auto", "cpu"):
        raise ValueError(f"device={str(device)!r} cannot be combined with an accelerator: Accelerate puts one model on "
                         "each process's device; pass device='auto' (or 'cpu' to train on CPUs).")
    if not isinstance(accelerator, str):
        steps = accelerator.gradient_accumulation_steps
        if gradient_accumulation_steps not in (1, steps):
            raise ValueError(f"gradient_accumulation_steps={gradient_accumulation_steps} contradicts the given "
                             f"Accelerator's gradient_accumulation_steps={steps}; set it on the Accelerator only.")
        return accelerator, False
    from .modeling import resolve_precision

    cpu = str(device) == "cpu" or _use_cpu()
    mixed = None  # the launch's --mixed_precision (ACCELERATE_MIXED_PRECISION), "no" without one
    if precision != "auto" or "ACCELERATE_MIXED_PRECISION" not in os.environ:
        mixed = _MIXED_PRECISION[resolve_precision(precision, accelerate.PartialState(cpu=cpu).device)]
    try:
        created = accelerate.Accelerator(cpu=cpu, mixed_precision=mixed,
                                         gradient_accumulation_steps=gradient_accumulation_steps)
    except ValueError as exc:  # e.g. another mixed precision than this process's Accelerate state
        raise ValueError(f"accelerator='auto' could not create an Accelerator (mixed_precision={mixed!r}): {exc}") \
            from exc
    return created, True


# --------------------------------------------------------------------------- Dask


@contextlib.contextmanager
def dask_backend(address: str):
    """Connect to a Dask scheduler and run joblib's tasks on its workers, for the ``with`` block.

    ``GridSearchCV(..., n_jobs=-1)``, ``cross_validate`` and the study's
    (masking ratio, seed) fits then run as Dask tasks.  Each worker loads the
    model itself from its ``model`` parameter (the bundled name, a directory
    every worker can read, or a hub name), so tasks carry parameters and
    texts, not weights.

    Parameters
    ----------
    address : str
        The scheduler, e.g. ``"tcp://10.0.0.5:8786"``.

    Yields
    ------
    distributed.Client
    """
    distributed = require("distributed", "dask_backend() and --dask-scheduler")
    import joblib

    with distributed.Client(address) as client, joblib.parallel_config(backend="dask", n_jobs=-1):
        yield client

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
import functools
import os

import numpy as np
import torch
from skorch.callbacks import LRScheduler, ProgressBar
from skorch.hf import AccelerateMixin
from skorch.utils import TeeGenerator
from torch.utils.data import DataLoader

# Process facts live below the runtime (fmmlearn.utils._processes); re-exported here, their public home.
from .utils import (
    DISTRIBUTED_EXTRA,
    EXIT_BARRIER_TIMEOUT_S,
    batches_for_this_process,
    derive_seed,
    gather_objects,
    is_main_process,
    launched_processes,
    local_only,
    num_processes,
    process_device_index,
    process_index,
    require,
    shard_batches,
    use_cpu,
    warn,
)

__all__ = [
    "AcceleratedTrainingMixin",
    "DISTRIBUTED_EXTRA",
    "EXIT_BARRIER_TIMEOUT_S",
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


# A derive_seed key of its own for the per-process masking streams, apart from the
# (seed, 0 | 1 | 2 | 3, ...) paths of the explanation and faithfulness code.
_PROCESS_STREAM = 1009


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
    :class:`~fmmlearn.estimator.MaskedFineTuningNet`.

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
        return _epoch_loader_class()(loader.dataset, batch_sampler=sampler, collate_fn=loader.collate_fn,
                                     **self.loader_options(training))

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
            warn(f"this process is one of {launched_processes()} launched together, but accelerator=None: "
                 "every process trains its own model on all the data; pass accelerator='auto' to train "
                 "data-parallel (docs/scaling.md).")
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

    cpu = str(device) == "cpu" or use_cpu()
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

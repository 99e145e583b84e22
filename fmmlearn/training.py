"""Masked fine-tuning as a skorch net (Madsen et al., 2024; docs/classifier.md).

:class:`MaskedFineTuningNet` is a :class:`skorch.NeuralNet` whose data
loaders pad per batch (training batches grouped by length, or uniformly
shuffled like the reference's) and whose training collate function masks
each freshly drawn batch with the chosen strategy.
Validation batches are never masked on the fly: the ``"masked"`` part of the
validation set is a copy masked once, before the first epoch, as in the paper.
Small callbacks add the selection metric, best-epoch restore and the
warm-up/decay learning-rate schedule (counted in steps, or the reference's
schedule counted in examples).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np
import torch
from skorch import NeuralNet
from skorch.callbacks import Callback, LRScheduler, ProgressBar
from skorch.helper import predefined_split
from skorch.utils import TeeGenerator
from torch.utils.data import DataLoader, Dataset

from .distributed import AcceleratedTrainingMixin
from .encoding import Encoding, collate, length_grouped_batches
from .masking import mask_training_batch, maskable_positions, random_max_masking
from .modeling import autocast, logits_of, probabilities
from .utils import warn

__all__ = [
    "LR_SCHEDULES",
    "AcceleratedMaskedFineTuningNet",
    "BestEpochRestorer",
    "EncodedDataset",
    "LengthGroupedBatchSampler",
    "MaskedFineTuningNet",
    "SelectionMetric",
    "UniformBatchSampler",
    "build_callbacks",
    "concat_encodings",
    "history_frame",
    "linear_warmup_decay",
    "lr_multiplier",
    "make_net",
    "mask_encoding",
    "no_decay_param_groups",
    "random_masker",
    "reference_warmup_decay",
    "training_batch_sampler",
]

#: Values of ``FaithfulTextClassifier(lr_schedule=...)`` (docs/classifier.md).
LR_SCHEDULES = ("linear", "reference")


# --------------------------------------------------------------------------- data


class EncodedDataset(Dataset):
    """An :class:`~fmmlearn.encoding.Encoding` plus integer targets; items are indices.

    Collation (padding, masking) happens per batch in the loader, so the
    dataset only hands out positions.
    """

    def __init__(self, encoding: Encoding, targets: np.ndarray):
        self.encoding = encoding
        self.targets = torch.as_tensor(np.asarray(targets, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.encoding)

    def __getitem__(self, i: int) -> int:
        return i


class _EpochBatchSampler:
    """A batch sampler over example lengths; each ``iter()`` is one epoch's batches from ``generator``."""

    def __init__(self, lengths: np.ndarray, batch_size: int, shuffle: bool, generator: np.random.Generator):
        self.lengths = np.asarray(lengths)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.generator = generator

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)


class LengthGroupedBatchSampler(_EpochBatchSampler):
    """Batch sampler over :func:`~fmmlearn.encoding.length_grouped_batches`.

    Each ``iter()`` (one per epoch) draws a new shuffle from the same generator,
    so epochs differ but the whole run is reproducible.
    """

    def __iter__(self):
        yield from length_grouped_batches(
            self.lengths, self.batch_size, shuffle=self.shuffle, generator=self.generator
        )


class UniformBatchSampler(_EpochBatchSampler):
    """The reference's batch order: a fresh uniform permutation per epoch, cut into consecutive batches.

    Batch membership is independent of length (unlike
    :class:`LengthGroupedBatchSampler`); padding is still per batch.  Same
    constructor as :class:`LengthGroupedBatchSampler`; without ``shuffle``
    the examples come in input order.
    """

    def __iter__(self):
        n = len(self.lengths)
        order = self.generator.permutation(n) if self.shuffle else np.arange(n)
        for start in range(0, n, self.batch_size):
            yield order[start : start + self.batch_size]


def training_batch_sampler(lengths, batch_size: int, generator: np.random.Generator, *, group_by_length: bool = True):
    """The batch sampler of masked fine-tuning, one ``iter()`` per epoch (shared with MaSF calibration).

    ``group_by_length=True`` draws length-grouped batches
    (:class:`LengthGroupedBatchSampler`, less padding); ``False`` draws
    uniformly shuffled ones like the paper's reference code
    (:class:`UniformBatchSampler`).  :func:`fmmlearn.ood.mask_like_training`
    calls this with the estimator's setting, so calibration batches are
    the training batches.
    """
    kind = LengthGroupedBatchSampler if group_by_length else UniformBatchSampler
    return kind(lengths, batch_size, shuffle=True, generator=generator)


def mask_encoding(encoding: Encoding, mask_fn: Callable, pad_token_id: int, batch_size: int = 256) -> Encoding:
    """Return a copy of ``encoding`` whose ids went through ``mask_fn(batch) -> ids``.

    Used to draw the fixed masked copy of the validation set once.
    """
    masked = list(encoding.input_ids)
    for idx in length_grouped_batches(encoding.lengths, batch_size):
        batch = collate(encoding, idx, pad_token_id)
        ids = mask_fn(batch).numpy()
        for row, i in enumerate(idx):
            masked[i] = ids[row, : len(encoding.input_ids[i])].copy()
    out = encoding.subset(np.arange(len(encoding)))
    out.input_ids = masked
    return out


def random_masker(max_ratio: float, mask_token_id: int, seed: int) -> Callable:
    """``batch -> ids`` applying random-max masking to every row, from its own seeded generator.

    Draws the fixed masked copy of the validation set (drawn once, as in the paper).
    """
    generator = torch.Generator(device="cpu").manual_seed(seed)

    def mask(batch):
        maskable = maskable_positions(batch.attention_mask, batch.special_tokens_mask)
        return random_max_masking(batch.input_ids, maskable, max_ratio, mask_token_id, generator)

    return mask


def concat_encodings(first: Encoding, second: Encoding) -> Encoding:
    """Concatenate two encodings of the same kind (e.g. clean + masked validation)."""
    both = first.subset(np.arange(len(first)))
    for name in ("input_ids", "special_tokens_mask", "segment_ids", "word_ids", "offsets", "texts"):
        setattr(both, name, getattr(first, name) + getattr(second, name))
    if first.token_type_ids is not None:
        both.token_type_ids = first.token_type_ids + second.token_type_ids
    both.truncated = np.concatenate([first.truncated, second.truncated])
    return both


# --------------------------------------------------------------------------- optimisation


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


def no_decay_param_groups() -> list:
    """skorch ``param_groups``: no weight decay on biases and LayerNorm weights (as in the paper)."""
    no_decay = {"weight_decay": 0.0}
    return [("*bias", no_decay), ("*LayerNorm*", no_decay), ("*layer_norm*", no_decay)]


# --------------------------------------------------------------------------- callbacks


class SelectionMetric(Callback):
    """Compute the model-selection metric over the whole validation set each epoch.

    Metrics are computed over the full validation concatenation at once, not
    averaged per batch, with every class passed as ``labels`` (so macro-F1
    counts a class absent from a small split as 0, as the reference does).

    Parameters
    ----------
    name : str
        History key, e.g. ``"valid_accuracy"``.
    metric : fmmlearn.metrics.Metric
        Uses predicted labels or, for ``needs_proba`` metrics (the loss),
        softmax probabilities.
    n_classes : int
    """

    def __init__(self, name: str, metric, n_classes: int):
        self.name = name
        self.metric = metric
        self.n_classes = n_classes

    def on_epoch_begin(self, net, **kwargs):
        self._true, self._logits = [], []

    def on_batch_end(self, net, batch=None, training=False, y_pred=None, **kwargs):
        if training:
            return
        self._true.append(batch[1].cpu().numpy())
        self._logits.append(y_pred.detach().float().cpu())

    def on_epoch_end(self, net, **kwargs):
        if not self._true:
            return
        logits = torch.cat(self._logits)
        value = self.metric.score(
            np.concatenate(self._true),
            y_pred=logits.argmax(dim=1).numpy(),
            y_proba=probabilities(logits),
            labels=np.arange(self.n_classes),
        )
        net.history.record(self.name, float(value))


class BestEpochRestorer(Callback):
    """Keep the weights of the epoch with the best ``monitor`` and restore them at the end.

    The first epoch is always kept; later epochs replace it only on strict
    improvement, so ties keep the earlier epoch (the paper's rule).  Weights are copied
    in memory (no checkpoint files).

    Parameters
    ----------
    monitor : str
        History key of the selection metric.
    greater_is_better : bool, default=True
        ``False`` for losses.
    """

    def __init__(self, monitor: str, greater_is_better: bool = True):
        self.monitor = monitor
        self.greater_is_better = greater_is_better

    def on_train_begin(self, net, **kwargs):
        self.best_score_, self.best_epoch_, self._state = -np.inf, None, None

    def on_epoch_end(self, net, **kwargs):
        score = net.history[-1, self.monitor] * (1 if self.greater_is_better else -1)
        improved = self._state is None or score > self.best_score_
        net.history.record(self.monitor + "_best", bool(improved))
        if improved:
            self.best_score_, self.best_epoch_ = score, net.history[-1, "epoch"]
            self._state = {k: v.detach().to("cpu", copy=True) for k, v in net.module_.state_dict().items()}

    def on_train_end(self, net, **kwargs):
        if self._state is not None:
            net.module_.load_state_dict(self._state)


# --------------------------------------------------------------------------- the net


class MaskedFineTuningNet(NeuralNet):
    """A skorch net that fine-tunes a Hugging Face classifier with random token masking.

    Parameters
    ----------
    module : torch.nn.Module
        An initialised Hugging Face sequence classifier.
    mask_token_id, pad_token_id : int
    masking_strategy : {"half-det", "half-ran", "uni"}
    max_masking_ratio : float
    seed : int
        Seeds the batch order and masking generators.
    autocast_dtype : torch.dtype or None
        Mixed-precision dtype (bf16/fp16) or ``None`` for fp32.
    group_by_length : bool, default=True
        Training batches of similar length (less padding) or uniformly
        shuffled ones, as in the reference (:func:`training_batch_sampler`).
    mask_seed : int, optional
        Seed of the masking generator alone; default ``seed``.  Each process
        of a data-parallel fit masks from its own
        (:func:`fmmlearn.distributed.process_seed`) while all share the batch order.
    **kwargs
        Passed to :class:`skorch.NeuralNet`.
    """

    def __init__(
        self,
        module,
        *,
        mask_token_id: int,
        pad_token_id: int,
        masking_strategy: str = "half-det",
        max_masking_ratio: float = 1.0,
        seed: int = 0,
        autocast_dtype=None,
        group_by_length: bool = True,
        mask_seed: int | None = None,
        **kwargs,
    ):
        super().__init__(module, **kwargs)
        self.mask_token_id = mask_token_id
        self.pad_token_id = pad_token_id
        self.masking_strategy = masking_strategy
        self.max_masking_ratio = max_masking_ratio
        self.seed = seed
        self.autocast_dtype = autocast_dtype
        self.group_by_length = group_by_length
        self.mask_seed = mask_seed

    def initialize(self):
        super().initialize()
        self.order_rng_ = np.random.default_rng(self.seed)
        self.mask_rng_ = torch.Generator(device="cpu").manual_seed(self.seed if self.mask_seed is None
                                                                   else self.mask_seed)
        use_scaler = self.autocast_dtype == torch.float16
        self.grad_scaler_ = torch.amp.GradScaler("cuda") if use_scaler else None
        return self

    # ---- data loading: length grouping, dynamic padding, masking of training batches
    def get_iterator(self, dataset, training=False):
        lengths = dataset.encoding.lengths
        if training:
            sampler = training_batch_sampler(lengths, self.batch_size, self.order_rng_,
                                             group_by_length=self.group_by_length)
        else:   # evaluation order does not change any result: longest first, least padding
            sampler = LengthGroupedBatchSampler(lengths, self.batch_size, False, self.order_rng_)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=partial(self._collate, dataset, training),
                          **self.loader_options(training))

    def loader_options(self, training: bool) -> dict:
        """The ``iterator_train__``/``iterator_valid__`` settings (e.g. ``pin_memory``) for the ``DataLoader``.

        Parameters
        ----------
        training : bool
            The training loader's settings (else the validation loader's).

        Returns
        -------
        dict
            Keyword arguments of ``torch.utils.data.DataLoader``, without ``batch_size``.
        """
        options = self.get_params_for("iterator_train" if training else "iterator_valid")
        options.pop("batch_size", None)  # skorch fills it in from ``batch_size``: the batch sampler has it
        return options

    def _collate(self, dataset: EncodedDataset, training: bool, indices: list):
        batch = collate(dataset.encoding, indices, self.pad_token_id)
        ids = batch.input_ids
        if training:
            ids = mask_training_batch(batch, strategy=self.masking_strategy, max_ratio=self.max_masking_ratio,
                                      mask_token_id=self.mask_token_id, generator=self.mask_rng_)
        return batch.model_inputs(ids), dataset.targets[batch.index]

    # ---- forward: logits from the HF output, under autocast
    def infer(self, x, **fit_params):
        x = {k: v.to(self.device) for k, v in x.items()}
        with autocast(torch.device(self.device), self.autocast_dtype):
            out = self.module_(**x, **fit_params)
        return logits_of(out).float()

    def train_step_single(self, batch, **fit_params):
        if self.grad_scaler_ is None:
            return super().train_step_single(batch, **fit_params)
        self.module_.train()
        self.criterion_.train()
        x, y = batch
        y_pred = self.infer(x, **fit_params)
        loss = self.get_loss(y_pred, y, X=x, training=True)
        self.grad_scaler_.scale(loss).backward()
        return {"loss": loss, "y_pred": y_pred}

    def train_step(self, batch, **fit_params):
        """One optimisation step; under fp16 autocast with a loss-scaling ``GradScaler``.

        skorch's public hook: without a scaler this is skorch's own step.  With
        one, the scaled loss is back-propagated, the gradients are unscaled
        before ``on_grad_computed`` callbacks see them (so e.g. clipping works
        on true gradients), and the scaler skips steps with overflowed
        gradients.
        """
        if self.grad_scaler_ is None:
            return super().train_step(batch, **fit_params)
        self.optimizer_.zero_grad()
        step = self.train_step_single(batch, **fit_params)
        self.grad_scaler_.unscale_(self.optimizer_)
        self.notify("on_grad_computed", named_parameters=TeeGenerator(self.get_all_learnable_params()), batch=batch)
        self.grad_scaler_.step(self.optimizer_)
        self.grad_scaler_.update()
        return step


class AcceleratedMaskedFineTuningNet(AcceleratedTrainingMixin, MaskedFineTuningNet):
    """:class:`MaskedFineTuningNet` trained data-parallel by Hugging Face Accelerate (docs/scaling.md).

    Each process trains on its disjoint share of every epoch's (length-grouped)
    batches, masked from its own stream (``mask_seed``); see
    :class:`fmmlearn.distributed.AcceleratedTrainingMixin`.  Built by
    :func:`make_net` when given an ``accelerator``.
    """


def build_callbacks(
    *,
    total_steps: int,
    warmup_ratio: float,
    metric_name: str | None,
    metric,
    n_classes: int,
    verbose: int,
    lr_lambda: Callable[[int], float] | None = None,
) -> list:
    """The callbacks of a masked fine-tuning run, in the order they must run.

    ``lr_lambda`` (e.g. from :func:`lr_multiplier`) replaces the default
    ``linear_warmup_decay(total_steps, warmup_ratio)``.
    """
    callbacks = [
        ("lr_schedule", LRScheduler(
            policy=torch.optim.lr_scheduler.LambdaLR,
            lr_lambda=lr_lambda if lr_lambda is not None else linear_warmup_decay(total_steps, warmup_ratio),
            step_every="batch",
        )),
    ]
    if metric is not None:
        callbacks.append(("selection_metric", SelectionMetric(metric_name, metric, n_classes)))
        callbacks.append(("best_epoch", BestEpochRestorer(metric_name, metric.greater_is_better)))
    if verbose:
        callbacks.append(("progress", ProgressBar(postfix_keys=["train_loss", "valid_loss"])))
    return callbacks


def make_net(
    model,
    *,
    train_dataset: EncodedDataset,
    valid_dataset: EncodedDataset | None,
    mask_token_id: int,
    pad_token_id: int,
    masking_strategy: str,
    max_masking_ratio: float,
    max_epochs: int,
    batch_size: int,
    learning_rate: float,
    weight_decay: float,
    warmup_ratio: float,
    device: torch.device,
    autocast_dtype,
    seed: int,
    metric_name: str | None,
    metric,
    n_classes: int,
    verbose: int,
    lr_schedule: str = "linear",
    group_by_length: bool = True,
    accelerator=None,
    callbacks=None,
    net_params: dict | None = None,
) -> MaskedFineTuningNet:
    """Assemble the skorch net for one fit (AdamW, schedule, selection, progress).

    ``lr_schedule`` is ``"linear"`` or ``"reference"`` (:func:`lr_multiplier`);
    ``group_by_length`` picks the training batch order
    (:func:`training_batch_sampler`).  With an ``accelerate.Accelerator`` the
    net is an :class:`AcceleratedMaskedFineTuningNet` (data-parallel, docs/scaling.md):
    the schedule counts this process's optimisation steps, and Accelerate's
    mixed precision replaces ``autocast_dtype``.  ``callbacks`` (skorch
    callbacks or ``(name, callback)`` pairs) run after fmmlearn's own;
    ``net_params`` (the estimator's ``net__`` parameters, prefix removed) are
    passed to the net last.  With another ``optimizer`` than AdamW, AdamW's
    ``betas`` and ``eps`` are not passed.
    """
    steps_per_epoch = -(-len(train_dataset) // batch_size)
    net_class, options = MaskedFineTuningNet, {"device": str(device), "autocast_dtype": autocast_dtype}
    if accelerator is not None:
        from .distributed import accelerated_net_options, optimizer_steps_per_epoch

        if len(train_dataset) < accelerator.num_processes:
            raise ValueError(f"{len(train_dataset)} training examples cannot be shared by "
                             f"{accelerator.num_processes} processes; data-parallel training needs at least one each.")
        steps_per_epoch = optimizer_steps_per_epoch(steps_per_epoch, accelerator.num_processes,
                                                    accelerator.gradient_accumulation_steps)
        net_class, options = AcceleratedMaskedFineTuningNet, accelerated_net_options(accelerator, seed)
    has_valid = valid_dataset is not None
    schedule = lr_multiplier(lr_schedule, max_epochs=max_epochs, n_train_examples=len(train_dataset),
                             batch_size=batch_size, warmup_ratio=warmup_ratio, steps_per_epoch=steps_per_epoch)
    net_params = dict(net_params or {})
    if net_params.get("optimizer", torch.optim.AdamW) is torch.optim.AdamW:
        options.update(optimizer__betas=(0.9, 0.999), optimizer__eps=1e-8)
    settings = dict(
        mask_token_id=mask_token_id,
        pad_token_id=pad_token_id,
        masking_strategy=masking_strategy,
        max_masking_ratio=max_masking_ratio,
        seed=seed,
        group_by_length=group_by_length,
        criterion=torch.nn.CrossEntropyLoss,
        optimizer=torch.optim.AdamW,
        optimizer__weight_decay=weight_decay,
        optimizer__param_groups=no_decay_param_groups(),
        lr=learning_rate,
        max_epochs=max_epochs,
        batch_size=batch_size,
        train_split=predefined_split(valid_dataset) if has_valid else None,
        callbacks=build_callbacks(
            total_steps=max_epochs * steps_per_epoch,
            warmup_ratio=warmup_ratio,
            metric_name=metric_name if has_valid else None,
            metric=metric if has_valid else None,
            n_classes=n_classes,
            verbose=verbose,
            lr_lambda=schedule,
        ) + list(callbacks or []),
        verbose=max(0, int(verbose) - 1),
    )
    return net_class(model, **{**settings, **options, **net_params})  # the estimator's net__ settings last


def history_frame(net: NeuralNet):
    """The per-epoch history of a skorch net as a DataFrame (batch-level records dropped)."""
    import pandas as pd

    rows = [{k: v for k, v in epoch.items() if k != "batches"} for epoch in net.history]
    frame = pd.DataFrame(rows)
    keep = [c for c in frame.columns if not c.endswith("_batch_count")]
    return frame[keep].set_index("epoch") if "epoch" in frame else frame


"""Masked fine-tuning as a skorch net (Madsen et al., 2024; docs/classifier.md).

:class:`MaskedFineTuningNet` is a :class:`skorch.NeuralNet` whose data
loaders pad per batch (training batches grouped by length, or uniformly
shuffled like the reference's: :func:`fmmlearn.encoding.training_batch_sampler`)
and whose training collate function masks each freshly drawn batch with the
chosen strategy.  Validation batches are never masked on the fly: the
``"masked"`` part of the validation set is a copy masked once, before the
first epoch, as in the paper (``_data``).  :func:`make_net` assembles one
fit's net: AdamW, the learning-rate schedule (``_schedules``), the selection
metric and best-epoch restore (``callbacks``), and the progress bar.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np
import torch
from skorch import NeuralNet
from skorch.callbacks import LRScheduler, ProgressBar
from skorch.helper import predefined_split
from skorch.utils import TeeGenerator
from torch.utils.data import DataLoader

from ..distributed import AcceleratedTrainingMixin
from ..encoding import LengthGroupedBatchSampler, collate, training_batch_sampler
from ..masking import mask_training_batch
from ..modeling import autocast, logits_of
from ._data import EncodedDataset
from ._schedules import linear_warmup_decay, lr_multiplier
from .callbacks import BestEpochRestorer, SelectionMetric

__all__ = ["AcceleratedMaskedFineTuningNet", "MaskedFineTuningNet", "build_callbacks", "history_frame", "make_net",
           "no_decay_param_groups"]


def no_decay_param_groups() -> list:
    """skorch ``param_groups``: no weight decay on biases and LayerNorm weights (as in the paper)."""
    no_decay = {"weight_decay": 0.0}
    return [("*bias", no_decay), ("*LayerNorm*", no_decay), ("*layer_norm*", no_decay)]


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
        shuffled ones, as in the reference (:func:`fmmlearn.encoding.training_batch_sampler`).
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
            sampler = training_batch_sampler(lengths, batch_size=self.batch_size, generator=self.order_rng_,
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
        batch = collate(dataset.encoding, indices, pad_token_id=self.pad_token_id)
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
    (:func:`fmmlearn.encoding.training_batch_sampler`).  With an ``accelerate.Accelerator`` the
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
        from ..distributed import accelerated_net_options, optimizer_steps_per_epoch

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

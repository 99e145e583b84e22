"""Masked fine-tuning as a skorch net (Madsen et al., 2024; docs/classifier.md).

:class:`MaskedFineTuningNet` is a :class:`skorch.NeuralNet` whose data
loaders group examples of similar length (dynamic padding) and whose training
collate function masks each freshly drawn batch with the chosen strategy.
Validation batches are never masked on the fly: the ``"masked"`` part of the
validation set is a copy masked once, before the first epoch, as in the paper.
Small callbacks add the selection metric, best-epoch restore and the
warm-up/decay learning-rate schedule.
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

from .encoding import Encoding, collate, length_grouped_batches
from .masking import mask_training_batch, maskable_positions, random_max_masking
from .modeling import autocast, logits_of

__all__ = [
    "BestEpochRestorer",
    "EncodedDataset",
    "LengthGroupedBatchSampler",
    "MaskedFineTuningNet",
    "SelectionMetric",
    "build_callbacks",
    "concat_encodings",
    "history_frame",
    "linear_warmup_decay",
    "make_net",
    "mask_encoding",
    "no_decay_param_groups",
    "random_masker",
]


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


class LengthGroupedBatchSampler:
    """Batch sampler over :func:`~fmmlearn.encoding.length_grouped_batches`.

    Each ``iter()`` (one per epoch) draws a new shuffle from the same generator,
    so epochs differ but the whole run is reproducible.
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, shuffle: bool, generator: np.random.Generator):
        self.lengths = np.asarray(lengths)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.generator = generator

    def __iter__(self):
        yield from length_grouped_batches(
            self.lengths, self.batch_size, shuffle=self.shuffle, generator=self.generator
        )

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)


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
            y_proba=torch.softmax(logits.double(), dim=1).numpy(),
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
        **kwargs,
    ):
        super().__init__(module, **kwargs)
        self.mask_token_id = mask_token_id
        self.pad_token_id = pad_token_id
        self.masking_strategy = masking_strategy
        self.max_masking_ratio = max_masking_ratio
        self.seed = seed
        self.autocast_dtype = autocast_dtype

    def initialize(self):
        super().initialize()
        self.order_rng_ = np.random.default_rng(self.seed)
        self.mask_rng_ = torch.Generator(device="cpu").manual_seed(self.seed)
        use_scaler = self.autocast_dtype == torch.float16
        self.grad_scaler_ = torch.amp.GradScaler("cuda") if use_scaler else None
        return self

    # ---- data loading: length grouping, dynamic padding, masking of training batches
    def get_iterator(self, dataset, training=False):
        sampler = LengthGroupedBatchSampler(dataset.encoding.lengths, self.batch_size, training, self.order_rng_)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=partial(self._collate, dataset, training))

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
        self._set_training(True)
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


def build_callbacks(
    *,
    total_steps: int,
    warmup_ratio: float,
    metric_name: str | None,
    metric,
    n_classes: int,
    verbose: int,
) -> list:
    """The callbacks of a masked fine-tuning run, in the order they must run."""
    callbacks = [
        ("lr_schedule", LRScheduler(
            policy=torch.optim.lr_scheduler.LambdaLR,
            lr_lambda=linear_warmup_decay(total_steps, warmup_ratio),
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
) -> MaskedFineTuningNet:
    """Assemble the skorch net for one fit (AdamW, schedule, selection, progress)."""
    steps_per_epoch = -(-len(train_dataset) // batch_size)
    has_valid = valid_dataset is not None
    return MaskedFineTuningNet(
        model,
        mask_token_id=mask_token_id,
        pad_token_id=pad_token_id,
        masking_strategy=masking_strategy,
        max_masking_ratio=max_masking_ratio,
        seed=seed,
        autocast_dtype=autocast_dtype,
        criterion=torch.nn.CrossEntropyLoss,
        optimizer=torch.optim.AdamW,
        optimizer__weight_decay=weight_decay,
        optimizer__betas=(0.9, 0.999),
        optimizer__eps=1e-8,
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
        ),
        device=str(device),
        verbose=max(0, int(verbose) - 1),
    )


def history_frame(net: NeuralNet):
    """The per-epoch history of a skorch net as a DataFrame (batch-level records dropped)."""
    import pandas as pd

    rows = [{k: v for k, v in epoch.items() if k != "batches"} for epoch in net.history]
    frame = pd.DataFrame(rows)
    keep = [c for c in frame.columns if not c.endswith("_batch_count")]
    return frame[keep].set_index("epoch") if "epoch" in frame else frame


"""The model-selection metric, computed over the whole validation set each epoch."""

from __future__ import annotations

import numpy as np
import torch
from skorch.callbacks import Callback

from ...modeling import probabilities

__all__ = ["SelectionMetric"]


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

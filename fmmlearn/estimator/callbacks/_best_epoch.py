"""The weights of the best epoch, kept in memory and restored when training ends."""

from __future__ import annotations

import numpy as np
from skorch.callbacks import Callback

__all__ = ["BestEpochRestorer"]


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

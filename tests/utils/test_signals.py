"""An interrupt that a library swallows inside a long job is raised again (skorch ends a fit on Ctrl-C)."""

import os
import signal
import time

import pytest

from fmmlearn.utils._signals import not_swallowed, signals_as_interrupts
from fmmlearn.exceptions import JobInterrupted


def _swallowing_library_call():
    """What skorch's partial_fit does: catch KeyboardInterrupt and return normally."""
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises during the sleep
    except KeyboardInterrupt:
        pass


def test_an_interrupt_swallowed_inside_the_block_is_raised_again():
    with pytest.raises(JobInterrupted, match="SIGTERM"):
        with signals_as_interrupts(), not_swallowed():
            _swallowing_library_call()


def test_without_an_interrupt_the_block_returns_normally():
    with signals_as_interrupts(), not_swallowed():
        pass


def test_a_skorch_fit_interrupted_in_a_long_job_is_not_a_finished_fit():
    from skorch import NeuralNetClassifier
    import numpy as np
    import torch

    class Interrupting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)

        def forward(self, X):
            os.kill(os.getpid(), signal.SIGTERM)  # SIGINT may be ignored where CI runs us (nohup)
            time.sleep(0.5)
            return self.linear(X)

    net = NeuralNetClassifier(Interrupting, max_epochs=3, train_split=None, verbose=0)
    X, y = np.zeros((4, 2), dtype=np.float32), np.array([0, 1, 0, 1])
    with pytest.raises(JobInterrupted, match="SIGTERM"):
        with signals_as_interrupts(), not_swallowed():
            net.fit(X, y)

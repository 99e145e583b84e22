"""The runtime: batched execution with OOM back-off, rows in input order, precision resolution."""

import numpy as np
import pytest
import torch

from fmmlearn.modeling import (PRECISIONS, autocast_dtype_for, map_batches, resolve_device, resolve_precision,
                               run_in_batches)


class FakeOOM:
    """A function that runs out of memory for batches larger than ``limit`` and records every call."""

    def __init__(self, limit, error=torch.OutOfMemoryError):
        self.limit, self.error, self.calls = limit, error, []

    def __call__(self, idx):
        self.calls.append(np.asarray(idx).tolist())
        if len(idx) > self.limit:
            raise self.error("CUDA out of memory. Tried to allocate 2.00 GiB") if self.error is RuntimeError \
                else self.error("out of memory")
        return np.asarray(idx) * 10


@pytest.mark.parametrize("error", [torch.OutOfMemoryError, RuntimeError])
def test_run_in_batches_halves_a_batch_that_runs_out_of_memory(error):
    fn = FakeOOM(limit=2, error=error)
    results = run_in_batches(fn, [np.arange(8)])
    # 8 -> 4 + 4 -> (2 + 2) + (2 + 2): every example computed once, in order, at the largest size that fits
    assert fn.calls == [list(range(8)), [0, 1, 2, 3], [0, 1], [2, 3], [4, 5, 6, 7], [4, 5], [6, 7]]
    assert np.concatenate([r for _, r in results]).tolist() == [0, 10, 20, 30, 40, 50, 60, 70]


def test_run_in_batches_reraises_other_errors_and_single_example_oom():
    def broken(idx):
        raise RuntimeError("size mismatch")

    with pytest.raises(RuntimeError, match="size mismatch"):
        run_in_batches(broken, [np.arange(4)])
    with pytest.raises(torch.OutOfMemoryError):
        run_in_batches(FakeOOM(limit=0), [np.arange(2)])


def test_map_batches_returns_rows_in_input_order_longest_first():
    lengths = np.array([3, 7, 1, 5, 2])
    seen = []

    def fn(idx):
        seen.append(idx.tolist())
        return torch.as_tensor(lengths[idx] * 100)[:, None].repeat(1, 2)

    out = map_batches(fn, lengths, batch_size=2)
    assert seen == [[1, 3], [0, 4], [2]]  # longest first
    np.testing.assert_array_equal(out, np.stack([lengths * 100] * 2, axis=1))


def test_map_batches_ragged_rows_are_cut_to_each_examples_length_and_survive_oom_halving():
    lengths = np.array([2, 4, 3, 1])
    calls = []

    def fn(idx):
        calls.append(len(idx))
        if len(idx) > 2:
            raise torch.OutOfMemoryError("out of memory")
        width = lengths[idx].max()
        return np.tile(np.arange(width), (len(idx), 1)) + 10 * idx[:, None]

    out = map_batches(fn, lengths, batch_size=4, ragged=True)
    assert calls == [4, 2, 2]
    for i, n in enumerate(lengths):
        np.testing.assert_array_equal(out[i], np.arange(n) + 10 * i)


def test_map_batches_collects_several_outputs():
    lengths = np.array([2, 1, 3])
    first, second = map_batches(lambda idx: (idx[:, None], -idx[:, None]), lengths, batch_size=2)
    np.testing.assert_array_equal(first[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(second[:, 0], [0, -1, -2])


def test_map_batches_progress_bar_counts_examples(capsys):
    lengths = np.arange(1, 6)
    out = map_batches(lambda idx: idx[:, None], lengths, batch_size=2, desc="unit", verbose=1)
    assert out[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert "unit" in capsys.readouterr().err


def test_precision_resolution_on_the_cpu(monkeypatch):
    cpu = torch.device("cpu")
    assert resolve_precision("fp32", cpu) is None
    assert resolve_precision("bf16", cpu) is torch.bfloat16
    with pytest.raises(ValueError, match="fp16.*CUDA"):
        resolve_precision("fp16", cpu)
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("float64", cpu)
    assert set(PRECISIONS) == {"auto", "fp32", "bf16", "fp16"}


def test_autocast_dtype_for_keeps_gradient_measures_in_fp32_and_loo_beam_always():
    class Clf:
        inference_dtype_ = torch.bfloat16
        device_ = torch.device("cpu")

    class Measure:
        def __init__(self, uses_gradients):
            self.uses_gradients = uses_gradients

    clf = Clf()
    assert autocast_dtype_for(clf, Measure(True)) is None
    # forward-only measures (LOO, beam) rank by logit differences: fp32 by default and under "auto"
    assert autocast_dtype_for(clf, Measure(False)) is None
    assert autocast_dtype_for(clf, Measure(False), "auto") is None
    assert autocast_dtype_for(clf, Measure(True), "auto") is torch.bfloat16
    assert autocast_dtype_for(clf, Measure(False), "fp32") is None
    assert autocast_dtype_for(clf, Measure(False), "bf16") is torch.bfloat16  # an explicit request is honoured


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="device must be"):
        resolve_device("quantum")

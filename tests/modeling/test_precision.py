"""Precision by measurement: the probe, its cache, the choice per family, and ``fmmlearn info``.

Timing is faked: a forward hook advances a fake clock by a cost per token that depends on the
autocast dtype in force, and the probe reads that clock.  No real time is measured or asserted.
"""

import copy
import json

import numpy as np
import pytest
import torch

from fmmlearn import modeling
from fmmlearn.cli import main
from fmmlearn.modeling import (DEFAULT_TOKENS_PER_FORWARD, MIN_SPEEDUP, TOKEN_BUDGETS, autocast_dtype_for,
                               clear_probe_cache, measure_forward_rates, resolve_precision, tokens_per_forward)

from helpers.importance import tiny_bert


class FakeClock:
    """``clock()`` is the fake time; ``charge(model, cost)`` bills every forward pass of ``model``.

    ``cost(dtype, rows, width)`` is in seconds, ``dtype`` the autocast dtype in force (``None`` = fp32).
    """

    def __init__(self):
        self.now, self.forwards = 0.0, []

    def __call__(self):
        return self.now

    def charge(self, model, cost):
        def hook(module, args, kwargs, output):
            ids = kwargs["input_ids"]
            dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None
            self.forwards.append((dtype, tuple(ids.shape)))
            self.now += cost(dtype, *ids.shape)

        return model.register_forward_hook(hook, with_kwargs=True)


def per_token(fp32, bf16):
    return lambda dtype, rows, width: rows * width * (fp32 if dtype is None else bf16)


@pytest.fixture(autouse=True)
def fresh_probes():
    clear_probe_cache()
    yield
    clear_probe_cache()


@pytest.fixture
def native_bf16(monkeypatch):
    """Pretend this CPU runs bf16 natively (AVX512-BF16 / AMX), whatever it really has."""
    monkeypatch.setattr(modeling._devices, "reduced_dtype", lambda device: torch.bfloat16)


@pytest.fixture(scope="module")
def bert(tiny_model_dir):
    return tiny_bert(tiny_model_dir)


CPU = torch.device("cpu")


@pytest.mark.parametrize("bf16_cost, expected", [(0.5e-6, torch.bfloat16),   # 2x faster: used
                                                 (0.95e-6, None),             # 1.05x: within noise, fp32
                                                 (2e-6, None)])               # slower: fp32
def test_auto_uses_bf16_only_where_the_probe_measured_it_faster(bert, native_bf16, bf16_cost, expected):
    model, _ = bert
    clock = FakeClock()
    with clock.charge(model, per_token(1e-6, bf16_cost)):
        rates = measure_forward_rates(model, CPU, timer=clock)
    assert rates.speedup == pytest.approx(1e-6 / bf16_cost)
    assert rates.reduced_is_faster == (1e-6 / bf16_cost >= MIN_SPEEDUP)
    # the cached measurement decides every family; LOO/beam ("forward") are fp32 whatever was measured
    assert resolve_precision("auto", CPU, family="predict", model=model) is expected
    assert resolve_precision("auto", CPU, family="gradient", model=model) is expected
    assert resolve_precision("auto", CPU, family="forward", model=model) is None


def test_probe_interleaves_precisions_after_one_warm_up_each_and_respects_its_budget(bert, native_bf16):
    model, _ = bert
    clock = FakeClock()
    with clock.charge(model, per_token(1e-6, 0.5e-6)):
        measure_forward_rates(model, CPU, repeats=3, timer=clock)  # warm-ups ~0.8 ms: all 3 repeats fit
    dtypes = [d for d, _ in clock.forwards]
    assert dtypes == [None, torch.bfloat16] * 4
    clear_probe_cache()
    slow = FakeClock()
    with slow.charge(model, per_token(1e-3, 0.5e-3)):  # warm-ups take 0.77 s of a 1 s budget: one repeat
        measure_forward_rates(model, CPU, repeats=3, timer=slow)
    assert [d for d, _ in slow.forwards] == [None, torch.bfloat16] * 2


def test_probe_runs_once_per_architecture_and_shape(bert, native_bf16, tiny_model_dir):
    model, _ = bert
    clock = FakeClock()
    with clock.charge(model, per_token(1e-6, 0.5e-6)):
        first = measure_forward_rates(model, CPU, timer=clock)
        n = len(clock.forwards)
        assert resolve_precision("auto", CPU, model=model) is torch.bfloat16
        assert measure_forward_rates(model, CPU, timer=clock) is first
    twin, _ = tiny_bert(tiny_model_dir)  # same architecture, other weights: shares the measurement
    assert measure_forward_rates(twin, CPU, timer=clock) is first
    assert len(clock.forwards) == n
    with clock.charge(model, per_token(1e-6, 0.5e-6)):
        measure_forward_rates(model, CPU, shape=(2, 16), timer=clock)  # another shape is measured anew
    assert len(clock.forwards) > n


def test_bf16_is_not_probed_where_it_does_not_run_natively(bert, monkeypatch):
    monkeypatch.setattr(modeling._devices, "reduced_dtype", lambda device: None)
    model, _ = bert
    clock = FakeClock()
    with clock.charge(model, per_token(1e-6, 1e-9)):  # bf16 would look fast, but must not even be tried
        rates = measure_forward_rates(model, CPU, timer=clock)
    assert {d for d, _ in clock.forwards} == {None}
    assert rates.reduced is None and rates.speedup is None and not rates.reduced_is_faster
    assert resolve_precision("auto", CPU, model=model) is None


def test_forced_precisions_and_families():
    for precision in ("fp32", "bf16", "auto"):
        assert resolve_precision(precision, CPU, family="forward") is None  # LOO/beam: always fp32
    assert resolve_precision("bf16", CPU, family="gradient") is torch.bfloat16
    assert resolve_precision("fp32", CPU, family="predict") is None
    with pytest.raises(ValueError, match="family must be one of"):
        resolve_precision("auto", CPU, family="training")
    with pytest.raises(ValueError, match="fp16.*CUDA"):
        resolve_precision("fp16", CPU, family="forward")


def test_classifier_auto_precision_follows_the_measurement(fitted_tiny, native_bf16):
    clf = copy.copy(fitted_tiny)  # shallow: shares the fitted model, the session fixture stays untouched
    clf.precision = "auto"
    clock = FakeClock()
    with clock.charge(clf.model_, per_token(1e-6, 0.25e-6)):
        measure_forward_rates(clf.model_, clf.device_, timer=clock)  # what inference_dtype_ will find cached
    assert clf.inference_dtype_ is torch.bfloat16
    loo, grad = (type("M", (), {"uses_gradients": g})() for g in (False, True))
    assert autocast_dtype_for(clf, grad, "auto") is torch.bfloat16
    assert autocast_dtype_for(clf, loo, "auto") is None and autocast_dtype_for(clf, loo) is None


def test_tokens_per_forward_picks_the_smallest_size_within_10_percent_of_the_best(bert):
    model, _ = bert

    def inputs(rows, width):
        return {"input_ids": torch.full((rows, width), 5), "attention_mask": torch.ones(rows, width, dtype=torch.long)}

    for overhead, expected in ((1e-2, 2048), (1e-3, 1024), (0.0, 512)):
        clear_probe_cache()
        clock = FakeClock()
        with clock.charge(model, lambda dtype, rows, width, o=overhead: o + rows * width * 1e-5):
            got = tokens_per_forward(model, inputs, device=CPU, dtype=None, width=32, timer=clock)
        assert got == expected
        assert sorted({rows * width for _, (rows, width) in clock.forwards[1:]}) == sorted(TOKEN_BUDGETS)


def test_tokens_per_forward_does_not_time_models_other_than_hugging_face_ones():
    class Toy(torch.nn.Module):
        calls = 0

        def forward(self, **kwargs):
            Toy.calls += 1

    assert tokens_per_forward(Toy(), None, device=CPU, dtype=None) == DEFAULT_TOKENS_PER_FORWARD
    assert Toy.calls == 0


def test_info_command_reports_machine_probe_and_families(tiny_model_dir, capsys):
    assert main(["info", "--model", tiny_model_dir, "--device", "cpu", "--json", "-q"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["command"] == "info"
    assert set(report["cpu"]["flags"]) == {"avx2", "avx512", "avx512_bf16", "amx"}
    assert report["cpu"]["torch_threads"] == torch.get_num_threads()
    assert report["torch"] == torch.__version__
    assert report["families"]["forward"] == "fp32"
    assert set(report["families"]) == {"predict", "gradient", "forward"}
    rates = report["rates"]
    assert rates["fp32_tokens_per_s"] > 0 and np.prod(rates["shape"]) > 0
    expected = "fp32" if rates["speedup"] is None or rates["speedup"] < MIN_SPEEDUP else rates["reduced_dtype"]
    assert report["families"]["predict"] == expected


def test_info_command_human_output(tiny_model_dir, capsys):
    assert main(["info", "--model", tiny_model_dir, "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    for needle in ("torch", "CPU:", "avx512_bf16", "amx", "forward probe", "leave-one-out, beam search"):
        assert needle in out

"""Scale-out in one process (docs/scaling.md): sharding rules, Accelerate training semantics, clone/pickle, extras.

The multi-process runs are in ``tests/integration/test_distributed_launch.py`` (``accelerate
launch``) and ``tests/integration/test_dask.py`` (a Dask cluster).
"""

import pickle
import sys

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback
from sklearn.base import clone

from helpers.data import make_sentiment

from fmmlearn import FaithfulTextClassifier, distributed
from fmmlearn.distributed import (dask_backend, gather_objects, is_main_process, local_only, num_processes,
                                  optimizer_steps_per_epoch, process_seed, shard_batches, split_training_batches)
import fmmlearn.utils
from fmmlearn.utils import _processes
from fmmlearn.utils._random import derive_seed
from fmmlearn.encoding import encode, length_grouped_batches
from fmmlearn.modeling import map_batches
from fmmlearn.estimator import EncodedDataset, make_net

accelerate = pytest.importorskip("accelerate", reason="the distributed extra is part of the test extra")


@pytest.fixture
def accelerate_state():
    """Accelerate's process-wide state, reset after the test (as Accelerate's own test cases do)."""
    yield accelerate
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def _cost(batch, lengths):
    return len(batch) * int(lengths[batch].max())


# --------------------------------------------------------------------------- sharding rules


@pytest.mark.parametrize("n_processes", [1, 2, 3])
def test_shard_batches_gives_each_batch_to_one_process_and_balances_padded_tokens(n_processes):
    lengths = np.random.default_rng(0).integers(3, 60, size=101)
    batches = length_grouped_batches(lengths, batch_size=6)
    shards = shard_batches(batches, lengths, n_processes)
    positions = sorted(p for shard in shards for p in shard)
    assert positions == list(range(len(batches)))  # every batch once, whole
    loads = [sum(_cost(batches[p], lengths) for p in shard) for shard in shards]
    # longest-processing-time rule: no process is ahead by more than one batch
    assert max(loads) - min(loads) <= max(_cost(b, lengths) for b in batches)
    assert shard_batches(batches, lengths, n_processes) == shards  # the same on every process


def test_split_training_batches_shares_an_epoch_disjointly_in_equal_steps():
    batches = length_grouped_batches(np.arange(23) % 7 + 3, batch_size=4, shuffle=True,
                                     generator=np.random.default_rng(1))
    assert len(batches) == 6
    shares = split_training_batches(batches, 4)  # one round of 4, then 2 batches (7 examples) re-cut in 4
    assert [len(s) for s in shares] == [2] * 4
    rows = [np.concatenate(s).tolist() for s in shares]
    assert sorted(sum(rows, [])) == list(range(23))
    pool = np.concatenate(batches[4:])  # whatever the shuffle put last
    assert [s[-1].tolist() for s in shares] == [part.tolist() for part in np.array_split(pool, 4)]
    assert [s[0].tolist() for s in shares] == [b.tolist() for b in batches[:4]]  # round r: batch 4 * 0 + r
    one = split_training_batches(batches, 1)
    assert [b.tolist() for b in one[0]] == [b.tolist() for b in batches]


def test_split_training_batches_leaves_out_a_last_round_too_small_to_share():
    batches = [np.arange(4), np.arange(4, 8), np.array([8])]
    shares = split_training_batches(batches, 2)
    assert [[b.tolist() for b in s] for s in shares] == [[[0, 1, 2, 3]], [[4, 5, 6, 7]]]


@pytest.mark.parametrize("args, steps", [((7, 1, 1), 7), ((7, 2, 1), 4), ((7, 2, 2), 2), ((8, 2, 3), 2),
                                         ((1, 4, 1), 1)])
def test_optimizer_steps_per_epoch(args, steps):
    assert optimizer_steps_per_epoch(*args) == steps


def test_process_seeds_are_the_seed_alone_and_distinct_streams_in_a_launch():
    assert process_seed(5, 0, 1) == 5
    seeds = [process_seed(5, r, 4) for r in range(4)]
    assert len(set(seeds)) == 4 and seeds == [process_seed(5, r, 4) for r in range(4)]
    assert not set(seeds) & {derive_seed(5, k) for k in range(4)}  # apart from the (seed, k) streams


def test_a_plain_process_works_alone():
    assert num_processes() == 1 and is_main_process() and gather_objects({"a": 1}) == [{"a": 1}]
    with local_only(), local_only():
        assert num_processes() == 1
    assert not _processes._LOCAL_ONLY.get()


def test_map_batches_draws_of_a_batch_do_not_depend_on_the_batches_run_before_it(monkeypatch):
    lengths = np.random.default_rng(2).integers(2, 30, size=40)
    batches = length_grouped_batches(lengths, batch_size=6)

    def run(generator, own):
        def fn(idx):
            return torch.rand((len(idx), 3), generator=generator)
        return map_batches(fn, lengths, 6, generator=generator if own else None)

    full = run(torch.Generator().manual_seed(7), own=True)
    plain = run(torch.Generator().manual_seed(7), own=False)
    # a process holding only every other batch (how a launch splits them), without exchanging rows; patched
    # where map_batches reads it: fmmlearn.utils caches a lazily loaded name once any code has read it.
    monkeypatch.setattr(fmmlearn.utils, "batches_for_this_process",
                        lambda batches, lengths, what: (batches[1::2], False))
    share = run(torch.Generator().manual_seed(7), own=True)
    unshared = run(torch.Generator().manual_seed(7), own=False)
    rows = np.concatenate(batches[1::2])
    np.testing.assert_array_equal(share[rows], full[rows])
    assert not np.array_equal(unshared[rows], plain[rows])  # a running stream would depend on them


# --------------------------------------------------------------------------- training with Accelerate


@pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.DegenerateModelWarning")  # equality, not learning
def test_a_one_process_accelerate_fit_is_the_plain_fit(accelerate_state, tiny_params, sentiment_data):
    X, y = sentiment_data[0][:64], sentiment_data[1][:64]
    params = dict(tiny_params, max_epochs=3, warmup_ratio=0.1)
    plain = FaithfulTextClassifier(**params).fit(X, y)
    accelerated = FaithfulTextClassifier(**params, accelerator="auto").fit(X, y)
    np.testing.assert_array_equal(accelerated.decision_function(X), plain.decision_function(X))
    timing = [c for c in plain.history_.columns if c == "dur"]
    assert accelerated.history_.drop(columns=timing).equals(plain.history_.drop(columns=timing))


class _GradientsAt(Callback):
    """Records the gradients of every synchronised step."""

    def initialize(self):
        self.steps = []
        return self

    def on_grad_computed(self, net, named_parameters, **kwargs):
        self.steps.append({name: p.grad.detach().clone() for name, p in named_parameters if p.grad is not None})


def _no_dropout_model(tokenizer):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertForSequenceClassification(config)


def _net(model, dataset, accelerator, callbacks=(), **overrides):
    options = dict(train_dataset=dataset, valid_dataset=None, mask_token_id=103, pad_token_id=0,
                   masking_strategy="half-det", max_masking_ratio=0.0, max_epochs=1, batch_size=4, learning_rate=1e-3,
                   weight_decay=0.0, warmup_ratio=0.0, device=torch.device("cpu"), autocast_dtype=None, seed=0,
                   metric_name=None, metric=None, n_classes=2, verbose=0, accelerator=accelerator)
    net = make_net(model, **{**options, **overrides})
    net.set_params(callbacks=net.callbacks + list(callbacks))
    return net.initialize()


def test_gradient_accumulation_adds_up_the_gradients_of_its_batches(accelerate_state, bundled_tokenizer):
    import copy

    X, y = make_sentiment(8, seed=4)
    dataset = EncodedDataset(encode(bundled_tokenizer, X, is_pair=False, max_length=64), (y == "pos").astype(int))
    model = _no_dropout_model(bundled_tokenizer)
    halves = [np.arange(4), np.arange(4, 8)]

    accumulating = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=2)
    recorder = _GradientsAt()
    net = _net(copy.deepcopy(model), dataset, accumulating, [("grads", recorder)])
    before = {k: v.clone() for k, v in net.module_.state_dict().items()}
    net.train_step(net._collate(dataset, False, halves[0]))
    assert recorder.steps == []  # no synchronisation, no optimizer step after the first batch
    assert all(torch.equal(v, before[k]) for k, v in net.module_.state_dict().items())
    net.train_step(net._collate(dataset, False, halves[1]))
    assert len(recorder.steps) == 1
    accumulated = recorder.steps[0]

    whole = _GradientsAt()
    single = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=1)
    _net(copy.deepcopy(model), dataset, single, [("grads", whole)]).train_step(
        net._collate(dataset, False, np.arange(8)))
    # the mean loss over 8 examples = the mean of two halves' mean losses
    assert accumulated.keys() == whole.steps[0].keys()
    for name, grad in whole.steps[0].items():
        torch.testing.assert_close(accumulated[name], grad, rtol=1e-4, atol=1e-7, msg=name)


def test_the_learning_rate_schedule_counts_optimizer_steps(accelerate_state, bundled_tokenizer, tiny_model_dir):
    from transformers import AutoModelForSequenceClassification

    X, y = make_sentiment(32, seed=5)
    dataset = EncodedDataset(encode(bundled_tokenizer, X, is_pair=False, max_length=64), (y == "pos").astype(int))
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model_dir)
    accelerator = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=2)
    net = _net(model, dataset, accelerator, max_epochs=2, learning_rate=0.8)
    net.fit(dataset, y=None)
    lrs = [b["event_lr"] for epoch in net.history for b in epoch["batches"] if "event_lr" in b]
    # 8 batches an epoch, 4 optimizer steps: S = 8 steps in 2 epochs, lr(s) = 0.8 * (S - s) / S
    assert lrs == pytest.approx([0.8 * (8 - b // 2) / 8 for b in range(16)])


# --------------------------------------------------------------------------- the estimator's parameters


def test_clone_shares_an_accelerator_and_pickling_one_is_refused(accelerate_state):
    accelerator = accelerate.Accelerator(cpu=True)
    clf = FaithfulTextClassifier(accelerator=accelerator)
    assert clone(clf).accelerator is accelerator  # a handle on this process's state, not a copy
    with pytest.raises(TypeError, match="accelerator='auto'"):
        pickle.dumps(clf)


@pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.DegenerateModelWarning")
def test_without_a_live_accelerator_the_estimator_clones_and_pickles(accelerate_state, tiny_params, sentiment_data):
    for accelerator in (None, "auto"):
        clf = FaithfulTextClassifier(**tiny_params, accelerator=accelerator)
        assert clone(clf).get_params() == clf.get_params()
        assert pickle.loads(pickle.dumps(clf)).get_params() == clf.get_params()
    X, y = sentiment_data[0][:40], sentiment_data[1][:40]
    fitted = FaithfulTextClassifier(**dict(tiny_params, max_epochs=1), accelerator="auto").fit(X, y)
    back = pickle.loads(pickle.dumps(fitted))  # the Accelerator of fit is not kept
    np.testing.assert_array_equal(back.predict_proba(X), fitted.predict_proba(X))
    assert not hasattr(clone(fitted), "model_")


def test_accumulation_needs_an_accelerator_and_devices_are_accelerates(tiny_params, sentiment_data):
    X, y = sentiment_data
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2 needs an accelerator"):
        FaithfulTextClassifier(model="no/such-model", gradient_accumulation_steps=2).fit(X, y)  # before loading
    with pytest.raises(ValueError, match="device='cuda:1' cannot be combined with an accelerator"):
        FaithfulTextClassifier(model="no/such-model", accelerator="auto", device="cuda:1").fit(X, y)
    with pytest.raises(ValueError, match="accelerator"):
        FaithfulTextClassifier(**tiny_params, accelerator="yes").fit(X, y)


def test_too_few_examples_for_the_processes_is_an_error(bundled_tokenizer):
    from types import SimpleNamespace

    four_processes = SimpleNamespace(num_processes=4, gradient_accumulation_steps=1)
    dataset = EncodedDataset(encode(bundled_tokenizer, ["a", "b", "c"], is_pair=False, max_length=64), np.array([0, 1, 0]))
    with pytest.raises(ValueError, match="3 training examples cannot be shared by 4 processes"):
        _net(torch.nn.Linear(1, 1), dataset, four_processes)


# --------------------------------------------------------------------------- without the extra


def test_without_accelerate_the_options_name_the_extra(monkeypatch, tiny_params, sentiment_data):
    monkeypatch.setitem(sys.modules, "accelerate", None)  # import accelerate -> ImportError
    with pytest.raises(ImportError, match=r'pip install "fmmlearn\[distributed\]"'):
        FaithfulTextClassifier(**tiny_params, accelerator="auto").fit(*sentiment_data)
    monkeypatch.setenv("WORLD_SIZE", "2")  # a launched process with nobody to set up its group
    with pytest.raises(ImportError, match="multi-process launch needs accelerate"):
        num_processes()


def test_without_dask_the_scheduler_option_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"needs dask\[distributed\].*fmmlearn\[distributed\]"):
        with dask_backend("tcp://127.0.0.1:8786"):
            pass


def test_a_launched_process_without_an_accelerator_is_warned_it_trains_alone(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.warns(UserWarning, match="one of 4 launched together, but accelerator=None"):
        assert distributed.make_accelerator(None) == (None, False)

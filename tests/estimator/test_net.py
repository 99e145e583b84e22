"""The skorch masked fine-tuning loop: schedule, optimiser groups, masking, selection."""

import numpy as np
import pytest
import torch

from fmmlearn.encoding import encode
from fmmlearn.metrics import get_metric
from fmmlearn.estimator import (
    EncodedDataset,
    concat_encodings,
    linear_warmup_decay,
    make_net,
    mask_encoding,
    random_masker,
)


@pytest.fixture
def tiny_net_parts(tiny_model_dir, sentiment_data):
    from fmmlearn.modeling import load_pretrained

    tokenizer, model = load_pretrained(tiny_model_dir, num_labels=2, id2label={0: "neg", 1: "pos"},
                                       label2id={"neg": 0, "pos": 1})
    X, y = sentiment_data
    encoding = encode(tokenizer, X, is_pair=False, max_length=None)
    dataset = EncodedDataset(encoding, (y == "pos").astype(int))
    return tokenizer, model, dataset


def _net(model, tokenizer, dataset, valid=None, **kw):
    params = dict(mask_token_id=tokenizer.mask_token_id, pad_token_id=tokenizer.pad_token_id,
                  masking_strategy="half-det", max_masking_ratio=1.0, max_epochs=2, batch_size=16,
                  learning_rate=1e-3, weight_decay=0.01, warmup_ratio=0.25, device=torch.device("cpu"),
                  autocast_dtype=None, seed=0, metric_name="valid_accuracy",
                  metric=get_metric("accuracy"), n_classes=2, verbose=0)
    params.update(kw)
    return make_net(model, train_dataset=dataset, valid_dataset=valid, **params)


def test_adamw_skips_weight_decay_on_biases_and_layernorm(tiny_net_parts):
    tokenizer, model, dataset = tiny_net_parts
    net = _net(model, tokenizer, dataset).initialize()
    names = {id(p): n for n, p in net.module_.named_parameters()}
    assert isinstance(net.optimizer_, torch.optim.AdamW)
    for group in net.optimizer_.param_groups:
        for p in group["params"]:
            exempt = names[id(p)].endswith("bias") or "LayerNorm" in names[id(p)]
            assert group["weight_decay"] == (0.0 if exempt else 0.01), names[id(p)]
    assert sum(len(g["params"]) for g in net.optimizer_.param_groups) == len(names)


def test_training_batches_are_masked_with_half_det_and_validation_batches_are_not(tiny_net_parts):
    tokenizer, model, dataset = tiny_net_parts
    net = _net(model, tokenizer, dataset).initialize()
    train_loader = net.get_iterator(dataset, training=True)
    valid_loader = net.get_iterator(dataset, training=False)
    mask = tokenizer.mask_token_id
    for (x, _), _ in zip(train_loader, range(5)):
        rows = x["input_ids"].shape[0]
        has_mask = (x["input_ids"] == mask).any(dim=1)
        assert not has_mask[: rows // 2].any()
        ids, attention = x["input_ids"], x["attention_mask"]
        last = attention.sum(dim=1) - 1
        assert (ids[:, 0] == tokenizer.cls_token_id).all()
        assert (ids[torch.arange(rows), last] == tokenizer.sep_token_id).all()
        assert (ids[attention == 0] == tokenizer.pad_token_id).all()
    for x, _ in valid_loader:
        assert not (x["input_ids"] == mask).any()


def test_masks_are_redrawn_every_epoch_but_reproducible(tiny_net_parts):
    tokenizer, model, dataset = tiny_net_parts

    def epoch_ids(net):
        return [x["input_ids"].clone() for x, _ in net.get_iterator(dataset, training=True)]

    a = _net(model, tokenizer, dataset).initialize()
    b = _net(model, tokenizer, dataset).initialize()
    loader_a = a.get_iterator(dataset, training=True)
    first = [x["input_ids"].clone() for x, _ in loader_a]
    second = [x["input_ids"].clone() for x, _ in loader_a]
    assert any(x.shape != y.shape or not torch.equal(x, y) for x, y in zip(first, second))
    assert all(torch.equal(x, y) for x, y in zip(first, epoch_ids(b)))


def test_lr_follows_the_schedule_in_optimisation_steps(tiny_net_parts):
    tokenizer, model, dataset = tiny_net_parts
    net = _net(model, tokenizer, dataset, valid=None, max_epochs=2)
    net.fit(dataset, y=None)
    steps = 2 * -(-len(dataset) // 16)
    expected = [1e-3 * linear_warmup_decay(steps, 0.25)(s) for s in range(steps)]
    recorded = [b["event_lr"] for epoch in net.history for b in epoch["batches"] if "event_lr" in b]
    assert recorded == pytest.approx(expected)


def recorded_lrs(net):
    return [b["event_lr"] for epoch in net.history for b in epoch["batches"] if "event_lr" in b]


def test_reference_schedule_counts_examples_over_a_real_fit(tiny_net_parts):
    """lr_schedule="reference": S = epochs x examples (the reference's bug), so the run is almost all warm-up."""
    tokenizer, model, dataset = tiny_net_parts
    small = EncodedDataset(dataset.encoding.subset(np.arange(20)), dataset.targets[:20].numpy())
    net = _net(model, tokenizer, small, max_epochs=3, batch_size=8, warmup_ratio=0.06, lr_schedule="reference")
    net.fit(small, y=None)
    # By hand: 3 epochs of ceil(20 / 8) = 3 steps; S = 3 * 20 = 60 examples, W = int(0.06 * 60) = 3.
    lr = 1e-3
    expected = [0.0, lr / 3, 2 * lr / 3] + [lr * (60 - s) / 57 for s in range(3, 9)]
    assert recorded_lrs(net) == pytest.approx(expected, rel=1e-12, abs=0)
    # The default counts steps: S = 9, W = int(0.54) = 0, a decay from the peak over the 9 steps.
    net = _net(model, tokenizer, small, max_epochs=3, batch_size=8, warmup_ratio=0.06)
    net.fit(small, y=None)
    assert recorded_lrs(net) == pytest.approx([lr * (9 - s) / 9 for s in range(9)], rel=1e-12, abs=0)


def fed_batches(net, dataset, epochs):
    """Per epoch, the example indices of every training batch in row order (targets are the indices)."""
    loader = net.get_iterator(dataset, training=True)
    return [[index.tolist() for _, index in loader] for _ in range(epochs)]


def test_uniform_batches_are_consecutive_chunks_of_a_fresh_permutation(tiny_net_parts):
    """group_by_length=False: the reference's order, a new uniform permutation per epoch cut into batches."""
    tokenizer, model, dataset = tiny_net_parts
    n = len(dataset)
    indexed = EncodedDataset(dataset.encoding, np.arange(n))
    net = _net(model, tokenizer, indexed, batch_size=16, seed=5, group_by_length=False).initialize()
    got = fed_batches(net, indexed, epochs=2)
    rng = np.random.default_rng(5)                    # the net's batch-order generator
    for epoch in got:
        order = rng.permutation(n)
        assert epoch == [order[i:i + 16].tolist() for i in range(0, n, 16)]
    assert got[0] != got[1]
    # The masked half-det rows are the second half of each chunk, as in the reference.
    mask = tokenizer.mask_token_id
    for x, index in net.get_iterator(indexed, training=True):
        assert not (x["input_ids"][: len(index) // 2] == mask).any()


def test_length_grouped_batches_are_length_homogeneous_and_uniform_ones_are_not(tiny_net_parts):
    tokenizer, model, dataset = tiny_net_parts
    lengths = dataset.encoding.lengths
    indexed = EncodedDataset(dataset.encoding, np.arange(len(dataset)))

    def mean_spread(group_by_length):
        net = _net(model, tokenizer, indexed, batch_size=16, group_by_length=group_by_length).initialize()
        batches = fed_batches(net, indexed, epochs=3)
        assert all(sorted(sum(epoch, [])) == list(range(len(dataset))) for epoch in batches)   # each once per epoch
        return np.mean([np.ptp(lengths[b]) for epoch in batches for b in epoch])

    assert mean_spread(True) < 0.5 * mean_spread(False)


def test_validation_both_is_clean_plus_one_fixed_masked_copy(tiny_net_parts):
    tokenizer, _, dataset = tiny_net_parts
    enc = dataset.encoding
    masker = random_masker(1.0, tokenizer.mask_token_id, seed=5)
    masked = mask_encoding(enc, masker, tokenizer.pad_token_id)
    again = mask_encoding(enc, random_masker(1.0, tokenizer.mask_token_id, seed=5), tokenizer.pad_token_id)
    assert all(np.array_equal(a, b) for a, b in zip(masked.input_ids, again.input_ids))
    assert all(len(a) == len(b) for a, b in zip(masked.input_ids, enc.input_ids))
    fraction = np.mean(np.concatenate([m[~s] == tokenizer.mask_token_id
                                       for m, s in zip(masked.input_ids, enc.special_tokens_mask)]))
    assert 0.3 < fraction < 0.7  # ~ U[0,1) ratio averaged: 0.5
    both = concat_encodings(enc, masked)
    assert len(both) == 2 * len(enc)
    assert all(np.array_equal(a, b) for a, b in zip(both.input_ids[: len(enc)], enc.input_ids))



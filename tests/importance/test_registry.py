"""The parity vectors of the reference code's tests on their toy models (docs/explain.md, "Departures from the
reference code"), plus the registry."""

import math

import pytest
import torch

from fmmlearn.encoding import Batch
from fmmlearn.importance import METHOD_NAMES, compute_importance, get_method, importance_methods

from helpers.importance import ToyDifferentiable

BOS, EOS, PAD, TOKEN, MASK = 0, 1, 2, 3, 4


class Lookup(torch.nn.Module):
    """Logits looked up per exact (unpadded) input; ``key`` maps ids to a dictionary key."""

    def __init__(self, table, key=tuple, n_classes=2):
        super().__init__()
        self.table, self.key, self.n_classes = table, key, n_classes
        self.embeddings = torch.nn.Embedding(5, 2)
        self.rows_evaluated = 0

    def get_input_embeddings(self):
        return self.embeddings

    def forward(self, input_ids=None, attention_mask=None):
        rows = []
        self.rows_evaluated += len(input_ids)
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            rows.append(self.table[self.key(tuple(i for i, m in zip(ids, mask) if m))])
        return torch.tensor(rows, dtype=torch.float32)


def toy_batch(rows):
    ids = torch.tensor(rows)
    attention = (ids != PAD).long()
    special = (ids == BOS) | (ids == EOS) | (ids == PAD)
    segments = torch.where(special, torch.tensor(-1), torch.tensor(0))
    return Batch(ids, attention, special, segments, None, torch.arange(len(rows)))


def run(model, batch, target, method, eligible=None, **params):
    eligible = batch.attention_mask.bool() if eligible is None else eligible
    return compute_importance(model, batch, torch.tensor(target), method=method, mask_token_id=MASK,
                              eligible=eligible, **params)


TOY = toy_batch([[BOS, TOKEN, TOKEN, EOS, PAD], [BOS, TOKEN, EOS, PAD, PAD]])
ROOT12 = math.sqrt(12)


@pytest.mark.parametrize("method, params, first, second", [
    ("grad-l2", {}, [0, 2, 2, 0], [ROOT12, 0, ROOT12]),
    ("grad-l1", {}, [0, 2, 2, 0], [6, 0, 6]),
    ("inp-grad-sign", {}, [0, 2, 2, 0], [2, 0, 2]),
    ("inp-grad-abs", {}, [0, 2, 2, 0], [2, 0, 2]),
    ("int-grad-sign", {"n_steps": 1, "pad_token_id": PAD}, [0, 2, 2, 0], [2, 0, 2]),
    ("int-grad-abs", {"n_steps": 2, "pad_token_id": PAD, "variant": "reference"}, [0, 1.25, 1.25, 0], [1.25, 0, 1.25]),
])
def test_gradient_parity_vectors(method, params, first, second):
    # Every real position is eligible here, as in the reference tests (which score specials too).
    scores = run(ToyDifferentiable(), TOY, [0, 1], method, **params)
    assert scores[0, :4].tolist() == pytest.approx(first, abs=1e-5)
    assert scores[1, :3].tolist() == pytest.approx(second, abs=1e-5)
    assert scores[:, 4].abs().max() == 0 and scores[1, 3] == 0  # padding


def test_standard_ig_toy_truth_is_one_at_two_steps():
    # docs/explain.md, "Integrated gradients": the reference formula (extra factor s_k) gives a token whose true IG
    # is 1 the score 1.25 with K = 2.
    batch = toy_batch([[BOS, TOKEN, EOS]])
    eligible = torch.tensor([[False, True, False]])
    scores = run(ToyDifferentiable(), batch, [0], "int-grad-sign", eligible, n_steps=2, pad_token_id=PAD,
                 rule="riemann_middle")
    assert scores[0, 1].item() == pytest.approx(1.0)


def test_reference_ig_tends_to_two_thirds():
    batch = toy_batch([[BOS, TOKEN, EOS]])
    scores = run(ToyDifferentiable(), batch, [0], "int-grad-sign", n_steps=400, pad_token_id=PAD,
                 variant="reference")
    assert scores[0, 1].item() == pytest.approx(2 / 3, abs=1 / 400 + 1e-4)  # right sum: error ~ 1/K


def test_non_eligible_positions_score_zero():
    eligible = torch.tensor([[False, True, False, False, False], [False] * 5])
    scores = run(ToyDifferentiable(), TOY, [0, 1], "grad-l2", eligible)
    assert scores.tolist() == [[0, 2, 0, 0, 0], [0] * 5]


LOO_TABLE = {
    (BOS, TOKEN, TOKEN, EOS): [2.0, 0.0],
    (BOS, MASK, TOKEN, EOS): [-1.0, 0.0],
    (BOS, TOKEN, MASK, EOS): [1.0, 0.0],
    (BOS, TOKEN, EOS): [0.0, 2.0],
    (BOS, MASK, EOS): [0.0, 3.0],
}


@pytest.mark.parametrize("method, first, second", [
    ("loo-sign", [0, 3, 1, 0], [0, -1, 0]),
    ("loo-abs", [0, 3, 1, 0], [0, 1, 0]),
])
def test_loo_parity_vectors(method, first, second):
    batch = toy_batch([[BOS, TOKEN, TOKEN, EOS], [BOS, TOKEN, EOS, PAD]])
    scores = run(Lookup(LOO_TABLE), batch, [0, 1], method, eligible=~batch.special_tokens_mask)
    assert scores[0].tolist() == first
    assert scores[1, :3].tolist() == second


def test_loo_skips_already_masked_tokens():
    batch = toy_batch([[BOS, MASK, TOKEN, EOS]])
    table = {(BOS, MASK, TOKEN, EOS): [5.0, 0.0], (BOS, MASK, MASK, EOS): [1.0, 0.0]}
    model = Lookup(table)
    scores = run(model, batch, [0], "loo-sign", eligible=~batch.special_tokens_mask)
    assert scores[0].tolist() == [0, 0, 4, 0]
    assert model.rows_evaluated == 2  # the clean input and position 2; position 1 is not re-masked


BEAM_LOGITS = {(): 5, (1,): 2, (2,): 9, (3,): 1, (4,): 5, (1, 2): 3, (1, 3): 6, (1, 4): 7, (2, 3): 8, (2, 4): 2,
               (3, 4): 8, (1, 2, 3): 3, (1, 2, 4): 5, (1, 3, 4): 2, (2, 3, 4): 0, (1, 2, 3, 4): 2}


def masked_set(ids):
    return tuple(i for i, t in enumerate(ids) if t == MASK)


BEAM_MODEL = Lookup({}, key=masked_set)
BEAM_MODEL.table = {k: [float(v), 0.0] for k, v in BEAM_LOGITS.items()}


@pytest.mark.parametrize("width, expected", [(1, [3, 1, 4, 2]), (2, [4, 3, 2, 1]), (3, [1, 3, 2, 4]),
                                             (50, [1, 3, 2, 4])])
def test_beam_parity_vectors(width, expected):
    batch = toy_batch([[BOS] + [TOKEN] * 4 + [EOS]])
    scores = run(BEAM_MODEL, batch, [0], f"beam-sign-{width}", eligible=~batch.special_tokens_mask)
    assert scores[0].tolist() == [0] + expected + [0]


def test_beam_ranks_are_not_interleaved_for_equal_lengths():
    # The reference's write-back interleaved the ranks of equally long examples (docs/explain.md, "Departures from
    # the reference code").
    batch = toy_batch([[BOS] + [TOKEN] * 4 + [EOS]] * 3)
    scores = run(BEAM_MODEL, batch, [0, 0, 0], "beam-sign-1", eligible=~batch.special_tokens_mask)
    assert scores[:, 1:5].tolist() == [[3, 1, 4, 2]] * 3


def test_registry_lists_every_paper_measure():
    frame = importance_methods()
    names = ["rand", "grad-l2", "grad-l1", "inp-grad-sign", "inp-grad-abs", "int-grad-sign", "int-grad-abs",
             "loo-sign", "loo-abs", "beam-sign-K"]
    assert frame.index.tolist() == names == list(METHOD_NAMES)
    signed = {"inp-grad-sign", "int-grad-sign", "loo-sign", "beam-sign-K"}
    assert set(frame.index[frame["signed"]]) == signed
    assert frame["recursive"].to_dict() == {n: n != "beam-sign-K" for n in names}
    assert {"cost", "uses_gradients", "description"} <= set(frame.columns)
    measure = get_method("beam-sign-10")
    assert (measure.name, measure.params, measure.recursive, measure.signed) == ("beam-sign-10", {"beam_size": 10},
                                                                                 False, True)


@pytest.mark.parametrize("name, message", [
    ("gradient", "method must be one of"),
    ("beam-sign-0", "beam width"),
    ("beam-sign--3", "beam width"),
    ("beam-sign-x", "method must be one of"),
    (None, "method must be one of"),
])
def test_unknown_or_invalid_method_names(name, message):
    with pytest.raises(ValueError, match=message) as info:
        get_method(name)
    if message.startswith("method"):
        assert "loo-sign" in str(info.value) and "beam-sign-K" in str(info.value)


@pytest.mark.parametrize("method, params, message", [
    ("int-grad-sign", {"n_steps": 0}, "n_steps"),
    ("int-grad-sign", {"n_steps": 2.5}, "n_steps"),
    ("int-grad-sign", {"rule": "simpson"}, "rule"),
    ("int-grad-sign", {"baseline": "noise"}, "baseline"),
    ("int-grad-sign", {"variant": "paper"}, "variant"),
    ("int-grad-sign", {"rule": "riemann_trapezoid", "n_steps": 1}, "n_steps"),
    ("loo-sign", {"n_steps": 5}, "does not take"),
    ("int-grad-abs", {"absolute": False}, "fixes"),
    ("beam-sign-4", {"beam_size": 2}, "fixes"),
])
def test_invalid_method_parameters(method, params, message):
    extra = {"pad_token_id": PAD} if method.startswith("int-grad") else {}
    with pytest.raises(ValueError, match=message):
        run(ToyDifferentiable(), TOY, [0, 1], method, **params, **extra)


def test_bad_tensors_and_internal_batch_size():
    model = ToyDifferentiable()
    with pytest.raises(ValueError, match="target"):
        run(model, TOY, [0, 1, 1], "grad-l2")
    with pytest.raises(ValueError, match="eligible"):
        run(model, TOY, [0, 1], "grad-l2", eligible=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="internal_batch_size"):
        run(model, TOY, [0, 1], "grad-l2", internal_batch_size=0)


def test_pad_baseline_needs_a_pad_token_id():
    with pytest.raises(ValueError, match="pad_token_id"):
        run(ToyDifferentiable(), TOY, [0, 1], "int-grad-sign")


def test_model_mode_and_parameter_flags_are_restored():
    model = ToyDifferentiable().train()
    run(model, TOY, [0, 1], "grad-l2")
    assert model.training and model.embeddings.weight.requires_grad

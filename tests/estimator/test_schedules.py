"""Learning-rate schedules (docs/classifier.md, "Learning-rate schedule"): warm-up and decay, the reference quirks."""

import pytest

from fmmlearn.estimator import linear_warmup_decay, lr_multiplier, reference_warmup_decay


def test_schedule_matches_the_hand_computation_of_docs_classifier():
    lr = [0.1 * linear_warmup_decay(50, 0.06)(s) for s in range(51)]
    assert lr[:4] == pytest.approx([0.0, 0.1 / 3, 0.2 / 3, 0.1])
    assert lr[4:] == pytest.approx([0.1 * (50 - s) / 47 for s in range(4, 51)])
    assert lr[-1] == 0.0


def test_schedule_without_warmup_starts_at_the_peak():
    assert linear_warmup_decay(10, 0.0)(0) == 1.0
    assert linear_warmup_decay(10, 0.0)(5) == pytest.approx(0.5)


def test_reference_schedule_keeps_the_zero_warmup_quirk():
    """With W = int(0.06 S) = 0 the reference returns lr * s; fmmlearn reproduces it and warns."""
    with pytest.warns(UserWarning, match="W = 0 warm-up steps.*lr \\* step"):
        multiplier = reference_warmup_decay(10, 0.06)
    assert [multiplier(s) for s in range(4)] == [0.0, 1.0, 2.0, 3.0]
    # otherwise the formula of docs/classifier.md, "Learning-rate schedule" (W = 3)
    ref = reference_warmup_decay(50, 0.06)
    assert [0.1 * ref(s) for s in range(5)] == pytest.approx([0.0, 0.1 / 3, 0.2 / 3, 0.1, 0.1 * 46 / 47])


def test_lr_multiplier_names_the_schedule():
    steps = lr_multiplier("linear", max_epochs=2, n_train_examples=33, batch_size=16, warmup_ratio=0.5)
    assert [steps(s) for s in range(6)] == pytest.approx([0, 1 / 3, 2 / 3, 1, 2 / 3, 1 / 3])   # S = 2 * 3 = 6
    examples = lr_multiplier("reference", max_epochs=2, n_train_examples=33, batch_size=16, warmup_ratio=0.5)
    assert examples(6) == pytest.approx(6 / 33)                                                 # S = 66, W = 33
    with pytest.raises(ValueError, match="lr_schedule must be one of"):
        lr_multiplier("cosine", max_epochs=1, n_train_examples=4, batch_size=2, warmup_ratio=0.1)

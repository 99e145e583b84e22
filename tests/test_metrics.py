"""fmmlearn.metrics (docs/metrics.md) against hand formulas."""

import math

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, get_scorer, log_loss, roc_auc_score

from fmmlearn.metrics import Metric, available_metrics, get_metric, greater_is_better

LABELS = ["a", "b", "c", "d"]


def random_labels(seed, n=60, labels=LABELS):
    rng = np.random.default_rng(seed)
    return rng.choice(labels, n), rng.choice(labels, n)


def hand_mcc(y_true, y_pred, labels):
    """Multiclass MCC (docs/metrics.md): (c*s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)), NaN -> 0."""
    index = {label: i for i, label in enumerate(labels)}
    confusion = np.zeros((len(labels), len(labels)))
    for t, p in zip(y_true, y_pred):
        confusion[index[t], index[p]] += 1
    c, s = np.trace(confusion), confusion.sum()
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    denominator = math.sqrt((s**2 - p @ p) * (s**2 - t @ t))
    return 0.0 if denominator == 0 else (c * s - t @ p) / denominator


def hand_f1s(y_true, y_pred, labels):
    """Per-class F1 with precision, recall and F1 all 0 when 0/0."""
    scores = []
    for label in labels:
        tp = sum(t == label and p == label for t, p in zip(y_true, y_pred))
        fp = sum(t != label and p == label for t, p in zip(y_true, y_pred))
        fn = sum(t == label and p != label for t, p in zip(y_true, y_pred))
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        scores.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    return scores


@pytest.mark.parametrize("seed", range(5))
def test_matthew_matches_confusion_matrix_formula(seed):
    y_true, y_pred = random_labels(seed)
    assert get_metric("matthew")(y_true, y_pred) == pytest.approx(hand_mcc(y_true, y_pred, LABELS))


def test_matthew_is_zero_when_undefined():
    y_true = ["a", "b", "a", "b"]
    assert get_metric("matthew")(y_true, ["a"] * 4) == 0.0  # one predicted class: NaN -> 0
    assert hand_mcc(y_true, ["a"] * 4, ["a", "b"]) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_macro_f1_matches_per_class_formula(seed):
    y_true, y_pred = random_labels(seed)
    scores = hand_f1s(y_true, y_pred, LABELS)
    assert get_metric("macro_f1")(y_true, y_pred, labels=LABELS) == pytest.approx(np.mean(scores))


def test_macro_f1_counts_absent_classes_as_zero_with_labels():
    # class "c" is neither true nor predicted: 0/0 := 0 drags the macro mean down
    y_true, y_pred = ["a", "a", "b", "b"], ["a", "b", "b", "b"]
    scores = hand_f1s(y_true, y_pred, ["a", "b", "c"])
    assert scores[2] == 0.0
    assert get_metric("macro_f1")(y_true, y_pred, labels=["a", "b", "c"]) == pytest.approx(np.mean(scores))
    # without labels, only the classes present are averaged
    assert get_metric("macro_f1")(y_true, y_pred) == pytest.approx(np.mean(scores[:2]))


@pytest.mark.parametrize("seed", range(3))
def test_micro_f1_from_global_counts_equals_accuracy(seed):
    y_true, y_pred = random_labels(seed)
    tp = sum(t == p for t, p in zip(y_true, y_pred))
    fp = fn = len(y_true) - tp  # single-label: every miss is one FP and one FN
    micro = 2 * tp / (2 * tp + fp + fn)
    assert get_metric("micro_f1")(y_true, y_pred) == pytest.approx(micro)
    assert get_metric("accuracy")(y_true, y_pred) == pytest.approx(tp / len(y_true))
    assert micro == pytest.approx(tp / len(y_true))


def test_metrics_return_python_floats():
    y_true, y_pred = random_labels(0)
    for name in ("accuracy", "macro_f1", "micro_f1", "matthew"):
        assert type(get_metric(name)(y_true, y_pred)) is float


@pytest.mark.parametrize(
    "alias, canonical",
    [("f1_macro", "macro_f1"), ("F1-Micro", "micro_f1"), ("mcc", "matthew"), ("matthews", "matthew"),
     ("matthews_corrcoef", "matthew"), ("loss", "log_loss"), ("ACCURACY", "accuracy")],
)
def test_aliases_resolve_to_canonical_metric(alias, canonical):
    assert get_metric(alias).name == canonical
    assert get_metric(alias) is get_metric(canonical)


def test_log_loss_needs_probabilities_and_is_a_loss():
    metric = get_metric("log_loss")
    assert metric.needs_proba and not metric.greater_is_better
    assert greater_is_better("loss") is False and greater_is_better("accuracy") is True
    y_true = ["b", "a", "b"]
    proba = np.array([[0.2, 0.7, 0.1], [0.6, 0.3, 0.1], [0.1, 0.5, 0.4]])  # columns a, b, c
    expected = -np.mean(np.log([0.7, 0.6, 0.5]))
    # class "c" never occurs in y_true, so labels are needed to read the columns
    assert metric(y_true, proba, labels=["a", "b", "c"]) == pytest.approx(expected)
    assert metric.score(y_true, y_proba=proba, labels=["a", "b", "c"]) == pytest.approx(expected)


def test_score_picks_the_input_the_metric_needs():
    assert get_metric("accuracy").score(["a", "b"], y_pred=["a", "a"], y_proba=None) == 0.5
    with pytest.raises(ValueError, match="needs y_proba"):
        get_metric("loss").score(["a"], y_pred=["a"])
    with pytest.raises(ValueError, match="needs y_pred"):
        get_metric("accuracy").score(["a"], y_proba=[[1.0]])


def test_sklearn_label_scorer_names_are_accepted():
    y_true, y_pred = random_labels(1)
    metric = get_metric("balanced_accuracy")
    assert not metric.needs_proba and metric.greater_is_better
    assert metric(y_true, y_pred) == pytest.approx(balanced_accuracy_score(y_true, y_pred))


def test_sklearn_proba_scorers_follow_sklearn_sign_and_binary_convention():
    y_true = np.array(["neg", "pos", "pos", "neg", "pos"])
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7], [0.1, 0.9]])
    neg_log_loss = get_metric("neg_log_loss")
    assert neg_log_loss.needs_proba and neg_log_loss.greater_is_better
    assert neg_log_loss(y_true, proba, labels=["neg", "pos"]) == pytest.approx(-log_loss(y_true, proba))
    auc = get_metric("roc_auc")
    assert auc(y_true, proba, labels=["neg", "pos"]) == pytest.approx(roc_auc_score(y_true == "pos", proba[:, 1]))


def test_sklearn_multiclass_proba_scorer():
    rng = np.random.default_rng(0)
    y_true = np.array(["a", "b", "c"] * 5)
    proba = rng.dirichlet(np.ones(3), size=15)
    expected = roc_auc_score(y_true, proba, multi_class="ovr")
    assert get_metric("roc_auc_ovr")(y_true, proba, labels=["a", "b", "c"]) == pytest.approx(expected)


def test_callables_and_metric_objects_pass_through():
    def agreement(y_true, y_pred):
        return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))

    metric = get_metric(agreement)
    assert metric.name == "agreement" and metric.greater_is_better and not metric.needs_proba
    assert metric(["a", "b"], ["a", "a"]) == 0.5
    custom = Metric("errors", lambda t, p: float(np.sum(np.asarray(t) != np.asarray(p))), greater_is_better=False)
    assert get_metric(custom) is custom and not greater_is_better(custom)


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match="unknown metric 'f2'.*macro_f1"):
        get_metric("f2")
    assert {"accuracy", "macro_f1", "micro_f1", "matthew", "log_loss"} <= set(available_metrics())


def test_wrong_types_are_rejected():
    with pytest.raises(TypeError, match="metric name or a callable"):
        get_metric(3)
    with pytest.raises(TypeError, match="scorer"):
        get_metric(get_scorer("accuracy"))


@pytest.mark.parametrize("name", ["accuracy", "micro_f1", "macro_f1", "matthew", "balanced_accuracy"])
@pytest.mark.parametrize("seed", range(3))
def test_vectorized_metric_equals_the_registry_metric(name, seed):
    """Many resamples at once give, row by row, exactly what get_metric gives one at a time."""
    from fmmlearn.metrics import vectorized_metric

    rng = np.random.default_rng(seed)
    classes = np.array(["a", "b", "c", "d"])
    pred, gold = rng.integers(0, 4, (3, 5, 40)), rng.integers(0, 3, 40)  # class "d" never gold
    values = vectorized_metric(name, classes=classes)(pred, gold)
    assert values.shape == (3, 5)
    metric = get_metric(name)
    expected = [[metric(classes[gold], classes[p], labels=classes) for p in rows] for rows in pred]
    np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-12)


def test_vectorized_metric_refuses_probability_metrics():
    from fmmlearn.metrics import vectorized_metric

    with pytest.raises(ValueError, match="needs probabilities"):
        vectorized_metric("log_loss", classes=["a", "b"])

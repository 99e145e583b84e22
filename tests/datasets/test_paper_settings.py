"""The paper's per-dataset settings: for_paper_dataset, paper_params, primary-metric defaults, the CLI path."""

import copy
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from helpers.data import make_sentiment
from fmmlearn import FaithfulTextClassifier
from fmmlearn.cli import main
from fmmlearn.datasets import get_dataset_spec, list_paper_datasets, paper_params, paper_primary_metric
from fmmlearn.faithfulness import (faithfulness_curve, faithfulness_report, faithfulness_score,
                                   make_faithfulness_scorer, random_masking_curve)

# The paper's primary metric per dataset (docs/datasets.md): macro-F1 for CB, IMDB, MIMIC, MRPC and QQP,
# MCC for CoLA, micro-F1 (= accuracy for single-label data) for bAbI, accuracy elsewhere.
PRIMARY = {"babi-1": "micro_f1", "babi-2": "micro_f1", "babi-3": "micro_f1", "boolq": "accuracy",
           "cb": "macro_f1", "cola": "matthew", "imdb": "macro_f1", "mimic-a": "macro_f1", "mimic-d": "macro_f1",
           "mnli": "accuracy", "mrpc": "macro_f1", "qnli": "accuracy", "qqp": "macro_f1", "rte": "accuracy",
           "snli": "accuracy", "sst2": "accuracy", "wnli": "accuracy"}
EPOCHS = {"cb": 50, "rte": 30, "boolq": 15, "cola": 15, "imdb": 10, "mnli": 10, "qqp": 10, "snli": 10, "sst2": 10}


@pytest.mark.parametrize("name", list_paper_datasets())
def test_for_paper_dataset_has_the_papers_settings(name):
    clf = FaithfulTextClassifier.for_paper_dataset(name)
    assert clf.learning_rate == 2e-5 and clf.batch_size == 16
    assert clf.max_epochs == EPOCHS.get(name, 20)
    assert clf.selection_metric == PRIMARY[name] == paper_primary_metric(name)
    assert (clf.max_masking_ratio, clf.masking_strategy, clf.validation) == (1.0, "half-det", "both")
    assert clf.dataset == name and clf.model == "minilm"           # the model is the caller's choice
    assert (clf.lr_schedule, clf.group_by_length) == ("linear", True)
    assert paper_params(name) == {k: v for k, v in clf.get_params().items() if k in paper_params(name)}


def test_for_paper_dataset_overrides_and_clone():
    clf = FaithfulTextClassifier.for_paper_dataset("SST-2", model="roberta-base", max_masking_ratio=0.0,
                                                   lr_schedule="reference", group_by_length=False)
    assert (clf.dataset, clf.model, clf.max_masking_ratio) == ("sst2", "roberta-base", 0.0)
    assert (clf.lr_schedule, clf.group_by_length) == ("reference", False)
    assert clone(clf).get_params() == clf.get_params()
    with pytest.raises(ValueError, match="unknown dataset name 'glue'"):
        FaithfulTextClassifier.for_paper_dataset("glue")
    with pytest.raises(TypeError, match=r"unexpected keyword argument.*epochs"):
        FaithfulTextClassifier.for_paper_dataset("sst2", epochs=3)


def test_dataset_chooses_the_selection_metric(tiny_params):
    X, y = make_sentiment(40, seed=1)
    clf = FaithfulTextClassifier(**dict(tiny_params, max_epochs=1, dataset="cola")).fit(X, y)
    assert "valid_matthew" in clf.history_.columns and "valid_accuracy" not in clf.history_.columns
    explicit = FaithfulTextClassifier(**dict(tiny_params, max_epochs=1, dataset="cola", selection_metric="accuracy"))
    assert "valid_accuracy" in explicit.fit(X, y).history_.columns
    with pytest.raises(ValueError, match="dataset: unknown dataset name 'colaa'"):
        FaithfulTextClassifier(**dict(tiny_params, dataset="colaa")).fit(X, y)


def test_fit_passes_the_schedule_and_batch_order_to_the_training_loop(tiny_params, monkeypatch):
    import fmmlearn.estimator._classifier as classifier

    seen = {}
    real = classifier.make_net

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(classifier, "make_net", spy)
    X, y = make_sentiment(24, seed=2)
    FaithfulTextClassifier(**dict(tiny_params, max_epochs=1, warmup_ratio=0.06, lr_schedule="reference",
                                  group_by_length=False)).fit(X, y)
    assert seen["lr_schedule"] == "reference" and seen["group_by_length"] is False
    FaithfulTextClassifier(**dict(tiny_params, max_epochs=1)).fit(X, y)
    assert seen["lr_schedule"] == "linear" and seen["group_by_length"] is True


@pytest.fixture(scope="module")
def scored():
    return make_sentiment(16, seed=9)


@pytest.fixture
def cola_clf(fitted_tiny):
    clf = copy.copy(fitted_tiny)        # the same fitted model, declared to be a CoLA classifier
    clf.dataset = "cola"
    return clf


def test_curves_default_to_the_primary_metric_of_the_dataset(cola_clf, fitted_tiny, scored):
    X, y = scored
    assert set(faithfulness_curve(cola_clf, X, y, method="inp-grad-sign")["metric"]) == {"matthew"}
    assert set(random_masking_curve(cola_clf, X, y, ratios=(0.0, 1.0))["metric"]) == {"matthew"}
    assert set(cola_clf.faithfulness_curve(X, y, method="rand", ratios=(0.0, 1.0))["metric"]) == {"matthew"}
    report = faithfulness_report(cola_clf, X, y, methods=["inp-grad-sign"], n_repeats=1)
    assert set(report.curves["metric"]) == {"matthew"} and set(report.summary["metric"]) == {"matthew"}
    # Without a dataset: accuracy; an explicit metric always wins.
    assert set(faithfulness_curve(fitted_tiny, X, y, method="inp-grad-sign")["metric"]) == {"accuracy"}
    assert set(faithfulness_curve(cola_clf, X, y, method="inp-grad-sign", metric="accuracy")["metric"]) == {"accuracy"}
    # The curve values are the metric itself: MCC of the clean predictions at ratio 0.
    from sklearn.metrics import matthews_corrcoef

    clean = faithfulness_curve(cola_clf, X, y, method="rand", ratios=(0.0, 1.0))
    assert clean["value"].iloc[0] == pytest.approx(matthews_corrcoef(y, cola_clf.predict(X)))


def test_scorers_default_to_the_primary_metric_of_the_dataset(cola_clf, fitted_tiny, scored):
    X, y = scored
    by_name = {m: make_faithfulness_scorer("inp-grad-sign", metric=m) for m in ("matthew", "accuracy")}
    default = make_faithfulness_scorer("inp-grad-sign")
    assert default.metric is None
    assert default(cola_clf, X, y) == by_name["matthew"](cola_clf, X, y)
    assert default(fitted_tiny, X, y) == by_name["accuracy"](fitted_tiny, X, y)
    assert by_name["matthew"](cola_clf, X, y) != by_name["accuracy"](cola_clf, X, y)   # so the check can fail
    assert faithfulness_score(cola_clf, X, y) == make_faithfulness_scorer(metric="matthew")(cola_clf, X, y)


def test_bad_dataset_on_a_classifier_is_named(fitted_tiny, scored):
    broken = copy.copy(fitted_tiny)
    broken.dataset = "sst-3"
    with pytest.raises(ValueError, match="clf.dataset: unknown dataset name 'sst-3'"):
        faithfulness_curve(broken, *scored, method="rand")


def test_registry_primary_metrics_are_the_papers():
    assert {name: get_dataset_spec(name).primary_metric for name in list_paper_datasets()} == PRIMARY
    assert paper_primary_metric(None) is None


# -- CLI --------------------------------------------------------------------------------------------------


@pytest.fixture
def table(tmp_path):
    X, y = make_sentiment(40, seed=3)
    path = tmp_path / "train.csv"
    pd.DataFrame({"review": X, "label": y}).to_csv(path, index=False)
    return path


def test_cli_fit_with_paper_settings(tiny_model_dir, table, tmp_path):
    out = tmp_path / "model"
    assert main(["fit", str(table), "--text-col", "review", "--output", str(out), "--model", tiny_model_dir,
                 "--paper-dataset", "CoLA", "--max-epochs", "1", "--precision", "fp32", "-q"]) == 0
    params = json.loads((out / "fmmlearn.json").read_text())["params"]
    assert params["dataset"] == "cola" and params["selection_metric"] == "matthew"
    assert params["learning_rate"] == 2e-5 and params["batch_size"] == 16 and params["validation"] == "both"
    assert params["max_epochs"] == 1                                  # given explicitly: wins over the paper's 15
    loaded = FaithfulTextClassifier.load(out)
    assert loaded.dataset == "cola" and "valid_matthew" in loaded.history_.columns
    X, y = make_sentiment(8, seed=4)
    assert set(faithfulness_curve(loaded, X, y, method="rand", ratios=(0.0, 1.0))["metric"]) == {"matthew"}


def test_cli_fit_without_paper_dataset_keeps_the_library_defaults(tiny_model_dir, table, tmp_path):
    out = tmp_path / "model"
    assert main(["fit", str(table), "--text-col", "review", "--output", str(out), "--model", tiny_model_dir,
                 "--max-epochs", "1", "--precision", "fp32", "-q"]) == 0
    params = json.loads((out / "fmmlearn.json").read_text())["params"]
    defaults = FaithfulTextClassifier().get_params()
    assert params["dataset"] is None and params["learning_rate"] == defaults["learning_rate"]
    assert params["batch_size"] == defaults["batch_size"] and type(params["learning_rate"]) is float


def test_cli_unknown_paper_dataset_is_a_parse_error(table, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["fit", str(table), "--output", str(tmp_path / "m"), "--paper-dataset", "glue"])
    assert "unknown dataset name 'glue'" in capsys.readouterr().err


def test_primary_metric_lookup_names_the_argument():
    with pytest.raises(ValueError, match="dataset: unknown dataset name"):
        paper_primary_metric("nope", argname="dataset")
    assert np.all([paper_primary_metric(n) == PRIMARY[n] for n in PRIMARY])

"""``callbacks=`` and ``net__`` routing of FaithfulTextClassifier to its skorch net (docs/classifier.md)."""

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from skorch.callbacks import Callback

from fmmlearn import FaithfulTextClassifier
from fmmlearn.estimator import make_net

# Fits of a few epochs on 40 texts: a tiny model that predicts one class is expected here.
pytestmark = pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.DegenerateModelWarning")


class Recorder(Callback):
    """Records what the net looks like during a fit (state ends in ``_``: skorch's rule for callbacks)."""

    def initialize(self):
        self.epochs_, self.optimizer_groups_, self.optimizer_, self.criterion_ = [], None, None, None
        return self

    def on_train_begin(self, net, **kwargs):
        self.optimizer_groups_ = [{k: v for k, v in g.items() if k != "params"} for g in net.optimizer_.param_groups]
        self.optimizer_ = type(net.optimizer_)
        self.criterion_ = net.criterion_

    def on_epoch_end(self, net, **kwargs):
        self.epochs_.append(net.history[-1, "epoch"])


@pytest.fixture
def small_data(sentiment_data):
    X, y = sentiment_data
    return list(X[:40]), np.asarray(y[:40])


@pytest.fixture
def quick(tiny_params):
    return {**tiny_params, "max_epochs": 2}


def test_a_custom_callback_sees_every_epoch_after_fmmlearns_own(quick, small_data):
    plain, named = Recorder(), Recorder()
    clf = FaithfulTextClassifier(**quick, callbacks=[plain, ("named", named)]).fit(*small_data)
    assert plain.epochs_ == named.epochs_ == [1, 2]
    # fmmlearn's selection still ran: the history has its metric and best-epoch columns
    assert {"valid_accuracy", "valid_accuracy_best"} <= set(clf.history_.columns)


def test_without_net_params_the_optimizer_is_the_papers_adamw(quick, small_data):
    seen = Recorder()
    FaithfulTextClassifier(**quick, callbacks=[seen]).fit(*small_data)
    assert seen.optimizer_ is torch.optim.AdamW
    assert {(g["betas"], g["eps"]) for g in seen.optimizer_groups_} == {((0.9, 0.999), 1e-8)}
    assert sorted({g["weight_decay"] for g in seen.optimizer_groups_}) == [0.0, 0.01]
    assert seen.criterion_.label_smoothing == 0.0


def test_net_params_reach_the_optimizer_and_the_criterion(quick, small_data):
    seen = Recorder()
    FaithfulTextClassifier(**quick, weight_decay=0.05, callbacks=[seen], net__optimizer__betas=(0.8, 0.95),
                           net__criterion__label_smoothing=0.1, net__iterator_train__num_workers=0).fit(*small_data)
    assert {g["betas"] for g in seen.optimizer_groups_} == {(0.8, 0.95)}
    # weight_decay (the estimator's parameter) is in the decayed group; biases and LayerNorm stay at 0
    assert sorted({g["weight_decay"] for g in seen.optimizer_groups_}) == [0.0, 0.05]
    assert seen.criterion_.label_smoothing == 0.1


def test_another_optimizer_gets_no_adamw_arguments(quick, small_data):
    seen = Recorder()
    FaithfulTextClassifier(**quick, callbacks=[seen], net__optimizer=torch.optim.SGD,
                           net__optimizer__momentum=0.9).fit(*small_data)
    assert seen.optimizer_ is torch.optim.SGD
    assert {g["momentum"] for g in seen.optimizer_groups_} == {0.9}


def test_loader_settings_reach_the_data_loaders(tiny_model_dir, sentiment_data):
    from fmmlearn.encoding import encode
    from fmmlearn.metrics import get_metric
    from fmmlearn.modeling import load_pretrained
    from fmmlearn.estimator import EncodedDataset

    tokenizer, model = load_pretrained(tiny_model_dir, num_labels=2, id2label={0: "a", 1: "b"},
                                       label2id={"a": 0, "b": 1})
    X, y = sentiment_data
    dataset = EncodedDataset(encode(tokenizer, X[:20], is_pair=False, max_length=None), (y[:20] == "pos").astype(int))
    net = make_net(model, train_dataset=dataset, valid_dataset=None, mask_token_id=tokenizer.mask_token_id,
                   pad_token_id=tokenizer.pad_token_id, masking_strategy="half-det", max_masking_ratio=1.0,
                   max_epochs=1, batch_size=8, learning_rate=1e-3, weight_decay=0.01, warmup_ratio=0.0,
                   device=torch.device("cpu"), autocast_dtype=None, seed=0, metric_name=None, metric=None,
                   n_classes=2, verbose=0, net_params={"iterator_valid__num_workers": 2,
                                                       "iterator_train__timeout": 0.0}).initialize()
    assert net.get_iterator(dataset, training=False).num_workers == 2
    assert net.get_iterator(dataset, training=True).num_workers == 0
    assert net.get_iterator(dataset, training=True).batch_sampler.batch_size == 8


def test_net_params_are_estimator_parameters_for_clone_and_set_params():
    clf = FaithfulTextClassifier(net__criterion__label_smoothing=0.1, callbacks=[Recorder()])
    params = clf.get_params()
    assert params["net__criterion__label_smoothing"] == 0.1
    copy = clone(clf)
    assert copy.get_params()["net__criterion__label_smoothing"] == 0.1
    assert isinstance(copy.callbacks[0], Recorder) and copy.callbacks[0] is not clf.callbacks[0]
    copy.set_params(net__criterion__label_smoothing=0.2, max_epochs=1)
    assert copy.net__criterion__label_smoothing == 0.2 and copy.max_epochs == 1
    assert "net__criterion__label_smoothing=0.1" in repr(clf)
    assert repr(FaithfulTextClassifier()) == "FaithfulTextClassifier()"


def test_grid_search_tunes_a_net_parameter(quick, small_data):
    base = FaithfulTextClassifier(**{**quick, "max_epochs": 1}, callbacks=[Recorder()],
                                  net__criterion__label_smoothing=0.0)
    search = GridSearchCV(base, {"net__criterion__label_smoothing": [0.0, 0.3]}, cv=2).fit(*small_data)
    assert [p["net__criterion__label_smoothing"] for p in search.cv_results_["params"]] == [0.0, 0.3]
    best = search.best_estimator_
    # the refit's own (cloned) callback saw the searched value in its criterion
    assert best.callbacks[0].criterion_.label_smoothing == best.net__criterion__label_smoothing


@pytest.mark.parametrize("name, value, expected", [
    ("net__lr", 0.1, "net__lr: set learning_rate instead"),
    ("net__optimizer__weight_decay", 0.1, "net__optimizer__weight_decay: set weight_decay instead"),
    ("net__max_epochs", 2, "set max_epochs instead"),
    ("net__callbacks", [], "set callbacks instead"),
    ("net__train_split", None, "set validation_fraction or fit's validation_data instead"),
    ("net__optimzer__betas", (0.9, 0.9), "net__optimzer__betas: not a setting fmmlearn passes to the net"),
    ("net__iterator_train__shuffle", True, "batches, pads and masks the data itself"),
    ("net__iterator_train__num_workers", 2, "it must be 0"),
])
def test_a_net_parameter_that_cannot_be_routed_is_refused_before_the_model_loads(name, value, expected):
    clf = FaithfulTextClassifier(model="/nonexistent/model", **{name: value})
    with pytest.raises(ValueError, match="FaithfulTextClassifier got net__ parameter") as info:
        clf.fit(["a", "b"], [0, 1])
    assert expected in str(info.value)


def test_an_unprefixed_unknown_keyword_is_a_type_error_at_fit():
    clf = FaithfulTextClassifier(model="/nonexistent/model", max_epoch=3)  # __init__ only stores (sklearn's rule)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['max_epoch'\].*net__<name>"):
        clf.fit(["a", "b"], [0, 1])
    with pytest.raises(TypeError, match="max_epoch"):
        FaithfulTextClassifier.for_paper_dataset("sst2", max_epoch=3)
    with pytest.raises(ValueError, match="Invalid parameter 'max_epoch'"):
        FaithfulTextClassifier().set_params(max_epoch=3)


def test_a_callback_that_is_not_a_skorch_callback_is_refused():
    with pytest.raises(TypeError, match=r"callbacks=.*entry 1 is 'progress'"):
        FaithfulTextClassifier(model="/nonexistent/model", callbacks=[Recorder(), "progress"]).fit(["a", "b"], [0, 1])
    with pytest.raises(Exception, match="callbacks"):
        FaithfulTextClassifier(callbacks=Recorder()).fit(["a", "b"], [0, 1])


def test_an_unknown_optimizer_argument_names_it(quick, small_data):
    with pytest.raises(TypeError, match="bogus"):
        FaithfulTextClassifier(**quick, net__optimizer__bogus=1).fit(*small_data)


def test_json_net_parameters_survive_save_and_load(quick, small_data, tmp_path):
    clf = FaithfulTextClassifier(**{**quick, "max_epochs": 1}, net__criterion__label_smoothing=0.1).fit(*small_data)
    loaded = FaithfulTextClassifier.load(clf.save(tmp_path / "saved"))
    assert loaded.get_params()["net__criterion__label_smoothing"] == 0.1

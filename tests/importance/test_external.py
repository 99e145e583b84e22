"""Explainers as values (docs/explainers.md): callables and Captum attributions wherever a measure's name works."""

import numpy as np
import pandas as pd
import pytest
import torch

from helpers.data import make_sentiment

from fmmlearn import explain
from fmmlearn.exceptions import ExplainerError
from fmmlearn.faithfulness import faithfulness_curve, racu
from fmmlearn.importance import CallableExplainer, CaptumExplainer, as_explainer, get_method
from fmmlearn.importance.external import registered_explainer

captum_attr = pytest.importorskip("captum.attr")

RATIOS = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


@pytest.fixture(scope="module")
def data():
    return make_sentiment(12, seed=11, max_words=10)


@pytest.fixture(scope="module")
def loo_callable(fitted_tiny):
    """fmmlearn's own leave-one-out, written against the callable protocol."""
    model, mask_id = fitted_tiny.model_, fitted_tiny.tokenizer_.mask_token_id

    def own_loo(input_ids, attention_mask, target):
        with torch.no_grad():
            clean = model(input_ids=input_ids, attention_mask=attention_mask).logits
            clean = clean.gather(1, target[:, None])[:, 0]
            scores = torch.zeros(input_ids.shape)
            for t in range(input_ids.shape[1]):
                ids = input_ids.clone()
                ids[:, t] = mask_id
                masked = model(input_ids=ids, attention_mask=attention_mask).logits.gather(1, target[:, None])[:, 0]
                scores[:, t] = clean - masked
        return scores

    return CallableExplainer(own_loo, name="own-loo")


def _curves(clf, X, y, method, recursive):
    curve = faithfulness_curve(clf, X, y, method=method, ratios=RATIOS, recursive=recursive)
    rand = faithfulness_curve(clf, X, y, method="rand", ratios=RATIOS, random_state=0)
    return curve, racu(curve, rand)


@pytest.mark.parametrize("recursive", [True, False])
def test_loo_as_a_callable_and_as_feature_ablation_equals_loo_sign(fitted_tiny, data, loo_callable, recursive):
    X, y = data
    reference, reference_racu = _curves(fitted_tiny, X, y, "loo-sign", recursive)
    for method in (loo_callable, captum_attr.FeatureAblation):
        curve, value = _curves(fitted_tiny, X, y, method, recursive)
        np.testing.assert_array_equal(curve["value"].to_numpy(), reference["value"].to_numpy())
        assert value == reference_racu
        assert (curve["method"] == get_method(method).name).all()


def test_feature_ablation_and_occlusion_scores_equal_loo_sign(fitted_tiny, data):
    X, y = data
    loo = explain(fitted_tiny, X, y, method="loo-sign")["importance"].to_numpy()
    for method in (captum_attr.FeatureAblation, captum_attr.Occlusion):
        scores = explain(fitted_tiny, X, y, method=method)
        np.testing.assert_allclose(scores["importance"].to_numpy(), loo, atol=1e-5)
        assert (scores["method"] == get_method(method).name).all()


@pytest.mark.parametrize("attribution", ["IntegratedGradients", "Saliency", "InputXGradient", "DeepLift",
                                         "GradientShap", "LayerIntegratedGradients", "ShapleyValueSampling",
                                         "KernelShap", "Lime"])
def test_captum_methods_score_every_explained_token(fitted_tiny, data, attribution):
    X, y = data
    options = {"IntegratedGradients": {"n_steps": 8}, "LayerIntegratedGradients": {"n_steps": 8},
               "ShapleyValueSampling": {"n_samples": 2}, "KernelShap": {"n_samples": 20},
               "Lime": {"n_samples": 20}}.get(attribution, {})
    explainer = CaptumExplainer(getattr(captum_attr, attribution), **options)
    frame = explain(fitted_tiny, X[:3], y[:3], method=explainer)
    assert np.isfinite(frame["importance"]).all() and (frame["importance"] != 0).any()
    assert explainer.signed is not None  # inferred from the first batch


def test_integrated_gradients_of_captum_sum_to_the_logit_difference(fitted_tiny, data):
    """Completeness: the reduction (sum over the embedding) keeps what IG attributes."""
    X, y = data
    explainer = CaptumExplainer(captum_attr.IntegratedGradients, n_steps=200, method="gausslegendre")
    frame = explain(fitted_tiny, X[:2], y[:2], method=explainer)
    clean = explain(fitted_tiny, X[:2], y[:2], method="int-grad-sign", baseline="mask", n_steps=200,
                    rule="gausslegendre")
    np.testing.assert_allclose(frame["importance"].to_numpy(), clean["importance"].to_numpy(), atol=2e-3)


def test_signedness_is_declared_or_inferred_and_shown(fitted_tiny, data):
    X, y = data

    def positive(input_ids, attention_mask, target):
        return attention_mask.float()

    def signed_scores(input_ids, attention_mask, target):
        return attention_mask.float() - 2.0 * (input_ids % 2)

    assert as_explainer(positive).signed is None
    e = explain(fitted_tiny, X[:2], y[:2], method=positive)
    assert as_explainer(positive).signed is False and get_method(positive).signed is False
    assert not e.examples["signed"].any()
    e = explain(fitted_tiny, X[:2], y[:2], method=signed_scores)
    assert get_method(signed_scores).signed is True and e.examples["signed"].all()
    assert CallableExplainer(positive, name="declared", signed=True).signed is True
    assert registered_explainer(get_method(positive).name) is as_explainer(positive)


def test_a_name_is_stable_and_the_registered_name_resolves(data):
    def my_fn(input_ids, attention_mask, target):
        return attention_mask.float()

    qualname = "test_a_name_is_stable_and_the_registered_name_resolves.<locals>.my_fn"
    assert get_method(my_fn).name == f"{__name__}.{qualname}"
    assert get_method(get_method(my_fn).name).explainer is as_explainer(my_fn)
    assert get_method(captum_attr.Occlusion).name == "Occlusion"
    assert CaptumExplainer(captum_attr.IntegratedGradients, n_steps=20).name == "IntegratedGradients(n_steps=20)"
    with pytest.raises(ValueError, match="built-in measure's name"):
        get_method(CallableExplainer(my_fn, name="loo-sign"))


@pytest.mark.parametrize("returned, message", [
    (lambda ids: torch.zeros(ids.shape[0], ids.shape[1] + 1), r"shape \(\d+, \d+\); expected \(\d+, \d+\)"),
    (lambda ids: torch.full(ids.shape, float("nan")), "NaN"),
    (lambda ids: torch.zeros(*ids.shape, 4), "per-embedding scores.*reduction="),
    (lambda ids: "scores", "expected scores of shape"),
])
def test_bad_outputs_name_the_method_and_the_expected_shape(fitted_tiny, data, returned, message):
    X, y = data
    explainer = CallableExplainer(lambda ids, mask, target: returned(ids), name="bad-explainer")
    with pytest.raises(ValueError, match=message) as info:
        explain(fitted_tiny, X[:3], y[:3], method=explainer)
    assert "'bad-explainer'" in str(info.value)


def test_per_embedding_scores_with_a_reduction_are_reduced(fitted_tiny, data):
    X, y = data
    explainer = CallableExplainer(lambda ids, mask, target: torch.ones(*ids.shape, 4), name="per-embedding",
                                  reduction="sum")
    frame = explain(fitted_tiny, X[:2], y[:2], method=explainer)
    assert set(frame["importance"].unique()) <= {0.0, 4.0} and (frame["importance"] == 4.0).any()


def test_an_explainer_raising_on_one_text_says_which(fitted_tiny, data):
    X, y = data
    encoding = fitted_tiny.encode(X)
    bad_first_id = int(encoding.input_ids[4][1])

    def fails_on_one(input_ids, attention_mask, target):
        if (input_ids[:, 1] == bad_first_id).any():
            raise RuntimeError("cannot explain this one")
        return attention_mask.float()

    assert sum(int(ids[1]) == bad_first_id for ids in encoding.input_ids) == 1
    with pytest.raises(ExplainerError, match=r"RuntimeError on text 4 .*cannot explain this one") as info:
        explain(fitted_tiny, X, y, method=CallableExplainer(fails_on_one, name="fails"))
    assert isinstance(info.value.__cause__, RuntimeError)


def test_batch_size_limits_the_texts_per_call(fitted_tiny, data):
    X, y = data
    sizes = []

    def counting(input_ids, attention_mask, target):
        sizes.append(len(input_ids))
        return attention_mask.float()

    explain(fitted_tiny, X, y, method=CallableExplainer(counting, batch_size=5, name="counting"))
    assert max(sizes) <= 5 and sum(sizes) == len(X)
    sizes.clear()
    explain(fitted_tiny, X, y, method=CallableExplainer(counting, name="counting-all"))
    assert max(sizes) > 1  # one call per batch, not per text


def test_explainers_take_no_measure_parameters(fitted_tiny, data):
    X, y = data
    with pytest.raises(ValueError, match="explainer value; it takes no parameters"):
        explain(fitted_tiny, X[:2], y[:2], method=captum_attr.Saliency, n_steps=3)


# --------------------------------------------------------------------------- the other entry points


@pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.FaithfulnessWarning")
def test_erasure_metrics_and_scorers_take_explainers(fitted_tiny, data):
    from fmmlearn.faithfulness import erasure_metrics, make_erasure_scorer, make_faithfulness_scorer

    X, y = data
    reference = erasure_metrics(fitted_tiny, X, y, method="loo-sign", k=(0.2, 0.5), n_bootstrap=0).summary
    ablation = erasure_metrics(fitted_tiny, X, y, method=captum_attr.FeatureAblation, k=(0.2, 0.5),
                               n_bootstrap=0).summary
    np.testing.assert_array_equal(ablation["mean"].to_numpy(), reference["mean"].to_numpy())
    assert set(ablation["method"]) == {"FeatureAblation"}
    score = make_faithfulness_scorer(captum_attr.FeatureAblation, ratios=RATIOS)(fitted_tiny, X, y)
    assert score == make_faithfulness_scorer("loo-sign", ratios=RATIOS)(fitted_tiny, X, y)
    erasure = make_erasure_scorer(captum_attr.FeatureAblation, k=(0.2, 0.5))(fitted_tiny, X, y)
    assert erasure == make_erasure_scorer("loo-sign", k=(0.2, 0.5))(fitted_tiny, X, y)


def test_the_cli_takes_module_callable_and_module_class(fitted_tiny, data, tmp_path, capsys):
    from fmmlearn.cli import main

    X, y = data
    table = tmp_path / "d.csv"
    pd.DataFrame({"text": X, "label": y}).to_csv(table, index=False)
    model = fitted_tiny.save(tmp_path / "model")
    status = main(["explain", str(model), str(table), "--method", "helpers.explainers:earliest_first",
                   "-o", str(tmp_path / "e.csv"), "--quiet"])
    frame = pd.read_csv(tmp_path / "e.csv")
    assert status == 0 and set(frame["method"]) == {"helpers.explainers.earliest_first"}
    status = main(["faithfulness", str(model), str(table), "--label-col", "label", "--methods", "loo-sign",
                   "captum.attr:Occlusion", "--ratios", "0", "0.5", "1", "-o", str(tmp_path / "c.csv"), "--quiet",
                   "--repeats", "1"])
    curves = pd.read_csv(tmp_path / "c.csv")
    assert status == 0 and {"loo-sign", "Occlusion"} <= set(curves["method"])
    with pytest.raises(SystemExit):
        main(["explain", str(model), str(table), "--method", "captum.attr:NoSuchThing", "-o", str(tmp_path / "x.csv")])
    assert "has no attribute 'NoSuchThing'" in capsys.readouterr().err


def test_a_configured_captum_object_keeps_its_settings_and_gets_the_models_forward(fitted_tiny, data):
    X, y = data
    unused = lambda *args: None  # noqa: E731 - replaced by the model's forward function
    plain = captum_attr.IntegratedGradients(unused, multiply_by_inputs=False)
    frame = explain(fitted_tiny, X[:2], y[:2], method=CaptumExplainer(plain, n_steps=8))
    multiplied = explain(fitted_tiny, X[:2], y[:2], method=CaptumExplainer(captum_attr.IntegratedGradients, n_steps=8))
    assert np.isfinite(frame["importance"]).all()
    assert not np.allclose(frame["importance"], multiplied["importance"])  # multiply_by_inputs=False was kept
    assert plain.forward_func is unused  # the user's object is not changed
    layer = captum_attr.LayerIntegratedGradients(unused, fitted_tiny.model_.get_input_embeddings())
    np.testing.assert_allclose(
        explain(fitted_tiny, X[:2], y[:2], method=CaptumExplainer(layer, n_steps=8, name="lig"))["importance"],
        explain(fitted_tiny, X[:2], y[:2], method=CaptumExplainer(captum_attr.LayerIntegratedGradients,
                                                                   n_steps=8))["importance"], atol=1e-6)


def test_unsupported_captum_classes_and_values_are_type_errors():
    with pytest.raises(TypeError, match="neither a perturbation, a layer nor a gradient attribution"):
        get_method(captum_attr.NoiseTunnel)
    with pytest.raises(ValueError, match="a callable fn"):
        get_method(42)


def test_an_explainer_out_of_memory_gets_smaller_batches_not_an_error(fitted_tiny, data):
    X, y = data
    sizes = []

    def small_batches_only(input_ids, attention_mask, target):
        sizes.append(len(input_ids))
        if len(input_ids) > 2:
            raise torch.OutOfMemoryError("out of memory (simulated)")
        return attention_mask.float()

    frame = explain(fitted_tiny, X, y, method=CallableExplainer(small_batches_only, name="small-batches"))
    assert frame["example"].nunique() == len(X) and max(sizes) > 2 and sizes[-1] <= 2

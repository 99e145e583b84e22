"""In-distribution tests on a fitted classifier (docs/ood.md): poolings, the matched control, detectors, the scorer."""

import numpy as np
import pytest
import torch

from fmmlearn import FaithfulTextClassifier
from fmmlearn.ood import (KNNDetector, MahalanobisDetector, MaSF, fit_detector, hidden_state_features,
                          in_distribution_report, make_in_distribution_scorer, masked_set_features, masked_test_sets,
                          placeholder_ids, placeholder_inputs, pvalue_frame, resolve_placeholder)

from helpers.data import make_sentiment


@pytest.fixture(scope="module")
def clf(tiny_model_dir):
    X, y = make_sentiment(32, seed=5)
    return FaithfulTextClassifier(model=tiny_model_dir, max_epochs=1, batch_size=8, validation_fraction=0,
                                  precision="fp32", device="cpu", random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def texts():
    X_calib, _ = make_sentiment(60, seed=1, min_words=1, max_words=12)
    X_test, y_test = make_sentiment(10, seed=2, min_words=2, max_words=12)
    return X_calib, X_test, y_test


def direct_states(clf, ids):
    with torch.no_grad():
        return clf.model_(input_ids=torch.as_tensor(ids)[None], output_hidden_states=True).hidden_states


# -- poolings ------------------------------------------------------------------------------------------


def test_poolings_come_from_one_pass_and_equal_the_direct_computation(clf, texts):
    X = texts[0][:9]
    encoding = clf.encode(X)
    assert len(set(encoding.lengths.tolist())) > 3                      # the batches are padded
    pooled = hidden_state_features(clf, X, pooling=("cls", "mean", "max", "cls+mean"), batch_size=4)
    np.testing.assert_array_equal(pooled["cls+mean"], np.concatenate([pooled["cls"], pooled["mean"]], axis=1))
    for i, ids in enumerate(encoding.input_ids):
        states = direct_states(clf, ids)
        np.testing.assert_allclose(pooled["cls"][i], np.stack([h[0, 0].numpy() for h in states]), atol=1e-5)
        np.testing.assert_allclose(pooled["mean"][i], np.stack([h[0].mean(0).numpy() for h in states]), atol=1e-5)
        np.testing.assert_allclose(pooled["max"][i], np.stack([h[0].amax(0).numpy() for h in states]), atol=1e-5)
    np.testing.assert_array_equal(hidden_state_features(clf, X, pooling="mean", batch_size=2), pooled["mean"])


def test_decoders_pool_the_last_real_token(tmp_path):
    from helpers.decoders import build_decoder
    from helpers.matrix import FIT, sentiment

    X, y = sentiment(24)
    decoder = FaithfulTextClassifier(model=build_decoder("gpt2", tmp_path / "gpt2"), validation_fraction=0,
                                     **{**FIT, "max_epochs": 1}).fit(X, y)
    encoding = decoder.encode(X[:6])
    pooled = hidden_state_features(decoder, X[:6], pooling="cls", batch_size=3)
    for i, ids in enumerate(encoding.input_ids):
        states = direct_states(decoder, ids)
        np.testing.assert_allclose(pooled[i], np.stack([h[0, -1].numpy() for h in states]), atol=1e-5)


def test_an_unknown_pooling_is_named(clf, texts):
    with pytest.raises(ValueError, match="pooling must be one of"):
        hidden_state_features(clf, texts[1], pooling="sum")


# -- the matched positive control ----------------------------------------------------------------------


def test_the_placeholder_is_an_unused_entry_of_the_bert_vocabulary(clf):
    placeholder = resolve_placeholder(clf)
    assert (placeholder.kind, placeholder.token) == ("unused", "[unused0]")
    assert placeholder.token_id == clf.tokenizer_.convert_tokens_to_ids("[unused0]")
    assert resolve_placeholder(clf, kind="mean-embedding").token_id == clf.tokenizer_.mask_token_id
    with pytest.raises(ValueError, match="placeholder must be one of"):
        resolve_placeholder(clf, kind="random")


def test_placeholder_ids_change_exactly_the_masked_positions(clf):
    mask = clf.tokenizer_.mask_token_id
    placeholder = resolve_placeholder(clf)
    original = [np.array([101, mask, 7, 8, 102]), np.array([101, 9, 102])]
    masked = [np.array([101, mask, mask, 8, 102]), np.array([101, mask, 102])]
    out = placeholder_ids(masked, original, mask_token_id=mask, placeholder=placeholder)
    # position 1 of the first text was a mask token before masking: left alone
    assert out[0].tolist() == [101, mask, placeholder.token_id, 8, 102]
    assert out[1].tolist() == [101, placeholder.token_id, 102]


def test_the_mean_embedding_placeholder_is_the_mean_input_embedding(clf, texts):
    placeholder = resolve_placeholder(clf, kind="mean-embedding")
    ids = clf.encode(texts[1][:1]).input_ids[0].copy()
    ids[1] = placeholder.token_id
    embeddings = clf.model_.get_input_embeddings()
    expected_row = embeddings.weight.detach().mean(dim=0)
    with torch.no_grad():
        inputs = embeddings(torch.as_tensor(ids)[None]).clone()
        inputs[0, 1] = expected_row
        direct = clf.model_(inputs_embeds=inputs).logits
        with placeholder_inputs(clf.model_, placeholder=placeholder):
            hooked = clf.model_(input_ids=torch.as_tensor(ids)[None]).logits
        restored = clf.model_(input_ids=torch.as_tensor(ids)[None]).logits
    torch.testing.assert_close(hooked, direct)
    assert not torch.allclose(restored, hooked)                     # the hook is gone after the block


def test_matched_sets_leave_ratio_zero_out_and_differ_from_the_masked_ones(clf, texts):
    _, X_test, y_test = texts
    encoding, steps = masked_test_sets(clf, X_test, y_test, ratios=[0.0, 0.5, 1.0], random_state=0)
    masked = masked_set_features(clf, encoding, steps, pooling="cls")
    matched = masked_set_features(clf, encoding, steps, pooling="cls", placeholder=resolve_placeholder(clf))
    assert [r for r, _ in masked] == [0.0, 0.5, 1.0] and [r for r, _ in matched] == [0.5, 1.0]
    assert not np.allclose(masked[2][1], matched[1][1])


# -- detectors on a classifier -------------------------------------------------------------------------


@pytest.mark.parametrize("detector", ["mahalanobis-all", "knn", "masf"])
def test_fit_detector_with_training_texts_calibrates_on_held_out_texts(clf, texts, detector):
    X_calib = texts[0]
    X_train, _ = make_sentiment(40, seed=9)
    fitted = fit_detector(clf, detector, X_calib[:30], X_train=X_train, dist_repeats=2)
    assert fitted.pvalue_floor_ == pytest.approx(1 / 31)            # the conformal level: the 30 held-out texts
    if not isinstance(fitted, MaSF):
        assert fitted.n_reference_ == 80                            # 2 masked copies of every training text
    p = pvalue_frame(fitted, [(0.0, hidden_state_features(clf, texts[1], pooling=fitted.pooling))])
    assert p["p"].between(1 / 31, 1).all()


def test_report_with_a_conformal_detector_names_it(clf, texts):
    X_calib, X_test, y_test = texts
    X_train, _ = make_sentiment(40, seed=9)
    report = in_distribution_report(clf, X_calib, X_test, y_test, ratios=[0.0, 0.5], detector="mahalanobis-all",
                                    X_train=X_train, random_state=0)
    assert set(report["detector"]) == {"mahalanobis-all"} and set(report["calibration"]) == {"calibrated"}
    assert (report["expected"] <= report["threshold"]).all()
    again = in_distribution_report(clf, X_calib, X_test, y_test, ratios=[0.0, 0.5],
                                   detector=MahalanobisDetector(layers="all"), X_train=X_train, random_state=0)
    np.testing.assert_allclose(again["proportion"], report["proportion"])
    with pytest.raises(ValueError, match="calibration='reference' is a MaSF option"):
        in_distribution_report(clf, X_calib, X_test, y_test, calibration="reference", detector="knn")


def test_erasure_metrics_read_any_detector(clf, texts):
    from fmmlearn.faithfulness import erasure_metrics

    X_calib, X_test, y_test = texts
    report = erasure_metrics(clf, X_test, y_test, method="inp-grad-sign", k=[0.5], X_calib=X_calib,
                             masf=KNNDetector(n_neighbors=3), n_bootstrap=0)
    assert report.per_example["masf_p"].dropna().between(0, 1).all()
    assert report.summary["ood_share"].notna().all()


# -- the scorer ----------------------------------------------------------------------------------------


def test_in_distribution_scorer_is_one_minus_the_flagged_share(clf, texts):
    X = texts[0] + texts[1]
    y = ["pos"] * len(X)
    scorer = make_in_distribution_scorer("mahalanobis", ratios=(0.5,), random_state=0)
    value = scorer(clf, X, y)
    assert 0 <= value <= 1 and value == scorer(clf, X, y)            # deterministic
    assert "make_in_distribution_scorer(detector='mahalanobis'" in repr(scorer)
    with pytest.raises(ValueError, match="needs at least 5"):
        scorer(clf, X[:3], y[:3])
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        make_in_distribution_scorer(ratios=(0.5, 1.0))
    with pytest.raises(ValueError, match="detector must be one of"):
        make_in_distribution_scorer("mahalanobis-cls")


def test_the_scorer_works_in_a_grid_search(tiny_model_dir):
    from sklearn.model_selection import GridSearchCV

    X, y = make_sentiment(60, seed=4)
    search = GridSearchCV(
        FaithfulTextClassifier(model=tiny_model_dir, max_epochs=1, batch_size=8, validation_fraction=0,
                               precision="fp32", device="cpu", random_state=0),
        {"max_masking_ratio": [0.0, 1.0]}, cv=2, refit=False,
        scoring={"accuracy": "accuracy",
                 "in_distribution": make_in_distribution_scorer("mahalanobis", ratios=(0.5,))})
    search.fit(X, y)
    scores = search.cv_results_["mean_test_in_distribution"]
    assert np.all((scores >= 0) & (scores <= 1))

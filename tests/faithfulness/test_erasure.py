"""Erasure metrics (comprehensiveness, sufficiency, AOPC), their MaSF validity flag, importances and scorer."""

import math
import pickle
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from joblib import parallel_config
from scipy.special import expit, softmax
from sklearn.base import BaseEstimator
from sklearn.model_selection import GridSearchCV

from fmmlearn import FaithfulTextClassifier
from fmmlearn.explanation import explain
from fmmlearn.faithfulness import (
    PER_EXAMPLE_COLUMNS,
    SUMMARY_COLUMNS,
    ErasureReport,
    FaithfulnessWarning,
    erasure_metrics,
    faithful_refit,
    make_erasure_scorer,
)
from fmmlearn.faithfulness._erasure import _perturbed_encoding
from fmmlearn.ood import MaSF, calibration_features
from fmmlearn.plotting import plot_erasure

from helpers.data import make_sentiment
from helpers.faithfulness import BagClassifier, LinearBag, WrappedClassifier

# Most tests here pass no calibration data on purpose; the warning that says so is tested once.
pytestmark = pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.UncertifiedErasureWarning")

K4 = (0.25, 0.5, 0.75, 1.0)


def bag_weights(tokenizer, words, offset=0.0):
    """LinearBag weights: ``words`` maps word -> weight, every other id 0; ``offset`` is added to every id."""
    weights = np.zeros(tokenizer.vocab_size, dtype=np.float32)
    for word, value in words.items():
        (token_id,) = tokenizer(word, add_special_tokens=False)["input_ids"]
        weights[token_id] = value
    return weights + np.float32(offset)


@pytest.fixture(scope="module")
def hand_bag(bundled_tokenizer):
    """logit_pos = s, logit_neg = -s with s = sum of word weights; p(pos) = sigmoid(2 s)."""
    return BagClassifier(bundled_tokenizer, bag_weights(bundled_tokenizer, {"good": 2.0, "bad": -1.0, "movie": 0.5}))


def values(report, mode, example):
    rows = report.per_example[(report.per_example["mode"] == mode) & (report.per_example["example"] == example)]
    return rows.set_index("k")["value"]


def aopc_row(report, mode):
    summary = report.summary
    return summary[(summary["mode"] == mode) & (summary["k"] == "aopc")].iloc[0]


# --------------------------------------------------------------------------- hand-computed values


HAND_X = ["good movie bad plot", "bad plot", "good movie"]
HAND_Y = ["pos", "neg", "pos"]
# Scores per token ([CLS] ... [SEP]): example 0 ranks good > movie > plot > bad; example 2 is a tie.
HAND_IMPORTANCES = [np.array([0, 2.0, 0.5, -1.0, 0.0, 0]), np.array([0, 1.0, 0.0, 0]), np.array([0, 1.0, 1.0, 0])]


def test_comprehensiveness_and_sufficiency_by_hand(hand_bag):
    with pytest.warns(FaithfulnessWarning, match="not certified"):
        report = erasure_metrics(hand_bag, HAND_X, HAND_Y, importances=HAND_IMPORTANCES, k=K4, n_bootstrap=0)
    assert isinstance(report, ErasureReport)
    assert tuple(report.per_example.columns) == PER_EXAMPLE_COLUMNS
    assert tuple(report.summary.columns) == SUMMARY_COLUMNS
    sig = lambda s: expit(2 * s)  # noqa: E731  p(pos) of the bag for the score s
    # Example 0, s = 2 + 0.5 - 1 = 1.5; masking a token removes its weight (the mask token weighs 0).
    full = sig(1.5)
    comp = values(report, "comprehensiveness", 0)
    np.testing.assert_allclose(comp.to_numpy(), [full - sig(-0.5), full - sig(-1.0), full - sig(-1.0), full - 0.5],
                               rtol=1e-6)
    suff = values(report, "sufficiency", 0)
    np.testing.assert_allclose(suff.to_numpy(), [full - sig(2.0), full - sig(2.5), full - sig(2.5), 0.0], atol=1e-7)
    # Example 1 (gold "neg": p = sigmoid(-2 s), s = -1): n = 2, so k = 0.25 selects no token.
    p_neg = expit(2.0)
    comp1, suff1 = values(report, "comprehensiveness", 1), values(report, "sufficiency", 1)
    assert math.isnan(comp1[0.25]) and math.isnan(suff1[0.25])
    np.testing.assert_allclose(comp1[[0.5, 0.75, 1.0]].to_numpy(), [p_neg - 0.5] * 3, rtol=1e-6)
    np.testing.assert_allclose(suff1[[0.5, 0.75, 1.0]].to_numpy(), 0.0, atol=1e-7)
    # Example 2: tied scores; the earlier token ("good") is removed first, as mask_top_k does.
    assert values(report, "comprehensiveness", 2)[0.5] == pytest.approx(sig(2.5) - sig(0.5), rel=1e-6)
    # AOPC: per example the mean over the k with a rationale, then the mean over examples.
    expected = np.mean([comp.mean(), p_neg - 0.5, values(report, "comprehensiveness", 2).mean()])
    assert aopc_row(report, "comprehensiveness")["mean"] == pytest.approx(expected, rel=1e-6)
    frame = report.per_example
    first = frame[(frame["example"] == 0) & (frame["mode"] == "comprehensiveness")]
    assert first["n_selected"].tolist() == [1, 2, 3, 4] == first["n_removed"].tolist()
    assert frame[(frame["example"] == 0) & (frame["mode"] == "sufficiency")]["n_removed"].tolist() == [3, 2, 1, 0]
    assert frame["p_full"][frame["example"] == 0].iloc[0] == pytest.approx(full, rel=1e-6)
    assert (frame["target"].to_numpy() == np.asarray(HAND_Y)[frame["example"].to_numpy()]).all()


def test_loo_sign_of_the_bag_is_its_exact_ranking(hand_bag):
    # loo-sign of a LinearBag is each token's exact contribution, so it reproduces the given ranking.
    given = erasure_metrics(hand_bag, HAND_X[:2], HAND_Y[:2], importances=HAND_IMPORTANCES[:2], k=K4, n_bootstrap=0)
    computed = erasure_metrics(hand_bag, HAND_X[:2], HAND_Y[:2], method="loo-sign", k=K4, n_bootstrap=0)
    np.testing.assert_allclose(computed.per_example["value"], given.per_example["value"], rtol=1e-6)
    assert (computed.per_example["method"] == "loo-sign").all() and (given.per_example["method"] == "precomputed").all()


def test_target_is_the_prediction_without_labels_or_the_given_class(hand_bag):
    X = ["good movie", "bad plot"]
    report = erasure_metrics(hand_bag, X, k=0.5, n_bootstrap=0, importances=[np.zeros(4), np.zeros(4)])
    assert report.per_example.drop_duplicates("example")["target"].tolist() == hand_bag.classes_[
        hand_bag.encoded_logits(hand_bag.encode(X)).argmax(axis=1)].tolist() == ["pos", "neg"]
    fixed = erasure_metrics(hand_bag, X, ["neg", "neg"], target="pos", k=0.5, n_bootstrap=0,
                            importances=[np.zeros(4), np.zeros(4)])
    assert (fixed.per_example["target"] == "pos").all()
    assert fixed.per_example["p_full"].iloc[1] == pytest.approx(expit(-2.0), rel=1e-6)  # p(pos | "bad plot")


# --------------------------------------------------------------------------- deletion = ferret's definition


def ferret_scores(clf, text, scores, target_idx, thresholds, mode):
    """ferret 0.5's AOPC comprehensiveness/sufficiency of one text, literally (remove_tokens=True,
    based_on="perc", remove_first_last=True, only_pos=False): drop [CLS]/[SEP], pick int(perc * n) tokens by
    ``argsort()[-n:][::-1]``, skip empty or repeated rationales, delete (comprehensiveness) or keep (sufficiency,
    in order) them, decode, re-tokenize, and take the softmax probability of the target."""
    tokenizer = clf.tokenizer_

    def proba(texts):
        return softmax(clf.encoded_logits(clf.encode(texts)).astype(np.float64), axis=1)[:, target_idx]

    baseline = proba([text])[0]
    ids = np.array(tokenizer(text)["input_ids"][1:-1])
    scores = np.asarray(scores)[1:-1]
    perturbed, last = [], None
    for perc in thresholds:
        n = int(perc * len(scores))
        if not 0 < n <= len(scores):
            continue
        top = np.array(scores).argsort()[-n:][::-1]
        if last is not None and set(top) == last:
            continue
        last = set(top)
        kept = np.delete(ids, top) if mode == "comprehensiveness" else ids[np.sort(top)]
        perturbed.append(tokenizer.decode(kept, skip_special_tokens=False))
    return baseline - proba(perturbed)


def test_delete_equals_the_ferret_definition(bundled_tokenizer):
    # Every id (special and mask tokens too) adds 0.25, so the score depends on the length:
    # deleting a token differs from masking it.
    clf = BagClassifier(bundled_tokenizer, bag_weights(bundled_tokenizer, {"good": 2.0, "bad": -1.0, "movie": 0.5},
                                                       offset=0.25))
    text, scores = "good movie bad plot", np.array([0, 3.0, 1.0, -2.0, 0.5, 0])
    report = erasure_metrics(clf, [text], ["pos"], importances=[scores], k=K4, removal="delete", n_bootstrap=0)
    masked = erasure_metrics(clf, [text], ["pos"], importances=[scores], k=K4, removal="mask", n_bootstrap=0)
    for mode in ("comprehensiveness", "sufficiency"):
        ours = values(report, mode, 0).to_numpy()
        np.testing.assert_allclose(ours, ferret_scores(clf, text, scores, 1, K4, mode), rtol=1e-6, atol=1e-7)
        assert aopc_row(report, mode)["mean"] == pytest.approx(ours.mean(), rel=1e-9)
    # By hand: s = sum of (weight + 0.25) over the ids kept, [CLS] and [SEP] included.
    full = expit(2 * (1.5 + 6 * 0.25))
    comp = values(report, "comprehensiveness", 0).to_numpy()
    np.testing.assert_allclose(comp, full - expit(2 * np.array([-0.5 + 5 * .25, -1 + 4 * .25, -1 + 3 * .25, 2 * .25])),
                               rtol=1e-6)
    suff = values(report, "sufficiency", 0).to_numpy()
    np.testing.assert_allclose(suff, full - expit(2 * np.array([2 + 3 * .25, 2.5 + 4 * .25, 2.5 + 5 * .25,
                                                                1.5 + 6 * .25])), rtol=1e-6, atol=1e-7)
    assert not np.allclose(values(masked, "comprehensiveness", 0).to_numpy()[:3], comp[:3])


def test_deletion_cuts_every_field_and_keeps_segment_b(bundled_tokenizer):
    clf = BagClassifier(bundled_tokenizer, np.zeros(bundled_tokenizer.vocab_size, dtype=np.float32))
    encoding = clf.encode([("good movie bad", "nice plot")])
    segment_a = np.flatnonzero(encoding.segment_ids[0] == 0)
    cut = _perturbed_encoding(encoding, np.array([0]), [segment_a], "delete", None)
    kept = np.setdiff1d(np.arange(len(encoding.input_ids[0])), segment_a)
    assert bundled_tokenizer.convert_ids_to_tokens(cut.input_ids[0].tolist()) == [
        "[CLS]", "[SEP]", "nice", "plot", "[SEP]"]
    for name in ("special_tokens_mask", "segment_ids", "word_ids", "offsets", "token_type_ids"):
        np.testing.assert_array_equal(getattr(cut, name)[0], getattr(encoding, name)[0][kept])
    assert cut.token_type_ids[0].tolist() == [0, 0, 1, 1, 1] and cut.is_pair
    masked = _perturbed_encoding(encoding, np.array([0]), [segment_a[:1]], "mask", bundled_tokenizer.mask_token_id)
    assert masked.input_ids[0][segment_a[0]] == bundled_tokenizer.mask_token_id
    assert len(masked.input_ids[0]) == len(encoding.input_ids[0])


def test_pairs_rank_and_remove_segment_a_only(hand_bag):
    X, y = [("good movie", "bad plot")], ["pos"]
    report = erasure_metrics(hand_bag, X, y, importances=[np.array([0, 2.0, 0.5, 0, 9.0, 9.0, 0])], k=1.0,
                             removal="delete", n_bootstrap=0)
    comp = report.per_example[report.per_example["mode"] == "comprehensiveness"].iloc[0]
    assert comp["n_eligible"] == 2 and comp["n_removed"] == 2
    # Segment B ("bad plot", s = -1) is all that remains.
    assert comp["p_perturbed"] == pytest.approx(expit(-2.0), rel=1e-6)


# --------------------------------------------------------------------------- validity (MaSF)


class StateBag(LinearBag):
    """A LinearBag with one hidden-state layer: the vector (1, 1) for every token but the mask token.

    ``mask_state`` is the mask token's vector: (1, 1) for a model that does not notice masking
    (in-distribution by construction), (50, 50) for one whose hidden states jump at a mask.
    """

    def __init__(self, weights, mask_token_id, mask_state):
        super().__init__(weights)
        states = torch.ones(len(weights), 2)
        states[mask_token_id] = mask_state
        self.states = torch.nn.Embedding.from_pretrained(states)

    def forward(self, input_ids=None, inputs_embeds=None, attention_mask=None, token_type_ids=None,
                output_hidden_states=False):
        logits = super().forward(input_ids, inputs_embeds, attention_mask, token_type_ids)
        if not output_hidden_states:
            return logits
        return SimpleNamespace(logits=logits, hidden_states=(self.states(input_ids),))


class StateClassifier(WrappedClassifier, BaseEstimator):
    """The low-level API plus the masking parameters MaSF calibration reads (an estimator for check_is_fitted)."""

    def __init__(self, tokenizer, model, max_masking_ratio):
        super().__init__(tokenizer, model)
        self.tokenizer, self.model = tokenizer, model
        self.max_masking_ratio = max_masking_ratio
        self.masking_strategy = "half-det"

    def fit(self, X=None, y=None):
        return self

    def __sklearn_is_fitted__(self):
        return True


@pytest.fixture(scope="module")
def toy_models(bundled_tokenizer):
    weights = bag_weights(bundled_tokenizer, {"good": 2.0, "bad": -1.0, "movie": 0.5})
    mask = bundled_tokenizer.mask_token_id
    plain = StateClassifier(bundled_tokenizer, StateBag(weights, mask, 50.0), max_masking_ratio=0.0)
    masked = StateClassifier(bundled_tokenizer, StateBag(weights, mask, 1.0), max_masking_ratio=1.0)
    return plain, masked


@pytest.fixture(scope="module")
def toy_data():
    X, y = make_sentiment(90, seed=5, min_words=4)
    X_test, y_test = make_sentiment(20, seed=6, min_words=4)
    return X, X_test, y_test


def test_validity_flag_flips_between_plain_and_masked(toy_models, toy_data):
    X_calib, X_test, y_test = toy_data
    plain, masked = toy_models
    k = (0.25, 0.5)
    on_plain = erasure_metrics(plain, X_test, y_test, method="loo-sign", k=k, X_calib=X_calib, n_bootstrap=0)
    on_masked = erasure_metrics(masked, X_test, y_test, method="loo-sign", k=k, X_calib=X_calib, n_bootstrap=0)
    # Same logits, same metric: only the certification differs.
    np.testing.assert_allclose(on_plain.per_example["value"], on_masked.per_example["value"])
    assert on_plain.summary["valid"].tolist() == [False] * 6
    assert (on_plain.summary["ood_share"] == 1.0).all()
    assert on_masked.summary["valid"].tolist() == [True] * 6
    assert (on_masked.summary["ood_share"] == 0.0).all()
    assert (on_plain.per_example["masf_p"] < 0.05).all() and (on_masked.per_example["masf_p"] == 1.0).all()
    # Deleting tokens never shows this plain model a mask token: in-distribution by its features.
    deleted = erasure_metrics(plain, X_test, y_test, method="loo-sign", k=k, X_calib=X_calib, removal="delete",
                              n_bootstrap=0)
    assert deleted.summary["valid"].all()


def test_validity_with_a_fitted_masf_and_the_k1_sufficiency(toy_models, toy_data):
    X_calib, X_test, y_test = toy_data
    plain, _ = toy_models
    masf = MaSF(random_state=0).fit(calibration_features(plain, X_calib, random_state=0))
    fitted = erasure_metrics(plain, X_test, y_test, method="loo-sign", k=(0.5, 1.0), masf=masf, random_state=0,
                             n_bootstrap=0)
    fitting = erasure_metrics(plain, X_test, y_test, method="loo-sign", k=(0.5, 1.0), X_calib=X_calib, random_state=0,
                              n_bootstrap=0)
    pd.testing.assert_frame_equal(fitted.summary, fitting.summary)
    suff = fitted.summary[fitted.summary["mode"] == "sufficiency"].set_index("k")
    # Keeping every token removes nothing: the input is clean, so valid; but the AOPC also averages k = 0.5.
    assert suff.loc[1.0, "valid"] and not suff.loc[0.5, "valid"] and not suff.loc["aopc", "valid"]


def test_uncertified_without_calibration_and_refused_when_masf_cannot_reject(toy_models, toy_data):
    X_calib, X_test, y_test = toy_data
    plain, _ = toy_models
    with pytest.warns(FaithfulnessWarning, match="not certified"):
        report = erasure_metrics(plain, X_test, y_test, method="loo-sign", k=0.5, n_bootstrap=0)
    assert report.summary["valid"].isna().all() and report.summary["ood_share"].isna().all()
    assert str(report.summary["valid"].dtype) == "boolean"
    with pytest.warns(UserWarning, match="level-3 fold has only 10"):
        small = MaSF(random_state=0).fit(calibration_features(plain, X_calib[:30], random_state=0))
    with pytest.raises(ValueError, match="smallest p-value is 0.0909 .its conformal level holds 10 examples., so no"):
        erasure_metrics(plain, X_test, y_test, method="loo-sign", k=0.5, masf=small)
    with pytest.raises(ValueError, match="either a fitted masf or X_calib"):
        erasure_metrics(plain, X_test, y_test, method="loo-sign", masf=small, X_calib=X_calib)
    with pytest.raises(ValueError, match="X_calib has 3"):
        erasure_metrics(plain, X_test, y_test, method="loo-sign", X_calib=X_calib[:3])


def test_plot_colours_points_by_validity(toy_models, toy_data):
    X_calib, X_test, y_test = toy_data
    reports = {name: erasure_metrics(clf, X_test, y_test, method="loo-sign", k=(0.25, 0.5), X_calib=X_calib,
                                     n_bootstrap=99, model_name=name)
               for name, clf in zip(("plain", "masked"), toy_models)}
    ax = plot_erasure(reports)
    colours = {tuple(np.round(c, 3)) for coll in ax.collections if hasattr(coll, "get_offsets")
               for c in coll.get_facecolors()}
    from matplotlib.colors import to_rgba

    assert tuple(np.round(to_rgba("tab:green"), 3)) in colours and tuple(np.round(to_rgba("tab:red"), 3)) in colours
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("plain" in s and "not valid" in s for s in labels) and any("masked" in s and ", valid" in s
                                                                          for s in labels)
    assert reports["plain"].plot() is not None and (reports["plain"].summary["model"] == "plain").all()


# --------------------------------------------------------------------------- importances from elsewhere


class Exploding(BagClassifier):
    """Fails on any forward pass: argument errors must come before model work."""

    def encoded_logits(self, encoding, input_ids=None):
        raise AssertionError("model work before argument checks")


@pytest.fixture(scope="module")
def exploding(bundled_tokenizer):
    return Exploding(bundled_tokenizer, np.zeros(bundled_tokenizer.vocab_size, dtype=np.float32))


def test_every_importance_form_gives_the_same_metrics(hand_bag, bundled_tokenizer):
    X, y = HAND_X[:2], HAND_Y[:2]
    arrays = HAND_IMPORTANCES[:2]
    tokens = [bundled_tokenizer.convert_ids_to_tokens(ids.tolist()) for ids in hand_bag.encode(X).input_ids]
    matrix = np.zeros((2, 6))
    for i, a in enumerate(arrays):
        matrix[i, : len(a)] = a
    explain_frame = explain(hand_bag, X, y, method="loo-sign")  # loo-sign = the exact contributions here
    ferret_frame = pd.DataFrame([(i, t, s) for i, (ts, a) in enumerate(zip(tokens, arrays)) for t, s in zip(ts, a)],
                                columns=["example", "token", "importance"])
    plain_frame = ferret_frame[~ferret_frame["token"].isin(["[CLS]", "[SEP]"])]
    forms = {
        "arrays": arrays, "matrix": matrix, "captum tensor": torch.tensor(matrix, requires_grad=True) * 1.0,
        "explain frame": explain_frame, "ferret frame": ferret_frame, "frame without specials": plain_frame,
        "token pairs": list(zip(tokens, arrays)),
        "ferret explanations": [SimpleNamespace(text=x, tokens=t, scores=a) for x, t, a in zip(X, tokens, arrays)],
    }
    reference = erasure_metrics(hand_bag, X, y, importances=arrays, k=K4, n_bootstrap=0).per_example["value"]
    for name, importances in forms.items():
        got = erasure_metrics(hand_bag, X, y, importances=importances, k=K4, n_bootstrap=0).per_example["value"]
        np.testing.assert_allclose(got, reference, rtol=1e-6, err_msg=name)


def test_misaligned_token_lists_name_the_example_and_token(exploding, bundled_tokenizer):
    X, y = ["good movie", "bad plot"], ["pos", "neg"]
    frame = pd.DataFrame({"example": [0, 0, 1, 1], "token": ["good", "movie", "bad", "plots"],
                          "importance": [1.0, 0.5, 1.0, 0.0]})
    with pytest.raises(ValueError, match=r"example 1 .*token 1 is 'plots' where the model's tokenizer gives 'plot'"):
        erasure_metrics(exploding, X, y, importances=frame)
    roberta_style = [(["<s>", "Ġgood", "Ġmovie", "</s>"], [0, 1, 1, 0]), (["[CLS]", "bad", "plot", "[SEP]"], [0] * 4)]
    with pytest.raises(ValueError, match="example 0 .*token 0 is '<s>'"):
        erasure_metrics(exploding, X, y, importances=roberta_style)
    with pytest.raises(ValueError, match="example 0 has 2 tokens but 3 scores"):
        erasure_metrics(exploding, X, y, importances=[(["good", "movie"], [1, 2, 3]), (["bad", "plot"], [1, 2])])
    with pytest.raises(ValueError, match=r"no tokens for example\(s\) \[1\]"):
        erasure_metrics(exploding, X, y, importances=frame[frame["example"] == 0])


@pytest.mark.parametrize("importances, message", [
    ([np.zeros(4)], "1 entries but X has 2"),
    ([np.zeros(4), np.zeros(3)], r"importances\[1\] has 3 values but example 1 has 4 tokens"),
    (np.zeros((2, 3)), r"shape \(2, 3\)"),
    (np.zeros((2, 4, 8)), "sum"),
    ([np.array([0, np.nan, 1, 0]), np.zeros(4)], "no score"),
    ("scores", "importances must be"),
])
def test_wrong_importances_are_errors_before_model_work(exploding, importances, message):
    with pytest.raises((ValueError, TypeError), match=message):
        erasure_metrics(exploding, ["good movie", "bad plot"], ["pos", "neg"], importances=importances)


@pytest.mark.parametrize("kwargs, message", [
    ({"k": 0}, r"k must lie in \(0, 1\]"),
    ({"k": [0.1, -0.2]}, r"k must lie in \(0, 1\]"),
    ({"k": 1.5}, r"k must lie in \(0, 1\]"),
    ({"k": float("nan")}, r"k must lie in \(0, 1\]"),
    ({"k": []}, "k is empty"),
    ({"k": "0.1"}, "k must hold numbers"),
    ({"k": [0.1, None]}, "k must hold numbers"),
    ({"k": True}, "k must hold numbers"),
    ({"k": [0.2, 0.2]}, "repeated"),
    ({"mode": "comprehensive"}, "mode must be one of"),
    ({"mode": []}, "mode must be one of"),
    ({"removal": "drop"}, "'removal' parameter of erasure_metrics must be a str among"),
    ({"segment": "B"}, "'segment' parameter of erasure_metrics must be a str among"),
    ({"n_bootstrap": True}, "'n_bootstrap' parameter of erasure_metrics must be an int"),
    ({"alpha": float("nan")}, "'alpha' parameter"),
    ({"max_invalid_factor": float("inf")}, "'max_invalid_factor' parameter"),
    ({"alpha": 0}, "alpha"),
    ({"max_invalid_factor": -1}, "max_invalid_factor"),
    ({"n_bootstrap": -1}, "n_bootstrap"),
    ({"confidence_level": 1.0}, "confidence_level"),
    ({"method": None}, "pass method"),
    ({"method": "loo"}, "method must be one of"),
    ({"n_steps": 3}, "does not take"),
    ({"masf": "masf"}, "masf must be"),
    ({"masf": MaSF()}, "masf is not fitted"),
    ({"y": ["pos", "meh"]}, r"y\[1\] is 'meh'"),
])
def test_bad_arguments_are_errors_before_model_work(exploding, kwargs, message):
    arguments = {"y": ["pos", "neg"], "method": "loo-sign", **kwargs}
    with pytest.raises((ValueError, TypeError), match=message):
        erasure_metrics(exploding, ["good movie", "bad plot"], **arguments)


def test_bootstrap_intervals_are_seeded(hand_bag):
    X, y = make_sentiment(30, seed=3)
    options = dict(k=(0.2, 0.5), n_bootstrap=199, random_state=4)
    first = erasure_metrics(hand_bag, X, y, method="loo-sign", **options).summary
    again = erasure_metrics(hand_bag, X, y, method="loo-sign", **options).summary
    pd.testing.assert_frame_equal(first, again)
    spread = first[first["ci_high"] > first["ci_low"]]
    assert len(spread) and (spread["ci_low"] <= spread["mean"]).all() and (spread["mean"] <= spread["ci_high"]).all()


# --------------------------------------------------------------------------- scorer


def test_scorer_is_the_mean_aopc_and_negates_sufficiency(hand_bag):
    X, y = make_sentiment(20, seed=7)
    report = erasure_metrics(hand_bag, X, y, method="loo-sign", k=(0.2, 0.5), n_bootstrap=0, random_state=0)
    comp = make_erasure_scorer("loo-sign", k=(0.2, 0.5))
    suff = make_erasure_scorer("loo-sign", k=(0.2, 0.5), mode="sufficiency")
    at_half = make_erasure_scorer("loo-sign", k=(0.2, 0.5), aggregate=0.5)
    assert comp(hand_bag, X, y) == pytest.approx(aopc_row(report, "comprehensiveness")["mean"], rel=1e-12)
    assert suff(hand_bag, X, y) == pytest.approx(-aopc_row(report, "sufficiency")["mean"], rel=1e-12)
    half = report.summary[(report.summary["mode"] == "comprehensiveness") & (report.summary["k"] == 0.5)]
    assert at_half(hand_bag, X, y) == pytest.approx(half["mean"].iloc[0], rel=1e-12)
    clone = pickle.loads(pickle.dumps(comp))
    assert repr(clone) == repr(comp) and clone(hand_bag, X, y) == comp(hand_bag, X, y)
    assert repr(comp).startswith("make_erasure_scorer(method='loo-sign', mode='comprehensiveness'")


def test_scorer_is_nan_when_not_valid(toy_models, toy_data):
    X_calib, X_test, y_test = toy_data
    plain, masked = toy_models
    scorer = make_erasure_scorer("loo-sign", k=(0.25, 0.5), X_calib=X_calib)
    with pytest.warns(FaithfulnessWarning, match="not valid"):
        assert math.isnan(scorer(plain, X_test, y_test))
    assert np.isfinite(scorer(masked, X_test, y_test))
    assert "X_calib=<90 texts>" in repr(scorer)


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "loo"}, "method must be one of"),
    ({"mode": "both"}, "'mode' parameter of make_erasure_scorer must be a str among"),
    ({"removal": "drop"}, "'removal' parameter of make_erasure_scorer must be a str among"),
    ({"alpha": True}, "'alpha' parameter of make_erasure_scorer"),
    ({"max_samples": True}, "'max_samples' parameter of make_erasure_scorer"),
    ({"k": [0, 0.5]}, "k must lie"),
    ({"aggregate": 0.3}, "aggregate must be"),
    ({"aggregate": "mean"}, "aggregate must be"),
    ({"max_samples": 0}, "max_samples"),
])
def test_scorer_argument_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_erasure_scorer(**kwargs)


def test_scorer_in_grid_search_with_two_jobs(tiny_model_dir):
    X, y = make_sentiment(24, seed=4, max_words=5)
    params = dict(model=tiny_model_dir, max_epochs=1, batch_size=8, learning_rate=3e-3, warmup_ratio=0.0,
                  validation_fraction=0, precision="fp32", device="cpu", random_state=0)
    scoring = {"accuracy": "accuracy",
               "faithfulness": make_erasure_scorer("inp-grad-sign", k=(0.2, 0.5), removal="delete")}
    search = GridSearchCV(FaithfulTextClassifier(**params), {"max_masking_ratio": [0.0, 1.0]}, scoring=scoring,
                          refit=faithful_refit(1.0), cv=2, n_jobs=2, error_score="raise")
    with parallel_config(backend="loky", inner_max_num_threads=1):  # 2 workers x 1 torch thread on 2 cores
        search.fit(X, y)
    faith = search.cv_results_["mean_test_faithfulness"]
    assert np.isfinite(faith).all()
    assert search.best_index_ == int(np.argmax(faith))

"""MaSF on a fitted classifier (docs/ood.md, "Is explainer masking in-distribution? The report"): features,
training-style calibration masks, report, plot."""

import copy

import numpy as np
import pandas as pd
import pytest
import torch

from fmmlearn import FaithfulTextClassifier
from fmmlearn.ood import (REFERENCE_ONLY_COLUMNS, REPORT_COLUMNS, MaSF, calibration_features, calibration_groups,
                          hidden_state_features, in_distribution_report, mask_like_training, summarize_pvalues)
from fmmlearn.plotting import plot_in_distribution
from fmmlearn.estimator import EncodedDataset, MaskedFineTuningNet

from helpers.data import make_sentiment

RATIOS = (0.0, 0.5, 1.0)


@pytest.fixture(scope="module")
def masked_clf(tiny_model_dir):
    """The tiny BERT after one short masked (half-det, r_max = 1) epoch: cheap, and a real fitted classifier."""
    X, y = make_sentiment(32, seed=5)
    return FaithfulTextClassifier(model=tiny_model_dir, max_epochs=1, batch_size=8, validation_fraction=0,
                                  precision="fp32", device="cpu", random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def plain_clf(masked_clf):
    """The same weights read as a plain model: only ``max_masking_ratio`` matters for calibration masking."""
    plain = copy.copy(masked_clf)
    plain.max_masking_ratio = 0.0
    return plain


@pytest.fixture(scope="module")
def data():
    X_calib, _ = make_sentiment(66, seed=1, min_words=1, max_words=12)
    X_test, y_test = make_sentiment(12, seed=2, min_words=1, max_words=12)
    return X_calib, X_test, y_test


def direct_features(clf, ids_per_example):
    """One example at a time, no padding: max over positions of every ``output_hidden_states`` tensor."""
    rows = []
    with torch.no_grad():
        for ids in ids_per_example:
            out = clf.model_(input_ids=torch.as_tensor(ids)[None], output_hidden_states=True)
            rows.append(torch.stack([h[0].max(dim=0).values for h in out.hidden_states]).numpy())
    return np.stack(rows)


# -- features ------------------------------------------------------------------------------------------


def test_features_are_max_over_non_padding_positions_of_every_layer(masked_clf, data):
    X = data[0][:9]
    encoding = masked_clf.encode(X)
    assert len(set(encoding.lengths.tolist())) > 3           # batches really are padded
    features = hidden_state_features(masked_clf, X, batch_size=4)
    assert features.shape == (9, 3, 32) and features.dtype == np.float32    # embeddings + 2 layers
    np.testing.assert_allclose(features, direct_features(masked_clf, encoding.input_ids), rtol=0, atol=1e-5)


def test_features_follow_input_order_whatever_the_batching(masked_clf, data):
    X = data[0][:10]
    reference = hidden_state_features(masked_clf, X, batch_size=1)
    for batch_size in (3, 64):
        np.testing.assert_allclose(hidden_state_features(masked_clf, X, batch_size=batch_size), reference, atol=1e-5)
    order = np.random.default_rng(0).permutation(10)
    shuffled = hidden_state_features(masked_clf, [X[i] for i in order], batch_size=4)
    np.testing.assert_allclose(shuffled, reference[order], atol=1e-5)


def test_features_with_replacement_input_ids(masked_clf, data):
    encoding = masked_clf.encode(data[0][:6])
    mask_id = masked_clf.tokenizer_.mask_token_id
    masked = [np.where(np.arange(len(ids)) % 2 == 1, mask_id, ids) for ids in encoding.input_ids]
    features = hidden_state_features(masked_clf, encoding=encoding, input_ids=masked, batch_size=4)
    np.testing.assert_allclose(features, direct_features(masked_clf, masked), atol=1e-5)
    clean = hidden_state_features(masked_clf, encoding=encoding)
    assert not np.allclose(features, clean)
    half = hidden_state_features(masked_clf, encoding=encoding, dtype=np.float16)
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, clean, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("kwargs, message", [
    ({}, "exactly one of X"),
    ({"X": ["a"], "encoding": "enc"}, "exactly one of X"),
    ({"X": ["a good film"], "input_ids": [np.array([1, 2])]}, r"input_ids\[0\] must be a 1-D integer array"),
    ({"X": ["a good film"], "input_ids": []}, "input_ids has 0 entries"),
    ({"X": ["a good film"], "dtype": np.float64}, "dtype must be"),
    ({"X": ["a good film"], "batch_size": 0}, "'batch_size' parameter of hidden_state_features must be an int"),
])
def test_feature_arguments_are_checked(masked_clf, kwargs, message):
    if kwargs.get("encoding") == "enc":
        kwargs["encoding"] = masked_clf.encode(["a"])
    with pytest.raises(ValueError, match=message):
        hidden_state_features(masked_clf, **kwargs)


# -- calibration set masked like training --------------------------------------------------------------


def test_plain_model_calibration_is_clean(plain_clf, data):
    X_calib = data[0][:10]
    repeated, ids = mask_like_training(plain_clf, plain_clf.encode(X_calib), dist_repeats=2)
    assert len(repeated) == 20
    for original, got in zip(repeated.input_ids, ids):
        np.testing.assert_array_equal(got, original)
    clean = hidden_state_features(plain_clf, X_calib)
    np.testing.assert_allclose(calibration_features(plain_clf, X_calib, dist_repeats=2), np.tile(clean, (2, 1, 1)),
                               atol=1e-5)


def training_batches(clf, encoding, epochs, seed):
    """The ids the training loop itself would feed, per example and epoch (targets carry the example index)."""
    tokenizer = clf.tokenizer_
    net = MaskedFineTuningNet(torch.nn.Linear(1, 1), mask_token_id=tokenizer.mask_token_id,
                              pad_token_id=tokenizer.pad_token_id, masking_strategy=clf.masking_strategy,
                              max_masking_ratio=clf.max_masking_ratio, seed=seed, batch_size=clf.batch_size,
                              group_by_length=clf.group_by_length, criterion=torch.nn.CrossEntropyLoss,
                              device="cpu").initialize()
    dataset = EncodedDataset(encoding, np.arange(len(encoding)))
    fed = [[None] * len(encoding) for _ in range(epochs)]
    for epoch in range(epochs):
        for inputs, index in net.get_iterator(dataset, training=True):
            for row, i in enumerate(index.tolist()):
                fed[epoch][i] = inputs["input_ids"][row, : encoding.lengths[i]].numpy()
    return fed


@pytest.mark.parametrize("group_by_length", [True, False])
def test_half_det_calibration_masks_exactly_like_the_training_batches(masked_clf, data, group_by_length):
    masked_clf = copy.copy(masked_clf)
    masked_clf.group_by_length = group_by_length      # only the batch order of training depends on it
    encoding = masked_clf.encode(data[0])
    n = len(encoding)
    repeated, ids = mask_like_training(masked_clf, encoding, dist_repeats=2, random_state=7)
    expected = training_batches(masked_clf, encoding, epochs=2, seed=7)
    for repeat in range(2):
        for i in range(n):
            np.testing.assert_array_equal(ids[repeat * n + i], expected[repeat][i])
    mask_id = masked_clf.tokenizer_.mask_token_id
    masked_rows = np.array([(row == mask_id).any() for row in ids])
    # half-det: at most ceil(B/2) of every batch of 8 are masked, and some certainly are.
    assert 0.15 < masked_rows.mean() <= 0.5 + 1 / 8
    assert not np.array_equal(masked_rows[:n], masked_rows[n:])          # each repeat draws new masks
    for row, original, special in zip(ids, repeated.input_ids, repeated.special_tokens_mask):
        changed = row != original
        assert not changed[special].any() and (row[changed] == mask_id).all()


def test_calibration_masks_are_seeded(masked_clf, data):
    encoding = masked_clf.encode(data[0][:20])
    first = mask_like_training(masked_clf, encoding, random_state=3)[1]
    again = mask_like_training(masked_clf, encoding, random_state=3)[1]
    other = mask_like_training(masked_clf, encoding, random_state=4)[1]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))
    default = mask_like_training(masked_clf, encoding)[1]                 # clf.random_state = 0
    assert all(np.array_equal(a, b) for a, b in zip(default, mask_like_training(masked_clf, encoding,
                                                                                random_state=0)[1]))


# -- report --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report(masked_clf, data):
    return in_distribution_report(masked_clf, *data, ratios=RATIOS, random_state=3)


def test_report_has_one_row_per_ratio_and_threshold(report, data):
    assert tuple(report.columns) == REPORT_COLUMNS
    assert "fisher_p_reference_only" not in report.columns      # invalid for dependent p-values: never shown here
    assert len(report) == len(RATIOS) * 5
    assert report["ratio"].unique().tolist() == list(RATIOS)
    assert report.groupby("ratio")["threshold"].apply(list).tolist() == [[0.001, 0.005, 0.01, 0.05, 0.1]] * 3
    assert (report["n_examples"] == len(data[1])).all()
    assert set(report["method"]) == {"rand"} and set(report["calibration"]) == {"calibrated"}
    assert report[["proportion", "simes_p", "geomean_p"]].apply(lambda c: c.between(0, 1).all()).all()
    # Dataset-level p-values repeat on every threshold's row; proportions grow with the threshold.
    assert (report.groupby("ratio")[["simes_p", "geomean_p"]].nunique() == 1).all().all()
    assert (report.groupby("ratio")["proportion"].apply(lambda p: p.is_monotonic_increasing)).all()


def test_report_ratio_zero_scores_the_clean_test_set(masked_clf, data, report):
    X_calib, X_test, _ = data
    masf = MaSF(random_state=3).fit(calibration_features(masked_clf, X_calib, random_state=3))
    expected = summarize_pvalues(masf.pvalues(hidden_state_features(masked_clf, X_test)))
    got = report[report["ratio"] == 0].reset_index(drop=True)
    pd.testing.assert_frame_equal(got[list(expected.columns)], expected)


def test_report_is_deterministic_and_labels_models(masked_clf, plain_clf, data, report):
    again = in_distribution_report(masked_clf, *data, ratios=RATIOS, random_state=3)
    pd.testing.assert_frame_equal(again, report)
    plain = in_distribution_report(plain_clf, *data, ratios=(0.0, 1.0), random_state=3, model_name="plain",
                                   calibration="reference", method="loo-sign")
    assert tuple(plain.columns) == REPORT_COLUMNS + REFERENCE_ONLY_COLUMNS + ("model",)
    assert plain["fisher_p_reference_only"].between(0, 1).all()
    assert set(plain["model"]) == {"plain"} and set(plain["calibration"]) == {"reference"}
    assert set(plain["method"]) == {"loo-sign"}


@pytest.mark.filterwarnings("ignore:The level-3 fold has only:UserWarning")
def test_report_with_repeated_masked_calibration_copies(masked_clf, data):
    X_calib, X_test, y_test = data
    report = in_distribution_report(masked_clf, X_calib[:3], X_test, y_test, ratios=(0.0,), thresholds=(0.5,),
                                    dist_repeats=2, random_state=0)
    assert report["ratio"].tolist() == [0.0] and report["threshold"].tolist() == [0.5]
    # The same numbers as fitting MaSF by hand on the copies, grouped by example.
    features, groups = calibration_features(masked_clf, X_calib[:3], dist_repeats=2, random_state=0,
                                            return_groups=True)
    assert groups.tolist() == calibration_groups(3, dist_repeats=2).tolist() == [0, 1, 2, 0, 1, 2]
    masf = MaSF(random_state=0).fit(features, groups=groups)
    p = masf.pvalues(hidden_state_features(masked_clf, X_test))
    assert report["proportion"].iloc[0] == pytest.approx(np.mean(p < 0.5))


@pytest.mark.parametrize("kwargs, message", [
    ({"X_calib": ["a", "b", "c", "d", "e"]}, r"X_calib has 5 example\(s\).*needs at least 6 \(2 per fold.*about 56"),
    ({"X_calib": ["a"] * 8, "fold_fractions": (0.8, 0.1, 0.1)}, "needs at least 18"),
    ({"X_calib": ["a"], "calibration": "reference"}, "needs at least 2"),
    ({"X_calib": []}, "X_calib is empty"),
    ({"y_test": ["neg"]}, r"y_test \(the gold labels of X_test\):.*must match"),
    ({"y_test": None}, "y_test is None"),
    ({"thresholds": (0.05, 2.0)}, "thresholds must lie in"),
    ({"ratios": (0.5, 0.2)}, "ratios must be sorted"),
    ({"segment": "second"}, "segment must be one of"),
    ({"calibration": "paper"}, "calibration"),
    ({"dist_repeats": 0}, "'dist_repeats' parameter of in_distribution_report must be an int"),
    ({"method": "nope"}, "nope"),
    ({"n_steps": 5}, "does not take parameter"),
])
def test_report_errors_name_the_argument(masked_clf, data, kwargs, message):
    arguments = dict(zip(("X_calib", "X_test", "y_test"), data), ratios=RATIOS)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        in_distribution_report(masked_clf, **arguments)


def test_report_says_which_features_are_not_finite(masked_clf, data):
    broken = copy.deepcopy(masked_clf)
    word = broken.tokenizer_.convert_tokens_to_ids("movie")
    with torch.no_grad():
        broken.model_.get_input_embeddings().weight[word] = float("nan")
    with pytest.raises(ValueError, match=r"calibration features of X_calib.*NaN or infinite"):
        in_distribution_report(broken, *data, ratios=RATIOS)


# -- plot ----------------------------------------------------------------------------------------------


def test_plot_compares_models_and_writes_a_png(report, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    plain = report.assign(simes_p=0.01)
    ax = plot_in_distribution({"plain": plain, "masked": report}, path=tmp_path / "ood.png")
    assert (tmp_path / "ood.png").stat().st_size > 0
    lines = {line.get_label(): line for line in ax.lines}
    level = "0.05 (below: flagged out-of-distribution)"
    assert set(lines) == {"plain fine-tuning", "masked fine-tuning", level}
    assert lines[level].get_linestyle() == "--" and list(lines[level].get_ydata()) == [0.05, 0.05]
    np.testing.assert_allclose(lines["plain fine-tuning"].get_ydata(), 0.01)
    np.testing.assert_allclose(lines["masked fine-tuning"].get_xdata(), RATIOS)
    np.testing.assert_allclose(lines["masked fine-tuning"].get_ydata(), report.groupby("ratio")["simes_p"].first())
    assert lines["plain fine-tuning"].get_color() == "tab:orange"
    assert lines["masked fine-tuning"].get_color() == "tab:blue"
    assert not ax.collections                              # one report per model: no band
    matplotlib.pyplot.close(ax.figure)


def test_plot_draws_plain_and_masked_bands_over_seeds(report):
    """The paper's figure: per model the mean over seeds, with the range over seeds shaded."""
    import matplotlib

    matplotlib.use("Agg")
    seeds = [report.assign(model=model, seed=seed, simes_p=report["simes_p"] * (1 + seed) / (4 if model == "plain"
                                                                                              else 2))
             for model in ("plain", "masked") for seed in range(3)]
    ax = plot_in_distribution(pd.concat(seeds, ignore_index=True))
    lines = {line.get_label(): line for line in ax.lines}
    plain, masked = "plain fine-tuning: mean of 3 seeds, band = their range", \
        "masked fine-tuning: mean of 3 seeds, band = their range"
    assert {plain, masked} <= set(lines)
    simes = report.groupby("ratio")["simes_p"].first().to_numpy()
    np.testing.assert_allclose(lines[masked].get_ydata(), simes * (1 + 2 + 3) / 3 / 2)
    np.testing.assert_allclose(lines[plain].get_ydata(), simes * (1 + 2 + 3) / 3 / 4)
    assert len(ax.collections) == 2                        # one shaded band per model
    bands = {tuple(np.round(c.get_facecolor()[0][:3], 3)) for c in ax.collections}
    assert bands == {tuple(np.round(matplotlib.colors.to_rgb(c), 3)) for c in ("tab:orange", "tab:blue")}
    top = ax.collections[1].get_paths()[0].vertices[:, 1].max()
    assert top == pytest.approx(simes.max() * 3 / 2)       # the band spans min..max over the seeds
    matplotlib.pyplot.close(ax.figure)


def test_plot_stacked_frame_uses_the_model_column_and_pools_seeds(report):
    import matplotlib

    matplotlib.use("Agg")
    stacked = pd.concat([report.assign(model="masked"), report.assign(model="masked", proportion=0.0),
                         report.assign(model="plain")])
    ax = plot_in_distribution(stacked, statistic="proportion", threshold=0.1)
    lines = {line.get_label(): line for line in ax.lines}
    masked = "masked fine-tuning: mean of 2 runs, band = their range"
    # the dashed line is the test's null share at p < 0.1 (p-values are multiples of 1 / (N3 + 1)), not 0.1
    expected = report.loc[report["threshold"] == 0.1, "expected"].unique()
    assert len(expected) == 1 and expected[0] < 0.1
    null_line = f"{expected[0]:.1%} (share flagged among in-distribution texts)"
    assert set(lines) == {masked, "plain fine-tuning", null_line}
    assert lines[null_line].get_ydata()[0] == pytest.approx(expected[0])
    at = report[report["threshold"] == 0.1].set_index("ratio")["proportion"]
    np.testing.assert_allclose(lines[masked].get_ydata(), at / 2)      # mean of the two "seeds"
    assert "p < 0.1" in ax.get_ylabel()
    matplotlib.pyplot.close(ax.figure)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"statistic": "median"}, ValueError, "statistic must be one of"),
    ({"statistic": "proportion", "threshold": 0.2}, ValueError, "threshold=0.2 is not among"),
    ({"threshold": 0}, ValueError, "threshold must be"),
])
def test_plot_rejects_bad_arguments(report, kwargs, error, message):
    with pytest.raises(error, match=message):
        plot_in_distribution(report, **kwargs)


def test_plot_rejects_non_reports():
    with pytest.raises(TypeError, match="DataFrame from in_distribution_report"):
        plot_in_distribution([1, 2])
    with pytest.raises(ValueError, match="lacks column"):
        plot_in_distribution(pd.DataFrame({"ratio": [0.0]}))


def test_report_is_a_dataframe_that_plots_and_displays_itself(report, tmp_path):
    from fmmlearn.ood import InDistributionReport

    assert isinstance(report, InDistributionReport) and isinstance(report, pd.DataFrame)
    assert isinstance(report[report["threshold"] == 0.05], InDistributionReport)  # a row selection stays a report
    assert type(report[["ratio", "proportion"]]) is pd.DataFrame  # without its core columns it is a plain frame
    stacked = pd.concat([report.assign(model="a"), report.assign(model="b")], ignore_index=True)
    html = stacked._repr_html_()
    assert "<table" in html and "data:image/png;base64," in html
    ax = report.plot(path=tmp_path / "ood.png")
    assert ax.get_lines() and (tmp_path / "ood.png").stat().st_size > 0

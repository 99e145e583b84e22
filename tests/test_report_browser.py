"""report.html and the heatmap page as a user sees them: headless Chromium screenshots and DOMs."""

import re

import pytest

from helpers.data import make_sentiment
from fmmlearn.html import explanation_html
from fmmlearn.study import FaithfulnessStudy
from helpers.browser import dump_dom, image_stats, require_chromium, screenshot

pytestmark = pytest.mark.filterwarnings("ignore:The level-3 fold has only:UserWarning")

SECTION_TITLES = ("Setup", "Accuracy of the models", "Random masking", "Faithfulness curves",
                  "RACU: how faithful is each explanation?", "Are masked inputs in-distribution?",
                  "Example explanations", "Cost")


@pytest.fixture(scope="module")
def study_result(tiny_model_dir):
    X, y = make_sentiment(180, seed=1)
    study = FaithfulnessStudy(tiny_model_dir, measures=["rand", "inp-grad-sign", "loo-sign"], n_train=100,
                              n_valid=30, n_test=40, max_examples={"loo-sign": 20}, n_bootstrap=999, device="cpu",
                              classifier_params=dict(max_epochs=10, learning_rate=3e-3, warmup_ratio=0.0,
                                                     precision="fp32"), verbose=0)
    return study.run(X, y)


def _texts(dom: str) -> str:
    """The visible text of a DOM dump, tags removed and entities of quotes kept simple."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom)).replace("&amp;", "&")


def test_report_renders_in_chromium_with_every_section_and_token(study_result, tmp_path):
    require_chromium()
    page = tmp_path / "report.html"
    study_result.to_html(page)
    png = screenshot(page, tmp_path / "report.png", width=1280, height=4500)
    stats = image_stats(png)
    assert stats["n_colors"] > 1000  # plots, highlighted table cells and heatmap colours
    assert stats["content_height"] > 3500 and stats["non_white_fraction"] > 0.03

    dom = dump_dom(page)
    text = _texts(dom)
    for title in SECTION_TITLES:
        assert title in text, title
    assert dom.count("data:image/png;base64,") == 5
    tokens = study_result.explanations["token"].str.replace("##", "", regex=False)
    missing = [t for t in tokens.unique() if t not in text]
    assert not missing, missing[:10]
    for model in ("plain", "masked"):
        assert f"RACU {model}" in text


def test_heatmap_page_of_both_models_renders_in_chromium(study_result, tmp_path):
    require_chromium()
    page = tmp_path / "heatmaps.html"
    explanation_html(study_result.explanations, facet="model", path=page, title="plain vs masked")
    png = screenshot(page, tmp_path / "heatmaps.png", width=1280, height=1400)
    stats = image_stats(png)
    assert stats["n_colors"] > 100 and stats["content_height"] > 400
    text = _texts(dump_dom(page))
    assert "plain" in text and "masked" in text and "plain vs masked" in text
    for word in study_result.explanations["token"].unique():
        assert word.replace("##", "") in text

"""report.html and the heatmap page as a user sees them: headless Chromium screenshots and DOMs."""

import re

import pytest

from helpers.data import make_sentiment
from fmmlearn.explanation import explanation_html
from fmmlearn.study import FaithfulnessStudy
from helpers.browser import dump_dom, image_stats, require_chromium, screenshot

pytestmark = pytest.mark.filterwarnings("ignore:The level-3 fold has only:UserWarning")

SECTION_TITLES = ("Setup", "Accuracy of the models", "Random masking", "Faithfulness curves",
                  "RACU: how faithful is each explanation?", "Are masked inputs in-distribution?",
                  "Erasure metrics: comprehensiveness and sufficiency", "Example explanations", "Cost")


@pytest.fixture(scope="module")
def study_result(tiny_model_dir):
    # 60 validation texts: MaSF can flag at p < 0.05, so the erasure metrics get real validity flags
    X, y = make_sentiment(200, seed=1)
    study = FaithfulnessStudy(tiny_model_dir, methods=["rand", "inp-grad-sign", "loo-sign"], n_train=100,
                              n_valid=60, n_test=40, max_examples={"loo-sign": 20}, erasure_k=(0.2, 0.5),
                              n_bootstrap=999, device="cpu",
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
    assert dom.count("data:image/png;base64,") == 6
    tokens = study_result.explanations["token"].str.replace("##", "", regex=False)
    missing = [t for t in tokens.unique() if t not in text]
    assert not missing, missing[:10]
    for model in ("plain", "masked"):
        assert f"RACU {model}" in text


def test_erasure_section_shows_a_validity_badge_per_model_measure_and_metric(study_result, tmp_path):
    from fmmlearn.study import erasure_by_model

    require_chromium()
    page = tmp_path / "report.html"
    study_result.to_html(page)
    dom = dump_dom(page)
    section = dom[dom.index('<section id="erasure">'):]
    section = section[: section.index("</section>")]
    table = section[section.index('<table class="erasure">'): section.index("</table>")]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, flags=re.S)[1:]  # the header row first
    aopc = erasure_by_model(study_result).query("aopc")
    assert len(rows) == aopc.groupby(["model", "method"]).ngroups == 4
    words = {"valid": "valid", "invalid": "not valid"}
    for row, ((model, method), flags) in zip(rows, aopc.groupby(["model", "method"], sort=False)):
        cells = _texts(row)
        assert cells.startswith(f" {model} {method}"), cells
        badges = re.findall(r'<span class="badge (valid|invalid|unchecked)">([^<]*)</span>', row)
        expected = ["valid" if v else "invalid" for v in flags.set_index("mode").loc[
            ["comprehensiveness", "sufficiency"], "valid"]]
        assert [b for b, _ in badges] == expected and [w for _, w in badges] == [words[b] for b in expected]
    assert section.count("data:image/png;base64,") == 1
    assert "comprehensiveness" in _texts(section) and "sufficiency" in _texts(section)


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

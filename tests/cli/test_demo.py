"""``fmmlearn demo``: the quick preset end to end on the tiny model, and a bad output directory."""

import pytest

from fmmlearn.study import StudyResult


# The toy validation split is small: MaSF says its p-values cannot go below 0.09 (expected here).
pytestmark = pytest.mark.filterwarnings("ignore:The level-3 fold has only:UserWarning")


@pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.DegenerateModelWarning")  # tiny model, 3 epochs of tweets
def test_demo_quick_runs_end_to_end_and_prints_the_summary(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from fmmlearn.cli import main

    monkeypatch.setenv("FMMLEARN_DEMO_MODEL", tiny_model_dir)
    output = tmp_path / "demo"
    assert main(["demo", "--quick", "--output", str(output), "--device", "cpu", "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    erasure = StudyResult.load(output / "results").erasure  # the quick preset has loo-sign: erasure runs, certified
    assert set(erasure["method"]) == {"loo-sign", "rand"} and erasure["valid"].notna().all()
    assert '<section id="erasure">' in (output / "report.html").read_text(encoding="utf-8")
    assert main(["demo", "--quick", "--output", str(output), "--device", "cpu", "--measures", "rand",
                 "inp-grad-sign"]) == 0
    out = capsys.readouterr().out
    assert "Test accuracy" in out and "Are masked inputs in-distribution?" in out
    assert f"report: {(output / 'report.html').resolve()}" in out
    page = (output / "report.html").read_text(encoding="utf-8")
    assert "<h2>Example explanations</h2>" in page
    assert "Erasure metrics were not computed" in page  # "auto": loo-sign is not among these measures
    result = StudyResult.load(output / "results")
    from fmmlearn.cli.demo import DEMO_PRESETS

    quick = DEMO_PRESETS["quick"]
    assert result.metadata["data"]["sizes"] == {"train": quick["n_train"], "valid": quick["n_valid"],
                                                "test": quick["n_test"]}
    assert set(result.racu_summary["method"]) == {"inp-grad-sign"}
    assert result.timings.loc[result.timings["stage"] == "fit", "cached"].all()  # the second run refits nothing


def test_demo_rejects_a_bad_output_dir(tmp_path, capsys):
    from fmmlearn.cli import main

    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["demo", "--quick", "--output", str(blocker)]) == 2
    assert "--output" in capsys.readouterr().err
    assert main(["demo", "--quick", "--output", ""]) == 2

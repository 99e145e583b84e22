"""The fmmlearn command on files."""

import json

import pandas as pd
import pytest

from conftest import make_sentiment
from fmmlearn.cli import main


@pytest.fixture
def table(tmp_path):
    X, y = make_sentiment(96, seed=3)
    path = tmp_path / "train.csv"
    pd.DataFrame({"review": X, "label": y}).to_csv(path, index=False)
    return path


def test_fit_then_predict_round_trip(tiny_model_dir, table, tmp_path, capsys):
    model_dir = tmp_path / "model"
    assert main(["fit", str(table), "--text-col", "review", "--out", str(model_dir), "--model", tiny_model_dir,
                 "--epochs", "8", "--learning-rate", "3e-3", "--precision", "fp32"]) == 0
    assert (model_dir / "fmmlearn.json").is_file()
    out = tmp_path / "pred.jsonl"
    assert main(["predict", str(model_dir), str(table), "--text-col", "review", "--out", str(out)]) == 0
    pred = pd.read_json(out, lines=True)
    assert {"review", "label", "prediction", "proba_neg", "proba_pos"} <= set(pred.columns)
    assert (pred["prediction"] == pred["label"]).mean() > 0.8
    assert "saved to" in capsys.readouterr().out


def test_missing_columns_and_files_are_clear_errors(table, tmp_path):
    with pytest.raises(SystemExit, match="column 'text' not in the data"):
        main(["fit", str(table), "--out", str(tmp_path / "m")])
    with pytest.raises(SystemExit, match="does not exist"):
        main(["fit", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "m")])
    with pytest.raises(SystemExit, match="unsupported data file type"):
        (tmp_path / "data.xlsx").write_text("x")
        main(["fit", str(tmp_path / "data.xlsx"), "--out", str(tmp_path / "m")])


@pytest.mark.slow
def test_demo_runs_offline_on_the_bundled_model(capsys):
    assert main(["demo", "--n-samples", "80", "--max-length", "32"]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out[out.index("{"): out.rindex("}") + 1])
    assert summary["n_train"] == 60 and 0.0 <= summary["test_accuracy"] <= 1.0


def test_explain_faithfulness_and_ood_commands(tiny_model_dir, table, tmp_path, capsys):
    model_dir = tmp_path / "model"
    main(["fit", str(table), "--text-col", "review", "--out", str(model_dir), "--model", tiny_model_dir,
          "--epochs", "8", "--learning-rate", "3e-3", "--precision", "fp32"])
    expl, page = tmp_path / "expl.csv", tmp_path / "expl.html"
    assert main(["explain", str(model_dir), str(table), "--text-col", "review", "--method", "inp-grad-sign",
                 "--out", str(expl), "--html", str(page)]) == 0
    frame = pd.read_csv(expl)
    assert {"example", "token", "importance"} <= set(frame.columns) and frame["example"].nunique() == 96
    assert "<span" in page.read_text()
    curves, png = tmp_path / "curves.csv", tmp_path / "curves.png"
    assert main(["faithfulness", str(model_dir), str(table), "--text-col", "review", "--methods", "inp-grad-sign",
                 "--out", str(curves), "--plot", str(png)]) == 0
    assert set(pd.read_csv(curves)["ratio"].round(1)) == {round(0.1 * i, 1) for i in range(11)}
    assert png.stat().st_size > 0 and "racu" in capsys.readouterr().out
    report = tmp_path / "ood.csv"
    assert main(["ood", str(model_dir), str(table), str(table), "--text-col", "review", "--out", str(report)]) == 0
    assert {"ratio", "threshold", "simes_p"} <= set(pd.read_csv(report).columns)

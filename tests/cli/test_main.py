"""The fmmlearn command on files: guidance (--help, --json), errors as one line, texts kept as written."""

import inspect
import json

import numpy as np
import pandas as pd
import pytest

from helpers.data import make_sentiment
from fmmlearn import FaithfulTextClassifier, faithfulness_report
from fmmlearn.cli import build_parser, labels_from, main, read_table, summary_path
from fmmlearn.importance import METHOD_NAMES
from fmmlearn.ood import in_distribution_report

COMMANDS = ("fit", "predict", "explain", "faithfulness", "ood")
AWKWARD_TEXTS = ["12", "None", "NA", "", "nan", "True"]  # what pandas would otherwise turn into numbers or NaN


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    X, y = make_sentiment(96, seed=3)
    X[: len(AWKWARD_TEXTS)] = AWKWARD_TEXTS
    path = tmp_path_factory.mktemp("data") / "train.csv"
    pd.DataFrame({"review": X, "label": y}).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def model_dir(fitted_tiny, tmp_path_factory):
    """The session's fitted tiny classifier, saved once for the inference commands."""
    return str(fitted_tiny.save(tmp_path_factory.mktemp("saved") / "model"))


def run(capsys, *argv):
    """``main(argv)`` -> (exit status, stdout, stderr)."""
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def error_lines(err: str) -> list:
    return [line for line in err.splitlines() if line.startswith("error:")]


# --------------------------------------------------------------------------- guidance


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_help_has_examples_defaults_and_help_on_every_option(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    examples = text[text.index("examples:"):]
    assert f"fmmlearn {command} " in examples
    assert "(default: text)" in text and "--json" in text and "--device" in text and "--debug" in text
    parser = build_parser()._subparsers._group_actions[0].choices[command]
    undocumented = [a.option_strings or a.dest for a in parser._actions if not a.help]
    assert not undocumented


def test_top_level_help_is_plain_text_with_a_session(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text and ":func:" not in text  # no raw RST
    assert all(command in text for command in COMMANDS) and "fmmlearn fit train.csv" in text


def test_methods_list_the_measures_and_explain_label_col_says_its_real_default(capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in METHOD_NAMES)
    assert "default: none, explain the predicted class" in text and "[label]" not in text


def test_defaults_are_the_librarys_and_old_spellings_are_aliases():
    parser = build_parser()
    fit = parser.parse_args(["fit", "d.csv", "--out", "m"])
    estimator = inspect.signature(FaithfulTextClassifier).parameters
    for name in ("max_epochs", "batch_size", "learning_rate", "max_masking_ratio", "masking_strategy",
                 "validation_fraction", "max_length", "precision", "random_state", "model"):
        assert getattr(fit, name) == estimator[name].default, name
    assert fit.output == "m" and fit.verbose == 1 and not fit.json
    old = parser.parse_args(["fit", "d.csv", "--out", "m", "--epochs", "7", "--seed", "3", "-q"])
    assert (old.max_epochs, old.random_state, old.verbose) == (7, 3, 0)
    faith = parser.parse_args(["faithfulness", "m", "d.csv", "-o", "c.csv"])
    report = inspect.signature(faithfulness_report).parameters
    assert faith.n_repeats == report["n_repeats"].default == 5
    assert tuple(faith.methods) == tuple(report["methods"].default)
    assert parser.parse_args(["faithfulness", "m", "d.csv", "-o", "c.csv", "--repeats", "2"]).n_repeats == 2
    ood = parser.parse_args(["ood", "m", "c.csv", "d.csv", "-o", "r.csv"])
    assert tuple(ood.thresholds) == tuple(inspect.signature(in_distribution_report).parameters["thresholds"].default)


def test_an_unknown_method_is_one_error_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["explain", "m", "d.csv", "-o", "e.csv", "--method", "loo-sing"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("error: argument --method:") and "loo-sign" in err


# --------------------------------------------------------------------------- the commands


def test_fit_then_predict_keeps_texts_as_written(tiny_model_dir, table, tmp_path, capsys):
    model = tmp_path / "model"
    status, out, _ = run(capsys, "fit", table, "--text-col", "review", "--out", model, "--model", tiny_model_dir,
                         "--allow-empty", "--epochs", "8", "--learning-rate", "3e-3", "--precision", "fp32", "--device", "cpu")
    assert status == 0 and (model / "fmmlearn.json").is_file()
    assert f"wrote the model to {model}" in out and "valid_accuracy" in out  # the history table
    predictions = tmp_path / "pred.csv"
    status, out, _ = run(capsys, "predict", model, table, "--text-col", "review", "--output", predictions)
    assert status == 0 and f"wrote 96 predictions to {predictions}" in out
    pred = pd.read_csv(predictions, dtype=str, keep_default_na=False)
    assert list(pred.columns) == ["review", "label", "prediction", "proba_neg", "proba_pos"]
    assert pred["review"].tolist()[: len(AWKWARD_TEXTS)] == AWKWARD_TEXTS
    assert (pred["prediction"] == pred["label"]).mean() > 0.8


def test_json_into_a_closed_pipe_exits_quietly(model_dir, table, tmp_path, monkeypatch):
    """``fmmlearn predict ... --json | head -c0``: the reader is gone; exit 1, no BrokenPipeError traceback."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    pipe = os.fdopen(write_end, "w")
    monkeypatch.setattr("sys.stdout", pipe)
    try:
        status = main(["predict", str(model_dir), str(table), "--text-col", "review", "-o",
                       str(tmp_path / "pred.csv"), "--json", "-q"])
    finally:
        pipe.close()
    assert status == 1 and (tmp_path / "pred.csv").exists()  # the predictions were written before the summary


def test_json_summaries_are_the_only_stdout(model_dir, table, tmp_path, capsys):
    predictions = tmp_path / "pred.jsonl"
    status, out, err = run(capsys, "predict", model_dir, table, "--text-col", "review", "-o", predictions, "--json")
    summary = json.loads(out)
    assert status == 0 and summary["written"] == [str(predictions)] and summary["n_predictions"] == 96
    assert sum(summary["prediction_counts"].values()) == 96 and "wrote 96 predictions" in err
    assert pd.read_json(predictions, lines=True, dtype=False)["review"].tolist()[:3] == ["12", "None", "NA"]

    expl, page = tmp_path / "expl.csv", tmp_path / "expl.html"
    status, out, _ = run(capsys, "explain", model_dir, table, "--text-col", "review", "--label-col", "label",
                         "--level", "word", "--method", "inp-grad-sign", "-o", expl, "--html", page, "--json")
    summary = json.loads(out)
    assert status == 0 and summary["written"] == [str(expl), str(page)] and summary["n_examples"] == 96
    words = pd.read_csv(expl, keep_default_na=False)
    assert {"example", "importance"} <= set(words.columns) and len(words) == summary["n_rows"]
    assert "<span" in page.read_text()


@pytest.mark.filterwarnings("ignore:1 of 24 example.*empty text")  # the table's "" text
def test_faithfulness_writes_curves_summary_and_plot(model_dir, table, tmp_path, capsys):
    curves, png = tmp_path / "curves.csv", tmp_path / "curves.png"
    status, out, err = run(capsys, "faithfulness", model_dir, table, "--text-col", "review", "--methods",
                           "inp-grad-sign", "--n-repeats", "2", "--max-samples", "24", "--ratios", "0", "0.5", "1",
                           "-o", curves, "--plot", png, "--json", "--random-state", "1")
    summary = json.loads(out)
    written = tmp_path / "curves.summary.csv"
    assert status == 0 and summary["written"] == [str(curves), str(written), str(png)]
    table_summary = pd.read_csv(written)
    assert table_summary["method"].tolist() == ["inp-grad-sign"] and summary["n_examples"] == 24
    assert table_summary["racu"].iloc[0] == pytest.approx(summary["summary"][0]["racu"])
    assert set(pd.read_csv(curves)["ratio"]) == {0.0, 0.5, 1.0} and png.stat().st_size > 0
    assert "wrote the summary to" in err


def test_ood_says_what_it_wrote(model_dir, table, tmp_path, capsys):
    report = tmp_path / "ood.csv"
    status, out, _ = run(capsys, "ood", model_dir, table, table, "--text-col", "review", "--ratios", "0", "1",
                         "--thresholds", "0.05", "0.1", "-o", report)
    assert status == 0 and f"wrote the report to {report}" in out
    frame = pd.read_csv(report)
    assert {"ratio", "threshold", "simes_p"} <= set(frame.columns)
    assert set(frame["threshold"]) == {0.05, 0.1} and set(frame["ratio"]) == {0.0, 1.0}


# --------------------------------------------------------------------------- errors


@pytest.fixture
def no_fitting(monkeypatch):
    """Fail the test if any model is fitted: errors must come before any model work."""
    monkeypatch.setattr(FaithfulTextClassifier, "fit", lambda *a, **k: pytest.fail("fit was called"))


@pytest.mark.parametrize("content, expected", [
    ('review,label\n"never closed,pos\n', "cannot read"),  # an unterminated quote
    ("review,label\na,b,c,d\n", "cannot read"),  # more fields than columns
    (b"\xff\xfe\x00garbage\x00\x81", "UTF-8"),
    ("", "cannot read"),
    ("text,label\nfine,pos\n", "column(s) ['review'] not in"),
])
def test_bad_tables_are_one_error_line_and_exit_2(content, expected, tmp_path, capsys, no_fitting):
    data = tmp_path / "bad.csv"
    data.write_bytes(content if isinstance(content, bytes) else content.encode())
    status, out, err = run(capsys, "fit", data, "--text-col", "review", "-o", tmp_path / "m")
    assert status == 2 and out == ""
    assert error_lines(err) == err.strip().splitlines() and len(error_lines(err)) == 1
    assert expected in err and "Traceback" not in err


def test_output_paths_are_checked_before_any_model_work(table, tmp_path, capsys, no_fitting):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cases = [
        (["fit", table, "--text-col", "review", "-o", blocker / "model"], "is a file, not a directory"),
        (["fit", table, "--text-col", "review", "-o", blocker], "is a file; give a directory"),
        (["fit", table, "--text-col", "review", "-o", table.parent], "holds no saved fmmlearn model"),
        (["predict", "no-model", table, "--text-col", "review", "-o", tmp_path / "p.xlsx"], "unsupported file type"),
        (["predict", "no-model", table, "--text-col", "review", "-o", table], "is also an input"),
        (["explain", "no-model", table, "--text-col", "review", "-o", "e.csv", "--html", "e.txt"], "'.txt'"),
        (["faithfulness", "no-model", table, "-o", blocker / "c.csv"], "is a file, not a directory"),
        (["faithfulness", "no-model", table, "-o", "c.csv", "--plot", "c.docx"], "--plot 'c.docx'"),
        (["ood", "no-model", table, table, "-o", blocker / "r.csv"], "is a file, not a directory"),
    ]
    for argv, expected in cases:
        status, out, err = run(capsys, *argv)
        assert status == 2 and out == "" and len(error_lines(err)) == 1, argv
        assert expected in err and "Traceback" not in err, (argv, err)


def test_reserved_output_columns_and_missing_models_are_errors(model_dir, table, tmp_path, capsys):
    clashing = tmp_path / "clash.csv"
    pd.DataFrame({"text": ["a", "b"], "proba_pos": ["x", "y"]}).to_csv(clashing, index=False)
    status, _, err = run(capsys, "predict", model_dir, clashing, "-o", tmp_path / "p.csv")
    assert status == 2 and "input column(s) ['proba_pos']" in err and not (tmp_path / "p.csv").exists()
    status, _, err = run(capsys, "predict", tmp_path / "nothing", table, "--text-col", "review", "-o",
                         tmp_path / "p.csv")
    assert status == 2 and len(error_lines(err)) == 1 and "FaithfulTextClassifier.save" in err


def test_debug_shows_the_traceback(table, tmp_path, no_fitting):
    with pytest.raises(ValueError, match="not in"):
        main(["fit", str(table), "-o", str(tmp_path / "m"), "--debug"])


# --------------------------------------------------------------------------- reading tables


def test_delimited_cells_are_texts_and_integer_labels_become_ints(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("text\tlabel\tscore\n12\t1\t0.5\nNone\t-2\tNA\nNA\t1\t\n")
    frame = read_table(str(path), ["text", "label"])
    assert frame["text"].tolist() == ["12", "None", "NA"] and frame["score"].tolist() == ["0.5", "NA", ""]
    labels = labels_from(frame, "label")
    assert labels.dtype == np.int64 and labels.tolist() == [1, -2, 1]
    words = labels_from(pd.DataFrame({"label": ["1", "pos"]}), "label")
    assert words.tolist() == ["1", "pos"]  # not all integers: all stay strings
    assert labels_from(pd.DataFrame({"label": ["1", "0"]}), "label", classes=np.array(["0", "1"])).tolist() == \
        ["1", "0"]  # a model trained on strings keeps them
    with pytest.raises(ValueError, match=r"no label in row\(s\) \[1\]"):
        labels_from(pd.DataFrame({"label": ["pos", ""]}), "label")


def test_non_text_cells_of_json_tables_are_errors(tmp_path, capsys, no_fitting):
    path = tmp_path / "t.jsonl"
    path.write_text('{"text": "fine", "label": 0}\n{"text": 12, "label": 1}\n')
    status, _, err = run(capsys, "fit", path, "-o", tmp_path / "m")
    assert status == 2 and "column 'text' of" in err and "row(s) [1] hold 12 (int)" in err


def test_summary_path_sits_next_to_the_curves():
    assert summary_path("out/curves.csv") == "out/curves.summary.csv"
    assert summary_path("c.parquet") == "c.summary.parquet"


# --------------------------------------------------------------------------- loose ends of the bad-input suite


def test_empty_text_cells_are_refused_naming_the_rows_unless_allowed(tmp_path, capsys, monkeypatch):
    data = tmp_path / "gaps.csv"
    X, y = make_sentiment(12, seed=1)
    X[2], X[7] = "", "   "
    pd.DataFrame({"text": X, "label": y}).to_csv(data, index=False)
    monkeypatch.setattr(FaithfulTextClassifier, "fit", lambda *a, **k: pytest.fail("fit was called"))
    status, out, err = run(capsys, "fit", data, "-o", tmp_path / "m")
    assert status == 2 and out == "" and len(error_lines(err)) == 1 == len(err.strip().splitlines())
    assert "2 row(s)" in err and "row(s) [2, 7]" in err and "--allow-empty" in err

    seen = {}

    def fake_fit(self, X, y):
        seen["X"] = list(X)
        raise ValueError("stop after reading")  # enough: the texts reached fit

    monkeypatch.setattr(FaithfulTextClassifier, "fit", fake_fit)
    status, _, err = run(capsys, "fit", data, "-o", tmp_path / "m", "--allow-empty")
    assert status == 2 and "stop after reading" in err and seen["X"][2] == "" and seen["X"][7] == "   "


def test_a_model_directory_with_only_pickled_weights_is_refused_in_one_line(tiny_model_dir, tmp_path, capsys):
    import shutil

    import torch
    from safetensors.torch import load_file

    pickled = tmp_path / "pickled-model"
    shutil.copytree(tiny_model_dir, pickled)
    torch.save(load_file(pickled / "model.safetensors"), pickled / "pytorch_model.bin")
    (pickled / "model.safetensors").unlink()
    data = tmp_path / "t.csv"
    pd.DataFrame({"text": ["good", "bad", "fine", "awful"], "label": [1, 0, 1, 0]}).to_csv(data, index=False)
    status, out, err = run(capsys, "fit", data, "--model", pickled, "-o", tmp_path / "m", "--device", "cpu", "-q")
    assert status == 2 and out == "" and len(error_lines(err)) == 1 == len(err.strip().splitlines())
    assert "holds only pickled weights (pytorch_model.bin)" in err and "loads safetensors" in err
    assert "save_pretrained(NEW_DIR)" in err and "Traceback" not in err and not (tmp_path / "m").exists()

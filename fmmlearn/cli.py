"""The ``fmmlearn`` command: fit, predict, explain and measure from the terminal.

Data files are CSV, TSV, JSON Lines or Parquet, read and written with pandas.
Every sub-command prints a short human summary and writes tidy tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

__all__ = ["main"]


# --------------------------------------------------------------------------- file I/O


def read_table(path: str):
    """Read a CSV/TSV/JSONL/Parquet file into a DataFrame, by extension."""
    import pandas as pd

    suffix = Path(path).suffix.lower()
    if not Path(path).is_file():
        raise SystemExit(f"error: data file {path!r} does not exist")
    if suffix in (".csv", ".txt"):
        return pd.read_csv(path)
    if suffix == ".tsv":
        return pd.read_csv(path, sep="\t")
    if suffix in (".jsonl", ".ndjson"):
        return pd.read_json(path, lines=True)
    if suffix == ".json":
        return pd.read_json(path)
    if suffix in (".parquet", ".pq"):
        return pd.read_parquet(path)
    raise SystemExit(f"error: unsupported data file type {suffix!r}; use .csv, .tsv, .jsonl or .parquet")


def write_table(frame, path: str) -> None:
    """Write a DataFrame by extension (CSV, TSV, JSONL, Parquet or HTML)."""
    suffix = Path(path).suffix.lower()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif suffix in (".jsonl", ".ndjson"):
        frame.to_json(path, orient="records", lines=True)
    elif suffix in (".parquet", ".pq"):
        frame.to_parquet(path, index=False)
    elif suffix in (".html", ".htm"):
        Path(path).write_text(frame.to_html(index=False))
    else:
        raise SystemExit(f"error: unsupported output type {suffix!r}; use .csv, .tsv, .jsonl, .parquet or .html")


def texts_from(frame, text_col: str, pair_col: str | None):
    """The X of a table: a text column, or two columns for sentence pairs."""
    for col in filter(None, (text_col, pair_col)):
        if col not in frame.columns:
            raise SystemExit(f"error: column {col!r} not in the data; columns are {list(frame.columns)}")
    if pair_col:
        return frame[[text_col, pair_col]]
    return frame[text_col]


# --------------------------------------------------------------------------- commands


def _add_data_args(parser, labels: bool):
    parser.add_argument("data", help="CSV/TSV/JSONL/Parquet file")
    parser.add_argument("--text-col", default="text", help="column with the (first) text [text]")
    parser.add_argument("--pair-col", default=None, help="column with the second text of sentence pairs")
    if labels:
        parser.add_argument("--label-col", default="label", help="column with the labels [label]")


def cmd_fit(args) -> int:
    from .classifier import FaithfulTextClassifier

    frame = read_table(args.data)
    if args.label_col not in frame.columns:
        raise SystemExit(f"error: label column {args.label_col!r} not in the data; columns are {list(frame.columns)}")
    clf = FaithfulTextClassifier(
        model=args.model,
        max_masking_ratio=args.max_masking_ratio,
        masking_strategy=args.masking_strategy,
        max_epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        max_length=args.max_length,
        precision=args.precision,
        random_state=args.seed,
        verbose=1,
    )
    start = time.perf_counter()
    clf.fit(texts_from(frame, args.text_col, args.pair_col), frame[args.label_col])
    path = clf.save(args.out)
    print(clf.history_.to_string())
    print(f"fitted in {time.perf_counter() - start:.1f}s; saved to {path}")
    return 0


def cmd_predict(args) -> int:
    import pandas as pd

    from .classifier import FaithfulTextClassifier

    clf = FaithfulTextClassifier.load(args.model_dir)
    frame = read_table(args.data)
    X = texts_from(frame, args.text_col, args.pair_col)
    proba = clf.predict_proba(X)
    out = pd.DataFrame(proba, columns=[f"proba_{c}" for c in clf.classes_])
    out.insert(0, "prediction", clf.classes_[proba.argmax(axis=1)])
    write_table(pd.concat([frame.reset_index(drop=True), out], axis=1), args.out)
    print(f"wrote {len(out)} predictions to {args.out}")
    return 0


def cmd_demo(args) -> int:
    """Fit the bundled MiniLM with masked fine-tuning on real tweets, then check it."""
    from sklearn.model_selection import train_test_split

    from .classifier import FaithfulTextClassifier
    from .datasets import load_tweet_sentiment

    data = load_tweet_sentiment(n_samples=args.n_samples, random_state=args.seed)
    X_train, X_test, y_train, y_test = train_test_split(
        list(data.data), list(data.target), test_size=0.25, random_state=args.seed, stratify=list(data.target)
    )
    print(f"fmmlearn demo: {len(X_train)} training / {len(X_test)} test tweets, classes {list(data.target_names)}")
    clf = FaithfulTextClassifier(
        max_masking_ratio=1.0, max_epochs=args.epochs, max_length=args.max_length,
        learning_rate=1e-4, random_state=args.seed, verbose=1,
    )
    start = time.perf_counter()
    clf.fit(X_train, y_train)
    fit_seconds = time.perf_counter() - start
    accuracy = clf.score(X_test, y_test)
    summary = {"n_train": len(X_train), "n_test": len(X_test), "fit_seconds": round(fit_seconds, 1),
               "test_accuracy": round(accuracy, 4)}
    print(clf.history_.to_string())
    print(json.dumps(summary, indent=2))
    if args.out:
        clf.save(args.out)
        print(f"saved the model to {args.out}")
    return 0


def _load_with_data(args, labels: bool):
    from .classifier import FaithfulTextClassifier

    clf = FaithfulTextClassifier.load(args.model_dir)
    frame = read_table(args.data)
    X = texts_from(frame, args.text_col, args.pair_col)
    y = None
    if labels and args.label_col:
        if args.label_col not in frame.columns:
            raise SystemExit(f"error: label column {args.label_col!r} not in the data; columns are {list(frame.columns)}")
        y = frame[args.label_col].to_numpy()
    return clf, X, y


def cmd_explain(args) -> int:
    clf, X, y = _load_with_data(args, labels=True)
    frame = clf.explain(X, y, method=args.method, segment=args.segment, level=args.level)
    write_table(frame, args.out)
    if args.html:
        from .html import explanation_html

        explanation_html(frame, path=args.html, title=f"{args.method} explanations")
    print(f"wrote {len(frame)} rows ({frame['example'].nunique()} examples) to {args.out}")
    return 0


def cmd_faithfulness(args) -> int:
    from .faithfulness import faithfulness_report

    clf, X, y = _load_with_data(args, labels=True)
    if y is None:
        raise SystemExit("error: faithfulness needs gold labels: pass --label-col")
    report = faithfulness_report(clf, X, y, methods=args.methods, n_repeats=args.repeats, random_state=args.seed)
    write_table(report.curves, args.out)
    if args.plot:
        report.plot(path=args.plot)
    print(report.summary.to_string(index=False))
    print(f"wrote curves to {args.out}")
    return 0


def cmd_ood(args) -> int:
    from .ood import in_distribution_report

    clf, X, y = _load_with_data(args, labels=True)
    if y is None:
        raise SystemExit("error: ood needs gold labels of the test data: pass --label-col")
    calib = texts_from(read_table(args.calibration), args.text_col, args.pair_col)
    report = in_distribution_report(clf, calib, X, y, method=args.method, random_state=args.seed)
    write_table(report, args.out)
    if args.plot:
        from .plotting import plot_in_distribution

        plot_in_distribution(report, path=args.plot)
    print(report[report["threshold"] == 0.05].to_string(index=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fmmlearn`` command."""
    from ._version import __version__

    parser = argparse.ArgumentParser(prog="fmmlearn", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"fmmlearn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="masked fine-tuning of the bundled MiniLM on bundled tweets")
    demo.add_argument("--n-samples", type=int, default=800)
    demo.add_argument("--epochs", type=int, default=1)
    demo.add_argument("--max-length", type=int, default=48)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--out", default=None, help="directory to save the fitted model")
    demo.set_defaults(func=cmd_demo)

    fit = sub.add_parser("fit", help="fine-tune a classifier on a labelled table and save it")
    _add_data_args(fit, labels=True)
    fit.add_argument("--out", required=True, help="directory to save the model")
    fit.add_argument("--model", default="minilm")
    fit.add_argument("--max-masking-ratio", type=float, default=1.0)
    fit.add_argument("--masking-strategy", default="half-det", choices=["half-det", "half-ran", "uni"])
    fit.add_argument("--epochs", type=int, default=3)
    fit.add_argument("--batch-size", type=int, default=16)
    fit.add_argument("--learning-rate", type=float, default=5e-5)
    fit.add_argument("--max-length", type=int, default=None)
    fit.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    fit.add_argument("--seed", type=int, default=0)
    fit.set_defaults(func=cmd_fit)

    predict = sub.add_parser("predict", help="predict labels and probabilities with a saved model")
    predict.add_argument("model_dir")
    _add_data_args(predict, labels=False)
    predict.add_argument("--out", required=True, help="output table (.csv/.tsv/.jsonl/.parquet/.html)")
    predict.set_defaults(func=cmd_predict)

    explain = sub.add_parser("explain", help="token importances of a saved model, one row per token")
    explain.add_argument("model_dir")
    _add_data_args(explain, labels=True)
    explain.set_defaults(label_col=None)
    explain.add_argument("--method", default="loo-sign")
    explain.add_argument("--segment", default="first", choices=["first", "all"])
    explain.add_argument("--level", default="token", choices=["token", "word"])
    explain.add_argument("--out", required=True, help="output table")
    explain.add_argument("--html", default=None, help="also write an HTML heatmap here")
    explain.set_defaults(func=cmd_explain)

    faith = sub.add_parser("faithfulness", help="masking curves, ACU and RACU of importance measures")
    faith.add_argument("model_dir")
    _add_data_args(faith, labels=True)
    faith.add_argument("--methods", nargs="+", default=["loo-sign", "inp-grad-sign"])
    faith.add_argument("--repeats", type=int, default=1)
    faith.add_argument("--seed", type=int, default=0)
    faith.add_argument("--out", required=True, help="output table of curves")
    faith.add_argument("--plot", default=None, help="also save a PNG of the curves")
    faith.set_defaults(func=cmd_faithfulness)

    ood = sub.add_parser("ood", help="MaSF in-distribution test of explainer-masked test data")
    ood.add_argument("model_dir")
    ood.add_argument("calibration", help="unlabelled calibration table (same text columns)")
    _add_data_args(ood, labels=True)
    ood.add_argument("--method", default="rand")
    ood.add_argument("--seed", type=int, default=0)
    ood.add_argument("--out", required=True, help="output table")
    ood.add_argument("--plot", default=None, help="also save a PNG")
    ood.set_defaults(func=cmd_ood)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fmmlearn`` command."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

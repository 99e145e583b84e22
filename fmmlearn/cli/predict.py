"""``fmmlearn predict``: labels and class probabilities of a saved model, added to the input table.
"""

from __future__ import annotations

#: Column names predict adds to the input table; an input column may not have them.
PREDICTION_COLUMN, PROBA_PREFIX = "prediction", "proba_"

from ._io import TABLE_SUFFIXES, check_output_path, read_table, texts_from, write_table
from ._options import (
    add_command,
    add_common_options,
    add_data_arguments,
    add_inference_batch_size,
    add_model_dir_argument,
    add_output_argument,
    load_model,
    say,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    parser = add_command(
        sub, "predict", help="predict labels and probabilities with a saved model",
        description="Write the input table plus a 'prediction' column and one 'proba_<class>' column per class "
                    "(FaithfulTextClassifier.predict_proba).",
        examples="""
            fmmlearn predict model/ test.csv --text-col review --output predictions.csv
            fmmlearn predict model/ test.parquet --output predictions.jsonl --device cuda --json
        """)
    add_model_dir_argument(parser)
    add_data_arguments(parser, labels="none")
    add_output_argument(parser, "output table: .csv, .tsv, .jsonl, .parquet or .html")
    add_inference_batch_size(parser)
    add_common_options(parser)
    parser.set_defaults(func=run)


def run(args) -> dict:
    """``fmmlearn predict``: the input table plus predictions and probabilities."""
    import pandas as pd

    check_output_path(args.output, "--output", TABLE_SUFFIXES, inputs=(args.data,))
    frame = read_table(args.data, (args.text_col, args.pair_col))
    clash = [c for c in map(str, frame.columns) if c == PREDICTION_COLUMN or c.startswith(PROBA_PREFIX)]
    if clash:
        raise ValueError(f"input column(s) {clash} of {args.data} have the names predict writes "
                         f"('{PREDICTION_COLUMN}', '{PROBA_PREFIX}<class>'); rename or drop them")
    X = texts_from(frame, args.text_col, args.pair_col, args.data)
    clf = load_model(args)
    proba = clf.predict_proba(X)
    out = pd.DataFrame(proba, columns=[f"{PROBA_PREFIX}{c}" for c in clf.classes_])
    out.insert(0, PREDICTION_COLUMN, clf.classes_[proba.argmax(axis=1)])
    write_table(pd.concat([frame.reset_index(drop=True), out], axis=1), args.output)
    say(args, f"wrote {len(out)} predictions to {args.output}")
    counts = out[PREDICTION_COLUMN].astype(str).value_counts()
    return {"command": "predict", "written": [args.output], "n_predictions": len(out),
            "classes": clf.classes_.tolist(), "prediction_counts": {k: int(v) for k, v in counts.items()}}

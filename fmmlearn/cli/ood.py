"""``fmmlearn ood``: the in-distribution report of masked inputs (MaSF or a conformal detector).
"""

from __future__ import annotations

from ._io import (
    TABLE_SUFFIXES,
    check_output_path,
    labels_from,
    plot_suffixes,
    read_table,
    records,
    texts_from,
    write_table,
)
from ._options import (
    add_command,
    add_common_options,
    add_data_arguments,
    add_inference_batch_size,
    add_model_dir_argument,
    add_output_argument,
    add_seed_argument,
    defaults_of,
    load_model,
    measure_help,
    measure_name,
    say,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    from ..ood import CALIBRATIONS, DEFAULT_THRESHOLDS, DETECTORS, in_distribution_report

    default = defaults_of(in_distribution_report)
    parser = add_command(
        sub, "ood", help="in-distribution test (MaSF, Mahalanobis, kNN) of explainer-masked test data",
        description="Are explainer-masked inputs in-distribution? Per-example p-values of the test table masked "
                    "ratio by ratio (fmmlearn.in_distribution_report), calibrated on a table masked like the "
                    "training batches; with --train, the detector's score is fitted on the training table and the "
                    "calibration table makes only its conformal level (docs/ood.md).",
        examples="""
            fmmlearn ood model/ valid.csv test.csv --label-col label --method rand --output ood.csv --plot ood.png
            fmmlearn ood model/ valid.csv test.csv --detector mahalanobis-all --train train.csv --output ood.csv
            fmmlearn ood model/ valid.csv test.csv --thresholds 0.01 0.05 --ratios 0 0.5 1 --output ood.jsonl --json
        """)
    add_model_dir_argument(parser)
    parser.add_argument("calibration_data", metavar="calibration",
                        help="in-distribution calibration table (e.g. the validation split; same text columns, "
                             "labels not needed)")
    add_data_arguments(parser, labels="required")
    parser.add_argument("--method", type=measure_name, default=default["method"], metavar="METHOD",
                        help=measure_help("importance measure that ranks the tokens to mask"))
    parser.add_argument("--ratios", nargs="+", type=float, default=None, metavar="R",
                        help="masking ratios, increasing in [0, 1] (default: 0 0.1 ... 1)")
    parser.add_argument("--thresholds", nargs="+", type=float, default=list(DEFAULT_THRESHOLDS), metavar="P",
                        help="levels at which the share of examples with p < level is reported")
    parser.add_argument("--detector", default=default["detector"], choices=sorted(DETECTORS),
                        help="the in-distribution test: MaSF (the paper's) or a conformal Mahalanobis/kNN detector "
                             "on pooled hidden states (docs/ood.md compares their power)")
    parser.add_argument("--train", default=None, metavar="FILE",
                        help="training table (same text columns): the detector's score is fitted on it, masked like "
                             "the training batches")
    parser.add_argument("--calibration", default=default["calibration"], choices=CALIBRATIONS,
                        help="MaSF mode: calibrated p-values, or the paper's reference procedure")
    parser.add_argument("--dist-repeats", type=int, default=default["dist_repeats"], metavar="N",
                        help="differently masked copies of the table the detector's score is fitted on")
    parser.add_argument("--segment", default=default["segment"], choices=("first", "all"),
                        help="mask segment A only (the paper) or every non-special token")
    add_seed_argument(parser, "seed of the calibration masks, the folds and rand (default: the model's random_state)")
    add_inference_batch_size(parser)
    add_output_argument(parser, "report table: .csv, .tsv, .jsonl, .parquet or .html")
    parser.add_argument("--plot", default=None, metavar="FILE", help="also draw the report (.png, .pdf, .svg)")
    add_common_options(parser)
    parser.set_defaults(func=run)


def run(args) -> dict:
    """``fmmlearn ood``: the in-distribution report and its plot."""
    from ..ood import in_distribution_report

    inputs = tuple(p for p in (args.data, args.calibration_data, args.train) if p)
    check_output_path(args.output, "--output", TABLE_SUFFIXES, inputs)
    if args.plot:
        check_output_path(args.plot, "--plot", plot_suffixes(), inputs)
    columns = (args.text_col, args.pair_col)
    X_calib = texts_from(read_table(args.calibration_data, columns), *columns, args.calibration_data)
    X_train = texts_from(read_table(args.train, columns), *columns, args.train) if args.train else None
    frame = read_table(args.data, columns + (args.label_col,))
    X = texts_from(frame, *columns, args.data)
    clf = load_model(args)
    y = labels_from(frame, args.label_col, args.data, clf.classes_)
    report = in_distribution_report(clf, X_calib, X, y, method=args.method, ratios=args.ratios,
                                    calibration=args.calibration, thresholds=args.thresholds, segment=args.segment,
                                    random_state=args.random_state, detector=args.detector, X_train=X_train,
                                    dist_repeats=args.dist_repeats)
    write_table(report, args.output)
    written = [args.output]
    levels = sorted(report["threshold"].unique())
    level = 0.05 if 0.05 in levels else levels[-1]
    shown = report[report["threshold"] == level]
    say(args, shown.to_string(index=False), f"wrote the report to {args.output}")
    if args.plot:
        from ..plotting import plot_in_distribution

        plot_in_distribution(report, path=args.plot)
        written.append(args.plot)
        say(args, f"wrote the plot to {args.plot}")
    return {"command": "ood", "written": written, "n_calibration": len(X_calib), "n_test": len(y),
            "detector": args.detector, "n_train": None if X_train is None else len(X_train),
            "threshold": level, "summary": records(shown)}

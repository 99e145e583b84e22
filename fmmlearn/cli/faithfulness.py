"""``fmmlearn faithfulness``: faithfulness curves (explainer masking against random masking) with ACU/RACU.
"""

from __future__ import annotations

from ._io import (
    TABLE_SUFFIXES,
    check_output_path,
    labels_from,
    plot_suffixes,
    read_table,
    records,
    subsample,
    summary_path,
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
    metric_name,
    say,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    from ..faithfulness import faithfulness_report
    from ..metrics import available_metrics

    default = defaults_of(faithfulness_report)
    parser = add_command(
        sub, "faithfulness", help="masking curves, ACU and RACU of importance measures",
        description="Faithfulness of importance measures (fmmlearn.faithfulness_report): performance while "
                    "masking the tokens each measure ranks highest, against the random baseline, summarised "
                    "as RACU and ACU with bootstrap intervals over repeats (docs/faithfulness.md).\nWrites the "
                    "curves to --output and the summary next to them (--summary).",
        examples="""
            fmmlearn faithfulness model/ test.csv --methods loo-sign inp-grad-sign --output curves.csv --plot curves.png
            # writes curves.csv and its summary curves.summary.csv
            fmmlearn faithfulness model/ test.csv --max-samples 200 --metric macro_f1 --output curves.parquet --json
        """)
    add_model_dir_argument(parser)
    add_data_arguments(parser, labels="required")
    parser.add_argument("--methods", nargs="+", type=measure_name, default=list(default["methods"]),
                        metavar="METHOD", help=measure_help("importance measures"))
    parser.add_argument("--n-repeats", "--repeats", dest="n_repeats", type=int, default=default["n_repeats"],
                        metavar="N",
                        help="random baselines (and rand curves) drawn; the CIs are over them")
    parser.add_argument("--ratios", nargs="+", type=float, default=None, metavar="R",
                        help="masking ratios, increasing from 0 to 1 (default: 0 0.1 ... 1)")
    parser.add_argument("--metric", type=metric_name, default=default["metric"], metavar="METRIC",
                        help=f"performance metric of the curves: {', '.join(available_metrics())} or a "
                             "scikit-learn scorer name (default: the primary metric of the model's paper "
                             "dataset, else accuracy)")
    parser.add_argument("--max-samples", type=int, default=None, metavar="N",
                        help="measure on a stratified random subsample of at most N examples (cost control)")
    parser.add_argument("--segment", default=default["segment"], choices=("first", "all"),
                        help="mask segment A only (the paper) or every non-special token")
    parser.add_argument("--confidence-level", type=float, default=default["confidence_level"], metavar="C",
                        help="of the bootstrap intervals")
    add_seed_argument(parser, "seed of the baselines, rand and the subsample (default: the model's random_state)")
    add_inference_batch_size(parser)
    add_output_argument(parser, "table of the curves: .csv, .tsv, .jsonl, .parquet or .html")
    parser.add_argument("--summary", default=None, metavar="FILE",
                        help="table of RACU/ACU per method (default: next to the curves, curves.summary.csv "
                             "for curves.csv)")
    parser.add_argument("--plot", default=None, metavar="FILE", help="also draw the curves (.png, .pdf, .svg)")
    add_common_options(parser)
    parser.set_defaults(func=run)


def run(args) -> dict:
    """``fmmlearn faithfulness``: curves, summary and plot of ``faithfulness_report``."""
    from ..faithfulness import check_ratios, faithfulness_report

    inputs = (args.data,)
    summary_file = args.summary or summary_path(args.output)
    check_output_path(args.output, "--output", TABLE_SUFFIXES, inputs)
    check_output_path(summary_file, "--summary", TABLE_SUFFIXES, inputs + (args.output,))
    if args.plot:
        check_output_path(args.plot, "--plot", plot_suffixes(), inputs)
    ratios = None if args.ratios is None else check_ratios(args.ratios, name="--ratios", endpoints=True)
    frame = read_table(args.data, (args.text_col, args.pair_col, args.label_col))
    X = texts_from(frame, args.text_col, args.pair_col, args.data)
    clf = load_model(args)
    y = labels_from(frame, args.label_col, args.data, clf.classes_)
    seed = clf.random_state if args.random_state is None else args.random_state
    X, y = subsample(X, y, args.max_samples, seed)
    report = faithfulness_report(clf, X, y, methods=args.methods, n_repeats=args.n_repeats, ratios=ratios,
                                 random_state=args.random_state, metric=args.metric, segment=args.segment,
                                 confidence_level=args.confidence_level)
    write_table(report.curves, args.output)
    write_table(report.summary, summary_file)
    written = [args.output, summary_file]
    say(args, report.summary.to_string(index=False), f"wrote the curves to {args.output}",
        f"wrote the summary to {summary_file}")
    if args.plot:
        report.plot(path=args.plot)
        written.append(args.plot)
        say(args, f"wrote the plot to {args.plot}")
    return {"command": "faithfulness", "written": written, "n_examples": len(y), "n_repeats": args.n_repeats,
            "summary": records(report.summary)}

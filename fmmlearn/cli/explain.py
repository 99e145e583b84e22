"""``fmmlearn explain``: token or word importances of a saved model, as a table and an HTML heatmap.
"""

from __future__ import annotations

from ._io import (
    HTML_SUFFIXES,
    TABLE_SUFFIXES,
    check_output_path,
    labels_from,
    read_table,
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
    from ..explanation import explain

    default = defaults_of(explain)
    parser = add_command(
        sub, "explain", help="token or word importances of a saved model, with an HTML heatmap",
        description="Explain a saved model's decisions with an importance measure (fmmlearn.explain): one row "
                    "per example and token (or word), optionally an HTML heatmap (docs/explain.md).",
        examples="""
            fmmlearn explain model/ test.csv --method loo-sign --output expl.csv --html expl.html
            fmmlearn explain model/ test.csv --label-col label --level word --method int-grad-sign --output words.jsonl
        """)
    add_model_dir_argument(parser)
    add_data_arguments(parser, labels="optional")
    parser.add_argument("--method", type=measure_name, default=default["method"], metavar="METHOD",
                        help=measure_help("importance measure"))
    parser.add_argument("--segment", default=default["segment"], choices=("first", "all"),
                        help="explain segment A only (the paper; segment B of pairs is context) or both")
    parser.add_argument("--level", default=default["level"], choices=("token", "word"),
                        help="rows per subword token or per word (scores aggregated)")
    parser.add_argument("--aggregate", default=default["aggregate"], choices=("sum", "mean", "max"),
                        help="how token scores combine into a word's (--level word)")
    add_seed_argument(parser, "seed of the rand measure (default: the model's random_state)")
    add_inference_batch_size(parser)
    add_output_argument(parser, "output table: .csv, .tsv, .jsonl, .parquet or .html")
    parser.add_argument("--html", default=None, metavar="FILE", help="also write a self-contained HTML heatmap")
    add_common_options(parser)
    parser.set_defaults(func=run)


def run(args) -> dict:
    """``fmmlearn explain``: the long explanation table, and the heatmap."""
    inputs = (args.data,)
    check_output_path(args.output, "--output", TABLE_SUFFIXES, inputs)
    if args.html:
        check_output_path(args.html, "--html", HTML_SUFFIXES, inputs)
    frame = read_table(args.data, (args.text_col, args.pair_col, args.label_col))
    X = texts_from(frame, args.text_col, args.pair_col, args.data)
    clf = load_model(args)
    y = labels_from(frame, args.label_col, args.data, clf.classes_) if args.label_col else None
    explanation = clf.explain(X, y, method=args.method, segment=args.segment, level=args.level,
                              aggregate=args.aggregate, random_state=args.random_state)
    write_table(explanation.frame, args.output)  # the rows, through pandas' writers
    written = [args.output]
    n_examples = len(X)
    say(args, f"wrote {len(explanation)} rows ({n_examples} examples) to {args.output}")
    if args.html:
        explanation.to_html(args.html, title=f"{args.method} explanations")
        written.append(args.html)
        say(args, f"wrote the heatmap to {args.html}")
    return {"command": "explain", "written": written, "method": args.method, "level": args.level,
            "n_rows": len(explanation), "n_examples": n_examples}

"""Where a faithfulness study spends its forward passes: seconds and rows per text, per measure and precision.

One masked MiniLM fine-tuned on bundled tweets (the reproduction's settings), then the faithfulness
stage of a study on the same test texts for every measure of the reproduction, in three configurations
(:data:`CONFIGS`): every forward pass in fp32; ``precision="auto"`` (bf16 autocast for fine-tuning and
the curves' predictions where this CPU runs it faster, the measures in fp32: the study's default); and
that with every measure forced to bf16.  From the study's own
timings (``result.timings``): per measure, seconds per text, forward rows per text (a row is one
sequence through the model; gradient rows count the backward passes) and tokens per text.  Every
curve is the paper's: recursive for every measure but ``rand`` and beam search, 11 ratios.

    python benchmarks/measure_cost.py                # ~10 min on 2 cores; results/<cpu kind>/measure_cost.*
    python benchmarks/measure_cost.py --quick        # 8 texts, 1 epoch; writes nothing
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command, machine, machine_line, table, write_results  # noqa: E402

MEASURES = ("rand", "grad-l2", "inp-grad-sign", "inp-grad-abs", "int-grad-sign", "int-grad-abs", "loo-sign",
            "loo-abs")


#: The configurations compared: the classifier's precision (fine-tuning and the curves' predictions) and
#: the measures' own (``None``: fp32, the study's default; ``"bf16"``: every measure forced to bf16).
CONFIGS = {"fp32": ("fp32", None), "auto": ("auto", None), "auto + bf16 measures": ("auto", "bf16")}


def study_costs(args, precision: str, measure_precision, cache: Path) -> tuple:
    """``(timings of the faithfulness stage, metadata)`` of one study run at ``precision``."""
    import warnings

    from fmmlearn.exceptions import TruncationWarning
    from fmmlearn.study import FaithfulnessStudy

    params = {m: {"variant": "reference"} if m.startswith("int-grad-") else {} for m in MEASURES if m != "rand"}
    if measure_precision is not None:
        for m in params:
            params[m]["precision"] = measure_precision
    study = FaithfulnessStudy(
        "minilm", masking_ratios=(1.0,), methods=list(MEASURES), seeds=(0,), n_train=args.n_train, n_valid=60,
        n_test=args.n_test, n_random=1, method_params=params, in_distribution=None, erasure=None, n_explain=0,
        classifier_params={"max_epochs": args.epochs, "learning_rate": 2e-4, "max_length": 48,
                           "precision": precision},
        cache_dir=cache, verbose=0, n_bootstrap=200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        started = time.perf_counter()
        result = study.run("tweets")
        wall = time.perf_counter() - started
    timings = result.timings
    return timings[timings["stage"].isin(["faithfulness", "random masking", "performance"])], \
        {"wall_seconds": wall, "precision": result.metadata.get("precision")}


def run(args) -> tuple[dict, str]:
    import pandas as pd

    info = machine()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # one cache: the fit of a classifier precision is shared by the configurations that use it
        for config, (precision, measure_precision) in CONFIGS.items():
            timings, meta = study_costs(args, precision, measure_precision, Path(tmp))
            for rec in timings.to_dict("records"):
                n = max(int(rec["n_examples"]), 1)
                rows.append({"precision": config, "stage": rec["stage"], "method": rec["method"],
                             "texts": n, "seconds": rec["compute_seconds"], "seconds_per_text": rec["compute_seconds"] / n,
                             "forward_rows_per_text": rec["forward_rows"] / n,
                             "gradient_rows_per_text": rec["gradient_rows"] / n,
                             "forward_tokens_per_text": rec["forward_tokens"] / n,
                             "used": measure_precision or "fp32",
                             "study_wall_seconds": meta["wall_seconds"]})
    frame = pd.DataFrame(rows)
    report = {"machine": info, "command": command(), "rows": rows, "n_test": args.n_test, "n_train": args.n_train}
    return report, markdown(frame, info, args)


def markdown(frame, info, args) -> str:
    lines = ["# Where the forward passes go: one faithfulness curve per measure", "",
             machine_line(info, "fp32, then precision='auto' (see the 'used' column)"), "",
             f"Command: `{command()}`", "",
             f"A masked MiniLM fine-tuned on {args.n_train} bundled tweets ({args.epochs} epochs, max_length 48); "
             f"the curve of every measure on the same {args.n_test} test tweets (11 ratios, recursive but for "
             "rand; integrated gradients the paper's reference variant, 20 steps). Per text: compute seconds, "
             "forward rows (sequences through the model, gradient measures' path points included) and gradient "
             "rows (backward passes).", ""]
    body = []
    for method, part in frame[frame["stage"] == "faithfulness"].groupby("method", sort=False):
        by = part.groupby("precision").agg(seconds=("seconds", "sum"), texts=("texts", "sum"),
                                           rows=("forward_rows_per_text", "mean"),
                                           grads=("gradient_rows_per_text", "mean"),
                                           tokens=("forward_tokens_per_text", "mean"))
        per_text = {c: by.loc[c, "seconds"] / by.loc[c, "texts"] for c in CONFIGS}
        body.append([method, *[f"{per_text[c]:.3f}" for c in CONFIGS],
                     f"{per_text['fp32'] / per_text['auto + bf16 measures']:.2f}x", f"{by.loc['fp32', 'rows']:.0f}",
                     f"{by.loc['fp32', 'grads']:.0f}", f"{by.loc['fp32', 'tokens']:.0f}"])
    lines += table(["measure", *[f"s/text {c}" for c in CONFIGS], "fp32 / bf16 measures", "forward rows/text",
                    "gradient rows/text", "tokens/text"], body)
    other = frame[frame["stage"] != "faithfulness"].groupby(["stage", "precision"])["seconds_per_text"].mean()
    lines += ["", "Other stages, seconds per text: " + "; ".join(f"{stage} ({config}) {value:.4f}"
                                                                for (stage, config), value in other.items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-train", type=int, default=600)
    parser.add_argument("--n-test", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_train, args.n_test, args.epochs = 100, 8, 1
    report, text = run(args)
    write_results("measure_cost", report["machine"], report, text, quick=args.quick)


if __name__ == "__main__":
    main()

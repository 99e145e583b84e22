"""``fmmlearn fit``: masked fine-tuning of a classifier on a labelled table; the model directory it writes.
"""

from __future__ import annotations

import argparse
import time

from ._io import check_model_dir, empty_text_rows, labels_from, read_table, records, texts_from
from ._options import (
    add_command,
    add_common_options,
    add_data_arguments,
    defaults_of,
    say,
)

__all__ = ["add_parser", "run"]


#: fit options that --paper-dataset sets to the paper's values unless they are given on the command line.
_PAPER_OPTIONS = ("max_masking_ratio", "masking_strategy", "max_epochs", "batch_size", "learning_rate")


class _ParserDefault:
    """Marks an option's value as the parser default, so a command can tell it from one typed by the user."""


class _DefaultInt(_ParserDefault, int):
    pass


class _DefaultFloat(_ParserDefault, float):
    pass


class _DefaultStr(_ParserDefault, str):
    pass


_MARKED = {int: _DefaultInt, float: _DefaultFloat, str: _DefaultStr}


_PLAIN = {marked: plain for plain, marked in _MARKED.items()}


def _mark_defaults(parser, dests) -> None:
    """Wrap the defaults of ``dests`` in :class:`_ParserDefault` types (same value, same help text)."""
    parser.set_defaults(**{dest: _MARKED[type(parser.get_default(dest))](parser.get_default(dest))
                           for dest in dests if type(parser.get_default(dest)) in _MARKED})


def _paper_dataset_name(value: str) -> str:
    """``type=`` of --paper-dataset: a registry name (forgiving spellings), else a parse error listing them."""
    from ..datasets import get_dataset_spec

    try:
        return get_dataset_spec(value).name
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _paper_settings(args) -> dict:
    """The parameters --paper-dataset sets (``{}`` without it); unwraps the marked defaults of ``args``.

    The paper's settings (:func:`fmmlearn.datasets.paper_params`) win over the
    defaults of --learning-rate, --max-epochs, --batch-size, --max-masking-ratio
    and --masking-strategy, not over values given on the command line.
    """
    given = set()
    for dest in _PAPER_OPTIONS:
        value = getattr(args, dest)
        if isinstance(value, _ParserDefault):
            setattr(args, dest, _PLAIN[type(value)](value))
        else:
            given.add(dest)
    if getattr(args, "paper_dataset", None) is None:
        return {}
    from ..datasets import paper_params

    return {name: value for name, value in paper_params(args.paper_dataset).items() if name not in given}


def add_parser(sub) -> None:
    from ..estimator import FaithfulTextClassifier
    from ..masking import MASKING_STRATEGIES
    from ..modeling import PRECISIONS

    default = defaults_of(FaithfulTextClassifier)
    parser = add_command(
        sub, "fit", help="fine-tune a classifier with masking on a labelled table and save it",
        description="Fine-tune a transformer classifier with random token masking (FaithfulTextClassifier.fit) "
                    "on a labelled table and save it (FaithfulTextClassifier.save).\nEvery option is the "
                    "estimator's parameter of the same name (docs/classifier.md).",
        examples="""
            fmmlearn fit train.csv --text-col review --label-col label --output model/
            fmmlearn fit snli.jsonl --text-col premise --pair-col hypothesis --max-epochs 3 --output snli-model/
            fmmlearn fit train.csv --max-masking-ratio 0 --output plain-model/ --json   # plain fine-tuning
        """)
    add_data_arguments(parser, labels="required")
    parser.add_argument("-o", "--output", "--output-dir", "--out", dest="output", required=True, metavar="DIR",
                        help="directory to save the model in: new, empty, or holding a saved model (replaced)")
    parser.add_argument("--model", default=default["model"], metavar="NAME_OR_DIR",
                        help="base model: 'minilm' (bundled, offline), a local directory or a Hugging Face hub name")
    parser.add_argument("--max-masking-ratio", type=float, default=default["max_masking_ratio"], metavar="R",
                        help="upper bound of the per-example masking ratio m ~ U[0, max); 0 is plain fine-tuning")
    parser.add_argument("--masking-strategy", default=default["masking_strategy"], choices=MASKING_STRATEGIES,
                        help="which rows of a batch are masked: the second half (the paper), a random half, or all")
    parser.add_argument("--max-epochs", "--epochs", dest="max_epochs", type=int, default=default["max_epochs"],
                        metavar="N",
                        help="training epochs; the best epoch on the validation split is kept")
    parser.add_argument("--batch-size", type=int, default=default["batch_size"], metavar="N",
                        help="training batch size (forward-only passes use 4x)")
    parser.add_argument("--learning-rate", type=float, default=default["learning_rate"], metavar="LR",
                        help="peak AdamW learning rate (small models such as MiniLM like 1e-4 and more)")
    parser.add_argument("--validation-fraction", type=float, default=default["validation_fraction"], metavar="F",
                        help="share of the table held out (stratified) to select the best epoch; 0: keep the last")
    parser.add_argument("--max-length", type=int, default=default["max_length"], metavar="N",
                        help="token limit per input, special tokens included (default: the tokenizer's limit); "
                             "longer inputs are truncated with a warning")
    parser.add_argument("--precision", default=default["precision"], choices=PRECISIONS,
                        help="auto: bf16 autocast where the hardware supports it well, else fp32")
    parser.add_argument("--random-state", "--seed", dest="random_state", type=int, default=default["random_state"],
                        metavar="SEED",
                        help="seed of the head, dropout, batch order and every mask")
    parser.add_argument("--accelerator", choices=("auto", "none"), default=None,
                        help="train with Hugging Face Accelerate (docs/scaling.md): data-parallel under 'accelerate "
                             "launch --num_processes N -m fmmlearn fit ...', where only the main process writes. "
                             "Default: auto under a multi-process launch or with --gradient-accumulation-steps, "
                             "else none")
    parser.add_argument("--gradient-accumulation-steps", type=int, default=default["gradient_accumulation_steps"],
                        metavar="N", help="batches whose gradients add up to one optimisation step (Accelerate)")
    parser.add_argument("--paper-dataset", type=_paper_dataset_name, default=None, metavar="NAME",
                        help="fine-tune with the paper's settings for this dataset (sst2, mrpc, cola, babi-1, ...; "
                             "FaithfulTextClassifier.for_paper_dataset): learning rate 2e-5, its epochs, its primary "
                             "metric for model selection and as the later commands' default metric, batch size 16, "
                             "masked fine-tuning; options given explicitly still win (e.g. --max-epochs 1)")
    parser.add_argument("--allow-empty", action="store_true",
                        help="train on rows whose text is empty or whitespace only (by default they are an error "
                             "naming the rows: usually a broken export, and the model would learn a label for "
                             "'no text')")
    _mark_defaults(parser, _PAPER_OPTIONS)
    add_common_options(parser)
    parser.set_defaults(func=run)


def run(args) -> dict:
    """``fmmlearn fit``: read, check, fine-tune, save."""
    from ..estimator import FaithfulTextClassifier
    from ..distributed import is_main_process, launched_processes

    check_model_dir(args.output, "--output")
    frame = read_table(args.data, (args.text_col, args.pair_col, args.label_col))
    X = texts_from(frame, args.text_col, args.pair_col, args.data)
    y = labels_from(frame, args.label_col, args.data)
    _check_empty_texts(frame, args)
    paper = _paper_settings(args)
    clf = FaithfulTextClassifier(
        model=args.model,
        max_masking_ratio=args.max_masking_ratio,
        masking_strategy=args.masking_strategy,
        validation_fraction=args.validation_fraction,
        max_epochs=args.max_epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        max_length=args.max_length,
        device=args.device,
        precision=args.precision,
        accelerator=_accelerator_option(args.accelerator, launched_processes(), args.gradient_accumulation_steps),
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        random_state=args.random_state,
        verbose=args.verbose,
    )
    clf.set_params(**paper)
    start = time.perf_counter()
    clf.fit(X, y)
    seconds = time.perf_counter() - start
    path = clf.save(args.output)  # only the main process of a launch writes
    if not is_main_process():  # and reports; the other processes trained alongside it
        return 0
    say(args, clf.history_.to_string(), f"fitted on {len(y)} examples in {seconds:.1f}s",
        f"wrote the model to {path}")
    return {"command": "fit", "written": [str(path)], "model_dir": str(path), "n_examples": len(y),
            "classes": clf.classes_.tolist(), "fit_seconds": round(seconds, 3),
            "history": records(clf.history_.reset_index())}


def _check_empty_texts(frame, args) -> None:
    """Refuse empty text cells unless ``--allow-empty``: the error names the rows."""
    empty = empty_text_rows(frame, (args.text_col, args.pair_col))
    if empty and not args.allow_empty:
        columns = " or ".join(repr(c) for c in (args.text_col, args.pair_col) if c)
        raise ValueError(f"{len(empty)} row(s) of {args.data} have an empty text in column {columns}: row(s) "
                         f"{empty[:10]}{' ...' if len(empty) > 10 else ''} (counting data rows from 0); fix the "
                         "data, or pass --allow-empty to train on them")


def _accelerator_option(choice, launched: int, accumulation: int):
    """``--accelerator``: ``"auto"`` under a multi-process launch or with accumulation, unless told ``none``."""
    if choice is None:
        choice = "auto" if launched > 1 or accumulation > 1 else "none"
    return None if choice == "none" else "auto"

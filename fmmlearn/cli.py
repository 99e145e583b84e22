"""The ``fmmlearn`` command: fit, predict, explain and measure from the terminal.

Data files are CSV, TSV, JSON Lines, JSON or Parquet, read and written with
pandas (docs/cli.md).  Every command says what it wrote; ``--json`` prints a
machine-readable summary on stdout instead (human messages then go to
stderr).  A user error -- a bad file, a missing column, an unwritable output
-- is one ``error: ...`` line on stderr and exit status 2, found before any
model work; ``--debug`` shows the traceback.

Each command is one ``_add_<name>_parser(sub)`` function plus one
``cmd_<name>(args)`` function.  The shared machinery -- :class:`HelpFormatter`,
:func:`add_command` (formatter, example epilog), :func:`add_common_options`
(``--device``, ``-v``/``-q``, ``--json``, ``--debug``),
:func:`add_data_arguments` and the output-path checks -- is for every command.
A ``cmd_<name>`` returns a JSON-able summary dict (printed under ``--json``)
or an exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import textwrap
import time
import warnings
from pathlib import Path

__all__ = ["build_parser", "main"]


# --------------------------------------------------------------------------- reading tables

#: Data files the commands read, by suffix.
DATA_SUFFIXES = (".csv", ".txt", ".tsv", ".jsonl", ".ndjson", ".json", ".parquet", ".pq")
#: Tables the commands write, by suffix.
TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".parquet", ".pq", ".html", ".htm")
#: HTML pages.
HTML_SUFFIXES = (".html", ".htm")

_INTEGER = re.compile(r"[+-]?\d+")


def _read_frame(path: Path, suffix: str):
    """The raw table; delimited text is read as strings, empty fields as ``""`` (never NaN)."""
    import pandas as pd

    if suffix in (".csv", ".txt", ".tsv"):
        # index_col=False: a row with more fields than the header is an error, not a silent index.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype=str, keep_default_na=False,
                                index_col=False)
        for warning in caught:
            if issubclass(warning.category, pd.errors.ParserWarning):
                raise ValueError(str(warning.message))
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        return frame
    if suffix in (".jsonl", ".ndjson", ".json"):
        # dtype=False: "12" stays a string, and no column is guessed to hold dates.
        return pd.read_json(path, lines=suffix != ".json", dtype=False)
    return pd.read_parquet(path)


def read_table(path: str, columns=()):
    """Read a data table by suffix and check that it has ``columns``.

    CSV and TSV are read as text: every value is a string (``"12"``,
    ``"None"`` and ``"NA"`` stay texts, an empty field is ``""``).  JSON and
    Parquet keep their stored types.

    Raises
    ------
    FileNotFoundError, ValueError
        A missing file, an unsupported suffix, an unreadable table or a
        missing column (the message lists the table's columns).
    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in DATA_SUFFIXES:
        raise ValueError(f"unsupported data file type {suffix or '(none)'!r} of {path!r}; use "
                         ".csv, .tsv, .jsonl, .json or .parquet")
    if not file.is_file():
        raise FileNotFoundError(f"data file {path!r} does not exist")
    try:
        frame = _read_frame(file, suffix)
    except (ValueError, OSError) as error:  # pandas' and pyarrow's parse errors are ValueErrors
        if isinstance(error, FileNotFoundError):
            raise
        hint = " (is it UTF-8 text?)" if isinstance(error, UnicodeDecodeError) else ""
        raise ValueError(f"cannot read {path} as a {suffix[1:].upper()} table: {error}{hint}") from error
    missing = [c for c in dict.fromkeys(columns) if c is not None and c not in frame.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in {path}; its columns are {list(map(str, frame.columns))} "
                         "(choose them with --text-col, --pair-col, --label-col)")
    return frame


def texts_from(frame, text_col: str, pair_col: str | None, path: str = "the data"):
    """The X of a table: a text column, or two columns for sentence pairs; every value must be a string."""
    for col in filter(None, (text_col, pair_col)):
        bad = [i for i, v in enumerate(frame[col].tolist()) if not isinstance(v, str)]
        if bad:
            value = frame[col].iloc[bad[0]]
            raise ValueError(f"column {col!r} of {path} must hold texts, but row(s) {bad[:5]} hold "
                             f"{value!r} ({type(value).__name__}); store them as strings")
    if pair_col:
        return frame[[text_col, pair_col]]
    return frame[text_col]


def labels_from(frame, label_col: str, path: str = "the data", classes=None):
    """The y of a table, as the labels the model knows.

    Without ``classes`` (fitting), string labels that are all integers
    (``"0"``, ``"-1"``) become ints and other strings stay strings.  With a
    fitted model's ``classes``, each label is matched to the class of the
    same text (``"1"`` -> ``1``), so a table read as text meets a model
    trained on ints; an unknown label is left as is (the library names it).
    """
    import numpy as np

    values = frame[label_col].tolist()
    missing = [i for i, v in enumerate(values) if v is None or v == "" or (isinstance(v, float) and np.isnan(v))]
    if missing:
        raise ValueError(f"column {label_col!r} of {path} has no label in row(s) {missing[:5]}"
                         f"{' ...' if len(missing) > 5 else ''}")
    if classes is not None:
        by_text = {str(c): c for c in classes.tolist()}
        return np.asarray([by_text.get(str(v), v) for v in values], dtype=object)
    if all(isinstance(v, str) for v in values) and all(_INTEGER.fullmatch(v.strip()) for v in values):
        return np.asarray([int(v) for v in values], dtype=np.int64)
    return np.asarray(values, dtype=object)


# --------------------------------------------------------------------------- writing tables


def write_table(frame, path: str) -> None:
    """Write a DataFrame by suffix (CSV, TSV, JSON Lines, Parquet or HTML); the path is checked beforehand."""
    suffix = Path(path).suffix.lower()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif suffix in (".jsonl", ".ndjson"):
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    elif suffix in (".parquet", ".pq"):
        frame.to_parquet(path, index=False)
    elif suffix in HTML_SUFFIXES:
        Path(path).write_text(frame.to_html(index=False), encoding="utf-8")
    else:  # check_output_path rejects these before any work
        raise ValueError(f"unsupported output type {suffix!r}; use one of {', '.join(TABLE_SUFFIXES)}")


def _plot_suffixes() -> tuple:
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted("." + s for s in FigureCanvasBase.get_supported_filetypes()))


def _check_writable_dir(directory: Path, option: str, path) -> None:
    """``directory`` exists and is writable, or can be created (its first existing ancestor is a writable dir)."""
    existing = directory.resolve()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"{option} {str(path)!r}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {str(path)!r}: cannot write into {existing} (permission denied)")


def _same_file(a, b) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def check_output_path(path, option: str, suffixes, inputs=()) -> None:
    """Fail before any work when ``path`` cannot be written: wrong suffix, a directory, an input, no write access."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in suffixes:
        raise ValueError(f"{option} {str(path)!r}: unsupported file type {suffix or '(none)'!r}; use one of "
                         f"{', '.join(suffixes)}")
    if target.is_dir():
        raise ValueError(f"{option} {str(path)!r} is a directory; give a file name")
    for source in inputs:
        if source is not None and target.exists() and _same_file(target, source):
            raise ValueError(f"{option} {str(path)!r} is also an input; writing it would destroy the input")
    _check_writable_dir(target.parent, option, path)


def check_model_dir(path, option: str = "--output") -> None:
    """A directory a model may be saved to: new, empty, or holding a saved fmmlearn model (which is replaced)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise ValueError(f"{option} {str(path)!r} is a file; give a directory to save the model in")
    if target.is_dir() and any(target.iterdir()) and not (target / "fmmlearn.json").is_file():
        raise ValueError(f"{option} {str(path)!r} is a non-empty directory that holds no saved fmmlearn model; "
                         "refusing to write into it: choose a new directory")
    _check_writable_dir(target if target.exists() else target.parent, option, path)


def summary_path(curves_path: str) -> str:
    """Where the faithfulness summary goes by default: ``curves.csv`` -> ``curves.summary.csv``."""
    curves = Path(curves_path)
    return str(curves.with_name(f"{curves.stem}.summary{curves.suffix}"))


# --------------------------------------------------------------------------- parser machinery


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows each option's default (except ``None`` and on/off flags) and keeps descriptions and epilogs as written."""

    def _get_help_string(self, action):
        if action.default is None or isinstance(action.default, bool) or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)

    def _split_lines(self, text, width):
        # Never break inside "inp-grad-sign" or "--max-epochs".
        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width, break_on_hyphens=False)


def add_command(sub, name: str, *, help: str, description: str, examples: str, **kwargs):
    """A sub-command parser with :class:`HelpFormatter` and an ``examples:`` epilog.

    Parameters
    ----------
    sub : argparse._SubParsersAction
    name, help, description : str
    examples : str
        One example command line per line (comments with ``#``).
    **kwargs
        Passed to ``sub.add_parser``.
    """
    epilog = "examples:\n" + textwrap.indent(textwrap.dedent(examples).strip("\n"), "  ")
    description = "\n".join(textwrap.fill(paragraph, 100) for paragraph in description.split("\n"))
    return sub.add_parser(name, help=help, description=description, epilog=epilog, formatter_class=HelpFormatter,
                          **kwargs)


def add_common_options(parser, *, device: bool = True) -> None:
    """The options every command shares: ``--device``, ``-v``/``-q``, ``--json``, ``--debug``."""
    group = parser.add_argument_group("common options")
    if device:
        group.add_argument("--device", default="auto", metavar="DEVICE",
                           help="where the model runs: auto (CUDA when available, else the CPU), cpu, cuda, "
                                "cuda:N or mps")
    group.add_argument("-v", "--verbose", action="count", default=1,
                       help="1 shows progress bars; -v also prints skorch's per-epoch table while fitting")
    group.add_argument("-q", "--quiet", dest="verbose", action="store_const", const=0,
                       help="no progress bars and no messages (warnings and errors still go to stderr)")
    group.add_argument("--json", action="store_true",
                       help="print a JSON summary on stdout and nothing else (messages go to stderr)")
    group.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def add_data_arguments(parser, *, labels: str) -> None:
    """The input table and its columns; ``labels`` is ``"required"``, ``"optional"`` or ``"none"``."""
    parser.add_argument("data", help="table of texts: .csv, .tsv, .jsonl, .json or .parquet (CSV/TSV cells are "
                                     "read as text, so '12', 'None' and 'NA' stay texts)")
    parser.add_argument("--text-col", default="text", metavar="COL",
                        help="column holding the text (the first text of a pair)")
    parser.add_argument("--pair-col", default=None, metavar="COL",
                        help="column holding the second text of sentence pairs (default: none, single texts)")
    if labels == "required":
        parser.add_argument("--label-col", default="label", metavar="COL",
                            help="column holding the gold labels (in CSV/TSV, labels that are all integers are "
                                 "read as ints)")
    elif labels == "optional":
        parser.add_argument("--label-col", default=None, metavar="COL",
                            help="column of gold labels: explain the gold class (the paper's convention); "
                                 "default: none, explain the predicted class")


def add_model_dir_argument(parser) -> None:
    """The saved model an inference command loads."""
    parser.add_argument("model_dir", help="directory of a model saved by 'fmmlearn fit' (FaithfulTextClassifier.save)")


def add_seed_argument(parser, help: str) -> None:
    """``--random-state`` (alias ``--seed``) of the commands that load a model; ``None``: the model's own."""
    parser.add_argument("--random-state", "--seed", dest="random_state", type=int, default=None, metavar="SEED",
                        help=help)


def add_output_argument(parser, help: str) -> None:
    """The required ``-o``/``--output`` (alias ``--out``) file of a command."""
    parser.add_argument("-o", "--output", "--out", dest="output", required=True, metavar="FILE", help=help)


def add_inference_batch_size(parser) -> None:
    """``--batch-size`` of the commands that load a model."""
    parser.add_argument("--batch-size", type=int, default=None, metavar="N",
                        help="the loaded model's batch_size: forward-only passes take 4x this many examples, "
                             "gradient measures this many (default: the value it was trained with)")


def _defaults(func) -> dict:
    """The parameter defaults of a function or class, so the command's defaults are the library's."""
    import inspect

    return {name: p.default for name, p in inspect.signature(func).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _measure_name(value: str) -> str:
    """``type=`` of method options: a known importance measure, else a parse error naming the known ones."""
    from .importance import get_measure

    try:
        return get_measure(value).name
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _metric_name(value: str) -> str:
    from .metrics import get_metric

    try:
        get_metric(value)
    except (ValueError, TypeError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


def _measure_help(intro: str) -> str:
    from .importance import MEASURE_NAMES

    return f"{intro}: one of {', '.join(MEASURE_NAMES)} (K = beam width, e.g. beam-sign-10)"


# --------------------------------------------------------------------------- running a command


def say(args, *lines) -> None:
    """Human messages: on stdout (stderr under ``--json``); none under ``--quiet``."""
    if getattr(args, "verbose", 1):
        print(*lines, sep="\n")  # main sends stdout to stderr under --json


def load_model(args):
    """The saved classifier of ``args.model_dir`` on ``--device``, with ``--batch-size`` and the verbosity."""
    from .classifier import FaithfulTextClassifier

    clf = FaithfulTextClassifier.load(args.model_dir, device=getattr(args, "device", "auto"))
    params = {"verbose": getattr(args, "verbose", 1)}
    if getattr(args, "batch_size", None) is not None:
        params["batch_size"] = args.batch_size
    return clf.set_params(**params)


def _records(frame) -> list:
    """A DataFrame as JSON records (NaN as null, numpy types as Python's)."""
    return json.loads(frame.to_json(orient="records", force_ascii=False))


def _subsample(X, y, max_samples, random_state):
    """At most ``max_samples`` examples, drawn stratified by label and kept in input order."""
    import numpy as np
    from sklearn.utils import resample

    if max_samples is None or max_samples >= len(y):
        return X, y
    if max_samples < 1:
        raise ValueError(f"--max-samples must be a positive integer, got {max_samples}")
    keep = np.sort(resample(np.arange(len(y)), replace=False, n_samples=max_samples,
                            stratify=np.asarray(y).astype(str), random_state=random_state))
    return X.iloc[keep].reset_index(drop=True), y[keep]


# --------------------------------------------------------------------------- fit


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
    from .datasets import get_dataset_spec

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
    from .datasets import paper_params

    return {name: value for name, value in paper_params(args.paper_dataset).items() if name not in given}


def _add_fit_parser(sub) -> None:
    from .classifier import FaithfulTextClassifier
    from .masking import MASKING_STRATEGIES
    from .modeling import PRECISIONS

    default = _defaults(FaithfulTextClassifier)
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
    _mark_defaults(parser, _PAPER_OPTIONS)
    add_common_options(parser)
    parser.set_defaults(func=cmd_fit)


def cmd_fit(args) -> dict:
    """``fmmlearn fit``: read, check, fine-tune, save."""
    from .classifier import FaithfulTextClassifier
    from .distributed import is_main_process, launched_processes

    check_model_dir(args.output, "--output")
    frame = read_table(args.data, (args.text_col, args.pair_col, args.label_col))
    X = texts_from(frame, args.text_col, args.pair_col, args.data)
    y = labels_from(frame, args.label_col, args.data)
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
            "history": _records(clf.history_.reset_index())}


def _accelerator_option(choice, launched: int, accumulation: int):
    """``--accelerator``: ``"auto"`` under a multi-process launch or with accumulation, unless told ``none``."""
    if choice is None:
        choice = "auto" if launched > 1 or accumulation > 1 else "none"
    return None if choice == "none" else "auto"


# --------------------------------------------------------------------------- predict

#: Column names predict adds to the input table; an input column may not have them.
PREDICTION_COLUMN, PROBA_PREFIX = "prediction", "proba_"


def _add_predict_parser(sub) -> None:
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
    parser.set_defaults(func=cmd_predict)


def cmd_predict(args) -> dict:
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


# --------------------------------------------------------------------------- demo


#: Environment variable naming the demo's base model (e.g. a small local model for tests).
DEMO_MODEL_ENV = "FMMLEARN_DEMO_MODEL"
#: The demo's fine-tuning: MiniLM learns the tweets in 3 epochs at this learning rate (0.72-0.74 accuracy on
#: 3 classes with 300 training tweets, majority class 0.42).
DEMO_CLASSIFIER = {"max_epochs": 3, "learning_rate": 2e-4, "max_length": 48}
#: Sizes of the two demo runs.  Costly measures run on fewer test texts: beam search on the shortest ones (it
#: costs about K n^2 / 2 forward passes per text), the others on a random subset (benchmarks/demo_time.py).
DEMO_PRESETS = {
    "full": {"measures": ("rand", "grad-l2", "inp-grad-sign", "int-grad-sign", "loo-sign", "beam-sign-10"),
             "n_train": 300, "n_valid": 100, "n_test": 80, "n_baseline": 3,
             "max_examples": {"loo-sign": 40, "int-grad-sign": 16, "beam-sign-10": 10}},
    "quick": {"measures": ("rand", "inp-grad-sign", "loo-sign"),
              "n_train": 200, "n_valid": 60, "n_test": 40, "n_baseline": 3,
              "max_examples": {"loo-sign": 20, "int-grad-sign": 8, "beam-sign-10": 6}},
}


def _add_demo_parser(sub) -> None:
    full, quick = DEMO_PRESETS["full"], DEMO_PRESETS["quick"]
    parser = add_command(
        sub, "demo", help="plain vs masked fine-tuning of the bundled MiniLM on real tweets, with an HTML report",
        description="A faithfulness study (fmmlearn.study.FaithfulnessStudy) on the bundled MiniLM and bundled "
                    "real tweets, offline: fine-tune a plain and a masked model, measure their accuracy, the "
                    "random-masking curves, the faithfulness (RACU) of each importance measure and whether masked "
                    "inputs are in-distribution (MaSF); print a plain-language summary and write report.html.\n"
                    "Stages are cached under OUTPUT/cache: rerunning with another measure does not refit, and an "
                    "interrupted run resumes. About 10 minutes on 2 CPU cores, about 2-3 with --quick.",
        examples="""
            fmmlearn demo                                   # ~10 min on 2 CPU cores -> fmmlearn-demo/report.html
            fmmlearn demo --quick --output /tmp/demo        # ~2-3 min, fewer texts and measures
            fmmlearn demo --measures rand inp-grad-sign loo-sign --n-test 120
            fmmlearn demo --device cuda --seed 1 --json
        """)
    parser.add_argument("--quick", action="store_true",
                        help=f"a reduced run: {quick['n_train']} training / {quick['n_test']} test tweets and "
                             f"the measures {', '.join(quick['measures'])}")
    parser.add_argument("-o", "--output", default="fmmlearn-demo", metavar="DIR",
                        help="directory for report.html, the result tables (results/) and the stage cache (cache/)")
    parser.add_argument("--seed", type=int, default=0, metavar="SEED",
                        help="seed of the data split, of fine-tuning and of every mask")
    parser.add_argument("--measures", nargs="+", type=_measure_name, default=None, metavar="MEASURE",
                        help=_measure_help("importance measures to compare (rand, the baseline, is always added); "
                                           f"default {' '.join(full['measures'])}, with --quick "
                                           f"{' '.join(quick['measures'])}"))
    parser.add_argument("--n-train", type=int, default=None, metavar="N",
                        help=f"training tweets (default {full['n_train']}, {quick['n_train']} with --quick)")
    parser.add_argument("--n-valid", type=int, default=None, metavar="N",
                        help="validation tweets: best-epoch selection and MaSF calibration "
                             f"(default {full['n_valid']}, {quick['n_valid']} with --quick)")
    parser.add_argument("--n-test", type=int, default=None, metavar="N",
                        help=f"test tweets (default {full['n_test']}, {quick['n_test']} with --quick); "
                             "costly measures use fewer: "
                             + ", ".join(f"{m} {n}" for m, n in full["max_examples"].items()))
    parser.add_argument("--model", default=os.environ.get(DEMO_MODEL_ENV, "minilm"), metavar="NAME_OR_DIR",
                        help=f"base model: 'minilm' (bundled, offline), a local directory or a hub name "
                             f"(environment variable {DEMO_MODEL_ENV} sets the default)")
    parser.add_argument("--dask-scheduler", default=None, metavar="ADDRESS",
                        help="run the (masking ratio, seed) fits as tasks on this Dask scheduler, e.g. "
                             "tcp://10.0.0.5:8786 (docs/scaling.md); every worker must be able to write OUTPUT/cache")
    add_common_options(parser)
    parser.set_defaults(func=cmd_demo)


def cmd_demo(args) -> dict:
    """``fmmlearn demo``: the plain-vs-masked study on tweets, its summary and report.html."""
    from .study import FaithfulnessStudy
    from .study._options import check_writable_dir

    preset = DEMO_PRESETS["quick" if args.quick else "full"]
    output = check_writable_dir(args.output, "--output")
    measures = list(args.measures or preset["measures"])
    sizes = {k: preset[k] if getattr(args, k) is None else getattr(args, k) for k in ("n_train", "n_valid", "n_test")}
    study = FaithfulnessStudy(
        args.model, masking_ratios=(0.0, 1.0), measures=measures, seeds=(args.seed,), **sizes,
        max_examples={m: n for m, n in preset["max_examples"].items() if m in measures},
        n_baseline=preset["n_baseline"],
        classifier_params=DEMO_CLASSIFIER, device=args.device, cache_dir=output / "cache",
        random_state=args.seed, verbose=args.verbose)
    say(args, f"fmmlearn demo{' --quick' if args.quick else ''}: plain vs masked fine-tuning of {args.model} on "
              f"{sizes['n_train']} tweets; measures {', '.join(measures)} on {sizes['n_test']} test tweets.")
    cluster = contextlib.nullcontext()
    if args.dask_scheduler:
        from .distributed import dask_backend

        cluster = dask_backend(args.dask_scheduler)
    with warnings.catch_warnings(), cluster:
        # Long tweets are cut to max_length=48 tokens; the report counts them instead of a warning per stage.
        warnings.filterwarnings("ignore", message=".*truncat", category=UserWarning)
        result = study.run("tweets")
    results_dir = result.save(output / "results", format="parquet" if _has_parquet() else "csv")
    report = output / "report.html"
    result.to_html(report, title="fmmlearn demo: plain vs masked fine-tuning on tweets")
    say(args, "", result.summary(), "", f"report: {report.resolve()}")
    return {"command": "demo", "written": [str(report), str(results_dir)], "report": str(report),
            "summary": result.summary().splitlines(), "performance": _records(result.performance),
            "racu": _records(result.racu_summary), "seconds": round(result.metadata["wall_seconds"], 3)}


def _has_parquet() -> bool:
    import importlib.util

    return any(importlib.util.find_spec(name) is not None for name in ("pyarrow", "fastparquet"))


# --------------------------------------------------------------------------- explain


def _add_explain_parser(sub) -> None:
    from .explanation import explain

    default = _defaults(explain)
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
    parser.add_argument("--method", type=_measure_name, default=default["method"], metavar="METHOD",
                        help=_measure_help("importance measure"))
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
    parser.set_defaults(func=cmd_explain)


def cmd_explain(args) -> dict:
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


# --------------------------------------------------------------------------- faithfulness


def _add_faithfulness_parser(sub) -> None:
    from .faithfulness import faithfulness_report
    from .metrics import available_metrics

    default = _defaults(faithfulness_report)
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
    parser.add_argument("--methods", nargs="+", type=_measure_name, default=list(default["methods"]),
                        metavar="METHOD", help=_measure_help("importance measures"))
    parser.add_argument("--n-repeats", "--repeats", dest="n_repeats", type=int, default=default["n_repeats"],
                        metavar="N",
                        help="random baselines (and rand curves) drawn; the CIs are over them")
    parser.add_argument("--ratios", nargs="+", type=float, default=None, metavar="R",
                        help="masking ratios, increasing from 0 to 1 (default: 0 0.1 ... 1)")
    parser.add_argument("--metric", type=_metric_name, default=default["metric"], metavar="METRIC",
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
    parser.set_defaults(func=cmd_faithfulness)


def cmd_faithfulness(args) -> dict:
    """``fmmlearn faithfulness``: curves, summary and plot of ``faithfulness_report``."""
    from .faithfulness import check_ratios, faithfulness_report

    inputs = (args.data,)
    summary_file = args.summary or summary_path(args.output)
    check_output_path(args.output, "--output", TABLE_SUFFIXES, inputs)
    check_output_path(summary_file, "--summary", TABLE_SUFFIXES, inputs + (args.output,))
    if args.plot:
        check_output_path(args.plot, "--plot", _plot_suffixes(), inputs)
    ratios = None if args.ratios is None else check_ratios(args.ratios, "--ratios", endpoints=True)
    frame = read_table(args.data, (args.text_col, args.pair_col, args.label_col))
    X = texts_from(frame, args.text_col, args.pair_col, args.data)
    clf = load_model(args)
    y = labels_from(frame, args.label_col, args.data, clf.classes_)
    seed = clf.random_state if args.random_state is None else args.random_state
    X, y = _subsample(X, y, args.max_samples, seed)
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
            "summary": _records(report.summary)}


# --------------------------------------------------------------------------- ood


def _add_ood_parser(sub) -> None:
    from .ood import CALIBRATIONS, DEFAULT_THRESHOLDS, in_distribution_report

    default = _defaults(in_distribution_report)
    parser = add_command(
        sub, "ood", help="MaSF in-distribution test of explainer-masked test data",
        description="Are explainer-masked inputs in-distribution? MaSF p-values of the test table masked ratio "
                    "by ratio (fmmlearn.in_distribution_report), calibrated on a table masked like the training "
                    "batches (docs/ood.md).",
        examples="""
            fmmlearn ood model/ valid.csv test.csv --label-col label --method rand --output ood.csv --plot ood.png
            fmmlearn ood model/ valid.csv test.csv --thresholds 0.01 0.05 --ratios 0 0.5 1 --output ood.jsonl --json
        """)
    add_model_dir_argument(parser)
    parser.add_argument("calibration_data", metavar="calibration",
                        help="in-distribution calibration table (e.g. the validation split; same text columns, "
                             "labels not needed)")
    add_data_arguments(parser, labels="required")
    parser.add_argument("--method", type=_measure_name, default=default["method"], metavar="METHOD",
                        help=_measure_help("importance measure that ranks the tokens to mask"))
    parser.add_argument("--ratios", nargs="+", type=float, default=None, metavar="R",
                        help="masking ratios, increasing in [0, 1] (default: 0 0.1 ... 1)")
    parser.add_argument("--thresholds", nargs="+", type=float, default=list(DEFAULT_THRESHOLDS), metavar="P",
                        help="levels at which the share of examples with p < level is reported")
    parser.add_argument("--calibration", default=default["calibration"], choices=CALIBRATIONS,
                        help="MaSF mode: calibrated p-values, or the paper's reference procedure")
    parser.add_argument("--dist-repeats", type=int, default=default["dist_repeats"], metavar="N",
                        help="differently masked copies of the calibration table")
    parser.add_argument("--segment", default=default["segment"], choices=("first", "all"),
                        help="mask segment A only (the paper) or every non-special token")
    add_seed_argument(parser, "seed of the calibration masks, the folds and rand (default: the model's random_state)")
    add_inference_batch_size(parser)
    add_output_argument(parser, "report table: .csv, .tsv, .jsonl, .parquet or .html")
    parser.add_argument("--plot", default=None, metavar="FILE", help="also draw the report (.png, .pdf, .svg)")
    add_common_options(parser)
    parser.set_defaults(func=cmd_ood)


def cmd_ood(args) -> dict:
    """``fmmlearn ood``: the in-distribution report and its plot."""
    from .ood import in_distribution_report

    inputs = (args.data, args.calibration_data)
    check_output_path(args.output, "--output", TABLE_SUFFIXES, inputs)
    if args.plot:
        check_output_path(args.plot, "--plot", _plot_suffixes(), inputs)
    columns = (args.text_col, args.pair_col)
    X_calib = texts_from(read_table(args.calibration_data, columns), *columns, args.calibration_data)
    frame = read_table(args.data, columns + (args.label_col,))
    X = texts_from(frame, *columns, args.data)
    clf = load_model(args)
    y = labels_from(frame, args.label_col, args.data, clf.classes_)
    report = in_distribution_report(clf, X_calib, X, y, method=args.method, ratios=args.ratios,
                                    calibration=args.calibration, thresholds=args.thresholds, segment=args.segment,
                                    random_state=args.random_state, dist_repeats=args.dist_repeats)
    write_table(report, args.output)
    written = [args.output]
    levels = sorted(report["threshold"].unique())
    level = 0.05 if 0.05 in levels else levels[-1]
    shown = report[report["threshold"] == level]
    say(args, shown.to_string(index=False), f"wrote the report to {args.output}")
    if args.plot:
        from .plotting import plot_in_distribution

        plot_in_distribution(report, path=args.plot)
        written.append(args.plot)
        say(args, f"wrote the plot to {args.plot}")
    return {"command": "ood", "written": written, "n_calibration": len(X_calib), "n_test": len(y),
            "threshold": level, "summary": _records(shown)}


# --------------------------------------------------------------------------- info


def _add_info_parser(sub) -> None:
    parser = add_command(
        sub, "info", help="this machine, and the precision precision='auto' picks per measure family",
        description="The machine as PyTorch sees it (torch version, threads, CPU model and the instruction sets "
                    "that decide bf16 speed: AVX2, AVX512-BF16, AMX) and, for a model, the forward rates a short "
                    "fp32-vs-bf16 probe measured and the precision precision='auto' therefore uses for predictions, "
                    "gradient measures and leave-one-out / beam search (docs/explain.md, \"Precision\").",
        examples="""
            fmmlearn info
            fmmlearn info --model path/to/hf-model --threads 4 --json
        """)
    parser.add_argument("--model", default="minilm", metavar="MODEL",
                        help="model to probe: 'minilm' (bundled), a local directory or a hub name")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="torch threads for the probe (default: torch's own choice)")
    add_common_options(parser)
    parser.set_defaults(func=cmd_info)


def cmd_info(args) -> dict:
    """``fmmlearn info``: the machine, the measured forward rates and the precision per measure family."""
    import torch

    from ._version import __version__
    from .modeling import MIN_SPEEDUP, load_pretrained, precision_report, resolve_device

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be a positive integer, got {args.threads}.")
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    _, net = load_pretrained(args.model, num_labels=2, id2label={0: "0", 1: "1"}, label2id={"0": 0, "1": 1})
    report = precision_report(net.to(device).eval(), device)
    cpu, rates, families = report["cpu"], report["rates"], report["families"]
    flags = ", ".join(f"{name} {'yes' if on else 'no'}" for name, on in cpu["flags"].items())
    probe = f"fp32 {rates['fp32_tokens_per_s']:,.0f} tokens/s"
    if rates["reduced_dtype"] is None:
        probe += " (no native half precision on this device: not probed)"
    else:
        probe += (f", {rates['reduced_dtype']} {rates['reduced_tokens_per_s']:,.0f} tokens/s "
                  f"({rates['speedup']:.2f}x; 'auto' needs >= {MIN_SPEEDUP:.2f}x)")
    rows, width = rates["shape"]
    say(args,
        f"fmmlearn {__version__}, torch {report['torch']}, {cpu['torch_threads']} torch threads on {cpu['cores']} cores",
        f"CPU: {cpu['model']} ({cpu['kind']}; {flags}; torch kernels {cpu['capability']})",
        f"device: {report['device']}",
        f"forward probe of {args.model!r} ({rows} x {width} tokens, {rates['probe_seconds']:.2f} s): {probe}",
        "precision='auto' per measure family:",
        f"  predictions and masked-set scoring        {families['predict']}",
        f"  gradient measures (with precision='auto') {families['gradient']}",
        f"  leave-one-out, beam search                {families['forward']} (always: rankings from logit differences)")
    return {"command": "info", "fmmlearn": __version__, "model": str(args.model), **report}


# --------------------------------------------------------------------------- the command

#: The sub-commands, in the order of ``fmmlearn --help``; each adds its parser to ``sub``.
_COMMANDS = (_add_demo_parser, _add_fit_parser, _add_predict_parser, _add_explain_parser,
             _add_faithfulness_parser, _add_ood_parser, _add_info_parser)

_DESCRIPTION = """\
Faithfulness measurable masked language models (Madsen, Reddy & Chandar, ICML 2024) from the terminal:
fine-tune a transformer classifier with random token masking, predict, explain its decisions, and
measure how faithful the explanations are and whether masked inputs stay in-distribution."""

_EPILOG = """\
a session:
  fmmlearn fit train.csv --text-col text --label-col label --output model/
  fmmlearn predict model/ test.csv --output predictions.csv
  fmmlearn explain model/ test.csv --level word --output expl.csv --html expl.html
  fmmlearn faithfulness model/ test.csv --output curves.csv --plot curves.png
  fmmlearn ood model/ valid.csv test.csv --output ood.csv --plot ood.png

'fmmlearn COMMAND --help' lists a command's options with their defaults and examples.
Errors are one 'error: ...' line on stderr and exit status 2 (--debug shows the traceback)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one ``error: ...`` line too (sub-commands inherit it)."""

    def error(self, message):
        self.exit(2, f"error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fmmlearn`` command."""
    from ._version import __version__

    parser = ArgumentParser(prog="fmmlearn", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"fmmlearn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    for add_parser in _COMMANDS:
        add_parser(sub)
    return parser


def _is_user_error(error: BaseException) -> bool:
    """Errors a user can fix (bad files, columns, arguments), shown as one line instead of a traceback."""
    if isinstance(error, (ValueError, TypeError, OSError, KeyError)):  # pandas/pyarrow parse errors are ValueErrors
        return True
    if isinstance(error, ImportError) and "pip install" in str(error):  # a missing extra, with the command to fix it
        return True
    arrow = sys.modules.get("pyarrow")
    return arrow is not None and isinstance(error, arrow.ArrowException)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if isinstance(error, KeyError) or not text:
        return f"{type(error).__name__}: {text}"
    return text


@contextlib.contextmanager
def _terminal_warnings():
    """Show warnings as ``warning: <message> [<Category>]`` lines (no source line of the library)."""
    formatter = warnings.formatwarning
    warnings.formatwarning = lambda message, category, *_args, **_kwargs: f"warning: {message} [{category.__name__}]\n"
    try:
        yield
    finally:
        warnings.formatwarning = formatter


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fmmlearn`` command.

    Returns
    -------
    int
        0 on success, 2 for a user error (one ``error: ...`` line on stderr).
    """
    args = build_parser().parse_args(argv)
    as_json, stdout = getattr(args, "json", False), sys.stdout
    try:
        with _terminal_warnings(), contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            result = args.func(args)
    except Exception as error:
        if getattr(args, "debug", False) or not _is_user_error(error):
            raise
        print(f"error: {_one_line(error)}", file=sys.stderr)
        return 2
    if not isinstance(result, dict):  # a command that returns its exit status
        return int(result or 0)
    if as_json:
        try:
            print(json.dumps(result, default=str), file=stdout, flush=True)
        except BrokenPipeError:  # the reader left (``| head``): the Python docs' recipe, no traceback at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
            return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

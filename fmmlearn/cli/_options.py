"""The machinery every command shares: the help formatter, :func:`add_command`, the common options, the shared arguments and the values they parse.
"""

from __future__ import annotations

import argparse
import textwrap

__all__ = ["HelpFormatter", "add_command", "add_common_options", "add_data_arguments", "add_inference_batch_size", "add_model_dir_argument", "add_output_argument", "add_seed_argument", "defaults_of", "import_explainer", "load_model", "measure_help", "measure_name", "metric_name", "say"]


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


def defaults_of(func) -> dict:
    """The parameter defaults of a function or class, so the command's defaults are the library's."""
    import inspect

    return {name: p.default for name, p in inspect.signature(func).parameters.items()
            if p.default is not inspect.Parameter.empty}


def import_explainer(value: str):
    """The object ``module:attribute`` names (e.g. ``captum.attr:Occlusion``, ``my_explainers:saliency``).

    The working directory is importable, as for ``python -m``, so a module next to the data works.
    """
    import importlib
    import os
    import sys

    module_name, _, attribute = value.partition(":")
    if not module_name or not attribute:
        raise argparse.ArgumentTypeError(f"an explainer is given as module:callable, got {value!r}.")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(module_name)
    except ImportError as error:
        raise argparse.ArgumentTypeError(f"cannot import module {module_name!r} of explainer {value!r}: {error}") \
            from None
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise argparse.ArgumentTypeError(f"module {module_name!r} has no attribute {attribute!r} "
                                             f"(explainer {value!r}).")
        obj = getattr(obj, part)
    return obj


def measure_name(value: str) -> str:
    """``type=`` of method options: a known importance measure or an explainer as ``module:callable`` /
    ``module:Class`` (docs/explainers.md, registered under its name), else a parse error naming the known ones."""
    from ..importance import get_method

    try:
        return get_method(import_explainer(value) if ":" in value else value).name
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def metric_name(value: str) -> str:
    from ..metrics import get_metric

    try:
        get_metric(value)
    except (ValueError, TypeError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


def measure_help(intro: str) -> str:
    from ..importance import METHOD_NAMES

    return (f"{intro}: one of {', '.join(METHOD_NAMES)} (K = beam width, e.g. beam-sign-10), or an explainer as "
            "module:callable or module:Class (e.g. captum.attr:Occlusion; docs/explainers.md)")


def say(args, *lines) -> None:
    """Human messages: on stdout (stderr under ``--json``); none under ``--quiet``."""
    if getattr(args, "verbose", 1):
        print(*lines, sep="\n")  # main sends stdout to stderr under --json


def load_model(args):
    """The saved classifier of ``args.model_dir`` on ``--device``, with ``--batch-size`` and the verbosity."""
    from ..estimator import FaithfulTextClassifier

    clf = FaithfulTextClassifier.load(args.model_dir, device=getattr(args, "device", "auto"))
    params = {"verbose": getattr(args, "verbose", 1)}
    if getattr(args, "batch_size", None) is not None:
        params["batch_size"] = args.batch_size
    return clf.set_params(**params)

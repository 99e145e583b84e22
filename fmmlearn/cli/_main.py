"""The ``fmmlearn`` entry point: the parser of every command, user errors as one line, ``--json`` output.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from . import demo, explain, faithfulness, fit, info, ood, predict
from ._options import HelpFormatter

__all__ = ["ArgumentParser", "build_parser", "main"]


#: The sub-commands, in the order of ``fmmlearn --help``; each adds its parser to ``sub``.
_COMMANDS = (demo, fit, predict, explain, faithfulness, ood, info)


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
    from .._version import __version__

    parser = ArgumentParser(prog="fmmlearn", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"fmmlearn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    for command in _COMMANDS:
        command.add_parser(sub)
    return parser


def _is_user_error(error: BaseException) -> bool:
    """Errors a user can fix (bad files, columns, arguments), shown as one line instead of a traceback."""
    if isinstance(error, (ValueError, TypeError, OSError, KeyError)):  # pandas/pyarrow parse errors are ValueErrors
        return True
    if isinstance(error, Warning):  # a warning made an error by the user (-W error::fmmlearn.exceptions.CacheWarning)
        return True
    if isinstance(error, ImportError) and "pip install" in str(error):  # a missing extra, with the command to fix it
        return True
    arrow = sys.modules.get("pyarrow")
    return arrow is not None and isinstance(error, arrow.ArrowException)


def _interrupted(args, error: BaseException) -> str:
    """The line of a command stopped by a signal: which one, and what a rerun does."""
    from pathlib import Path

    from ..utils import signal_name

    name = signal_name(error)
    if getattr(args, "command", None) == "demo":
        cache = Path(args.output) / "cache"
        return (f"interrupted by {name}; the finished work is kept in {cache}: run the same command again to "
                "resume")
    return f"interrupted by {name}; no output was left half-written"


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if isinstance(error, Warning):  # its text says what would have come next ("recomputing it"): say it did not
        return f"{text} [{type(error).__name__}, an error by a warning filter: the run stopped here]"
    if isinstance(error, KeyError) or not text:
        return f"{type(error).__name__}: {text}"
    return text


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fmmlearn`` command.

    Returns
    -------
    int
        0 on success, 2 for a user error (one ``error: ...`` line on stderr), 130 after Ctrl-C and 143
        after SIGTERM (one ``error: interrupted by ...`` line).
    """
    from ..utils import command_line_warnings, exit_status, signals_as_interrupts

    args = build_parser().parse_args(argv)
    as_json, stdout = getattr(args, "json", False), sys.stdout
    try:
        with signals_as_interrupts(), command_line_warnings(), \
                contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            result = args.func(args)
    except KeyboardInterrupt as error:  # Ctrl-C or SIGTERM: one line, the shell's status (130, 143)
        if getattr(args, "debug", False):
            raise
        print(f"error: {_interrupted(args, error)}", file=sys.stderr)
        return exit_status(error)
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

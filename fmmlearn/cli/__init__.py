"""The ``fmmlearn`` command: fit, predict, explain and measure from the terminal.

Data files are CSV, TSV, JSON Lines, JSON or Parquet, read and written with
pandas (docs/cli.md).  Every command says what it wrote; ``--json`` prints a
machine-readable summary on stdout instead (human messages then go to
stderr).  A user error -- a bad file, a missing column, an unwritable output
-- is one ``error: ...`` line on stderr and exit status 2, found before any
model work; ``--debug`` shows the traceback.

One module per command (``demo``, ``fit``, ``predict``, ``explain``,
``faithfulness``, ``ood``, ``info``), each with ``add_parser(sub)`` and
``run(args)``; ``run`` returns a JSON-able summary dict (printed under
``--json``) or an exit status.  What every command shares: ``_options``
(:func:`~fmmlearn.cli._options.add_command`, the common options and shared
arguments), ``_io`` (reading and writing tables, output-path checks) and
``_main`` (the parser, the entry point, errors as one line).
"""

from ._io import labels_from, read_table, summary_path, texts_from, write_table
from ._main import build_parser, main
from .demo import DEMO_PRESETS

__all__ = ["DEMO_PRESETS", "build_parser", "labels_from", "main", "read_table", "summary_path", "texts_from",
           "write_table"]

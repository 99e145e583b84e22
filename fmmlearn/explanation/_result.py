"""The result of :func:`~fmmlearn.explanation.explain`: :class:`Explanation`, a long DataFrame that knows its texts.

It keeps, per example, the original texts and predictions (:attr:`Explanation.examples`), renders as a
heatmap (``_heatmap``) and round-trips exactly through its own JSON (``_data``).
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
import webbrowser
from pathlib import Path

import numpy as np
import pandas as pd

from ._data import dumps, frame_from_dict, frame_to_dict, lookup, merge_example_tables
from ._frames import AGGREGATES, aggregate_words

__all__ = ["Explanation"]


def _check_choice(value, name: str, choices: tuple) -> None:
    if not (isinstance(value, str) and value in choices):
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")


_CORE_COLUMNS = ("example", "importance")


_FORMAT = "fmmlearn.Explanation"


_FORMAT_VERSION = 1


def _explanation_or_frame(*args, **kwargs) -> pd.DataFrame:
    """pandas' constructor for results derived from an Explanation.

    A result that still has the ``example`` and ``importance`` columns is an
    :class:`Explanation`; anything else (``describe()``, a pivot table, a
    selection of other columns) is a plain DataFrame.
    """
    frame = Explanation(*args, **kwargs)
    if all(c in frame.columns for c in _CORE_COLUMNS):
        return frame
    return pd.DataFrame(frame, copy=False)


class Explanation(pd.DataFrame):
    """Token (or word) importances: a long DataFrame that also knows its texts and predictions.

    :func:`explain` and ``FaithfulTextClassifier.explain`` return it.  It *is*
    a :class:`pandas.DataFrame` with one row per (example, token) or (example,
    word) -- filtering, ``groupby``, ``merge``, ``pd.concat`` and writing to
    CSV/Parquet work as before -- and it keeps, per example, what a reader
    needs (:attr:`examples`): the original texts, the predicted label and
    its probability, the gold label, whether the model saw the whole text, and
    whether the measure is signed.  It renders as a heatmap of the original
    text in Jupyter/VS Code/Colab (:meth:`_repr_html_`, :meth:`show`) and to a
    file (:meth:`to_html`).

    Notes
    -----
    ``to_html`` and ``to_json`` are the explanation's own: the heatmap page
    and an exact round-trip format (:meth:`read_json`).  pandas' versions stay
    available on the plain frame: ``explanation.frame.to_html()``,
    ``explanation.frame.to_json(orient="records")``.

    Concatenating explanations keeps the per-example data of each part:
    ``pd.concat([e_loo, e_ig])`` (two measures, told apart by ``method``) or
    ``pd.concat([e_plain.assign(model="plain"), e_masked.assign(model="masked")])``
    (two models; a column that is constant in each part, such as ``model``,
    becomes a key of :attr:`examples`).  :func:`fmmlearn.explanation.explanation_html`
    then shows the parts side by side.

    Parameters
    ----------
    data, *args, **kwargs
        As for :class:`pandas.DataFrame`: the rows.
    examples : pandas.DataFrame, optional
        The per-example table (:attr:`examples`), with an ``example`` column.

    Examples
    --------
    >>> e = clf.explain(["a wonderful, moving film"], method="loo-sign")   # doctest: +SKIP
    >>> e                      # in a notebook: the heatmap             # doctest: +SKIP
    >>> e.to_html("loo.html")  # a self-contained page                 # doctest: +SKIP
    >>> e.words()              # word level, like explain(..., level="word")  # doctest: +SKIP
    >>> e.frame                # a plain DataFrame copy                # doctest: +SKIP
    """

    _metadata = ["_examples"]
    _examples = None

    def __init__(self, data=None, *args, examples=None, **kwargs):
        super().__init__(data, *args, **kwargs)
        if examples is None and isinstance(data, Explanation):
            examples = data._examples
        if examples is not None:
            if not isinstance(examples, pd.DataFrame) or "example" not in examples.columns:
                raise TypeError("examples must be a DataFrame with an 'example' column (see Explanation.examples), "
                                f"got {type(examples).__name__}.")
            object.__setattr__(self, "_examples", pd.DataFrame(examples).reset_index(drop=True))

    @property
    def _constructor(self):
        return _explanation_or_frame

    def __finalize__(self, other, method=None, **kwargs):
        result = super().__finalize__(other, method=method, **kwargs)
        if method == "concat":
            parts = getattr(other, "input_objs", None) or getattr(other, "objs", ())
            object.__setattr__(result, "_examples", merge_example_tables(parts))
        elif method == "merge" and isinstance(getattr(other, "left", None), Explanation):
            object.__setattr__(result, "_examples", other.left._examples)
        return result

    # ------------------------------------------------------------------ what it knows
    @property
    def examples(self) -> pd.DataFrame | None:
        """One row per explained example (``None`` when unknown, e.g. for a frame built by hand).

        Columns: ``example`` and ``method`` (keys; after ``pd.concat`` also
        the columns that told the parts apart, e.g. ``model``), ``text`` (the
        original text, segment A of a pair) and ``text_pair`` (pairs only),
        ``text_end`` / ``text_pair_end`` (where the model's input ends in
        that text: less than its length when truncated), ``n_tokens``
        (encoded length, special tokens included), ``truncated``,
        ``predicted`` and ``probability`` (predicted class and its softmax
        probability), ``gold`` (the label passed as ``y``, else ``None``) and
        ``signed`` (the measure's sign carries meaning).
        """
        return None if self._examples is None else self._examples.copy()

    @property
    def level(self) -> str:
        """``"token"`` or ``"word"``: what one row is."""
        return "token" if "token" in self.columns else "word"

    @property
    def frame(self) -> pd.DataFrame:
        """A plain :class:`pandas.DataFrame` copy of the rows (pandas' own ``to_html``/``to_json`` apply)."""
        return pd.DataFrame(self, copy=True)

    # ------------------------------------------------------------------ word level
    def words(self, aggregate: str = "sum") -> "Explanation":
        """Aggregate a token-level explanation to words, like ``explain(..., level="word")``.

        Parameters
        ----------
        aggregate : {"sum", "mean", "max"}, default="sum"
            How the subword scores of a word combine.

        Returns
        -------
        Explanation
            Word level (columns of :func:`word_frame`); stacked explanations
            (several ``method``/``model`` values) are aggregated each on its own.

        Raises
        ------
        ValueError
            When the explanation is already at word level, lacks token
            columns, or does not know its texts.
        """
        _check_choice(aggregate, "aggregate", AGGREGATES)
        missing = [c for c in ("position", "segment", "word", "char_start", "char_end") if c not in self.columns]
        if "token" not in self.columns or missing:
            raise ValueError("words() needs a token-level explanation (columns token, position, segment, word, "
                             f"char_start, char_end); this one lacks {missing or ['token']}.")
        if self._examples is None or "text" not in self._examples.columns:
            raise ValueError("words() needs the original texts, which this explanation does not know; "
                             "use explain(..., level='word') instead.")
        table = self._examples
        frame = self.frame

        def segment_texts(words):
            texts = lookup(table, words, ["text", "text_pair"])
            pair = texts["text_pair"] if "text_pair" in texts.columns else pd.Series(None, index=texts.index)
            chosen = np.where(words["segment"].to_numpy() == "B", pair.to_numpy(), texts["text"].to_numpy())
            unknown = [i for i, text in enumerate(chosen) if not isinstance(text, str)]
            if unknown:
                raise ValueError(f"words() found no original text for example {words['example'].iloc[unknown[0]]} "
                                 f"in Explanation.examples; use explain(..., level='word') instead.")
            return chosen

        return Explanation(aggregate_words(frame, segment_texts, aggregate), examples=table)

    # ------------------------------------------------------------------ display
    def to_html(self, path=None, **options) -> str:
        """The heatmap as a self-contained HTML page (not pandas' table: that is ``.frame.to_html()``).

        Parameters
        ----------
        path : str or path-like, optional
            Also write the page to this file.
        **options
            Keyword arguments of :func:`fmmlearn.explanation.explanation_html`
            (``examples``, ``max_examples``, ``facet``, ``scale``, ``signed``,
            ``title``, ``full_page``, ``vmax``).

        Returns
        -------
        str
        """
        from ._heatmap import explanation_html

        accepted = set(inspect.signature(explanation_html).parameters) - {"explanations", "path"}
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise TypeError(f"Explanation.to_html renders the heatmap and takes {sorted(accepted)}, not {unknown}; "
                            f"for pandas' table HTML use explanation.frame.to_html(...).")
        return explanation_html(self, path=path, **options)

    def _repr_html_(self) -> str | None:
        """Notebook display: the heatmap of the first examples and a one-line summary of the frame."""
        from ._heatmap import explanation_html

        n_examples = self["example"].nunique() if "example" in self.columns else 0
        note = (f"Explanation: {len(self):,} rows &times; {self.shape[1]} columns, {self.level} level, "
                f"{n_examples:,} example{'s' if n_examples != 1 else ''}. The table: <code>.frame</code>; "
                "the full page: <code>.show()</code> or <code>.to_html(path)</code>.")
        try:
            heatmap = explanation_html(self, max_examples=_REPR_EXAMPLES, full_page=False)
        except (ValueError, TypeError, KeyError) as exc:  # never fail a notebook cell: show the table
            from html import escape

            table = pd.DataFrame._repr_html_(self)
            return f'<p style="font-size:12px;color:#555">{note} (No heatmap: {escape(str(exc))})</p>{table}'
        return f'{heatmap}<p style="font-size:12px;color:#555;margin:4px 0 0 0">{note}</p>'

    def _repr_data_resource_(self):
        # pandas' table-schema display calls self.to_json(orient="table"): use the plain frame's.
        return pd.DataFrame._repr_data_resource_(self.frame)

    def show(self, **options):
        """Display the heatmap: inline in a notebook, else in a web browser via a temporary file.

        Parameters
        ----------
        **options
            Keyword arguments of :func:`fmmlearn.explanation.explanation_html`.

        Returns
        -------
        pathlib.Path or None
            The file written outside a notebook (its path is also printed).
        """
        shell = _notebook_shell()
        if shell is not None:
            from IPython.display import HTML, display

            display(HTML(self.to_html(full_page=False, **options)))
            return None
        handle, name = tempfile.mkstemp(prefix="fmmlearn-explanation-", suffix=".html")
        os.close(handle)
        path = Path(name)
        self.to_html(path, **options)
        opened = webbrowser.open(path.as_uri())
        print(f"wrote the explanation heatmap to {path}" + ("" if opened else "; open it in a web browser"))
        return path

    # ------------------------------------------------------------------ exact JSON
    def to_json(self, path=None, *, indent=None, **pandas_options) -> str:
        """Write the explanation (rows and per-example data) as JSON that :meth:`read_json` restores exactly.

        Not pandas' ``to_json``: that is ``explanation.frame.to_json(...)``.

        Parameters
        ----------
        path : str or path-like, optional
            Also write the document to this file (UTF-8).
        indent : int, optional
            Pretty-print with this indent.
        **pandas_options
            Not accepted (a :class:`TypeError` says to use ``explanation.frame.to_json``); here so that
            a call written for pandas fails clearly.

        Returns
        -------
        str
            The JSON document: ``{"format": "fmmlearn.Explanation", "version": 1,
            "frame": ..., "examples": ...}``, columns with their dtypes, floats
            written to full precision, missing values as ``null``.
        """
        if pandas_options:
            raise TypeError(f"Explanation.to_json writes its exact round-trip format and takes no pandas options "
                            f"({sorted(pandas_options)}); for pandas' JSON use explanation.frame.to_json(...).")
        document = {"format": _FORMAT, "version": _FORMAT_VERSION, "frame": frame_to_dict(self),
                    "examples": None if self._examples is None else frame_to_dict(self._examples)}
        text = dumps(document, indent=indent)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def read_json(cls, path_or_str) -> "Explanation":
        """Read what :meth:`to_json` wrote.

        Parameters
        ----------
        path_or_str : str, path-like or file-like
            A JSON document (a string starting with ``{``), a file path, or an
            open file.

        Returns
        -------
        Explanation
            Equal to the written one: rows, dtypes, index and :attr:`examples`.

        Raises
        ------
        ValueError
            When the document is not an explanation written by :meth:`to_json`.
        """
        if hasattr(path_or_str, "read"):
            text = path_or_str.read()
        elif isinstance(path_or_str, str) and path_or_str.lstrip().startswith("{"):
            text = path_or_str
        else:
            text = Path(path_or_str).read_text(encoding="utf-8")
        document = json.loads(text)
        if not isinstance(document, dict) or document.get("format") != _FORMAT:
            raise ValueError(f"path_or_str is not an explanation written by Explanation.to_json (expected "
                             f"format {_FORMAT!r}).")
        if document.get("version") != _FORMAT_VERSION:
            raise ValueError(f"unsupported explanation format version {document.get('version')!r}; this fmmlearn "
                             f"reads version {_FORMAT_VERSION}.")
        examples = document["examples"]
        return cls(frame_from_dict(document["frame"]),
                   examples=None if examples is None else frame_from_dict(examples))


_REPR_EXAMPLES = 10  # examples drawn by the notebook display (the rest: .show(max_examples=...))


def _notebook_shell():
    """The running IPython kernel shell (Jupyter, VS Code, Colab), or ``None`` in a terminal or script."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None

"""Explanations of a fitted classifier as tidy DataFrames (one row per token or word).

:func:`explain` is the user-facing function (and what
``FaithfulTextClassifier.explain`` delegates to): texts in, an
:class:`Explanation` out -- a long DataFrame that also keeps the original
texts and predictions, and renders as a heatmap.  :func:`explain_encoded` is
the reusable middle layer: an :class:`~fmmlearn.encoding.Encoding` and target
class indices in, one score array per example out.  Both use only the
classifier's public low-level API (``encode``, ``encoded_logits``,
``model_``, ``tokenizer_``, ``classes_``, ``device_``, ...).
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
import torch
from sklearn.utils._param_validation import StrOptions, validate_params

from ._explanation_data import dumps, frame_from_dict, frame_to_dict, lookup, merge_example_tables
from ._explanation_frames import aggregate_words, example_table, token_frame, word_frame
from .encoding import collate
from .importance import compute_importance, get_measure
from .masking import eligible_positions
from .modeling import autocast_dtype_for, map_batches
from .utils import (
    SEGMENTS, as_labels, label_indices, positive_int, reports_truncation_once, resolve_seed, resolve_targets,
)

__all__ = ["Explanation", "example_table", "explain", "explain_encoded", "token_frame", "word_frame"]


LEVELS = ("token", "word")


AGGREGATES = ("sum", "mean", "max")


def _check_choice(value, name: str, choices: tuple) -> None:
    if not (isinstance(value, str) and value in choices):
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")


def explain_encoded(
    clf,
    encoding,
    targets_idx,
    method="loo-sign",
    segment: str = "first",
    *,
    batch_size: int | None = None,
    random_state=None,
    precision: str | None = None,
    input_ids=None,
    internal_batch_size: int | None = None,
    **method_params,
) -> list[np.ndarray]:
    """Importance scores for an encoding, one array per example (low-level API).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    encoding : Encoding
        From ``clf.encode``.
    targets_idx : array-like of int, shape (n_samples,)
        Class index (into ``clf.classes_``) explained per example.
    method : str, Measure or explainer value (docs/explainers.md), default="loo-sign"
        See :func:`fmmlearn.importance.get_measure`.
    segment : {"first", "all"}, default="first"
        Explain segment A only (the paper) or every non-special token.
    batch_size : int, optional
        Examples per batch; default ``clf.batch_size`` for gradient measures,
        ``clf.inference_batch_size_`` for the others.
    random_state : int, optional
        Seed of ``rand``; default ``clf.random_state``.
    precision : {None, "auto", "fp32", "bf16", "fp16"}, default=None
        ``None``: fp32 for every measure.  ``"auto"``: gradient measures use
        the classifier's inference precision (bf16 only where measured
        faster); leave-one-out and beam search stay in fp32, so their rankings
        never depend on precision.  An explicit precision applies to every
        measure (see :func:`fmmlearn.modeling.autocast_dtype_for`).
    input_ids : list of ndarray, optional
        Replacement ids per example (e.g. partially masked copies).
    internal_batch_size : int, optional
        Perturbed copies / path points per forward pass; default: rows of one
        length packed across examples into passes of the probed best size
        (see :func:`fmmlearn.importance.compute_importance`).
    **method_params
        Passed to the measure (e.g. ``n_steps=20``).

    Returns
    -------
    list of ndarray of float32
        ``scores[i]`` has one entry per token of example ``i`` (special tokens
        included, with score 0), in the caller's order.
    """
    measure = get_measure(method)
    measure.bind(method_params)  # fail before any model work
    _check_choice(segment, "segment", SEGMENTS)
    targets_idx = np.asarray(targets_idx, dtype=np.int64)
    if targets_idx.shape != (len(encoding),):
        raise ValueError(f"targets_idx must have shape ({len(encoding)},), got {targets_idx.shape}.")
    if len(targets_idx) and not (0 <= targets_idx.min() and targets_idx.max() < len(clf.classes_)):
        raise ValueError(f"targets_idx must be class indices in [0, {len(clf.classes_)}), got values in "
                         f"[{targets_idx.min()}, {targets_idx.max()}].")
    if batch_size is None:
        batch_size = clf.batch_size if measure.uses_gradients else clf.inference_batch_size_
    device, dtype = clf.device_, autocast_dtype_for(clf, measure, precision)
    generator = torch.Generator(device="cpu").manual_seed(resolve_seed(random_state, clf.random_state))

    def run(idx):
        batch = collate(encoding, idx, clf.tokenizer_.pad_token_id, input_ids=input_ids).to(device)
        return compute_importance(
            clf.model_, batch, torch.as_tensor(targets_idx[idx], device=device), measure,
            mask_token_id=clf.tokenizer_.mask_token_id, eligible=eligible_positions(batch, segment),
            generator=generator, autocast_dtype=dtype, internal_batch_size=internal_batch_size, **method_params,
        )

    return map_batches(run, encoding.lengths, batch_size, ragged=True, desc=f"explain ({measure.name})",
                       verbose=getattr(clf, "verbose", 0), generator=generator)


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
    becomes a key of :attr:`examples`).  :func:`fmmlearn.html.explanation_html`
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
            Keyword arguments of :func:`fmmlearn.html.explanation_html`
            (``examples``, ``max_examples``, ``facet``, ``scale``, ``signed``,
            ``title``, ``full_page``, ``vmax``).

        Returns
        -------
        str
        """
        from .html import explanation_html

        accepted = set(inspect.signature(explanation_html).parameters) - {"explanations", "path"}
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise TypeError(f"Explanation.to_html renders the heatmap and takes {sorted(accepted)}, not {unknown}; "
                            f"for pandas' table HTML use explanation.frame.to_html(...).")
        return explanation_html(self, path=path, **options)

    def _repr_html_(self) -> str | None:
        """Notebook display: the heatmap of the first examples and a one-line summary of the frame."""
        from .html import explanation_html

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
            Keyword arguments of :func:`fmmlearn.html.explanation_html`.

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


@reports_truncation_once
@validate_params(
    {"segment": [StrOptions(set(SEGMENTS))], "level": [StrOptions(set(LEVELS))],
     "aggregate": [StrOptions(set(AGGREGATES))], "batch_size": [positive_int(), None]},
    prefer_skip_nested_validation=True,
)
def explain(
    clf,
    X,
    y=None,
    method="loo-sign",
    target=None,
    segment: str = "first",
    level: str = "token",
    aggregate: str = "sum",
    batch_size: int | None = None,
    random_state=None,
    **method_params,
) -> Explanation:
    """Explain the classifier's decisions on ``X`` with an importance measure.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs
    y : array-like, optional
        Gold labels; their class is explained (the paper's convention).
    method : str, Measure or explainer value (docs/explainers.md), default="loo-sign"
        An importance measure: ``rand``, ``grad-l2``, ``grad-l1``,
        ``inp-grad-sign``, ``inp-grad-abs``, ``int-grad-sign``,
        ``int-grad-abs``, ``loo-sign``, ``loo-abs`` or ``beam-sign-K`` (any
        beam width K, e.g. ``beam-sign-10``); see
        :func:`fmmlearn.importance.importance_measures`.
    target : label or array-like of labels, optional
        Class to explain (a value of ``clf.classes_``), for all examples or
        one per example; overrides ``y``.  Default: ``y`` if given, else the
        predicted class.  The explained quantity is the class's logit.
    segment : {"first", "all"}, default="first"
        ``"first"``: explain (and return) segment A only, the paper's choice
        for pairs; segment B is context.  ``"all"``: both segments.
    level : {"token", "word"}, default="token"
        Return subword tokens, or words with aggregated scores.
    aggregate : {"sum", "mean", "max"}, default="sum"
        Word level only: how subword scores combine.
    batch_size : int, optional
        Examples per batch (see :func:`explain_encoded`).
    random_state : int, optional
        Seed of ``rand``; default ``clf.random_state``.
    **method_params
        ``precision`` and ``internal_batch_size`` (see
        :func:`explain_encoded`) and the measure's own parameters, e.g.
        ``n_steps``, ``baseline``, ``rule`` for integrated gradients.

    Returns
    -------
    Explanation
        A :class:`pandas.DataFrame` (subclass).  Token level: one row per
        (example, token) with columns ``example`` (index into ``X``),
        ``position``, ``token``, ``token_id``, ``segment`` (``"A"``/``"B"``),
        ``word``, ``char_start``, ``char_end`` (in the original text of that
        segment), ``importance``, ``target`` (class label), ``method`` and
        ``truncated`` (the example was cut to ``max_length``).  Special tokens
        and padding are never included.  Word level: see :func:`word_frame`.
        Per example it also keeps the original text, the predicted label and
        probability and the gold label (:attr:`Explanation.examples`); it
        renders as a heatmap (:meth:`Explanation.to_html`, notebook display).

    Raises
    ------
    ValueError
        Unknown method or parameter, ``y``/``target`` of the wrong length or
        with labels not in ``clf.classes_``, empty ``X``.

    Examples
    --------
    The bundled MiniLM, fine-tuned with masking on a toy task for one epoch:

    >>> from fmmlearn import FaithfulTextClassifier
    >>> from fmmlearn.explanation import explain
    >>> X, y = ["a wonderful film", "a dreadful film", "great acting", "awful plot"] * 4, ["pos", "neg"] * 8
    >>> clf = FaithfulTextClassifier(max_epochs=1, validation_fraction=0, random_state=0).fit(X, y)
    >>> e = explain(clf, ["a wonderful film"], method="int-grad-sign")
    >>> e["token"].tolist()
    ['a', 'wonderful', 'film']
    >>> e.examples[["text", "predicted"]].shape
    (1, 2)
    >>> e.to_html("explanation.html")  # a self-contained heatmap page  # doctest: +SKIP
    """
    measure = get_measure(method)
    options = {k: method_params.pop(k) for k in ("precision", "internal_batch_size") if k in method_params}
    measure.bind(method_params)
    encoding = clf.encode(X)
    if y is None and target is None:
        # The prediction is the target: one forward pass gives both it and the probabilities.
        logits = clf.encoded_logits(encoding)
        targets_idx = logits.argmax(axis=1).astype(np.int64)
    else:
        targets_idx = resolve_targets(clf, encoding, y=y, target=target)   # validates before any model work
        logits = clf.encoded_logits(encoding)
    gold_idx = None
    if y is not None:
        gold_idx = targets_idx if target is None else label_indices(clf.classes_, as_labels(y, len(encoding), "y"),
                                                                    "y")
    scores = explain_encoded(clf, encoding, targets_idx, measure, segment, batch_size=batch_size,
                             random_state=random_state, **options, **method_params)
    frame = token_frame(clf, encoding, scores, targets_idx, measure.name, segment)
    if level == "word":
        frame = word_frame(frame, encoding, aggregate)
    # an explainer's signedness may have been inferred on the first batch just now
    measure = get_measure(measure.explainer) if measure.explainer is not None else measure
    return Explanation(frame, examples=example_table(clf, encoding, logits, gold_idx, measure))

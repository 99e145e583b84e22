"""The paper's datasets (docs/datasets.md): a registry and one loader.

:func:`load_paper_dataset` returns the paper's train / validation / test splits
of each dataset with its segment fields, label names and primary metric. Data
comes from the Hugging Face hub through the optional ``datasets`` package
(online, or its local cache), from local files in the hub's formats
(``data_files=`` / ``data_dir=``), or, for bAbI, from
:func:`~fmmlearn.datasets.make_babi` (the offline default) or Facebook's
original bAbI data (:func:`load_babi` with ``source="facebook"``).
:func:`paper_params` gives the paper's fine-tuning settings per dataset.
"""


from __future__ import annotations

from dataclasses import dataclass

from ._babi_files import BABI_HUB_PATH, babi_hub_config
from ._common import LABEL, frame_to_bunch
from ._sources import DatasetUnavailableError, _Source, clean_mimic_text
from .babi import BABI_LOCATIONS
from ..utils import keyword_only

__all__ = [
    "DatasetSpec",
    "DatasetUnavailableError",
    "PaperDataset",
    "clean_mimic_text",
    "get_dataset_spec",
    "list_paper_datasets",
    "load_babi",
    "load_paper_dataset",
    "paper_params",
    "paper_primary_metric",
]


SPLITS = ("train", "validation", "test")


#: Where bAbI comes from: fmmlearn's generator (offline) or Facebook's original en-10k data.
BABI_SOURCES = ("generated", "facebook")


@dataclass(frozen=True)
class DatasetSpec:
    """How the paper uses one dataset (one row of the table in docs/datasets.md).

    Parameters
    ----------
    name : str
        Registry key, e.g. ``"sst2"``, ``"babi-1"``, ``"mimic-a"``.
    title : str
        The paper's name, e.g. ``"SST2"``.
    field_a : str
        Column of segment A, the only segment masked by explanations.
    field_b : str or None
        Column of segment B (pair tasks), or None.
    target_names : tuple of str
        Class labels in the source's label-id order.
    primary_metric : str
        Metric for checkpoint selection and RACU (a :func:`fmmlearn.metrics.get_metric` name).
    secondary_metrics : tuple of str
        Metrics also logged.
    max_epochs : int
        The paper's number of training epochs.
    majority_baseline : float
        Primary metric of always predicting the majority training class, on test.
    sizes : tuple of int
        The paper's (train, validation, test) sizes.
    source : {"hub", "babi", "local"}
        Where the data comes from by default: the Hugging Face hub, fmmlearn's
        bAbI generator, or local files only (MIMIC).
    hub_path, hub_config : str or None
        Hugging Face dataset id and configuration.
    label_field : str
        Label column in the source.
    splits : {"train80", "original"}
        ``"train80"``: train = first 80 % of the source's train split,
        validation = the last 20 %, test = ``test_split``. ``"original"``: the
        source's train / validation / test splits.
    test_split : str
        Source split used as test by ``"train80"``.
    drop_unlabeled : bool
        Drop rows without a gold label (``-1`` or ``"-"``), as for SNLI; for
        other datasets such rows are an error.
    babi_task : int or None
        bAbI task number for the generator.
    extra_fields : tuple of str
        Per-sample source columns kept when present (bAbI: the supporting facts).
    """

    name: str
    title: str
    field_a: str
    field_b: str | None
    target_names: tuple
    primary_metric: str
    secondary_metrics: tuple
    max_epochs: int
    majority_baseline: float
    sizes: tuple
    source: str = "hub"
    hub_path: str | None = None
    hub_config: str | None = None
    label_field: str = LABEL
    splits: str = "train80"
    test_split: str = "validation"
    drop_unlabeled: bool = False
    babi_task: int | None = None
    extra_fields: tuple = ()

    @property
    def segments(self) -> tuple:
        """Field names of the segments: ``(field_a,)`` or ``(field_a, field_b)``."""
        return (self.field_a,) if self.field_b is None else (self.field_a, self.field_b)

    @property
    def metrics(self) -> tuple:
        """Primary metric followed by the secondary ones."""
        return (self.primary_metric, *self.secondary_metrics)

    def source_split(self, split: str) -> str:
        """Name of the source split that the paper's ``split`` is drawn from."""
        if self.splits == "original":
            return split
        return self.test_split if split == "test" else "train"


def _glue(name, title, a, b, labels, metric, also, epochs, majority, sizes, **kw):
    return DatasetSpec(name, title, a, b, labels, metric, also, epochs, majority, sizes,
                       hub_path="nyu-mll/glue", hub_config=name, **kw)


def _babi(task, majority):
    return DatasetSpec(f"babi-{task}", f"bAbI-{task}", "paragraph", "question", BABI_LOCATIONS, "micro_f1",
                       ("accuracy",), 20, majority, (8000, 2000, 1000), source="babi", label_field="answer",
                       test_split="test", babi_task=task,
                       extra_fields=("supporting_facts", "supporting_spans", "story", "answer_spans",
                                     "answer_supporting"))


def _mimic(letter, title, majority, sizes):
    return DatasetSpec(f"mimic-{letter}", title, "text", None, ("negative", "positive"), "macro_f1",
                       ("accuracy",), 20, majority, sizes, source="local", splits="original")


_NLI3 = ("entailment", "neutral", "contradiction")


_REGISTRY = {spec.name: spec for spec in (
    _babi(1, 0.149),
    _babi(2, 0.187),
    _babi(3, 0.185),
    DatasetSpec("boolq", "BoolQ", "passage", "question", ("False", "True"), "accuracy", (), 15, 0.622,
                (7542, 1885, 3270), hub_path="aps/super_glue", hub_config="boolq"),
    DatasetSpec("cb", "CB", "premise", "hypothesis", ("entailment", "contradiction", "neutral"), "macro_f1",
                ("accuracy",), 50, 0.222, (200, 50, 56), hub_path="aps/super_glue", hub_config="cb"),
    _glue("cola", "CoLA", "sentence", None, ("unacceptable", "acceptable"), "matthew", ("accuracy",), 15, 0.0,
          (6841, 1710, 1043)),
    DatasetSpec("imdb", "IMDB", "text", None, ("neg", "pos"), "macro_f1", ("accuracy",), 10, 0.333,
                (20000, 5000, 25000), hub_path="stanfordnlp/imdb", hub_config="plain_text", test_split="test"),
    _mimic("a", "MIMIC-a (Anemia)", 0.389, (4262, 729, 1243)),
    _mimic("d", "MIMIC-d (Diabetes)", 0.445, (8066, 1573, 1729)),
    _glue("mnli", "MNLI", "premise", "hypothesis", _NLI3, "accuracy", (), 10, 0.354, (314162, 78540, 9815),
          test_split="validation_matched"),
    _glue("mrpc", "MRPC", "sentence1", "sentence2", ("not_equivalent", "equivalent"), "macro_f1", ("accuracy",),
          20, 0.406, (2934, 734, 408)),
    _glue("qnli", "QNLI", "sentence", "question", ("entailment", "not_entailment"), "accuracy", (), 20, 0.505,
          (83794, 20949, 5463)),
    _glue("qqp", "QQP", "question1", "question2", ("not_duplicate", "duplicate"), "macro_f1", ("accuracy",), 10,
          0.387, (291077, 72769, 40430)),
    _glue("rte", "RTE", "sentence1", "sentence2", ("entailment", "not_entailment"), "accuracy", (), 30, 0.473,
          (1992, 498, 277)),
    DatasetSpec("snli", "SNLI", "premise", "hypothesis", _NLI3, "accuracy", ("macro_f1",), 10, 0.343,
                (549367, 9842, 9824), hub_path="stanfordnlp/snli", hub_config="plain_text", splits="original",
                drop_unlabeled=True),
    _glue("sst2", "SST2", "sentence", None, ("negative", "positive"), "accuracy", ("macro_f1",), 10, 0.509,
          (53879, 13470, 872)),
    _glue("wnli", "WNLI", "sentence1", "sentence2", ("not_entailment", "entailment"), "accuracy", (), 20, 0.437,
          (508, 127, 71)),
)}


_ALIASES = {"sst-2": "sst2", "mimic-anemia": "mimic-a", "mimic-diabetes": "mimic-d",
            **{f"babi{t}": f"babi-{t}" for t in (1, 2, 3)}}


def list_paper_datasets() -> list[str]:
    """Names accepted by :func:`load_paper_dataset`.

    Returns
    -------
    list of str

    Examples
    --------
    >>> list_paper_datasets()[:4]
    ['babi-1', 'babi-2', 'babi-3', 'boolq']
    """
    return sorted(_REGISTRY)


def get_dataset_spec(name: str) -> DatasetSpec:
    """Look up a dataset of the paper by name.

    Parameters
    ----------
    name : str
        A name of :func:`list_paper_datasets`; case, ``_``/``-`` and the
        paper's spellings (``"bAbI-1"``, ``"MIMIC-a"``, ``"SST-2"``) are accepted.

    Returns
    -------
    DatasetSpec

    Raises
    ------
    ValueError
        If ``name`` is unknown.

    Examples
    --------
    >>> get_dataset_spec("QNLI").segments
    ('sentence', 'question')
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str; got {type(name).__name__}.")
    key = name.strip().lower().replace("_", "-")
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        raise ValueError(f"unknown dataset name {name!r}; valid names are {list_paper_datasets()}.")
    return _REGISTRY[key]


@keyword_only
def paper_primary_metric(name, *, argname: str = "name"):
    """The primary metric of a paper dataset, or ``None`` for ``name=None``.

    The rule behind every ``metric=None`` default: a classifier fitted for a
    named dataset (``FaithfulTextClassifier(dataset=...)``) is scored with
    that dataset's primary metric, anything else with accuracy.

    Parameters
    ----------
    name : str or None
    argname : str, default="name"
        Names the argument in the error message.

    Returns
    -------
    str or None

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones).

    Examples
    --------
    >>> paper_primary_metric("cola"), paper_primary_metric("mrpc"), paper_primary_metric(None)
    ('matthew', 'macro_f1', None)
    """
    if name is None:
        return None
    try:
        return get_dataset_spec(name).primary_metric
    except (TypeError, ValueError) as error:
        raise type(error)(f"{argname}: {error}") from error


def paper_params(name) -> dict:
    """The paper's fine-tuning settings for one of its datasets, as ``FaithfulTextClassifier`` parameters.

    Learning rate 2e-5, the dataset's number of epochs, its primary metric
    for best-epoch selection, batch size 16, AdamW weight decay 0.01, 6 %
    warm-up, and masked fine-tuning (``max_masking_ratio=1.0``,
    ``masking_strategy="half-det"``, ``validation="both"``), plus
    ``dataset=<name>`` so that curves and scorers default to the primary
    metric.  The model is left to the caller: the paper used
    ``roberta-base`` and ``roberta-large`` (docs/classifier.md).

    Parameters
    ----------
    name : str
        A name of :func:`list_paper_datasets`.

    Returns
    -------
    dict

    Examples
    --------
    >>> params = paper_params("sst2")
    >>> params["max_epochs"], params["selection_metric"], params["learning_rate"]
    (10, 'accuracy', 2e-05)
    """
    spec = get_dataset_spec(name)
    return {
        "learning_rate": 2e-5,
        "max_epochs": spec.max_epochs,
        "selection_metric": spec.primary_metric,
        "batch_size": 16,
        "weight_decay": 0.01,
        "warmup_ratio": 0.06,
        "max_masking_ratio": 1.0,
        "masking_strategy": "half-det",
        "validation": "both",
        "dataset": spec.name,
    }


@dataclass(frozen=True)
class PaperDataset:
    """The three splits of one of the paper's datasets.

    Parameters
    ----------
    spec : DatasetSpec
        The registry entry.
    train, validation, test : sklearn.utils.Bunch
        The splits, as returned by ``load_paper_dataset(name, split=...)``.

    Examples
    --------
    >>> ds = load_paper_dataset("babi-1")
    >>> ds.primary_metric, len(ds["train"].data), len(ds.test.data)
    ('micro_f1', 8000, 1000)
    """

    spec: DatasetSpec
    train: object
    validation: object
    test: object

    @property
    def name(self) -> str:
        """Registry name."""
        return self.spec.name

    @property
    def primary_metric(self) -> str:
        """The paper's primary metric for this dataset."""
        return self.spec.primary_metric

    @property
    def target_names(self) -> list:
        """Class labels."""
        return list(self.spec.target_names)

    @property
    def segments(self) -> tuple:
        """Segment field names (A, or A and B)."""
        return self.spec.segments

    def __getitem__(self, split: str):
        if split not in SPLITS:
            raise KeyError(f"split must be one of {SPLITS}; got {split!r}.")
        return getattr(self, split)


@keyword_only
def load_paper_dataset(
    name,
    *, split=None,
    cache_dir=None,
    data_files=None,
    data_dir=None,
    columns=None,
    as_frame=False,
    random_state=0,
    clean_text=True,
    source=None,
    distractors=False,
    **load_kwargs,
):
    """Load one of the paper's datasets with the paper's splits.

    Splits (as in the paper): train = the first 80 % of the source's train split,
    validation = its last 20 %, test = the source's validation split (MNLI:
    ``validation_matched``; IMDB and bAbI: the test split). SNLI and MIMIC use
    their original train / validation / test splits; SNLI rows without a gold
    label are dropped.

    Parameters
    ----------
    name : str
        A name of :func:`list_paper_datasets`: ``sst2``, ``imdb``, ``mnli``,
        ``snli``, ``qnli``, ``qqp``, ``rte``, ``mrpc``, ``cola``, ``wnli``,
        ``boolq``, ``cb``, ``babi-1``, ``babi-2``, ``babi-3``, ``mimic-a``,
        ``mimic-d``.
    split : {"train", "validation", "test"}, default=None
        Return only this split (only its source files are read); None
        returns all three as a :class:`PaperDataset`.
    cache_dir : str or path, default=None
        Hugging Face datasets cache (default: ``HF_DATASETS_CACHE``).
    data_files : str, path or mapping, default=None
        Local files instead of the hub, keyed by **source** split name (as on
        the hub: ``{"train": ..., "validation": ...}``; MNLI needs
        ``"validation_matched"``, IMDB ``"test"``); a value may be a list of
        shards. A single path means ``{"train": path}``. Formats by suffix:
        ``.parquet``, ``.csv``, ``.tsv``, ``.json`` / ``.jsonl`` (JSON Lines or a
        JSON array). Columns as on the hub (see :class:`DatasetSpec`), or
        renamed with ``columns``.
    data_dir : str or path, default=None
        A local directory instead of the hub: either a ``save_to_disk``
        DatasetDict, or files named after the source splits
        (``train.csv``, ``train-00000-of-00001.parquet``,
        ``<config>/validation_matched-00000-of-00001.parquet`` as in a clone of
        the hub repository, or ``<split>/*.parquet``).
    columns : mapping, default=None
        Rename source columns to the registry's field names, e.g. for a MIMIC
        export ``{"text": "TEXT", "label": "diagnosis"}`` (registry field ->
        your column).
    as_frame : bool, default=False
        Return ``data`` as a Series / DataFrame and ``target`` as a Series.
    random_state : int, default=0
        Seed of the bAbI generator (ignored otherwise): train and validation
        come from 10,000 generated samples, test from 1,000 drawn independently.
    clean_text : bool, default=True
        MIMIC only: apply :func:`clean_mimic_text` to the texts.
    source : {"generated", "facebook"} or None, default=None
        bAbI only (see :func:`load_babi`): ``"generated"`` (the default
        without local files) uses :func:`make_babi`; ``"facebook"`` Facebook's
        original en-10k data, from the hub (``facebook/babi_qa``), its cache,
        or local files (the original ``.txt`` files or the hub's layout).
    distractors : bool, default=False
        Generated bAbI-1 only: ``make_babi(1, distractors=True)`` stories, where every answer
        location is also named by a sentence that is not a supporting fact (see :func:`make_babi`;
        adds ``answer_spans`` and ``answer_supporting``).
    **load_kwargs
        Passed on to :func:`datasets.load_dataset` (e.g. ``revision=``).

    Returns
    -------
    PaperDataset or sklearn.utils.Bunch
        A split is a Bunch with ``data`` (list of str, or of ``(a, b)`` tuples
        for pair tasks), ``target`` (NumPy array of label names),
        ``target_names``, ``feature_names`` (= ``segments``), ``frame``,
        ``DESCR``, and metadata ``name``, ``split``, ``primary_metric``,
        ``secondary_metrics``, ``segments``, ``max_epochs``.

    Raises
    ------
    ValueError
        If ``name`` or ``split`` is unknown, or the data has unexpected labels.
    DatasetUnavailableError
        If the dataset is not cached and the hub cannot be reached (offline),
        or MIMIC is asked for without local files.
    ModuleNotFoundError
        If hub or ``save_to_disk`` data is needed and ``datasets`` is not installed.

    Examples
    --------
    >>> babi = load_paper_dataset("babi-2", split="test")
    >>> babi.primary_metric, babi.segments, len(babi.data)
    ('micro_f1', ('paragraph', 'question'), 1000)
    """
    spec = get_dataset_spec(name)
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS} or None; got {split!r}.")
    if data_files is not None and data_dir is not None:
        raise ValueError("pass data_files or data_dir, not both.")
    babi_source = _check_babi_source(spec, source, local_files=data_files is not None or data_dir is not None)
    _check_distractors(spec, distractors, babi_source)
    wanted = SPLITS if split is None else (split,)
    source = _Source(spec, cache_dir, data_files, data_dir, columns, random_state, clean_text, load_kwargs,
                     babi_source, distractors=bool(distractors))
    bunches = {s: _split_bunch(spec, s, source.paper_split(s), as_frame, babi_source) for s in wanted}
    return bunches[split] if split is not None else PaperDataset(spec, **bunches)


@keyword_only
def load_babi(task=1, *, split=None, source=None, cache_dir=None, data_files=None, data_dir=None,
              as_frame=False, random_state=0, distractors=False, **load_kwargs):
    """bAbI task 1, 2 or 3 with the paper's splits: generated offline, or Facebook's original en-10k data.

    Both sources give the same examples: one per question, segment A = the
    story's statements so far joined by single spaces, segment B = the
    question, the answer among ``garden, hallway, kitchen, office, bedroom,
    bathroom`` (the paper's class order), ``supporting_facts`` (sorted
    0-based paragraph sentence indices), ``supporting_spans`` (their
    character spans) and ``story``.  Splits as in the paper: train = the
    first 80 % of the source's train split, validation = the last 20 %,
    test = its test split (8,000 / 2,000 / 1,000 examples).

    Parameters
    ----------
    task : {1, 2, 3}, default=1
    split : {"train", "validation", "test"}, default=None
        One split as a Bunch, or all three as a :class:`PaperDataset`.
    source : {"generated", "facebook"} or None, default=None
        ``None`` is ``"generated"``, or ``"facebook"`` when ``data_dir`` or
        ``data_files`` is given.  ``"generated"``: :func:`make_babi` (no
        network; 10,000 + 1,000 samples fixed by ``random_state``).  ``"facebook"``: the real bAbI
        en-10k ``qa<task>`` through ``datasets.load_dataset("facebook/babi_qa",
        "en-10k-qa<task>")``, cached by ``datasets`` after the first
        (online) call; or, with ``data_dir``/``data_files``, local copies
        (the original ``qa<task>_*_train.txt`` / ``_test.txt`` files of
        ``tasks_1-20_v1-2.tar.gz``, or Parquet/JSON files in the hub's layout
        with a ``story`` column).
    cache_dir, data_files, data_dir, as_frame, **load_kwargs
        See :func:`load_paper_dataset`.
    random_state : int, default=0
        Seed of the generator (``source="generated"`` only).
    distractors : bool, default=False
        Task 1, ``source="generated"`` only: stories where every answer location is also named by a
        sentence that is not a supporting fact, and only the question tells them apart
        (:func:`make_babi`); the splits then carry ``answer_spans`` and ``answer_supporting``.

    Returns
    -------
    PaperDataset or sklearn.utils.Bunch

    Raises
    ------
    DatasetUnavailableError
        ``source="facebook"`` offline without a cached copy; the message says
        what to do (``source="generated"``, or download once with
        ``HF_DATASETS_OFFLINE=0``, or local files).

    Examples
    --------
    >>> test = load_babi(1, split="test")                                # generated, offline
    >>> len(test.data), test.target_names[:2]
    (1000, ['garden', 'hallway'])
    >>> real = load_babi(2, source="facebook")                       # doctest: +SKIP
    >>> local = load_babi(2, data_dir="tasks_1-20_v1-2/en-10k")      # doctest: +SKIP
    """
    if isinstance(task, bool) or task not in (1, 2, 3):
        raise ValueError(f"task must be 1, 2 or 3; got {task!r}.")
    return load_paper_dataset(f"babi-{task}", split=split, source=source, cache_dir=cache_dir, data_files=data_files,
                              data_dir=data_dir, as_frame=as_frame, random_state=random_state,
                              distractors=distractors, **load_kwargs)


def _check_babi_source(spec, source, local_files):
    """The bAbI source to use (``None`` for other datasets), checked against the arguments."""
    if spec.source != "babi":
        if source is not None:
            raise ValueError(f"source={source!r} only applies to bAbI; {spec.title} has one source.")
        return None
    if source is None:
        return "facebook" if local_files else "generated"
    if source not in BABI_SOURCES:
        raise ValueError(f"source must be one of {BABI_SOURCES} (or None); got {source!r}.")
    if source == "generated" and local_files:
        raise ValueError("source='generated' ignores data_files/data_dir; pass source='facebook' (or None) "
                         "to read local bAbI files.")
    return source


def _check_distractors(spec, distractors, babi_source):
    """``distractors=True`` needs the generator's bAbI-1."""
    if not isinstance(distractors, bool):
        raise TypeError(f"distractors must be a bool; got {distractors!r}.")
    if distractors and (babi_source != "generated" or spec.babi_task != 1):
        where = spec.title if babi_source != "facebook" else f"{spec.title} from source='facebook'"
        raise ValueError(f"distractors=True applies to generated bAbI-1 only (make_babi); got {where}.")


def _split_bunch(spec, split, frame, as_frame, babi_source=None):
    return frame_to_bunch(
        frame,
        feature_names=spec.segments,
        target_names=spec.target_names,
        descr=_describe(spec, split, babi_source),
        as_frame=as_frame,
        name=spec.name,
        split=split,
        primary_metric=spec.primary_metric,
        secondary_metrics=list(spec.secondary_metrics),
        segments=spec.segments,
        max_epochs=spec.max_epochs,
    )


def _describe(spec, split, babi_source=None):
    origin = {
        "hub": f"Hugging Face dataset {spec.hub_path!r}, configuration {spec.hub_config!r} (or local copies)",
        "babi": "generated by fmmlearn.datasets.make_babi (bAbI-style)",
        "local": "MIMIC-III (PhysioNet Credentialed Health Data License 1.5.0), local files",
    }[spec.source]
    if babi_source == "facebook":
        origin = (f"Facebook's bAbI en-10k qa{spec.babi_task} (Weston et al., 2015; CC BY 3.0), Hugging Face "
                  f"dataset {BABI_HUB_PATH!r}, configuration {babi_hub_config(spec.babi_task)!r} (or local copies)")
    if spec.splits == "train80":
        rule = f"train = first 80% of the source train split, validation = last 20%, test = '{spec.test_split}'"
    else:
        rule = "the source's own train/validation/test splits"
        rule += ", rows without a gold label dropped" if spec.drop_unlabeled else ""
    segments = f"segment A (masked) = {spec.field_a!r}" + (f", segment B = {spec.field_b!r}" if spec.field_b else "")
    return (
        f"{spec.title}, {split} split (paper size {spec.sizes[SPLITS.index(split)]})\n\n"
        f"Source: {origin}.\nSplits: {rule}.\nInput: {segments}.\n"
        f"Labels: {', '.join(spec.target_names)}.\n"
        f"Primary metric: {spec.primary_metric} (also {', '.join(spec.secondary_metrics) or 'none'}); "
        f"max epochs {spec.max_epochs}; majority-class baseline {spec.majority_baseline}.\n"
        "See docs/datasets.md (Madsen et al., ICML 2024)."
    )

"""Where the rows of a paper dataset come from: the Hugging Face hub (or its cache), local files in the hub's
formats, bAbI's generator or Facebook's files; read once per source split and cut into the paper's splits.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from ._babi_files import BABI_HUB_PATH, babi_hub_config, examples_from_stories, find_babi_files, read_babi_text
from ._common import LABEL
from .babi import make_babi

__all__ = ["DatasetUnavailableError", "clean_mimic_text"]  # re-exported by .paper; _Source is paper's reader


class DatasetUnavailableError(OSError):
    """A dataset can be neither loaded from the hub or its cache nor from local files."""


def clean_mimic_text(text: str) -> str:
    """Normalise a MIMIC-III discharge summary as the paper does (docs/datasets.md).

    Lower-case; de-identification brackets ``[** ... **]`` become ``<DE>``; a
    run of one repeated non-alphanumeric character becomes one; any
    whitespace-delimited chunk containing a digit becomes ``[DIGITS]``;
    whitespace is collapsed to single spaces.

    Parameters
    ----------
    text : str

    Returns
    -------
    str

    Examples
    --------
    >>> clean_mimic_text("Seen by [**Dr. Smith**] on 3/4 -- BP 120/80!!")
    'seen by <DE> on [DIGITS] - bp [DIGITS]'
    """
    text = text.lower()
    text = re.sub(r"\[\*\*.*?\*\*\]", " <DE> ", text)
    text = re.sub(r"([^a-z0-9\s])\1+", r"\1", text)
    text = re.sub(r"\S*\d\S*", " [DIGITS] ", text)
    return " ".join(text.split())


class _Source:
    """Reads source splits once each (hub, local files or generator) and cuts the paper's splits."""

    def __init__(self, spec, cache_dir, data_files, data_dir, columns, random_state, clean_text, load_kwargs,
                 babi_source=None, distractors=False):
        self.spec, self.cache_dir, self.load_kwargs, self.babi_source = spec, cache_dir, load_kwargs, babi_source
        self.distractors = distractors
        self.data_files = _normalise_data_files(data_files)
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.columns, self.random_state, self.clean_text = dict(columns or {}), random_state, clean_text
        self._frames = {}

    def paper_split(self, split: str) -> pd.DataFrame:
        frame = self.frame(self.spec.source_split(split))
        if self.spec.splits == "original" or split == "test":
            return frame
        cut = (8 * len(frame) + 5) // 10  # round(0.8 n) without float error, like TFDS percent slicing
        return frame.iloc[:cut] if split == "train" else frame.iloc[cut:]

    def frame(self, source_split: str) -> pd.DataFrame:
        if source_split not in self._frames:
            raw, label_names = self._read(source_split)
            self._frames[source_split] = self._standardise(raw, label_names, source_split)
        return self._frames[source_split]

    def _read(self, source_split):
        spec = self.spec
        if self.data_files is not None:
            return _read_files(self.data_files, source_split, "data_files"), None
        if self.data_dir is not None and self.babi_source == "facebook":
            return _read_babi_dir(self.data_dir, spec.babi_task, source_split, spec.label_field)
        if self.data_dir is not None:
            return _read_dir(self.data_dir, spec.hub_config, source_split, spec.label_field)
        if self.babi_source == "facebook":
            return _load_hub(spec, source_split, self.cache_dir, self.load_kwargs, hub_path=BABI_HUB_PATH,
                             hub_config=babi_hub_config(spec.babi_task), remedy=_BABI_REMEDY)
        if spec.source == "babi":
            return _generate_babi(spec.babi_task, source_split, self.random_state, self.distractors), None
        if spec.source == "local":
            raise DatasetUnavailableError(
                f"{spec.title} is not public: MIMIC-III needs credentialed PhysioNet access "
                "(https://doi.org/10.13026/C2XW26). Export train/validation/test CSV files with columns "
                "'text' and 'label' (see docs/datasets.md) and pass "
                f"load_paper_dataset({spec.name!r}, data_files={{'train': ..., 'validation': ..., 'test': ...}}) "
                "or data_dir=."
            )
        return _load_hub(spec, source_split, self.cache_dir, self.load_kwargs)

    def _standardise(self, raw, label_names, source_split):
        spec = self.spec
        if spec.source == "babi" and "story" in raw.columns and spec.field_a not in raw.columns:
            # Facebook's layout (one row per story): one example per question, as the generator makes them
            raw = examples_from_stories(raw["story"], f"{spec.title} split {source_split!r}")
        renames = {self.columns.get(f, f): f for f in (*spec.segments, spec.label_field) if f in self.columns}
        raw = raw.rename(columns=renames)
        fields = [*spec.segments, spec.label_field]
        missing = [f for f in fields if f not in raw.columns]
        if missing:
            raise ValueError(
                f"{spec.title} split {source_split!r} lacks column(s) {missing}; found {list(raw.columns)}. "
                "Rename them with columns={field: your_column}."
            )
        labels, keep = _label_names(raw[spec.label_field], label_names or spec.target_names, spec, source_split)
        kept = [*spec.segments, *(f for f in spec.extra_fields if f in raw.columns)]
        frame = raw.loc[keep, kept].reset_index(drop=True)
        for field in spec.segments:
            _check_texts(frame[field], f"{spec.title} {source_split!r} column {field!r}")
        if spec.source == "local" and self.clean_text:
            frame[spec.field_a] = frame[spec.field_a].map(clean_mimic_text)
        frame[LABEL] = labels
        return frame


def _generate_babi(task, source_split, random_state, distractors=False):
    # independent streams for the two source splits, fixed by random_state
    train_seed, test_seed = np.random.SeedSequence(random_state).spawn(2)
    sizes = {"train": (10000, train_seed), "test": (1000, test_seed)}
    if source_split not in sizes:
        raise ValueError(f"bAbI has no source split {source_split!r}.")
    n, seed = sizes[source_split]
    babi = make_babi(task, n_samples=n, distractors=distractors, random_state=np.random.default_rng(seed))
    return babi.frame.rename(columns={LABEL: "answer"})


def _label_names(values, names, spec, source_split):
    """Map a label column (ids, bools or names) to names; return (names, rows kept)."""
    where = f"{spec.title} split {source_split!r}"
    values = pd.Series(values).reset_index(drop=True)
    if pd.api.types.is_bool_dtype(values):
        values = values.astype(int)
    if pd.api.types.is_numeric_dtype(values):
        unlabeled = values < 0
        ids = values[~unlabeled]
        bad = ids[(ids >= len(names)) | (ids != ids.round())]
        if len(bad):
            raise ValueError(f"{where}: label ids must be in 0..{len(names) - 1}; got {bad.iloc[0]!r}.")
        mapped = ids.astype(int).map(dict(enumerate(names)))
    else:
        values = values.astype(str)
        unlabeled = values.isin(["-", "-1", ""])
        mapped = values[~unlabeled]
    unknown = sorted(set(mapped) - set(spec.target_names))
    if unknown:
        raise ValueError(f"{where}: unknown labels {unknown[:5]}; expected {list(spec.target_names)}.")
    if unlabeled.any() and not spec.drop_unlabeled:
        raise ValueError(f"{where}: {int(unlabeled.sum())} rows have no gold label (-1); expected labelled data.")
    return mapped.to_numpy(dtype=str), (~unlabeled).to_numpy()


def _check_texts(column, where):
    not_str = ~column.map(lambda v: isinstance(v, str))
    if not_str.any():
        row = int(np.flatnonzero(not_str.to_numpy())[0])
        raise ValueError(f"{where}: row {row} is {column.iloc[row]!r}; expected a string.")


def _read_json(path):
    try:  # JSON Lines, the hub's usual layout
        return pd.read_json(path, lines=True, dtype=False)
    except ValueError:
        return pd.read_json(path, dtype=False)


_READERS = {
    ".parquet": pd.read_parquet,
    ".csv": partial(pd.read_csv, keep_default_na=False),
    ".tsv": partial(pd.read_csv, sep="\t", keep_default_na=False),
    ".json": _read_json,
    ".jsonl": _read_json,
    ".txt": read_babi_text,   # Facebook's original bAbI files
}


def _normalise_data_files(data_files):
    if data_files is None:
        return None
    if isinstance(data_files, (str, os.PathLike)):
        return {"train": [Path(data_files)]}
    if not isinstance(data_files, Mapping):
        raise TypeError(f"data_files must be a path or a mapping split -> path(s); got {type(data_files).__name__}.")
    return {
        split: [Path(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
        for split, paths in data_files.items()
    }


def _read_files(files_by_split, source_split, argname):
    if source_split not in files_by_split:
        raise ValueError(
            f"{argname} has no files for source split {source_split!r}; got splits {sorted(files_by_split)}."
        )
    frames = []
    for path in files_by_split[source_split]:
        reader = _READERS.get(path.suffix.lower())
        if reader is None:
            raise ValueError(f"{argname}: cannot read {path}; expected one of {sorted(_READERS)}.")
        if not path.exists():
            raise FileNotFoundError(f"{argname}: {path} does not exist.")
        frames.append(reader(path))
    return pd.concat(frames, ignore_index=True)


def _matches_split(path: Path, root: Path, split: str) -> bool:
    stem = path.name.split(".")[0]
    parents = path.relative_to(root).parts[:-1]
    return stem == split or stem.startswith(f"{split}-") or stem.endswith(f"-{split}") or split in parents


def _read_dir(data_dir, config, source_split, label_field):
    if not data_dir.is_dir():
        raise FileNotFoundError(f"data_dir {data_dir} is not a directory.")
    if (data_dir / "dataset_dict.json").exists():  # datasets.DatasetDict.save_to_disk
        return _load_from_disk(data_dir, source_split, label_field)
    root = data_dir / config if config and (data_dir / config).is_dir() else data_dir
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in _READERS and _matches_split(p, root, source_split))
    if not files:
        raise FileNotFoundError(
            f"data_dir {root} has no {'/'.join(sorted(_READERS))} file for source split {source_split!r} "
            f"(looked for {source_split}.*, {source_split}-*.*, *-{source_split}.* and {source_split}/*)."
        )
    return _read_files({source_split: files}, source_split, "data_dir"), None


def _read_babi_dir(data_dir, task, source_split, label_field):
    """Facebook's bAbI under ``data_dir``: the original ``qa<task>_*_<split>.txt`` files, else the hub's layout."""
    if not data_dir.is_dir():
        raise FileNotFoundError(f"data_dir {data_dir} is not a directory.")
    files = find_babi_files(data_dir, task, source_split)
    if files:
        return _read_files({source_split: files}, source_split, "data_dir"), None
    return _read_dir(data_dir, babi_hub_config(task), source_split, label_field)


def _load_from_disk(data_dir, source_split, label_field):
    datasets = _import_datasets()
    dataset_dict = datasets.load_from_disk(str(data_dir))
    if source_split not in dataset_dict:
        raise ValueError(f"data_dir {data_dir} has no split {source_split!r}; found {list(dataset_dict)}.")
    return _to_frame(dataset_dict[source_split], label_field)


def _import_datasets():
    try:
        import datasets
    except ImportError as exc:
        raise ModuleNotFoundError(
            "loading the paper's datasets from the Hugging Face hub needs the 'datasets' package: "
            "`pip install datasets` (or `pip install fmmlearn[hub]`); or pass local files with data_files=."
        ) from exc
    return datasets


def _to_frame(dataset, label_field):
    """A datasets.Dataset as a DataFrame, with its label names when the label is a ClassLabel."""
    feature = dataset.features.get(label_field)
    names = tuple(feature.names) if hasattr(feature, "names") and hasattr(feature, "str2int") else None
    return dataset.to_pandas(), names


def _is_offline() -> bool:
    flags = (os.environ.get(v, "").upper() for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    return any(flag in {"1", "ON", "YES", "TRUE"} for flag in flags)


#: What to do when Facebook's bAbI cannot be loaded.
_BABI_REMEDY = (
    "Use the offline generator (load_babi(task, source='generated'), the default), or download it once online "
    "with HF_DATASETS_OFFLINE=0 and HF_HUB_OFFLINE=0 (load_babi(task, source='facebook') caches it; later calls "
    "work offline), or pass data_dir= pointing at the extracted tasks_1-20_v1-2/en-10k directory of "
    "Facebook's archive (https://research.facebook.com/downloads/babi/)."
)


def _load_hub(spec, source_split, cache_dir, load_kwargs, *, hub_path=None, hub_config=None, remedy=None):
    datasets = _import_datasets()
    hub_path, hub_config = hub_path or spec.hub_path, hub_config or spec.hub_config
    kwargs = {"cache_dir": None if cache_dir is None else str(cache_dir), **load_kwargs}
    try:
        try:
            dataset = datasets.load_dataset(hub_path, hub_config, split=source_split, **kwargs)
        except RuntimeError as exc:
            # datasets >= 4 refuses loading scripts; every hub dataset also has a Parquet export
            if "scripts are no longer supported" not in str(exc) or "revision" in kwargs:
                raise
            dataset = datasets.load_dataset(hub_path, hub_config, split=source_split,
                                            revision="refs/convert/parquet", **kwargs)
    except Exception as exc:
        if not (_is_offline() or isinstance(exc, ConnectionError)):
            raise
        where = f" at {cache_dir}" if cache_dir is not None else " (HF_DATASETS_CACHE)"
        remedy = remedy or (
            f"Run load_paper_dataset({spec.name!r}) once online to cache it, set HF_DATASETS_CACHE (or "
            "cache_dir=) to a cache that holds it, or pass local files with data_files= or data_dir=.")
        raise DatasetUnavailableError(
            f"{spec.title} ({hub_path!r}, configuration {hub_config!r}, split {source_split!r}) is "
            f"not in the Hugging Face datasets cache{where} and the hub cannot be reached "
            f"({type(exc).__name__}: {exc}). {remedy}"
        ) from exc
    return _to_frame(dataset, spec.label_field)

"""Stage payloads as files that cannot run code: JSON for structure, ``.npy`` for arrays, checksums for all.

A payload is a tree of dicts (string keys), lists, tuples, numbers, strings, ``None``, numpy arrays,
pandas DataFrames (also :class:`~fmmlearn.explanation.Explanation`) and fitted
in-distribution tests (:class:`~fmmlearn.ood.MaSF`, :class:`~fmmlearn.ood.MahalanobisDetector`,
:class:`~fmmlearn.ood.KNNDetector`).  :func:`write_payload` turns it into a directory: one
``payload.json`` describing the tree and one ``.npy`` file per array (written and read with
``allow_pickle=False``, so an object array -- which only pickle can hold -- is refused both ways).
A DataFrame is stored column by column: numeric and boolean columns as arrays, the others as JSON
lists.  An estimator is rebuilt only for classes on an allow-list, from its JSON parameters and array
attributes.  :func:`read_payload` checks every file's SHA-256 against the manifest before it parses
anything, so a truncated or altered entry is detected, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["CorruptEntry", "file_digest", "read_payload", "write_payload"]

_PAYLOAD = "payload.json"


class CorruptEntry(ValueError):
    """A stored payload that fails its checks (missing or altered file, unknown content)."""


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _allowed_estimators() -> dict:
    from ..ood import KNNDetector, MahalanobisDetector, MaSF

    return {"MaSF": MaSF, "MahalanobisDetector": MahalanobisDetector, "KNNDetector": KNNDetector}


class _Writer:
    def __init__(self, directory: Path):
        self.directory, self.files = directory, {}

    def array(self, value: np.ndarray) -> str:
        if value.dtype.hasobject:
            raise TypeError("an object array cannot be stored without pickle; convert it to a list or a typed array.")
        name = f"a{len(self.files)}.npy"
        np.save(self.directory / name, value, allow_pickle=False)
        self.files[name] = file_digest(self.directory / name)
        return name

    def encode(self, value):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
            return int(value)
        if isinstance(value, (float, np.floating)):
            return _float(float(value))
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.ndarray):
            return {"__ndarray__": self.array(value)}
        if isinstance(value, np.dtype):  # an estimator's dtype_
            return {"__dtype__": value.str}
        if isinstance(value, pd.DataFrame):
            return self.frame(value)
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise TypeError(f"payload dicts need string keys, got {sorted(map(repr, value))[:3]}.")
            return {"__dict__": {k: self.encode(v) for k, v in value.items()}}
        if isinstance(value, tuple):
            return {"__tuple__": [self.encode(v) for v in value]}
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        allowed = _allowed_estimators().get(type(value).__name__)
        if allowed is not None and isinstance(value, allowed):
            return self.estimator(value)
        raise TypeError(f"a stage payload cannot hold a {type(value).__name__}; use arrays, frames, numbers, "
                        "strings, lists and dicts (see fmmlearn.study._codec).")

    def frame(self, frame: pd.DataFrame) -> dict:
        from ..explanation import Explanation

        if isinstance(frame, Explanation):  # its own exact JSON keeps the texts and predictions
            name = f"e{len(self.files)}.json"
            (self.directory / name).write_text(frame.to_json(), encoding="utf-8")
            self.files[name] = file_digest(self.directory / name)
            return {"__explanation__": name}
        frame = pd.DataFrame(frame)
        if not isinstance(frame.index, pd.RangeIndex) or frame.index.start != 0 or frame.index.step != 1:
            raise TypeError("a stored frame needs a default RangeIndex; reset_index() it first.")
        columns = []
        for name in frame.columns:
            columns.append({"name": self.encode(name), **self.column(frame[name])})
        return {"__frame__": columns, "rows": len(frame)}

    def column(self, values: pd.Series) -> dict:
        dtype = values.dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "biufc":
            return {"dtype": str(dtype), "values": self.array(values.to_numpy())}
        if str(dtype) in ("boolean", "Int64", "Int32", "Int16", "Int8", "Float64", "Float32"):
            mask = values.isna().to_numpy()
            filled = values.to_numpy(dtype=dtype.numpy_dtype, na_value=0)
            return {"dtype": str(dtype), "values": self.array(filled), "mask": self.array(mask)}
        items = [{"__na__": True} if v is pd.NA else self.encode(v.item() if hasattr(v, "item") else v)
                 for v in values.tolist()]
        return {"dtype": str(dtype), "items": items}

    def estimator(self, estimator) -> dict:
        attributes = {k: self.encode(v) for k, v in vars(estimator).items()
                      if k.endswith("_") and not k.startswith("_")}
        params = {k: self.encode(v) for k, v in estimator.get_params(deep=False).items()}
        return {"__estimator__": type(estimator).__name__, "params": params, "attributes": attributes}


def _float(value: float):
    return value if math.isfinite(value) else {"__float__": repr(value)}


class _Reader:
    def __init__(self, directory: Path, files: dict):
        self.directory, self.files = directory, files

    def path(self, name: str) -> Path:
        if name not in self.files:
            raise CorruptEntry(f"the payload names {name!r}, which its manifest does not list.")
        return self.directory / name

    def decode(self, value):
        if isinstance(value, list):
            return [self.decode(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "__ndarray__" in value:
            return np.load(self.path(value["__ndarray__"]), allow_pickle=False)
        if "__float__" in value:
            return float(value["__float__"])
        if "__na__" in value:
            return pd.NA
        if "__tuple__" in value:
            return tuple(self.decode(v) for v in value["__tuple__"])
        if "__dict__" in value:
            return {k: self.decode(v) for k, v in value["__dict__"].items()}
        if "__dtype__" in value:
            return np.dtype(value["__dtype__"])
        if "__frame__" in value:
            return self.frame(value)
        if "__explanation__" in value:
            from ..explanation import Explanation

            return Explanation.read_json(self.path(value["__explanation__"]).read_text(encoding="utf-8"))
        if "__estimator__" in value:
            return self.estimator(value)
        raise CorruptEntry(f"unknown payload node with keys {sorted(value)}.")

    def frame(self, node: dict) -> pd.DataFrame:
        data = {}
        for column in node["__frame__"]:
            name, dtype = self.decode(column["name"]), column["dtype"]
            if "items" in column:
                values = pd.Series([self.decode(v) for v in column["items"]], dtype=object)
                values = values if dtype == "object" else values.astype(dtype)
            else:
                array = np.load(self.path(column["values"]), allow_pickle=False)
                values = pd.Series(array)
                if "mask" in column:
                    values = pd.Series(pd.array(array, dtype=dtype))
                    values[np.load(self.path(column["mask"]), allow_pickle=False)] = pd.NA
            data[name] = values
        frame = pd.DataFrame(data, index=pd.RangeIndex(node["rows"]))
        if any(len(v) != node["rows"] for v in data.values()):
            raise CorruptEntry("a stored frame's columns do not have its row count.")
        return frame

    def estimator(self, node: dict):
        allowed = _allowed_estimators()
        if node["__estimator__"] not in allowed:
            raise CorruptEntry(f"estimator {node['__estimator__']!r} is not one a cache entry may hold.")
        estimator = allowed[node["__estimator__"]](**{k: self.decode(v) for k, v in node["params"].items()})
        for name, value in node["attributes"].items():
            setattr(estimator, name, self.decode(value))
        return estimator


def write_payload(payload: dict, directory: Path) -> dict:
    """Write ``payload`` into the (new, empty) ``directory``; returns ``{file name: sha256}`` of what it wrote.

    Raises
    ------
    TypeError
        For content that only pickle could store (the stage author learns it at the first write).
    """
    directory = Path(directory)
    writer = _Writer(directory)
    tree = writer.encode(payload)
    (directory / _PAYLOAD).write_text(json.dumps(tree, allow_nan=False), encoding="utf-8")
    return {**writer.files, _PAYLOAD: file_digest(directory / _PAYLOAD)}


def read_payload(directory: Path, files: dict):
    """The payload in ``directory``, after every file in ``files`` (name -> sha256) matched its checksum.

    Raises
    ------
    CorruptEntry
        A file missing, of another checksum, or content the codec does not know.
    """
    directory = Path(directory)
    for name, expected in files.items():
        path = directory / name
        if not path.is_file():
            raise CorruptEntry(f"{name} is missing.")
        if file_digest(path) != expected:
            raise CorruptEntry(f"the checksum of {name} does not match (the file was truncated or altered).")
    reader = _Reader(directory, files)
    try:
        tree = json.loads((directory / _PAYLOAD).read_text(encoding="utf-8"))
        return reader.decode(tree)
    except (ValueError, KeyError, TypeError, OSError) as exc:
        if isinstance(exc, CorruptEntry):
            raise
        raise CorruptEntry(f"the payload cannot be read ({type(exc).__name__}: {exc}).") from exc

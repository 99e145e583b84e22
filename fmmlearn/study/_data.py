"""The study's data: a dataset name or texts and labels, split into train / validation / test.

The validation split selects the best epoch of every fine-tuning run *and* is
the MaSF calibration set (the paper uses the same split for both); the test
split is what every curve is measured on.  Splits are stratified and seeded by
the study's ``random_state``, never by the fine-tuning seeds, so all models of
a study see the same examples.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from ..utils import offset_seed

__all__ = ["BUNDLED_DATASETS", "Splits", "check_dataset_name", "dataset_names", "load_splits", "other_domain_texts",
           "split_texts"]

#: Short names of the offline corpora (``fmmlearn.datasets`` loaders).
BUNDLED_DATASETS = {"tweets": "load_tweet_sentiment", "bbc-news": "load_bbc_news"}
#: Default shares when sizes are not given: test of everything, validation of the rest.
_TEST_SHARE, _VALID_SHARE = 0.25, 0.2


@dataclass(frozen=True)
class Splits:
    """Train, validation (model selection and MaSF calibration) and test examples of a study."""

    X_train: list
    y_train: np.ndarray
    X_valid: list
    y_valid: np.ndarray
    X_test: list
    y_test: np.ndarray
    name: str
    primary_metric: str | None = None
    #: Per-example fields of the test split beyond texts and labels (bAbI: ``supporting_spans``,
    #: ``answer_spans``, ...), each a list aligned with ``X_test``; None when the data has none.
    test_info: dict | None = None

    def sizes(self) -> dict:
        """Number of examples per split."""
        return {"train": len(self.y_train), "valid": len(self.y_valid), "test": len(self.y_test)}


def dataset_names() -> list[str]:
    """Names the study accepts instead of texts: the bundled corpora and the paper's datasets.

    Returns
    -------
    list of str
        The bundled corpora (sorted), then the paper's datasets.
    """
    from ..datasets import list_paper_datasets

    return sorted(BUNDLED_DATASETS) + list_paper_datasets()


def check_dataset_name(name: str) -> str:
    """``name`` if the study knows it, else a ValueError listing the known names."""
    names = dataset_names()
    if name not in names:
        raise ValueError(f"dataset {name!r} is unknown; expected one of {names} (or pass texts and labels).")
    return name


def _as_list(X) -> list:
    """Texts as a list of str, or of ``(a, b)`` tuples for sentence pairs."""
    if isinstance(X, pd.DataFrame):
        return list(X.itertuples(index=False, name=None))
    if isinstance(X, pd.Series):
        return X.tolist()
    return [tuple(x) if isinstance(x, (list, tuple)) else x for x in X]


def _stratified_indices(y: np.ndarray, size, name: str, seed: int):
    """Sorted row indices ``(rest, part)`` of a stratified split; ``size`` is a count or a share."""
    try:
        idx_rest, idx_part = train_test_split(np.arange(len(y)), test_size=size, stratify=y, random_state=seed)
    except ValueError as exc:
        raise ValueError(f"cannot split {len(y)} examples into a stratified {name} part of size {size!r}: "
                         f"{exc}") from exc
    return np.sort(idx_rest), np.sort(idx_part)


def _stratified(X: list, y: np.ndarray, size, name: str, seed: int):
    """``(rest, part)`` of a stratified split; ``size`` is a count or a share of ``X``."""
    take = lambda idx: ([X[i] for i in idx], y[idx])  # noqa: E731
    return tuple(take(idx) for idx in _stratified_indices(y, size, name, seed))


def _subsample_indices(y: np.ndarray, n, name: str, seed: int) -> np.ndarray:
    if n is None or n == len(y):
        return np.arange(len(y))
    if n > len(y):
        raise ValueError(f"{name}={n} is more than the {len(y)} examples available.")
    return _stratified_indices(y, n, name, seed)[1]


def _subsample(X: list, y: np.ndarray, n, name: str, seed: int):
    idx = _subsample_indices(y, n, name, seed)
    return (X, y) if len(idx) == len(y) else ([X[i] for i in idx], y[idx])


def split_texts(X, y, *, n_train=None, n_valid=None, n_test=None, random_state=0, name="data") -> Splits:
    """Stratified train / validation / test splits of texts and labels.

    Sizes are counts; ``None`` means: test 25 % of the data, validation 20 %
    of the rest, train what is left (or exactly ``n_train`` examples of it).
    """
    X, y = _as_list(X), np.asarray(y)
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} texts but y has {len(y)} labels; they must match.")
    seed = int(random_state)
    rest, test = _stratified(X, y, n_test if n_test is not None else _TEST_SHARE, "n_test", seed)
    rest, valid = _stratified(*rest, n_valid if n_valid is not None else _VALID_SHARE, "n_valid", offset_seed(seed, 1))
    train = _subsample(*rest, n_train, "n_train", offset_seed(seed, 2))
    return Splits(*train, *valid, *test, name=name)


def _bundled_splits(name, n_train, n_valid, n_test, seed) -> Splits:
    """A bundled corpus without its repeated texts (no test text is also a training text), then split."""
    from .. import datasets

    bunch = getattr(datasets, BUNDLED_DATASETS[name])(random_state=seed)
    frame = pd.DataFrame({"text": bunch.data, "label": bunch.target}).drop_duplicates("text")
    X, y = frame["text"].tolist(), frame["label"].to_numpy()
    sizes = (n_train, n_valid, n_test)
    if all(s is not None for s in sizes):  # draw just that many (stratified) before splitting: the corpora are large
        X, y = _subsample(X, y, sum(sizes), "n_train + n_valid + n_test", seed)
    return split_texts(X, y, n_train=n_train, n_valid=n_valid, n_test=n_test, random_state=seed, name=name)


def other_domain_texts(value, n: int, seed: int) -> tuple:
    """The texts of the other-domain control: ``n`` of a bundled corpus (stratified), or the texts given.

    Parameters
    ----------
    value : None, str or sequence of str
        ``None``: no control; a name of :data:`BUNDLED_DATASETS`; or the texts themselves.
    n : int
        Texts drawn from a bundled corpus (its size at most).
    seed : int

    Returns
    -------
    tuple of str
    """
    from .. import datasets
    from ._options import option_error

    if value is None:
        return ()
    if isinstance(value, str):
        if value not in BUNDLED_DATASETS:
            raise option_error("other_domain", f"expected one of {sorted(BUNDLED_DATASETS)} or a list of texts, "
                                               f"got {value!r}.")
        bunch = getattr(datasets, BUNDLED_DATASETS[value])(random_state=seed)
        X, y = _subsample(list(bunch.data), np.asarray(bunch.target), min(n, len(bunch.target)), "other_domain", seed)
        return tuple(X)
    texts = tuple(_as_list(value))
    if not texts or not all((isinstance(t, str) and t.strip()) or (isinstance(t, tuple) and len(t) == 2)
                            for t in texts):
        raise option_error("other_domain", "expected a non-empty list of non-empty texts (or of sentence pairs).")
    return texts


def _paper_splits(name, n_train, n_valid, n_test, seed) -> Splits:
    """The paper's splits of the dataset ``name``, or of an already loaded :class:`~fmmlearn.datasets.PaperDataset`."""
    from ..datasets import load_paper_dataset

    data = load_paper_dataset(name, random_state=seed) if isinstance(name, str) else name
    parts = []
    for split, n, arg in ((data.train, n_train, "n_train"), (data.validation, n_valid, "n_valid"),
                          (data.test, n_test, "n_test")):
        X, y = _as_list(split.data), np.asarray(split.target)
        idx = _subsample_indices(y, n, arg, seed)
        parts += [[X[i] for i in idx], y[idx]]
    return Splits(*parts, name=data.name, primary_metric=data.primary_metric, test_info=_per_example(data.test, idx))


#: Keys of a dataset Bunch that are not per-example fields.
_BUNCH_KEYS = {"data", "target", "target_names", "feature_names", "frame", "DESCR", "name", "split",
               "primary_metric", "secondary_metrics", "segments", "max_epochs"}


def _per_example(bunch, idx) -> dict | None:
    """The per-example fields of ``bunch`` beyond texts and labels (e.g. bAbI's supporting spans), at ``idx``."""
    n = len(bunch.data)
    fields = {key: value for key, value in bunch.items()
              if key not in _BUNCH_KEYS and isinstance(value, (list, np.ndarray)) and len(value) == n}
    return {key: [value[i] for i in idx] for key, value in fields.items()} or None


def load_splits(data, y=None, *, n_train=None, n_valid=None, n_test=None, random_state=0) -> Splits:
    """The study's splits from a dataset name or from texts and labels.

    Parameters
    ----------
    data : str, PaperDataset or sequence of str or pairs
        A name of :func:`dataset_names` (``y`` must then be None): the bundled
        corpora are split here after dropping repeated texts (the tweets
        hold 915 of them), the paper's datasets keep their own splits
        (subsampled, stratified, to the sizes given).  A loaded
        :class:`~fmmlearn.datasets.PaperDataset` (e.g. ``load_babi(1,
        source="facebook")``) keeps its splits the same way.  Otherwise the
        texts, used as given.
    y : array-like, optional
        Labels of ``data`` when it holds texts.
    n_train, n_valid, n_test : int, optional
    random_state : int, default=0
        Seed of the subsamples and splits.

    Returns
    -------
    Splits
    """
    for value, arg in ((n_train, "n_train"), (n_valid, "n_valid"), (n_test, "n_test")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1):
            raise ValueError(f"{arg} must be a positive integer or None, got {value!r}.")
    seed = int(random_state)
    from ..datasets import PaperDataset

    if isinstance(data, PaperDataset):  # e.g. load_babi(1, source="facebook"): its own splits are kept
        if y is not None:
            raise ValueError("y must be None when data is a PaperDataset; the dataset brings its labels.")
        return _paper_splits(data, n_train, n_valid, n_test, seed)
    if isinstance(data, str):
        if y is not None:
            raise ValueError("y must be None when data is a dataset name; the dataset brings its labels.")
        check_dataset_name(data)
        build = _bundled_splits if data in BUNDLED_DATASETS else _paper_splits
        return build(data, n_train, n_valid, n_test, seed)
    if y is None:
        raise ValueError("y is required with texts: pass the labels, or a dataset name instead of texts.")
    return split_texts(data, y, n_train=n_train, n_valid=n_valid, n_test=n_test, random_state=seed)

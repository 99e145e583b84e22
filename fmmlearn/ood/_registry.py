"""In-distribution tests by name: what ``detector=`` accepts everywhere (numpy only; docs/ood.md)."""

from __future__ import annotations

from sklearn.base import clone

from ._detectors import ConformalDetector, KNNDetector, MahalanobisDetector
from ._masf import MaSF

__all__ = ["DEFAULT_DETECTOR", "DETECTORS", "detector_name", "make_detector"]

#: Named detectors: MaSF (the paper's), and the conformal detectors on one pooling of the last layer
#: or of every layer.
DETECTORS = {
    "masf": lambda random_state: MaSF(fold_fractions="auto", random_state=random_state),
    "mahalanobis": lambda random_state: MahalanobisDetector("cls", random_state=random_state),
    "mahalanobis-mean": lambda random_state: MahalanobisDetector("mean", random_state=random_state),
    "mahalanobis-all": lambda random_state: MahalanobisDetector("cls", layers="all", random_state=random_state),
    "mahalanobis-mean-all": lambda random_state: MahalanobisDetector("mean", layers="all",
                                                                     random_state=random_state),
    "mahalanobis-cls-mean-all": lambda random_state: MahalanobisDetector("cls+mean", layers="all",
                                                                         random_state=random_state),
    "knn": lambda random_state: KNNDetector(pooling="cls", random_state=random_state),
    "knn-mean": lambda random_state: KNNDetector(pooling="mean", random_state=random_state),
    "knn-all": lambda random_state: KNNDetector(pooling="cls", layers="all", random_state=random_state),
}

#: The detector studies, the demo and the reproduction use unless told otherwise: the one with the most
#: power on the matched positive controls at its null share, for plain and masked MiniLM on tweets and
#: news (``benchmarks/ood_power.py``, docs/ood.md).
DEFAULT_DETECTOR = "mahalanobis-cls-mean-all"


def make_detector(detector="masf", *, random_state=0):
    """An unfitted in-distribution test from a name or an instance.

    Parameters
    ----------
    detector : str or detector instance, default="masf"
        A name of :data:`DETECTORS`, or an unfitted (or fitted: it is cloned) :class:`MaSF` or
        :class:`ConformalDetector`.
    random_state : int, RandomState or None, default=0
        Seeds a named detector's data split.

    Returns
    -------
    MaSF or ConformalDetector
        Unfitted.

    Raises
    ------
    ValueError
        For an unknown name; TypeError for another kind of object.

    Examples
    --------
    >>> from fmmlearn.ood import make_detector
    >>> make_detector("knn")
    KNNDetector()
    """
    if isinstance(detector, str):
        if detector not in DETECTORS:
            raise ValueError(f"detector must be one of {sorted(DETECTORS)} or a detector instance, got {detector!r}.")
        return DETECTORS[detector](random_state)
    if isinstance(detector, (MaSF, ConformalDetector)):
        return clone(detector)
    raise TypeError(f"detector must be a name ({sorted(DETECTORS)}) or a MaSF/ConformalDetector instance, got "
                    f"{type(detector).__name__}.")


def detector_name(detector) -> str:
    """The name reports show for ``detector`` (a registered name, else the instance's repr).

    Parameters
    ----------
    detector : str or detector

    Returns
    -------
    str
    """
    if isinstance(detector, str):
        return detector
    for name, build in DETECTORS.items():
        if repr(build(getattr(detector, "random_state", 0))) == repr(detector):
            return name
    return repr(detector)

"""The path of :class:`~fmmlearn.FaithfulTextClassifier` before the estimator became a package.

The class lives in :mod:`fmmlearn.estimator`; this module keeps ``from fmmlearn.classifier import
FaithfulTextClassifier`` (and objects pickled with that path) working.
"""

from .estimator import FaithfulTextClassifier

__all__ = ["FaithfulTextClassifier"]

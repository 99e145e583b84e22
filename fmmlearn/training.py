"""Masked fine-tuning as a skorch net: the path of these names before the estimator became a package.

The net, its data, schedules and callbacks live in :mod:`fmmlearn.estimator`, the batch samplers in
:mod:`fmmlearn.encoding`; this module keeps ``from fmmlearn.training import make_net`` (and objects
pickled with these paths) working.
"""

from .encoding import LengthGroupedBatchSampler, UniformBatchSampler, training_batch_sampler
from .estimator import *  # noqa: F403 -- the net, its data, schedules and callbacks
from .estimator import __all__ as _ESTIMATOR

#: What this module held: the estimator's names but the classifier (fmmlearn.classifier), and the samplers.
__all__ = sorted({*_ESTIMATOR, "LengthGroupedBatchSampler", "UniformBatchSampler", "training_batch_sampler"}
                 - {"FaithfulTextClassifier"})

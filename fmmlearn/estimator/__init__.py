"""The estimator: :class:`FaithfulTextClassifier` and the masked fine-tuning it runs.

One concept per module:

* ``_classifier`` -- :class:`FaithfulTextClassifier`: parameters, input validation, orchestration;
* ``_net`` -- the skorch net (:class:`MaskedFineTuningNet`) and :func:`make_net`, which assembles one fit's net;
* ``_data`` -- the training data (:class:`EncodedDataset`) and the fixed masked validation copy;
* ``_schedules`` -- the learning-rate schedules;
* ``callbacks`` -- fmmlearn's skorch callbacks (selection metric, best-epoch restore);
* ``_net_routing`` -- ``net__<name>`` parameters and ``callbacks=`` of the estimator;
* ``_validation_data`` -- ``fit``'s validation set (split, or given, and its masked copy);
* ``_persistence`` -- ``save``/``load`` (JSON and safetensors, no pickle);
* ``_model_card`` -- the Hugging Face model card.

The batch samplers of training live in :mod:`fmmlearn.encoding` (the MaSF calibration draws the
same batches).  ``fmmlearn.classifier`` and ``fmmlearn.training``, the paths of these names before
they became a package, still import them.
"""

from ._classifier import FaithfulTextClassifier
from ._data import EncodedDataset, concat_encodings, mask_encoding, random_masker
from ._net import (AcceleratedMaskedFineTuningNet, MaskedFineTuningNet, build_callbacks, history_frame, make_net,
                   no_decay_param_groups)
from ._schedules import LR_SCHEDULES, linear_warmup_decay, lr_multiplier, reference_warmup_decay
from .callbacks import BestEpochRestorer, SelectionMetric

__all__ = [
    "LR_SCHEDULES",
    "AcceleratedMaskedFineTuningNet",
    "BestEpochRestorer",
    "EncodedDataset",
    "FaithfulTextClassifier",
    "MaskedFineTuningNet",
    "SelectionMetric",
    "build_callbacks",
    "concat_encodings",
    "history_frame",
    "linear_warmup_decay",
    "lr_multiplier",
    "make_net",
    "mask_encoding",
    "no_decay_param_groups",
    "random_masker",
    "reference_warmup_decay",
]

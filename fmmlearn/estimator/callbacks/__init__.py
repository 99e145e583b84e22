"""skorch callbacks of masked fine-tuning (as ``skorch.callbacks`` holds skorch's own).

* ``_scoring`` -- :class:`SelectionMetric`, the model-selection metric over the whole validation set;
* ``_best_epoch`` -- :class:`BestEpochRestorer`, the weights of the best epoch restored at the end.

:func:`fmmlearn.estimator.build_callbacks` puts them in the order a run needs, with the learning-rate
schedule and the progress bar.
"""

from ._best_epoch import BestEpochRestorer
from ._scoring import SelectionMetric

__all__ = ["BestEpochRestorer", "SelectionMetric"]

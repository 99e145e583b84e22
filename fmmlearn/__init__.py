"""fmmlearn: faithfulness measurable text classifiers with a scikit-learn API.

Fine-tune a transformer with random token masking so that masked inputs are
in-distribution (Madsen, Reddy & Chandar, ICML 2024); then explanations can be
checked by masking the tokens they call important.
"""

__version__ = "0.1.0"

from .classifier import FaithfulTextClassifier  # noqa: E402

__all__ = ["FaithfulTextClassifier", "__version__"]

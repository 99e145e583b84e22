"""The explainer-masking loop: the path of these names before the explanation became a package.

The loop lives in :mod:`fmmlearn.explanation`; this module keeps ``from fmmlearn.explainer_masking
import iter_explainer_masking`` working.
"""

from .explanation import eligible_masks, finite_scores, iter_batch_masking, iter_explainer_masking, resolve_recursive

__all__ = ["eligible_masks", "finite_scores", "iter_batch_masking", "iter_explainer_masking", "resolve_recursive"]

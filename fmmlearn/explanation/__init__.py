"""Explanations of a fitted classifier: importance scores as tidy frames, heatmaps, and masking by them.

:func:`explain` is the user-facing function (and what ``FaithfulTextClassifier.explain`` delegates
to): texts in, an :class:`Explanation` out -- a long DataFrame that also keeps the original texts and
predictions, and renders as a heatmap (:func:`explanation_html`).  :func:`explain_encoded` is the
reusable middle layer: an :class:`~fmmlearn.encoding.Encoding` and target class indices in, one score
array per example out.  :func:`iter_explainer_masking` masks the most important tokens ratio by
ratio, for the faithfulness curves, the in-distribution report and the erasure metrics.  All use only
the classifier's public low-level API (``encode``, ``encoded_logits``, ``model_``, ``tokenizer_``,
``classes_``, ``device_``, ...).

One concept per module:

* ``_explain`` -- :func:`explain`, :func:`explain_encoded`;
* ``_result`` -- :class:`Explanation`;
* ``_frames`` -- the long frames (a row per token or word) and the per-example table;
* ``_data`` -- the per-example table's keys and the exact JSON of frames;
* ``_heatmap`` -- :func:`explanation_html`, the heatmap of the original text;
* ``_masking`` -- the explainer-masking loop.

Names load their module on first use, so the heatmap needs neither torch nor transformers.
``fmmlearn.explainer_masking`` and ``fmmlearn.html``, the paths of these names before they became a
package, still import them.
"""

from ..utils import attach

# name -> the module that defines it
_NAMES = {
    **dict.fromkeys(["explain", "explain_encoded"], "._explain"),
    "Explanation": "._result",
    **dict.fromkeys(["example_table", "token_frame", "word_frame"], "._frames"),
    **dict.fromkeys(["SIGNED_PALETTE", "UNSIGNED_PALETTE", "explanation_html"], "._heatmap"),
    **dict.fromkeys(["eligible_masks", "finite_scores", "iter_batch_masking", "iter_explainer_masking",
                     "resolve_recursive"], "._masking"),
}

__all__ = sorted(_NAMES)

# Names the module fmmlearn.explanation imported before it became a package; old imports of them work.
_NAMES.update({"resolve_seed": "..utils", "resolve_targets": "..utils", "autocast_dtype_for": "..modeling"})

__getattr__, __dir__ = attach(__name__, _NAMES, globals())

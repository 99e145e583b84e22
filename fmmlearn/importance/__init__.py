"""Token-importance methods (docs/explain.md), by the paper's names.

``compute_importance(model, batch, target, method, ...)`` scores every
position of a padded batch for one method; :func:`get_method` and
:func:`importance_methods` describe the methods.  One module per family:
:mod:`.gradient` (``grad-l2``, ``grad-l1``, ``inp-grad-*``), :mod:`.integrated`
(``int-grad-*``), :mod:`.occlusion` (``loo-*``), :mod:`.beam`
(``beam-sign-K``) and :mod:`.random` (``rand``); ``registry`` names them, ``precomputed``
aligns scores made elsewhere to an encoding, ``external`` makes explainers values (callables in
``_explainer``, Captum in ``_captum``), and ``_utils`` holds the shared machinery.  Nothing here knows
about the classifier; any module with ``get_input_embeddings()`` and a
``forward(input_ids= | inputs_embeds=, attention_mask=, [token_type_ids=])``
returning logits works.
"""

from __future__ import annotations

import numbers

import torch

from ..encoding import Batch
from ..utils import renamed_attributes
from ._utils import Problem, inference_context
from .external import CallableExplainer, CaptumExplainer, Explainer, as_explainer
from .registry import METHOD_NAMES, RENAMED, ImportanceMethod, get_method, importance_methods
from ..utils import keyword_only

__all__ = ["METHOD_NAMES", "CallableExplainer", "CaptumExplainer", "Explainer", "ImportanceMethod", "Problem",
           "as_explainer", "compute_importance", "get_method", "importance_methods"]

__getattr__ = renamed_attributes(__name__, RENAMED, globals())


def _check_shapes(batch: Batch, target: torch.Tensor, eligible: torch.Tensor) -> None:
    shape = tuple(batch.input_ids.shape)
    if not isinstance(target, torch.Tensor) or target.dtype != torch.long or tuple(target.shape) != shape[:1]:
        raise ValueError(f"target must be a LongTensor of shape ({shape[0]},), got "
                         f"{getattr(target, 'dtype', type(target).__name__)} {tuple(getattr(target, 'shape', ()))}.")
    if not isinstance(eligible, torch.Tensor) or eligible.dtype != torch.bool or tuple(eligible.shape) != shape:
        raise ValueError(f"eligible must be a BoolTensor of shape {shape}, got "
                         f"{getattr(eligible, 'dtype', type(eligible).__name__)} {tuple(getattr(eligible, 'shape', ()))}.")


@keyword_only
def compute_importance(
    model: torch.nn.Module,
    batch: Batch,
    target: torch.Tensor,
    *, method,
    mask_token_id: int,
    eligible: torch.Tensor,
    generator: torch.Generator | None = None,
    autocast_dtype: torch.dtype | None = None,
    internal_batch_size: int | None = None,
    **method_params,
) -> torch.Tensor:
    """Importance of every token of a batch for the target-class logit.

    Parameters
    ----------
    model : torch.nn.Module
        A Hugging Face sequence classifier, or any module with
        ``get_input_embeddings()`` whose ``forward`` takes ``input_ids=`` or
        ``inputs_embeds=``, ``attention_mask=`` (and ``token_type_ids=`` when
        the batch has them) and returns ``.logits`` or a logits tensor.  Run in
        evaluation mode (its own mode is restored afterwards).
    batch : fmmlearn.encoding.Batch
        Already on the model's device.
    target : LongTensor (B,)
        Class index per example; the explained quantity is its logit.
    method : str, ImportanceMethod or explainer value
        A name of :data:`METHOD_NAMES` (``beam-sign-K`` for any width K), or
        a callable, Captum attribution or :class:`Explainer`
        (docs/explainers.md).
    mask_token_id : int
        The tokenizer's mask token (leave-one-out and beam search replace
        tokens by it; positions already holding it are never re-masked).
    eligible : BoolTensor (B, T)
        Positions that may be explained; every other score is 0.
    generator : torch.Generator, optional
        Random source of ``rand``.
    autocast_dtype : torch.dtype, optional
        Run the model under autocast with this dtype (``None``: as it is).
        Differences of target logits (leave-one-out, beam search) are always
        taken in fp32.
    internal_batch_size : int, optional
        Rows (perturbed copies or path points) per forward pass.  Default:
        rows of one length are packed across examples into passes of the
        number of tokens a one-off probe found fastest for this model
        (:func:`fmmlearn.modeling.tokens_per_forward`).  A pass that runs out
        of memory is halved and retried.
    **method_params
        Parameters of the measure, e.g. ``n_steps``, ``baseline``, ``rule``,
        ``variant`` for integrated gradients.

    Returns
    -------
    FloatTensor (B, T)

    Raises
    ------
    ValueError
        Unknown method (the message lists the valid names), invalid
        parameters, or tensors of the wrong shape.

    Examples
    --------
    >>> scores = compute_importance(model, batch, target, method="loo-sign",  # doctest: +SKIP
    ...                             mask_token_id=tokenizer.mask_token_id,
    ...                             eligible=eligible_positions(batch))
    """
    measure = get_method(method)
    params = measure.bind(method_params)
    if internal_batch_size is not None and (isinstance(internal_batch_size, bool) or not isinstance(
            internal_batch_size, numbers.Integral) or internal_batch_size < 1):
        raise ValueError(f"internal_batch_size must be None or a positive integer, got {internal_batch_size!r}.")
    _check_shapes(batch, target, eligible)
    problem = Problem(model, batch, target.to(batch.input_ids.device), eligible.to(batch.input_ids.device),
                      int(mask_token_id), generator, autocast_dtype,
                      None if internal_batch_size is None else int(internal_batch_size))
    with inference_context(model):
        scores = measure.fn(problem, **params)
    scores = scores.float()
    return torch.where(problem.eligible, scores, torch.zeros_like(scores))

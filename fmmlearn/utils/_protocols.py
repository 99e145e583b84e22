"""The classifier interface that explanations, faithfulness curves and MaSF are written against.

:mod:`fmmlearn.explanation`, :mod:`fmmlearn.faithfulness` and
:mod:`fmmlearn.ood` never reach into :class:`~fmmlearn.FaithfulTextClassifier`;
they use only the members below, so any object that has them (a wrapper
around a model trained elsewhere, a toy model in a test) can be explained and
measured.  ``isinstance(obj, FittedClassifier)`` checks that the members exist.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover - annotations only
    import numpy as np
    import torch

__all__ = ["FittedClassifier", "MaskedFittedClassifier"]


@runtime_checkable
class FittedClassifier(Protocol):
    """A fitted text classifier seen through the low-level API fmmlearn's analyses use.

    Attributes
    ----------
    classes_ : ndarray
        Labels, in the order of the logits' columns.
    model_ : torch.nn.Module
        A Hugging Face sequence classifier (or anything with
        ``get_input_embeddings()`` accepting ``input_ids=``/``inputs_embeds=``,
        ``attention_mask=`` and optionally ``token_type_ids=``), in eval mode.
    tokenizer_ : transformers fast tokenizer
        Provides ``mask_token_id``, ``pad_token_id``, ``convert_ids_to_tokens``.
    device_ : torch.device
    inference_dtype_ : torch.dtype or None
        Autocast dtype of forward-only passes, ``None`` for fp32.
    inference_batch_size_ : int
    batch_size : int
        Batch size of gradient computations (and of training batches).
    random_state : int, RandomState or None
        Default seed of random measures and masks.
    verbose : int
        Show progress bars.

    Parameters
    ----------
    *args, **kwargs
        A protocol is not instantiated: a class that has these attributes and methods (such as
        :class:`fmmlearn.FaithfulTextClassifier`) is one.
    """

    classes_: np.ndarray
    model_: torch.nn.Module
    tokenizer_: Any
    device_: torch.device
    inference_dtype_: torch.dtype | None
    inference_batch_size_: int
    batch_size: int
    random_state: Any
    verbose: int

    def encode(self, X, *, name: str = "X") -> Any:  # an fmmlearn.encoding.Encoding (utils sits below encoding)
        """Validate and tokenize texts (or sentence pairs) of the training kind.

        Parameters
        ----------
        X : list of str or list of (str, str)
            Texts, or sentence pairs for a model fitted on pairs.
        name : str, default="X"
            The argument's name in error messages.

        Returns
        -------
        Encoding
            Token ids, masks, segments, word ids and offsets of every text.
        """

    def encoded_logits(self, encoding, input_ids=None) -> np.ndarray:
        """Logits ``(n_samples, n_classes)`` of an encoding, optionally with replacement ids.

        Parameters
        ----------
        encoding : Encoding
            What :meth:`encode` returned.
        input_ids : list of array, optional
            Replacement token ids per example (e.g. masked), of the encoding's lengths.

        Returns
        -------
        numpy.ndarray of shape (n_samples, n_classes)
            The logits.
        """


@runtime_checkable
class MaskedFittedClassifier(FittedClassifier, Protocol):
    """A :class:`FittedClassifier` that also says how it was masked in training (for MaSF calibration).

    Attributes
    ----------
    max_masking_ratio : float
    masking_strategy : str
    """

    max_masking_ratio: float
    masking_strategy: str

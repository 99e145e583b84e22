"""MaSF features of a fitted classifier: max-pooled hidden states, and the calibration set.

Built on the classifier interface of :class:`fmmlearn.FittedClassifier`;
imports torch (the statistics in the sibling modules do not).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils._param_validation import validate_params
from sklearn.utils.validation import check_is_fitted

from ..encoding import collate
from ..masking import mask_training_batch
from ..modeling import autocast, is_decoder, map_batches
from ..encoding import training_batch_sampler
from ..utils import positive_int, reports_truncation_once, resolve_seed
from ._checks import _check_dtype
from ._detectors import POOLINGS
from ..utils import keyword_only

__all__ = ["calibration_features", "calibration_groups", "hidden_state_features", "mask_like_training"]


@reports_truncation_once
@validate_params({"batch_size": [positive_int(), None]}, prefer_skip_nested_validation=True)
def hidden_state_features(clf, X=None, *, encoding=None, input_ids=None, pooling="max", batch_size=None,
                          dtype=np.float32):
    """Pooled hidden states of every layer: the features of the in-distribution tests (docs/ood.md).

    For each example, the embedding output and each of the L transformer
    layers' outputs (``output_hidden_states=True``) are pooled over the
    non-padding positions, special tokens and mask tokens included: the max
    (MaSF's features), the mean, or the position the classification head
    reads (``"cls"``: the first token of an encoder, the last real token of a
    decoder).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X : sequence of str, or sentence pairs, optional
        Texts to encode with ``clf.encode``.  Give either ``X`` or ``encoding``.
    encoding : Encoding, optional
        Already encoded examples (from ``clf.encode``).
    input_ids : sequence of ndarray, optional
        Replacement ids per example of ``encoding`` (e.g. masked copies), each
        as long as the example.
    pooling : {"max", "mean", "cls", "cls+mean"} or sequence of them, default="max"
        How positions are pooled (:data:`fmmlearn.ood.POOLINGS`; ``"cls+mean"``
        returns the first-token layers, then the mean-pooled ones).  Several
        poolings come from one forward pass, returned as a dict.
    batch_size : int, optional
        Examples per forward pass; default ``clf.inference_batch_size_``.  A
        batch that runs out of memory is halved and retried.
    dtype : {numpy.float32, numpy.float16}, default=numpy.float32
        Dtype of the returned features.

    Returns
    -------
    features : ndarray of shape (n_examples, L + 1, hidden_size), or dict of them
        In input order; a dict ``{pooling: features}`` when ``pooling`` is a sequence.

    Notes
    -----
    Examples run longest first in length-grouped batches under
    ``torch.inference_mode`` and the classifier's inference autocast
    (``clf.inference_dtype_``); each batch's pooled result goes straight into
    the output, so memory holds the hidden states of one batch only.

    *Precision.*  Under bf16/fp16 autocast the matrix products run in half
    precision, but PyTorch keeps LayerNorm outputs in float32, so for
    post-LayerNorm models (BERT, RoBERTa, MiniLM) the features are not rounded
    to 16 bits as in the reference's Keras mixed-precision policy.  They still
    differ from fp32 features by about the bf16 rounding of the inner products
    (roughly 1e-2 relative): compute calibration and test features at the
    same precision (:func:`in_distribution_report` does) and never mix them.
    For tie-for-tie parity with the reference's fp16 features pass
    ``dtype=numpy.float16`` (or fit ``MaSF(dtype="float16")``).

    Examples
    --------
    >>> features = hidden_state_features(clf, ["a fine film", "awful"])   # doctest: +SKIP
    >>> features.shape                                                    # doctest: +SKIP
    (2, 7, 384)
    """
    check_is_fitted(clf)
    poolings = _check_poolings(pooling)
    encoding = _features_encoding(clf, X, encoding)
    input_ids = _check_input_ids(input_ids, encoding)
    dtype = _check_dtype(dtype)
    batch_size = clf.inference_batch_size_ if batch_size is None else batch_size
    device, autocast_dtype, pad_token_id = clf.device_, clf.inference_dtype_, clf.tokenizer_.pad_token_id
    last_token = is_decoder(clf.model_)  # a decoder's head reads the last real token, an encoder's the first

    def run(idx):
        batch = collate(encoding, idx, pad_token_id=pad_token_id, input_ids=input_ids).to(device)
        with torch.inference_mode(), autocast(device, autocast_dtype):
            output = clf.model_(**batch.model_inputs(), output_hidden_states=True)
            states = _hidden_states_of(output)
            # One output per pooling (they may differ in layers: "cls+mean" has twice as many).
            return [_pool(states, batch.attention_mask, name, last_token).cpu().numpy().astype(dtype)
                    for name in poolings]

    pooled = map_batches(run, encoding.lengths, batch_size, desc="hidden states", verbose=getattr(clf, "verbose", 0))
    if isinstance(pooling, str):
        return pooled[0]
    return dict(zip(poolings, pooled))


def _check_poolings(pooling) -> tuple:
    names = (pooling,) if isinstance(pooling, str) else tuple(pooling)
    unknown = [name for name in names if name not in POOLINGS]
    if not names or unknown:
        raise ValueError(f"pooling must be one of {list(POOLINGS)} or a sequence of them; got {pooling!r}.")
    return tuple(dict.fromkeys(names))


def _pool(hidden_states, attention_mask, pooling, last_token):
    """(B, n_layers, H) float32: per layer one pooling over the positions with ``attention_mask == 1``."""
    real = attention_mask.bool()[:, :, None]
    if pooling == "cls+mean":  # the two poolings' layers side by side: 2 (L + 1) "layers"
        return torch.cat([_pool(hidden_states, attention_mask, name, last_token) for name in ("cls", "mean")], dim=1)
    if pooling == "max":
        return torch.stack([h.masked_fill(~real, float("-inf")).amax(dim=1).float() for h in hidden_states], dim=1)
    if pooling == "mean":
        counts = real.sum(dim=1).clamp_min(1)
        return torch.stack([(h.float() * real).sum(dim=1) / counts for h in hidden_states], dim=1)
    rows = torch.arange(attention_mask.shape[0], device=attention_mask.device)
    steps = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    position = (steps * real[..., 0]).argmax(dim=1) if last_token else real[..., 0].int().argmax(dim=1)
    return torch.stack([h[rows, position].float() for h in hidden_states], dim=1)


def _hidden_states_of(output):
    hidden_states = getattr(output, "hidden_states", None)
    if not hidden_states:
        raise TypeError(f"clf.model_ ({type(output).__name__}) returned no hidden states with "
                        "output_hidden_states=True; MaSF features need a model that supports it (any Hugging "
                        "Face transformer does).")
    return hidden_states


def _features_encoding(clf, X, encoding):
    if (X is None) == (encoding is None):
        raise ValueError("pass exactly one of X (texts) or encoding (from clf.encode(X)); got "
                         f"{'both' if X is not None else 'neither'}.")
    if encoding is None:
        return clf.encode(X)
    if len(encoding) == 0:
        raise ValueError("encoding is empty; expected at least one example.")
    return encoding


def _check_input_ids(input_ids, encoding):
    """Replacement ids as int64 arrays, one per example and exactly as long as it (masking never removes)."""
    if input_ids is None:
        return None
    if len(input_ids) != len(encoding):
        raise ValueError(f"input_ids has {len(input_ids)} entries but the encoding has {len(encoding)} examples.")
    checked = []
    for i, (ids, original) in enumerate(zip(input_ids, encoding.input_ids)):
        ids = np.asarray(ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or len(ids) != len(original):
            raise ValueError(f"input_ids[{i}] must be a 1-D integer array of the example's {len(original)} "
                             f"token ids; got dtype {ids.dtype}, shape {ids.shape}.")
        checked.append(ids.astype(np.int64, copy=False))
    return checked







@validate_params({"dist_repeats": [positive_int()]}, prefer_skip_nested_validation=True)
def mask_like_training(clf, encoding, *, dist_repeats=1, random_state=None):
    """Mask encoded examples exactly like ``fit`` masks its training batches (docs/ood.md).

    Per repeat, the examples are shuffled into batches of ``clf.batch_size``
    the way ``fit`` draws them (length-grouped, or uniformly shuffled when
    ``clf.group_by_length`` is False) and each batch is masked with
    ``clf.masking_strategy`` and ``clf.max_masking_ratio`` (``half-det``: the
    first half of each batch clean, the rest with random-max masking).  The
    sampler and generators are the training loop's: batch order
    ``numpy.random.default_rng(seed)``, masks
    ``torch.Generator().manual_seed(seed)``, so repeat ``k`` of the training
    set with the fit's seed draws exactly the masks of epoch ``k + 1``.  With
    ``max_masking_ratio=0`` (plain fine-tuning) every copy is clean.

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted (its ``tokenizer_`` and masking parameters are used).
    encoding : Encoding
        From ``clf.encode``.
    dist_repeats : int, default=1
        Number of differently masked copies of the set (the reference's
        ``dist_repeats``).  Copies are identical without masking.
    random_state : int, RandomState or None, default=None
        Seed; default ``clf.random_state``.

    Returns
    -------
    repeated : Encoding
        ``dist_repeats`` copies of ``encoding``, one after the other.
    input_ids : list of ndarray of int64
        The masked ids, aligned with ``repeated``.
    """
    seed = resolve_seed(random_state, clf.random_state)
    n = len(encoding)
    repeated = encoding.subset(np.tile(np.arange(n), dist_repeats))
    masked = list(repeated.input_ids)
    if clf.max_masking_ratio == 0:
        return repeated, masked
    # The training loop's own sampler and masking function, seeded like MaskedFineTuningNet.initialize.
    order_rng, mask_rng = np.random.default_rng(seed), torch.Generator(device="cpu").manual_seed(seed)
    lengths = encoding.lengths
    # A classifier without the attribute (a duck-typed wrapper) batches like the default fit.
    sampler = training_batch_sampler(lengths, batch_size=clf.batch_size, generator=order_rng,
                                     group_by_length=getattr(clf, "group_by_length", True))
    for repeat in range(dist_repeats):
        for idx in sampler:
            batch = collate(encoding, idx, pad_token_id=clf.tokenizer_.pad_token_id)
            ids = mask_training_batch(batch, strategy=clf.masking_strategy, max_ratio=float(clf.max_masking_ratio),
                                      mask_token_id=clf.tokenizer_.mask_token_id, generator=mask_rng).numpy()
            for row, i in enumerate(idx):
                masked[repeat * n + i] = ids[row, : lengths[i]]
    return repeated, masked


@reports_truncation_once
@validate_params({"dist_repeats": [positive_int()], "batch_size": [positive_int(), None],
                  "return_groups": ["boolean"]}, prefer_skip_nested_validation=True)
def calibration_features(clf, X_calib, *, dist_repeats=1, random_state=None, pooling="max", batch_size=None,
                         dtype=np.float32, return_groups=False):
    """MaSF calibration features: ``X_calib`` masked like the training batches, then max-pooled (docs/ood.md).

    Parameters
    ----------
    clf : FaithfulTextClassifier
        Fitted.
    X_calib : sequence of str, or sentence pairs
        In-distribution examples, e.g. the validation split used for model
        selection.  Labels are not needed.
    dist_repeats : int, default=1
        Differently masked copies of ``X_calib`` (see :func:`mask_like_training`).
    random_state : int, RandomState or None, default=None
        Seed of the masks; default ``clf.random_state``.
    pooling : {"max", "mean", "cls"} or sequence of them, default="max"
        See :func:`hidden_state_features` (a sequence gives a dict).
    batch_size : int, optional
        Forward-pass batch size (see :func:`hidden_state_features`).
    dtype : {numpy.float32, numpy.float16}, default=numpy.float32
    return_groups : bool, default=False
        Also return the example id of every row, for ``MaSF.fit(...,
        groups=...)``: the copies of one example must share a calibration
        fold (docs/ood.md).

    Returns
    -------
    features : ndarray of shape (len(X_calib) * dist_repeats, L + 1, hidden_size)
        Copy ``k`` of example ``i`` is row ``k * len(X_calib) + i``.
    groups : ndarray of shape (len(X_calib) * dist_repeats,)
        Only with ``return_groups=True``: ``i`` for every copy of example ``i``.

    Examples
    --------
    >>> features, groups = calibration_features(clf, X_valid, dist_repeats=3,   # doctest: +SKIP
    ...                                         return_groups=True)
    >>> masf = MaSF().fit(features, groups=groups)                             # doctest: +SKIP
    >>> masf.pvalues(hidden_state_features(clf, X_test))                       # doctest: +SKIP
    """
    encoding = clf.encode(X_calib, name="X_calib")
    features = _masked_features(clf, encoding, dist_repeats, random_state, batch_size, dtype, pooling=pooling)
    return (features, calibration_groups(len(encoding), dist_repeats=dist_repeats)) if return_groups else features


@keyword_only
def calibration_groups(n_examples: int, *, dist_repeats: int) -> np.ndarray:
    """Example id of each row of :func:`calibration_features` (copy ``k`` of example ``i`` is row ``k * n + i``)."""
    return np.tile(np.arange(n_examples), dist_repeats)


def _masked_features(clf, encoding, dist_repeats, random_state, batch_size=None, dtype=np.float32, *, pooling="max"):
    repeated, ids = mask_like_training(clf, encoding, dist_repeats=dist_repeats, random_state=random_state)
    return hidden_state_features(clf, encoding=repeated, input_ids=ids, pooling=pooling, batch_size=batch_size,
                                 dtype=dtype)

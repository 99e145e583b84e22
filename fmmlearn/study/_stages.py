"""The study's stages on one fitted model, as plain functions the stage cache can key.

Every stage takes a :class:`~fmmlearn.study._cache.ModelHandle` first (not part
of the cache key: the model enters as its ``fit_key``), loads the classifier
only when it really runs, and returns its payload together with the seconds it
took and how many sequences went through the model (``counts``), so costs can
be compared across machines.
"""

from __future__ import annotations

import time
import warnings
from contextlib import contextmanager

import numpy as np
import torch

__all__ = ["erasure_stage", "explanation_stage", "faithfulness_stage", "forward_counter", "gold_indices",
           "in_distribution_stage", "masf_stage", "performance_stage", "random_masking_stage"]


class _Counts:
    def __init__(self):
        self.forward_rows = self.forward_tokens = self.gradient_rows = 0

    def as_dict(self) -> dict:
        return {"forward_rows": self.forward_rows, "forward_tokens": self.forward_tokens,
                "gradient_rows": self.gradient_rows}


@contextmanager
def forward_counter(module):
    """Count the sequences (and padded tokens) that go through ``module``'s forward pass.

    ``gradient_rows`` counts the rows of forward passes run with gradients
    enabled (each is followed by a backward pass).
    """
    counts = _Counts()

    def hook(_module, args, kwargs):
        for x in (kwargs.get("input_ids"), kwargs.get("inputs_embeds"), args[0] if args else None):
            if isinstance(x, torch.Tensor):
                counts.forward_rows += int(x.shape[0])
                counts.forward_tokens += int(x.shape[0] * x.shape[1])
                counts.gradient_rows += int(x.shape[0]) if torch.is_grad_enabled() else 0
                break

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield counts
    finally:
        handle.remove()


@contextmanager
def _measured(clf):
    """``(info)`` filled with ``seconds`` and ``counts`` of the block."""
    info = {}
    start = time.perf_counter()
    with forward_counter(clf.model_) as counts:
        yield info
    info["seconds"] = time.perf_counter() - start
    info["counts"] = counts.as_dict()


def gold_indices(clf, y) -> np.ndarray:
    """Indices into ``clf.classes_`` of the labels ``y``."""
    lookup = {c: i for i, c in enumerate(clf.classes_.tolist())}
    values = [v.item() if hasattr(v, "item") else v for v in np.asarray(y, dtype=object)]
    unknown = sorted({v for v in values if v not in lookup}, key=str)
    if unknown:
        raise ValueError(f"test labels {unknown[:5]} were not among the training labels {list(lookup)}.")
    return np.asarray([lookup[v] for v in values], dtype=np.int64)


def _outcomes(clf, encoding, gold, input_ids=None):
    """Predicted class index and probability of the gold class, per example."""
    logits = torch.from_numpy(clf.encoded_logits(encoding, input_ids=input_ids)).double()
    proba = torch.softmax(logits, dim=1).numpy()
    return logits.argmax(dim=1).numpy().astype(np.int16), proba[np.arange(len(gold)), gold].astype(np.float32)


def _masked_fraction(clf, encoding, input_ids, segment) -> np.ndarray:
    """Realised share of eligible tokens that hold the mask token, per example (NaN where none is eligible)."""
    from ..encoding import collate
    from ..masking import eligible_positions

    batch = collate(encoding, np.arange(len(encoding)), clf.tokenizer_.pad_token_id, input_ids=input_ids)
    eligible = eligible_positions(batch, segment).numpy()
    masked = (eligible & (batch.input_ids.numpy() == clf.tokenizer_.mask_token_id)).sum(axis=1)
    n = eligible.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, masked / np.maximum(n, 1), np.nan)


def performance_stage(handle, fit_key, X, y) -> dict:
    """Clean test predictions: ``pred`` and ``gold_proba`` per example."""
    clf = handle.get()
    with _measured(clf) as info:
        encoding = clf.encode(X)
        gold = gold_indices(clf, y)
        pred, proba = _outcomes(clf, encoding, gold)
    return {**info, "pred": pred, "gold_proba": proba, "gold": gold, "classes": clf.classes_.tolist(),
            "lengths": encoding.lengths.astype(np.int64), "truncated": np.asarray(encoding.truncated, dtype=bool)}


def random_masking_stage(handle, fit_key, X, y, ratios, metric, seed) -> dict:
    """The random-masking curve (both segments, exact counts, fresh masks per ratio)."""
    from ..faithfulness import random_masking_curve

    clf = handle.get()
    with _measured(clf) as info:
        curve = random_masking_curve(clf, X, y, ratios=ratios, metric=metric, random_state=seed)
    return {**info, "curve": curve}


def faithfulness_stage(handle, fit_key, X, y, method, ratios, seed, segment, method_params) -> dict:
    """Explainer masking with ``method`` and the per-example outcome at every ratio.

    Returns ``pred``, ``gold_proba`` and ``masked_fraction`` (the realised
    share of eligible tokens masked), each of shape ``(n_ratios, n_examples)``.
    """
    from ..faithfulness import iter_explainer_masking

    clf = handle.get()
    with _measured(clf) as info:
        encoding = clf.encode(X)
        gold = gold_indices(clf, y)
        steps = iter_explainer_masking(clf, encoding, gold, method, ratios, None, segment, random_state=seed,
                                       **method_params)
        preds, probas, fractions = [], [], []
        for _, ids in steps:
            pred, proba = _outcomes(clf, encoding, gold, input_ids=ids)
            preds.append(pred)
            probas.append(proba)
            fractions.append(_masked_fraction(clf, encoding, ids, segment))
    return {**info, "pred": np.stack(preds), "gold_proba": np.stack(probas), "masked_fraction": np.stack(fractions)}


def in_distribution_stage(handle, fit_key, X_calib, X, y, method, ratios, seed, segment, model_name) -> dict:
    """The MaSF report: calibrated on ``X_calib`` masked like training, scored on explainer-masked ``X``."""
    from ..ood import in_distribution_report

    clf = handle.get()
    with _measured(clf) as info:
        report = in_distribution_report(clf, X_calib, X, y, method=method, ratios=ratios, segment=segment,
                                        random_state=seed, model_name=model_name)
    return {**info, "report": report}


def masf_stage(handle, fit_key, X_calib, seed) -> dict:
    """MaSF fitted on ``X_calib`` masked like the training batches: the calibration ``in_distribution_stage`` uses.

    Same features (:func:`fmmlearn.ood.calibration_features`, seeded by
    ``seed``), same folds (``MaSF(random_state=seed)``, one group per text),
    so the erasure metrics are certified by the very test of the
    in-distribution report.
    """
    from ..ood import MaSF, calibration_features

    clf = handle.get()
    with _measured(clf) as info:
        features, groups = calibration_features(clf, X_calib, random_state=seed, return_groups=True)
        masf = MaSF(random_state=seed).fit(features, groups=groups)
    return {**info, "masf": masf}


def erasure_stage(handle, fit_key, masf, X, y, method, k, seed, segment, method_params, alpha, max_invalid_factor,
                  n_bootstrap, confidence_level) -> dict:
    """Comprehensiveness, sufficiency and AOPC of ``method`` (removal by mask, the gold label as target).

    Every erased input is scored by the fitted ``masf`` (``None``: not
    certified).  Returns the ``summary`` and ``per_example`` frames of
    :func:`fmmlearn.faithfulness.erasure_metrics`.
    """
    from ..exceptions import FaithfulnessWarning
    from ..faithfulness import erasure_metrics

    clf = handle.get()
    with _measured(clf) as info, warnings.catch_warnings():
        if masf is None:  # the runner says once, and why, that nothing is certified
            warnings.filterwarnings("ignore", message="no X_calib or fitted masf", category=FaithfulnessWarning)
        report = erasure_metrics(clf, X, y, method, k=k, removal="mask", segment=segment, masf=masf, alpha=alpha,
                                 max_invalid_factor=max_invalid_factor, n_bootstrap=n_bootstrap,
                                 confidence_level=confidence_level, random_state=seed, **method_params)
    return {**info, "summary": report.summary, "per_example": report.per_example}


def explanation_stage(handle, fit_key, X, y, method, seed, segment, method_params) -> dict:
    """Token importances of a few examples for the gold class (the long frame of ``explain``)."""
    clf = handle.get()
    with _measured(clf) as info:
        frame = clf.explain(X, y, method=method, segment=segment, random_state=seed, **method_params)
    return {**info, "frame": frame}

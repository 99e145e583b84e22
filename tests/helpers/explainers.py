"""Explainers given as values, importable by a test and by a subprocess (a stable ``module.qualname``)."""

import torch


def earliest_first(input_ids, attention_mask, target):
    """Earlier tokens score higher (always positive: an unsigned explainer)."""
    positions = torch.arange(input_ids.shape[1], dtype=torch.float32)
    return (input_ids.shape[1] - positions).expand(input_ids.shape).clone()

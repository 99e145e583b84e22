"""How the study names its fine-tuned models."""

from __future__ import annotations

__all__ = ["model_label"]


def model_label(max_masking_ratio: float) -> str:
    """``"plain"`` for 0 (no masking), ``"masked"`` for 1 (the paper's masked fine-tuning), else ``"masked-r"``.

    Parameters
    ----------
    max_masking_ratio : float
        The model's ``max_masking_ratio``.

    Returns
    -------
    str
        The model's label in the study's frames.
    """
    if max_masking_ratio == 0:
        return "plain"
    return "masked" if max_masking_ratio == 1 else f"masked-{max_masking_ratio:g}"

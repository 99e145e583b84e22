"""Numbers for people: the one formatter of every report, summary and heatmap.

A missing or non-finite value is never printed as ``nan``: it becomes ``missing`` (an en dash by
default), so a table cell or a sentence says plainly that there is no number.
"""

from __future__ import annotations

import math

__all__ = ["DASH", "interval", "number", "percent"]

#: What a missing number reads as.
DASH = "\u2013"
_MINUS = "\u2212"


def _finite(value) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def number(value, digits: int = 3, *, significant: bool = False, unicode_minus: bool = False,
           missing: str = DASH) -> str:
    """``value`` with ``digits`` decimals (or significant digits), ``missing`` when it is not a finite number.

    Parameters
    ----------
    value : float or None
    digits : int, default=3
    significant : bool, default=False
        ``digits`` significant digits (``"g"`` format) instead of decimals.
    unicode_minus : bool, default=False
        A real minus sign (U+2212) instead of a hyphen, for typeset pages.
    missing : str, default="–"

    Returns
    -------
    str
    """
    if not _finite(value):
        return missing
    text = f"{float(value):.{digits}{'g' if significant else 'f'}}"
    return text.replace("-", _MINUS) if unicode_minus else text


def percent(value, digits: int = 0, *, missing: str = DASH) -> str:
    """``value`` (a share in [0, 1]) as a percentage, e.g. ``0.042 -> "4%"``."""
    return f"{float(value):.{digits}%}" if _finite(value) else missing


def interval(low, high, digits: int = 2, *, style: str = "brackets", level: float = 0.95) -> str:
    """A confidence interval: ``"[low, high]"`` or ``" (95% CI low to high)"``; ``""`` when a bound is missing.

    Parameters
    ----------
    low, high : float or None
    digits : int, default=2
        Decimals.
    style : {"brackets", "words", "signed", "percent"}, default="brackets"
        ``"words"`` reads inside a sentence (with a leading space); ``"signed"`` is brackets with the
        sign of both bounds shown (differences); ``"percent"`` brackets of percentages (shares),
        ``digits`` then counting the decimals of the percentage.
    level : float, default=0.95
        The confidence level ``"words"`` names.

    Returns
    -------
    str
    """
    if not (_finite(low) and _finite(high)):
        return ""
    if style == "words":
        return f" ({level:.0%} CI {low:.{digits}f} to {high:.{digits}f})"
    if style == "signed":
        return f"[{low:+.{digits}f}, {high:+.{digits}f}]"
    if style == "percent":
        return f"[{low:.{digits}%}, {high:.{digits}%}]"
    if style != "brackets":
        raise ValueError(f"style must be 'brackets', 'words', 'signed' or 'percent', got {style!r}.")
    return f"[{low:.{digits}f}, {high:.{digits}f}]"

"""The verdict rules: margins, levels and widths in one versioned file, fixed before the data.

``fmmlearn/study/verdict_rules.json`` holds every number a verdict of the study or of the
reproduction depends on (docs/reproduction.md records its SHA-256 and the commit that last changed
it).  :func:`load_rules` reads it (or a user's file or dict, checked key by key);
:func:`comparison_verdict` is the one rule that turns a confidence interval into a word.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from pathlib import Path

__all__ = ["RULES_FILE", "VERDICTS", "comparison_verdict", "load_rules", "rules_digest", "spent_level"]

#: The rules shipped with fmmlearn.
RULES_FILE = Path(__file__).with_name("verdict_rules.json")
#: The words a comparison can end in.
VERDICTS = ("first ahead", "second ahead", "equivalent", "inconclusive")

_REQUIRED = {
    ("confidence_level",): float,
    ("bootstrap", "n_resamples"): int,
    ("bootstrap", "seed"): int,
    ("comparisons", "acu_margin"): float,
    ("comparisons", "accuracy_margin"): float,
    ("stability", "racu_max_ci_width"): float,
    ("stability", "acu_max_ci_width"): float,
    ("convergence", "margin"): float,
    ("in_distribution", "level"): float,
    ("in_distribution", "null_share_range"): list,
    ("in_distribution", "max_excess"): float,
    ("in_distribution", "min_power"): float,
    ("budget", "block"): int,
}


def rules_digest(path=RULES_FILE) -> str:
    """SHA-256 of a rules file's bytes (what the reproduction records)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _merged(base: dict, update: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in update.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_rules(rules=None) -> dict:
    """The verdict rules: the shipped file, a JSON file of one's own, or a dict of overrides.

    Parameters
    ----------
    rules : None, path-like or dict
        ``None``: :data:`RULES_FILE`.  A path: a complete rules file.  A dict: changes to the shipped
        rules (e.g. ``{"comparisons": {"acu_margin": 0.03}}``).

    Returns
    -------
    dict

    Raises
    ------
    ValueError
        A missing entry, or one of the wrong type or out of range, named by its path.
    """
    shipped = json.loads(RULES_FILE.read_text(encoding="utf-8"))
    if rules is None:
        out = shipped
    elif isinstance(rules, dict):
        out = _merged(shipped, rules)
    else:
        try:
            out = json.loads(Path(rules).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"rules: cannot read {str(rules)!r} as a JSON rules file ({exc}).") from exc
    for path, kind in _REQUIRED.items():
        value = out
        for key in path:
            if not isinstance(value, dict) or key not in value:
                raise ValueError(f"rules: {'.'.join(path)} is missing.")
            value = value[key]
        number = kind in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number or isinstance(value, kind)) or (kind is int and not isinstance(value, int)):
            raise ValueError(f"rules: {'.'.join(path)} must be {kind.__name__}, got {value!r}.")
        if number and (not math.isfinite(value) or value < 0):
            raise ValueError(f"rules: {'.'.join(path)} must be a finite number >= 0, got {value!r}.")
    if not 0 < out["confidence_level"] < 1:
        raise ValueError(f"rules: confidence_level must be in (0, 1), got {out['confidence_level']!r}.")
    return out


def comparison_verdict(low: float, high: float, margin: float) -> str:
    """The verdict of a CI ``[low, high]`` of ``first - second`` with equivalence margin ``margin``.

    ``"equivalent"`` when the CI lies inside ``(-margin, +margin)``; ``"first ahead"`` when it lies
    above 0 (and not inside the margin); ``"second ahead"`` when below 0; else ``"inconclusive"``
    (also for a missing bound).

    Examples
    --------
    >>> comparison_verdict(-0.01, 0.02, 0.05), comparison_verdict(0.03, 0.12, 0.05)
    ('equivalent', 'first ahead')
    >>> comparison_verdict(-0.02, 0.09, 0.05)
    'inconclusive'
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        return "inconclusive"
    if -margin < low and high < margin:
        return "equivalent"
    if low > 0:
        return "first ahead"
    if high < 0:
        return "second ahead"
    return "inconclusive"


def spent_level(confidence_level: float, round_index: int | None) -> float:
    """The confidence level of round ``round_index`` under the rules' alpha-spending (``None``: one look).

    Round ``r`` spends ``alpha_r = alpha / 2^(r + 1)`` of ``alpha = 1 - confidence_level``, so however
    many rounds run and whenever they stop, the chance that any round's interval misses is at most
    ``alpha`` (a union bound).

    Examples
    --------
    >>> spent_level(0.95, None), spent_level(0.95, 0), spent_level(0.95, 1)
    (0.95, 0.975, 0.9875)
    """
    if round_index is None:
        return confidence_level
    return 1 - (1 - confidence_level) / 2 ** (round_index + 1)

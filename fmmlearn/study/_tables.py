"""Tables derived from a study's frames: per-model means, rankings, verdicts (for the summary and the report).

Everything here reads frames (a :class:`~fmmlearn.study.StudyResult` or the frames themselves) and
returns new ones; nothing here computes from models.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["LEVEL", "RELIABLE_AREA_SHARE", "erasure_by_model", "in_distribution_verdicts", "most_faithful_rows",
           "performance_by_model", "ranking_metric", "verdict_text"]

#: RACU is "reliable" when the CI lower bound of its denominator is at least this share of its estimate.
RELIABLE_AREA_SHARE = 0.5
#: The significance level of the in-distribution verdicts.
LEVEL = 0.05


def ranking_metric(rows: pd.DataFrame) -> str:
    """``"racu"`` when every RACU of a model's measures is reliable, else ``"acu"``.

    RACU compares measures on one scale only when each ratio is stable; the costly measures run on
    few texts, where the area random masking leaves (RACU's denominator) is noisy.  ACU, the area
    itself, stays comparable across random subsets of the test texts and is far less noisy.
    """
    return "racu" if len(rows) and rows["reliable"].all() and rows["racu"].notna().all() else "acu"


def most_faithful_rows(frame: pd.DataFrame) -> np.ndarray:
    """Per model, the measure with the highest :func:`ranking_metric` (a boolean mask of ``frame``'s rows)."""
    best = np.zeros(len(frame), dtype=bool)
    for _, rows in frame.groupby("model", sort=False):
        values = rows[ranking_metric(rows)]
        if values.notna().any():
            best[frame.index.get_loc(values.idxmax())] = True
    return best


def performance_by_model(result) -> pd.DataFrame:
    """Mean clean test performance per model over its converged seeds, with the mean CI bounds."""
    kept = result.performance[result.performance["converged"].astype(bool)]
    return kept.groupby("model", sort=False)[["value", "low", "high"]].mean()


def in_distribution_verdicts(result, level: float = LEVEL) -> pd.DataFrame:
    """Per model: share of masked test examples flagged at ``p < level`` and ratios where Simes rejects.

    Averaged over converged seeds and over the masking ratios above 0.

    Returns
    -------
    pandas.DataFrame
        Indexed by model: ``flagged`` (mean share), ``n_rejected`` (ratios with mean Simes p below
        ``level``), ``n_ratios``, ``first_rejected`` (the smallest such ratio, NaN if none) and
        ``accepted_up_to`` (the largest ratio below it, NaN if the smallest ratio is rejected).
    """
    frame = result.in_distribution
    if frame.empty:
        return pd.DataFrame()
    rows = frame[frame["converged"].astype(bool) & (frame["ratio"] > 0)
                 & np.isclose(frame["threshold"].astype(float), level)]
    out = {}
    for model, part in rows.groupby("model", sort=False):
        per_ratio = part.groupby("ratio")[["proportion", "simes_p"]].mean()
        rejected = per_ratio["simes_p"] < level
        first = per_ratio.index[rejected].min() if rejected.any() else float("nan")
        accepted_before = per_ratio.index[per_ratio.index < first] if rejected.any() else per_ratio.index
        out[model] = {"flagged": float(per_ratio["proportion"].mean()), "n_rejected": int(rejected.sum()),
                      "n_ratios": int(len(per_ratio)), "first_rejected": float(first),
                      "accepted_up_to": float(accepted_before.max()) if len(accepted_before) else float("nan")}
    return pd.DataFrame.from_dict(out, orient="index")


def verdict_text(row) -> str:
    """Plain words for one row of :func:`in_distribution_verdicts`."""
    n_rejected, n_ratios = int(row["n_rejected"]), int(row["n_ratios"])
    if n_rejected == 0:
        return "in-distribution at every masking ratio (the Simes test never rejects)"
    if np.isfinite(row["accepted_up_to"]):
        return (f"in-distribution up to {row['accepted_up_to']:.0%} masked; the Simes test rejects from "
                f"{row['first_rejected']:.0%} on ({n_rejected} of {n_ratios} ratios)")
    return f"out of distribution from {row['first_rejected']:.0%} masked on ({n_rejected} of {n_ratios} ratios)"


def _all_valid(flags: pd.Series):
    """``False`` if any flag is False, else ``<NA>`` if any is missing, else ``True``."""
    flags = pd.Series(flags, dtype="boolean")
    if (flags == False).any():  # noqa: E712 - elementwise on a nullable boolean
        return False
    return pd.NA if flags.isna().any() or flags.empty else True


def erasure_by_model(result) -> pd.DataFrame:
    """The erasure metrics per model over its converged seeds.

    ``mean``, ``ci_low``, ``ci_high`` and ``ood_share`` are means over the seeds (as
    :func:`performance_by_model` does for the CIs); ``valid`` is False when any seed's is, ``<NA>``
    when any is unchecked, else True.

    Returns
    -------
    pandas.DataFrame
        One row per model, ``method``, ``subset``, ``mode`` and ``k`` (the AOPC row: ``aopc`` True),
        with ``n_seeds``.
    """
    frame = result.erasure
    if frame.empty:
        return pd.DataFrame()
    kept = frame[frame["converged"].astype(bool)]
    keys = ["model", "method", "subset", "removal", "mode", "aopc", "k"]
    grouped = kept.groupby(keys, sort=False, dropna=False)
    out = grouped[["n_examples", "mean", "ci_low", "ci_high", "n_perturbed", "ood_share"]].mean()
    out["valid"] = grouped["valid"].agg(_all_valid).astype("boolean")
    out["n_seeds"] = grouped.size()
    return out.reset_index()

"""Tables derived from a study's frames: per-model means, rankings, verdicts (for the summary and the report).

Everything here reads frames (a :class:`~fmmlearn.study.StudyResult` or the frames themselves) and
returns new ones; nothing here computes from models.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["LEVEL", "RELIABLE_AREA_SHARE", "comparison_between", "erasure_by_model", "in_distribution_verdicts",
           "measure_costs", "most_faithful_rows", "performance_by_model", "ranked_measures", "ranking_metric",
           "verdict_text"]

#: RACU is "reliable" when the CI lower bound of its denominator is at least this share of its estimate.
RELIABLE_AREA_SHARE = 0.5
#: The significance level of the in-distribution verdicts.
LEVEL = 0.05


def ranking_metric(rows: pd.DataFrame) -> str:
    """``"racu"`` when every RACU of a model's measures is reliable and stable, else ``"acu"``.

    RACU compares measures on one scale only when each ratio is stable: its denominator (the area
    random masking leaves) known to about +-50 % (``reliable``) and its CI no wider than the rules
    allow (``racu_stable``).  ACU, the area itself, has no denominator and is far less noisy.
    """
    stable = rows["racu_stable"].all() if "racu_stable" in rows else True
    return "racu" if len(rows) and rows["reliable"].all() and stable and rows["racu"].notna().all() else "acu"


def comparison_between(comparisons: pd.DataFrame | None, model, a: str, b: str):
    """The comparison row of measures ``a`` and ``b`` of ``model``, oriented ``a - b`` (``None`` if absent)."""
    if comparisons is None or not len(comparisons):
        return None
    rows = comparisons[(comparisons["kind"] == "measures") & (comparisons["model"] == model)]
    direct = rows[(rows["first"] == a) & (rows["second"] == b)]
    if len(direct):
        return direct.iloc[0].to_dict()
    reverse = rows[(rows["first"] == b) & (rows["second"] == a)]
    if not len(reverse):
        return None
    row = reverse.iloc[0].to_dict()
    flip = {"first ahead": "second ahead", "second ahead": "first ahead"}
    return {**row, "first": a, "second": b, "estimate": -row["estimate"], "ci_low": -row["ci_high"],
            "ci_high": -row["ci_low"], "verdict": flip.get(row["verdict"], row["verdict"])}


def ranked_measures(rows: pd.DataFrame, comparisons: pd.DataFrame | None = None) -> list:
    """A model's measures, most faithful first: by ACU, but never one a paired comparison puts behind another.

    ``rows`` are one model's rows of ``racu_summary``.  A measure that some comparison finds behind
    another measure (its CI entirely on the losing side) cannot be the most faithful, whatever its
    point estimate on its own texts.
    """
    rows = rows.dropna(subset=["acu"]).sort_values("acu", ascending=False, kind="stable")
    order = rows["method"].tolist()
    if comparisons is None or len(order) < 2:
        return order
    model = rows["model"].iloc[0]
    behind = set()
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            row = comparison_between(comparisons, model, a, b)
            if row is not None and row["verdict"] == "second ahead":
                behind.add(a)
            elif row is not None and row["verdict"] == "first ahead":
                behind.add(b)
    return [m for m in order if m not in behind] + [m for m in order if m in behind]


def most_faithful_rows(frame: pd.DataFrame, comparisons: pd.DataFrame | None = None) -> np.ndarray:
    """Per model, its most faithful measure (:func:`ranked_measures`): a boolean mask of ``frame``'s rows."""
    best = np.zeros(len(frame), dtype=bool)
    for _, rows in frame.groupby("model", sort=False):
        ranked = ranked_measures(rows, comparisons)
        if ranked:
            best[frame.index.get_loc(rows.index[rows["method"] == ranked[0]][0])] = True
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
    ``performance_by_model`` does for the CIs); ``valid`` is False when any seed's is, ``<NA>``
    when any is unchecked, else True.

    Parameters
    ----------
    result : StudyResult
        A study's result (its ``erasure`` frame is read).

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


def measure_costs(timings: pd.DataFrame) -> pd.DataFrame:
    """Seconds per test text of each measure's faithfulness curve, per model (the leaderboard's cost column).

    Read from the faithfulness jobs of ``timings``: their compute seconds (a cached job counts what its
    first computation took) over the texts they measured.  A job computes the measure at every masking
    step of the curve (recursive measures: once per step) and the predictions of the masked copies.

    Returns
    -------
    pandas.DataFrame
        Columns ``model``, ``method``, ``n_texts`` (summed over seeds and ``rand`` draws), ``seconds``
        and ``seconds_per_text``; empty when the faithfulness stage did not run.
    """
    columns = ["model", "method", "n_texts", "seconds", "seconds_per_text"]
    if timings is None or not len(timings) or "stage" not in timings:
        return pd.DataFrame(columns=columns)
    jobs = timings[timings["stage"] == "faithfulness"]
    if not len(jobs):
        return pd.DataFrame(columns=columns)
    grouped = jobs.groupby(["model", "method"], sort=False).agg(n_texts=("n_examples", "sum"),
                                                                 seconds=("compute_seconds", "sum")).reset_index()
    grouped["seconds_per_text"] = grouped["seconds"] / grouped["n_texts"].where(grouped["n_texts"] > 0)
    return grouped[columns]

"""Reduced precision judged against the statistics: a probe decides whether a costly measure may run in bf16.

Where this machine runs bf16 faster than fp32 (the classifier's ``precision="auto"`` measured it), the
faithfulness stage computes every measure (leave-one-out, integrated gradients, beam search and the
gradient measures; ``rand`` has no importance to compute) on the first texts of its subset -- the probe
texts -- in fp32 and in bf16.  A measure runs its other
texts in bf16 only when, on every model, the probe's change of its ACU and of its RACU is below a tenth of
the half-width those numbers' intervals will have at the planned number of texts (``PROBE_TOLERANCE``):
the arithmetic's error must be small beside the sampling error that the verdicts already allow for.
After the last round, a comparison whose verdict could flip by the probe's change (its interval moved by
it) sends the measure back to fp32.  The probe texts themselves always keep their fp32 results, so the
probe costs only their bf16 pass (docs/benchmarks.md, "Reduced precision").
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ._names import model_label
from ._rules import comparison_verdict
from ._stats import example_ci

__all__ = ["PROBE_COLUMNS", "PROBE_MIN", "PROBE_SHARE", "PROBE_TOLERANCE", "ProbePlan", "judge_probe", "probe_plan",
           "sensitive_measures"]

#: The share of a measure's texts probed in both precisions...
PROBE_SHARE = 0.2
#: ... and at least this many texts (or the whole subset when it is smaller).
PROBE_MIN = 10
#: The largest change of an ACU or RACU, as a share of its planned interval's half-width, that bf16 may cause.
PROBE_TOLERANCE = 0.1
#: Columns of the ``precision_probe`` frame.
PROBE_COLUMNS = ("model", "max_masking_ratio", "seed", "method", "n_probe", "n_planned", "reduced",
                 "acu_fp32", "acu_reduced", "acu_change", "acu_half_width", "racu_fp32", "racu_reduced",
                 "racu_change", "racu_half_width", "share_of_half_width", "accepted")


class ProbePlan:
    """What a probe measures: the costly measures, the probe texts and the rest of each subset.

    Parameters
    ----------
    methods : list of str
        The measures probed.
    probe : dict of str to ndarray
        Per measure, the probe texts (the first of its subset, in the subset order).
    rest : dict of str to ndarray
        Per measure, the other texts of its subset.
    reduced : str
        The reduced precision tried (``"bf16"``).
    """

    def __init__(self, methods, probe, rest, reduced):
        self.methods, self.probe, self.rest, self.reduced = list(methods), probe, rest, reduced


def probe_plan(context, measures) -> ProbePlan | None:
    """The probe of a study, or ``None`` when every measure stays in fp32.

    No probe unless the study asks for one (``precision_probe=True``), when the classifier's precision is
    not ``"auto"`` (``"fp32"`` stays bit-for-bit fp32), when the machine runs fp32 at least as fast
    (``reduced_dtype`` of the performance stage is ``None``), or for a measure whose ``measure_params``
    set its own ``precision``.
    """
    settings = context["settings"]
    if (not settings.precision_probe or settings.classifier_params.get("precision", "auto") != "auto"
            or context.get("reduced_dtype") is None):
        return None
    methods = [m for m in measures if m != "rand" and "precision" not in settings.measure_params.get(m, {})]
    if not methods:
        return None
    order = {i: k for k, i in enumerate(context["subset_order"])}
    probe, rest = {}, {}
    for m in methods:
        idx = np.array(sorted(context["subsets"][m][1], key=order.__getitem__), dtype=np.int64)
        k = min(len(idx), max(PROBE_MIN, int(math.ceil(PROBE_SHARE * len(idx)))))
        probe[m], rest[m] = np.sort(idx[:k]), np.sort(idx[k:])
    return ProbePlan(methods, probe, rest, context["reduced_dtype"])


def _areas(context, pred, rand, gold, n_resamples) -> dict:
    """ACU and RACU of predictions (ratios, texts) against ``rand`` (draws, ratios, texts), with their CIs."""
    settings = context["settings"]
    return {kind: example_ci(context["score"], pred[None], gold, baseline=rand[None], grid=settings.grid, kind=kind,
                             confidence_level=settings.confidence_level, n_resamples=n_resamples)
            for kind in ("acu", "racu")}


def judge_probe(context, plan: ProbePlan, fp32: dict, reduced: dict, rand: dict) -> tuple[dict, pd.DataFrame]:
    """Which probed measures may run their other texts in the reduced precision, and the probe's numbers.

    Parameters
    ----------
    fp32, reduced : dict
        ``(run, method) -> predictions (ratios, probe texts)`` in each precision.
    rand : dict
        ``run -> rand predictions (draws, ratios, probe texts of the method)``, per method:
        ``(run, method) -> array``.

    Returns
    -------
    precision : dict of str to str or None
        Per measure, the precision of its other texts (``None``: fp32).
    frame : pandas.DataFrame
        Columns :data:`PROBE_COLUMNS`, one row per model, seed and measure.
    """
    settings, gold = context["settings"], context["gold"]
    rows = []
    for m in plan.methods:
        idx = plan.probe[m]
        n_planned = len(plan.probe[m]) + len(plan.rest[m])
        for run in settings.curve_runs:
            a = _areas(context, fp32[(run, m)], rand[(run, m)], gold[idx], settings.n_bootstrap)
            b = _areas(context, reduced[(run, m)], rand[(run, m)], gold[idx], settings.n_bootstrap)
            shrink = math.sqrt(len(idx) / n_planned)  # the interval at the planned texts, from the probe's
            row = {"model": model_label(run[0]), "max_masking_ratio": run[0], "seed": run[1], "method": m,
                   "n_probe": len(idx), "n_planned": n_planned, "reduced": plan.reduced}
            shares = []
            for kind in ("acu", "racu"):
                (point, low, high), (point_r, _, _) = a[kind], b[kind]
                half = (high - low) / 2 * shrink
                change = abs(point_r - point)
                row.update({f"{kind}_fp32": point, f"{kind}_reduced": point_r, f"{kind}_change": change,
                            f"{kind}_half_width": half})
                if np.isnan(point) and np.isnan(point_r):
                    continue  # undefined in both precisions (a flat baseline: RACU is not reported as a number)
                if not np.isfinite(change):
                    shares.append(np.inf)  # defined in one precision only
                elif half > 0 and np.isfinite(half):
                    shares.append(change / half)
                else:
                    shares.append(0.0 if change == 0 else np.inf)
            row["share_of_half_width"] = max(shares, default=0.0)
            rows.append(row)
    frame = pd.DataFrame(rows, columns=[c for c in PROBE_COLUMNS if c != "accepted"])
    accepted = frame.groupby("method")["share_of_half_width"].max() < PROBE_TOLERANCE
    frame["accepted"] = frame["method"].map(accepted).astype(bool)
    return {m: (plan.reduced if bool(accepted.get(m, False)) else None) for m in plan.methods}, frame


def sensitive_measures(comparisons: pd.DataFrame, probe: pd.DataFrame, precision: dict) -> list:
    """The reduced-precision measures of a comparison whose verdict flips when its interval moves by the probe's change.

    The change of an ACU difference is at most the sum of the two measures' largest ACU changes on the
    probe (zero for an fp32 measure).
    """
    change = {m: float(part["acu_change"].max()) for m, part in probe.groupby("method") if precision.get(m)}
    flagged = set()
    for row in comparisons[comparisons["kind"] == "measures"].to_dict("records"):
        shift = change.get(row["first"], 0.0) + change.get(row["second"], 0.0)
        if shift == 0:
            continue
        verdicts = {comparison_verdict(row["ci_low"] + s, row["ci_high"] + s, row["margin"]) for s in (-shift, shift)}
        if verdicts != {row["verdict"]}:
            flagged |= {m for m in (row["first"], row["second"]) if m in change}
    return sorted(flagged)

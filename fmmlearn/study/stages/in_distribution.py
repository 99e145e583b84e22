"""Stage ``in-distribution``: the in-distribution report of every model, its controls, power and verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...utils import derive_seed
from .._names import model_label
from .._pipeline import Job, Stage
from .._stats import share_ci
from ._common import test_key

__all__ = ["CONTROL_COLUMNS", "CONTROLS", "InDistributionStage", "in_distribution_verdict", "random_token_ids"]

#: Columns of :attr:`StudyResult.masf_controls`.
CONTROL_COLUMNS = ("model", "max_masking_ratio", "seed", "converged", "control", "what", "n_examples", "flagged",
                   "flagged_low", "flagged_high", "expected", "level")
#: The controls, in report order: the negative one, the matched positive one (the power of the
#: verdict), and the two reported ones.
CONTROLS = ("negative", "matched", "random", "other domain")


def random_token_ids(clf, encoding, seed: int, segment: str) -> list:
    """Per example, its ids with every maskable token random (:func:`fmmlearn.ood.random_token_ids`)."""
    from ...ood import random_token_ids as ids

    return ids(clf, encoding, seed=seed, segment=segment)


class InDistributionStage(Stage):
    """The in-distribution report of ``in_distribution``-masked test sets per model, its controls and power.

    The calibration stage's test scores the explainer-masked test set at every ratio; the report
    gives, per ratio and threshold, the share flagged, its Wilson CI and the share expected for
    in-distribution texts (the null share).  The controls (docs/ood.md):

    * **negative**: held-out validation texts masked like the training batches, drawn exactly like
      the calibration texts, so the share flagged among them estimates the test's size;
    * **matched** (positive): the very masked test sets with a placeholder the model never saw in
      fine-tuning where the mask token is; the share flagged is the test's power against the shift
      the verdict must rule out, and a power curve (the test refitted on a quarter, half and all of
      its texts) says how many texts would give enough;
    * **random** tokens and **other domain** texts, reported beside them.

    Skipped with ``in_distribution=None``.
    """

    name = "in-distribution"
    requires = ("settings", "splits", "models", "fit_keys", "converged", "calibrations", "calibration_texts",
                "calibration_features", "curve_texts")
    provides = ("in_distribution", "masf_controls", "in_distribution_verdicts", "power_curves")
    frames = ("in_distribution", "masf_controls", "in_distribution_verdicts", "power_curves")

    def jobs(self, context) -> list:
        settings, sp = context["settings"], context["splits"]
        method = settings.in_distribution
        if method is None:
            return []
        control = context["calibration_texts"]["control"].tolist()
        from .._cache import content_key

        idx = context["curve_texts"]
        key = (test_key(sp), method, settings.grid.tolist(), settings.segment, control, settings.detector,
               settings.placeholder, content_key(list(settings.other_domain)), idx.tolist())
        return [Job(run, (*key, run[1], context["fit_keys"][run]), method=method, n_examples=len(idx),
                    data={"detector": context["calibrations"][run],
                          "features": context["calibration_features"][run]},
                    label=f"{model_label(run[0])} seed {run[1]}")
                for run in settings.curve_runs]

    def compute(self, clf, job, context) -> dict:
        from ...ood import (calibration_features, hidden_state_features, masked_set_features, masked_test_sets,
                            power_curve, pvalue_frame, resolve_placeholder)

        settings, sp = context["settings"], context["splits"]
        detector, data, seed = job.data["detector"], job.data["features"], job.run[1]
        pooling = detector.pooling
        idx = context["curve_texts"]
        encoding, steps = masked_test_sets(clf, [sp.X_test[i] for i in idx], sp.y_test[idx].tolist(),
                                           method=settings.in_distribution,
                                           ratios=settings.grid.tolist(), segment=settings.segment,
                                           random_state=derive_seed(seed, 1))
        pvalues = pvalue_frame(detector, masked_set_features(clf, encoding, steps, pooling=pooling))
        placeholder = resolve_placeholder(clf, kind=settings.placeholder)
        matched = masked_set_features(clf, encoding, [(r, ids) for r, ids in steps if 0 < r < 1], pooling=pooling,
                                      placeholder=placeholder)
        curve = power_curve(detector, data["reference"], data["held_out"], np.concatenate([f for _, f in matched]),
                            groups=data["groups"], alpha=settings.rules["in_distribution"]["level"], n_draws=2,
                            random_state=seed)
        control = [sp.X_valid[i] for i in job.key[4]]
        negative = detector.pvalues(calibration_features(clf, control, random_state=derive_seed(seed, 5),
                                                         pooling=pooling)) if control else np.array([])
        random_ids = random_token_ids(clf, encoding, seed=derive_seed(seed, 6), segment=settings.segment)
        random = detector.pvalues(hidden_state_features(clf, encoding=encoding, input_ids=random_ids, pooling=pooling))
        other = (detector.pvalues(hidden_state_features(clf, list(settings.other_domain), pooling=pooling))
                 if settings.other_domain else np.array([]))
        return {"pvalues": pvalues, "matched": pvalue_frame(detector, matched), "negative": negative,
                "random": random, "other": other, "power_curve": curve, "placeholder": placeholder.describe()}

    def finish(self, context, results) -> dict:
        from ...ood import report_rows

        if not results:
            return {name: pd.DataFrame() for name in self.provides}
        settings, level = context["settings"], context["settings"].rules["in_distribution"]["level"]
        parts, controls, curves = [], [], []
        for job, payload in results.items():
            detector, converged = context["calibrations"][job.run], context["converged"][job.run]
            who = {"model": model_label(job.run[0]), "max_masking_ratio": job.run[0], "seed": job.run[1],
                   "converged": converged}
            report = self._report(report_rows(payload["pvalues"], detector, method=settings.in_distribution,
                                              detector=settings.detector), payload["matched"],
                                  settings.confidence_level)
            parts.append(report.assign(**who))
            curves.append(pd.DataFrame(payload["power_curve"]).assign(**who, detector=settings.detector))
            controls += [{**who, "control": control, "what": what, **self._flagged(p, level, settings),
                          "expected": detector.null_share(level), "level": level}
                         for control, what, p in self._control_pvalues(payload, settings)]
        first = ["model", "max_masking_ratio", "seed", "converged"]
        frame = pd.concat(parts, ignore_index=True)
        curves = pd.concat(curves, ignore_index=True)
        controls = pd.DataFrame(controls, columns=list(CONTROL_COLUMNS))
        return {"in_distribution": frame[first + [c for c in frame.columns if c not in first]],
                "masf_controls": controls,
                "in_distribution_verdicts": self._verdicts(context, results, controls, curves),
                "power_curves": curves[first + [c for c in curves.columns if c not in first]]}

    @staticmethod
    def _report(report: pd.DataFrame, matched: pd.DataFrame, confidence_level: float) -> pd.DataFrame:
        """The report's rows with the flagged share's Wilson CI and the matched control's share per ratio."""
        shares = [share_ci(round(p * n), n, confidence_level)
                  for p, n in zip(report["proportion"], report["n_examples"])]
        report.insert(3, "proportion_low", [s[1] for s in shares])
        report.insert(4, "proportion_high", [s[2] for s in shares])
        flagged = {(r, t): float(np.mean(part["p"].to_numpy() < t)) for r, part in matched.groupby("ratio")
                   for t in report["threshold"].unique()}
        report.insert(5, "matched_proportion", [flagged.get((r, t), np.nan)
                                                for r, t in zip(report["ratio"], report["threshold"])])
        return report

    @staticmethod
    def _control_pvalues(payload, settings) -> list:
        """``(control, what, p-values)`` of every control that ran (the matched one over its ratios)."""
        out = [("negative", "held-out validation texts masked like the training batches", payload["negative"]),
               ("matched", f"the masked test texts with {payload['placeholder']} where the mask token is "
                           "(ratios strictly between 0 and 1)", payload["matched"]["p"].to_numpy()),
               ("random", "test texts with every maskable token random", payload["random"])]
        if len(payload["other"]):
            out.append(("other domain", f"{len(payload['other'])} texts of another domain", payload["other"]))
        return out

    @staticmethod
    def _flagged(p, level, settings) -> dict:
        flagged, low, high = share_ci(int(np.sum(np.asarray(p) < level)), len(p), settings.confidence_level)
        return {"n_examples": len(p), "flagged": flagged, "flagged_low": low, "flagged_high": high}

    @staticmethod
    def _verdicts(context, results, controls: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
        """Per model, over its converged seeds (all of them, ``counted=False``, when none converged).

        The share flagged at masking ratios strictly between 0 and 1 (per text, then averaged, with a
        two-level bootstrap CI), the null share, the power against the matched control (the same
        statistic on the matched sets), the controls, the power curve's data multiplier for enough
        power and the rules' verdict.
        """
        from ...ood import size_for_power
        from .._stats import mean_over_texts

        settings = context["settings"]
        rules, level = settings.rules, settings.rules["in_distribution"]["level"]
        target = rules["in_distribution"]["min_power"]
        rows = []
        for ratio in settings.masking_ratios:
            runs = [(ratio, s) for s in settings.curve_seed_list if context["converged"][(ratio, s)]]
            counted = bool(runs)
            runs = runs or [(ratio, s) for s in settings.curve_seed_list]  # no fit counts: still say what the test found
            payloads = [p for job, p in results.items() if job.run in runs]
            if not payloads:
                continue
            boot = dict(n_resamples=rules["bootstrap"]["n_resamples"], seed=rules["bootstrap"]["seed"])
            share = mean_over_texts(np.stack([_flags_per_text(p["pvalues"], level, inner=True) for p in payloads]),
                                    **boot)
            power = mean_over_texts(np.stack([_flags_per_text(p["matched"], level) for p in payloads]), **boot)
            low, high = share.interval(settings.confidence_level)
            power_low, power_high = power.interval(settings.confidence_level)
            expected = float(np.mean([context["calibrations"][run].null_share(level) for run in runs]))
            mine = controls[(controls["max_masking_ratio"] == ratio) & controls["seed"].isin([s for _, s in runs])]
            pooled = {c: _pooled(mine[mine["control"] == c], settings.confidence_level) for c in CONTROLS}
            curve = curves[(curves["max_masking_ratio"] == ratio) & curves["seed"].isin([s for _, s in runs])]
            curve = curve.groupby("fraction", as_index=False)[["power", "null_share"]].mean()
            multiplier = size_for_power(curve, target)
            verdict, reason = in_distribution_verdict(
                (share.estimate, low, high), expected, pooled["negative"], (power.estimate, power_low, power_high),
                multiplier, rules["in_distribution"])
            rows.append({"model": model_label(ratio), "max_masking_ratio": ratio, "counted": counted,
                         "n_seeds": len(runs), "detector": settings.detector,
                         "n_examples": share.n_examples, "flagged": share.estimate, "flagged_low": low,
                         "flagged_high": high, "expected": expected, "power": power.estimate,
                         "power_low": power_low, "power_high": power_high, "size_for_power": multiplier,
                         **{f"{c.replace(' ', '_')}_{k}": v for c, d in pooled.items() for k, v in d.items()},
                         "verdict": verdict, "reason": reason})
        return pd.DataFrame(rows)


def _flags_per_text(pvalues: pd.DataFrame, level: float, inner: bool = False) -> np.ndarray:
    """Per test text, the share of its masked sets flagged (``inner``: ratios strictly inside (0, 1) only)."""
    if inner:
        pvalues = pvalues[(pvalues["ratio"] > 0) & (pvalues["ratio"] < 1)]
    return pvalues.assign(flag=pvalues["p"] < level).groupby("example")["flag"].mean().to_numpy()


def _pooled(rows: pd.DataFrame, confidence_level: float) -> dict:
    """A control's flagged share pooled over seeds (texts x seeds as trials), with its Wilson interval."""
    n = int(rows["n_examples"].sum())
    k = int(round(float((rows["flagged"] * rows["n_examples"]).sum())))
    share, low, high = share_ci(k, n, confidence_level)
    return {"share": share, "low": low, "high": high, "n": n}


def in_distribution_verdict(flagged, expected, negative, power, multiplier, rules) -> tuple[str, str]:
    """The rules' in-distribution verdict and its reason (rules version 2, docs/quickstart.md "Verdicts").

    Parameters
    ----------
    flagged : (float, float, float)
        The share of masked test texts flagged, with its CI.
    expected : float
        The test's null share at the rules' level.
    negative : dict
        The negative control: ``share``, ``low``, ``high``, ``n``.
    power : (float, float, float)
        The share of the matched positive control flagged, with its CI.
    multiplier : float
        :func:`fmmlearn.ood.size_for_power` of the power curve at ``rules["min_power"]``.
    rules : dict
        The rules' ``in_distribution`` section.

    Returns
    -------
    (verdict, reason) : tuple of str
        ``"out of distribution"``, ``"in-distribution"``, ``"inconclusive"`` or ``"not readable"``.
    """
    share, low, high = flagged
    limit = expected + rules["max_excess"]
    # The verdicts tolerate max_excess above the null share; a test that flags clearly more held-out
    # in-distribution texts than that does not hold its level.
    if negative["n"] and negative["low"] > limit:
        return "not readable", (f"the negative control's flagged share {negative['share']:.1%} "
                                f"[{negative['low']:.1%}, {negative['high']:.1%}] is above the null share "
                                f"{expected:.1%} + {rules['max_excess']:.0%}: the test does not hold its level on "
                                "this model's held-out texts")
    if low > limit:
        return "out of distribution", f"flagged {low:.1%} at least, above {expected:.1%} + {rules['max_excess']:.0%}"
    if high > limit:
        return "inconclusive", f"the CI [{low:.1%}, {high:.1%}] straddles {limit:.1%}"
    power_share, power_low, _ = power
    if power_low >= rules["min_power"]:
        return "in-distribution", (f"flagged {high:.1%} at most, the null share {expected:.1%} + "
                                   f"{rules['max_excess']:.0%}, by a test with power {power_share:.0%} "
                                   f"[{power_low:.0%}, {power[2]:.0%}] against the matched control")
    if not np.isfinite(multiplier):
        need = "its power curve does not grow with more texts: another detector is needed"
    elif multiplier <= 1:
        need = "its interval reaches below it: more test texts would narrow it"
    else:
        need = f"from its power curve, about {multiplier:.1f}x as many training and validation texts would give it"
    return "inconclusive", (f"flagged {high:.1%} at most, but the test's power against the matched control is "
                            f"{power_share:.0%} (lower bound {power_low:.0%}), below {rules['min_power']:.0%}; "
                            f"{need}")

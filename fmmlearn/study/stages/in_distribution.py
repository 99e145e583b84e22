"""Stage ``in-distribution``: the MaSF report of every model, with its negative and positive controls."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._random import derive_seed
from .._names import model_label
from .._pipeline import Job, Stage
from .._stats import share_ci
from ._common import test_key

__all__ = ["CONTROL_COLUMNS", "InDistributionStage", "random_token_ids"]

#: Columns of :attr:`StudyResult.masf_controls`.
CONTROL_COLUMNS = ("model", "max_masking_ratio", "seed", "converged", "control", "what", "n_examples", "flagged",
                   "flagged_low", "flagged_high", "expected", "level")


def random_token_ids(clf, encoding, seed: int, segment: str) -> list:
    """Per example, its ids with every maskable token replaced by a random non-special vocabulary token."""
    import torch

    from ...encoding import collate
    from ...masking import eligible_positions

    batch = collate(encoding, np.arange(len(encoding)), clf.tokenizer_.pad_token_id)
    eligible = eligible_positions(batch, segment)
    special = set(clf.tokenizer_.all_special_ids)
    vocabulary = torch.tensor([i for i in range(len(clf.tokenizer_)) if i not in special])
    rng = torch.Generator().manual_seed(int(seed))
    draws = vocabulary[torch.randint(len(vocabulary), batch.input_ids.shape, generator=rng)]
    ids = torch.where(eligible, draws, batch.input_ids).numpy()
    return [ids[i, :n] for i, n in enumerate(encoding.lengths)]


class InDistributionStage(Stage):
    """The MaSF in-distribution report of ``rand``-masked test sets, per model, and two controls.

    The calibration stage's MaSF scores the explainer-masked test set at every ratio; the report
    gives, per ratio and threshold, the share flagged, its Wilson CI and the share expected for
    in-distribution texts (the null share, from the calibration size).  The **negative control**
    scores held-out validation texts masked like the training batches (they are in-distribution by
    construction: their flagged share estimates the test's size); the **positive control** scores
    the test texts with every maskable token replaced by a random vocabulary token (surely
    out-of-distribution: a test that flags them shows it can reject here, so a 0 % can be read).
    Skipped with ``in_distribution=None``.
    """

    name = "in-distribution"
    requires = ("settings", "splits", "models", "fit_keys", "converged", "calibrations", "calibration_texts")
    provides = ("in_distribution", "masf_controls", "in_distribution_verdicts")
    frames = ("in_distribution", "masf_controls", "in_distribution_verdicts")

    def jobs(self, context) -> list:
        settings, sp = context["settings"], context["splits"]
        method = settings.in_distribution
        if method is None:
            return []
        control = context["calibration_texts"]["control"].tolist()
        key = (test_key(sp), method, settings.grid.tolist(), settings.segment, control)
        return [Job(run, (*key, run[1], context["fit_keys"][run]), method=method, n_examples=len(sp.y_test),
                    data={"masf": context["calibrations"][run]}, label=f"{model_label(run[0])} seed {run[1]}")
                for run in settings.runs]

    def compute(self, clf, job, context) -> dict:
        from ...ood import calibration_features, hidden_state_features, masked_pvalues

        settings, sp = context["settings"], context["splits"]
        masf, seed = job.data["masf"], job.run[1]
        pvalues = masked_pvalues(clf, masf, sp.X_test, sp.y_test.tolist(), method=settings.in_distribution,
                                 ratios=settings.grid.tolist(), segment=settings.segment,
                                 random_state=derive_seed(seed, 1))
        control = [sp.X_valid[i] for i in job.key[4]]
        negative = masf.pvalues(calibration_features(clf, control, random_state=derive_seed(seed, 5))) \
            if control else np.array([])
        encoding = clf.encode(sp.X_test)
        ids = random_token_ids(clf, encoding, derive_seed(seed, 6), settings.segment)
        positive = masf.pvalues(hidden_state_features(clf, encoding=encoding, input_ids=ids))
        return {"pvalues": pvalues, "negative": negative, "positive": positive}

    def finish(self, context, results) -> dict:
        from ...ood import report_rows

        if not results:
            return {"in_distribution": pd.DataFrame(), "masf_controls": pd.DataFrame(),
                    "in_distribution_verdicts": pd.DataFrame()}
        settings, level = context["settings"], context["settings"].rules["in_distribution"]["level"]
        parts, controls = [], []
        for job, payload in results.items():
            masf, converged = context["calibrations"][job.run], context["converged"][job.run]
            report = report_rows(payload["pvalues"], masf, method=settings.in_distribution)
            shares = [share_ci(round(p * n), n, settings.confidence_level)
                      for p, n in zip(report["proportion"], report["n_examples"])]
            report.insert(3, "proportion_low", [s[1] for s in shares])
            report.insert(4, "proportion_high", [s[2] for s in shares])
            report.insert(0, "seed", job.run[1])
            report.insert(0, "max_masking_ratio", job.run[0])
            report.insert(0, "model", model_label(job.run[0]))
            report["converged"] = converged
            parts.append(report)
            for control, what, p in (("negative", "held-out validation texts masked like the training batches",
                                      payload["negative"]),
                                     ("positive", "test texts with every maskable token random", payload["positive"])):
                flagged, low, high = share_ci(int(np.sum(np.asarray(p) < level)), len(p), settings.confidence_level)
                controls.append({"model": model_label(job.run[0]), "max_masking_ratio": job.run[0], "seed": job.run[1],
                                 "converged": converged, "control": control, "what": what, "n_examples": len(p),
                                 "flagged": flagged, "flagged_low": low, "flagged_high": high,
                                 "expected": masf.null_share(level), "level": level})
        frame = pd.concat(parts, ignore_index=True)
        first = ["model", "max_masking_ratio", "seed", "converged"]
        controls = pd.DataFrame(controls, columns=list(CONTROL_COLUMNS))
        return {"in_distribution": frame[first + [c for c in frame.columns if c not in first]],
                "masf_controls": controls, "in_distribution_verdicts": self._verdicts(context, results, controls)}

    @staticmethod
    def _verdicts(context, results, controls: pd.DataFrame) -> pd.DataFrame:
        """Per model, over its converged seeds (all of them, ``counted=False``, when none converged).

        The share flagged at masking ratios strictly between 0 and 1 (per text, then averaged, with a
        two-level bootstrap CI), the null share, both controls and the rules' verdict.
        """
        from .._stats import mean_over_texts

        settings = context["settings"]
        rules, level = settings.rules, settings.rules["in_distribution"]["level"]
        rows = []
        for ratio in settings.masking_ratios:
            runs = [(ratio, s) for s in settings.seeds if context["converged"][(ratio, s)]]
            counted = bool(runs)
            runs = runs or [(ratio, s) for s in settings.seeds]  # no fit counts: still say what MaSF found, marked
            payloads = [p for job, p in results.items() if job.run in runs]
            if not payloads:
                continue
            per_text = []
            for payload in payloads:
                p = payload["pvalues"]
                inner = p[(p["ratio"] > 0) & (p["ratio"] < 1)]
                per_text.append(inner.assign(flag=inner["p"] < level).groupby("example")["flag"].mean().to_numpy())
            share = mean_over_texts(np.stack(per_text), n_resamples=rules["bootstrap"]["n_resamples"],
                                    seed=rules["bootstrap"]["seed"])
            low, high = share.interval(settings.confidence_level)
            expected = float(np.mean([context["calibrations"][run].null_share(level) for run in runs]))
            mine = controls[(controls["max_masking_ratio"] == ratio) & controls["seed"].isin([s for _, s in runs])]
            control = {c: _pooled(mine[mine["control"] == c], settings.confidence_level) for c in ("negative",
                                                                                                  "positive")}
            verdict, reason = _in_distribution_verdict(low, high, expected, control, rules["in_distribution"])
            rows.append({"model": model_label(ratio), "max_masking_ratio": ratio, "counted": counted,
                         "n_seeds": len(runs),
                         "n_examples": share.n_examples, "flagged": share.estimate, "flagged_low": low,
                         "flagged_high": high, "expected": expected,
                         **{f"{c}_{k}": v for c, d in control.items() for k, v in d.items()},
                         "verdict": verdict, "reason": reason})
        return pd.DataFrame(rows)


def _pooled(rows: pd.DataFrame, confidence_level: float) -> dict:
    """A control's flagged share pooled over seeds (texts x seeds as trials), with its Wilson interval."""
    n = int(rows["n_examples"].sum())
    k = int(round(float((rows["flagged"] * rows["n_examples"]).sum())))
    share, low, high = share_ci(k, n, confidence_level)
    return {"share": share, "low": low, "high": high, "n": n}


def _in_distribution_verdict(low, high, expected, control, rules) -> tuple[str, str]:
    """The rules' in-distribution verdict from the flagged share's CI, the null share and the two controls."""
    limit = expected + rules["max_excess"]
    negative, positive = control["negative"], control["positive"]
    if negative["n"] and not negative["low"] <= expected <= negative["high"]:
        return "not readable", (f"the negative control's flagged share {negative['share']:.1%} "
                                f"[{negative['low']:.1%}, {negative['high']:.1%}] excludes the null share "
                                f"{expected:.1%}: the test is not calibrated on this model's held-out texts")
    if not positive["low"] > limit:
        return "not readable", (f"the positive control (random tokens) is flagged {positive['share']:.1%} "
                                f"[{positive['low']:.1%}, {positive['high']:.1%}], not clearly above "
                                f"{limit:.1%}: the test cannot show here that it would reject")
    if high <= limit:
        return "in-distribution", (f"flagged {high:.1%} at most, the null share {expected:.1%} + "
                                   f"{rules['max_excess']:.0%}")
    if low > limit:
        return "out of distribution", f"flagged {low:.1%} at least, above {expected:.1%} + {rules['max_excess']:.0%}"
    return "inconclusive", f"the CI [{low:.1%}, {high:.1%}] straddles {limit:.1%}"

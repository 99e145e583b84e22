"""The paper's four claims, judged from a reproduction's tables by the rules in fmmlearn/study/verdict_rules.json.

Every verdict here is read off the studies' own verdicts (paired comparisons with equivalence margins,
the in-distribution verdicts with their controls and power); this module only says which of them each claim
needs, as ``claims`` in the rules file words it.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["CLAIMS", "GRADIENT_FAMILIES", "MASKING_FAMILIES", "claims_table", "family"]

CLAIMS = {
    1: "masked fine-tuning keeps the unmasked performance",
    2: "masked inputs are in-distribution only after masked fine-tuning",
    3: "masking-based measures (leave-one-out, beam search) are the most faithful",
    4: "signed variants are often better",
}
#: Masking-based measures: the importance is the change of the output when tokens are masked.
MASKING_FAMILIES = ("loo", "beam")
#: Gradient-based measures (integrated gradients included).
GRADIENT_FAMILIES = ("grad", "inp-grad", "int-grad")
SIGN_PAIRS = (("loo-sign", "loo-abs"), ("int-grad-sign", "int-grad-abs"), ("inp-grad-sign", "inp-grad-abs"))


def family(measure: str) -> str:
    for prefix, name in (("beam-", "beam"), ("loo-", "loo"), ("int-grad-", "int-grad"), ("inp-grad-", "inp-grad"),
                         ("grad-", "grad"), ("rand", "rand")):
        if measure.startswith(prefix):
            return name
    return "other"


def _row(claim, dataset, verdict, note) -> dict:
    return {"claim": claim, "dataset": dataset, "verdict": verdict, "note": note}


def _between(comparisons, dataset, model, a, b):
    """The comparison of ``a - b`` (either orientation flipped to it), or ``None``."""
    from fmmlearn.study._tables import comparison_between

    return comparison_between(comparisons[comparisons["dataset"] == dataset], model, a, b)


def _difference(row) -> str:
    return f"{row['estimate']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}]"


def claim_1(tables, rules) -> list:
    margin = rules["comparisons"]["accuracy_margin"]
    rows = []
    models = tables["comparisons"][tables["comparisons"]["kind"] == "models"]
    for dataset in tables["performance"]["dataset"].unique():
        row = models[(models["dataset"] == dataset) & (models["first"] == "masked") & (models["second"] == "plain")]
        if row.empty:
            rows.append(_row(1, dataset, "inconclusive", "no seed where both models count"))
            continue
        row = row.iloc[0]
        if row["verdict"] in ("equivalent", "first ahead") or row["ci_low"] > -margin:
            verdict = "agrees"
        elif row["ci_high"] < -margin:
            verdict = "disagrees"
        else:
            verdict = "inconclusive"
        rows.append(_row(1, dataset, verdict, f"masked - plain {row['statistic']} {_difference(row)} "
                                              f"({row['verdict']}; margin ±{margin:g})"))
    return rows


def claim_2(tables, rules) -> list:
    rows, verdicts = [], tables["masf_verdicts"]
    for dataset in tables["performance"]["dataset"].unique():
        part = verdicts[verdicts["dataset"] == dataset].set_index("model") if len(verdicts) else pd.DataFrame()
        if not {"plain", "masked"} <= set(part.index):
            rows.append(_row(2, dataset, "inconclusive", "the in-distribution test did not run for both models"))
            continue
        plain, masked = part.loc["plain"], part.loc["masked"]
        note = (f"plain {plain['flagged']:.1%} flagged ({plain['verdict']}), masked {masked['flagged']:.1%} "
                f"({masked['verdict']}); null shares {plain['expected']:.1%} / {masked['expected']:.1%}")
        if "power" in part.columns:  # rules version 2: the power against the matched control
            note += f"; power against the matched control {plain['power']:.0%} / {masked['power']:.0%}"
        if not (bool(plain["counted"]) and bool(masked["counted"])):
            verdict = "inconclusive"
            note += "; a model has no counted fit"
        elif plain["verdict"] == "out of distribution" and masked["verdict"] == "in-distribution":
            verdict = "agrees"
        elif masked["verdict"] == "out of distribution" or plain["verdict"] == "in-distribution":
            verdict = "disagrees"
        else:
            verdict = "inconclusive"
        rows.append(_row(2, dataset, verdict, note))
    return rows


def claim_3(tables, rules) -> list:
    rows = []
    comparisons, summary = tables["comparisons"], tables["racu"]
    for dataset in summary["dataset"].unique():
        part = summary[(summary["dataset"] == dataset) & (summary["model"] == "masked")].dropna(subset=["acu"])
        masking = part[part["method"].map(family).isin(MASKING_FAMILIES)].sort_values("acu", ascending=False)
        others = [m for m in part["method"] if family(m) not in MASKING_FAMILIES]
        if masking.empty or not others:
            rows.append(_row(3, dataset, "inconclusive", "no masking-based and other measure to compare"))
            continue
        best = masking["method"].iloc[0]
        notes, ahead_of_best, beaten_or_tied, ahead_of_all = [], [], True, []
        for other in others:
            row = _between(comparisons, dataset, "masked", best, other)
            if row is None:
                beaten_or_tied = False
                continue
            notes.append(f"{best} - {other} {_difference(row)} {row['verdict']}")
            if row["verdict"] == "second ahead":
                ahead_of_best.append(other)
            if family(other) in GRADIENT_FAMILIES and row["verdict"] not in ("first ahead", "equivalent"):
                beaten_or_tied = False
            versus = [_between(comparisons, dataset, "masked", m, other) for m in masking["method"]]
            if all(v is not None and v["verdict"] == "second ahead" for v in versus):
                ahead_of_all.append(other)
        if ahead_of_all:
            verdict = "disagrees"
        elif not ahead_of_best and beaten_or_tied:
            verdict = "agrees"
        else:
            verdict = "inconclusive"
        rows.append(_row(3, dataset, verdict, "; ".join(notes)))
    return rows


def claim_4(tables, rules) -> list:
    comparisons, rows = tables["comparisons"], []
    for dataset in comparisons["dataset"].unique():
        found = []
        for model in ("masked", "plain"):
            for signed, unsigned in SIGN_PAIRS:
                row = _between(comparisons, dataset, model, signed, unsigned)
                if row is None:
                    continue
                word = {"first ahead": "signed ahead", "second ahead": "abs ahead"}.get(row["verdict"], row["verdict"])
                found.append((f"{model} {signed.rsplit('-', 1)[0]}", word, _difference(row)))
        if not found:
            continue
        signed = sum(w == "signed ahead" for _, w, _ in found)
        unsigned = sum(w == "abs ahead" for _, w, _ in found)
        verdict = "agrees" if signed >= len(found) / 2 and unsigned == 0 else \
            "disagrees" if unsigned >= len(found) / 2 else "inconclusive"
        rows.append(_row(4, dataset, verdict, "; ".join(f"{what}: {word} {d}" for what, word, d in found)))
    return rows


def _overall(claim: int, rows: list) -> dict:
    verdicts = [r["verdict"] for r in rows]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("agrees", "disagrees", "inconclusive")
                       if verdicts.count(v))
    if verdicts and all(v == "agrees" for v in verdicts):
        verdict = "agrees"
    elif verdicts and all(v == "disagrees" for v in verdicts):
        verdict = "disagrees"
    elif "agrees" in verdicts and "disagrees" in verdicts:
        verdict = "mixed"
    elif "agrees" in verdicts:
        verdict = "agrees where decided"
    elif "disagrees" in verdicts:
        verdict = "disagrees where decided"
    else:
        verdict = "inconclusive"
    return _row(claim, "overall", verdict, f"{len(rows)} dataset(s): {counts}" if rows else "nothing to judge")


def claims_table(tables: dict, rules: dict) -> pd.DataFrame:
    """Per claim and dataset a verdict, then an ``overall`` row per claim."""
    out = []
    for claim, judge in ((1, claim_1), (2, claim_2), (3, claim_3), (4, claim_4)):
        rows = judge(tables, rules)
        out += rows + [_overall(claim, rows)]
    return pd.DataFrame(out, columns=["claim", "dataset", "verdict", "note"])

"""benchmarks/reproduce.py end to end on the tiny model (toy sizes), and its verdict rules on hand-made numbers."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reproduce.py"

# Toy sizes: the tiny model's MaSF validation split is small (expected warnings), and it does not learn
# the real tweets or bAbI in one or two epochs (the degenerate-model warning is expected too).
pytestmark = [pytest.mark.filterwarnings("ignore:The level-3 fold has only:UserWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.slow]


@pytest.fixture(scope="module")
def reproduce():
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("reproduce", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["reproduce"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


DOC = """# Reproduction

Prose that the script must leave alone.

<!-- reproduce:claims -->
old claims
<!-- /reproduce:claims -->

More prose.
"""


@pytest.fixture(scope="module")
def run(reproduce, tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("reproduce")
    doc = root / "doc.md"
    doc.write_text(DOC)
    argv = ["--quick", "--model", str(tiny_model_dir), "--datasets", "tweets", "babi-1", "--seeds", "0", "1",
            "--epochs", "2", "--learning-rate", "3e-3", "--precision", "fp32", "--device", "cpu",
            "--n-bootstrap", "100", "--n-baseline", "2", "--measures", "rand", "inp-grad-sign", "inp-grad-abs",
            "loo-sign", "beam-sign-2", "--output", str(root / "out"), "--cache-dir", str(root / "cache"),
            "--doc", str(doc), "-v", "0"]
    out = reproduce.main(argv)
    return out, root, argv, doc


def read(root, name):
    return pd.read_csv(root / "out" / f"{name}.csv")


def test_every_table_and_figure_is_written(run):
    out, root, argv, _ = run
    files = {p.name for p in (root / "out").iterdir()}
    tables = {"performance", "performance_summary", "dropped", "random_masking", "racu", "masf", "supporting_facts",
              "pairwise", "claims", "erasure"}
    assert {f"{t}.csv" for t in tables} <= files
    assert {"reproduce.json", "reproduce.md", "random_masking.png", "racu.png", "acu.png", "masf.png",
            "supporting_facts.png"} <= files
    perf = read(root, "performance")
    assert len(perf) == 2 * 2 * 2  # datasets x models x seeds
    assert set(perf["model"]) == {"plain", "masked"} and set(perf["seed"]) == {0, 1}
    racu = read(root, "racu")
    # beam search runs on bAbI only; every other measure on both datasets, for both models
    assert set(racu.loc[racu["dataset"] == "tweets", "method"]) == {"inp-grad-sign", "inp-grad-abs", "loo-sign"}
    assert set(racu.loc[racu["dataset"] == "babi-1", "method"]) == {"inp-grad-sign", "inp-grad-abs", "loo-sign",
                                                                   "beam-sign-2"}
    masf = read(root, "masf")
    assert set(np.round(masf["ratio"], 2)) == {0.0, 0.25, 0.5, 0.75, 1.0}


def test_report_records_command_machine_precision_versions_and_runtime(run):
    _, root, argv, _ = run
    report = json.loads((root / "out" / "reproduce.json").read_text())
    assert report["command"] == "python benchmarks/reproduce.py " + " ".join(argv)
    assert {"avx2", "avx512_bf16", "amx"} <= set(report["machine"]["flags"])
    assert report["precision"]["inference"] == "fp32"
    assert {"torch", "transformers", "fmmlearn"} <= set(report["versions"])
    assert set(report["runtime"]) == {"(a) performance", "(b) random masking", "(c) RACU", "(d) MaSF",
                                      "(e) supporting facts", "(f) erasure"}
    assert all(t["seconds"] >= 0 for t in report["runtime"].values())
    assert report["facebook"]["available"] is False and "babi-1-facebook" in report["facebook"]["command"]
    md = (root / "out" / "reproduce.md").read_text()
    assert report["command"] in md


def test_convergence_filter_drops_babi_runs_at_or_below_one_half(run):
    _, root, _, _ = run
    perf, dropped, summary = read(root, "performance"), read(root, "dropped"), read(root, "performance_summary")
    babi = perf[perf["dataset"] == "babi-1"]
    expected = babi[babi["value"] <= 0.5]
    assert sorted(zip(dropped["model"], dropped["seed"])) == sorted(zip(expected["model"], expected["seed"]))
    assert (dropped["dataset"] == "babi-1").all() and (dropped["threshold"] == 0.5).all()
    assert perf.loc[perf["dataset"] == "tweets", "converged"].all()  # no threshold outside bAbI
    for row in summary.itertuples():
        kept = perf[(perf["dataset"] == row.dataset) & (perf["model"] == row.model) & perf["converged"]]
        assert row.n_seeds == len(kept)
        if len(kept):  # the mean is over the kept seeds only
            assert row.value == pytest.approx(kept["value"].mean())
        else:
            assert np.isnan(row.value)


def test_claim_verdicts_follow_the_rules_from_the_tables(run):
    _, root, _, _ = run
    claims, summary, pairwise = read(root, "claims"), read(root, "performance_summary"), read(root, "pairwise")
    assert set(claims["claim"]) == {1, 2, 3, 4}
    assert set(claims["verdict"]) <= {"agrees", "disagrees", "inconclusive", "signed better", "abs better", "tie"}
    for row in claims[(claims["claim"] == 1) & (claims["dataset"] != "overall")].itertuples():
        masked = summary[(summary["dataset"] == row.dataset) & (summary["model"] == "masked")].iloc[0]
        if np.isnan(masked["diff_low"]):
            assert row.verdict == "inconclusive"
            continue
        assert row.low == pytest.approx(masked["diff_low"]) and row.high == pytest.approx(masked["diff_high"])
        expected = ("agrees" if masked["diff_low"] >= -0.05 else
                    "disagrees" if masked["diff_high"] < -0.05 else "inconclusive")
        assert row.verdict == expected
    signed = pairwise[(pairwise["claim"] == "claim 4") & (pairwise["model"] == "masked")
                      & (pairwise["result"] != "not compared")]
    rows4 = claims[(claims["claim"] == 4) & (claims["dataset"] != "overall")]
    assert len(rows4) == len(signed)
    for row, pair in zip(rows4.itertuples(), signed.itertuples()):
        expected = "signed better" if pair.low > 0 else "abs better" if pair.high < 0 else "tie"
        assert row.verdict == expected and row.estimate == pytest.approx(pair.delta_acu)
    for claim in (1, 2, 3):
        per_dataset = claims.loc[(claims["claim"] == claim) & (claims["dataset"] != "overall"), "verdict"].tolist()
        overall = claims.loc[(claims["claim"] == claim) & (claims["dataset"] == "overall"), "verdict"].item()
        expected = ("agrees" if per_dataset and all(v == "agrees" for v in per_dataset) else
                    "disagrees" if "disagrees" in per_dataset and "agrees" not in per_dataset else "inconclusive")
        assert overall == expected


def test_claims_table_changes_with_the_numbers(reproduce, run):
    out, _, _, _ = run
    tables = out["tables"]
    summary = tables["performance_summary"].copy()
    masked = (summary["dataset"] == "tweets") & (summary["model"] == "masked")

    def claim1(low, high):
        summary.loc[masked, ["diff", "diff_low", "diff_high"]] = [(low + high) / 2, low, high]
        claims = reproduce.claims_table(summary, tables["masf"], tables["pairwise"])
        return claims.loc[(claims["claim"] == 1) & (claims["dataset"] == "tweets"), "verdict"].item()

    assert claim1(-0.02, 0.04) == "agrees"
    assert claim1(-0.20, -0.10) == "disagrees"
    assert claim1(-0.12, 0.03) == "inconclusive"

    masf = tables["masf"].copy()
    inner = (masf["dataset"] == "tweets") & (masf["ratio"] > 0) & (masf["ratio"] < 1)
    masf.loc[inner & (masf["model"] == "plain"), "mean"] = 0.6
    masf.loc[inner & (masf["model"] == "masked"), "mean"] = 0.0
    masf.loc[masf["dataset"] == "tweets", "n_examples"] = 400  # 16 toy examples cannot show 0 % is below 10 %
    claims = reproduce.claims_table(tables["performance_summary"], masf, tables["pairwise"])
    assert claims.loc[(claims["claim"] == 2) & (claims["dataset"] == "tweets"), "verdict"].item() == "agrees"
    masf.loc[inner & (masf["model"] == "plain"), "mean"] = 0.0
    claims = reproduce.claims_table(tables["performance_summary"], masf, tables["pairwise"])
    assert claims.loc[(claims["claim"] == 2) & (claims["dataset"] == "tweets"), "verdict"].item() == "disagrees"


def test_paired_acu_difference_is_the_area_between_the_two_curves(run):
    out, _, _, _ = run
    pair = out["tables"]["pairwise"]
    pair = pair[(pair["result"] != "not compared") & (pair["dataset"] == "tweets") & (pair["model"] == "plain")]
    row = pair.iloc[0]
    outcomes = next(r for r in out["runs"] if r["plan"].name == "tweets")["result"].outcomes
    rows = outcomes[(outcomes["model"] == "plain") & (outcomes["draw"] == 0)]
    common = set(rows.loc[rows["method"] == row["first"], "example"]) & set(rows.loc[rows["method"] == row["second"],
                                                                                   "example"])
    rows = rows[rows["example"].isin(common)]
    curves = rows.groupby(["method", "ratio"])["correct"].mean().unstack("ratio")  # seeds share the examples
    grid = curves.columns.to_numpy(dtype=float)
    expected = np.trapezoid(curves.loc[row["second"]].to_numpy() - curves.loc[row["first"]].to_numpy(), x=grid)
    assert row["delta_acu"] == pytest.approx(expected)
    assert row["n_examples"] == len(common)


def test_supporting_fact_table_covers_babi_with_chance_rates(run):
    _, root, _, _ = run
    support = read(root, "supporting_facts")
    perf = read(root, "performance")
    kept = perf[(perf["dataset"] == "babi-1") & perf["converged"]]
    # only converged runs are summarised; the per-example hits of every run are in the frame returned
    assert set(support["model"]) <= set(kept["model"])
    if len(support):
        assert set(support["subset"]) <= {"random", "shortest"}
        assert ((support["chance"] > 0) & (support["chance"] <= 1)).all()
        assert (support.loc[support["subset"] == "random", "method"] != "beam-sign-2").all()


def test_supporting_fact_hits_of_every_run_use_the_test_spans(run):
    out, _, _, _ = run
    babi = next(r for r in out["runs"] if r["plan"].name == "babi-1")
    hits = babi["support"]
    assert len(hits) and set(hits["model"]) == {"plain", "masked"} and set(hits["seed"]) == {0, 1}
    assert ((hits["hit"] >= 0) & (hits["hit"] <= 1)).all()
    # chance depends on the example only: the same for every model, seed and measure
    assert (hits.groupby(["subset", "example"])["chance"].nunique() == 1).all()
    assert set(hits.loc[hits["subset"] == "shortest", "method"]) == {"rand", "inp-grad-sign", "inp-grad-abs",
                                                                     "loo-sign", "beam-sign-2"}


def test_doc_blocks_are_replaced_and_the_prose_kept(run):
    _, root, _, doc = run
    text = doc.read_text()
    assert "old claims" not in text
    assert text.startswith("# Reproduction\n\nProse that the script must leave alone.")
    assert text.rstrip().endswith("More prose.")
    claims = read(root, "claims")
    block = text.split("<!-- reproduce:claims -->")[1].split("<!-- /reproduce:claims -->")[0]
    for verdict in claims.loc[claims["dataset"] == "overall", "verdict"]:
        assert f"**{verdict}**" in block


def test_rerun_is_served_from_the_cache(reproduce, run):
    out, root, argv, _ = run
    again = reproduce.main([a for a in argv if a not in ("--doc", str(root / "doc.md"))])
    assert all(t["cached"] == t["jobs"] for t in again["report"]["runtime"].values())
    pd.testing.assert_frame_equal(again["tables"]["claims"], out["tables"]["claims"])


# --------------------------------------------------------------------------- the rules, by hand


def test_noninferiority_rule(reproduce):
    rule = reproduce.noninferiority_verdict
    assert rule(-0.05, 0.1, 0.05) == "agrees"        # the whole CI at or above -margin
    assert rule(-0.3, -0.051, 0.05) == "disagrees"   # the whole CI below -margin
    assert rule(-0.06, 0.1, 0.05) == "inconclusive"
    assert rule(np.nan, np.nan, 0.05) == "inconclusive"


def test_in_distribution_rule(reproduce):
    state, verdict = reproduce.ood_state, reproduce.in_distribution_verdict
    assert state(0.02, 0.10, 0.10) == "in-distribution"
    assert state(0.11, 0.30, 0.10) == "out-of-distribution"
    assert state(0.05, 0.20, 0.10) == "unclear"
    assert verdict("out-of-distribution", "in-distribution") == "agrees"
    assert verdict("in-distribution", "in-distribution") == "disagrees"
    assert verdict("out-of-distribution", "out-of-distribution") == "disagrees"
    assert verdict("out-of-distribution", "unclear") == "inconclusive"


def test_masking_measures_rule(reproduce):
    rule = reproduce.masking_measures_verdict
    assert rule({"grad-l2": ["first", "tie"], "inp-grad-sign": ["tie", "first"]}) == "agrees"
    assert rule({"grad-l2": ["first"], "inp-grad-sign": ["second", "second"]}) == "disagrees"
    assert rule({"grad-l2": ["first"], "inp-grad-sign": ["tie", "second"]}) == "inconclusive"
    assert rule({}) == "inconclusive"


def test_signed_and_overall_rules(reproduce):
    assert reproduce.signed_verdict(["first", "tie"]) == "agrees"
    assert reproduce.signed_verdict(["first", "tie", "tie"]) == "inconclusive"
    assert reproduce.signed_verdict(["tie", "second"]) == "disagrees"
    assert reproduce.signed_verdict(["first", "second", "first"]) == "inconclusive"
    assert reproduce.overall_verdict(["agrees", "agrees"]) == "agrees"
    assert reproduce.overall_verdict(["disagrees", "inconclusive"]) == "disagrees"
    assert reproduce.overall_verdict(["agrees", "disagrees"]) == "inconclusive"


def test_two_level_bootstrap_means(reproduce):
    values = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # 2 seeds x 3 examples
    weights = np.array([[1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])

    class Picks:  # seeds drawn: (0, 1), (1, 1), (0, 0)
        def integers(self, low, high, size):
            return np.array([[0, 1], [1, 1], [0, 0]])

    out = reproduce.seed_resampled_means(values, weights, Picks())
    np.testing.assert_allclose(out, [(1 / 3 + 1) / 2, 1.0, 0.0])


def test_token_hits_share_ties_and_count_overlaps(reproduce):
    frame = pd.DataFrame({"segment": ["A", "A", "A", "A", "B"], "char_start": [0, 5, 10, 15, 0],
                          "char_end": [4, 9, 14, 19, 5], "importance": [0.1, 0.9, 0.9, 0.2, 5.0]})
    hit, chance = reproduce._token_hits(frame, [(8, 12)])  # overlaps tokens 2 and 3 (of segment A)
    assert hit == pytest.approx(1.0) and chance == pytest.approx(0.5)
    hit, chance = reproduce._token_hits(frame, [(10, 14)])  # only token 3: one of the two tied top tokens
    assert hit == pytest.approx(0.5) and chance == pytest.approx(0.25)


def test_erasure_table_is_the_studys_aopc_rows_over_converged_seeds(run):
    from fmmlearn.study import erasure_by_model

    out, root, _, _ = run
    table = read(root, "erasure")
    tweets = next(r for r in out["runs"] if r["plan"].name == "tweets")
    expected = erasure_by_model(tweets["result"]).query("aopc")
    mine = table[table["dataset"] == "tweets"]
    assert len(mine) == len(expected) > 0
    assert set(mine["method"]) == {"loo-sign", "rand"} and set(mine["mode"]) == {"comprehensiveness", "sufficiency"}
    np.testing.assert_allclose(mine["mean"].to_numpy(), expected["mean"].to_numpy(dtype=float))
    assert "## erasure" in (root / "out" / "reproduce.md").read_text()

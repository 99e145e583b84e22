"""benchmarks/reproduce.py end to end on the tiny model (toy sizes), its claim rules on hand-made tables, and
the doc's promise that every number of its prose comes from a generated block."""

import importlib.util
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
DOC = Path(__file__).resolve().parents[2] / "docs" / "reproduction.md"

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.slow]


def _load(name):
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reproduce():
    return _load("reproduce")


@pytest.fixture(scope="module")
def claims():
    return _load("claims")


PAGE = """# Reproduction

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
    doc.write_text(PAGE)
    argv = ["--quick", "--model", str(tiny_model_dir), "--datasets", "tweets", "babi-1", "--seeds", "0", "1",
            "--epochs", "2", "--learning-rate", "3e-3", "--precision", "fp32", "--device", "cpu",
            "--n-bootstrap", "100", "--n-baseline", "2", "--measures", "rand", "inp-grad-sign", "inp-grad-abs",
            "loo-sign", "loo-abs", "beam-sign-2", "--output", str(root / "out"), "--cache-dir", str(root / "cache"),
            "--doc", str(doc), "-v", "0"]
    out = reproduce.main(argv)
    return out, root, argv, doc


def test_every_table_and_figure_is_written(run):
    out, root, _, _ = run
    files = {p.name for p in (root / "out").iterdir()}
    tables = {"performance", "random_masking", "racu", "comparisons", "masf", "masf_verdicts", "supporting_facts",
              "erasure", "claims"}
    assert {f"{t}.csv" for t in tables} <= files
    assert {"reproduce.json", "reproduce.md", "random_masking.png", "acu.png", "masf.png"} <= files
    perf = pd.read_csv(root / "out" / "performance.csv")
    assert len(perf) == 2 * 2 * 2  # datasets x models x seeds
    assert set(perf["baseline"]) == {"majority class", "question-blind"}  # bAbI-1: the question-ignoring rule
    racu = out["tables"]["racu"]
    assert set(racu.loc[racu["dataset"] == "babi-1", "method"]) >= {"loo-sign", "loo-abs", "beam-sign-2"}
    assert "beam-sign-2" not in set(racu.loc[racu["dataset"] == "tweets", "method"])  # beam search: bAbI only
    claims = pd.read_csv(root / "out" / "claims.csv")
    assert set(claims["claim"]) == {1, 2, 3, 4} and (claims["dataset"] == "overall").sum() == 4


def test_the_report_records_the_rules_and_whether_they_changed(run):
    from fmmlearn.study._rules import RULES_FILE, rules_digest

    _, root, argv, _ = run
    report = json.loads((root / "out" / "reproduce.json").read_text())
    assert report["command"] == "python benchmarks/reproduce.py " + " ".join(argv)
    rules = report["rules"]
    assert rules["sha256"] == rules_digest(RULES_FILE) and rules["version"] >= 1
    assert rules["path"] == "fmmlearn/study/verdict_rules.json"
    assert {"avx2", "avx512_bf16", "amx"} <= set(report["machine"]["flags"])
    assert set(report["runtime"]) >= {"(a) performance", "(c) faithfulness and comparisons", "(d) in-distribution"}


def test_a_rules_file_changed_after_the_start_is_said(reproduce):
    from fmmlearn.study._rules import RULES_FILE, rules_digest

    committed_later = reproduce.rules_record(0.0, rules_digest(RULES_FILE))  # the run "started" in 1970
    if committed_later["commit"] is not None:
        assert "the rules file was committed after the run started" in committed_later["changed_after_start"]
    during = reproduce.rules_record(time.time() + 3600, "not the hash it had")
    assert "the rules file changed while the run was going on" in during["changed_after_start"]
    block = reproduce._rules_block({"rules": during, "started": "now"})
    assert "**The rules changed after the run started:**" in block


def test_doc_blocks_are_replaced_and_the_prose_kept(run):
    _, _, _, doc = run
    text = doc.read_text()
    assert "Prose that the script must leave alone." in text and "More prose." in text
    assert "old claims" not in text and "| claim | dataset | verdict | numbers |" in text


def test_rerun_is_served_from_the_cache(reproduce, run):
    _, root, argv, _ = run
    again = reproduce.main(argv)
    for r in again["runs"]:
        assert r["result"].timings["cached"].all()
    pd.testing.assert_frame_equal(again["claims"], run[0]["claims"])


def test_a_bad_cache_entry_is_one_line_on_stderr_and_recomputed(reproduce, run, tmp_path, capsys):
    import shutil
    import warnings

    from fmmlearn.exceptions import CacheWarning
    from helpers.tiny_study import damage_entry

    _, root, argv, _ = run
    shutil.copytree(root / "cache", tmp_path / "cache")
    entry = sorted(p for p in (tmp_path / "cache" / "tweets" / "stages" / "faithfulness").iterdir()
                   if not p.name.startswith("."))[0]
    damage_entry(entry, "truncated")
    moved = {"--output": tmp_path / "out", "--cache-dir": tmp_path / "cache", "--doc": tmp_path / "doc.md"}
    (tmp_path / "doc.md").write_text(PAGE)
    again = list(argv)
    for option, value in moved.items():
        again[again.index(option) + 1] = str(value)
    capsys.readouterr()
    with warnings.catch_warnings():
        # this module ignores UserWarnings; the script's users do not, and a repeated report would show
        warnings.simplefilter("always", CacheWarning)
        out = reproduce.main(again)
    lines = [line for line in capsys.readouterr().err.splitlines() if "CacheWarning" in line]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"warning: cache entry {entry} (stage 'faithfulness') is corrupt: the checksum of ")
    assert lines[0].endswith("; recomputing it. [CacheWarning]")
    timings = [r["result"].timings for r in out["runs"]]
    assert sum((~t.loc[t["stage"] == "faithfulness", "cached"]).sum() for t in timings) == 1


# --------------------------------------------------------------------------- the claim rules on hand-made tables


RULES = {"comparisons": {"accuracy_margin": 0.03, "acu_margin": 0.05}}


def _comparison(dataset, model, first, second, estimate, low, high, verdict, kind="measures"):
    return {"dataset": dataset, "kind": kind, "model": model, "first": first, "second": second,
            "statistic": "accuracy difference" if kind == "models" else "ACU difference", "estimate": estimate,
            "ci_low": low, "ci_high": high, "margin": 0.05, "verdict": verdict}


def _tables(comparisons=(), verdicts=(), racu=()):
    return {"performance": pd.DataFrame({"dataset": ["d"]}), "comparisons": pd.DataFrame(list(comparisons)),
            "masf_verdicts": pd.DataFrame(list(verdicts)), "racu": pd.DataFrame(list(racu))}


@pytest.mark.parametrize("low, high, verdict, expected", [
    (-0.01, 0.02, "equivalent", "agrees"), (-0.02, 0.06, "inconclusive", "agrees"),
    (-0.12, -0.04, "second ahead", "disagrees"), (-0.08, 0.01, "inconclusive", "inconclusive"),
])
def test_claim_1_is_non_inferiority_with_the_accuracy_margin(claims, low, high, verdict, expected):
    tables = _tables([_comparison("d", "masked vs plain", "masked", "plain", (low + high) / 2, low, high, verdict,
                                  kind="models")])
    assert claims.claim_1(tables, RULES)[0]["verdict"] == expected


def _verdict(model, verdict, counted=True):
    return {"dataset": "d", "model": model, "verdict": verdict, "counted": counted, "flagged": 0.1, "expected": 0.049}


@pytest.mark.parametrize("plain, masked, expected", [
    ("out of distribution", "in-distribution", "agrees"), ("in-distribution", "in-distribution", "disagrees"),
    ("out of distribution", "out of distribution", "disagrees"), ("out of distribution", "not readable",
                                                                   "inconclusive"),
])
def test_claim_2_needs_plain_out_and_masked_in(claims, plain, masked, expected):
    tables = _tables(verdicts=[_verdict("plain", plain), _verdict("masked", masked)])
    assert claims.claim_2(tables, RULES)[0]["verdict"] == expected


def _racu(method, acu):
    return {"dataset": "d", "model": "masked", "method": method, "acu": acu}


@pytest.mark.parametrize("vs_grad, vs_ig, expected", [
    ("first ahead", "equivalent", "agrees"), ("first ahead", "inconclusive", "inconclusive"),
    ("second ahead", "first ahead", "disagrees"), ("equivalent", "first ahead", "agrees"),
])
def test_claim_3_needs_the_best_masking_measure_unbeaten(claims, vs_grad, vs_ig, expected):
    comparisons = [_comparison("d", "masked", "loo-sign", "grad-l2", 0.1, 0.05, 0.15, vs_grad),
                   _comparison("d", "masked", "loo-sign", "int-grad-sign", 0.0, -0.02, 0.02, vs_ig)]
    tables = _tables(comparisons, racu=[_racu("loo-sign", 0.4), _racu("grad-l2", 0.2), _racu("int-grad-sign", 0.38)])
    assert claims.claim_3(tables, RULES)[0]["verdict"] == expected


def test_claim_4_counts_the_sign_abs_pairs_of_both_models(claims):
    comparisons = [_comparison("d", "masked", "loo-sign", "loo-abs", 0.05, 0.02, 0.08, "first ahead"),
                   _comparison("d", "plain", "loo-abs", "loo-sign", -0.06, -0.09, -0.03, "second ahead"),
                   _comparison("d", "masked", "inp-grad-sign", "inp-grad-abs", 0.0, -0.01, 0.02, "equivalent")]
    row = claims.claim_4(_tables(comparisons), RULES)[0]
    assert row["verdict"] == "agrees" and "plain loo: signed ahead" in row["note"]  # the flipped pair counts
    comparisons.append(_comparison("d", "plain", "int-grad-sign", "int-grad-abs", -0.1, -0.2, -0.05, "second ahead"))
    assert claims.claim_4(_tables(comparisons), RULES)[0]["verdict"] == "inconclusive"


def test_overall_verdicts(claims):
    rows = lambda *v: [{"verdict": x} for x in v]  # noqa: E731
    assert claims._overall(1, rows("agrees", "agrees"))["verdict"] == "agrees"
    assert claims._overall(1, rows("agrees", "inconclusive"))["verdict"] == "agrees where decided"
    assert claims._overall(1, rows("agrees", "disagrees"))["verdict"] == "mixed"
    assert claims._overall(1, rows("inconclusive"))["verdict"] == "inconclusive"


# --------------------------------------------------------------------------- the doc itself


def _prose(text: str) -> str:
    """The hand-written part of the page: generated blocks, code fences and inline code (settings) removed."""
    text = re.sub(r"<!-- reproduce:([\w-]+) -->.*?<!-- /reproduce:\1 -->", " ", text, flags=re.S)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    return re.sub(r"`[^`]*`", " ", text)


def test_every_number_of_the_docs_prose_is_in_a_generated_block():
    text = DOC.read_text(encoding="utf-8")
    generated = " ".join(re.findall(r"<!-- reproduce:[\w-]+ -->(.*?)<!-- /reproduce:", text, flags=re.S))
    numbers = re.findall(r"(?<![\w.])(\d+\.\d+|\d+(?:\.\d+)?\s?%)", _prose(text))
    stray = [n for n in numbers if n.replace(" ", "") not in generated.replace(" ", "")]
    assert not stray, f"numbers in docs/reproduction.md's prose that no generated block has: {stray}"


def test_the_check_of_the_prose_can_fail():
    text = "Claim 1 holds with 0.046 less accuracy.\n<!-- reproduce:x -->\n0.050\n<!-- /reproduce:x -->"
    assert re.findall(r"(?<![\w.])(\d+\.\d+|\d+(?:\.\d+)?\s?%)", _prose(text)) == ["0.046"]


def test_the_doc_has_every_block_the_script_writes(reproduce):
    text = DOC.read_text(encoding="utf-8")
    names = set(re.findall(r"<!-- reproduce:([\w-]+) -->", text))
    expected = {"setup", "rules", "runtime", "claims", "reading-summary", "reading-1", "reading-2", "reading-3",
                "reading-4", "reading-support", "performance", "random-masking", "racu", "comparisons", "masf",
                "masf-ratios", "supporting-facts", "erasure", "decision-cost"}
    assert names == expected
    assert np.all([f"<!-- /reproduce:{n} -->" in text for n in names])


def test_benchmarks_find_packages_without_a_bare_pip():
    """A venv's python that is not activated has no matching ``pip`` on PATH: benchmarks use importlib."""
    bare_pip = re.compile(r"""\[\s*["']pip["']""")
    offenders = [path.name for path in (Path(__file__).parents[2] / "benchmarks").glob("*.py")
                 if bare_pip.search(path.read_text())]
    assert offenders == [], f"benchmarks calling a bare pip: {offenders}"

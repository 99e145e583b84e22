"""The verdict rules (docs/reproduction.md): the verdict of an interval, alpha spending, the versioned rules file."""

import json

import pytest

from fmmlearn.study._rules import RULES_FILE, comparison_verdict, load_rules, rules_digest, spent_level


@pytest.mark.parametrize("low, high, verdict", [
    (-0.01, 0.02, "equivalent"), (0.06, 0.12, "first ahead"), (0.01, 0.04, "equivalent"),
    (0.02, 0.09, "first ahead"), (-0.09, -0.06, "second ahead"), (-0.02, 0.09, "inconclusive"),
    (float("nan"), 0.01, "inconclusive"),
])
def test_comparison_verdict(low, high, verdict):
    assert comparison_verdict(low, high, 0.05) == verdict


def test_alpha_spending_levels_sum_to_at_most_alpha():
    spent = [1 - spent_level(0.95, r) for r in range(30)]
    assert spent[0] == pytest.approx(0.025) and spent[1] == pytest.approx(0.0125)
    assert sum(spent) < 0.05 and spent_level(0.95, None) == 0.95


def test_the_shipped_rules_load_and_their_digest_is_the_files():
    import hashlib

    rules = load_rules()
    assert rules["version"] >= 1 and rules["comparisons"]["acu_margin"] > 0
    assert rules_digest() == hashlib.sha256(RULES_FILE.read_bytes()).hexdigest()


@pytest.mark.parametrize("change, message", [
    ({"comparisons": {"acu_margin": "wide"}}, "comparisons.acu_margin must be float"),
    ({"bootstrap": {"n_resamples": 1.5}}, "bootstrap.n_resamples must be int"),
    ({"confidence_level": 1.5}, "confidence_level must be in"),
    ({"stability": {"racu_max_ci_width": -1}}, "finite number >= 0"),
])
def test_bad_rules_are_named(change, message):
    with pytest.raises(ValueError, match=message):
        load_rules(change)


def test_a_rules_file_of_ones_own_is_read_and_checked(tmp_path):
    rules = json.loads(RULES_FILE.read_text())
    rules["comparisons"]["acu_margin"] = 0.01
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(rules))
    assert load_rules(path)["comparisons"]["acu_margin"] == 0.01
    del rules["budget"]
    path.write_text(json.dumps(rules))
    with pytest.raises(ValueError, match="budget.block is missing"):
        load_rules(path)


def test_rules_version_2_records_why_the_in_distribution_rule_changed():
    rules = load_rules()
    assert rules["version"] == 2 and rules["in_distribution"]["min_power"] == 0.8
    assert "matched positive control" in rules["changes"]["2"] and "not readable" in rules["changes"]["2"]

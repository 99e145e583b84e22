"""The in-distribution verdict of the rules (version 2): power, the negative control, the straddling share."""

import pytest

from fmmlearn.study._rules import load_rules


def _verdict(flagged, power=(0.95, 0.9, 0.98), negative=None, multiplier=1.0, expected=0.049):
    from fmmlearn.study.stages.in_distribution import in_distribution_verdict

    negative = negative or {"share": 0.05, "low": 0.01, "high": 0.16, "n": 40}
    return in_distribution_verdict(flagged, expected, negative, power, multiplier, load_rules()["in_distribution"])


@pytest.mark.parametrize("flagged, power, negative, multiplier, verdict, reason", [
    # out of distribution needs no positive control: a low power changes nothing
    ((0.40, 0.30, 0.50), (0.10, 0.05, 0.15), None, 1.0, "out of distribution", "flagged 30.0% at least"),
    # in-distribution needs a powered test
    ((0.01, 0.0, 0.03), (0.95, 0.90, 0.98), None, 1.0, "in-distribution", "power 95%"),
    ((0.01, 0.0, 0.03), (0.60, 0.55, 0.65), None, 2.7, "inconclusive", "about 2.7x as many"),
    ((0.01, 0.0, 0.03), (0.60, 0.55, 0.65), None, float("inf"), "inconclusive", "another detector is needed"),
    ((0.01, 0.0, 0.03), (0.82, 0.78, 0.86), None, 1.0, "inconclusive", "more test texts would narrow it"),
    # a share whose interval straddles the limit
    ((0.09, 0.05, 0.14), (0.95, 0.9, 0.98), None, 1.0, "inconclusive", "straddles"),
    # a test that does not hold its level is not read at all
    ((0.40, 0.30, 0.50), (0.95, 0.9, 0.98), {"share": 0.3, "low": 0.2, "high": 0.4, "n": 40}, 1.0, "not readable",
     "does not hold its level"),
])
def test_in_distribution_verdicts_follow_the_rules(flagged, power, negative, multiplier, verdict, reason):
    got, why = _verdict(flagged, power, negative, multiplier)
    assert got == verdict and reason in why


def test_a_negative_control_within_the_rules_excess_holds_the_level():
    """5 of 30 held-out texts flagged (Wilson [7.3%, 33.6%]) against a null share of 5 %: not clearly above the
    null share plus the 5 points the verdicts tolerate, so the plain model's 87 % still reads out of distribution."""
    got, _ = _verdict((0.87, 0.86, 0.89), negative={"share": 5 / 30, "low": 0.073, "high": 0.336, "n": 30},
                      expected=0.05)
    assert got == "out of distribution"


def test_a_negative_control_below_the_null_share_holds_the_level():
    """A conservative test (fewer flags than the null share) is not a reason to distrust it."""
    got, _ = _verdict((0.01, 0.0, 0.03), negative={"share": 0.0, "low": 0.0, "high": 0.09, "n": 40})
    assert got == "in-distribution"

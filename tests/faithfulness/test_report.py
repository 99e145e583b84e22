"""faithfulness_report and its plot (docs/faithfulness.md, "Reports and plots")."""

import pandas as pd
import pytest

from fmmlearn.faithfulness import FaithfulnessReport, faithfulness_report
from fmmlearn.plotting import plot_faithfulness

from helpers.data import make_sentiment
from helpers.faithfulness import bag  # noqa: F401 (bag is a fixture)


@pytest.fixture(scope="module")
def bag_data():
    return make_sentiment(120, seed=1)


def test_report_and_plot(bag, bag_data, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    report = faithfulness_report(bag, *bag_data, methods=["loo-sign", "rand"], n_repeats=3, random_state=0)
    assert isinstance(report, FaithfulnessReport)
    curves, summary = report
    assert summary["method"].tolist() == ["loo-sign", "rand"]
    loo, rand = summary.iloc[0], summary.iloc[1]
    assert loo["racu"] > 1 and loo["racu_low"] <= loo["racu"] <= loo["racu_high"]
    assert abs(rand["racu"]) < 0.3 and loo["signed"] and not rand["signed"] and loo["n_repeats"] == 3
    counts = curves.groupby(["role", "method"]).size().to_dict()
    assert counts == {("baseline", "rand"): 33, ("method", "loo-sign"): 11, ("method", "rand"): 33}
    ax = report.plot(path=tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 0
    styles = {line.get_label(): line.get_linestyle() for line in ax.lines}
    assert styles == {"rand (baseline)": "--", "loo-sign": "-", "rand": "-"}
    with pytest.raises(ValueError, match="mixes metrics"):
        plot_faithfulness(pd.concat([curves, curves.assign(metric="loss")]))

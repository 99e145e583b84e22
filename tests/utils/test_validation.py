"""Shared argument checks of fmmlearn.utils._validation."""

import pytest

from fmmlearn.faithfulness import check_ratios


def test_check_ratios_defaults_and_endpoints():
    assert check_ratios().tolist() == pytest.approx([k / 10 for k in range(11)])
    assert check_ratios([0.2, 0.4]).tolist() == [0.2, 0.4]
    with pytest.raises(ValueError, match="my_ratios"):
        check_ratios([0.2, 0.2], name="my_ratios")

"""The study's numbers are pinned: a fixed tiny study gives the frames recorded before the refactor.

``tests/data/study_reference/`` was written by ``tests/data/make_study_reference.py`` with the
study engine as it was before it became a pipeline of stage objects (commit dcf0207), then
extended by the columns and frames of the verdicts (every earlier column unchanged). Restructuring
the engine must not move a single number: predictions, counts and everything computed from them
(curves, RACU, verdicts) are compared to the 9 significant digits the reference keeps.  Numbers read
off the model's fp32 outputs (probabilities, importances, erasure means) are compared within fp32
rounding -- a few units in the last place of a value of order one -- because another CPU kind runs
other fp32 kernels (AVX2, AVX-512, AMX reorder the sums of a matmul).
"""

import numpy as np
import pandas as pd
import pytest

from helpers.study_reference import COMPARED, REFERENCE_DIR, reference_frames

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::fmmlearn.exceptions.FaithfulnessWarning")


#: The 9 significant digits the reference CSVs keep.
EXACT_TOLERANCE = {"rtol": 2e-8, "atol": 1e-12}
#: fp32 rounding of values of order one (its unit in the last place near 1 is 1.2e-7), a few units.
FP32_OUTPUT_TOLERANCE = {"rtol": 1e-6, "atol": 5e-7}
#: Columns read off the model's fp32 outputs rather than computed from its predictions.
FROM_FP32_OUTPUTS = {("outcomes", "gold_proba"), ("explanations", "importance"), ("erasure", "mean"),
                     ("erasure", "ci_low"), ("erasure", "ci_high")}


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    return reference_frames(tmp_path_factory.mktemp("study-reference"))


def _normalised(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns as the CSV round trip gives them (booleans and numbers by value, text as text)."""
    out = {}
    for column in frame.columns:
        values = frame[column]
        if values.dtype == object and set(values.dropna().astype(str)) <= {"True", "False"}:
            values = values.map({"True": True, "False": False, True: True, False: False}).astype("boolean")
        if pd.api.types.is_bool_dtype(values) or pd.api.types.is_numeric_dtype(values):
            out[column] = pd.to_numeric(values.astype("float64"), errors="coerce")
        else:
            out[column] = values.astype(object).where(values.notna(), None).map(
                lambda v: None if v is None else str(v))
    return pd.DataFrame(out)


@pytest.mark.parametrize("name", sorted(COMPARED))
def test_study_frame_equals_the_pinned_reference(frames, name):
    expected = pd.read_csv(REFERENCE_DIR / f"{name}.csv", keep_default_na=True)
    actual = frames[name]
    assert list(actual.columns) == list(expected.columns), f"{name}: columns changed"
    assert len(actual) == len(expected), f"{name}: {len(actual)} rows, the reference has {len(expected)}"
    actual, expected = _normalised(actual), _normalised(expected)
    for column in expected.columns:
        a, e = actual[column], expected[column]
        if pd.api.types.is_numeric_dtype(e) and pd.api.types.is_numeric_dtype(a):
            tolerance = FP32_OUTPUT_TOLERANCE if (name, column) in FROM_FP32_OUTPUTS else EXACT_TOLERANCE
            np.testing.assert_allclose(a.to_numpy(float), e.to_numpy(float), **tolerance,
                                       equal_nan=True, err_msg=f"{name}.{column}")
        else:
            assert a.tolist() == e.tolist(), f"{name}.{column} differs"

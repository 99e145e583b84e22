"""Write the study frames that ``tests/test_study_reference.py`` compares against.

The reference was made with fmmlearn at commit dcf0207, before the study became a
pipeline of stage objects (issue 23): the refactor must not change a single number.
It was moved deliberately once since (issue 34): the in-distribution stage fits the study's
detector (score on the training texts, conformal level on the validation texts) and reports
the matched control, the power curve and the rules-version-2 verdicts, and the erasure
validity reads that detector; every other frame is unchanged.
Run from the repository root only to *deliberately* move the reference (and say why
in the commit):

    HF_HUB_OFFLINE=1 python tests/data/make_study_reference.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from helpers.study_reference import REFERENCE_DIR, reference_frames  # noqa: E402

if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        frames = reference_frames(Path(tmp))
    REFERENCE_DIR.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        frame.to_csv(REFERENCE_DIR / f"{name}.csv", index=False, float_format="%.9g")
        print(name, frame.shape)

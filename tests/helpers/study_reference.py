"""A small, fixed study on the tiny model whose frames are pinned in ``tests/data/study_reference/``.

Every measure runs on every test text (no subsets), so the frames are a pure function of the
data, the tiny model's weights and the seeds; torch runs on one thread, as its reductions
depend on the thread count.
"""

from pathlib import Path

import pandas as pd

from .data import make_sentiment
from .models import build_tiny_model, one_thread

__all__ = ["COMPARED", "REFERENCE_DIR", "reference_frames"]

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "data" / "study_reference"
#: Frames compared, with the columns that depend on the machine's clock left out.
COMPARED = {"performance": ["fit_seconds"], "curves": [], "racu": [], "racu_summary": [], "in_distribution": [],
            "erasure": [], "outcomes": [], "explanations": [], "comparisons": [], "masf_controls": [],
            "in_distribution_verdicts": [], "power_curves": []}
SETTINGS = dict(masking_ratios=(0.0, 1.0), methods=["rand", "inp-grad-sign", "loo-sign"], seeds=(0,),
                n_train=100, n_valid=60, n_test=30, n_random=2, n_bootstrap=199, n_explain=2, erasure="auto",
                convergence_threshold=None, device="cpu", verbose=0,
                classifier_params=dict(max_epochs=4, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0,
                                       precision="fp32"))


def reference_frames(workdir: Path) -> dict:
    """The compared frames of the reference study, run in ``workdir``."""
    from fmmlearn.study import FaithfulnessStudy

    with one_thread():
        model = build_tiny_model(workdir / "tiny-bert")
        X, y = make_sentiment(240, seed=3)
        result = FaithfulnessStudy(model, cache_dir=workdir / "cache", **SETTINGS).run(X, y)
    frames = {}
    for name, dropped in COMPARED.items():
        frame = pd.DataFrame(getattr(result, name))
        frames[name] = frame.drop(columns=[c for c in dropped if c in frame.columns])
    return frames

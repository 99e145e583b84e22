"""A faithfulness leaderboard across libraries: Captum's attributions next to fmmlearn's measures.

Fine-tunes the bundled MiniLM with masking on the bundled tweets (3 classes) and measures, on the
same test tweets, how faithful each explanation is -- the recursive explainer-masking curve of
Madsen et al. (2024), where the explanation is recomputed after every masking step, and its RACU
against random masking.  Captum's methods are passed as values (docs/explainers.md): a class is
wrapped with the model's logits as forward function, the mask token as baseline and one feature per
token; embedding-level attributions are summed over the embedding dimension.

Every measure is also a row of the study's verdicts (paired comparisons of ACU on shared texts)
and of its HTML report, with its cost per text.

Sized for a 2-core CPU (a few minutes); for real conclusions take more test texts.

Run: ``python examples/captum_leaderboard.py [output directory]``.
"""

import sys
import time
import warnings
from pathlib import Path

from captum.attr import FeatureAblation, InputXGradient, IntegratedGradients, KernelShap, Saliency

from fmmlearn import TruncationWarning
from fmmlearn.importance import CaptumExplainer
from fmmlearn.study import FaithfulnessStudy

MEASURES = [
    "rand", "loo-sign", "int-grad-sign",                     # fmmlearn's own
    FeatureAblation,                                         # = leave-one-out with the mask token as baseline
    CaptumExplainer(IntegratedGradients, n_steps=20),        # mask-token embedding as baseline
    InputXGradient,
    Saliency,                                                # |gradient| summed over the embedding: unsigned
    CaptumExplainer(KernelShap, n_samples=40),               # one text per call, 40 coalitions
]


def main(out: Path) -> None:
    start = time.perf_counter()
    warnings.simplefilter("ignore", TruncationWarning)  # long tweets are cut (and marked)
    study = FaithfulnessStudy(
        "minilm", masking_ratios=(1.0,), methods=MEASURES, seeds=(0,),
        n_train=500, n_valid=60, n_test=40, costly_examples=24, n_random=2, erasure=None, n_explain=0,
        classifier_params={"max_epochs": 4, "learning_rate": 2e-4, "max_length": 40, "precision": "fp32"},
        cache_dir=out / "cache", verbose=0,
    )
    result = study.run("tweets")
    table = result.racu_summary[["method", "signed", "n_examples", "racu", "racu_low", "racu_high", "acu",
                                 "most_faithful"]]
    costs = result.costs().set_index("method")["seconds_per_text"]
    table = table.assign(s_per_text=table["method"].map(costs)).sort_values("acu", ascending=False)
    print(result.performance[["model", "metric", "value"]].to_string(index=False))
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print()
    print(result.summary())
    result.to_html(out / "leaderboard.html", title="Which explainer is faithful? Captum and fmmlearn on tweets")
    print(f"wrote {out / 'leaderboard.html'} ({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("captum-leaderboard"))

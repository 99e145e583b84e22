"""``fmmlearn demo``: the plain-vs-masked faithfulness study on the bundled model and tweets, with its report.
"""

from __future__ import annotations

import contextlib
import os
import warnings

from ._io import has_parquet, records
from ._options import add_command, add_common_options, measure_help, measure_name, say

__all__ = ["add_parser", "run"]


#: Environment variable naming the demo's base model (e.g. a small local model for tests).
DEMO_MODEL_ENV = "FMMLEARN_DEMO_MODEL"


#: The demo's fine-tuning: MiniLM learns the tweets in 3 epochs at this learning rate (about 0.7 accuracy on
#: 3 classes with a few hundred training tweets, majority class 0.42).
DEMO_CLASSIFIER = {"max_epochs": 3, "learning_rate": 2e-4, "max_length": 48}
#: The other-domain control of the demo's in-distribution test: news articles fed to the tweet classifiers.
DEMO_OTHER_DOMAIN = "bbc-news"


#: Sizes of the two demo runs, chosen so that the demo decides everything it reports in at most 8 minutes on 2 cores
#: (docs/benchmarks.md): integrated gradients and grad-l2 are left to ``--methods`` and the reproduction, as their
#: comparisons with leave-one-out need hundreds of texts.  Accuracy is measured on every test tweet (one forward
#: pass each, so 2,000 of them cost seconds and decide the ±0.03 accuracy margin, where 400 left it open); the
#: curves, the in-distribution report and the erasure metrics on ``curve_examples`` of them.  The
#: costly measures (leave-one-out, integrated gradients, beam search) share one random subset of those, so they are
#: compared on the same texts; the cheap ones run on all of them.  While comparisons with a costly measure are
#: undecided, the faithfulness stage adds texts to that subset for up to ``budget`` seconds
#: (benchmarks/decision_cost.py measures the whole run).
DEMO_PRESETS = {
    "full": {"measures": ("rand", "inp-grad-sign", "loo-sign"),
             "n_train": 500, "n_valid": 150, "n_test": 2000, "curve_examples": 120, "n_random": 3,
             "costly_examples": 60, "budget": 60.0},
    "quick": {"measures": ("rand", "inp-grad-sign", "loo-sign"),
              "n_train": 200, "n_valid": 80, "n_test": 200, "curve_examples": 60, "n_random": 3,
              "costly_examples": 20, "budget": 30.0},
}


def add_parser(sub) -> None:
    full, quick = DEMO_PRESETS["full"], DEMO_PRESETS["quick"]
    parser = add_command(
        sub, "demo", help="plain vs masked fine-tuning of the bundled MiniLM on real tweets, with an HTML report",
        description="A faithfulness study (fmmlearn.study.FaithfulnessStudy) on the bundled MiniLM and bundled "
                    "real tweets, offline: fine-tune a plain and a masked model, measure their accuracy, the "
                    "random-masking curves, the faithfulness (RACU) of each importance measure and whether masked "
                    "inputs are in-distribution (MaSF); print a plain-language summary and write report.html.\n"
                    "Stages are cached under OUTPUT/cache: rerunning with another measure does not refit, and an "
                    "interrupted run resumes. About 10 minutes on 2 CPU cores, about 2-3 with --quick.",
        examples="""
            fmmlearn demo                                   # ~10 min on 2 CPU cores -> fmmlearn-demo/report.html
            fmmlearn demo --quick --output /tmp/demo        # ~2-3 min, fewer texts and methods
            fmmlearn demo --methods rand inp-grad-sign loo-sign --n-test 120
            fmmlearn demo --device cuda --seed 1 --json
        """)
    parser.add_argument("--quick", action="store_true",
                        help=f"a reduced run: {quick['n_train']} training / {quick['n_test']} test tweets and "
                             f"the methods {', '.join(quick['measures'])}")
    parser.add_argument("-o", "--output", default="fmmlearn-demo", metavar="DIR",
                        help="directory for report.html, the result tables (results/) and the stage cache (cache/)")
    parser.add_argument("--seed", type=int, default=0, metavar="SEED",
                        help="seed of the data split, of fine-tuning and of every mask")
    parser.add_argument("--methods", "--measures", dest="measures", nargs="+", type=measure_name, default=None,
                        metavar="METHOD",
                        help=measure_help("importance methods to compare (rand, the reference, is always added; "
                                          "--measures is the old name); "
                                           f"default {' '.join(full['measures'])}, with --quick "
                                           f"{' '.join(quick['measures'])}"))
    parser.add_argument("--n-train", type=int, default=None, metavar="N",
                        help=f"training tweets (default {full['n_train']}, {quick['n_train']} with --quick)")
    parser.add_argument("--n-valid", type=int, default=None, metavar="N",
                        help="validation tweets: best-epoch selection and MaSF calibration "
                             f"(default {full['n_valid']}, {quick['n_valid']} with --quick)")
    parser.add_argument("--n-test", type=int, default=None, metavar="N",
                        help=f"test tweets of the accuracy (default {full['n_test']}, {quick['n_test']} with --quick)")
    parser.add_argument("--curve-examples", type=int, default=None, metavar="N",
                        help=f"test tweets of the curves, the in-distribution report and the erasure metrics "
                             f"(default {full['curve_examples']}, {quick['curve_examples']} with --quick); the costly "
                             f"measures start on {full['costly_examples']} of them ({quick['costly_examples']} with "
                             "--quick), shared")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help=f"seconds the faithfulness stage may spend adding test texts to the costly measures "
                             f"while their comparisons are undecided (default {full['budget']:g}, "
                             f"{quick['budget']:g} with --quick; 0: one round)")
    parser.add_argument("--model", default=os.environ.get(DEMO_MODEL_ENV, "minilm"), metavar="NAME_OR_DIR",
                        help=f"base model: 'minilm' (bundled, offline), a local directory or a hub name "
                             f"(environment variable {DEMO_MODEL_ENV} sets the default)")
    parser.add_argument("--dask-scheduler", default=None, metavar="ADDRESS",
                        help="run the (masking ratio, seed) fits as tasks on this Dask scheduler, e.g. "
                             "tcp://10.0.0.5:8786 (docs/scaling.md); every worker must be able to write OUTPUT/cache")
    add_common_options(parser)
    parser.set_defaults(func=run)


def run(args) -> dict:
    """``fmmlearn demo``: the plain-vs-masked study on tweets, its summary and report.html.

    One demo at a time writes ``--output``: a second one stops with an error naming the holder's pid.
    """
    from ..utils import check_writable_dir, directory_lock

    output = check_writable_dir(args.output, "--output")
    with directory_lock(output, option="--output"):
        return _run_locked(args, output)


def _run_locked(args, output) -> dict:
    from ..exceptions import TruncationWarning
    from ..study import FaithfulnessStudy

    preset = DEMO_PRESETS["quick" if args.quick else "full"]
    measures = list(args.measures or preset["measures"])
    sizes = {k: preset[k] if getattr(args, k) is None else getattr(args, k)
             for k in ("n_train", "n_valid", "n_test", "curve_examples")}
    budget = preset["budget"] if args.budget is None else args.budget
    if budget < 0:
        raise ValueError(f"--budget must be 0 or more seconds, got {budget:g}")
    study = FaithfulnessStudy(
        args.model, masking_ratios=(0.0, 1.0), methods=measures, seeds=(args.seed,), **sizes,
        costly_examples=preset["costly_examples"], budget=budget or None, n_random=preset["n_random"],
        classifier_params=DEMO_CLASSIFIER, other_domain=DEMO_OTHER_DOMAIN, device=args.device,
        cache_dir=output / "cache",
        random_state=args.seed, verbose=args.verbose)
    say(args, f"fmmlearn demo{' --quick' if args.quick else ''}: plain vs masked fine-tuning of {args.model} on "
              f"{sizes['n_train']} tweets; accuracy on {sizes['n_test']} test tweets, measures {', '.join(measures)} "
              f"on {min(sizes['curve_examples'], sizes['n_test'])} of them.")
    cluster = contextlib.nullcontext()
    if args.dask_scheduler:
        from ..distributed import dask_backend

        cluster = dask_backend(args.dask_scheduler)
    with warnings.catch_warnings(), cluster:
        # Long tweets are cut to max_length=48 tokens; the report counts them instead of a warning per stage.
        # Silenced by category: a CacheWarning about a truncated cache file must still be shown.
        warnings.simplefilter("ignore", TruncationWarning)
        result = study.run("tweets")
    results_dir = result.save(output / "results", format="parquet" if has_parquet() else "csv")
    report = output / "report.html"
    result.to_html(report, title="fmmlearn demo: plain vs masked fine-tuning on tweets")
    say(args, "", result.summary(), "", f"report: {report.resolve()}")
    return {"command": "demo", "written": [str(report), str(results_dir)], "report": str(report),
            "summary": result.summary().splitlines(), "performance": records(result.performance),
            "racu": records(result.racu_summary), "seconds": round(result.metadata["wall_seconds"], 3)}

"""The tests mirror the package: ``fmmlearn/<package>/_<module>.py`` is tested in ``tests/<package>/test_<module>.py``.

A module without its mirror file is in :data:`TESTED_ELSEWHERE`, which names the test file that tests it, so the
layout cannot drift: a new module needs its test file or an entry saying where it is tested, and an entry goes
once the mirror file exists.  The cross-cutting suites live in folders of their own (:data:`CROSS_CUTTING`).
"""

import importlib.metadata
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE, TESTS = ROOT / "fmmlearn", ROOT / "tests"

#: Folders of tests/ that mirror no package: the suites that cut across modules, and what the tests share.
CROSS_CUTTING = {
    "architecture",  # the package's shape, its documented layer map and lists, contracts, this mirror
    "docs",          # README and docs/ code blocks, doctests, the Sphinx site
    "faults",        # kill -9, signals, write faults, concurrency, lost workers, hostile inputs
    "integration",   # slow: the real MiniLM, model families end to end, launches, Dask, browser, reproduction
    "estimator_checks",  # scikit-learn's estimator checks (not "sklearn": see the last test)
    "helpers",       # shared test code (importable as ``helpers``: tests/ is on sys.path, pyproject.toml)
    "data",          # pinned reference frames
}

#: Module (relative to fmmlearn/) without a mirror file -> the test file (relative to tests/) that tests it.
TESTED_ELSEWHERE = {
    # Thin modules: the version string, ``python -m fmmlearn``, the old public paths (re-exports only).
    "_version.py": "docs/test_docs_site.py",                       # the string only; the site's release shows it
    "__main__.py": "faults/test_interrupts.py",
    "classifier.py": "utils/test_redirect.py",
    "training.py": "utils/test_redirect.py",
    "explainer_masking.py": "utils/test_redirect.py",
    "html.py": "utils/test_redirect.py",
    # Package __init__ modules: the names they export are tested with the modules that define them.
    "__init__.py": "architecture/test_contracts.py",              # lazy top-level names, light imports
    "cli/__init__.py": "cli/test_main.py",
    "datasets/__init__.py": "datasets/test_bundled.py",
    "estimator/__init__.py": "estimator/test_classifier.py",
    "estimator/callbacks/__init__.py": "estimator/callbacks/test_best_epoch.py",
    "explanation/__init__.py": "explanation/test_explain.py",
    "faithfulness/__init__.py": "faithfulness/test_curves.py",
    "importance/__init__.py": "importance/test_registry.py",      # compute_importance, by every measure
    "modeling/__init__.py": "modeling/test_batching.py",
    "ood/__init__.py": "ood/test_masf.py",
    "plotting/__init__.py": "faithfulness/test_report.py",
    "study/__init__.py": "study/test_engine.py",
    "study/stages/__init__.py": "study/test_pipeline.py",          # STAGES, their order and declared data
    "utils/__init__.py": "architecture/test_architecture.py",
    # Tested through the public function or command that uses them.
    "exceptions.py": "utils/test_warnings.py",                      # raised and caught where they occur
    "cli/_io.py": "cli/test_main.py",                               # the commands' tables
    "cli/_options.py": "cli/test_main.py",
    "cli/explain.py": "cli/test_main.py",
    "cli/faithfulness.py": "cli/test_main.py",
    "cli/fit.py": "cli/test_main.py",
    "cli/ood.py": "cli/test_main.py",
    "cli/predict.py": "cli/test_main.py",
    "cli/info.py": "modeling/test_precision.py",                    # ``fmmlearn info`` prints the probes
    "datasets/_babi_files.py": "datasets/test_babi.py",
    "datasets/_common.py": "datasets/test_bundled.py",
    "datasets/_sources.py": "datasets/test_paper.py",
    "estimator/_data.py": "estimator/test_net.py",
    "estimator/_validation_data.py": "estimator/test_classifier.py",
    "estimator/callbacks/_scoring.py": "estimator/test_classifier.py",  # selection_metric
    "explanation/_data.py": "explanation/test_result.py",
    "explanation/_frames.py": "explanation/test_explain.py",
    "faithfulness/_erasure_scorer.py": "faithfulness/test_erasure.py",
    "faithfulness/_token_lists.py": "faithfulness/test_erasure.py",
    "importance/_captum.py": "importance/test_external.py",
    "importance/_explainer.py": "importance/test_external.py",
    "importance/precomputed.py": "faithfulness/test_curves.py",    # precomputed importances in a curve
    "modeling/_devices.py": "modeling/test_precision.py",
    "modeling/_loading.py": "faults/test_bad_inputs.py",
    "modeling/_probes.py": "modeling/test_precision.py",
    "ood/_calibrate.py": "ood/test_controls.py",
    "ood/_checks.py": "ood/test_masf.py",                           # the bad-input tests
    "ood/_features.py": "ood/test_report.py",
    "ood/_power.py": "ood/test_detectors.py",
    "ood/_registry.py": "ood/test_detectors.py",
    "ood/_scorer.py": "ood/test_controls.py",
    "plotting/_figures.py": "faithfulness/test_report.py",
    "plotting/_report.py": "explanation/test_heatmap.py",           # the report displays
    "study/_baselines.py": "study/test_engine.py",
    "study/_codec.py": "study/test_cache.py",
    "study/_counting.py": "importance/test_utils.py",                # forward passes counted
    "study/_data.py": "study/test_pipeline.py",
    "study/_metadata.py": "study/test_engine.py",
    "study/_names.py": "study/test_pipeline.py",
    "study/_options.py": "study/test_engine.py",
    "study/_parallel.py": "integration/test_dask.py",
    "study/_report.py": "study/test_engine.py",
    "study/_result.py": "study/test_engine.py",
    "study/_runtime.py": "study/test_pipeline.py",
    "study/_sections.py": "study/test_pipeline.py",
    "study/_settings.py": "study/test_pipeline.py",
    "study/_summary.py": "study/test_engine.py",
    "study/_system.py": "study/test_engine.py",
    "study/_tables.py": "study/test_engine.py",
    # The built-in stages run end to end in the tiny study, whose frames are pinned (study/test_reference.py).
    "study/stages/_common.py": "study/test_reference.py",
    "study/stages/calibration.py": "study/test_engine.py",
    "study/stages/comparisons.py": "study/test_engine.py",
    "study/stages/erasure.py": "study/test_engine.py",
    "study/stages/explanations.py": "study/test_engine.py",
    "study/stages/fit.py": "study/test_engine.py",
    "study/stages/performance.py": "study/test_engine.py",
    "study/stages/random_masking.py": "study/test_engine.py",
    "utils/_files.py": "faults/test_write_faults.py",
    "utils/_formatting.py": "estimator/test_model_card.py",          # the numbers of the model card
    "utils/_labels.py": "estimator/test_classifier.py",
    "utils/_lazy.py": "architecture/test_contracts.py",
    "utils/_processes.py": "test_distributed.py",
    "utils/_protocols.py": "architecture/test_contracts.py",
    "utils/_random.py": "architecture/test_architecture.py",
    "utils/_templates.py": "study/test_engine.py",
}

MODULES = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py"))


def mirror(module: str) -> Path:
    """``ood/_detectors.py`` -> ``tests/ood/test_detectors.py``; a top-level module's file is in ``tests/``."""
    path = Path(module)
    return TESTS.joinpath(*path.parent.parts, f"test_{path.stem.lstrip('_')}.py")


def test_mirror_drops_the_underscore_and_keeps_the_folders():
    assert mirror("ood/_detectors.py") == TESTS / "ood" / "test_detectors.py"
    assert mirror("study/stages/in_distribution.py") == TESTS / "study" / "stages" / "test_in_distribution.py"
    assert mirror("metrics.py") == TESTS / "test_metrics.py"


@pytest.mark.parametrize("module", MODULES)
def test_every_module_has_its_mirror_test_file_or_names_where_it_is_tested(module):
    if mirror(module).is_file():
        assert module not in TESTED_ELSEWHERE, f"{module} has {mirror(module).relative_to(ROOT)}: drop its entry"
    else:
        assert module in TESTED_ELSEWHERE, \
            f"{module} has no {mirror(module).relative_to(ROOT)}: write it, or add it to TESTED_ELSEWHERE"
        elsewhere = TESTS / TESTED_ELSEWHERE[module]
        assert elsewhere.is_file(), f"{module}: {elsewhere.relative_to(ROOT)} does not exist"


def test_the_allow_list_names_only_modules_that_exist():
    assert not set(TESTED_ELSEWHERE) - set(MODULES)


def test_every_test_folder_mirrors_a_package_or_is_cross_cutting():
    folders = {p.relative_to(TESTS) for p in TESTS.rglob("*") if p.is_dir() and "__pycache__" not in p.parts
               and p.relative_to(TESTS).parts[0] not in CROSS_CUTTING}
    strays = sorted(str(f) for f in folders if not (PACKAGE / f / "__init__.py").is_file())
    assert not strays, f"folders of tests/ that mirror no package of fmmlearn/: {strays}"


def test_no_test_folder_is_a_package():
    """pytest imports test files by path (pyproject.toml); an ``__init__.py`` in ``tests/datasets`` would shadow
    Hugging Face datasets, tests/ being on sys.path (and on the PYTHONPATH of the tests' child processes)."""
    packages = sorted(str(p.parent.relative_to(TESTS)) for p in TESTS.rglob("__init__.py")
                      if p.parent.relative_to(TESTS).parts[0] != "helpers")
    assert not packages, f"test folders with an __init__.py: {packages}"


#: Mirror folders named like an installed package: harmless while nothing imports that package before
#: site-packages is on sys.path (fmmlearn imports Hugging Face ``datasets`` only inside a function).
SHARED_NAMES = {"datasets"}


def test_no_test_folder_takes_the_name_of_an_installed_package():
    """A child process with tests/ on its PYTHONPATH and ``-W error::fmmlearn...`` imports fmmlearn before
    site-packages is on sys.path: a folder ``tests/sklearn`` then became the namespace package ``sklearn``."""
    installed = set(importlib.metadata.packages_distributions()) | set(sys.stdlib_module_names)
    clashes = sorted({p.name for p in TESTS.iterdir() if p.is_dir()} & installed - SHARED_NAMES)
    assert not clashes, f"test folders named like an installed or standard-library package: {clashes}"

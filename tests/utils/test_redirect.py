"""Modules that moved into packages (issue 36) still import, and what was pickled before the move still loads.

Public module paths that moved (``fmmlearn.classifier``, ``fmmlearn.training``, ...) are thin re-export
modules or packages of the same name and never warn; old private paths (``fmmlearn._random``, ...)
are the moved module itself, through the meta-path finder of ``fmmlearn.utils._redirect``, with a
``DeprecationWarning``.  fmmlearn's own code imports from the new homes only (tests/architecture/test_architecture.py
walks its imports: an old path would be a unit with no layer).
"""

import importlib
import json
import numbers
import pickle
import subprocess
import sys

import pandas as pd
import pytest

import fmmlearn
from fmmlearn import Explanation, FaithfulTextClassifier
from fmmlearn.estimator import SelectionMetric
from fmmlearn.metrics import get_metric
from fmmlearn.utils import StrictInterval

#: The ``__all__`` of each public module before the move, which must all still import from there.
OLD_PUBLIC = {
    "fmmlearn.classifier": ["FaithfulTextClassifier"],
    "fmmlearn.training": [
        "LR_SCHEDULES", "AcceleratedMaskedFineTuningNet", "BestEpochRestorer", "EncodedDataset",
        "LengthGroupedBatchSampler", "MaskedFineTuningNet", "SelectionMetric", "UniformBatchSampler",
        "build_callbacks", "concat_encodings", "history_frame", "linear_warmup_decay", "lr_multiplier", "make_net",
        "mask_encoding", "no_decay_param_groups", "random_masker", "reference_warmup_decay", "training_batch_sampler"],
    "fmmlearn.explainer_masking": ["eligible_masks", "finite_scores", "iter_batch_masking", "iter_explainer_masking",
                                   "resolve_recursive"],
    "fmmlearn.html": ["SIGNED_PALETTE", "UNSIGNED_PALETTE", "explanation_html", "report_html"],
    "fmmlearn.explanation": ["Explanation", "example_table", "explain", "explain_encoded", "token_frame", "word_frame"],
    "fmmlearn.plotting": ["plot_erasure", "plot_faithfulness", "plot_faithfulness_grid", "plot_in_distribution",
                          "plot_performance", "plot_racu", "plot_random_masking"],
}

#: The private top-level modules before the move; each now lives in a package (``fmmlearn._MOVED`` says where).
OLD_PRIVATE = ["_bootstrap", "_explanation_data", "_explanation_frames", "_files", "_formatting", "_labels", "_lazy",
               "_model_card", "_net_routing", "_persistence", "_processes", "_protocols", "_random", "_signals",
               "_templates", "_validation", "_validation_data", "_warnings"]


def test_the_redirect_knows_every_moved_private_module_and_nothing_else():
    assert sorted(fmmlearn._MOVED) == [f"fmmlearn.{name}" for name in OLD_PRIVATE]


# A fresh interpreter, so that the old paths are imported for the first time: the new homes (and
# torch, transformers, ...) load first, then every DeprecationWarning is an error.
_IMPORT_OLD_PUBLIC_PATHS = """
import importlib, json, sys, warnings
import fmmlearn.estimator, fmmlearn.explanation._explain, fmmlearn.explanation._masking, fmmlearn.plotting
warnings.simplefilter("error", DeprecationWarning)
for module, names in json.loads(sys.argv[1]).items():
    imported = importlib.import_module(module)
    missing = [name for name in names if not hasattr(imported, name)]
    assert not missing, f"{module} lost {missing}"
print("ok")
"""


def test_an_old_public_module_path_imports_its_names_without_a_warning():
    run = subprocess.run([sys.executable, "-c", _IMPORT_OLD_PUBLIC_PATHS, json.dumps(OLD_PUBLIC)],
                         capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


@pytest.mark.parametrize("module", sorted(OLD_PUBLIC))
def test_an_old_public_path_gives_the_objects_of_the_new_home(module):
    imported = importlib.import_module(module)
    for name in OLD_PUBLIC[module]:
        obj = getattr(imported, name)
        home = getattr(obj, "__module__", None)
        if isinstance(home, str) and home.startswith("fmmlearn."):
            assert getattr(importlib.import_module(home), name) is obj


@pytest.mark.parametrize("name", OLD_PRIVATE)
def test_an_old_private_module_path_is_the_moved_module_and_warns(name):
    old, new = f"fmmlearn.{name}", fmmlearn._MOVED[f"fmmlearn.{name}"]
    assert new.startswith("fmmlearn.") and new.rpartition(".")[2] in (name, name.replace("_explanation", ""))
    sys.modules.pop(old, None)  # only the alias: the module itself stays loaded under its new name
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__.name == new


def test_a_name_imports_from_an_old_private_path():
    sys.modules.pop("fmmlearn._random", None)
    with pytest.warns(DeprecationWarning):
        from fmmlearn._random import derive_seed
    from fmmlearn.utils import derive_seed as moved

    assert derive_seed is moved


def _as_if_pickled_at(data: bytes, new: str, old: str, name: str) -> bytes:
    """A protocol-0 pickle whose class reference names the module ``old`` instead of ``new``."""
    reference = f"c{new}\n{name}\n".encode()
    assert data.count(reference) == 1, "the class is referenced once, by its new module"
    return data.replace(reference, f"c{old}\n{name}\n".encode())


def test_a_classifier_pickled_before_the_move_unpickles():
    clf = FaithfulTextClassifier(max_epochs=2, masking_strategy="uni", random_state=3)
    data = pickle.dumps(clf, protocol=0)
    restored = pickle.loads(_as_if_pickled_at(data, "fmmlearn.estimator._classifier", "fmmlearn.classifier",
                                              "FaithfulTextClassifier"))
    assert type(restored) is FaithfulTextClassifier and restored.get_params() == clf.get_params()


@pytest.mark.parametrize("make, new, old", [
    (lambda: SelectionMetric("valid_accuracy", get_metric("accuracy"), 2), "fmmlearn.estimator.callbacks._scoring",
     "fmmlearn.training"),
    (lambda: Explanation(pd.DataFrame({"example": [0, 0], "importance": [0.5, -0.25]})),
     "fmmlearn.explanation._result", "fmmlearn.explanation"),
])
def test_objects_pickled_under_an_old_public_path_unpickle_without_a_warning(make, new, old, recwarn):
    obj = make()
    restored = pickle.loads(_as_if_pickled_at(pickle.dumps(obj, protocol=0), new, old, type(obj).__name__))
    assert type(restored) is type(obj)
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning) and "moved to" in str(w.message)]


def test_an_object_pickled_under_an_old_private_path_unpickles_with_a_warning():
    interval = StrictInterval(numbers.Integral, 1, None, closed="left")
    data = _as_if_pickled_at(pickle.dumps(interval, protocol=0), "fmmlearn.utils._validation",
                             "fmmlearn._validation", "StrictInterval")
    sys.modules.pop("fmmlearn._validation", None)
    with pytest.warns(DeprecationWarning, match="fmmlearn._validation moved to fmmlearn.utils._validation"):
        restored = pickle.loads(data)
    assert type(restored) is StrictInterval and str(restored) == str(interval)

"""The private members of skorch that fmmlearn relies on, so a skorch release that moves them fails here.

``fmmlearn.distributed.AcceleratedTrainingMixin`` re-implements parts of
skorch's ``AccelerateMixin`` (which criteria to prepare, when to unwrap, how the
schedule steps) and so calls members skorch does not document.  pyproject.toml
bounds skorch below the next minor release; before raising the bound, run this
file against the new skorch.
"""

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from skorch import NeuralNet
from skorch.callbacks import LRScheduler
from skorch.hf import AccelerateMixin

#: Owner -> private (or undocumented) members fmmlearn uses, and where.
USED = {
    NeuralNet: {
        "_modules": "AcceleratedTrainingMixin._initialize_accelerator: the modules to prepare",
        "_criteria": "AcceleratedTrainingMixin._initialize_accelerator: the criteria to prepare",
        "_optimizers": "AcceleratedTrainingMixin: the optimizers to step and prepare",
        "_current_init_context": "AcceleratedTrainingMixin._initialize_accelerator",
        "_validate_params": "AcceleratedTrainingMixin._validate_params skips AccelerateMixin's device check",
        "_initialize_callbacks": "AcceleratedTrainingMixin: one progress bar per launch",
    },
    AccelerateMixin: {
        "_initialize_accelerator": "overridden: parameter-free criteria are not prepared",
        "_unwrap_accelerator": "called after every on_train_end callback",
        "_validate_params": "bypassed with super(AccelerateMixin, self)",
        "initialize": "bypassed with super(AccelerateMixin, self), so the net's own initialize runs",
        "get_iterator": "bypassed with super(AccelerateMixin, self): the net's batch sampler",
    },
}


def _skorch_bound() -> Requirement:
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    return next(Requirement(r) for r in pyproject["project"]["dependencies"] if Requirement(r).name == "skorch")


def test_the_installed_skorch_is_within_the_bound_these_checks_were_made_for():
    bound, installed = _skorch_bound(), Version(version("skorch"))
    assert installed in bound.specifier, (
        f"skorch {installed} is outside pyproject.toml's {bound}; run tests/architecture/test_skorch_interface.py and "
        "tests/test_distributed.py on it, then move the bound")
    assert any(spec.operator == "<" for spec in bound.specifier), f"{bound} has no upper bound"


@pytest.mark.parametrize("owner, name", [(owner, name) for owner, names in USED.items() for name in names],
                         ids=lambda v: getattr(v, "__name__", v))
def test_the_skorch_members_fmmlearn_relies_on_exist(owner, name):
    assert hasattr(owner, name), (
        f"skorch {version('skorch')} has no {owner.__name__}.{name}, which fmmlearn uses ({USED[owner][name]}); "
        "fmmlearn.distributed must be adapted to this skorch before its bound in pyproject.toml is raised")


def test_the_skorch_behaviour_fmmlearn_relies_on_is_unchanged():
    # AccelerateMixin re-implements initialize and get_iterator itself (what the bypass is for) ...
    assert "initialize" in vars(AccelerateMixin) and "get_iterator" in vars(AccelerateMixin)
    # ... keeps the flag the mixin resets to prepare a fresh model again ...
    assert "_wrapped_with_accelerator" in inspect.getsource(AccelerateMixin.__init__), \
        "AccelerateMixin no longer keeps _wrapped_with_accelerator; fmmlearn.distributed resets it in initialize"
    # ... and takes the PrintLog sink the mixin replaces, and the unwrap switch accelerated_net_options sets
    init = inspect.signature(AccelerateMixin.__init__).parameters
    assert {"callbacks__print_log__sink", "unwrap_after_train"} <= set(init), sorted(init)
    # the net enters init contexts by kind, and LRScheduler keeps its scheduler in lr_scheduler_
    assert list(inspect.signature(NeuralNet._current_init_context).parameters) == ["self", "name"]
    assert "lr_scheduler_" in inspect.getsource(LRScheduler.initialize) + inspect.getsource(LRScheduler.on_train_begin)

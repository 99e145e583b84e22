"""Lists of modules and stages in docstrings are tested against the code, so they cannot drift.

A package docstring that names one of its modules names them all (its private ``_x`` modules, its public
modules and sub-packages, as ``x`` or :mod:`.x`), and names no module that does not exist; the stages'
docstring lists :data:`fmmlearn.study.STAGES` in run order.
"""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "fmmlearn"


def own_modules(package: Path) -> set:
    """The modules and sub-packages directly inside ``package`` (its ``__init__`` aside)."""
    return ({p.stem for p in package.glob("*.py") if p.stem != "__init__"}
            | {p.parent.name for p in package.glob("*/__init__.py")})


def dotted(package: Path) -> str:
    return ".".join(package.relative_to(PACKAGE.parent).parts)


def named_modules(text: str, package: Path) -> set:
    """The module names ``text`` gives: ``x`` literals and :mod:`.x` / :mod:`fmmlearn.<package>.x` references."""
    names = set(re.findall(r"``([A-Za-z_]\w*)``", text))
    for ref in re.findall(r":mod:`~?([\w.]+)`", text):
        if ref.startswith("."):
            names.add(ref[1:].split(".")[0])
        elif ref.startswith(dotted(package) + "."):
            names.add(ref[len(dotted(package)) + 1:].split(".")[0])
    return names


def _docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""


PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))
#: The packages whose docstring lists their modules (it names at least one of them).
LISTING = [p for p in PACKAGES if named_modules(_docstring(p), p) & own_modules(p)]


def test_the_packages_that_list_their_modules_are_found():
    assert {dotted(p) for p in LISTING} >= {"fmmlearn.faithfulness", "fmmlearn.ood", "fmmlearn.utils",
                                            "fmmlearn.importance", "fmmlearn.estimator", "fmmlearn.explanation",
                                            "fmmlearn.study.stages"}


@pytest.mark.parametrize("package", LISTING, ids=dotted)
def test_a_package_docstring_names_exactly_its_modules(package):
    text, modules = _docstring(package), own_modules(package)
    named = named_modules(text, package)
    assert not modules - named, f"{dotted(package)}'s docstring leaves out {sorted(modules - named)}"
    stale = {name for name in named if re.fullmatch(r"_[a-z]\w*", name)} - modules
    assert not stale, f"{dotted(package)}'s docstring names modules that do not exist: {sorted(stale)}"


def test_the_stages_docstring_lists_the_stages_in_run_order():
    from fmmlearn.study import STAGES

    listed = re.findall(r"^\d+\. :class:`(\w+)` \(``([^`]+)``\)", _docstring(PACKAGE / "study" / "stages"), re.M)
    assert listed == [(type(stage).__name__, stage.name) for stage in STAGES]


def test_the_list_reader_sees_literals_and_references():
    text = "``_a`` and :mod:`.b`, :mod:`fmmlearn.utils.c`, :mod:`fmmlearn.other.d`, ``--json``"
    assert named_modules(text, PACKAGE / "utils") == {"_a", "b", "c"}

"""docs/architecture.md is drawn from the code: its layer table is the architecture test's, its claims name tests."""

import ast
import re
from pathlib import Path

import pytest

from architecture.test_architecture import LAYERS  # tests/ is on sys.path (pyproject.toml)

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _doc_layers() -> dict:
    table = PAGE[PAGE.index("<!-- layers -->"):PAGE.index("<!-- /layers -->")]
    layers = {}
    for line in table.splitlines():
        match = re.match(r"\| (\d+) \| ([^|]+) \|", line)
        if match:
            layers[int(match.group(1))] = tuple(re.findall(r"`([^`]+)`", match.group(2)))
    return layers


def test_the_layer_table_is_the_architecture_tests_layer_map():
    assert _doc_layers() == {i: units for i, units in enumerate(LAYERS)}


def _pictured_layers() -> dict:
    """Layer -> the units named on its line of the picture above the table (descriptions name no unit)."""
    section = PAGE[PAGE.index("## Layers"):PAGE.index("<!-- layers -->")]
    picture = section[section.index("```text"):section.index("```", section.index("```text") + 3)]
    units = {unit for layer in LAYERS for unit in layer}
    layers = {}
    for line in picture.splitlines():
        match = re.match(r"\s*(\d+)\s+(.*)$", line)
        if match:
            layers[int(match.group(1))] = {w for w in re.split(r"[\s,()]+", match.group(2)) if w in units}
    return layers


def test_the_picture_of_the_layers_shows_the_layer_map():
    assert _pictured_layers() == {i: set(units) for i, units in enumerate(LAYERS)}


def _contracts() -> list:
    section = PAGE[PAGE.index("## Contracts"):]
    return [item for item in re.split(r"\n\* ", section)[1:]]


REFERENCES = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", PAGE)


def test_every_contract_names_the_tests_that_check_it():
    unchecked = [c.split(".")[0] for c in _contracts() if "checked by `tests/" not in " ".join(c.split())]
    assert not unchecked, f"contracts without a test: {unchecked}"
    assert len(REFERENCES) >= len(_contracts())


@pytest.mark.parametrize("path, name", REFERENCES, ids=[f"{p}::{n}" for p, n in REFERENCES])
def test_every_named_test_exists(path, name):
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert name in names, f"docs/architecture.md names {path}::{name}, which does not exist"


def _owns() -> dict:
    """Unit -> the text of the "owns" cell of the layer table that is about it.

    A row of one unit is about it whole; in a row of several units each unit's part begins with its name in
    bold (``**ood**: ...``) and ends where the next bold name begins.
    """
    table = PAGE[PAGE.index("<!-- layers -->"):PAGE.index("<!-- /layers -->")]
    owns = {}
    for line in table.splitlines():
        match = re.match(r"\| \d+ \| ([^|]+) \| (.*) \|$", line)
        if not match:
            continue
        units, cell = re.findall(r"`([^`]+)`", match.group(1)), match.group(2)
        if len(units) == 1:
            owns[units[0]] = cell
            continue
        parts = re.split(r"\*\*`?(\w+)`?\*\*", cell)
        owns.update({name: text for name, text in zip(parts[1::2], parts[2::2])})
    return owns


OWNS = _owns()
PACKAGES = sorted(p.parent.name for p in (ROOT / "fmmlearn").glob("*/__init__.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_the_layer_table_names_exactly_the_modules_of_each_package(package):
    path = ROOT / "fmmlearn" / package
    modules = ({p.stem for p in path.glob("*.py") if p.stem != "__init__"}
               | {p.parent.name for p in path.glob("*/__init__.py")})
    assert package in OWNS, f"the layer table has no part about {package} (**{package}**: ...)"
    named = {name.rstrip("/") for name in re.findall(r"`([\w/]+)`", OWNS[package])}
    assert not modules - named, f"the layer table's {package} part leaves out {sorted(modules - named)}"
    stale = {name for name in named if name.startswith("_")} - modules
    assert not stale, f"the layer table's {package} part names modules that do not exist: {sorted(stale)}"


def test_the_data_flow_picture_shows_the_stages_in_run_order():
    from fmmlearn.study import STAGES

    picture = PAGE[PAGE.index("## Data flow"):PAGE.index("## Layers")]
    run = picture[picture.index("study: settings ─► [") + len("study: settings ─► ["):]
    shown = [name.strip() for name in run[:run.index("]")].split("─►")]
    assert shown == [stage.name for stage in STAGES]

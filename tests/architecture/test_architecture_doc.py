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

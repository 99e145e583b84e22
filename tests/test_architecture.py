"""The package's layering (docs/architecture.md): a module imports only from its own layer or below.

Read from the source with ``ast`` (module-level and function-level imports
alike), so a lazy upward import inside a function is caught too.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fmmlearn"

#: Top-level module or sub-package of fmmlearn -> layer; higher layers build on lower ones.
LAYERS = {
    # base: no fmmlearn feature logic below these
    "_version": 0, "_lazy": 0, "_random": 0, "_validation": 0, "_bootstrap": 0, "_labels": 0, "_protocols": 0,
    "exceptions": 0, "_warnings": 0, "_warnings": 0, "metrics": 0, "datasets": 0, "encoding": 0, "plotting": 0,
    # runtime and masking rules
    "masking": 1, "modeling": 1, "distributed": 1, "distributed": 1,
    # measures and the training loop
    "importance": 2, "training": 2, "_persistence": 2,
    "explanation": 3, "_explanation_data": 3, "html": 3,  # html renders explanations (needs the measure registry)
    "faithfulness": 4, "ood": 4,
    "classifier": 5,
    "study": 6,
    "cli": 7, "__main__": 7, "__init__": 7,
}


def _unit(path: Path) -> str:
    """The top-level unit (module or sub-package) a source file belongs to."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _imported_units(path: Path) -> set:
    """Top-level fmmlearn units imported anywhere in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    depth = len(path.relative_to(PACKAGE).parts) - 1  # 0 for fmmlearn/x.py, 1 for fmmlearn/pkg/x.py
    units = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names = [node.module] if node.module else []
                units |= {n.split(".")[1] for n in names if n.startswith("fmmlearn.")}
                if node.module == "fmmlearn":
                    units |= {alias.name for alias in node.names}
            elif node.level - 1 == depth:  # relative to the package root
                if node.module:
                    units.add(node.module.split(".")[0])
                else:
                    units |= {alias.name for alias in node.names}
            elif node.level - 1 < depth:  # inside its own sub-package
                units.add(_unit(path))
        elif isinstance(node, ast.Import):
            units |= {a.name.split(".")[1] for a in node.names if a.name.startswith("fmmlearn.")}
    return units


SOURCES = sorted(p for p in PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    unknown = sorted({_unit(p) for p in SOURCES} - set(LAYERS))
    assert not unknown, f"give these modules a layer in tests/test_architecture.py and docs/architecture.md: {unknown}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_import_only_from_their_layer_or_below(path):
    unit = _unit(path)
    if unit not in LAYERS:
        pytest.skip(f"{unit} has no layer yet (reported by test_every_module_has_a_layer)")
    upward = sorted(u for u in _imported_units(path) if LAYERS.get(u, -1) > LAYERS[unit])
    assert not upward, f"{path.relative_to(PACKAGE)} (layer {LAYERS[unit]}) imports from higher layers: {upward}"


def test_nothing_below_explanation_imports_it():
    below = [p for p in SOURCES if LAYERS.get(_unit(p), 99) < LAYERS["explanation"]]
    offenders = [str(p.relative_to(PACKAGE)) for p in below if "explanation" in _imported_units(p)]
    assert not offenders

"""The package's shape (docs/architecture.md), read from the source with ``ast``.

* every unit (top-level module or sub-package) has exactly one layer, and imports only from
  lower layers -- never from its own layer, so two units of one layer cannot depend on each other;
* the import graph has no circle, between modules (inside a package too) or between packages;
* no module imports another package's private module (``fmmlearn.pkg._x`` is for ``pkg`` only);
* rooms a newcomer can hold in their head: no module over 700 lines, no function body over 120.

Module-level and function-level imports count alike, so a lazy import inside a function is
seen too.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fmmlearn"

#: Layer -> the units (top-level modules and sub-packages) in it, bottom first. A unit imports only
#: from the layers below its own.
LAYERS = (
    ("_version", "_lazy", "exceptions", "_explanation_data"),
    ("_random", "_validation", "_bootstrap", "_labels", "_warnings", "_formatting", "_files", "_signals"),
    ("_templates",),
    ("metrics", "datasets", "encoding", "plotting", "_processes"),
    ("masking", "modeling", "_protocols"),
    ("importance", "distributed", "_persistence"),
    ("training", "html"),
    ("explainer_masking", "_explanation_frames", "_validation_data"),
    ("explanation",),
    ("ood",),
    ("faithfulness",),
    ("classifier",),
    ("study",),
    ("cli",),
    ("__main__", "__init__"),
)
LAYER = {unit: level for level, units in enumerate(LAYERS) for unit in units}
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 700, 120

SOURCES = sorted(PACKAGE.rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in SOURCES}


def _unit(module: str) -> str:
    """The top-level unit of ``fmmlearn.<unit>[.<rest>]`` (``__init__`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _resolve(module: str, path: Path, level: int, name: str | None) -> str:
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([name] if name else []))


def _imports(path: Path, module: str | None = None) -> set:
    """The fmmlearn modules ``path`` (the module ``module``) imports; an imported name that is a module counts."""
    module, found = module or _module_name(path), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.ImportFrom):
            source = node.module if node.level == 0 else _resolve(module, path, node.level, node.module)
            if source and source.split(".")[0] == "fmmlearn":
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.split(".")[0] == "fmmlearn"]
        for target in targets:
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in MODULES and target != module:
                found.add(target)
    return found


GRAPH = {module: _imports(path) for module, path in MODULES.items()}


def _cycles(graph: dict) -> list:
    """Strongly connected components with more than one node (Tarjan), as sorted lists."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return out


def _package_graph() -> dict:
    """Sub-package -> the sub-packages and top-level modules its modules import (self-imports dropped)."""
    graph = {}
    for module, targets in GRAPH.items():
        unit = _unit(module)
        graph.setdefault(unit, set()).update(_unit(t) for t in targets if _unit(t) != unit)
    return graph


def test_the_layer_map_names_each_unit_once_and_every_unit_has_a_layer():
    named = [unit for units in LAYERS for unit in units]
    assert len(named) == len(set(named)), f"named twice: {sorted({u for u in named if named.count(u) > 1})}"
    units = {_unit(m) for m in MODULES}
    assert not units - set(named), f"give these a layer (here and in docs/architecture.md): {sorted(units - set(named))}"
    assert not set(named) - units, f"no such unit: {sorted(set(named) - units)}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_from_lower_layers(module):
    unit = _unit(module)
    wrong = sorted({_unit(t) for t in GRAPH[module] if _unit(t) != unit and LAYER[_unit(t)] >= LAYER[unit]})
    assert not wrong, f"{module} (layer {LAYER[unit]}, {unit}) imports from its own layer or above: {wrong}"


def test_no_import_circle_between_modules():
    assert not _cycles(GRAPH), f"import circles: {_cycles(GRAPH)}"


def test_no_import_circle_between_packages():
    assert not _cycles(_package_graph()), f"import circles between packages: {_cycles(_package_graph())}"


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]


def test_no_module_imports_another_packages_private_module():
    offenders = []
    for module, targets in GRAPH.items():
        importer = _package_of(module)
        for target in targets:
            owner, name = target.rsplit(".", 1)
            if name.startswith("_") and importer != owner and not importer.startswith(owner + "."):
                offenders.append(f"{module} -> {target}")
    assert not offenders, "private modules used outside their package: " + ", ".join(sorted(offenders))


def _function_body_lines(node) -> int:
    """Lines of a function without its docstring (the docstring is for the reader, not a burden)."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return 0 if not body else body[-1].end_lineno - body[0].lineno + 1


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_rooms_a_newcomer_can_hold_in_their_head(path):
    source = path.read_text(encoding="utf-8")
    lines = len(source.splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines (at most {MAX_MODULE_LINES})"
    long = [(n.name, _function_body_lines(n)) for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _function_body_lines(n) > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (docstring not counted): {long}"


# --------------------------------------------------------------------------- the checks can fail


def test_the_cycle_finder_sees_a_circle_inside_one_layer():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_resolves_relative_and_function_level_imports(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text("import os\nfrom fmmlearn.masking import mask_top_k\n\n\ndef f():\n"
                      "    from ..modeling import map_batches\n    from . import _cache\n", encoding="utf-8")
    found = _imports(source, module="fmmlearn.study.probe")
    assert found == {"fmmlearn.masking", "fmmlearn.modeling", "fmmlearn.study._cache"}

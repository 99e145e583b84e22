"""The package's shape (docs/architecture.md), read from the source with ``ast``.

* every unit (top-level module or sub-package) has exactly one place in one of at most eight layers,
  and imports only from lower layers and from the units left of it in its own layer;
* the import graph has no circle, between modules (inside a package too) or between packages;
* no module imports another package's private module (``fmmlearn.pkg._x`` is for ``pkg`` only);
* rooms a newcomer can hold in their head: no module over 700 lines of code (docstrings, comments and blank
  lines not counted), no function body over 120.
* every warning goes through ``fmmlearn.utils._warnings.warn`` (attributed to the user's line, shown once
  per call): no direct ``warnings.warn`` elsewhere.
* warnings are silenced by their category, never by a pattern of their message: no
  ``filterwarnings``/``simplefilter`` with ``message=`` in the package or the benchmarks (a pattern
  such as ``".*truncat"`` hid the ``CacheWarning`` of a truncated cache file).

Module-level and function-level imports count alike, so a lazy import inside a function is
seen too.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "fmmlearn"

#: Layer -> the units (top-level modules and sub-packages) in it, bottom first. A unit imports only
#: from the layers below its own.
LAYERS = (
    ("_version", "exceptions", "utils"),
    ("metrics", "datasets", "plotting", "encoding", "masking", "modeling", "__init__"),
    ("importance", "distributed", "explanation"),
    ("ood", "faithfulness"),
    ("estimator",),
    ("study",),
    ("cli",),
    ("__main__", "classifier", "training", "explainer_masking", "html"),
)
#: Unit -> (its layer, its place in the layer): a unit imports from the layers below and from the units
#: left of it in its own layer, so the order of the map is one order of the whole package.
RANK = {unit: (level, place) for level, units in enumerate(LAYERS) for place, unit in enumerate(units)}
LAYER = {unit: level for unit, (level, _) in RANK.items()}
#: A module: at most 700 physical lines (`wc -l`); a function body: at most 120 lines of code (no docstring).
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


def test_the_layer_map_has_at_most_eight_layers():
    assert len(LAYERS) <= 8, f"{len(LAYERS)} layers: group units into at most eight (docs/architecture.md)"


def test_the_layer_map_names_each_unit_once_and_every_unit_has_a_layer():
    named = [unit for units in LAYERS for unit in units]
    assert len(named) == len(set(named)), f"named twice: {sorted({u for u in named if named.count(u) > 1})}"
    units = {_unit(m) for m in MODULES}
    assert not units - set(named), f"give these a layer (here and in docs/architecture.md): {sorted(units - set(named))}"
    assert not set(named) - units, f"no such unit: {sorted(set(named) - units)}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_from_below_or_left_of_its_unit(module):
    unit = _unit(module)
    wrong = sorted({_unit(t) for t in GRAPH[module] if _unit(t) != unit and RANK[_unit(t)] > RANK[unit]})
    assert not wrong, (f"{module} (layer {LAYER[unit]}, {unit}) imports from a unit right of it in its layer "
                       f"or from a layer above: {wrong}")


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


def _physical_lines(source: str) -> int:
    """Lines of a module as ``wc -l`` counts them: code, docstrings, comments and blank lines alike.

    A module is read whole, so its docstrings count: one to three lines per parameter, the long explanation
    in the user guide page the docstring links (docs/architecture.md, "Rooms of the right size").
    """
    return len(source.splitlines())


def test_physical_lines_count_docstrings_comments_and_blank_lines():
    source = 'def f():\n    """Doc.\n\n    More.\n    """\n    # why\n\n    return 1\n'
    assert _physical_lines(source) == 8


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_rooms_a_newcomer_can_hold_in_their_head(path):
    source = path.read_text(encoding="utf-8")
    lines = _physical_lines(source)
    assert lines <= MAX_MODULE_LINES, \
        f"{path.relative_to(PACKAGE)} has {lines} lines (at most {MAX_MODULE_LINES}, docstrings included)"
    long = [(n.name, _function_body_lines(n)) for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _function_body_lines(n) > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (docstring not counted): {long}"


#: Modules allowed to call :mod:`warnings` directly, and why.
DIRECT_WARNINGS = {
    # the helper itself
    "fmmlearn.utils._warnings": "warn",
    # re-emits a warning pandas raised while reading a table, at pandas' own file and line
    "fmmlearn.cli._io": "warn_explicit",
}


def _direct_warnings(source: str) -> list:
    """``(line, call)`` of every ``warnings.warn``/``warn_explicit`` call and ``from warnings import warn``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "warnings" \
                and node.func.attr in ("warn", "warn_explicit"):
            found.append((node.lineno, node.func.attr))
        elif isinstance(node, ast.ImportFrom) and node.module == "warnings" \
                and any(alias.name in ("warn", "warn_explicit") for alias in node.names):
            found.append((node.lineno, "from warnings import"))
    return found


def test_every_warning_goes_through_the_one_helper():
    offenders = []
    for module, path in MODULES.items():
        allowed = DIRECT_WARNINGS.get(module)
        offenders += [f"{path.relative_to(PACKAGE)}:{line} {call}" for line, call in
                      _direct_warnings(path.read_text(encoding="utf-8")) if call != allowed]
    assert not offenders, ("warn through fmmlearn.utils._warnings.warn (the user's line, once per call), not directly: "
                           + ", ".join(offenders))


#: Warning filters by message allowed, and why: ``(path relative to the repository, the line's text) -> reason``.
#: Only for a third-party warning that has no category of its own (none needed so far).
MESSAGE_FILTERS: dict = {}

#: The sources whose warning filters are checked: the package, the benchmarks (benchmarks/reproduce.py) and the
#: gallery examples (users copy them).
FILTERED_SOURCES = [*SOURCES, *sorted((PACKAGE.parent / "benchmarks").glob("*.py")),
                    *sorted((PACKAGE.parent / "examples").glob("*.py"))]


def _message_filters(source: str) -> list:
    """``(line, call)`` of every ``filterwarnings``/``simplefilter`` call that filters by message.

    The message is ``message=`` or, for ``filterwarnings``, its second positional argument (unless an
    empty string, which matches every message); ``warnings.filterwarnings(...)`` and a bare
    ``filterwarnings(...)`` imported from :mod:`warnings` count alike.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name not in ("filterwarnings", "simplefilter"):
            continue
        positional = node.args[1:2] if name == "filterwarnings" else []
        by_message = any(k.arg == "message" for k in node.keywords) or any(
            not (isinstance(arg, ast.Constant) and arg.value == "") for arg in positional)
        if by_message:
            found.append((node.lineno, name))
    return found


def test_warnings_are_silenced_by_category_never_by_message():
    root = PACKAGE.parent
    offenders = []
    for path in FILTERED_SOURCES:
        source = path.read_text(encoding="utf-8")
        lines, relative = source.splitlines(), str(path.relative_to(root))
        offenders += [f"{relative}:{line} {call}" for line, call in _message_filters(source)
                      if (relative, lines[line - 1].strip()) not in MESSAGE_FILTERS]
    assert not offenders, ("silence a warning by its category (fmmlearn.exceptions has one per kind, e.g. "
                           "TruncationWarning), not by a pattern of its message: " + ", ".join(offenders))


#: Tokenizer methods that turn text into ids or ids into text.
_TEXT_METHODS = {"encode", "encode_plus", "batch_encode_plus", "decode", "batch_decode", "convert_tokens_to_string",
                 "__call__"}


def _tokenizer_text_calls(source: str) -> list:
    """``(line, call)`` of every call that tokenizes text or decodes ids with a tokenizer.

    A tokenizer is a name or attribute called ``tokenizer``/``tokenizer_`` (how fmmlearn names it
    everywhere); calling it, or one of :data:`_TEXT_METHODS` on it, counts.
    """
    def is_tokenizer(node) -> bool:
        return (isinstance(node, ast.Name) and node.id in ("tokenizer", "tokenizer_")) or \
            (isinstance(node, ast.Attribute) and node.attr in ("tokenizer", "tokenizer_"))

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        if is_tokenizer(node.func):
            found.append((node.lineno, "tokenizer(...)"))
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _TEXT_METHODS and is_tokenizer(node.func.value):
            found.append((node.lineno, f"tokenizer.{node.func.attr}"))
    return found


def test_text_is_tokenized_once_in_encoding_and_never_decoded():
    # Calls that tokenize no user text, each with its reason.
    checks_of_the_tokenizer = {
        "fmmlearn.modeling._decoders": "checks that an added special token (mask, pad) tokenizes to itself alone",
    }
    offenders = []
    for module, path in MODULES.items():
        if module == "fmmlearn.encoding" or module in checks_of_the_tokenizer:
            continue
        offenders += [f"{path.relative_to(PACKAGE)}:{line} {call}"
                      for line, call in _tokenizer_text_calls(path.read_text(encoding="utf-8"))]
    assert not offenders, ("tokenize through fmmlearn.encoding.encode and work on its ids (never decode and "
                           "re-tokenize): " + ", ".join(offenders))
    assert _tokenizer_text_calls((PACKAGE / "encoding.py").read_text(encoding="utf-8")), "the reader sees no call"


def _seed_arithmetic(source: str) -> list:
    """Lines that add a number to a seed (``seed + 1``): a derived seed made outside ``fmmlearn.utils._random``."""
    def is_seed(node) -> bool:
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        return "seed" in name.lower()

    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))
            and (is_seed(node.left) or is_seed(node.right))]


def test_every_derived_seed_comes_from_the_random_module():
    offenders = [f"{path.relative_to(PACKAGE)}:{line}" for module, path in MODULES.items()
                 if module != "fmmlearn.utils._random" for line in _seed_arithmetic(path.read_text(encoding="utf-8"))]
    assert not offenders, ("derive seeds with fmmlearn.utils._random (derive_seed, or offset_seed for the old "
                           "seed + k streams): " + ", ".join(offenders))


# --------------------------------------------------------------------------- the checks can fail


def test_the_seed_reader_sees_arithmetic_on_seeds():
    assert _seed_arithmetic("a = seed + 1\nb = self.random_seed - 2\nc = n + 1\nd = derive_seed(seed, 1)\n") == [1, 2]


def test_the_tokenizer_reader_sees_calls_and_decodes():
    source = ("ids = clf.tokenizer_(texts)\ntext = tokenizer.decode(ids)\nclf.encode(X)\n"
              "tokenizer.convert_ids_to_tokens(ids)\n")
    assert _tokenizer_text_calls(source) == [(1, "tokenizer(...)"), (2, "tokenizer.decode")]


def test_the_warning_reader_sees_direct_calls_and_imports():
    source = ("import warnings\nfrom warnings import warn\nfrom .._warnings import warn as w\n"
              "warnings.warn('x', UserWarning, stacklevel=2)\nw('fine')\nwarnings.catch_warnings()\n")
    assert _direct_warnings(source) == [(2, "from warnings import"), (4, "warn")]


def test_the_filter_reader_sees_filters_by_message():
    source = ("import warnings\nfrom warnings import filterwarnings\n"
              "warnings.filterwarnings('ignore', message='.*truncat', category=UserWarning)\n"
              "filterwarnings('ignore', '.*longer than max_length.*')\n"
              "warnings.simplefilter('ignore', message='x')\n"
              "warnings.simplefilter('ignore', TruncationWarning)\n"
              "warnings.filterwarnings('ignore', category=FutureWarning, module='peft')\n"
              "warnings.filterwarnings('ignore', '', FutureWarning)\n")
    assert _message_filters(source) == [(3, "filterwarnings"), (4, "filterwarnings"), (5, "simplefilter")]


def _script_imports(path: Path, scripts: set) -> set:
    """The sibling scripts ``path`` imports (``import x`` / ``from x import y``, at any depth)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
    return (found & scripts) - {path.stem}


def test_no_import_circle_between_benchmark_scripts():
    scripts = sorted((PACKAGE.parent / "benchmarks").glob("*.py"))
    names = {p.stem for p in scripts}
    graph = {p.stem: _script_imports(p, names) for p in scripts}
    assert graph["reproduce"] >= {"claims", "reading"}  # the graph sees function-level imports too
    assert not _cycles(graph), f"import circles between benchmark scripts: {_cycles(graph)}"


def test_the_cycle_finder_sees_a_circle_inside_one_layer():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_resolves_relative_and_function_level_imports(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text("import os\nfrom fmmlearn.masking import mask_top_k\n\n\ndef f():\n"
                      "    from ..modeling import map_batches\n    from . import _cache\n", encoding="utf-8")
    found = _imports(source, module="fmmlearn.study.probe")
    assert found == {"fmmlearn.masking", "fmmlearn.modeling", "fmmlearn.study._cache"}

"""The code blocks of README.md and docs/*.md, and the checks of ``tests/docs/test_docs.py`` that do not run them.

:func:`code_blocks` finds every fenced block of a page (indented ones in list
items too) with the line of its opening fence; :func:`shell_lines` splits a
shell block into commands.  The static checks raise ``AssertionError`` with a
message that names the doc line:

* :func:`check_python_names` -- every ``fmmlearn`` name a Python block imports
  or reaches (``fmmlearn.x.y``, ``Imported.attr``) exists, and every call of
  an ``fmmlearn`` callable binds to its signature;
* :func:`check_defined_names` -- a block only uses names the page defined
  before it (for blocks that are compiled but not run);
* :func:`check_signature_block` -- a block that shows a signature
  (``name(a, *, b=None) -> str``) matches the function's real signature;
* :func:`check_pip_install`, :func:`check_accelerate_launch`,
  :func:`check_script_arguments`, :func:`check_ci_runs`,
  :func:`check_jq_filter` -- shell commands that install packages, need
  several GPUs, or run for minutes.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import importlib
import inspect
import io
import json
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OUTPUT_LANGUAGES", "PYTHON_LANGUAGES", "ROOT", "SHELL_LANGUAGES", "CodeBlock", "Command", "ShellLine",
           "bound_names", "check_accelerate_launch", "check_ci_runs", "check_defined_names", "check_jq_filter",
           "check_pip_install", "check_python_names", "check_script_arguments", "check_signature_block", "code_blocks",
           "doc_pages", "is_signature_block", "parse_fmmlearn", "shell_lines"]

ROOT = Path(__file__).resolve().parents[2]
#: Fence languages run as Python.
PYTHON_LANGUAGES = frozenset({"python", "py"})
#: Fence languages whose command lines are run or checked (``console``: only the ``$ `` lines).
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console", "zsh"})
#: Fence languages that show output, diagrams or data: never run.
OUTPUT_LANGUAGES = frozenset({"text", "txt", "output", "json", "jsonl", "csv", "tsv", "html", "toml", "yaml", "diff"})

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its page (relative to the repository), the line of its opening fence, its text."""

    page: str
    line: int
    language: str
    source: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind(self) -> str:
        """``"python"``, ``"shell"``, ``"output"`` or ``"unknown"`` (an unlabelled or unknown fence)."""
        if self.language in PYTHON_LANGUAGES:
            return "python"
        if self.language in SHELL_LANGUAGES:
            return "shell"
        return "output" if self.language in OUTPUT_LANGUAGES else "unknown"


def doc_pages(root: Path = ROOT) -> list[Path]:
    """README.md, then docs/*.md in name order."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def code_blocks(path: Path, root: Path = ROOT) -> list[CodeBlock]:
    """The fenced code blocks of one Markdown page, in order."""
    page = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None or ("`" in opening["info"] and opening["fence"][0] == "`"):
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"].expandtabs())
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), None)
        if end is None:
            raise ValueError(f"{page}:{i + 1}: the code fence {fence} is never closed.")
        body = [_strip_indent(line, indent) for line in lines[i + 1:end]]
        language = (opening["info"].split() or [""])[0].lower()
        blocks.append(CodeBlock(page, i + 1, language, "\n".join(body) + "\n"))
        i = end + 1
    return blocks


def _strip_indent(line: str, indent: int) -> str:
    """Remove up to ``indent`` leading spaces (the fence's own indentation, e.g. in a list item)."""
    line = line.expandtabs()
    return line[min(indent, len(line) - len(line.lstrip(" "))):]


# --------------------------------------------------------------------------- shell


@dataclass(frozen=True)
class Command:
    """One simple command: its leading ``NAME=value`` assignments and its words."""

    env: tuple[tuple[str, str], ...]
    argv: tuple[str, ...]


@dataclass(frozen=True)
class ShellLine:
    """One command line of a shell block: ``&&``/``;``-chained pipelines of commands."""

    line: int
    text: str
    pipelines: tuple[tuple[Command, ...], ...]


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def shell_lines(block: CodeBlock) -> list[ShellLine]:
    """The command lines of a shell block (comments dropped; in ``console`` blocks only the ``$ `` lines)."""
    result, pending, start = [], "", None
    for offset, raw in enumerate(block.source.splitlines(), start=1):
        text = raw.strip()
        if block.language == "console":
            if pending:
                text = raw.strip()
            elif text.startswith("$ "):
                text = text[2:]
            else:
                continue  # output
        if not pending and (not text or text.startswith("#")):
            continue
        start = block.line + offset if not pending else start
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        text, pending = pending + text, ""
        result.append(ShellLine(start, text, _parse_line(text, f"{block.page}:{start}")))
    if pending:
        raise ValueError(f"{block.id}: the last command line ends with a line continuation.")
    return result


def _parse_line(text: str, where: str) -> tuple[tuple[Command, ...], ...]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    pipelines, pipeline, words = [], [], []
    for token in lexer:
        if token in ("&&", ";", "||"):
            pipeline.append(_command(words, where))
            pipelines.append(tuple(pipeline))
            pipeline, words = [], []
        elif token == "|":
            pipeline.append(_command(words, where))
            words = []
        elif token and set(token) <= set("();<>|&"):
            raise ValueError(f"{where}: shell syntax {token!r} is not supported by the docs test; write plain "
                             "commands joined by && and |, or extend tests/helpers/docs.py.")
        else:
            words.append(token)
    pipeline.append(_command(words, where))
    pipelines.append(tuple(pipeline))
    return tuple(pipelines)


def _command(words: list[str], where: str) -> Command:
    n_env = next((k for k, word in enumerate(words) if not _ASSIGNMENT.match(word)), len(words))
    if n_env == len(words):
        raise ValueError(f"{where}: an empty command in {' '.join(words)!r}.")
    env = tuple(tuple(word.split("=", 1)) for word in words[:n_env])
    return Command(env, tuple(words[n_env:]))


# --------------------------------------------------------------------------- Python: names and signatures


def _is_fmmlearn(obj) -> bool:
    """A module, class or function of fmmlearn (not an instance: its fitted attributes are not static)."""
    if inspect.ismodule(obj):
        return obj.__name__.split(".")[0] == "fmmlearn"
    if inspect.isclass(obj) or inspect.isroutine(obj):
        return str(getattr(obj, "__module__", "")).split(".")[0] == "fmmlearn"
    return False


def _chain(node) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; ``None`` for anything else (calls, subscripts, ...)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _fmmlearn_roots(tree: ast.AST, namespace: dict, where: str, errors: list) -> dict:
    """Names bound to fmmlearn objects: the namespace's and the block's own ``fmmlearn`` imports."""
    roots = {name: value for name, value in namespace.items() if _is_fmmlearn(value)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "fmmlearn":
                    continue
                try:
                    module = importlib.import_module(alias.name)
                except ImportError as exc:
                    errors.append(f"{where}{node.lineno}: import {alias.name} fails: {exc}")
                    continue
                if alias.asname:
                    roots[alias.asname] = module
                else:
                    roots["fmmlearn"] = importlib.import_module("fmmlearn")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "fmmlearn":
            try:
                module = importlib.import_module(node.module)
            except ImportError as exc:
                errors.append(f"{where}{node.lineno}: from {node.module} import ... fails: {exc}")
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                try:
                    roots[alias.asname or alias.name] = getattr(module, alias.name)
                except AttributeError:
                    try:  # a submodule: from fmmlearn import study
                        roots[alias.asname or alias.name] = importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        errors.append(f"{where}{node.lineno}: {node.module} has no name {alias.name!r}")
    return roots


def _resolve(parts: list[str], roots: dict):
    """The object ``parts`` names, following attributes (and submodules) from its fmmlearn root."""
    obj = roots[parts[0]]
    for k, attr in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            if not inspect.ismodule(obj):
                raise AttributeError(f"{'.'.join(parts[:k])} has no attribute {attr!r}") from None
            try:
                obj = importlib.import_module(f"{obj.__name__}.{attr}")
            except ImportError:
                raise AttributeError(f"{'.'.join(parts[:k])} has no attribute {attr!r}") from None
    return obj


def _bind_call(call: ast.Call, func) -> str | None:
    """Why the call's argument shape does not fit ``func``'s signature, or ``None``."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None  # *args / **kwargs: the shape is not static
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None  # a builtin without a signature
    try:
        bound = signature.bind(*[None] * len(call.args), **{k.arg: None for k in call.keywords})
    except TypeError as exc:
        return f"{exc}; the signature is {signature}"
    return _unrouted_keyword(func, signature, bound)


def _unrouted_keyword(func, signature, bound) -> str | None:
    """For an estimator with ``net__`` routing, a keyword caught by its ``**net_params`` without the prefix."""
    from fmmlearn.estimator._net_routing import NET_PREFIX, NetRoutingMixin

    if not (inspect.isclass(func) and issubclass(func, NetRoutingMixin)):
        return None
    var = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)
    stray = [name for name in bound.arguments.get(var, {}) if not name.startswith(NET_PREFIX)]
    if stray:
        return f"got an unexpected keyword argument {stray[0]!r} (net settings take the prefix {NET_PREFIX!r})"
    return None


def _parse(block: CodeBlock) -> ast.Module:
    """The block's syntax tree, with the page's line numbers."""
    return ast.increment_lineno(ast.parse(block.source, filename=block.page), block.line)


def check_python_names(block: CodeBlock, namespace: dict | None = None) -> None:
    """Every fmmlearn name the block imports or reaches exists, and every fmmlearn call fits its signature.

    Parameters
    ----------
    block : CodeBlock
        A Python block (parsed here: a syntax error is raised as is).
    namespace : dict, optional
        Names defined before the block; those bound to fmmlearn modules,
        classes or functions are followed too.
    """
    tree, where = _parse(block), f"{block.page}:"
    errors = []
    roots = _fmmlearn_roots(tree, namespace or {}, where, errors)
    rebound = _bound_names(tree) - {n for n in roots if _imported_here(tree, n)}
    roots = {name: obj for name, obj in roots.items() if name not in rebound}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            parts = _chain(node)
            if parts and parts[0] in roots:
                try:
                    _resolve(parts, roots)
                except AttributeError as exc:
                    errors.append(f"{where}{node.lineno}: {exc}")
        elif isinstance(node, ast.Call):
            parts = _chain(node.func)
            if parts and parts[0] in roots:
                try:
                    func = _resolve(parts, roots)
                except AttributeError:
                    continue  # reported with the attribute
                if callable(func) and (problem := _bind_call(node, func)):
                    errors.append(f"{where}{node.lineno}: {'.'.join(parts)}(...) does not fit: {problem}")
    assert not errors, "\n".join(sorted(set(errors)))


def _imported_here(tree: ast.AST, name: str) -> bool:
    return any(isinstance(node, (ast.Import, ast.ImportFrom))
               and any((a.asname or a.name.split(".")[0]) == name for a in node.names) for node in ast.walk(tree))


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the block binds (assignments, loop and comprehension targets, imports, defs, ``as``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def bound_names(block: CodeBlock) -> set[str]:
    """The names a Python block defines when it runs (what a reader has afterwards)."""
    return _bound_names(_parse(block))


def check_defined_names(block: CodeBlock, defined: set[str]) -> None:
    """Every name the block reads is a builtin, in ``defined`` (by the page before it), or bound in the block."""
    tree = _parse(block)
    known = _bound_names(tree) | set(defined) | set(dir(builtins))
    missing = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in known:
            missing.setdefault(node.id, node.lineno)
    assert not missing, "\n".join(f"{block.page}:{line}: {name!r} is used but never defined or imported on this page"
                                  for name, line in sorted(missing.items(), key=lambda item: item[1]))


_SIGNATURE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)\((?P<params>.*)\)\s*(->\s*(?P<returns>.+))?$", re.S)


def _split_signature_block(source: str):
    """(import lines, name, ``def`` source) of a block that shows a signature; ``None`` for ordinary code."""
    try:
        compile(source, "<block>", "exec")
        return None
    except SyntaxError:
        pass
    lines = source.strip().splitlines()
    start = next((k for k, line in enumerate(lines) if not line.startswith(("from ", "import ")) and line.strip()), None)
    if start is None:
        return None
    match = _SIGNATURE.match("\n".join(lines[start:]).strip())
    if match is None:
        return None
    definition = f"def {match['name'].split('.')[-1]}({match['params']})" + \
        (f" -> {match['returns'].strip()}" if match["returns"] else "") + ": ..."
    try:
        compile(definition, "<signature>", "exec")
    except SyntaxError:
        return None
    return "\n".join(lines[:start]), match["name"], definition


def is_signature_block(source: str) -> bool:
    """A Python block that is not code but a signature: ``from m import f`` then ``f(a, *, b=1) -> str``."""
    return _split_signature_block(source) is not None


def check_signature_block(source: str, where: str) -> None:
    """The shown signature has the real function's parameters: names, kinds and defaults, in order."""
    imports, name, definition = _split_signature_block(source)
    namespace = {}
    exec(compile(imports, where, "exec"), namespace)
    func = namespace[name.split(".")[0]]
    for attr in name.split(".")[1:]:
        func = getattr(func, attr)
    shown = {}
    exec(compile(definition, where, "exec"), shown)
    documented = inspect.signature(shown[name.split(".")[-1]])
    actual = inspect.signature(func)
    as_list = lambda sig: [(p.name, p.kind, p.default) for p in sig.parameters.values()]  # noqa: E731
    assert as_list(documented) == as_list(actual), (
        f"{where}: the documented signature of {name} is\n  {documented}\nbut the function's is\n  {actual}")


# --------------------------------------------------------------------------- shell: commands that are checked


def _load_toml(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        from pip._vendor import tomli as tomllib
    return tomllib.loads(path.read_text(encoding="utf-8"))


def check_pip_install(argv: tuple[str, ...], where: str, root: Path = ROOT) -> None:
    """``pip install ...``: every requirement parses, and fmmlearn's extras (by name or path) exist."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    assert argv[:2] == ("pip", "install") or argv[:4] == ("python", "-m", "pip", "install"), argv
    args = list(argv[2:] if argv[0] == "pip" else argv[4:])
    project = _load_toml(root / "pyproject.toml")["project"]
    extras = set(project.get("optional-dependencies", {}))
    requirements = []
    while args:
        arg = args.pop(0)
        if arg in ("-e", "--editable"):
            assert args, f"{where}: {arg} needs a path"
            requirements.append(("path", args.pop(0)))
        elif arg in ("-q", "--quiet", "-U", "--upgrade", "--no-deps", "--pre"):
            continue
        elif arg.startswith("-"):
            raise AssertionError(f"{where}: the docs test does not know the pip option {arg!r}; extend "
                                 "tests/helpers/docs.py if it is right.")
        else:
            requirements.append(("path" if arg.startswith((".", "/")) else "name", arg))
    assert requirements, f"{where}: pip install without a requirement"
    for kind, text in requirements:
        if kind == "path":
            path, _, wanted = text.partition("[")
            assert (root / path / "pyproject.toml").is_file(), f"{where}: {path!r} is not the project directory"
            wanted = {e.strip() for e in wanted.rstrip("]").split(",") if e.strip()}
        else:
            try:
                requirement = Requirement(text)
            except InvalidRequirement as exc:
                raise AssertionError(f"{where}: {text!r} is not a valid requirement: {exc}") from None
            if canonicalize_name(requirement.name) != canonicalize_name(project["name"]):
                continue
            wanted = set(requirement.extras)
        unknown = sorted(wanted - extras)
        assert not unknown, (f"{where}: the extra(s) {unknown} are not in pyproject.toml "
                             f"(its extras: {sorted(extras)})")


class _ArgumentsParsed(Exception):
    """Raised right after a script's own parser accepted its arguments, so that nothing runs."""


def check_script_arguments(argv: tuple[str, ...], where: str, root: Path = ROOT) -> None:
    """``python path/script.py ARGS``: the script exists and its own argparse parser accepts ARGS.

    The script runs as ``__main__`` up to its ``parse_args`` call, which is
    made to stop it once the arguments are parsed.
    """
    script = root / argv[1]
    assert script.is_file(), f"{where}: {argv[1]} does not exist"
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, args=None, namespace=None):
        original(parser, args, namespace)
        raise _ArgumentsParsed

    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv, sys.path = [str(script), *argv[2:]], [str(script.parent), *sys.path]
    argparse.ArgumentParser.parse_args = parse_then_stop
    try:
        with contextlib.redirect_stderr(errors := io.StringIO()):
            runpy.run_path(str(script), run_name="__main__")
    except _ArgumentsParsed:
        return
    except SystemExit as exc:
        raise AssertionError(f"{where}: {argv[1]} rejects its arguments: {errors.getvalue().strip()}") from None
    finally:
        argparse.ArgumentParser.parse_args = original
        sys.argv, sys.path[:] = old_argv, old_path
    raise AssertionError(f"{where}: {argv[1]} finished without parsing its arguments with argparse.")


def check_accelerate_launch(argv: tuple[str, ...], where: str, page_blocks: list[CodeBlock], root: Path = ROOT):
    """``accelerate launch [options] SCRIPT|-m MODULE [args]``: Accelerate's parser accepts the options.

    ``-m fmmlearn`` arguments must be accepted by the ``fmmlearn`` parser; a
    script must be a Python block of the same page that starts with
    ``# SCRIPT`` (the docs' convention) or a file of the repository.

    Returns
    -------
    CodeBlock or None
        The page's block of the script.
    """
    from accelerate.commands.launch import launch_command_parser

    assert argv[:2] == ("accelerate", "launch"), argv
    with contextlib.redirect_stderr(errors := io.StringIO()):
        try:
            args = launch_command_parser().parse_args(list(argv[2:]))
        except SystemExit:
            raise AssertionError(f"{where}: accelerate launch rejects {' '.join(argv[2:])}: "
                                 f"{errors.getvalue().strip()}") from None
    if args.module:
        assert args.training_script == "fmmlearn", f"{where}: -m {args.training_script} is not fmmlearn"
        parse_fmmlearn(tuple(args.training_script_args), where)
        return None
    script = args.training_script
    block = next((b for b in page_blocks if b.kind == "python" and b.source.startswith(f"# {script}\n")), None)
    assert block is not None or (root / script).is_file(), (
        f"{where}: {script} is neither a file of the repository nor a block of this page starting with '# {script}'")
    return block


def parse_fmmlearn(args: tuple[str, ...], where: str) -> argparse.Namespace:
    """The ``fmmlearn`` command's parser accepts ``args`` (nothing runs)."""
    from fmmlearn.cli import build_parser

    with contextlib.redirect_stderr(errors := io.StringIO()):
        try:
            return build_parser().parse_args(list(args))
        except SystemExit:
            raise AssertionError(f"{where}: fmmlearn rejects {' '.join(args)}: {errors.getvalue().strip()}") from None


def check_ci_runs(command: Command, where: str, root: Path = ROOT) -> None:
    """A command the docs say CI runs (the test suite) is the command ``.ci/run`` runs, with its environment."""
    script = (root / ".ci" / "run").read_text(encoding="utf-8")
    text = " ".join(command.argv)
    assert re.search(rf"^\s*{re.escape(text)}\s*$", script, re.M), f"{where}: .ci/run does not run {text!r}"
    for name, value in command.env:
        assert re.search(rf"^\s*export\b.*\b{re.escape(name)}={re.escape(value)}(\s|$)", script, re.M), (
            f"{where}: .ci/run does not export {name}={value}")


_JQ = re.compile(r"^\s*(?P<path>(\.[A-Za-z_]\w*(\[\])?)+)\s*(\|\s*\{(?P<keys>[\w\s,]+)\}\s*)?$")


def check_jq_filter(jq_filter: str, output: str, where: str) -> None:
    """The JSON a command printed has what a ``jq`` filter of the form ``.a[] | {k1, k2}`` reads.

    Where ``jq`` is installed the filter also runs through it.
    """
    data = json.loads(output)
    match = _JQ.match(jq_filter)
    assert match, (f"{where}: the docs test checks jq filters of the form '.a.b[] | {{k1, k2}}' only; "
                   f"extend tests/helpers/docs.py for {jq_filter!r}")
    values = [data]
    for name, iterate in re.findall(r"\.([A-Za-z_]\w*)(\[\])?", match["path"]):
        for value in values:
            assert isinstance(value, dict) and name in value, f"{where}: the JSON output has no key {name!r}"
        values = [value[name] for value in values]
        if iterate:
            assert all(isinstance(v, list) and v for v in values), f"{where}: {name!r} is not a non-empty list"
            values = [item for value in values for item in value]
    for key in (k.strip() for k in (match["keys"] or "").split(",") if k.strip()):
        assert all(isinstance(v, dict) and key in v for v in values), f"{where}: the JSON rows have no key {key!r}"
    if shutil.which("jq"):
        done = subprocess.run(["jq", jq_filter], input=output, capture_output=True, text=True, check=False)
        assert done.returncode == 0 and done.stdout.strip(), f"{where}: jq {jq_filter!r} failed: {done.stderr}"


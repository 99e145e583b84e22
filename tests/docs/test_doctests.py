"""The ``Examples`` sections of the public docstrings run as doctests and print what they show.

Public means what the API reference documents (``docs/conf.py``): the ``__all__`` of ``fmmlearn``
and of its public modules, each object once.  One test per object whose docstring has examples (its
methods' examples included); an example that fine-tunes the bundled MiniLM makes its test slow.
Lines marked ``# doctest: +SKIP`` are not run (they need a reader's data or files).
``test_examples_coverage`` reports how many public names have examples at all.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import warnings

import pytest

import fmmlearn

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def public_objects() -> dict[str, object]:
    """Full name -> object for every public name (the first public module exporting it names it)."""
    modules = ["fmmlearn"] + [f"fmmlearn.{m.name}" for m in pkgutil.iter_modules(fmmlearn.__path__)
                              if not m.name.startswith("_")]
    seen, out = set(), {}
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if name == "__version__" or inspect.ismodule(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            out[f"{module_name}.{name}"] = obj
    return out


def doctests_of(name: str, obj) -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(recurse=inspect.isclass(obj), exclude_empty=True)
    module = inspect.getmodule(obj)
    # as doctest.testmod runs them: in the namespace of the module that defines the object
    tests = finder.find(obj, name, module=module, globs=dict(vars(module)) if module else {})
    return [t for t in tests if any(not example.options.get(doctest.SKIP) for example in t.examples)]


OBJECTS = public_objects()
WITH_EXAMPLES = {name: doctests_of(name, obj) for name, obj in OBJECTS.items()}
WITH_EXAMPLES = {name: tests for name, tests in WITH_EXAMPLES.items() if tests}


def _param(name: str):
    fits = any("FaithfulTextClassifier(" in example.source or "minilm" in example.source
               for test in WITH_EXAMPLES[name] for example in test.examples)
    return pytest.param(name, marks=[pytest.mark.slow] if fits else [], id=name)


@pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.DegenerateModelWarning")
@pytest.mark.parametrize("name", [_param(name) for name in WITH_EXAMPLES])
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    failures = []
    for test in WITH_EXAMPLES[name]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = runner.run(test, out=failures.append)
        assert result.attempted > 0
    assert not failures, "".join(failures)


def test_examples_coverage():
    """Not a threshold: prints the count (pytest -s) and checks the most used names have examples."""
    print(f"\n{len(WITH_EXAMPLES)} of {len(OBJECTS)} public names have examples that run; without: "
          f"{sorted(set(OBJECTS) - set(WITH_EXAMPLES))}")
    for name in ("fmmlearn.FaithfulTextClassifier", "fmmlearn.racu", "fmmlearn.acu", "fmmlearn.MaSF"):
        assert name in WITH_EXAMPLES, f"{name} has no Examples section that runs"


def test_a_failing_example_fails():
    def shown_wrong():
        """
        >>> 1 + 1
        3
        """

    (test,) = doctest.DocTestFinder().find(shown_wrong, "shown_wrong", globs={})
    failures = []
    doctest.DocTestRunner(optionflags=FLAGS).run(test, out=failures.append)
    assert failures and "Expected:\n    3\nGot:\n    2" in "".join(failures)

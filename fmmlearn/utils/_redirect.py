"""Old module paths that still import, after modules moved into packages (issue 36).

:func:`redirect_moved_modules` puts a finder on :data:`sys.meta_path` that answers an old name,
e.g. ``fmmlearn._random``, with the module at its new home, ``fmmlearn.utils._random``: the one
module object, so ``from fmmlearn._random import derive_seed``, objects pickled before the move and
joblib caches that name the old module keep working.  An old private path warns with a
:class:`DeprecationWarning` naming the new one.  Public module paths that moved have thin modules of
their own (``fmmlearn.classifier``, ``fmmlearn.training``, ...) and never warn.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

__all__ = ["redirect_moved_modules"]


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finder and loader of the old names: the loader hands back the module imported under its new name."""

    def __init__(self, moved: dict):
        self.moved = dict(moved)
        self._specs = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.moved:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = self.moved[spec.name]
        if spec.name.rpartition(".")[2].startswith("_"):
            from ._warnings import warn  # here, not above: ``import fmmlearn`` loads this module and stays light

            warn(f"{spec.name} moved to {new}; import it from there (the old path will be removed).",
                 DeprecationWarning)
        module = importlib.import_module(new)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module):
        # The import system stamped the old name's spec on the module: give it back its own.
        module.__spec__ = self._specs.pop(module.__spec__.name)


def redirect_moved_modules(moved: dict) -> None:
    """Let each old module name of ``moved`` import the module at its new name.

    Parameters
    ----------
    moved : dict
        Old full module name -> new full module name.  An old name whose last part starts with an
        underscore (a private module) warns with a :class:`DeprecationWarning` when imported.
    """
    for finder in sys.meta_path:
        if isinstance(finder, _MovedModules):
            finder.moved.update(moved)
            return
    # First, so that no other finder (an old copy of fmmlearn, an editable install's) answers an old name.
    sys.meta_path.insert(0, _MovedModules(moved))

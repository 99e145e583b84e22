"""Lazy attributes for packages: public names load their module on first use.

``import fmmlearn`` (and ``from fmmlearn.ood import MaSF``) must stay light:
the heavy modules (torch, transformers) load only when a name that needs them
is first touched.  A package calls :func:`attach` once and assigns the returned
``__getattr__`` and ``__dir__``.
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["attach"]


def attach(package: str, lazy: dict, namespace: dict):
    """Module-level ``__getattr__`` and ``__dir__`` for a package with lazily imported names.

    Parameters
    ----------
    package : str
        The package's ``__name__`` (relative module names resolve against it).
    lazy : dict
        Public name -> module that defines it (absolute, or relative like ``"._curves"``).
    namespace : dict
        The package's ``globals()``: a loaded name is cached there, so later look-ups
        skip ``__getattr__``; its ``__all__`` is what ``dir()`` lists.

    Returns
    -------
    __getattr__, __dir__ : callable
    """

    def __getattr__(name):
        if name in lazy:
            value = getattr(import_module(lazy[name], package), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return list(namespace.get("__all__", sorted(lazy)))

    return __getattr__, __dir__

"""Deprecations: renamed module attributes, renamed parameters, options passed by position.

Every old spelling keeps working and emits one :class:`FutureWarning` that names the new one
(docs/changes.md, "Deprecations").
"""

from __future__ import annotations

import functools
import inspect
import sys

from ._warnings import warn

#: The fmmlearn version from which a deprecated spelling stops working.
REMOVED_IN = "0.3"

#: The default of a renamed estimator parameter's old name (scikit-learn's convention): set, it warns.
DEPRECATED = "deprecated"


def keyword_only(func=None, *, version: str = REMOVED_IN):
    """Let the keyword-only options of ``func`` still be passed by position, with a FutureWarning.

    scikit-learn's ``_deprecate_positional_args``, naming the options rather than their values
    (which may be whole data sets) and warning at the caller's line.

    Parameters
    ----------
    func : callable, optional
        The function; ``None`` returns the decorator.
    version : str, default="0.3"
        The fmmlearn version from which passing them by position is an error.

    Returns
    -------
    callable
    """
    if func is None:
        return functools.partial(keyword_only, version=version)
    parameters = inspect.signature(func).parameters.values()
    positional = [p.name for p in parameters if p.kind == p.POSITIONAL_OR_KEYWORD]
    options = [p.name for p in parameters if p.kind == p.KEYWORD_ONLY]

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        extra = len(args) - len(positional)
        if extra <= 0:
            return func(*args, **kwargs)
        names = options[:extra]
        if extra > len(options) or set(names) & set(kwargs):
            return func(*args, **kwargs)  # the TypeError Python raises names the problem
        warn(f"{func.__qualname__}: pass {', '.join(names)} by keyword ({', '.join(n + '=' for n in names)}); "
             f"from fmmlearn {version} options after the data arguments are keyword-only.", FutureWarning)
        return func(*args[:len(positional)], **dict(zip(names, args[len(positional):])), **kwargs)

    wrapper.__keyword_only__ = True
    return wrapper


def renamed_attributes(package: str, renamed: dict, namespace: dict):
    """A module ``__getattr__`` that serves each old name of ``renamed`` (old -> new) with a FutureWarning.

    Parameters
    ----------
    package : str
        The module's ``__name__``, for the message.
    renamed : dict of str to str
        Old attribute name -> the new one, looked up in ``namespace`` (or through its ``__getattr__``).
    namespace : dict
        The module's ``globals()``.

    Returns
    -------
    callable
    """
    fallback = namespace.get("__getattr__")

    def __getattr__(name):
        if name in renamed:
            new = renamed[name]
            # ``from package import old`` first asks hasattr() inside importlib, then gets it: warn once
            if sys._getframe(1).f_code.co_filename != "<frozen importlib._bootstrap>":
                warn(f"{package}.{name} is deprecated and will be removed in fmmlearn {REMOVED_IN}: use "
                     f"{package}.{new}.", FutureWarning)
            return namespace[new] if new in namespace else fallback(new)
        if fallback is not None:
            return fallback(name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def renamed_parameter(estimator, old: str, new: str):
    """The value of the renamed parameter ``new`` of ``estimator``, or of its old name ``old`` when that is set.

    The old name stays in ``__init__`` with the default ``"deprecated"`` (scikit-learn's way);
    ``run``/``fit`` call this and so warn once per call when it is set.

    Raises
    ------
    ValueError
        When both names are set.
    """
    value = getattr(estimator, old)
    if isinstance(value, str) and value == DEPRECATED:
        return getattr(estimator, new)
    name = type(estimator).__name__
    if getattr(estimator, new) is not inspect.signature(type(estimator)).parameters[new].default:
        raise ValueError(f"{name}: give {new}= only ({old}= is its deprecated name), not both.")
    warn(f"{name}({old}=...) is deprecated and will be removed in fmmlearn {REMOVED_IN}: use {new}=.",
         FutureWarning)
    return value

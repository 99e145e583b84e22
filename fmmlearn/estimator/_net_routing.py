"""``net__`` routing and ``callbacks=``: settings of the skorch net behind an estimator.

skorch's own convention (``optimizer__betas``, ``iterator_train__pin_memory``)
one level down: :class:`FaithfulTextClassifier` takes keyword arguments
prefixed ``net__`` and passes them, without the prefix, to the skorch net of
each ``fit`` (docs/classifier.md, "The skorch net").  They are estimator
parameters like any other: ``get_params`` lists them, and ``set_params``,
``clone`` and ``GridSearchCV`` take them, so a search can tune one net setting
(a ``net_params=`` dict could only be searched as whole dicts).

A setting the estimator already owns (``learning_rate`` is ``lr``,
``weight_decay`` is ``optimizer__weight_decay``, ``callbacks=``, ...) or that
``fit`` decides itself (the data, the validation split, the batch order) is
refused with the name to use instead, so no setting has two names.
"""

from __future__ import annotations

__all__ = ["NET_PREFIX", "NetRoutingMixin", "check_callbacks", "check_net_params"]

#: Keyword arguments with this prefix go to the skorch net.
NET_PREFIX = "net__"

#: Net settings that have an estimator parameter of their own.
_OWNED = {
    "lr": "learning_rate",
    "optimizer__lr": "learning_rate",
    "optimizer__weight_decay": "weight_decay",
    "max_epochs": "max_epochs",
    "batch_size": "batch_size",
    "callbacks": "callbacks",
    "verbose": "verbose",
    "device": "device",
    "module": "model",
    "train_split": "validation_fraction or fit's validation_data",
    "iterator_train__batch_size": "batch_size",
    "iterator_valid__batch_size": "batch_size",
}

#: Top-level net settings that may be routed (besides the prefixed families below).
_ROUTABLE = {"criterion", "optimizer", "use_caching", "torch_load_kwargs"}

#: Families of prefixed settings that may be routed.
_FAMILIES = ("criterion__", "optimizer__", "iterator_train__", "iterator_valid__", "callbacks__")

#: Data-loader options the net decides itself: batches come from its own (length-grouped) batch sampler
#: and its collate function pads and masks them.
_LOADER_OWNED = {"shuffle", "sampler", "batch_sampler", "collate_fn", "drop_last", "generator"}


def _refusal(name: str) -> str | None:
    """Why ``net__<name>`` cannot be routed, or ``None`` when it can."""
    if name in _OWNED:
        return f"set {_OWNED[name]} instead"
    family = next((f for f in _FAMILIES if name.startswith(f)), None)
    if family is None and name not in _ROUTABLE:
        return ("not a setting fmmlearn passes to the net; routable are "
                f"{sorted(_ROUTABLE)} and names starting with {list(_FAMILIES)}")
    if family in ("iterator_train__", "iterator_valid__") and name[len(family):] in _LOADER_OWNED:
        return "the net batches, pads and masks the data itself"
    return None


def check_net_params(params: dict, owner: str) -> dict:
    """The ``net__`` parameters of an estimator as net keyword arguments (prefix removed), checked.

    Parameters
    ----------
    params : dict
        ``name -> value``; every name starts with ``net__``.
    owner : str
        The estimator's name, for error messages.

    Returns
    -------
    dict

    Raises
    ------
    ValueError
        Naming each refused parameter and what to do instead.  Training
        batches are masked in the main process (the masking generator lives
        there), so ``net__iterator_train__num_workers`` must be 0.
    """
    routed, problems = {}, []
    for key in sorted(params):
        name = key[len(NET_PREFIX):]
        reason = _refusal(name) if name else "an empty name"
        if reason is None and name == "iterator_train__num_workers" and params[key] != 0:
            reason = ("training batches are masked while they are collated, by the generator of the main process; "
                      "worker processes would each copy it and repeat its masks, so it must be 0")
        if reason:
            problems.append(f"{key}: {reason}")
        else:
            routed[name] = params[key]
    if problems:
        raise ValueError(f"{owner} got net__ parameter(s) it cannot pass to the skorch net: " + "; ".join(problems)
                         + " (docs/classifier.md, 'The skorch net').")
    return routed


def check_callbacks(callbacks, owner: str) -> list:
    """``callbacks=`` as a list of skorch callbacks and ``(name, callback)`` pairs.

    Raises
    ------
    TypeError
        Naming the first entry that is neither.
    """
    from skorch.callbacks import Callback

    if callbacks is None:
        return []
    checked = list(callbacks)
    for i, entry in enumerate(checked):
        named = isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
        callback = entry[1] if named else entry
        if not (isinstance(callback, Callback) or (isinstance(callback, type) and issubclass(callback, Callback))):
            raise TypeError(f"{owner}(callbacks=...) must hold skorch callbacks (skorch.callbacks.Callback) or "
                            f"(name, callback) pairs; entry {i} is {entry!r}.")
    return checked


class NetRoutingMixin:
    """``net__`` keyword arguments as estimator parameters (:func:`get_params`, :func:`set_params`).

    The estimator's ``__init__`` takes ``**net_params`` and calls
    :meth:`_set_net_params`, which stores them as they are (scikit-learn's
    rule: ``__init__`` only stores); ``fit`` refuses a name without the
    ``net__`` prefix (a ``TypeError``, as a misspelt keyword would be
    without ``**``) or one that cannot be routed (:func:`check_net_params`).
    """

    #: Names of the keyword arguments stored by :meth:`_set_net_params` (none until then).
    _extra_param_names: tuple = ()

    def _set_net_params(self, params: dict) -> None:
        self._extra_param_names = tuple(dict.fromkeys([*self._extra_param_names, *params]))
        vars(self).update(params)

    def _extra_params(self) -> dict:
        return {name: getattr(self, name) for name in self._extra_param_names}

    def get_params(self, deep=True):
        params = super().get_params(deep=deep)
        params.update(self._extra_params())
        return params

    def set_params(self, **params):
        routed = {name: params.pop(name) for name in list(params) if name.startswith(NET_PREFIX)}
        super().set_params(**params)
        self._set_net_params(routed)
        return self

    def _net_params(self) -> dict:
        """The ``net__`` parameters, checked, as net keyword arguments."""
        extra = self._extra_params()
        unknown = sorted(name for name in extra if not name.startswith(NET_PREFIX))
        if unknown:
            raise TypeError(f"{type(self).__name__} got unexpected keyword argument(s) {unknown}; settings of the "
                            f"skorch net are passed as {NET_PREFIX}<name> (docs/classifier.md).")
        return check_net_params(extra, type(self).__name__)

"""Seeds: one way to turn ``random_state`` into an integer, one way to derive sub-seeds.

Every random draw in fmmlearn goes through a ``torch.Generator`` or a
``numpy.random.Generator`` seeded from an integer that comes from here, so the
same ``random_state`` gives the same masks, batch orders, baselines and
folds everywhere (fit, explain, faithfulness curves, MaSF calibration).
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["derive_seed", "generator", "offset_seed", "resolve_seed", "sample_examples"]

_MAX_SEED = 2**31 - 1


def resolve_seed(random_state, fallback=None) -> int:
    """An integer seed from ``random_state``, or from ``fallback`` when it is ``None``.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        An int is used as is (so ``random_state=0`` in ``explain`` and in ``fit``
        name the same stream); a RandomState or Generator draws one integer
        (advancing it, as scikit-learn does); ``None`` defers to ``fallback``.
    fallback : None, int, numpy.random.RandomState or numpy.random.Generator
        Typically the classifier's ``random_state``.  When both are ``None``,
        fresh OS entropy is used (not reproducible, by request).

    Returns
    -------
    int
        In ``[0, 2**31 - 1]`` for drawn seeds; a given int is returned unchanged.

    Raises
    ------
    ValueError
        For anything else (a float, a bool, a string...).
    """
    state = fallback if random_state is None else random_state
    if state is None:
        return int(np.random.SeedSequence().generate_state(1)[0] & _MAX_SEED)
    if isinstance(state, np.random.RandomState):
        return int(state.randint(0, _MAX_SEED))
    if isinstance(state, np.random.Generator):
        return int(state.integers(0, _MAX_SEED))
    if isinstance(state, bool) or not isinstance(state, numbers.Integral):
        raise ValueError(f"random_state must be None, an int, a numpy RandomState or a numpy Generator; "
                         f"got {state!r}.")
    return int(state)


def derive_seed(seed: int, *keys: int) -> int:
    """An independent seed for a sub-stream of ``seed`` (e.g. repeat ``i`` of a baseline).

    Uses :class:`numpy.random.SeedSequence` spawning semantics, so streams of
    different ``keys`` do not overlap, and the same ``(seed, keys)`` always
    gives the same seed.

    Parameters
    ----------
    seed : int
    *keys : int
        A path naming the consumer, e.g. ``derive_seed(seed, 0, i)``.

    Returns
    -------
    int
    """
    return int(np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(1)[0])


def generator(seed: int, *keys: int) -> np.random.Generator:
    """The numpy ``Generator`` of the sub-stream ``(seed, *keys)`` (``SeedSequence([seed, *keys])``).

    The same path as :func:`derive_seed`, handed over as a generator (e.g. the study's choice of the
    test texts each measure runs on: ``generator(random_state, 1)``).
    """
    return np.random.default_rng([int(seed), *map(int, keys)])


def offset_seed(seed: int, offset: int) -> int:
    """``seed + offset``: the seeds of streams that were defined that way before :func:`derive_seed` existed.

    Kept, named, so that their numbers do not change: the study's validation and training splits
    (``offset`` 1 and 2 after the test split's ``seed``) and the masked validation copy of ``fit``
    (``offset`` 1 after the fit's seed).
    """
    return int(seed) + int(offset)


def sample_examples(X, y, max_samples, seed: int):
    """At most ``max_samples`` examples of ``(X, y)``, drawn uniformly without replacement, kept in input order.

    The scorers' ``max_samples`` (:func:`fmmlearn.faithfulness.make_faithfulness_scorer`,
    :func:`fmmlearn.faithfulness.make_erasure_scorer`); ``X`` a list or a pandas object, ``seed``
    an integer from :func:`derive_seed`.
    """
    if max_samples is None or len(y) <= max_samples:
        return X, y
    keep = np.sort(np.random.default_rng(seed).choice(len(y), size=max_samples, replace=False))
    rows = X.iloc[keep] if hasattr(X, "iloc") else [X[i] for i in keep]
    return rows, np.asarray(y)[keep]

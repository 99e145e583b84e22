"""The study's (masking ratio, seed) fits as joblib tasks, e.g. on a Dask cluster (docs/scaling.md).

Inside ``joblib.parallel_backend("dask")`` (or ``fmmlearn demo
--dask-scheduler ADDRESS``) the fits that the model store lacks run as Dask
tasks.  A task carries the unfitted estimator (its parameters, the base model
by name or path) and the texts; the worker loads the base model itself, fits,
and writes the fitted model into the study's model store, which the workers
must be able to write (a shared ``cache_dir`` on a cluster) -- no weights
travel back.  The stages after ``fit`` then read the models from the store, as
on a rerun.
"""

from __future__ import annotations

import joblib

from ._cache import StageCache

__all__ = ["fit_in_parallel"]


def fit_in_parallel(cache: StageCache, unfitted: dict, data: tuple, n_jobs, fit_info, device) -> set:
    """Fit the estimators the store lacks as joblib tasks when joblib would run them in parallel.

    Parameters
    ----------
    cache : StageCache
        The study's stores; fitted models go to ``cache.models``.
    unfitted : dict of str to FaithfulTextClassifier
        Fit key -> the unfitted estimator of that run.
    data : tuple
        ``(X_train, y_train, X_valid, y_valid)``.
    n_jobs : int or None
        joblib's ``n_jobs``; ``None`` is 1 unless a ``parallel_backend``
        context (e.g. Dask's) says otherwise.
    fit_info : callable
        ``fit_info(clf, n_train, n_valid) -> dict``, stored with each model.
    device : str
        Device of the returned handles (passed through to the store).

    Returns
    -------
    set of str
        The keys fitted here; empty when joblib would run the fits one after
        the other (the caller then fits them itself, as always).
    """
    missing = {key: clf for key, clf in unfitted.items() if not cache.has_model(key)}
    if not missing or joblib.effective_n_jobs(n_jobs) == 1:
        return set()
    location = cache.models.parent
    joblib.Parallel(n_jobs=n_jobs)(
        joblib.delayed(_fit_into_store)(location, key, clf, data, fit_info, device) for key, clf in missing.items()
    )
    return set(missing)


def _fit_into_store(location, key: str, clf, data: tuple, fit_info, device) -> None:
    """One task: fit ``clf`` and write it into the store at ``location`` (atomically); nothing large comes back."""
    X_train, y_train, X_valid, y_valid = data

    def fit():
        clf.fit(X_train, y_train, validation_data=(X_valid, y_valid))
        return clf, fit_info(clf, len(y_train), len(y_valid))

    StageCache(location).fit_or_load(key, fit, device)

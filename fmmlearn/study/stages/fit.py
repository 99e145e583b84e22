"""Stage ``fit``: fine-tune (or load from the model store) every (masking ratio, seed) model."""

from __future__ import annotations

import time

from .._cache import content_key, model_identity
from .._names import model_label
from .._parallel import fit_in_parallel
from .._pipeline import Stage

__all__ = ["FitStage", "fit_info"]


def fit_info(clf, n_train: int, n_valid: int) -> dict:
    """Epochs, the selected epoch and forward counts of a fit (rows through the model, analytically)."""
    history = clf.history_
    best_columns = [c for c in history.columns if c.startswith("valid_") and c.endswith("_best")
                    and c != "valid_loss_best"]
    best = None
    if best_columns and history[best_columns[0]].any():
        best = int(history.index[history[best_columns[0]].to_numpy(dtype=bool)][-1])
    n_valid_rows = n_valid * (2 if clf.validation == "both" and clf.max_masking_ratio > 0 else 1)
    epochs = len(history)
    return {"epochs": epochs, "best_epoch": best, "n_train": n_train, "n_valid": n_valid,
            "counts": {"forward_rows": epochs * (n_train + n_valid_rows), "gradient_rows": epochs * n_train,
                       "forward_tokens": 0}}


class FitStage(Stage):
    """Fine-tune every (masking ratio, seed) model on the training split, best epoch on the validation split.

    Models are stored by content (base model, data, every fit parameter), so a rerun with another
    measure never refits; with ``n_jobs`` or inside a joblib backend (Dask) the missing fits run as
    joblib tasks that write into the store (docs/scaling.md).
    """

    name = "fit"
    requires = ("settings", "splits")
    provides = ("models", "fit_keys", "fit_info")

    def _unfitted(self, settings, splits) -> dict:
        """``run -> (fit key, unfitted estimator)``."""
        from ..._version import __version__
        from ...estimator import FaithfulTextClassifier
        from ...modeling import resolve_device

        data_key = content_key(splits.X_train, splits.y_train.tolist(), splits.X_valid, splits.y_valid.tolist())
        identity = model_identity(settings.model)
        device = str(resolve_device(settings.device))
        out = {}
        for run in settings.runs:
            ratio, seed = run
            params = dict(settings.classifier_params, model=settings.model, max_masking_ratio=ratio,
                          random_state=seed, device=settings.device, verbose=1 if settings.verbose >= 2 else 0)
            clf = FaithfulTextClassifier(**params)
            fit_params = {k: v for k, v in clf.get_params().items() if k not in ("model", "verbose")}
            fit_params["device"] = device  # "auto" and "cpu" train the same model on a CPU-only machine
            out[run] = (content_key("fit", __version__, identity, data_key, sorted(fit_params.items(), key=str)), clf)
        return out

    def execute(self, context, runtime) -> dict:
        settings, sp = context["settings"], context["splits"]
        unfitted = self._unfitted(settings, sp)
        # The scale-out hook: with n_jobs, or inside joblib.parallel_backend("dask"), the fits the store lacks
        # run as joblib tasks that write into it; the loop below then loads them.
        remote = fit_in_parallel(runtime.cache, dict(unfitted.values()), (sp.X_train, sp.y_train, sp.X_valid,
                                 sp.y_valid), settings.n_jobs, fit_info, settings.device)
        models, keys, infos = {}, {}, {}
        with runtime.progress(self.name, len(unfitted)) as bar:
            for run, (key, clf) in unfitted.items():
                bar.set_postfix_str(f"{model_label(run[0])} seed {run[1]}")

                def fit(clf=clf):
                    """Fit on the training split, selecting the best epoch on the validation split."""
                    clf.fit(sp.X_train, sp.y_train, validation_data=(sp.X_valid, sp.y_valid))
                    return clf, fit_info(clf, len(sp.y_train), len(sp.y_valid))

                start = time.perf_counter()
                handle, hit = runtime.cache.fit_or_load(key, fit, settings.device)
                models[run], keys[run], infos[run] = handle, key, handle.fit_info
                runtime.record(self.name, run, None, hit and key not in remote, time.perf_counter() - start,
                               infos[run], len(sp.y_train))
                bar.update()
        return {"models": models, "fit_keys": keys, "fit_info": infos}

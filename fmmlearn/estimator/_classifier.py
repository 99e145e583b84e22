"""The scikit-learn estimator: :class:`FaithfulTextClassifier`.

This module reads like a table of contents: it validates parameters and data,
then hands off to :mod:`fmmlearn.encoding` (tokenization), the skorch masked
fine-tuning loop (``_net``, :func:`~fmmlearn.estimator.make_net`) and
:mod:`fmmlearn.modeling` (loading, devices, batched inference).
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import accuracy_score
from sklearn.preprocessing import LabelEncoder
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..datasets import paper_params, paper_primary_metric
from ..distributed import make_accelerator
from ..encoding import encode, validate_texts
from ..exceptions import DegenerateModelWarning
from ..masking import MASKING_STRATEGIES
from ..metrics import get_metric
from ..modeling import (PRECISIONS, attach_adapters, check_peft_config, load_pretrained, predict_logits, probabilities,
                       resolve_device, resolve_max_length, resolve_precision)
from ..utils import (
    StrictInterval, check_labels, derive_seed, not_swallowed, reports_truncation_once, resolve_seed,
    single_class_note, warn,
)
from ._data import EncodedDataset
from ._net import history_frame, make_net
from ._net_routing import NET_PREFIX, NetRoutingMixin, check_callbacks
from ._schedules import LR_SCHEDULES
from ._validation_data import masked_validation, split_validation, validation_dataset
from ..utils import keyword_only

__all__ = ["FaithfulTextClassifier"]

VALIDATION_MODES = ("both", "clean", "masked")

#: Estimator parameters that :func:`fmmlearn.estimator.make_net` takes under the same name, as they are.
NET_SETTINGS = ("masking_strategy", "max_epochs", "batch_size", "learning_rate", "weight_decay", "warmup_ratio",
                "verbose", "lr_schedule", "group_by_length")


class FaithfulTextClassifier(NetRoutingMixin, ClassifierMixin, BaseEstimator):
    """A transformer text classifier fine-tuned so its explanations can be checked.

    ``fit`` fine-tunes a Hugging Face sequence classifier with random token
    masking (Madsen, Reddy & Chandar, ICML 2024): in each training batch some
    examples get a random fraction of their tokens replaced by the mask token.
    The model learns that masked inputs are normal inputs, so "mask the tokens
    an explanation calls important and watch performance drop" becomes a valid
    faithfulness measurement.  Masking is never applied at prediction time.
    docs/classifier.md, "Parameters", explains each parameter in full.

    Parameters
    ----------
    model : str, path-like or (PreTrainedModel, tokenizer), default="minilm"
        ``"minilm"`` (the bundled offline all-MiniLM-L6-v2), a local directory or hub name of an encoder or
        decoder with a fast tokenizer, or a loaded ``(model, tokenizer)`` pair, which ``fit`` copies.
    max_masking_ratio : float in [0, 1], default=1.0
        Upper bound of the per-example masking ratio ``m ~ U[0, max)``; ``0`` is plain fine-tuning.
    masking_strategy : {"half-det", "half-ran", "uni"}, default="half-det"
        Which rows of a batch are masked: the second half (the paper), a random half, or all.
    validation : {"both", "clean", "masked"}, default="both"
        Data that selects the best epoch: the clean validation split, a masked copy, or both (the paper).
    validation_fraction : float in [0, 1), default=0.2
        Stratified hold-out when ``fit`` gets no ``validation_data``; ``0`` keeps the last epoch.
    max_epochs : int, default=3
    batch_size : int, default=16
        Training batch size (the paper's 16); inference uses ``4 * batch_size``.
    group_by_length : bool, default=True
        Batches of similar length, reshuffled every epoch; ``False`` shuffles uniformly like the reference code.
    learning_rate : float, default=5e-5
        Peak learning rate (the paper used 2e-5 for RoBERTa; MiniLM prefers a larger one).
    weight_decay : float, default=0.01
        Decoupled AdamW decay, not applied to biases and LayerNorm weights.
    warmup_ratio : float in [0, 1], default=0.06
        Fraction of optimisation steps of linear warm-up, then linear decay to 0.
    lr_schedule : {"linear", "reference"}, default="linear"
        ``"linear"`` counts optimisation steps (the paper); ``"reference"`` is the reference code's schedule,
        for parity only (docs/classifier.md, "Learning-rate schedule").
    max_length : int or None, default=None
        Token limit per input, special tokens included; ``None`` is what the model can take.  Longer inputs
        are truncated with a warning.
    selection_metric : str, callable or None, default=None
        Best-epoch metric (greater is better): a :func:`fmmlearn.metrics.get_metric` name or
        ``metric(y_true, y_pred)``; ``None`` is the primary metric of ``dataset``, else ``"accuracy"``.
    dataset : str or None, default=None
        One of :func:`fmmlearn.datasets.list_paper_datasets`, e.g. set by :meth:`for_paper_dataset`; it only
        makes its primary metric the default of ``selection_metric`` and of curves, scorers and reports.
    device : str or torch.device, default="auto"
        ``"auto"`` uses CUDA when available, else the CPU.
    precision : {"auto", "fp32", "bf16", "fp16"}, default="auto"
        ``"auto"`` uses bf16 autocast only where a probe measured it faster (docs/explain.md, "Precision").
    accelerator : None, "auto" or accelerate.Accelerator, default=None
        Train with Hugging Face Accelerate, data-parallel under ``accelerate launch`` (docs/scaling.md);
        ``"auto"`` creates one in ``fit``.  Needs ``pip install "fmmlearn[distributed]"``.
    gradient_accumulation_steps : int, default=1
        With an accelerator, batches whose gradients are summed per optimisation step.
    peft_config : peft.PeftConfig or None, default=None
        Train adapters (e.g. ``peft.LoraConfig(r=8)``), the head and the mask token's row; the rest is frozen
        (docs/decoders.md).  Needs ``pip install "fmmlearn[peft]"``.
    random_state : int or None, default=0
        Seeds the head, dropout, batch order and every mask; the same seed on the same CPU gives the same model.
    verbose : int, default=0
        ``1`` shows a progress bar, ``2`` also skorch's per-epoch table.
    callbacks : list or None, default=None
        skorch callbacks or ``(name, callback)`` pairs, run in every ``fit`` after fmmlearn's own.
    **net_params
        Settings of the skorch net prefixed ``net__``, e.g. ``net__optimizer__betas=(0.9, 0.98)``; estimator
        parameters (docs/classifier.md, "The skorch net").

    Attributes
    ----------
    classes_ : ndarray
        The labels, in the order of ``predict_proba``'s columns.
    model_ : transformers.PreTrainedModel or peft.PeftModel
        The fine-tuned model (best epoch), in evaluation mode (with ``peft_config``, wrapped with its adapters).
    tokenizer_ : transformers.PreTrainedTokenizerFast
    history_ : pandas.DataFrame
        One row per epoch: ``train_loss``, ``valid_loss``, the selection metric
        (``valid_<metric>``), whether it was the best so far, and timing.
    is_pair_ : bool
        Whether the model was trained on sentence pairs.
    max_length_ : int
        The token limit inputs are cut to: ``max_length`` within the model's limit.
    model_card_ : huggingface_hub.ModelCard or None
        The card :meth:`load` read (kept by :meth:`save`); None after ``fit``.

    Examples
    --------
    >>> from fmmlearn import FaithfulTextClassifier
    >>> X, y = ["a wonderful film", "a dreadful film", "great acting", "awful plot"] * 4, ["pos", "neg"] * 8
    >>> clf = FaithfulTextClassifier(max_epochs=1, validation_fraction=0, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), clf.predict(["a wonderful film"]).shape, clf.predict_proba(X[:3]).shape
    (['neg', 'pos'], (1,), (3, 2))
    >>> clf.explain(["a wonderful film"], method="loo-sign")[["token", "importance"]].shape
    (3, 2)
    """

    _parameter_constraints = {
        "model": [str, os.PathLike, tuple],
        "max_masking_ratio": [StrictInterval(numbers.Real, 0, 1, closed="both")],
        "masking_strategy": [StrOptions(set(MASKING_STRATEGIES))],
        "validation": [StrOptions(set(VALIDATION_MODES))],
        "validation_fraction": [StrictInterval(numbers.Real, 0, 1, closed="left")],
        "max_epochs": [StrictInterval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [StrictInterval(numbers.Integral, 1, None, closed="left")],
        "learning_rate": [StrictInterval(numbers.Real, 0, None, closed="neither")],
        "weight_decay": [StrictInterval(numbers.Real, 0, None, closed="left")],
        "warmup_ratio": [StrictInterval(numbers.Real, 0, 1, closed="both")],
        "lr_schedule": [StrOptions(set(LR_SCHEDULES))],
        "group_by_length": ["boolean"],
        "max_length": [StrictInterval(numbers.Integral, 2, None, closed="left"), None],
        "selection_metric": [str, callable, None],
        "dataset": [str, None],
        "device": [str, torch.device],
        "precision": [StrOptions(set(PRECISIONS))],
        "accelerator": [None, StrOptions({"auto"}), HasMethods(["prepare", "backward"])],
        "gradient_accumulation_steps": [StrictInterval(numbers.Integral, 1, None, closed="left")],
        "peft_config": [None, HasMethods(["to_dict"])],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "callbacks": [list, tuple, None],
    }

    def __init__(
        self,
        model="minilm",
        *,
        max_masking_ratio=1.0,
        masking_strategy="half-det",
        validation="both",
        validation_fraction=0.2,
        max_epochs=3,
        batch_size=16,
        group_by_length=True,
        learning_rate=5e-5,
        weight_decay=0.01,
        warmup_ratio=0.06,
        lr_schedule="linear",
        max_length=None,
        selection_metric=None,
        dataset=None,
        device="auto",
        precision="auto",
        accelerator=None,
        gradient_accumulation_steps=1,
        peft_config=None,
        random_state=0,
        verbose=0,
        callbacks=None,
        **net_params,
    ):
        self.model = model
        self.max_masking_ratio = max_masking_ratio
        self.masking_strategy = masking_strategy
        self.validation = validation
        self.validation_fraction = validation_fraction
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.group_by_length = group_by_length
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.warmup_ratio = warmup_ratio
        self.lr_schedule = lr_schedule
        self.max_length = max_length
        self.selection_metric = selection_metric
        self.dataset = dataset
        self.device = device
        self.precision = precision
        self.accelerator = accelerator
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.peft_config = peft_config
        self.random_state = random_state
        self.verbose = verbose
        self.callbacks = callbacks
        self._set_net_params(net_params)

    @classmethod
    def for_paper_dataset(cls, name, **overrides) -> "FaithfulTextClassifier":
        """An unfitted classifier with the paper's fine-tuning settings for one of its datasets.

        The settings of :func:`fmmlearn.datasets.paper_params`: learning rate
        2e-5, the dataset's number of epochs, its primary metric as
        ``selection_metric`` (and ``dataset=name``, so faithfulness curves and
        scorers default to that metric too), batch size 16, masked
        fine-tuning (``max_masking_ratio=1.0``, ``masking_strategy="half-det"``,
        ``validation="both"``).  The paper fine-tuned RoBERTa-base and
        RoBERTa-large: pass ``model="roberta-base"`` (or ``"roberta-large"``);
        the default stays the bundled offline MiniLM, which is much smaller
        and usually wants a larger learning rate.  For the reference code's
        learning-rate schedule and batch order too, add
        ``lr_schedule="reference", group_by_length=False``.  Fit with the
        paper's validation split as ``validation_data`` (docs/datasets.md).

        Parameters
        ----------
        name : str
            A name of :func:`fmmlearn.datasets.list_paper_datasets`, e.g.
            ``"sst2"`` or ``"babi-1"``.
        **overrides
            Any other estimator parameter, or one of the above to change it
            (``max_masking_ratio=0.0`` is the paper's plain fine-tuning baseline).

        Returns
        -------
        FaithfulTextClassifier

        Raises
        ------
        ValueError
            For an unknown dataset name.
        TypeError
            For an unknown parameter.

        Examples
        --------
        >>> from fmmlearn import FaithfulTextClassifier
        >>> clf = FaithfulTextClassifier.for_paper_dataset("cola", model="roberta-base")
        >>> clf.selection_metric, clf.max_epochs, clf.learning_rate
        ('matthew', 15, 2e-05)
        >>> ds = load_paper_dataset("cola")                                               # doctest: +SKIP
        >>> clf.fit(ds.train.data, ds.train.target,                                      # doctest: +SKIP
        ...         validation_data=(ds.validation.data, ds.validation.target))
        """
        unknown = sorted(k for k in overrides if k not in cls._get_param_names() and not k.startswith(NET_PREFIX))
        if unknown:
            raise TypeError(f"{cls.__name__}.for_paper_dataset() got unexpected keyword argument(s) {unknown}.")
        return cls(**{**paper_params(name), **overrides})

    # ------------------------------------------------------------------ sklearn plumbing
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True
        tags.input_tags.two_d_array = False
        tags.input_tags.one_d_array = True
        tags.target_tags.required = True
        tags.non_deterministic = self.random_state is None
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "model_")

    def __getstate__(self):
        """Picklable after any call: hooks transformers attached to the models are stripped (docs/reliability.md)."""
        from ._persistence import picklable_state

        if not (self.accelerator is None or isinstance(self.accelerator, str)):
            raise TypeError("this FaithfulTextClassifier holds an accelerate.Accelerator (accelerator=...), a handle "
                            "on this process's distributed state that cannot be pickled; pass accelerator='auto' "
                            "(fit creates one in each process) to pickle it or send it to joblib/Dask workers.")

        return picklable_state(self, super().__getstate__())

    # ------------------------------------------------------------------ fitting
    @reports_truncation_once
    def fit(self, X, y, *, validation_data=None):
        """Fine-tune the model on texts ``X`` with labels ``y``.

        Parameters
        ----------
        X : sequence of str, or sentence pairs
            A list/array/Series of strings, or pairs as a list of 2-tuples or a
            two-column DataFrame (segment A, segment B).
        y : array-like of shape (n_samples,)
            Labels of any hashable type (str, int, bool); at least two classes.
        validation_data : tuple (X_valid, y_valid), optional
            Explicit validation set for best-epoch selection; overrides
            ``validation_fraction``.

        Returns
        -------
        self
        """
        self._validate_params()
        # Checked before the model loads; passed on to the net.
        net_params, callbacks = self._net_params(), check_callbacks(self.callbacks, type(self).__name__)
        check_peft_config(self.peft_config)
        texts, is_pair = validate_texts(X, name="X")
        labels = check_labels(y, len(texts), "y", owner=type(self).__name__)
        if len(texts) < 2:
            raise ValueError(f"X has n_samples={len(texts)}; fitting needs at least 2 samples.")
        encoder = LabelEncoder().fit(labels)
        if len(encoder.classes_) < 2:
            raise ValueError(f"y has a single class ({encoder.classes_[0].item()!r}); a classifier needs at least 2.")
        targets = encoder.transform(labels)
        seed = resolve_seed(self.random_state)
        accelerator, created = make_accelerator(self.accelerator, device=self.device, precision=self.precision,
                                                gradient_accumulation_steps=self.gradient_accumulation_steps)
        device = resolve_device(self.device) if accelerator is None else torch.device(accelerator.device)
        metric = get_metric(self._selection_metric())

        train_idx, valid_part = split_validation(texts, targets, validation_data, encoder, is_pair, seed,
                                                 self.validation_fraction, owner=type(self).__name__)

        # fork_rng: the head initialisation and dropout use torch's global RNG;
        # seeding a forked copy makes fit reproducible without side effects.
        cuda = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(seed)
            tokenizer, model = load_pretrained(
                self.model,
                num_labels=len(encoder.classes_),
                id2label={i: str(c) for i, c in enumerate(encoder.classes_)},
                label2id={str(c): i for i, c in enumerate(encoder.classes_)},
            )
            if self.peft_config is not None:
                model = attach_adapters(model, self.peft_config, tokenizer.mask_token_id)
            model = model.to(device)
            # "auto" times this model's fp32 and bf16 forwards (eval mode, no random draws) before training
            dtype = resolve_precision(self.precision, device, family="gradient", model=model)
            max_length = resolve_max_length(self.max_length, model, tokenizer, is_pair=is_pair)
            encoding = encode(tokenizer, texts, is_pair=is_pair, max_length=max_length, name="X")
            train_set = EncodedDataset(encoding.subset(train_idx), targets[train_idx])
            valid_set = clean_valid = validation_dataset(encoding, targets, valid_part, tokenizer, is_pair, max_length)
            if valid_set is not None and self.validation != "clean" and self.max_masking_ratio > 0:
                valid_set = masked_validation(valid_set, tokenizer, float(self.max_masking_ratio), self.validation,
                                              seed)
            net = self._make_net(
                model, tokenizer, train_set, valid_set, device, dtype, seed, metric, len(encoder.classes_),
                accelerator=accelerator, callbacks=callbacks, net_params=net_params,
            )
            try:
                with not_swallowed():  # skorch ends a fit on KeyboardInterrupt and returns: a long job must stop
                    net.fit(train_set, y=None)
            finally:
                if created:  # drop the Accelerator's references to the prepared optimizer and model
                    accelerator.free_memory()

        self.classes_ = encoder.classes_
        self.tokenizer_ = tokenizer
        self.model_ = net.module_.eval()
        self.history_ = history_frame(net)
        self.is_pair_ = is_pair
        self.max_length_ = max_length
        self.model_card_ = None  # the card of a loaded model describes other weights
        self.__dict__.pop("_loaded_base_model", None)
        self._warn_if_single_class(clean_valid, encoding.subset(train_idx), targets[train_idx], seed)
        return self

    def _warn_if_single_class(self, valid_set, train_encoding, train_targets, seed):
        """Warn (:class:`DegenerateModelWarning`) when the fitted model predicts one class on clean validation data.

        Without validation data, a seeded sample of at most 512 training
        examples stands in for it.
        """
        if valid_set is not None:
            encoding, gold, what = valid_set.encoding, valid_set.targets.numpy(), "validation examples"
        else:
            keep = np.random.default_rng(derive_seed(seed, 3)).permutation(len(train_targets))[:512]
            encoding, gold, what = train_encoding.subset(np.sort(keep)), train_targets[np.sort(keep)], \
                "training examples (no validation data)"
        predicted = self.encoded_logits(encoding).argmax(axis=1)
        note = single_class_note(self.classes_[predicted], self.classes_[gold], what)
        if note:
            warn(f"After fit, {note}: the model has not learned the task. Train longer (max_epochs="
                 f"{self.max_epochs}) or try another learning_rate (now {self.learning_rate:g}).",
                 DegenerateModelWarning)

    def _make_net(self, model, tokenizer, train_set, valid_set, device, dtype, seed, metric, n_classes,
                  accelerator=None, callbacks=None, net_params=None):
        return make_net(
            model, train_dataset=train_set, valid_dataset=valid_set, mask_token_id=tokenizer.mask_token_id,
            pad_token_id=tokenizer.pad_token_id, max_masking_ratio=float(self.max_masking_ratio), device=device,
            autocast_dtype=dtype, seed=seed, metric_name="valid_" + metric.name, metric=metric, n_classes=n_classes,
            accelerator=accelerator, callbacks=callbacks, net_params=net_params,
            **{name: getattr(self, name) for name in NET_SETTINGS},
        )

    def _selection_metric(self):
        """``selection_metric``, or for ``None`` the dataset's primary metric (else accuracy).

        Also checks ``dataset`` (a ValueError lists the valid names).
        """
        primary = paper_primary_metric(self.dataset, argname="dataset")
        if self.selection_metric is not None:
            return self.selection_metric
        return primary or "accuracy"

    # ------------------------------------------------------------------ prediction
    @keyword_only
    def encode(self, X, *, name: str = "X"):
        """Validate and tokenize ``X`` with the fitted tokenizer (low-level API).

        Parameters
        ----------
        X : sequence of str, or sentence pairs
            Of the same kind (single texts or pairs) as the training data.
        name : str, default="X"
            Argument name used in error messages.

        Returns
        -------
        fmmlearn.encoding.Encoding
        """
        check_is_fitted(self)
        texts, is_pair = validate_texts(X, name=name)
        if is_pair != self.is_pair_:
            kind = "sentence pairs" if self.is_pair_ else "single texts"
            raise ValueError(f"{name} must hold {kind}, like the training data.")
        return encode(self.tokenizer_, texts, is_pair=is_pair, max_length=self.max_length_, name=name)

    @property
    def device_(self) -> torch.device:
        """The device the fitted model lives on."""
        check_is_fitted(self)
        return next(self.model_.parameters()).device

    @property
    def inference_dtype_(self):
        """Autocast dtype of prediction passes (``None`` = fp32); ``"auto"`` measures the model once per process."""
        return resolve_precision(self.precision, self.device_, model=self.model_)

    @property
    def inference_batch_size_(self) -> int:
        """Batch size of forward-only passes: ``4 * batch_size``."""
        return 4 * self.batch_size

    def encoded_logits(self, encoding, input_ids=None) -> np.ndarray:
        """Logits for an :class:`~fmmlearn.encoding.Encoding` (low-level API).

        Parameters
        ----------
        encoding : Encoding
            From :meth:`encode`.
        input_ids : list of ndarray, optional
            Replacement ids per example, e.g. masked copies.

        Returns
        -------
        ndarray of float32, shape (n_samples, n_classes)
        """
        return predict_logits(self.model_, encoding, pad_token_id=self.tokenizer_.pad_token_id,
                              batch_size=self.inference_batch_size_, device=self.device_,
                              dtype=self.inference_dtype_, input_ids=input_ids)

    @reports_truncation_once
    def decision_function(self, X) -> np.ndarray:
        """Confidence scores, following scikit-learn's convention.

        Parameters
        ----------
        X : sequence of str, or sentence pairs

        Returns
        -------
        ndarray
            Binary problems: shape (n_samples,), the logit difference
            ``f_1 - f_0`` (positive means ``classes_[1]``).  Multi-class: the
            logits, shape (n_samples, n_classes), columns ordered like
            ``classes_``.  Raw logits in every case: :meth:`encoded_logits`.
        """
        logits = self.encoded_logits(self.encode(X))
        return logits[:, 1] - logits[:, 0] if logits.shape[1] == 2 else logits
    @reports_truncation_once
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (softmax of the logits), columns ordered like ``classes_``.

        Parameters
        ----------
        X : sequence of str, or sentence pairs

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        return probabilities(self.encoded_logits(self.encode(X)))

    @reports_truncation_once
    def predict(self, X) -> np.ndarray:
        """Predicted labels (values from ``classes_``).

        Parameters
        ----------
        X : sequence of str, or sentence pairs

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        logits = self.encoded_logits(self.encode(X))
        return self.classes_[logits.argmax(axis=1)]

    @reports_truncation_once
    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy on ``(X, y)``.

        Labels never seen in training count as errors (a warning names them).
        """
        predicted = self.predict(X)
        labels = check_labels(y, len(predicted), "y", owner=type(self).__name__)
        unseen = sorted(set(labels.tolist()) - set(self.classes_.tolist()), key=str)
        if unseen:
            warn(f"y contains {len(unseen)} label(s) not seen in training ({unseen[:5]}); they are counted as "
                 "errors.")
        return float(accuracy_score(labels, predicted, sample_weight=sample_weight))

    # ------------------------------------------------------------------ explanations and faithfulness
    @keyword_only
    def explain(self, X, y=None, *, method="loo-sign", target=None, segment="first", level="token",
                aggregate="sum", batch_size=None, random_state=None, **method_params) -> pd.DataFrame:
        """Token (or word) importances for each example, as a long DataFrame.

        See :func:`fmmlearn.explanation.explain` for every option and the
        columns of the result (one row per example and token: position, token,
        segment, word, character span, importance, target, method).

        Parameters
        ----------
        X : sequence of str, or sentence pairs
        y : array-like, optional
            Gold labels: explain the gold class (the paper). Without ``y`` the
            predicted class is explained.
        method : str, ImportanceMethod or explainer value (docs/explainers.md), default="loo-sign"
            An importance measure of :func:`fmmlearn.importance_methods`.
        target, segment, level, aggregate, batch_size, random_state, **method_params
            See :func:`fmmlearn.explanation.explain`.

        Returns
        -------
        fmmlearn.explanation.Explanation
            A pandas DataFrame (subclass) that also keeps the texts and
            predictions, and renders as a heatmap (``to_html``, notebooks).
        """
        from ..explanation import explain

        return explain(self, X, y, method=method, target=target, segment=segment, level=level,
                       aggregate=aggregate, batch_size=batch_size, random_state=random_state, **method_params)

    @keyword_only
    def faithfulness_curve(self, X, y, *, method="loo-sign", ratios=None, recursive=None, segment="first",
                           metric=None, random_state=None, importances=None, batch_size=None,
                           **method_params) -> pd.DataFrame:
        """Performance while masking the tokens an explanation ranks highest (docs/faithfulness.md).

        See :func:`fmmlearn.faithfulness.faithfulness_curve`.

        Returns
        -------
        pandas.DataFrame
            One row per ratio: method, ratio, metric, value, n_examples,
            mean_masked_fraction.
        """
        from ..faithfulness import faithfulness_curve

        return faithfulness_curve(self, X, y, method=method, ratios=ratios, recursive=recursive, segment=segment,
                                  metric=metric, random_state=random_state, importances=importances,
                                  batch_size=batch_size, **method_params)

    def random_masking_curve(self, X, y, *, ratios=None, metric=None, random_state=None) -> pd.DataFrame:
        """Performance under random masking of all maskable tokens, ratio by ratio.

        See :func:`fmmlearn.faithfulness.random_masking_curve`.
        """
        from ..faithfulness import random_masking_curve

        return random_masking_curve(self, X, y, ratios=ratios, metric=metric, random_state=random_state)

    @keyword_only
    def in_distribution_report(self, X_calib, X_test, y_test, *, method="rand", **options) -> pd.DataFrame:
        """MaSF in-distribution test of explainer-masked test sets, ratio by ratio.

        See :func:`fmmlearn.ood.in_distribution_report`.
        """
        from ..ood import in_distribution_report

        return in_distribution_report(self, X_calib, X_test, y_test, method=method, **options)

    # ------------------------------------------------------------------ persistence
    def model_card(self, results=None, *, dataset=None, split="test", model_name=None):
        """The Hugging Face model card (``README.md``) that :meth:`save` writes (docs/classifier.md).

        Parameters
        ----------
        results : object or list, optional
            Measured results, written as ``model-index`` entries and tables: a
            study result (its model with this ``max_masking_ratio``), a
            faithfulness or erasure report, a frame of RACU/ACU rows, of curves
            with a ``rand`` curve, an in-distribution report, an erasure
            summary, a mapping such as ``{"accuracy": 0.91}``, or a list of
            these.  None: a loaded classifier's card as read (``model_card_``),
            else a card without results.
        dataset : str, optional
            The data of the results (a Hub dataset id where there is one);
            default ``self.dataset`` or the study's data name.
        split : str or None, default="test"
        model_name : str, optional
            The card's title and ``model-index`` name.

        Returns
        -------
        huggingface_hub.ModelCard
        """
        check_is_fitted(self)
        from ._model_card import classifier_card

        return classifier_card(self, results, dataset=dataset, split=split, model_name=model_name)

    def save(self, path, *, card=None) -> Path:
        """Save the fitted classifier to a directory (no pickle).

        Writes the model in Hugging Face format (``model.safetensors`` and
        ``config.json``), the tokenizer, the model card ``README.md`` and
        ``fmmlearn.json`` with the estimator's parameters, ``classes_``, the
        training history and the SHA-256 of every file.  Atomic: the files go
        to a temporary sibling directory that then replaces ``path``, so an
        interrupted save leaves the previous one intact (docs/reliability.md).

        Parameters
        ----------
        path : str or path-like
            A new directory (created with its parents), an empty one, or an
            earlier save, which is replaced.  A non-empty directory that
            ``save`` did not write is refused (``ValueError``).
        card : huggingface_hub.ModelCard, optional
            The card to write, e.g. ``clf.model_card(results=...)``; default
            :meth:`model_card` (a loaded classifier keeps its card).

        Returns
        -------
        pathlib.Path
        """
        from ._persistence import save_classifier

        return save_classifier(self, path, card=self.model_card() if card is None else card)

    @classmethod
    def load(cls, path, *, device="auto") -> "FaithfulTextClassifier":
        """Load a classifier saved with :meth:`save`.

        Only safetensors weights and JSON are read; no pickle, no remote code,
        no download.  The checksums, the labels against the model config and
        the parameters are verified first; a damaged or mixed directory is a
        ``ValueError`` naming the file (docs/reliability.md).

        Parameters
        ----------
        path : str or path-like
        device : str or torch.device, default="auto"

        Returns
        -------
        FaithfulTextClassifier
            Fitted; its ``model`` parameter is ``path``.
        """
        from ._persistence import load_classifier

        return load_classifier(cls, path, device=device)

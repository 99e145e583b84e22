"""The runtime: model loading, devices, precision and batched inference.

This package hides the things every other module needs from a Hugging Face
sequence classifier: where its weights come from (the bundled offline MiniLM,
a local directory or a hub name), which device and numeric precision to run
in, and how to run a function over many examples in length-grouped batches
(:func:`map_batches`: longest first, automatic batch halving when memory runs
out, one progress bar, rows written back in the caller's order).  Logits,
explanations, masked sets and hidden-state features all go through it.

One concept per module: ``_loading`` (weights, tokenizer, length limits), ``_devices`` (device, CPU
facts, autocast), ``_adapters`` (peft adapters), ``_decoders`` (added mask and padding tokens, last-token pooling), ``_probes`` (short measurements of this machine), ``_precision`` (``precision="auto"``
by measurement) and ``_batching`` (:func:`map_batches`, logits).
"""

from ._batching import (
    check_finite_logits,
    forward_logits,
    logits_of,
    map_batches,
    predict_logits,
    probabilities,
    progress_bar,
    run_in_batches,
)
from ._adapters import (
    ADAPTER_DIR,
    attach_adapters,
    base_embedding,
    base_model_state,
    check_peft_config,
    embedding_matrix,
    has_adapters,
    load_adapters,
    save_adapters,
)
from ._decoders import (
    ADDED_MASK_TOKEN,
    ADDED_PAD_TOKEN,
    LastTokenPooling,
    add_missing_special_tokens,
    is_decoder,
    prepare_model,
)
from ._devices import autocast, cpu_info, eval_mode, is_oom, reduced_dtype, resolve_device
from ._loading import (
    BUNDLED_MODELS,
    load_pretrained,
    position_limit,
    quiet_transformers,
    resolve_max_length,
    resolve_model_path,
)
from ._precision import PRECISION_FAMILIES, PRECISIONS, autocast_dtype_for, precision_report, resolve_precision
from ._probes import (
    DEFAULT_TOKENS_PER_FORWARD,
    MIN_SPEEDUP,
    PROBE_SHAPE,
    TOKEN_BUDGETS,
    ForwardRates,
    clear_probe_cache,
    measure_forward_rates,
    tokens_per_forward,
)

__all__ = [
    "ADAPTER_DIR",
    "attach_adapters",
    "base_embedding",
    "base_model_state",
    "check_peft_config",
    "embedding_matrix",
    "has_adapters",
    "load_adapters",
    "save_adapters",
    "ADDED_MASK_TOKEN",
    "ADDED_PAD_TOKEN",
    "LastTokenPooling",
    "add_missing_special_tokens",
    "is_decoder",
    "prepare_model",
    "BUNDLED_MODELS",
    "DEFAULT_TOKENS_PER_FORWARD",
    "ForwardRates",
    "MIN_SPEEDUP",
    "PRECISIONS",
    "PRECISION_FAMILIES",
    "PROBE_SHAPE",
    "TOKEN_BUDGETS",
    "autocast",
    "autocast_dtype_for",
    "check_finite_logits",
    "clear_probe_cache",
    "cpu_info",
    "eval_mode",
    "is_oom",
    "forward_logits",
    "load_pretrained",
    "logits_of",
    "map_batches",
    "measure_forward_rates",
    "position_limit",
    "precision_report",
    "predict_logits",
    "probabilities",
    "progress_bar",
    "quiet_transformers",
    "reduced_dtype",
    "resolve_device",
    "resolve_max_length",
    "resolve_model_path",
    "resolve_precision",
    "run_in_batches",
    "tokens_per_forward",
]

"""Memory and time per epoch of masked fine-tuning with LoRA adapters against full fine-tuning.

Model: random Llama-style decoder classifiers (``LlamaForSequenceClassification``) with the
byte-fallback BPE tokenizer the tests train (``tests/helpers/decoders.py``, vocabulary 600 + the
added ``<|mask|>`` and ``<|pad|>``), at two sizes: ``tiny`` (the tests' 2 layers, 32 wide) and
``small`` (4 layers, 256 wide).  Data: 200 toy sentiment texts (``tests/helpers/matrix.py``),
batch 16, 3 epochs of masked fine-tuning (``half-det``, ``max_masking_ratio=1``), fp32, no
validation split.

Sides: ``full`` (every parameter trains) and ``lora`` (``peft.LoraConfig(r=8, lora_alpha=16,
target_modules=q/k/v/o_proj)``: the adapters, the head and the mask token's embedding row train).
Each side runs in a fresh process, so memory numbers do not mix.  Reported per side: trainable and
total parameters, the optimizer state AdamW really held (bytes of its ``state`` tensors after the
last step, read from the optimizer), the growth of the peak resident set during ``fit`` (Linux
``VmHWM``, after loading), and the seconds per epoch (skorch's ``dur``; min / median / max over
the epochs after the first).

Usage::

    python benchmarks/peft_cost.py [--threads 2] [--quick]

Writes ``benchmarks/results/<cpu kind>/peft_cost.{md,json}`` (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import command, fmt, machine, machine_line, table, write_results

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

SIZES = {"tiny": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1),
         "small": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
                       num_key_value_heads=4)}
LORA = dict(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])


def build(size: str, path: Path) -> str:
    """Save a random Llama-style classifier of ``size`` and the tests' trained tokenizer to ``path``."""
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from helpers.decoders import build_decoder_tokenizer

    tokenizer = build_decoder_tokenizer("llama")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), max_position_embeddings=128, num_labels=2,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **SIZES[size])
    LlamaForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def _optimizer_bytes(record: dict):
    """Patch AdamW.step to record the bytes of its state tensors after each step."""
    import torch

    original = torch.optim.AdamW.step

    def step(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        record["bytes"] = sum(t.numel() * t.element_size() for s in self.state.values() for t in s.values()
                              if isinstance(t, torch.Tensor))
        return out

    torch.optim.AdamW.step = step


def child(size: str, side: str, path: str, n_texts: int, epochs: int, threads: int) -> dict:
    """One fit in this process; the measurements as a dict."""
    import torch

    from _common import peak_growth_mib, reset_peak
    from fmmlearn import FaithfulTextClassifier
    from helpers.matrix import sentiment

    torch.set_num_threads(threads)
    X, y = sentiment(n_texts, seed=0)
    peft_config = None
    if side == "lora":
        import peft

        peft_config = peft.LoraConfig(**LORA)
    record = {}
    _optimizer_bytes(record)
    clf = FaithfulTextClassifier(model=path, max_epochs=epochs, batch_size=16, learning_rate=1e-3,
                                 warmup_ratio=0.0, validation_fraction=0, precision="fp32", device="cpu",
                                 random_state=0, peft_config=peft_config)
    start = reset_peak()
    clf.fit(X, y)
    growth = peak_growth_mib(start)
    durations = clf.history_["dur"].tolist()
    params = list(clf.model_.parameters())
    return {"size": size, "side": side, "trainable": sum(p.numel() for p in params if p.requires_grad),
            "total": sum(p.numel() for p in params), "optimizer_bytes": record.get("bytes", 0),
            "peak_growth_mib": growth, "epoch_seconds": durations}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="one size, 2 epochs on 64 texts; writes nothing")
    parser.add_argument("--child", nargs=3, metavar=("SIZE", "SIDE", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--texts", type=int, default=200, help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=int, default=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child, args.texts, args.epochs, args.threads)))
        return
    info = machine(args.threads)
    n_texts, epochs = (64, 2) if args.quick else (args.texts, args.epochs)
    sizes = ["tiny"] if args.quick else list(SIZES)
    rows, runs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            path = build(size, Path(tmp) / size)
            for side in ("full", "lora"):
                out = subprocess.run([sys.executable, __file__, "--child", size, side, path, "--texts", str(n_texts),
                                      "--epochs", str(epochs), "--threads", str(args.threads)],
                                     check=True, capture_output=True, text=True)
                run = json.loads(out.stdout.strip().splitlines()[-1])
                runs.append(run)
                later = run["epoch_seconds"][1:] or run["epoch_seconds"]
                rows.append([size, side, f"{run['trainable']:,}", f"{run['total']:,}",
                             fmt(run["trainable"] / run["total"] * 100, 3) + " %",
                             fmt(run["optimizer_bytes"] / 2**20, 3), fmt(run["peak_growth_mib"], 1),
                             f"{min(later):.2f} / {sorted(later)[len(later) // 2]:.2f} / {max(later):.2f}"])
    lines = ["# Masked fine-tuning with LoRA against full fine-tuning", "", machine_line(info, "fp32"), "",
             f"Command: `{command(argv)}`. {n_texts} texts, batch 16, {epochs} epochs; LoRA {LORA}.", "",
             *table(["model", "side", "trainable params", "total params", "trainable share",
                     "AdamW state (MiB)", "peak RSS growth in fit (MiB)", "s / epoch (min / median / max)"], rows),
             "", "Peak RSS growth is noisy at these sizes (allocator, threads); the AdamW state is exact."]
    write_results("peft_cost", info, {"machine": info, "command": command(argv), "runs": runs},
                  "\n".join(lines) + "\n", quick=args.quick)


if __name__ == "__main__":
    main()

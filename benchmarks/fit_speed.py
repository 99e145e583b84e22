"""Fine-tuning speed: fmmlearn (plain and masked) vs the Hugging Face Trainer.

One epoch of the bundled MiniLM on real short texts (bundled tweets), same
model, data, batch size and precision on every side:

* ``fmmlearn plain``   -- ``FaithfulTextClassifier(max_masking_ratio=0)``
* ``fmmlearn masked``  -- ``max_masking_ratio=1.0``, ``half-det`` (the paper's masked fine-tuning)
* ``HF Trainer``       -- ``transformers.Trainer`` with ``DataCollatorWithPadding`` (dynamic
  padding, random batches: its defaults), AdamW + linear schedule with warm-up
* ``HF Trainer (group_by_length)`` -- the Trainer with its own length grouping switched on
  (``train_sampling_strategy="group_by_length"``)

Each run happens in a fresh subprocess so its peak memory (max RSS) is its
own.  Epoch time excludes model loading and tokenization on both sides
(skorch's epoch duration; Trainer's ``train_runtime``).  Also reported:
bf16 vs fp32 speed and held-out accuracy of ``precision="auto"``.

Run: ``python benchmarks/fit_speed.py [--n-train 1000] [--repeats 3]``.
Writes ``benchmarks/results/fit_speed.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
RESULTS = Path(__file__).resolve().parent / "results"


def load_data(n_train: int, n_test: int, seed: int = 0):
    from sklearn.model_selection import train_test_split

    from fmmlearn.datasets import load_tweet_sentiment

    data = load_tweet_sentiment(n_samples=n_train + n_test, random_state=seed)
    return train_test_split(list(data.data), list(data.target), test_size=n_test, random_state=seed,
                            stratify=list(data.target))


def run_fmmlearn(cfg: dict) -> dict:
    from fmmlearn import FaithfulTextClassifier

    X, X_test, y, y_test = load_data(cfg["n_train"], cfg["n_test"])
    clf = FaithfulTextClassifier(
        max_masking_ratio=cfg["max_masking_ratio"], max_epochs=1, batch_size=cfg["batch_size"],
        learning_rate=1e-4, max_length=cfg["max_length"], precision=cfg["precision"],
        validation_fraction=0.0, random_state=cfg["seed"], device="cpu",
    )
    clf.fit(X, y)
    seconds = float(clf.history_["dur"].iloc[0])
    result = {"epoch_seconds": seconds, "seq_per_s": len(X) / seconds}
    if cfg.get("evaluate"):
        result["test_accuracy"] = clf.score(X_test, y_test)
    return result


def run_trainer(cfg: dict) -> dict:
    import numpy as np
    from datasets import Dataset
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding,
                              Trainer, TrainingArguments)

    from fmmlearn.modeling import resolve_model_path

    X, _, y, _ = load_data(cfg["n_train"], cfg["n_test"])
    path = resolve_model_path("minilm")
    classes = sorted(set(y))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=len(classes))
    labels = np.searchsorted(classes, y)
    dataset = Dataset.from_dict({"text": X, "label": labels}).map(
        lambda b: tokenizer(b["text"], truncation=True, max_length=cfg["max_length"]), batched=True,
        remove_columns=["text"])
    args = TrainingArguments(
        output_dir="/tmp/fmmlearn-bench-trainer", per_device_train_batch_size=cfg["batch_size"],
        num_train_epochs=1, learning_rate=1e-4, weight_decay=0.01, warmup_steps=0.06,
        lr_scheduler_type="linear", bf16=cfg["precision"] == "bf16", use_cpu=True, report_to=[],
        save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=cfg["seed"],
        train_sampling_strategy="group_by_length" if cfg.get("group_by_length") else "random",
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset,
                      data_collator=DataCollatorWithPadding(tokenizer))
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    return {"epoch_seconds": seconds, "seq_per_s": len(X) / seconds}


def child(cfg: dict) -> None:
    import torch

    torch.set_num_threads(cfg["threads"])
    result = run_trainer(cfg) if cfg["side"] == "trainer" else run_fmmlearn(cfg)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result))


def spawn(cfg: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(cfg)], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"benchmark child failed:\n{out.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--n-test", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))

    import torch

    from fmmlearn.modeling import _cpu_has_fast_bf16, resolve_precision

    # The main comparison runs in what precision="auto" picks on this machine (on both sides).
    auto = "bf16" if resolve_precision("auto", torch.device("cpu")) == torch.bfloat16 else "fp32"
    native_bf16 = _cpu_has_fast_bf16()
    base = dict(n_train=args.n_train, n_test=args.n_test, max_length=args.max_length, batch_size=args.batch_size,
                threads=args.threads, seed=0, precision=auto)
    configs = {
        "fmmlearn plain": dict(base, side="fmmlearn", max_masking_ratio=0.0),
        "fmmlearn masked": dict(base, side="fmmlearn", max_masking_ratio=1.0),
        "HF Trainer": dict(base, side="trainer"),
        "HF Trainer (group_by_length)": dict(base, side="trainer", group_by_length=True),
    }
    runs = {name: [] for name in configs}
    for repeat in range(args.repeats):  # interleaved, so drift hits every side alike
        for name, cfg in configs.items():
            runs[name].append(spawn(dict(cfg, seed=repeat)))
            print(f"repeat {repeat} {name}: {runs[name][-1]}", flush=True)

    # Without native bf16 instructions autocast is emulated and ~100x slower: compare on a small epoch.
    n_precision = args.n_train if native_bf16 else 64
    n_precision_test = args.n_test if native_bf16 else 64
    precision = {p: spawn(dict(base, side="fmmlearn", max_masking_ratio=1.0, precision=p, evaluate=True,
                               n_train=n_precision, n_test=n_precision_test))
                 for p in ("fp32", "bf16")}

    rows = []
    for name, results in runs.items():
        rows.append({
            "run": name,
            "median_epoch_s": statistics.median(r["epoch_seconds"] for r in results),
            "median_seq_per_s": statistics.median(r["seq_per_s"] for r in results),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
        })
    by = {r["run"]: r for r in rows}
    ratios = {
        "masked/plain time": by["fmmlearn masked"]["median_epoch_s"] / by["fmmlearn plain"]["median_epoch_s"],
        "ours(masked)/Trainer time": by["fmmlearn masked"]["median_epoch_s"] / by["HF Trainer"]["median_epoch_s"],
        "ours(plain)/Trainer time": by["fmmlearn plain"]["median_epoch_s"] / by["HF Trainer"]["median_epoch_s"],
        "ours(masked)/Trainer(group_by_length) time":
            by["fmmlearn masked"]["median_epoch_s"] / by["HF Trainer (group_by_length)"]["median_epoch_s"],
        "bf16 speed-up over fp32": precision["fp32"]["epoch_seconds"] / precision["bf16"]["epoch_seconds"],
        "accuracy bf16 - fp32": precision["bf16"]["test_accuracy"] - precision["fp32"]["test_accuracy"],
    }
    report = {"settings": {k: v for k, v in base.items() if k != "seed"}
              | {"repeats": args.repeats, "native_bf16": native_bf16, "n_train_precision": n_precision},
              "rows": rows, "ratios": ratios, "precision": precision, "runs": runs}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fit_speed.json").write_text(json.dumps(report, indent=2))

    lines = [
        f"# Fine-tuning speed (one epoch, {args.n_train} tweets, MiniLM-L6, batch {args.batch_size}, "
        f"max_length {args.max_length}, precision {auto} (what \"auto\" picks here), {args.threads} CPU threads, "
        f"median of {args.repeats})",
        "",
        "| run | epoch time (s) | sequences/s | peak RSS (MB) |",
        "|---|---:|---:|---:|",
        *(f"| {r['run']} | {r['median_epoch_s']:.2f} | {r['median_seq_per_s']:.1f} | {r['peak_rss_mb']:.0f} |"
          for r in rows),
        "",
        "| ratio | value | target |",
        "|---|---:|---|",
        f"| masked / plain time | {ratios['masked/plain time']:.3f} | <= 1.03 |",
        f"| ours (masked) / Trainer time | {ratios['ours(masked)/Trainer time']:.3f} | <= 0.9 |",
        f"| ours (plain) / Trainer time | {ratios['ours(plain)/Trainer time']:.3f} | |",
        f"| ours (masked) / Trainer with group_by_length | "
        f"{ratios['ours(masked)/Trainer(group_by_length) time']:.3f} | |",
        "",
        f"Precision comparison: masked fine-tuning on {n_precision} tweets; this CPU "
        f"{'has' if native_bf16 else 'lacks'} native bf16 (AVX512-BF16/AMX), so \"auto\" picks {auto}.",
        "",
        "| precision | fp32 | bf16 |",
        "|---|---:|---:|",
        f"| epoch time (s) | {precision['fp32']['epoch_seconds']:.2f} | {precision['bf16']['epoch_seconds']:.2f} |",
        f"| held-out accuracy ({n_precision_test} tweets) | {precision['fp32']['test_accuracy']:.3f} | "
        f"{precision['bf16']['test_accuracy']:.3f} |",
        f"| bf16 speed-up | | {ratios['bf16 speed-up over fp32']:.2f}x |",
    ]
    (RESULTS / "fit_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

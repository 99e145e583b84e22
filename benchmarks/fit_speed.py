"""Fine-tuning speed: fmmlearn (plain and masked) vs the Hugging Face Trainer vs a bare training loop.

One epoch of the bundled MiniLM on bundled tweets, the same model, data, batch size, learning rate,
sequence limit, precision and dynamic padding (each batch padded to its own longest text) on
every side:

* ``fmmlearn plain``  -- ``FaithfulTextClassifier(max_masking_ratio=0)``
* ``fmmlearn masked`` -- ``max_masking_ratio=1.0``, ``half-det`` (the paper's masked fine-tuning)
* ``HF Trainer``      -- ``transformers.Trainer`` with ``DataCollatorWithPadding`` (random batches:
  its defaults), AdamW + linear schedule with warm-up; optionally also with its own length
  grouping (``train_sampling_strategy="group_by_length"``)
* ``bound``           -- a bare PyTorch loop over our length-grouped batches: forward, loss,
  backward, AdamW step, nothing else (the cost of the arithmetic itself)

All sides run in one process, interleaved, the order rotating from one repetition to the next;
min / median / max of the epoch times over the repetitions (ratios of the minima).  Epoch time
excludes model loading and tokenization on every side (skorch's epoch duration, Trainer's
``train()``, the bare loop); one untimed epoch of the bare loop warms the kernels up first.
Peak memory is the growth of the resident set during the run.

Goals (issue 16): masked epoch <= 1.0x Trainer's plain epoch; masked / plain <= 1.03.

Usage::

    python benchmarks/fit_speed.py [--n-train 1000] [--repeats 3] [--precision auto] [--quick]

Writes ``benchmarks/results/<cpu kind>/fit_speed.{md,json}`` (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import time

# _common sets OMP_WAIT_POLICY and HF_HUB_OFFLINE: import it before torch
from _common import (command, fmt, fmt_stats, machine, machine_line, peak_growth_mib, ratio, reset_peak, stats,
                     table, write_results)

LEARNING_RATE = 1e-4


def load_data(n_train: int, seed: int = 0):
    from fmmlearn.datasets import load_tweet_sentiment

    data = load_tweet_sentiment(n_samples=n_train, random_state=seed)
    return list(data.data), list(data.target)


def run_fmmlearn(X, y, cfg, masking_ratio: float, seed: int) -> float:
    from fmmlearn import FaithfulTextClassifier

    clf = FaithfulTextClassifier(max_masking_ratio=masking_ratio, max_epochs=1, batch_size=cfg["batch_size"],
                                 learning_rate=LEARNING_RATE, max_length=cfg["max_length"],
                                 precision=cfg["precision"], validation_fraction=0.0, random_state=seed, device="cpu")
    clf.fit(X, y)
    return float(clf.history_["dur"].iloc[0])


def run_trainer(X, y, cfg, seed: int, group_by_length: bool = False) -> float:
    import numpy as np
    from datasets import Dataset
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainingArguments)

    from fmmlearn.modeling import quiet_transformers, resolve_model_path

    path = resolve_model_path("minilm")
    classes = sorted(set(y))
    tokenizer = AutoTokenizer.from_pretrained(path)
    with quiet_transformers():
        model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=len(classes))
    dataset = Dataset.from_dict({"text": X, "label": np.searchsorted(classes, y)}).map(
        lambda b: tokenizer(b["text"], truncation=True, max_length=cfg["max_length"]), batched=True,
        remove_columns=["text"])
    args = TrainingArguments(
        output_dir="/tmp/fmmlearn-bench-trainer", per_device_train_batch_size=cfg["batch_size"],
        num_train_epochs=1, learning_rate=LEARNING_RATE, weight_decay=0.01, warmup_steps=0.06,
        lr_scheduler_type="linear", bf16=cfg["precision"] == "bf16", use_cpu=True, report_to=[],
        save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=seed,
        train_sampling_strategy="group_by_length" if group_by_length else "random", dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=DataCollatorWithPadding(tokenizer))
    start = time.perf_counter()
    trainer.train()
    return time.perf_counter() - start


def run_bound(X, y, cfg, seed: int) -> float:
    """Forward, loss, backward and AdamW step over our length-grouped batches, nothing else."""
    import numpy as np
    import torch

    from fmmlearn.encoding import collate, encode, length_grouped_batches
    from fmmlearn.modeling import autocast, load_pretrained, resolve_precision

    classes = sorted(set(y))
    torch.manual_seed(seed)
    tokenizer, model = load_pretrained("minilm", num_labels=len(classes), id2label=dict(enumerate(map(str, classes))),
                                       label2id={str(c): i for i, c in enumerate(classes)})
    encoding = encode(tokenizer, X, is_pair=False, max_length=cfg["max_length"], warn=False)
    targets = torch.as_tensor(np.searchsorted(classes, y))
    batches = [collate(encoding, idx, pad_token_id=tokenizer.pad_token_id) for idx in
               length_grouped_batches(encoding.lengths, batch_size=cfg["batch_size"], shuffle=True,
                                      generator=np.random.default_rng(seed))]
    device, dtype = torch.device("cpu"), resolve_precision(cfg["precision"], torch.device("cpu"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    model.train()
    start = time.perf_counter()
    for batch in batches:
        with autocast(device, dtype):
            logits = model(**batch.model_inputs()).logits
        loss = torch.nn.functional.cross_entropy(logits.float(), targets[batch.index])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                        help="training precision on every side; auto = what fmmlearn's fit picks here")
    parser.add_argument("--no-grouped-trainer", action="store_true",
                        help="skip the Trainer with group_by_length")
    parser.add_argument("--quick", action="store_true", help="64 tweets, 1 repeat: check the script runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_train, args.repeats, args.no_grouped_trainer = 64, 1, True
    info = machine(args.threads)

    import torch

    from fmmlearn.modeling import resolve_precision

    dtype = resolve_precision(args.precision, torch.device("cpu"))  # what fit uses for "auto" (no probe yet)
    precision = "bf16" if dtype == torch.bfloat16 else "fp32"
    print(machine_line(info, precision), flush=True)
    cfg = {"batch_size": args.batch_size, "max_length": args.max_length, "precision": precision}
    X, y = load_data(args.n_train)
    sides = {
        "fmmlearn plain": lambda seed: run_fmmlearn(X, y, cfg, 0.0, seed),
        "fmmlearn masked": lambda seed: run_fmmlearn(X, y, cfg, 1.0, seed),
        "HF Trainer": lambda seed: run_trainer(X, y, cfg, seed),
        "bound (bare loop)": lambda seed: run_bound(X, y, cfg, seed),
    }
    if not args.no_grouped_trainer:
        sides["HF Trainer (group_by_length)"] = lambda seed: run_trainer(X, y, cfg, seed, group_by_length=True)
    names = list(sides)
    times, peaks = {n: [] for n in names}, {n: [] for n in names}
    sides["bound (bare loop)"](0)  # untimed warm-up: kernel selection and allocator, shared by every side
    for r in range(args.repeats):  # interleaved, rotating: drift in load hits every side alike
        for name in names[r % len(names):] + names[: r % len(names)]:
            start_rss = reset_peak()
            times[name].append(sides[name](r))
            peaks[name].append(peak_growth_mib(start_rss))
            print(f"repeat {r} {name}: {times[name][-1]:.2f} s", flush=True)
    s = {n: stats(t) for n, t in times.items()}
    bound, trainer = s["bound (bare loop)"], s["HF Trainer"]
    rows = [[n, fmt_stats(s[n]), f"{args.n_train / s[n]['min']:.1f}", f"{ratio(s[n], trainer):.3f}",
             f"{ratio(s[n], bound):.3f}", fmt(max(peaks[n]), 0)] for n in names]
    ratios = {"masked / plain": ratio(s["fmmlearn masked"], s["fmmlearn plain"]),
              "masked / Trainer": ratio(s["fmmlearn masked"], trainer),
              "plain / Trainer": ratio(s["fmmlearn plain"], trainer),
              "masked / bound": ratio(s["fmmlearn masked"], bound)}
    report = {"machine": info, "command": command(argv), "settings": cfg | {"n_train": args.n_train,
              "repeats": args.repeats, "learning_rate": LEARNING_RATE}, "times": times, "stats": s,
              "peak_mib": peaks, "ratios": ratios}
    lines = [f"# Fine-tuning speed: one epoch, {args.n_train} tweets, MiniLM-L6, batch {args.batch_size}, "
             f"max_length {args.max_length}", "", machine_line(info, precision + " on every side"), "",
             f"Command: `{report['command']}`", "",
             f"Epoch seconds, min / median / max of {args.repeats} interleaved runs in one process; "
             "ratios of the minima.",
             ""]
    lines += table(["run", "epoch (s)", "sequences/s (best)", "vs Trainer", "vs bound", "peak growth (MiB)"], rows)
    lines += ["", "| ratio | value | goal |", "|---|---:|---|",
              f"| masked / plain | {ratios['masked / plain']:.3f} | <= 1.03 |",
              f"| masked / Trainer (plain epoch) | {ratios['masked / Trainer']:.3f} | <= 1.0 |",
              f"| plain / Trainer | {ratios['plain / Trainer']:.3f} | |",
              f"| masked / bound | {ratios['masked / bound']:.3f} | |", "",
              "Final numbers need an idle machine: rerun the command above there."]
    write_results("fit_speed", info, report, "\n".join(lines) + "\n", quick=args.quick)


if __name__ == "__main__":
    main()

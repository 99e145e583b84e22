"""What grouping training batches by length does to the masking statistics (docs/classifier.md).

``FaithfulTextClassifier(group_by_length=True)`` (the default) draws batches of similar length;
``group_by_length=False`` shuffles uniformly like the paper's reference code.  This replays the
training loop's own batch sampler and masking function (``training_batch_sampler``,
``mask_training_batch``; no model is run) on real tweets tokenized by the bundled MiniLM tokenizer, with
the paper's masked fine-tuning (``half-det``, ``max_masking_ratio=1``, batch size 16), for 20 epochs,
and reports for both orders:

* how often each example lands in the masked half of its batch (mean, spread over examples, and
  its correlation with the example's length);
* the realised masked share of a masked row's tokens (mean, correlation with length);
* how much the masked half's mean length varies between the batches of an epoch;
* padding, the cost grouping saves.

Usage::

    python benchmarks/batch_order_masking.py [--n-samples 2000] [--epochs 20]

Takes well under a minute on 2 cores (seeded).  Prints a markdown table and writes
``benchmarks/results/batch_order_masking.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import numpy as np
import torch

from fmmlearn.datasets import load_tweet_sentiment
from fmmlearn.encoding import collate, encode
from fmmlearn.masking import mask_training_batch, maskable_positions
from fmmlearn.modeling import resolve_model_path
from fmmlearn.encoding import training_batch_sampler

RESULTS = Path(__file__).parent / "results"
BATCH_SIZE = 16


def replay(encoding, tokenizer, group_by_length: bool, epochs: int, seed: int = 0) -> dict:
    """Replay ``epochs`` epochs of fit's batching and masking; collect per-example and per-batch statistics."""
    n, lengths = len(encoding), encoding.lengths
    in_masked_half = np.zeros(n)
    masked_share, masked_len = [], []
    half_means, padding, real = [], 0, 0
    sampler = training_batch_sampler(lengths, batch_size=BATCH_SIZE, generator=np.random.default_rng(seed),
                                     group_by_length=group_by_length)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        epoch_means = []
        for idx in sampler:
            batch = collate(encoding, idx, pad_token_id=tokenizer.pad_token_id)
            ids = mask_training_batch(batch, strategy="half-det", max_ratio=1.0, mask_token_id=tokenizer.mask_token_id,
                                      generator=generator)
            maskable = maskable_positions(batch.attention_mask, batch.special_tokens_mask)
            half = len(idx) // 2                      # half-det: rows from floor(B/2) on are masked
            in_masked_half[idx[half:]] += 1
            changed = (ids != batch.input_ids) & maskable
            for row in range(half, len(idx)):
                if maskable[row].any():
                    masked_share.append(changed[row].sum().item() / maskable[row].sum().item())
                    masked_len.append(lengths[idx[row]])
            epoch_means.append(lengths[idx[half:]].mean())
            padding += batch.attention_mask.numel() - batch.attention_mask.sum().item()
            real += batch.attention_mask.sum().item()
        half_means.append(np.std(epoch_means))
    share = in_masked_half / epochs
    return {
        "group_by_length": group_by_length,
        "p_masked_mean": float(share.mean()),
        "p_masked_sd_over_examples": float(share.std()),
        "p_masked_vs_length_corr": float(np.corrcoef(share, lengths)[0, 1]),
        "masked_share_mean": float(np.mean(masked_share)),
        "masked_share_vs_length_corr": float(np.corrcoef(masked_share, masked_len)[0, 1]),
        "masked_half_mean_length_sd_between_batches": float(np.mean(half_means)),
        "padding_share": padding / (padding + real),
    }


def markdown(rows, lengths, epochs) -> str:
    binomial_sd = np.sqrt(0.5 * 0.5 / epochs)
    lines = [
        "| | group_by_length=True | group_by_length=False |", "|---|---|---|",
        "| P(example in the masked half), mean over examples | {p_masked_mean:.3f} | {p_masked_mean_u:.3f} |",
        f"| ... its sd over examples (binomial sd for {epochs} epochs: {binomial_sd:.3f}) "
        "| {p_masked_sd_over_examples:.3f} | {p_masked_sd_over_examples_u:.3f} |",
        "| ... its correlation with the example's length | {p_masked_vs_length_corr:+.3f} "
        "| {p_masked_vs_length_corr_u:+.3f} |",
        "| masked share of a masked row's tokens, mean (expected 0.5) | {masked_share_mean:.3f} "
        "| {masked_share_mean_u:.3f} |",
        "| ... its correlation with the row's length | {masked_share_vs_length_corr:+.3f} "
        "| {masked_share_vs_length_corr_u:+.3f} |",
        "| sd between the batches of an epoch of the masked half's mean length (tokens) "
        "| {masked_half_mean_length_sd_between_batches:.2f} | {masked_half_mean_length_sd_between_batches_u:.2f} |",
        "| padding share of the training batches | {padding_share:.3f} | {padding_share_u:.3f} |",
    ]
    grouped, uniform = rows
    values = {**grouped, **{f"{k}_u": v for k, v in uniform.items()}}
    header = (f"{len(lengths)} tweets, {epochs} epochs, batch size {BATCH_SIZE}, half-det, max_masking_ratio=1; "
              f"lengths {int(lengths.min())}-{int(lengths.max())} tokens (mean {lengths.mean():.1f}, "
              f"sd {lengths.std():.1f}).\n\n")
    return header + "\n".join(line.format(**values) for line in lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    tweets = load_tweet_sentiment(n_samples=args.n_samples, random_state=0)
    encoding = encode(tokenizer, list(tweets.data), is_pair=False, max_length=None, warn=False)
    rows = [replay(encoding, tokenizer, g, args.epochs) for g in (True, False)]
    table = markdown(rows, encoding.lengths, args.epochs)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {"n_samples": args.n_samples, "epochs": args.epochs, "batch_size": BATCH_SIZE,
            "torch": torch.__version__, "machine": platform.machine()}
    (RESULTS / "batch_order_masking.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (RESULTS / "batch_order_masking.md").write_text(
        "Masking statistics of length-grouped vs uniformly shuffled training batches "
        f"(benchmarks/batch_order_masking.py).\n\n{table}\n")


if __name__ == "__main__":
    main()

"""What wrapping a Captum attribution as an fmmlearn explainer costs: the wrapper vs Captum called directly.

Model: the bundled MiniLM (``model="minilm"``) fine-tuned for one epoch on 64 tweets (3 sentiment
classes); explained: other tweets (``max_length`` 48), for their gold label, in fp32.

Per Captum method, two sides run interleaved in one process, the order rotating from one repetition
to the next, min / median / max over the repetitions:

* **wrapper** -- ``explain_encoded(clf, encoding, targets, method=CaptumExplainer(cls, **options))``:
  fmmlearn's length-grouped batches, the explainer bound to the model, the baselines and feature
  mask it builds, the shape/NaN checks and the signedness inference;
* **direct** -- the same Captum object called by hand on the very same batches (the same indices,
  padded the same way), with the same inputs, baselines, feature mask and options: what a Captum
  user writes.

Overhead = wrapper / direct - 1 of the fastest runs (goal: at most 5 %).  The scores of the two
sides are compared too (max abs difference).

Usage::

    python benchmarks/explainer_overhead.py [--repeats 5] [--threads 2] [--n-texts 32] [--quick]

Writes ``benchmarks/results/<cpu kind>/explainer_overhead.{md,json}`` (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import warnings

# _common sets OMP_WAIT_POLICY and HF_HUB_OFFLINE: import it before torch
from _common import command, fmt, fmt_stats, interleaved, machine, machine_line, ratio, table, write_results

import numpy as np
import torch
from captum.attr import FeatureAblation, InputXGradient, IntegratedGradients, LayerIntegratedGradients

from fmmlearn import FaithfulTextClassifier
from fmmlearn.datasets import load_tweet_sentiment
from fmmlearn.encoding import collate, length_grouped_batches
from fmmlearn.exceptions import TruncationWarning
from fmmlearn.explanation import explain_encoded
from fmmlearn.importance import CaptumExplainer
from fmmlearn.masking import eligible_positions

METHODS = {
    "FeatureAblation": (FeatureAblation, {"perturbations_per_eval": 8}),
    "InputXGradient": (InputXGradient, {}),
    "IntegratedGradients": (IntegratedGradients, {"n_steps": 20, "internal_batch_size": 64}),
    "LayerIntegratedGradients": (LayerIntegratedGradients, {"n_steps": 20, "internal_batch_size": 64}),
}


def direct(clf, encoding, targets, cls, options, batch_size) -> list:
    """Captum by hand on fmmlearn's batches (what the wrapper does, without the wrapper)."""
    model, mask_id, pad = clf.model_, clf.tokenizer_.mask_token_id, clf.tokenizer_.pad_token_id
    embeddings = model.get_input_embeddings()

    def ids_forward(ids, attention_mask):
        return model(input_ids=ids, attention_mask=attention_mask).logits

    def embeds_forward(embeds, attention_mask):
        return model(inputs_embeds=embeds, attention_mask=attention_mask).logits

    kind = "layer" if cls is LayerIntegratedGradients else "perturbation" if cls is FeatureAblation else "gradient"
    attribution = (cls(ids_forward, embeddings) if kind == "layer"
                   else cls(ids_forward) if kind == "perturbation" else cls(embeds_forward))
    out = [None] * len(encoding)
    model.eval()
    for idx in length_grouped_batches(encoding.lengths, batch_size=batch_size):
        batch = collate(encoding, idx, pad_token_id=pad)
        eligible = eligible_positions(batch, segment="first")
        ids, mask = batch.input_ids, batch.attention_mask
        target = torch.as_tensor(targets[idx])
        base_ids = torch.where(eligible, torch.full_like(ids, mask_id), ids)
        call = dict(target=target, additional_forward_args=(mask,), **options)
        if kind == "perturbation":
            with torch.no_grad():
                features = eligible.long().cumsum(1) * eligible
                scores = attribution.attribute(ids, baselines=base_ids, feature_mask=features, **call)
        elif kind == "layer":
            scores = attribution.attribute(ids, baselines=base_ids, **call).sum(-1)
        else:
            with torch.no_grad():
                embeds = embeddings(ids)
                base = torch.where(eligible[..., None], embeddings(base_ids), embeds)
            extra = {"baselines": base} if cls is IntegratedGradients else {}
            scores = attribution.attribute(embeds.requires_grad_(True), **extra, **call).sum(-1)
        scores = torch.where(eligible, scores.detach().float(), torch.zeros(()))
        for row, i in enumerate(idx):
            out[i] = scores[row, : encoding.lengths[i]].numpy()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-texts", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="4 texts, 1 repeat: check that the script runs")
    args = parser.parse_args(argv)
    info = machine(args.threads)
    print(machine_line(info, "fp32"), flush=True)
    repeats, n_texts = (1, 4) if args.quick else (args.repeats, args.n_texts)
    warnings.simplefilter("ignore", TruncationWarning)  # tweets cut to max_length=48: by category, never by message
    tweets = load_tweet_sentiment(n_samples=64 + n_texts, random_state=0)
    X, y = list(tweets.data), np.asarray(tweets.target)
    clf = FaithfulTextClassifier("minilm", max_epochs=1, max_length=48, validation_fraction=0, precision="fp32",
                                 device="cpu", random_state=0, batch_size=args.batch_size,
                                 ).fit(X[:64], y[:64])
    encoding = clf.encode(X[64:])
    targets = np.searchsorted(clf.classes_, y[64:])
    rows, report = [], {"machine": info, "command": command(argv), "n_texts": n_texts, "repeats": repeats,
                        "batch_size": args.batch_size, "methods": {}}
    for name, (cls, options) in METHODS.items():
        explainer = CaptumExplainer(cls, **options)
        sides = {"wrapper": lambda: explain_encoded(clf, encoding, targets, method=explainer,
                                                    batch_size=args.batch_size),
                 "direct": lambda: direct(clf, encoding, targets, cls, options, args.batch_size)}
        timed = interleaved(sides, repeats, warm_up=True)
        diff = max(float(np.abs(a - b).max()) for a, b in zip(timed["wrapper"]["result"], timed["direct"]["result"]))
        overhead = ratio(timed["wrapper"]["stats"], timed["direct"]["stats"]) - 1
        rows.append([name, fmt_stats(timed["wrapper"]["stats"]), fmt_stats(timed["direct"]["stats"]),
                     f"{100 * overhead:+.1f} %", fmt(diff, 3)])
        report["methods"][name] = {"wrapper": timed["wrapper"]["stats"], "direct": timed["direct"]["stats"],
                                   "overhead": overhead, "max_abs_diff": diff, "options": options}
        print(rows[-1], flush=True)
    markdown = "\n".join([
        "# Explainer wrapper overhead: CaptumExplainer vs Captum called directly", "",
        machine_line(info, "fp32"), "",
        f"Command: `{report['command']}`. {n_texts} tweets (max_length 48), batches of {args.batch_size}, the same "
        f"batches on both sides; seconds, min / median / max of {repeats} interleaved runs; overhead from the minima.",
        "Goal (issue 26): overhead at most 5 %.", "",
        *table(["method", "wrapper (s)", "direct (s)", "overhead", "max abs diff"], rows), "",
    ])
    write_results("explainer_overhead", info, report, markdown, quick=args.quick)


if __name__ == "__main__":
    main()

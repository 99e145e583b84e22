"""Cost per text of each importance measure on the tiny decoders, next to the bundled MiniLM encoder.

Models: the tests' tiny random decoder classifiers (GPT-2, Llama, Qwen2, Mistral; 2 layers, 32
wide, tokenizers trained on bundled tweets, ``tests/helpers/decoders.py``) and the bundled
all-MiniLM-L6-v2 encoder (6 layers, 384 wide), each masked-fine-tuned for one epoch on 96 toy
sentiment texts (``tests/helpers/matrix.py``).  Explained: ``--texts`` (32) other toy texts (5-9 words) for
their predicted class, fp32, ``explain``'s defaults (length-grouped batches, rows packed by
length).  The MaSF features (max-pooled hidden states of every layer) are timed too.

Each measure of one model is one side of :func:`_common.interleaved` (its order rotating over the
repetitions, one untimed warm-up first); the table gives milliseconds per text of the fastest run
and min / median / max of all.  The tiny decoders are far smaller than MiniLM, so compare the
measures' relative cost within a model, not the models' absolute times.

Usage::

    python benchmarks/decoder_cost.py [--repeats 3] [--threads 2] [--texts 32] [--quick]

Writes ``benchmarks/results/<cpu kind>/decoder_cost.{md,json}`` (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

from _common import command, fmt, interleaved, machine, machine_line, table, write_results

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

MEASURES = ["loo-sign", "grad-l2", "inp-grad-sign", "int-grad-sign", "beam-sign-4", "masf-features"]
FIT = dict(max_epochs=1, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, validation_fraction=0,
           precision="fp32", device="cpu", random_state=0)


def fitted_models(tmp: Path, families) -> dict:
    from fmmlearn import FaithfulTextClassifier
    from helpers.decoders import build_decoder
    from helpers.matrix import sentiment

    X, y = sentiment(96, seed=0)
    models = {}
    for name in families:
        path = "minilm" if name == "minilm" else build_decoder(name, tmp / name)
        models[name] = FaithfulTextClassifier(model=path, **FIT).fit(X, y)
    return models


def sides(clf, texts) -> dict:
    from fmmlearn.ood import hidden_state_features

    def measure(method):
        return lambda: clf.explain(texts, method=method)

    out = {m: measure(m) for m in MEASURES if m != "masf-features"}
    out["masf-features"] = lambda: hidden_state_features(clf, texts)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--texts", type=int, default=32, help="texts explained (default 32)")
    parser.add_argument("--quick", action="store_true", help="GPT-2 and MiniLM, 1 repeat, 8 texts; writes nothing")
    args = parser.parse_args(argv)
    info = machine(args.threads)
    warnings.simplefilter("ignore")  # degenerate-model notes of one-epoch fits; the timings are what counts here

    from helpers.matrix import sentiment

    families = ["gpt2", "minilm"] if args.quick else ["gpt2", "llama", "qwen2", "mistral", "minilm"]
    texts = sentiment(8 if args.quick else args.texts, seed=7)[0]
    repeats = 1 if args.quick else args.repeats
    with tempfile.TemporaryDirectory() as tmp:
        models = fitted_models(Path(tmp), families)
        results = {name: interleaved(sides(clf, texts), repeats, warm_up=True) for name, clf in models.items()}
    header = ["measure"] + [f"{n} (ms / text)" for n in families]
    rows = [[m] + [fmt(results[n][m]["stats"]["min"] / len(texts) * 1000, 2) for n in families] for m in MEASURES]
    spread = [[m] + [" / ".join(f"{results[n][m]['stats'][k] / len(texts) * 1000:.2f}" for k in ("min", "median", "max"))
                     for n in families] for m in MEASURES]
    params = {n: sum(p.numel() for p in models[n].model_.parameters()) for n in families}
    lines = ["# Cost per text of each measure: tiny decoders and the MiniLM encoder", "",
             machine_line(info, "fp32"), "",
             f"Command: `{command(argv)}`. {len(texts)} texts of 5-9 words, {repeats} repetition(s) after a warm-up.",
             "Parameters: " + ", ".join(f"{n} {params[n]:,}" for n in families) + ".", "",
             "Fastest run, milliseconds per text:", "", *table(header, rows), "",
             "min / median / max, milliseconds per text:", "", *table(["measure", *families], spread)]
    report = {"machine": info, "command": command(argv), "n_texts": len(texts), "parameters": params,
              "seconds": {n: {m: results[n][m]["times"] for m in MEASURES} for n in families}}
    write_results("decoder_cost", info, report, "\n".join(lines) + "\n", quick=args.quick)


if __name__ == "__main__":
    main()

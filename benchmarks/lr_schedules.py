"""The two learning-rate schedules of ``FaithfulTextClassifier(lr_schedule=...)`` for a paper-sized run.

``"linear"`` (the default) warms up over 6 % of the optimisation steps and decays linearly to 0;
``"reference"`` reproduces the paper's reference code, which counts ``S = max_epochs * n_train``
*examples* instead of steps, so the warm-up spans ~96 % of the run (``0.06 * batch_size``) and the rate
hardly decays.  Both curves come from :func:`fmmlearn.estimator.lr_multiplier`, the function ``fit``
uses (``tests/estimator/test_net.py`` checks it against the learning rates of a real fit).

Usage::

    python benchmarks/lr_schedules.py

Takes a second.  Writes ``docs/images/lr_schedules.png`` (the figure of docs/classifier.md) and
``benchmarks/results/lr_schedules.{json,md}``; prints the markdown table.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fmmlearn.datasets import get_dataset_spec, paper_params
from fmmlearn.estimator import lr_multiplier

HERE = Path(__file__).parent
FIGURE = HERE.parent / "docs" / "images" / "lr_schedules.png"
RESULTS = HERE / "results"
DATASETS = ("sst2", "babi-1")


def schedule(name: str, kind: str) -> np.ndarray:
    """The learning rate of every optimisation step of the paper's run on ``name``."""
    params, spec = paper_params(name), get_dataset_spec(name)
    n_train, batch = spec.sizes[0], params["batch_size"]
    multiplier = lr_multiplier(kind, max_epochs=params["max_epochs"], n_train_examples=n_train, batch_size=batch,
                               warmup_ratio=params["warmup_ratio"])
    steps = params["max_epochs"] * -(-n_train // batch)
    return params["learning_rate"] * np.array([multiplier(s) for s in range(steps)])


def summary_rows():
    rows = []
    for name in DATASETS:
        for kind in ("linear", "reference"):
            lr = schedule(name, kind)
            rows.append({"dataset": name, "lr_schedule": kind, "steps": len(lr),
                         "peak_at": float(np.argmax(lr) / len(lr)), "mean_lr": float(lr.mean()),
                         "last_lr": float(lr[-1]), "peak_lr": float(lr.max())})
    return rows


def markdown(rows) -> str:
    lines = ["| dataset | lr_schedule | steps | peak reached at | mean lr / peak | last lr / peak |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['lr_schedule']} | {r['steps']} | {100 * r['peak_at']:.1f} % of the run "
                     f"| {r['mean_lr'] / r['peak_lr']:.3f} | {r['last_lr'] / r['peak_lr']:.4f} |")
    return "\n".join(lines)


def figure(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    params, spec = paper_params("sst2"), get_dataset_spec("sst2")
    styles = {"linear": {"color": "tab:blue", "label": 'lr_schedule="linear" (default): 6 % of the steps'},
              "reference": {"color": "tab:red", "linestyle": "--",
                            "label": 'lr_schedule="reference": 6 % of epochs x examples'}}
    for kind, style in styles.items():
        lr = schedule("sst2", kind)
        ax.plot(np.arange(len(lr)) / len(lr), lr * 1e5, linewidth=1.6, **style)
    ax.set_xlabel("share of the optimisation steps")
    ax.set_ylabel("learning rate (x 1e-5)")
    ax.set_title(f"SST2, paper settings: {spec.sizes[0]} examples, {params['max_epochs']} epochs, batch "
                 f"{params['batch_size']}", fontsize="medium")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 2.75)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize="small", loc="upper center")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    rows = summary_rows()
    table = markdown(rows)
    print(table)
    figure(FIGURE)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "lr_schedules.json").write_text(json.dumps(rows, indent=2))
    (RESULTS / "lr_schedules.md").write_text(
        "Learning-rate schedules of a paper-sized run (peak 2e-5, warmup_ratio 0.06, batch size 16), from "
        f"fmmlearn.estimator.lr_multiplier.\n\n{table}\n")
    print(f"wrote {FIGURE} ({FIGURE.stat().st_size / 1024:.0f} KB)")


if __name__ == "__main__":
    main()

"""The Hugging Face model card of a fine-tuned classifier: settings and measured results (docs/classifier.md).

:func:`classifier_card` builds a :class:`huggingface_hub.ModelCard` whose YAML
metadata (``library_name``, ``pipeline_tag``, ``base_model``, ``tags``, the
masked fine-tuning settings under ``masked_fine_tuning``) and ``model-index``
are written by huggingface_hub's own :class:`~huggingface_hub.ModelCardData`
and :class:`~huggingface_hub.EvalResult`, so the Hub and
``ModelCard.load`` read them.  :func:`card_rows` turns measured results (a
study result, a faithfulness report, curve, RACU, in-distribution or erasure
frame, or ``{"accuracy": 0.91}``) into rows, each one ``model-index`` entry
and one line of a short Markdown table.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._version import __version__
from ..faithfulness import acu, racu
from ..utils import number, percent
from ._persistence import base_model_name

__all__ = ["MASF_LEVEL", "TAGS", "TASK", "CardRow", "card_rows", "classifier_card"]

#: The ``pipeline_tag`` and the ``model-index`` task of every card.
TASK = "text-classification"
#: Tags of every card.
TAGS = ("fmmlearn", "faithfulness", "masked-fine-tuning", TASK)
#: The level whose flagged share of the in-distribution test the card reports (the paper's ``p < 0.05``).
MASF_LEVEL = 0.05
#: Bundled model names -> the Hub name of the same weights.
_BUNDLED_HUB_NAMES = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
#: Metadata of a loaded card that a card with new results keeps (set by the user or on the Hub).
_KEPT_METADATA = ("license", "license_name", "license_link", "language")
#: Section headings of the results, in the order they are written.
_SECTIONS = {"performance": "Performance on clean test data",
             "faithfulness": "Faithfulness of the importance measures (RACU and ACU)",
             "in_distribution": f"Is masking in-distribution? (share flagged at p < {MASF_LEVEL:g})",
             "erasure": "Erasure metrics (AOPC)"}
_FRAME_KINDS = ("RACU/ACU (columns method, racu, acu), curves with a 'rand' baseline (method, ratio, value), an "
                "in-distribution report (ratio, threshold, proportion, expected) or an erasure summary "
                "(method, mode, k, mean, ood_share)")


@dataclass(frozen=True)
class CardRow:
    """One measured number: a ``model-index`` entry and a table line of its ``section``."""

    section: str
    metric_type: str
    name: str
    value: float
    config: str | None = None
    args: dict = field(default_factory=dict)

    def eval_result(self, dataset: str, split: str | None):
        from huggingface_hub import EvalResult

        return EvalResult(task_type=TASK, task_name="Text classification", dataset_type=dataset,
                          dataset_name=dataset, dataset_split=split, metric_type=self.metric_type,
                          metric_value=self.value, metric_name=self.name, metric_config=self.config,
                          metric_args=self.args or None)


# --------------------------------------------------------------------------- results -> rows


def _plain(value):
    """A finite number as a Python float rounded to 6 decimals (readable YAML); None otherwise."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return round(value, 6) if math.isfinite(value) else None


def _args(**values) -> dict:
    """Keyword arguments without the missing ones (NaN does not round-trip as equal)."""
    out = {}
    for key, value in values.items():
        if isinstance(value, (bool, np.bool_)):
            out[key] = bool(value)
        elif isinstance(value, (int, np.integer)):
            out[key] = int(value)
        elif value is not None and _plain(value) is not None:
            out[key] = _plain(value)
    return out


def _one_model(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    if "model" in frame and frame["model"].nunique() > 1:
        raise ValueError(f"results holds {what} of several models ({sorted(map(str, frame['model'].unique()))}); "
                         "pass the rows of this model only, or the study result itself.")
    return frame


def _metric_rows(metrics: Mapping) -> list[CardRow]:
    rows = []
    for name, value in metrics.items():
        if not isinstance(name, str) or not name or isinstance(value, bool) or _plain(value) is None:
            raise ValueError(f"results={{{name!r}: {value!r}}}: a mapping of results must map metric names (str) "
                             "to finite numbers, e.g. {'accuracy': 0.91}.")
        rows.append(CardRow("performance", name, name.replace("_", " "), _plain(value)))
    return rows


def _racu_rows(frame: pd.DataFrame) -> list[CardRow]:
    frame = _one_model(frame, "RACU rows")
    if frame["method"].duplicated().any():
        raise ValueError("results has several RACU rows per measure (one per seed or subset?); pass one row per "
                         "measure, such as a study's racu_summary or a faithfulness report's summary.")
    rows = []
    for record in frame.to_dict(orient="records"):
        method = str(record["method"])
        for kind in ("racu", "acu"):
            if _plain(record[kind]) is None:
                continue
            # reliable (a study's summary): RACU's denominator is known to about +-50 %
            args = _args(ci_low=record.get(f"{kind}_low"), ci_high=record.get(f"{kind}_high"),
                         n_examples=record.get("n_examples"),
                         reliable=record.get("reliable") if kind == "racu" and pd.notna(record.get("reliable"))
                         else None)
            rows.append(CardRow("faithfulness", kind, f"{kind.upper()} ({method})", _plain(record[kind]), method,
                                args))
    return rows


def _curve_rows(frame: pd.DataFrame) -> list[CardRow]:
    """ACU and RACU of every curve against the ``rand`` curve of the same frame."""
    frame = _one_model(frame, "curves")
    for column in ("seed", "repeat", "subset"):
        if column in frame and frame[column].nunique() > 1:
            raise ValueError(f"results holds curves of several {column} values; pass one curve per measure (or a "
                             "faithfulness report, whose summary averages its repeats).")
    baseline = frame[frame["method"] == "rand"]
    if baseline.empty or baseline["ratio"].duplicated().any():
        raise ValueError("results is a frame of curves without exactly one 'rand' curve, the baseline RACU and ACU "
                         "are measured against; add faithfulness_curve(..., method='rand').")
    records = []
    for method, curve in frame[frame["method"] != "rand"].groupby("method", sort=False):
        records.append({"method": method, "racu": racu(curve, baseline), "acu": acu(curve, baseline)})
    if not records:
        raise ValueError("results holds only the 'rand' curve; add the curves of the measures to report.")
    return _racu_rows(pd.DataFrame(records))


def _in_distribution_rows(frame: pd.DataFrame) -> list[CardRow]:
    frame = _one_model(frame, "in-distribution reports")
    methods = frame["method"].unique() if "method" in frame else [None]
    if len(methods) > 1:
        raise ValueError(f"results holds in-distribution reports of several masking methods ({sorted(methods)}); "
                         "pass one report per card.")
    at_level = frame[np.isclose(frame["threshold"].astype(float), MASF_LEVEL)]
    if at_level.empty:
        raise ValueError(f"results is an in-distribution report without the threshold {MASF_LEVEL}; compute it "
                         f"with thresholds that include {MASF_LEVEL}.")
    # several seeds (a study): their mean share per ratio
    means = at_level.groupby("ratio", sort=True)[["proportion", "expected"]].mean()
    test = str(frame["detector"].iloc[0]) if "detector" in frame and frame["detector"].notna().any() else "MaSF"
    # the metric type keeps its name (model-index entries of earlier cards); the name says which test
    return [CardRow("in_distribution", "masf_flagged_share", f"{test} flagged share at masking ratio {ratio:g}",
                    _plain(row["proportion"]), f"masking_ratio={ratio:g}",
                    {**_args(masking_ratio=ratio, threshold=MASF_LEVEL, null_share=row["expected"]),
                     **({"masked_by": str(methods[0])} if methods[0] is not None else {})})
            for ratio, row in means.iterrows() if _plain(row["proportion"]) is not None]


def _erasure_rows(frame: pd.DataFrame) -> list[CardRow]:
    frame = _one_model(frame, "erasure metrics")
    total = frame["aopc"].astype(bool) if "aopc" in frame else frame["k"].astype(str) == "aopc"
    frame = frame[total & (frame["method"] != "rand")]
    if frame.empty:
        raise ValueError("results is an erasure table without AOPC rows of a measure; pass erasure_metrics(...)"
                         ".summary or a study's erasure frame.")
    rows = []
    for (method, mode), part in frame.groupby(["method", "mode"], sort=False):  # a study: mean over seeds
        valid = part["valid"].dropna() if "valid" in part else pd.Series(dtype=bool)
        args = _args(ci_low=part["ci_low"].mean() if len(part) == 1 else None,
                     ci_high=part["ci_high"].mean() if len(part) == 1 else None,
                     ood_share=part["ood_share"].mean(), valid=bool(valid.all()) if len(valid) else None)
        mean = _plain(part["mean"].mean())
        if mean is not None:
            rows.append(CardRow("erasure", f"{mode}_aopc", f"{mode} AOPC ({method})", mean, str(method), args))
    return rows


def _frame_rows(frame: pd.DataFrame) -> list[CardRow]:
    columns = set(frame.columns)
    if {"method", "racu", "acu"} <= columns:
        return _racu_rows(frame)
    if {"ratio", "threshold", "proportion", "expected"} <= columns:
        return _in_distribution_rows(frame)
    if {"method", "mode", "k", "mean", "ood_share"} <= columns:
        return _erasure_rows(frame)
    if {"method", "ratio", "value"} <= columns:
        return _curve_rows(frame)
    raise ValueError(f"results is a DataFrame with columns {sorted(map(str, columns))}, which is none of the frames "
                     f"a card reports: {_FRAME_KINDS}.")


def _is_study_result(results) -> bool:
    return all(hasattr(results, name) for name in ("performance", "racu_summary", "in_distribution", "erasure",
                                                   "metadata"))


def _study_rows(study, max_masking_ratio: float) -> list[CardRow]:
    """The rows of the study's model fine-tuned with this classifier's ``max_masking_ratio`` (converged fits)."""
    def mine(frame):
        if frame.empty:
            return frame
        keep = np.isclose(frame["max_masking_ratio"].astype(float), max_masking_ratio)
        return frame[keep & frame["converged"].astype(bool)] if "converged" in frame else frame[keep]

    performance = mine(study.performance)
    if performance.empty:
        ratios = sorted(set(study.performance.get("max_masking_ratio", [])))
        raise ValueError(f"results is a study without a converged model fine-tuned with max_masking_ratio="
                         f"{max_masking_ratio:g}, this classifier's; the study's models have {ratios}.")
    rows = []
    for metric, part in performance.groupby("metric", sort=False):
        one = len(part) == 1  # with several seeds the CI of one seed would mislead
        rows.append(CardRow("performance", str(metric), str(metric).replace("_", " "), _plain(part["value"].mean()),
                            None, _args(ci_low=part["low"].iloc[0] if one else None,
                                        ci_high=part["high"].iloc[0] if one else None, n_seeds=len(part),
                                        n_examples=part["n_examples"].iloc[0])))
    for frame, to_rows in ((study.racu_summary, _racu_rows), (study.in_distribution, _in_distribution_rows),
                           (study.erasure, _erasure_rows)):
        part = mine(frame)
        if len(part):  # an empty frame: the stage did not run
            rows += to_rows(part)
    return rows


def card_rows(results, *, max_masking_ratio: float) -> list[CardRow]:
    """The rows of ``results``: one object or a list of them (see :func:`classifier_card`).

    Raises
    ------
    TypeError, ValueError
        Naming ``results`` and what it should be.
    """
    items = list(results) if isinstance(results, list) else [results]
    if not items:
        raise ValueError("results is an empty list; pass None for a card without results.")
    rows = []
    for item in items:
        if _is_study_result(item):
            rows += _study_rows(item, float(max_masking_ratio))
        elif isinstance(getattr(item, "summary", None), pd.DataFrame):  # FaithfulnessReport, ErasureReport
            rows += _frame_rows(item.summary)
        elif isinstance(item, pd.DataFrame):
            rows += _frame_rows(item)
        elif isinstance(item, Mapping):
            rows += _metric_rows(item)
        else:
            raise TypeError(f"results must be a study result, a faithfulness or erasure report, a DataFrame "
                            f"({_FRAME_KINDS}), a mapping such as {{'accuracy': 0.91}}, or a list of them; got "
                            f"{type(item).__name__}.")
    return rows


# --------------------------------------------------------------------------- the card


def _base_model(clf) -> tuple[str | None, str]:
    """The Hub name of the base model (None when it is not on the Hub) and how the card's text names it."""
    name = base_model_name(clf)
    if name in _BUNDLED_HUB_NAMES:
        return _BUNDLED_HUB_NAMES[name], f"`{_BUNDLED_HUB_NAMES[name]}` (bundled with fmmlearn as `{name}`)"
    if os.path.isabs(name) or name.startswith(".") or os.path.isdir(name) or name.count("/") > 1:
        return None, f"a local model directory (`{os.path.basename(os.path.normpath(name))}`), not on the Hub"
    return name, f"`{name}`"


def _settings(clf) -> dict:
    classes = [c.item() if hasattr(c, "item") else c for c in clf.classes_]
    return {"max_masking_ratio": float(clf.max_masking_ratio), "masking_strategy": clf.masking_strategy,
            "epochs": int(clf.max_epochs), "learning_rate": float(clf.learning_rate),
            "seed": clf.random_state if isinstance(clf.random_state, (int, type(None))) else None,
            "classes": classes, "fmmlearn_version": __version__}


def _table(header: list[str], lines: list[list[str]]) -> str:
    rows = [header, ["---"] * len(header), *lines]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in rows)


def _value(value) -> str:
    return number(value, 3, significant=True)


def _ci(row: CardRow) -> str:
    low, high = row.args.get("ci_low"), row.args.get("ci_high")
    return "" if low is None or high is None else f"[{_value(low)}, {_value(high)}]"


def _section_table(section: str, rows: list[CardRow]) -> str:
    if section == "in_distribution":
        return _table(["masking ratio", "flagged share", "null share"],
                      [[f"{r.args['masking_ratio']:g}", percent(r.value, 1), percent(r.args.get("null_share"), 1)]
                       for r in rows])
    if section == "erasure":
        return _table(["measure", "metric", "value", "CI", "valid (in-distribution)"],
                      [[f"`{r.config}`", r.metric_type.replace("_", " "), _value(r.value), _ci(r),
                        {True: "yes", False: "no"}.get(r.args.get("valid"), "not checked")] for r in rows])
    if section == "faithfulness":
        return _table(["measure", "metric", "value", "CI"],
                      [[f"`{r.config}`", r.metric_type.upper(), _value(r.value), _ci(r)] for r in rows])
    return _table(["metric", "value", "CI"], [[r.name, _value(r.value), _ci(r)] for r in rows])


def _results_text(rows: list[CardRow], dataset: str, split: str | None) -> str:
    where = f"**{dataset}**" + (f" ({split} split)" if split else "")
    parts = [f"## Results\n\nMeasured with fmmlearn on {where}; intervals are bootstrap confidence intervals."]
    for section, heading in _SECTIONS.items():
        mine = [r for r in rows if r.section == section]
        if mine:
            parts.append(f"### {heading}\n\n{_section_table(section, mine)}")
    if any(r.section == "in_distribution" for r in rows):
        parts.append("The null share is the share an in-distribution test set is expected to be flagged: a flagged "
                     "share near it means masked inputs look like the training inputs, so masking-based "
                     "faithfulness measurements are valid for this model.")
    return "\n\n".join(parts)


_MASKED = """A text classifier fine-tuned with [fmmlearn](https://pypi.org/project/fmmlearn/) by masked fine-tuning
(Madsen, Reddy & Chandar, "Faithfulness Measurable Masked Language Models", ICML 2024): in training, up to
{ratio} of the tokens of an example are replaced by the mask token, so that masked inputs are in-distribution
for the model and the faithfulness of an explanation can be measured by masking the tokens it calls important."""
_PLAIN = """A text classifier fine-tuned with [fmmlearn](https://pypi.org/project/fmmlearn/) without masking
(`max_masking_ratio=0`, the plain baseline of Madsen, Reddy & Chandar, "Faithfulness Measurable Masked Language
Models", ICML 2024): masked inputs may be out of distribution for it, so faithfulness measured by masking may
not be valid."""
_TEXT = """# {model_name}

{intro}

Base model: {base}.

## Masked fine-tuning settings

{settings}

## How to use

```python
from fmmlearn import FaithfulTextClassifier

clf = FaithfulTextClassifier.load("path/to/this/folder")  # e.g. huggingface_hub.snapshot_download(repo_id)
clf.predict(["an example text"])
```
"""


def classifier_card(clf, results=None, *, dataset=None, split="test", model_name=None):
    """The model card of a fitted classifier (see ``FaithfulTextClassifier.model_card``).

    Returns
    -------
    huggingface_hub.ModelCard
    """
    from huggingface_hub import ModelCard, ModelCardData

    loaded = getattr(clf, "model_card_", None)
    if results is None and loaded is not None:
        return ModelCard(str(loaded))  # the card read by load(), results and edits kept
    for name, value in (("dataset", dataset), ("split", split), ("model_name", model_name)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError(f"{name} must be a non-empty string or None, got {value!r}.")
    rows = [] if results is None else card_rows(results, max_masking_ratio=clf.max_masking_ratio)
    dataset = dataset or getattr(clf, "dataset", None) or _study_dataset(results)
    if rows and dataset is None:
        raise ValueError("dataset is needed with results: the name of the data they were measured on (a Hub "
                         "dataset id where there is one), e.g. dataset='tweet_eval'.")
    hub_name, base_text = _base_model(clf)
    kept = {}  # what a loaded card says that the classifier cannot know: where it started, its licence
    if loaded is not None:
        model_name = model_name or loaded.data.model_name
        if loaded.data.base_model != hub_name:
            hub_name = loaded.data.base_model
            base_text = f"`{hub_name}`" if hub_name else "a local model directory, not on the Hub"
        kept = {key: loaded.data.get(key) for key in _KEPT_METADATA if loaded.data.get(key) is not None}
    model_name = model_name or f"{(hub_name or 'model').rsplit('/', 1)[-1]}-fmmlearn"
    settings = _settings(clf)
    masked = settings["max_masking_ratio"] > 0
    tags = [tag for tag in TAGS if masked or tag != "masked-fine-tuning"]
    data = ModelCardData(library_name="fmmlearn", pipeline_tag=TASK, base_model=hub_name, tags=tags,
                         model_name=model_name, datasets=[dataset] if rows else None,
                         eval_results=[r.eval_result(dataset, split) for r in rows] or None,
                         masked_fine_tuning=settings, **kept)
    lines = [[f"`{key}`", ", ".join(map(str, value)) if isinstance(value, list) else str(value)]
             for key, value in settings.items()]
    intro = _MASKED.format(ratio=percent(settings["max_masking_ratio"])) if masked else _PLAIN
    text = _TEXT.format(model_name=model_name, intro=intro, base=base_text,
                        settings=_table(["setting", "value"], lines))
    if rows:
        text += "\n" + _results_text(rows, dataset, split) + "\n"
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{text}")


def _study_dataset(results) -> str | None:
    """The data name a study result records, if ``results`` holds one."""
    for item in results if isinstance(results, list) else [results]:
        if _is_study_result(item):
            name = (item.metadata.get("data") or {}).get("name")
            if isinstance(name, str) and name:
                return name
    return None

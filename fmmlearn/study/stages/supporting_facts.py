"""Stage ``supporting facts`` (not in :data:`STAGES`; add it for bAbI): the supporting-fact test of every measure.

``FaithfulnessStudy(..., stages=[*STAGES, SupportingFactsStage()]).run(load_babi(1, distractors=True))``
scores every model, seed and measure on the test texts of its curves: does the explanation of the
gold class rank the occurrence of the answer in the supporting fact above its other occurrences
(:func:`fmmlearn.faithfulness.supporting_fact_score`; docs/faithfulness.md, "The supporting-fact
test")?
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._names import model_label
from .._pipeline import Job, Stage
from .._sections import ReportSection
from ._common import test_key

__all__ = ["SUPPORTING_FACTS_COLUMNS", "SupportingFactsStage", "occurrences_in_test_split"]

#: Columns of the ``supporting_facts`` frame, in order.
SUPPORTING_FACTS_COLUMNS = ("model", "max_masking_ratio", "seed", "converged", "method", "subset", "n_examples",
                            "n_scored", "n_informative", "hit_rate", "hit_low", "hit_high", "chance", "lift",
                            "lift_low", "lift_high")


def occurrences_in_test_split(splits) -> tuple[list, list]:
    """``(answer_spans, answer_supporting)`` of the test texts, from the split's per-example fields.

    Taken as given when the data has them (``load_babi(1, distractors=True)``), else found from the
    supporting spans (:func:`fmmlearn.datasets.answer_occurrences`, any bAbI data).

    Raises
    ------
    ValueError
        Test texts without supporting spans (not bAbI data).
    """
    from ...datasets import answer_occurrences

    info = splits.test_info or {}
    if "answer_spans" in info and "answer_supporting" in info:
        return [list(map(tuple, s)) for s in info["answer_spans"]], [list(f) for f in info["answer_supporting"]]
    if "supporting_spans" not in info:
        raise ValueError(f"the supporting-facts stage needs bAbI test texts with supporting_spans (e.g. "
                         f"load_babi(1, distractors=True)); the test split of {splits.name!r} has "
                         f"{sorted(info) or 'no per-example fields'}.")
    paragraphs = [x[0] if isinstance(x, (tuple, list)) else x for x in splits.X_test]
    return answer_occurrences(paragraphs, splits.y_test.tolist(), info["supporting_spans"])


class SupportingFactsStage(Stage):
    """Supporting-fact test: how often each measure ranks the answer's supporting occurrence above its others.

    Per model, seed and measure, on the test texts of its curves: ``hit_rate`` (the share of examples
    whose top-ranked occurrence of the answer lies in the supporting fact, ties sharing the credit)
    against ``chance`` (the share of supporting occurrences: 1/2 on distractor bAbI-1), and ``lift``
    = hit rate - chance with its bootstrap CI.  A model that ignores the question scores chance.
    """

    name = "supporting facts"
    requires = ("settings", "splits", "models", "fit_keys", "subsets", "converged")
    provides = ("supporting_facts", "supporting_fact_examples")
    frames = ("supporting_facts", "supporting_fact_examples")
    version = "1"

    def jobs(self, context) -> list:
        settings, sp, subsets = context["settings"], context["splits"], context["subsets"]
        spans, flags = occurrences_in_test_split(sp)
        jobs = []
        for run in settings.curve_runs:
            for method in settings.measures:
                name, idx = subsets[method]
                key = ("supporting facts", test_key(sp), idx.tolist(), method, run[1], settings.segment,
                       settings.measure_params.get(method, {}), [spans[i] for i in idx], [flags[i] for i in idx])
                jobs.append(Job(run, key, method=method, n_examples=len(idx), data={"subset": name},
                                label=f"{model_label(run[0])} seed {run[1]}: {method} ({len(idx)} examples)"))
        return jobs

    def compute(self, clf, job, context) -> dict:
        from ...explanation import explain
        from ...faithfulness import supporting_fact_credits

        sp = context["splits"]
        _, _, idx, method, seed, segment, params, spans, flags = job.key
        idx = list(idx)
        explanation = explain(clf, [sp.X_test[i] for i in idx], sp.y_test[idx].tolist(), method=method,
                              segment=segment, random_state=seed, **dict(params))
        per_example = supporting_fact_credits(explanation, spans, flags)
        return {"example": np.asarray(idx, dtype=np.int64),
                **{c: per_example[c].to_numpy() for c in ("n_occurrences", "n_supporting", "scored", "hit", "chance")}}

    def finish(self, context, results) -> dict:
        from ...faithfulness import summarize_credits

        settings, converged = context["settings"], context["converged"]
        rows, parts = [], []
        for job, payload in results.items():
            base = {"model": model_label(job.run[0]), "max_masking_ratio": job.run[0], "seed": job.run[1],
                    "converged": converged[job.run], "method": job.method, "subset": job.data["subset"]}
            examples = pd.DataFrame({k: payload[k] for k in ("example", "n_occurrences", "n_supporting", "scored",
                                                             "hit", "chance")})
            examples["scored"] = examples["scored"].astype(bool)
            summary = summarize_credits(examples, confidence_level=settings.confidence_level,
                                        n_resamples=settings.n_bootstrap, random_state=job.run[1])
            rows.append({**base, **{k: summary[k] for k in SUPPORTING_FACTS_COLUMNS if k in summary}})
            parts.append(examples.assign(**base))
        frame = pd.DataFrame(rows, columns=list(SUPPORTING_FACTS_COLUMNS))
        examples = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        return {"supporting_facts": frame, "supporting_fact_examples": examples}

    def report_section(self, frames: dict) -> ReportSection | None:
        if not len(frames.get("supporting_facts", ())):
            return None
        return ReportSection(title=self.name, intro=_INTRO, frame="supporting_facts")


_INTRO = ("Does the explanation of the gold class rank the occurrence of the answer in the supporting fact above "
          "its other occurrences? hit_rate: the share of test texts where it does (ties share the credit); chance: "
          "the share of supporting occurrences (1/2 on distractor bAbI-1, where the answer is named by the "
          "supporting move and by the partner's); lift = hit_rate - chance with its bootstrap CI. A model that "
          "ignores the question scores chance whatever its explanation; the old test (top token inside a "
          "supporting sentence) could not tell.")

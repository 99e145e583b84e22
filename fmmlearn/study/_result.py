"""The result of a study: tidy frames, figures, a plain-language summary, the HTML report, save/load."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..utils import atomic_write, directory_lock
from ._tables import LEVEL, erasure_by_model, measure_costs
from ..utils import keyword_only

__all__ = ["FRAMES", "StudyResult", "erasure_by_model", "load_study"]

#: The frames of the built-in stages, in the order they are saved (a study with more stages has more).
FRAMES = ("performance", "curves", "racu", "racu_summary", "precision_probe", "comparisons", "in_distribution",
          "masf_controls", "in_distribution_verdicts", "power_curves", "erasure", "explanations", "outcomes",
          "timings")
_METADATA = "metadata.json"
_FORMATS = ("parquet", "csv")
#: Seconds a save waits for another process saving into the same directory.
_SAVE_WAIT_S = 120
# Line colours of the erasure plot: its points are green (valid), red (not valid) or grey (not checked).
_LINE_COLORS = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:cyan", "tab:olive", "tab:pink", "black")


class StudyResult:
    """Everything a :class:`~fmmlearn.study.FaithfulnessStudy` measured, as tidy pandas frames.

    Attributes
    ----------
    performance : pandas.DataFrame
        One row per fine-tuned model (``model``, ``max_masking_ratio``,
        ``seed``): clean test ``value`` of ``metric`` with its bootstrap CI
        over examples (``low``, ``high``), ``converged``, epochs and fit time.
    curves : pandas.DataFrame
        One row per model, curve and ratio: ``method`` (a measure, ``rand``,
        or ``random-masking``), ``subset`` (the test examples the curve is
        on: ``all``, ``random k`` or ``shortest k``; ``rand`` appears once
        per subset, as the baseline of the measures on it), ``ratio``,
        ``value``, ``n_examples``, ``mean_masked_fraction``.
    racu : pandas.DataFrame
        RACU and ACU of every measure per model and seed, with bootstrap CIs
        over the test examples (``racu_low``/``racu_high``, ...); the
        baseline is the mean of ``n_random`` ``rand`` curves on the same
        examples.
    racu_summary : pandas.DataFrame
        Per model and measure, over converged seeds: mean RACU and ACU with
        the CI over examples of that mean, the CI over seeds
        (``racu_seed_low``/``racu_seed_high``; NaN with one seed), the area
        random masking leaves (``baseline_area``, RACU's denominator, with
        its CI), ``reliable`` (the lower bound of that area's CI is at
        least half of it, so RACU's denominator is known to about +-50 %)
        and ``most_faithful`` (the highest RACU of the model when all its
        RACUs are reliable, else the highest ACU).
    precision_probe : pandas.DataFrame
        Where the machine runs bf16 faster: per model, seed and costly measure, its ACU and RACU on the
        probe texts in fp32 and in bf16, the change as a share of the planned interval's half-width, and
        whether the measure's other texts ran in bf16 (``accepted``; docs/benchmarks.md).  Empty when
        every measure ran in fp32.
    in_distribution : pandas.DataFrame
        The in-distribution reports (:func:`fmmlearn.ood.in_distribution_report`,
        with the study's ``detector``) of all models and seeds: per ratio and
        threshold, the share of masked test examples with ``p < threshold``
        (and its CI), the share of the matched positive control flagged
        (``matched_proportion``) and dataset-level p-values.
    masf_controls : pandas.DataFrame
        Per model, seed and control (``negative``, ``matched``, ``random``,
        ``other domain``): the share flagged at the rules' level with its
        Wilson CI and the test's null share (docs/ood.md).
    in_distribution_verdicts : pandas.DataFrame
        Per model: the flagged share of masked test texts (ratios strictly
        inside 0 and 1), the power against the matched control, the
        controls, ``size_for_power`` (the data multiplier the power curve
        gives for enough power) and the verdict with its reason.
    power_curves : pandas.DataFrame
        Per model and seed: the test refitted on shares (``fraction``) of its
        texts and its power against the matched control.
    erasure : pandas.DataFrame
        ERASER's erasure metrics (:func:`fmmlearn.faithfulness.erasure_metrics`,
        removal by the mask token) of the ``erasure`` measures and of
        ``rand`` on the same test texts (``subset``), per model and seed:
        one row per ``mode`` (comprehensiveness, sufficiency) and ``k``, then
        the AOPC row (``aopc`` True, ``k`` NaN); the ``mean`` over examples
        with its bootstrap CI (``ci_low``, ``ci_high``), ``n_perturbed``
        erased inputs, ``ood_share`` (the share of them MaSF flags at
        ``p < 0.05``) and ``valid`` (``ood_share`` at most twice 0.05; an
        AOPC row is valid when every ``k`` is; ``<NA>``: not checked).  Empty
        when the stage did not run.
    explanations : fmmlearn.explanation.Explanation
        The long frame of :func:`fmmlearn.explanation.explain` for a few
        test examples and every model (columns ``model``, ``seed`` and
        ``test_index`` added); it renders as heatmaps.
    outcomes : pandas.DataFrame
        Per model, seed, measure (``draw`` numbers the ``rand`` baseline
        draws), ratio and test example: the prediction,
        whether it is correct and the gold-class probability (everything
        the curves and CIs are computed from).
    timings : pandas.DataFrame
        One row per stage job: ``cached``, wall ``seconds`` of this run,
        ``compute_seconds`` when it was computed, examples and forward
        counts.
    metadata : dict
        Settings, data sizes, versions, CPU model and flags, torch threads,
        precision used, seeds, per-stage timings.

    Parameters
    ----------
    metadata : dict
        The ``metadata`` attribute.
    **frames
        Name -> frame (the attributes above; a stage added to a study adds its own). A study's
        :meth:`~fmmlearn.study.FaithfulnessStudy.run` builds the result; :meth:`load` reads one.
    """

    def __init__(self, *, metadata: dict, **frames):
        # the built-in frames always exist (empty when their stage did not run); stages added to a study
        # bring their own (metadata["frames"] lists them in order)
        self.frames = {name: frames.get(name, pd.DataFrame()) for name in FRAMES}
        self.frames.update({name: frame for name, frame in frames.items() if name not in FRAMES})
        for name in FRAMES:
            setattr(self, name, self.frames[name])
        self.metadata = metadata

    def __getattr__(self, name):
        frames = self.__dict__.get("frames", {})
        if name in frames:
            return frames[name]
        raise AttributeError(f"{type(self).__name__} has no attribute or frame {name!r}; its frames are "
                             f"{list(frames)}.")

    def __repr__(self) -> str:
        models = ", ".join(pd.unique(self.performance["model"])) if len(self.performance) else "none"
        measures = ", ".join(pd.unique(self.racu_summary["method"])) if len(self.racu_summary) else "none"
        return (f"StudyResult(data={self.metadata.get('data', {}).get('name')!r}, models=[{models}], "
                f"measures=[{measures}], seeds={self.metadata.get('seeds')})")

    # ------------------------------------------------------------------ figures
    @keyword_only
    def plot_performance(self, ax=None, *, path=None):
        """Clean test performance per model (see :func:`fmmlearn.plotting.plot_performance`).

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; a new figure when ``None``.
        path : str or path-like, optional
            Also save the figure to this file.

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on.
        """
        from ..plotting import plot_performance

        return plot_performance(self.performance, ax=ax, path=path)

    @keyword_only
    def plot_random_masking(self, ax=None, *, path=None):
        """Random-masking curves per model (see :func:`fmmlearn.plotting.plot_random_masking`).

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; a new figure when ``None``.
        path : str or path-like, optional
            Also save the figure to this file.

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on.
        """
        from ..plotting import plot_random_masking

        return plot_random_masking(self.curves, ax=ax, path=path)

    @keyword_only
    def plot_faithfulness(self, model=None, *, path=None):
        """Faithfulness curves, one panel per measure and model (see :func:`fmmlearn.plotting.plot_faithfulness_grid`).

        Parameters
        ----------
        model : str, optional
            Only this model's row of panels (e.g. ``"masked"``).
        path : str or path-like, optional

        Returns
        -------
        matplotlib.figure.Figure
        """
        from ..plotting import plot_faithfulness_grid

        models = None if model is None else [model]
        if model is not None and model not in set(self.curves["model"]):
            raise ValueError(f"model {model!r} is not in the study; it has {list(pd.unique(self.curves['model']))}.")
        return plot_faithfulness_grid(self.curves, path=path, models=models)

    @keyword_only
    def plot_racu(self, value="racu", *, ax=None, path=None):
        """RACU (or ACU) with its CI per measure and model (see :func:`fmmlearn.plotting.plot_racu`).

        Parameters
        ----------
        value : {"racu", "acu"}, default="racu"
            Which area to draw.
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; a new figure when ``None``.
        path : str or path-like, optional
            Also save the figure to this file.

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on.
        """
        from ..plotting import plot_racu

        return plot_racu(self.racu_summary, ax=ax, path=path, value=value)

    @keyword_only
    def plot_in_distribution(self, statistic="proportion", *, threshold=LEVEL, ax=None, path=None):
        """MaSF statistic against the masking ratio, one line per model with its seed band.

        See :func:`fmmlearn.plotting.plot_in_distribution`; ``"proportion"``
        (default) is the share of masked test examples with ``p < threshold``.

        Parameters
        ----------
        statistic : str, default="proportion"
            ``"proportion"`` or a p-value column of the reports (e.g. ``"simes_p"``).
        threshold : float, default=0.05
            The significance level a text is flagged at.
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; a new figure when ``None``.
        path : str or path-like, optional
            Also save the figure to this file.

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on.
        """
        from ..plotting import plot_in_distribution

        if self.in_distribution.empty:
            raise ValueError("the study ran without the in-distribution stage (in_distribution=None).")
        frame = self.in_distribution[self.in_distribution["converged"].astype(bool)]
        if frame.empty:
            raise ValueError("no fit counted (converged), so there is no in-distribution report to draw.")
        return plot_in_distribution(frame, ax=ax, path=path, statistic=statistic, threshold=threshold)

    @keyword_only
    def plot_erasure(self, ax=None, *, path=None, baseline: bool = False):
        """Comprehensiveness and sufficiency against ``k``, one line per model, coloured by validity.

        Means over the converged seeds (:func:`erasure_by_model`); see
        :func:`fmmlearn.plotting.plot_erasure`.  Green points are valid, red
        ones not, grey ones not checked.

        Parameters
        ----------
        ax : matplotlib Axes, optional
        path : str or path-like, optional
        baseline : bool, default=False
            Also draw the ``rand`` baseline's lines.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from ..faithfulness import AOPC
        from ..plotting import plot_erasure

        rows = erasure_by_model(self)
        if rows.empty:
            raise ValueError("the study has no erasure metrics (it ran with erasure=None, or no converged run).")
        if not baseline:
            rows = rows[rows["method"] != "rand"]
        rows = rows.assign(k=[AOPC if total else k for total, k in zip(rows["aopc"], rows["k"])])
        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(9, 3.8))
            # One colour per model (solid and dashed line alike), none of them the green or red of the flags.
            ax.set_prop_cycle(color=[c for c in _LINE_COLORS for _ in range(2)])
        return plot_erasure(rows, ax=ax, path=path)

    def costs(self) -> pd.DataFrame:
        """Seconds per test text of each measure's faithfulness curve, per model.

        The RACU table of the report shows them.

        Returns
        -------
        pandas.DataFrame
            One row per model and measure, with the seconds per test text.
        """
        return measure_costs(self.timings)

    # ------------------------------------------------------------------ text
    def summary(self) -> str:
        """A plain-language summary: accuracy, the most faithful measures, in-distribution and erasure verdicts.

        Returns
        -------
        str
            The summary, one paragraph per topic.
        """
        from ._summary import summary_lines

        return "\n".join(summary_lines(self))

    def to_html(self, path=None, *, title: str | None = None) -> str:
        """The self-contained HTML report (inline CSS, figures as PNG data URIs, no scripts, no network).

        Parameters
        ----------
        path : str or path-like, optional
            Also write the report there (atomically).
        title : str, optional

        Returns
        -------
        str
        """
        from ._report import render_report

        page = render_report(self, title=title)
        if path is not None:
            path = Path(path)
            atomic_write(path, lambda tmp: tmp.write_text(page, encoding="utf-8"))
        return page

    # ------------------------------------------------------------------ persistence
    def save(self, directory, *, format: str = "parquet") -> Path:
        """Save every frame (Parquet or CSV) and ``metadata.json`` to ``directory``.

        Each file is written to a temporary name and renamed, ``metadata.json``
        last, so a reader never sees a half-written result.

        Parameters
        ----------
        directory : str or path-like
            Created if needed.
        format : {"parquet", "csv"}, default="parquet"
            Parquet needs ``pyarrow`` (or ``fastparquet``); CSV always works
            (column types are restored on load).

        Returns
        -------
        pathlib.Path
        """
        if format not in _FORMATS:
            raise ValueError(f"format must be one of {_FORMATS}, got {format!r}.")
        with directory_lock(directory, timeout=_SAVE_WAIT_S):  # two saves into one directory never interleave
            return self._save_files(Path(directory), format)

    def _save_files(self, directory: Path, format: str) -> Path:
        files = {}
        for name, frame in self.frames.items():
            file = directory / f"{name}.{format}"
            plain = pd.DataFrame(frame)  # an Explanation's rows, without its per-example table
            if format == "parquet":
                atomic_write(file, lambda tmp, f=plain: f.to_parquet(tmp, index=False))
            else:
                atomic_write(file, lambda tmp, f=plain: f.to_csv(tmp, index=False))
            files[name] = {"file": file.name, "dtypes": {c: str(t) for c, t in frame.dtypes.items()},
                           "columns": list(frame.columns)}
            if _is_explanation(frame):  # its own exact format keeps the original texts and predictions
                json_file = directory / f"{name}.explanation.json"
                atomic_write(json_file, lambda tmp, f=frame: tmp.write_text(f.to_json(), encoding="utf-8"))
                files[name]["explanation"] = json_file.name
        meta = {**self.metadata, "saved": {"format": format, "frames": files}}
        atomic_write(directory / _METADATA, lambda tmp: tmp.write_text(json.dumps(meta, indent=2, default=str)))
        return directory

    @classmethod
    def load(cls, directory) -> "StudyResult":
        """Load a result written by :meth:`save`.

        Parameters
        ----------
        directory : str or path-like
            The directory :meth:`save` wrote.

        Returns
        -------
        StudyResult
            The frames and metadata as saved.
        """
        directory = Path(directory)
        meta_file = directory / _METADATA
        if not meta_file.is_file():
            raise FileNotFoundError(f"{directory} holds no {_METADATA}; it was not written by StudyResult.save().")
        metadata = json.loads(meta_file.read_text())
        saved = metadata.pop("saved")
        frames = {}
        for name, info in saved["frames"].items():
            file = directory / info["file"]
            if "explanation" in info:
                from ..explanation import Explanation

                frames[name] = Explanation.read_json(directory / info["explanation"])
            elif saved["format"] == "parquet":
                frames[name] = pd.read_parquet(file)
            elif not info["columns"]:
                frames[name] = pd.DataFrame()
            else:
                frame = pd.read_csv(file, keep_default_na=True)
                frames[name] = frame.astype({c: t for c, t in info["dtypes"].items() if c in frame.columns})
        return cls(metadata=metadata, **frames)


def load_study(directory) -> StudyResult:
    """Load a study result saved with :meth:`StudyResult.save` (same as :meth:`StudyResult.load`).

    Parameters
    ----------
    directory : str or path-like
        The directory :meth:`StudyResult.save` wrote.

    Returns
    -------
    StudyResult
        The frames and metadata as saved.
    """
    return StudyResult.load(directory)


def _is_explanation(frame) -> bool:
    from ..explanation import Explanation

    return isinstance(frame, Explanation)

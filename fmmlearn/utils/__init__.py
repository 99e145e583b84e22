"""Helpers shared by fmmlearn's packages; not part of the documented API.

One concept per private module, each imported from here (``from ..utils import derive_seed``), so no
package reaches into another's private module:

* ``_random`` -- seeds: ``random_state`` as an integer, derived sub-seeds, generators;
* ``_validation`` -- argument checks shared by public functions (ratios, segments, intervals);
* ``_bootstrap`` -- bootstrap confidence intervals;
* ``_labels`` -- labels and explanation targets;
* ``_warnings`` -- warnings at the user's line, once per call;
* ``_formatting`` -- numbers for people;
* ``_files`` -- atomic writes, write errors that name the path, directory locks;
* ``_signals`` -- Ctrl-C and SIGTERM as exceptions;
* ``_processes`` -- the processes of a multi-process launch;
* ``_templates`` -- the one Jinja2 environment, figure encoder and page writer;
* ``_protocols`` -- the classifier interface (:class:`fmmlearn.FittedClassifier`);
* ``_lazy`` -- lazily loaded package attributes;
* ``_redirect`` -- old module paths that still import;
* ``_deprecation`` -- renamed attributes and parameters, options passed by position.

Names load their module on first use, so importing one helper does not load torch.
"""

from ._lazy import attach

# name -> the module that defines it
_HELPERS = {
    **dict.fromkeys(["derive_seed", "generator", "offset_seed", "resolve_seed", "sample_examples"], "._random"),
    **dict.fromkeys(["DEFAULT_RATIOS", "SEGMENTS", "StrictInterval", "check_ratios", "check_segment",
                     "check_writable_dir", "positive_int"], "._validation"),
    **dict.fromkeys(["bootstrap_ci", "mean_ci", "seed_ci"], "._bootstrap"),
    **dict.fromkeys(["as_labels", "check_labels", "gold_targets", "label_indices", "resolve_targets"], "._labels"),
    **dict.fromkeys(["command_line_warnings", "record_truncation", "reports_truncation_once", "single_class_note",
                     "warn"], "._warnings"),
    **dict.fromkeys(["DASH", "interval", "number", "percent"], "._formatting"),
    **dict.fromkeys(["atomic_write", "directory_lock", "reporting_write_errors"], "._files"),
    **dict.fromkeys(["exit_status", "not_swallowed", "signal_name", "signals_as_interrupts"], "._signals"),
    **dict.fromkeys(["DISTRIBUTED_EXTRA", "EXIT_BARRIER_TIMEOUT_S", "batches_for_this_process", "gather_objects",
                     "is_main_process", "launched_processes", "local_only", "num_processes", "process_device_index",
                     "process_index", "require", "shard_batches", "use_cpu"], "._processes"),
    **dict.fromkeys(["FIGURE_DPI", "environment", "figure_data_uri", "write_page"], "._templates"),
    **dict.fromkeys(["FittedClassifier", "MaskedFittedClassifier"], "._protocols"),
    "redirect_moved_modules": "._redirect",
    **dict.fromkeys(["DEPRECATED", "REMOVED_IN", "keyword_only", "renamed_attributes", "renamed_parameter"],
                    "._deprecation"),
}

__getattr__, __dir__ = attach(__name__, _HELPERS, globals())

"""Sphinx configuration of the fmmlearn site (build command: docs/building.md).

The narrative pages are the Markdown files of ``docs/`` (myst-parser); the API
reference is generated from the ``__all__`` of ``fmmlearn`` and of its public
modules (autosummary + numpydoc, validated); the gallery is ``examples/``
(sphinx-gallery, executed at build time).  The build is meant to run with
``-W -n``: warning-free, every reference resolved.  Intersphinx links to the
scikit-learn, pandas, NumPy, PyTorch and transformers API pages are made only
when their inventories can be reached; offline, references into those
packages are rendered as plain code, without a warning.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import socket
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))

import fmmlearn  # noqa: E402

project = "fmmlearn"
author = "fmmlearn developers"
copyright = "fmmlearn developers"
release = version = fmmlearn.__version__

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_templates", "**.ipynb_checkpoints", "auto_examples/*.py", "auto_examples/*.ipynb",
                    "auto_examples/*.codeobj.json", "auto_examples/*.zip", "auto_examples/*.md5"]
templates_path = ["_templates"]

# ---------------------------------------------------------------- Markdown pages (myst-parser)
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3
# Links from the pages to files outside docs/ (benchmark scripts, figures of benchmarks/results) are
# files of the repository, not pages of the site.
suppress_warnings = ["myst.xref_missing", "myst.header"]

# ---------------------------------------------------------------- API reference
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # the numpydoc Parameters sections say the types, in words
autodoc_default_options = {"inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# A public docstring without a Parameters entry for an argument (PR01) or without a Returns
# section for a function that returns something (RT01) fails the build (-W).
numpydoc_validation_checks = {"PR01", "RT01"}
#: Low-level public names whose docstrings do not yet have a Parameters entry for every argument or a
#: Returns section: known gaps, listed one by one (a name not listed here fails the build).  Shrink it.
NOT_YET_VALIDATED = [
    # thin wrappers of the functions they name; classifier.py is at the module size limit
    "fmmlearn.FaithfulTextClassifier.faithfulness_curve",
    "fmmlearn.FaithfulTextClassifier.in_distribution_report",
    "fmmlearn.FaithfulTextClassifier.random_masking_curve",
    "fmmlearn.FaithfulTextClassifier.score",
    "fmmlearn.cli.build_parser",
    "fmmlearn.cli.labels_from",
    "fmmlearn.cli.main",
    "fmmlearn.cli.read_table",
    "fmmlearn.cli.summary_path",
    "fmmlearn.cli.texts_from",
    "fmmlearn.cli.write_table",
    "fmmlearn.datasets.BlindPredictor",
    "fmmlearn.datasets.DatasetSpec.source_split",
    "fmmlearn.distributed.AcceleratedTrainingMixin",
    "fmmlearn.distributed.accelerated_net_options",
    "fmmlearn.distributed.gather_objects",
    "fmmlearn.distributed.is_main_process",
    "fmmlearn.distributed.launched_processes",
    "fmmlearn.distributed.num_processes",
    "fmmlearn.distributed.optimizer_steps_per_epoch",
    "fmmlearn.distributed.process_device_index",
    "fmmlearn.distributed.process_index",
    "fmmlearn.distributed.process_seed",
    "fmmlearn.encoding.Batch",
    "fmmlearn.encoding.Batch.model_inputs",
    "fmmlearn.encoding.Batch.to",
    "fmmlearn.encoding.Batch.with_input_ids",
    "fmmlearn.encoding.Encoding",
    "fmmlearn.encoding.Encoding.subset",
    "fmmlearn.encoding.LengthGroupedBatchSampler",
    "fmmlearn.encoding.UniformBatchSampler",
    "fmmlearn.encoding.training_batch_sampler",
    "fmmlearn.estimator.AcceleratedMaskedFineTuningNet",
    "fmmlearn.estimator.EncodedDataset",
    "fmmlearn.estimator.MaskedFineTuningNet.train_step",
    "fmmlearn.estimator.build_callbacks",
    "fmmlearn.estimator.concat_encodings",
    "fmmlearn.estimator.history_frame",
    "fmmlearn.estimator.make_net",
    "fmmlearn.estimator.mask_encoding",
    "fmmlearn.estimator.no_decay_param_groups",
    "fmmlearn.estimator.random_masker",
    "fmmlearn.explainer_masking.eligible_masks",
    "fmmlearn.explainer_masking.finite_scores",
    "fmmlearn.explainer_masking.resolve_recursive",
    "fmmlearn.faithfulness.ErasureReport",
    "fmmlearn.faithfulness.FaithfulnessReport",
    "fmmlearn.faithfulness.SupportingFactReport",
    "fmmlearn.faithfulness.summarize_credits",
    "fmmlearn.faithfulness.supporting_fact_credits",
    "fmmlearn.importance.ImportanceMethod",
    "fmmlearn.importance.ImportanceMethod.accepted_params",
    "fmmlearn.importance.ImportanceMethod.bind",
    "fmmlearn.importance.Problem",
    "fmmlearn.importance.Problem.rows_per_forward",
    "fmmlearn.masking.segment_a_positions",
    "fmmlearn.modeling.ForwardRates",
    "fmmlearn.modeling.autocast",
    "fmmlearn.modeling.eval_mode",
    "fmmlearn.modeling.forward_logits",
    "fmmlearn.modeling.logits_of",
    "fmmlearn.modeling.precision_report",
    "fmmlearn.modeling.progress_bar",
    "fmmlearn.modeling.reduced_dtype",
    "fmmlearn.modeling.resolve_device",
    "fmmlearn.ood.MaSFStatistics",
    "fmmlearn.ood.calibration_groups",
    "fmmlearn.ood.null_share",
    "fmmlearn.ood.report_rows",
    "fmmlearn.ood.sized_fold_fractions",
    "fmmlearn.study.StudySettings",
]
numpydoc_validation_exclude = {r"\._[a-z]", r"\.__[a-z]+__$", *(f"^{name.replace('.', '[.]')}$" for name in NOT_YET_VALIDATED)}

# ---------------------------------------------------------------- gallery (sphinx-gallery)
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    # A benchmark-sized script (minutes of Captum on MiniLM), run by hand; its table is in docs/explainers.md.
    "ignore_pattern": r"captum_leaderboard\.py",
    "within_subsection_order": "FileNameSortKey",
    "doc_module": ("fmmlearn",),
    "backreferences_dir": "api/backreferences",
    "reference_url": {"fmmlearn": None},
    "download_all_examples": False,
    "remove_config_comments": True,
    "plot_gallery": os.environ.get("FMMLEARN_DOCS_GALLERY", "1") != "0",
    "matplotlib_animations": False,
    "show_memory": False,
}

# ---------------------------------------------------------------- theme
html_theme = "pydata_sphinx_theme"
html_title = f"fmmlearn {version}"
html_theme_options = {
    "navbar_end": ["navbar-icon-links"],
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_static_path: list[str] = []
html_show_sourcelink = False

# ---------------------------------------------------------------- references and intersphinx
nitpicky = True

_INVENTORIES = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "pandas": ("https://pandas.pydata.org/docs", None),
    "sklearn": ("https://scikit-learn.org/stable", None),
    "torch": ("https://docs.pytorch.org/docs/stable", None),
    "transformers": ("https://huggingface.co/docs/transformers/main/en", None),
    "matplotlib": ("https://matplotlib.org/stable", None),
    "scipy": ("https://docs.scipy.org/doc/scipy", None),
}
#: Top-level packages whose objects the pages and docstrings name; offline they stay plain code.
EXTERNAL_PACKAGES = ("builtins", "collections", "os", "pathlib", "typing", "numpy", "np", "pandas", "pd", "sklearn",
                     "torch", "transformers", "matplotlib", "scipy", "skorch", "accelerate", "dask", "datasets",
                     "huggingface_hub", "jinja2", "captum", "tokenizers", "safetensors", "joblib", "concurrent",
                     "dataclasses", "abc", "enum", "contextlib", "argparse", "io", "json", "logging", "random",
                     "re", "types", "warnings")


def _online(host: str = "docs.python.org", timeout: float = 3.0) -> bool:
    """Whether the inventories can be fetched; ``FMMLEARN_DOCS_OFFLINE=1`` says no without trying."""
    if os.environ.get("FMMLEARN_DOCS_OFFLINE") == "1":
        return False
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


ONLINE = _online()
intersphinx_mapping = _INVENTORIES if ONLINE else {}
intersphinx_timeout = 10


def _public_modules() -> list[str]:
    """``fmmlearn`` and its public modules and subpackages that declare ``__all__``, in name order."""
    names = ["fmmlearn"]
    for info in pkgutil.iter_modules(fmmlearn.__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"fmmlearn.{info.name}")
            if hasattr(module, "__all__"):
                names.append(module.__name__)
    return names


def public_names() -> dict[str, list[str]]:
    """Each public module and the public names it documents: its ``__all__`` (modules and the version excluded).

    A name that ``fmmlearn`` itself exports is documented there, once; a public module lists it among
    its names with a link to that page (``api.md``).
    """
    out = {}
    for module_name in _public_modules():
        module = importlib.import_module(module_name)
        out[module_name] = [name for name in module.__all__
                            if name != "__version__" and not inspect.ismodule(getattr(module, name))]
    return out


def _canonical() -> dict[int, str]:
    """id(object) -> the one public full name its page has (the top level first, then module order)."""
    pages: dict[int, str] = {}
    for module_name, names in public_names().items():
        module = importlib.import_module(module_name)
        for name in names:
            pages.setdefault(id(getattr(module, name)), f"{module_name}.{name}")
    return pages


def _write_api_pages() -> None:
    """Write ``api/index.rst``: one autosummary table per public module, each object's page once."""
    canonical = _canonical()
    lines = [".. This file is written by docs/conf.py at every build; do not edit.", "", ".. _api:", "",
             "API reference", "=============", "",
             "Every public name of ``fmmlearn`` and of its public modules (their ``__all__``), each with the page",
             "generated from its docstring. A name that the package exports at the top level is documented there",
             "and listed again, with a link, under the module that defines it.", ""]
    for module_name, names in public_names().items():
        module = importlib.import_module(module_name)
        own = [n for n in names if canonical[id(getattr(module, n))] == f"{module_name}.{n}"]
        elsewhere = [n for n in names if n not in own]
        title = f"``{module_name}``"
        summary = (inspect.getdoc(module) or "").split("\n\n")[0].replace("\n", " ")
        lines += [title, "-" * len(title), "", f".. currentmodule:: {module_name}", "", summary, ""]
        if own:
            lines += [".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
            lines += [f"   {n}" for n in sorted(own, key=str.lower)] + [""]
        if elsewhere:
            links = ", ".join(f":obj:`{n} <{canonical[id(getattr(module, n))]}>`" for n in sorted(elsewhere, key=str.lower))
            lines += [f"Also public here (documented where exported first): {links}.", ""]
    target = DOCS / "api" / "index.rst"
    target.parent.mkdir(exist_ok=True)
    text = "\n".join(lines) + "\n"
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")


_write_api_pages()
ALIASES = {}  # filled in setup: every public full name -> the full name of the page documenting it
SHORT = {}  # filled in setup: a public short name ("MaSF", "MaSF.pvalues") -> the pages' full names


def _aliases() -> dict[str, str]:
    canonical = _canonical()
    out = {}
    for module_name, names in public_names().items():
        module = importlib.import_module(module_name)
        for name in names:
            obj = getattr(module, name)
            out[f"{module_name}.{name}"] = canonical[id(obj)]
            defining = getattr(obj, "__module__", None)
            if isinstance(defining, str) and defining.startswith("fmmlearn"):
                out.setdefault(f"{defining}.{getattr(obj, '__qualname__', name)}", canonical[id(obj)])
    return out


def _short_names() -> dict[str, set]:
    out: dict[str, set] = {}
    for full in set(_canonical().values()):
        out.setdefault(full.rpartition(".")[2], set()).add(full)
    return out


def _existing_object(target: str, module: str | None, cls: str | None) -> bool:
    """Whether ``target`` names an fmmlearn object (public or not), as Python would find it from ``module``."""
    for full in (f"{module}.{cls}.{target}" if module and cls else None, f"{module}.{target}" if module else None,
                 target):
        if not full or not full.startswith("fmmlearn"):
            continue
        parts = full.split(".")
        for split in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:split]))
            except ImportError:
                continue
            try:
                for attribute in parts[split:]:
                    obj = getattr(obj, attribute)
                return True
            except AttributeError:
                break
    # A name a docstring uses from its own (private) module, which Sphinx sees under the public one.
    head, _, rest = target.partition(".")
    for name, module in list(sys.modules.items()):
        if name.startswith("fmmlearn") and module is not None and hasattr(module, head):
            obj = getattr(module, head)
            if all(hasattr(obj, part) for part in rest.split(".")) if rest else True:
                return True
    return False


def _candidates(target: str) -> list[str]:
    """Full names of pages that ``target`` (full, aliased, or short) may mean."""
    out = []
    if target in ALIASES:
        out.append(ALIASES[target])
    owner, _, member = target.rpartition(".")
    if owner in ALIASES:
        out.append(f"{ALIASES[owner]}.{member}")
    head, _, rest = target.partition(".")
    if len(SHORT.get(head, ())) == 1:
        (page,) = SHORT[head]
        out.append(f"{page}.{rest}" if rest else page)
    return out


def _resolve_alias(app, env, node, contnode):
    """Resolve a reference that the Python domain did not.

    A public object named under another of its public names (``fmmlearn.ood.MaSF`` for
    ``fmmlearn.MaSF``) or by its short name resolves to its one page.  A name of an fmmlearn object
    that has no page (a private helper) is shown as code; so is, offline, an object of another
    package (no intersphinx inventory).  Anything else (a name that does not exist) stays a warning.
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "").lstrip("~.")
    domain = env.get_domain("py")
    for candidate in _candidates(target):
        new = node.deepcopy()
        new["reftarget"] = candidate
        found = domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], candidate, new, contnode)
        if found is not None:
            return found
    if _existing_object(target, node.get("py:module"), node.get("py:class")):
        return contnode
    if not ONLINE and target.partition(".")[0] in EXTERNAL_PACKAGES:
        return contnode
    return None


def _skip_member(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_*_request`` methods (metadata routing) are not fmmlearn's API."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    ALIASES.update(_aliases())
    SHORT.update(_short_names())
    app.connect("missing-reference", _resolve_alias)
    app.connect("autodoc-skip-member", _skip_member)

"""Every code block of README.md and docs/*.md runs, as a reader would run it, on a tiny model.

One test per fenced block, with the id ``page:line`` of its opening fence;
blocks are discovered when this module is collected, so new pages and blocks
are covered without editing it.

* ``python`` blocks run in one namespace per page, in order (running a block
  first runs the page's earlier blocks, so ``-k`` selections work), in a
  temporary working directory per page.  The namespace starts with the
  variables the docs assume (:data:`READER_VARIABLES`), built from the bundled
  tweets at toy sizes.
* ``bash``/``sh``/``console`` blocks: ``fmmlearn ...`` and ``python -m
  fmmlearn ...`` lines run through :func:`fmmlearn.cli.main` (a ``| jq``
  filter is checked against the JSON printed); the other commands are checked,
  not run (:data:`CHECKED_COMMANDS`).
* ``text`` (and other output) blocks are not run; an unlabelled fence fails.

What is substituted, so that the pages run in seconds: the bundled
``"minilm"`` resolves to the tiny random BERT of ``tests/conftest.py``;
:class:`~fmmlearn.FaithfulTextClassifier` defaults to a short, fast fit
(:data:`TINY_FIT_DEFAULTS`, a default only: values a block passes are kept);
``fmmlearn demo`` runs its own measures on fewer tweets
(:data:`TINY_DEMO_SIZES`).  The doc text is never edited.

Blocks that cannot run here are listed in :data:`NOT_RUN` with the reason;
they are still compiled, their ``fmmlearn`` names resolved and their calls of
fmmlearn functions bound to the signatures, and every other name they use must
be defined earlier on their page.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import re
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from helpers.docs import (ROOT, CodeBlock, bound_names, check_accelerate_launch, check_ci_runs,
                          check_defined_names, check_jq_filter, check_pip_install, check_python_names,
                          check_script_arguments, check_signature_block, code_blocks, doc_pages, is_signature_block,
                          parse_fmmlearn, shell_lines)

BLOCKS = [block for page in doc_pages() for block in code_blocks(page)]
EXECUTABLE = [block for block in BLOCKS if block.kind in ("python", "shell")]

#: Blocks that cannot run here: (page, a snippet that occurs in that block only) -> why.
NOT_RUN = {
    ("docs/classifier.md", 'load_paper_dataset("mrpc")'):
        "downloads MRPC from the Hugging Face hub and fine-tunes RoBERTa-base (hub weights)",
    ("docs/classifier.md", "upload_folder("):
        "publishes a saved model to the Hugging Face Hub (network and a Hub account)",
    ("docs/datasets.md", '"mimic-a"'):
        "reads MIMIC-III exports, credentialed PhysioNet data the user exports",
    ("docs/datasets.md", 'source="facebook"'):
        "downloads bAbI en-10k from the Hugging Face hub and reads Facebook's bAbI text files",
    ("docs/decoders.md", 'model="Qwen/Qwen2.5-0.5B"'):
        "downloads Qwen2.5-0.5B (about 1 GB of hub weights) and fine-tunes it with LoRA",
    ("docs/erasure.md", "from ferret import Benchmark"):
        "needs ferret (ferret-xai), which is not a dependency of fmmlearn or of its test extras",
    ("docs/scaling.md", 'model="roberta-large"'):
        "fine-tunes RoBERTa-large (hub weights) in bf16 on a GPU",
    ("docs/scaling.md", "# train.py"):
        "the script `accelerate launch` starts on 4 GPUs; fine-tunes RoBERTa-base (hub weights)",
    ("docs/scaling.md", 'Client("tcp://scheduler:8786")'):
        "connects to a Dask scheduler at tcp://scheduler:8786",
    ("docs/scaling.md", 'cache_dir="/shared/study"'):
        "runs on the Dask cluster of the block before, writing to /shared/study",
    ("docs/scaling.md", "--dask-scheduler tcp://scheduler:8786"):
        "connects to a Dask scheduler at tcp://scheduler:8786",
}

#: Shell commands that are checked, never run (by the first words of the command): how, and why.
CHECKED_COMMANDS = {
    "pip install": "installs packages: every requirement parses and fmmlearn's extras exist in pyproject.toml",
    "accelerate launch": "starts processes on several GPUs: Accelerate's parser accepts the options, the "
                         "fmmlearn parser the arguments of -m fmmlearn, and a script is a block of the page",
    "python -m pytest": "the test suite itself: it must be the command .ci/run runs, with the same environment",
    "python -m sphinx": "builds the site (minutes: it runs the gallery; tests/docs/test_docs_site.py builds it with the "
                        "same options): the options are the warning-free, nitpicky build of docs/ (check_sphinx_build)",
    "python SCRIPT.py": "benchmarks run for minutes on the bundled MiniLM: the script's own parser accepts the "
                        "arguments",
}

#: Toy split sizes of the bundled tweets behind the docs' variables.
N_TRAIN, N_VALID, N_TEST = 48, 64, 20
#: FaithfulTextClassifier defaults while the docs run: a short fit the tiny model learns something from.
TINY_FIT_DEFAULTS = {"max_epochs": 2, "learning_rate": 3e-3, "warmup_ratio": 0.0}
#: ``fmmlearn demo`` split and subset sizes while the docs run (each preset keeps its measures).
TINY_DEMO_SIZES = {"n_train": 60, "n_valid": 30, "n_test": 12, "n_random": 2, "costly_examples": 6,
                   "budget": 5.0}

#: The variables the docs use without defining them, and what they hold here.
READER_VARIABLES = {
    "X_train, y_train": f"{N_TRAIN} training tweets and their labels (negative / neutral / positive)",
    "texts, labels": "the same training tweets and labels",
    "X_valid, y_valid, X_val, y_val, X_calib": f"{N_VALID} other tweets (validation, MaSF calibration)",
    "X_test, y_test": f"{N_TEST} test tweets",
    "X, y, y_true": "the test tweets and their labels again (any labelled texts)",
    "X_few": "three test tweets",
    "clf, masked": "a tiny classifier fine-tuned with masking (max_masking_ratio=1) on X_train",
    "plain": "the same fine-tuned without masking (max_masking_ratio=0)",
    "y_pred": "clf.predict(X)",
    "calibration_features": "MaSF features of X_calib masked like clf's training batches, (n, layers, hidden)",
    "masked_test_features": "MaSF features of X_test masked like clf's training batches",
}

pytestmark = [
    # A tiny random model fitted for two epochs on 48 tweets may predict one class: expected here.
    pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.DegenerateModelWarning"),
    pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.FaithfulnessWarning"),
    pytest.mark.filterwarnings("ignore::fmmlearn.exceptions.TruncationWarning"),
    pytest.mark.filterwarnings("ignore:The level-3 fold has only:UserWarning"),
]


def _not_run_reason(block: CodeBlock) -> str | None:
    return next((reason for (page, snippet), reason in NOT_RUN.items()
                 if page == block.page and snippet in block.source), None)


# --------------------------------------------------------------------------- the reader's machine


@pytest.fixture(scope="module")
def reader_data():
    from sklearn.model_selection import train_test_split

    from fmmlearn.datasets import load_tweet_sentiment

    tweets = load_tweet_sentiment(n_samples=N_TRAIN + N_VALID + N_TEST, random_state=0)
    X_train, X_rest, y_train, y_rest = train_test_split(list(tweets.data), tweets.target, train_size=N_TRAIN,
                                                        stratify=tweets.target, random_state=0)
    X_valid, X_test, y_valid, y_test = train_test_split(X_rest, y_rest, train_size=N_VALID, stratify=y_rest,
                                                        random_state=0)
    return {"X_train": X_train, "y_train": y_train, "X_valid": X_valid, "y_valid": y_valid,
            "X_test": X_test, "y_test": y_test}


@pytest.fixture(scope="module")
def reader_variables(reader_data, tiny_model_dir):
    """The namespace every page starts from (:data:`READER_VARIABLES`)."""
    from fmmlearn import FaithfulTextClassifier
    from fmmlearn.ood import calibration_features, hidden_state_features, mask_like_training

    d = reader_data
    fit = {"model": tiny_model_dir, "device": "cpu", "precision": "fp32", "random_state": 0, **TINY_FIT_DEFAULTS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = FaithfulTextClassifier(max_masking_ratio=0.0, **fit).fit(d["X_train"], d["y_train"])
        masked = FaithfulTextClassifier(max_masking_ratio=1.0, **fit).fit(d["X_train"], d["y_train"])
        repeated, masked_ids = mask_like_training(masked, masked.encode(d["X_test"]), random_state=0)
        features = {"calibration_features": calibration_features(masked, d["X_valid"], random_state=0),
                    "masked_test_features": hidden_state_features(masked, encoding=repeated, input_ids=masked_ids)}
    return {**d, "texts": d["X_train"], "labels": d["y_train"],
            "X_val": d["X_valid"], "y_val": d["y_valid"], "X_calib": d["X_valid"],
            "X": d["X_test"], "y": d["y_test"], "y_true": d["y_test"], "X_few": d["X_test"][:3],
            "clf": masked, "masked": masked, "plain": plain, "y_pred": masked.predict(d["X_test"]), **features}


@dataclass
class Page:
    """A reader's session on one page.

    Its namespace and working directory; the names the page's blocks that are not run define
    (``declared``); the blocks that ran and those that failed.
    """

    directory: Path
    namespace: dict
    declared: set = field(default_factory=set)
    done: set = field(default_factory=set)
    failed: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def pages():
    """The pages' sessions of this module's run, by page."""
    return {}


@pytest.fixture
def page_of(pages, tmp_path_factory, reader_variables, reader_data, tiny_model_dir):
    """``page_of(block)``: the page's session, created on first use with the data files the docs read."""

    def get(block: CodeBlock) -> Page:
        if block.page not in pages:
            directory = tmp_path_factory.mktemp(Path(block.page).stem)
            d = reader_data
            for name, X, y in (("train", d["X_train"], d["y_train"]), ("valid", d["X_valid"], d["y_valid"]),
                               ("test", d["X_test"], d["y_test"])):
                pd.DataFrame({"text": X, "label": y}).to_csv(directory / f"{name}.csv", index=False)
            (directory / "my-encoder").symlink_to(tiny_model_dir, target_is_directory=True)
            if block.page == "docs/decoders.md":  # a tiny random GPT-2 (tests/helpers/decoders.py)
                from helpers.decoders import build_decoder

                build_decoder("gpt2", directory / "my-decoder")
            namespace = {"__name__": "__main__", **copy.deepcopy(reader_variables)}
            pages[block.page] = Page(directory, namespace)
        return pages[block.page]

    return get


@pytest.fixture
def tiny_runtime(monkeypatch, tiny_model_dir):
    """The substitutions that make the docs run in seconds (see the module docstring)."""
    import matplotlib

    import fmmlearn.cli
    import fmmlearn.modeling._loading
    from fmmlearn import FaithfulTextClassifier

    matplotlib.use("Agg")  # headless: figures go to the files the docs name

    resolve = fmmlearn.modeling.resolve_model_path
    monkeypatch.setattr(fmmlearn.modeling._loading, "resolve_model_path",
                        lambda model: tiny_model_dir if _is_bundled_minilm(model) else resolve(model))
    init = FaithfulTextClassifier.__init__
    monkeypatch.setattr(init, "__kwdefaults__", {**init.__kwdefaults__, **TINY_FIT_DEFAULTS})
    for name, preset in fmmlearn.cli.DEMO_PRESETS.items():
        monkeypatch.setitem(fmmlearn.cli.DEMO_PRESETS, name, {**preset, **TINY_DEMO_SIZES})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _is_bundled_minilm(model) -> bool:
    return isinstance(model, (str, os.PathLike)) and os.fspath(model) == "minilm"


# --------------------------------------------------------------------------- running blocks


def _run_python(block: CodeBlock, page: Page) -> None:
    if is_signature_block(block.source):
        check_signature_block(block.source, block.id)
        return
    check_python_names(block, page.namespace)
    code = _at_page_lines(compile(block.source, str(ROOT / block.page), "exec"), block.line)
    if _not_run_reason(block):
        check_defined_names(block, set(page.namespace) | page.declared)
        page.declared |= bound_names(block)  # what a reader who ran it would have
        return
    try:
        exec(code, page.namespace)
    finally:
        import matplotlib.pyplot as plt

        plt.close("all")


def _at_page_lines(code: types.CodeType, offset: int) -> types.CodeType:
    """``code`` with its line numbers moved down by ``offset``: tracebacks show the page's own lines."""
    consts = tuple(_at_page_lines(c, offset) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_firstlineno=code.co_firstlineno + offset, co_consts=consts)


def _run_fmmlearn(args: tuple[str, ...], where: str) -> str:
    from fmmlearn.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exc:  # argparse
            status = exc.code
    assert status == 0, f"{where}: fmmlearn {' '.join(args)} exited with {status}:\n{err.getvalue()[-3000:]}"
    return out.getvalue()


def _fmmlearn_args(argv: tuple[str, ...]) -> tuple[str, ...] | None:
    if argv[0] == "fmmlearn":
        return argv[1:]
    if argv[0] in ("python", "python3") and argv[1:3] == ("-m", "fmmlearn"):
        return argv[3:]
    return None


def _run_shell(block: CodeBlock, page: Page, monkeypatch) -> None:
    page_blocks = [b for b in BLOCKS if b.page == block.page]
    for line in shell_lines(block):
        where = f"{block.page}:{line.line}"
        for pipeline in line.pipelines:
            command, rest = pipeline[0], pipeline[1:]
            argv, args = command.argv, _fmmlearn_args(command.argv)
            for name, value in command.env:
                monkeypatch.setenv(name, value)
            if args is not None:
                if _not_run_reason(block):
                    parse_fmmlearn(args, where)
                    assert not rest, f"{where}: a pipe after a command that is not run"
                    continue
                output = _run_fmmlearn(args, where)
                for stage in rest:
                    assert stage.argv[0] == "jq" and len(stage.argv) == 2, (
                        f"{where}: the docs test pipes fmmlearn's output into `jq FILTER` only, not {stage.argv}")
                    check_jq_filter(stage.argv[1], output, where)
                continue
            assert not rest, f"{where}: the docs test supports pipes after fmmlearn commands only"
            if argv[:2] == ("pip", "install") or argv[:4] == ("python", "-m", "pip", "install"):
                check_pip_install(argv, where)
            elif argv[:2] == ("accelerate", "launch"):
                check_accelerate_launch(argv, where, page_blocks)
            elif argv[0] in ("python", "python3") and argv[1:3] == ("-m", "sphinx"):
                check_sphinx_build(argv, where)
            elif argv[0] in ("python", "python3") and argv[1:3] == ("-m", "pytest"):
                check_ci_runs(command, where)
            elif argv[0] in ("python", "python3") and len(argv) > 1 and argv[1].endswith(".py"):
                check_script_arguments(argv, where)
            else:
                raise AssertionError(f"{where}: the docs test can neither run nor check {' '.join(argv)!r}; "
                                     "add it to tests/docs/test_docs.py")


#: The options of the documented site build: warnings are errors, every reference resolves (nitpicky).
SPHINX_BUILD_OPTIONS = ("-W", "-n", "--keep-going")


def check_sphinx_build(argv, where: str) -> None:
    """A documented ``python -m sphinx`` line builds HTML from docs/ with the options the site test uses."""
    missing = [option for option in SPHINX_BUILD_OPTIONS if option not in argv]
    assert not missing, f"{where}: the site build must run with {missing} (tests/docs/test_docs_site.py does)"
    assert "-b" in argv and argv[argv.index("-b") + 1] == "html", f"{where}: the site is built with -b html"
    positional = [a for i, a in enumerate(argv[3:], 3) if not a.startswith("-") and argv[i - 1] != "-b"]
    assert len(positional) == 2 and (ROOT / positional[0] / "conf.py").is_file(), (
        f"{where}: expected SOURCE (a directory with conf.py) and OUTPUT, got {positional}")


def _run(block: CodeBlock, page: Page, monkeypatch) -> None:
    if block.kind == "python":
        _run_python(block, page)
    else:
        _run_shell(block, page, monkeypatch)


@pytest.mark.usefixtures("tiny_runtime")
@pytest.mark.parametrize("block", EXECUTABLE, ids=[block.id for block in EXECUTABLE])
def test_doc_block_runs(block, page_of, monkeypatch):
    page = page_of(block)
    monkeypatch.chdir(page.directory)
    # A reader runs a page top to bottom: catch up on the earlier blocks a selection (-k) skipped.
    for earlier in [b for b in EXECUTABLE if b.page == block.page and b.line < block.line]:
        if earlier.id not in page.done:
            page.done.add(earlier.id)
            try:
                _run(earlier, page, monkeypatch)
            except Exception as exc:  # reported by its own test; named below if this block fails too
                page.failed[earlier.id] = f"{type(exc).__name__}: {exc}"
    page.done.add(block.id)
    try:
        _run(block, page, monkeypatch)
    except Exception as exc:
        page.failed[block.id] = f"{type(exc).__name__}: {exc}"
        earlier_failures = {k: v for k, v in page.failed.items() if k != block.id}
        if earlier_failures:
            raise AssertionError(f"{block.id} failed after earlier blocks of the page failed: "
                                 f"{earlier_failures}") from exc
        raise


# --------------------------------------------------------------------------- the collection itself


def test_every_not_run_entry_names_exactly_one_block():
    for (page, snippet), reason in NOT_RUN.items():
        matches = [b.id for b in BLOCKS if b.page == page and snippet in b.source]
        assert len(matches) == 1, f"NOT_RUN entry ({page!r}, {snippet!r}) ({reason}) matches {matches or 'no block'}"


def test_every_fence_says_what_it_holds():
    unlabelled = [f"{b.id} ({b.language or 'no language'})" for b in BLOCKS if b.kind == "unknown"]
    assert not unlabelled, ("label these fences with python, bash or console (run or checked) or text (output, "
                            f"not run): {unlabelled}")


def test_the_readme_and_the_quickstart_have_blocks_that_run():
    for page in ("README.md", "docs/quickstart.md"):
        kinds = {b.kind for b in EXECUTABLE if b.page == page and _not_run_reason(b) is None}
        assert {"python", "shell"} <= kinds, f"{page}: {kinds}"


# --------------------------------------------------------------------------- the checks can fail


def _block(source: str, language: str = "python") -> CodeBlock:
    return CodeBlock("docs/example.md", 10, language, source)


@pytest.mark.parametrize("source, message", [
    ("from fmmlearn import FaithfulTextClassifier\nFaithfulTextClassifier(max_epoch=3)\n",
     "docs/example.md:12: FaithfulTextClassifier(...) does not fit: got an unexpected keyword argument 'max_epoch'"),
    ("from fmmlearn.faithfulness import faithfulness_curves\n", "docs/example.md:11: fmmlearn.faithfulness has no name"),
    ("import fmmlearn\nfmmlearn.study.Study\n", "docs/example.md:12: fmmlearn.study has no attribute 'Study'"),
    ("from fmmlearn import FaithfulTextClassifier\nFaithfulTextClassifier.lod('dir')\n", "has no attribute 'lod'"),
])
def test_a_wrong_fmmlearn_name_or_call_fails_with_its_page_line(source, message):
    with pytest.raises(AssertionError, match=re.escape(message)):
        check_python_names(_block(source))


def test_right_fmmlearn_names_and_calls_pass():
    check_python_names(_block("import fmmlearn\nfrom fmmlearn import FaithfulTextClassifier\n"
                              "fmmlearn.study.FaithfulnessStudy(methods=['rand'])\n"
                              "FaithfulTextClassifier.load('dir', device='cpu')\n"))


def test_a_name_no_block_of_the_page_defines_fails():
    block = _block("import pandas as pd\nboth = pd.concat([e, f])\n")
    with pytest.raises(AssertionError, match=r"docs/example.md:12: 'e' is used but never defined"):
        check_defined_names(block, {"f"})
    check_defined_names(block, {"e", "f"})


def test_a_stale_signature_block_fails():
    stale = "from fmmlearn.explanation import explanation_html\n\nexplanation_html(explanations, *, path=None) -> str\n"
    assert is_signature_block(stale)
    with pytest.raises(AssertionError, match="the documented signature of explanation_html"):
        check_signature_block(stale, "docs/example.md:10")
    assert not is_signature_block("explanation_html(frame, path='x.html')\n")  # a call is code


@pytest.mark.parametrize("argv, message", [
    (("pip", "install", "fmmlearn[gpu]"), r"the extra\(s\) \['gpu'\] are not in pyproject.toml"),
    (("pip", "install", "-e", ".[data,plots]"), r"\['plots'\]"),
    (("pip", "install", "fmmlearn[data"), "is not a valid requirement"),
])
def test_pip_install_lines_must_name_existing_extras(argv, message):
    with pytest.raises(AssertionError, match=message):
        check_pip_install(argv, "docs/example.md:11")
    check_pip_install(("pip", "install", "torch==2.13.0"), "docs/example.md:11")


def test_launch_and_script_lines_must_parse():
    with pytest.raises(AssertionError, match="accelerate launch rejects"):
        check_accelerate_launch(("accelerate", "launch", "--num_procs", "2", "train.py"), "w", [])
    with pytest.raises(AssertionError, match="is neither a file of the repository nor a block of this page"):
        check_accelerate_launch(("accelerate", "launch", "train.py"), "w", [])
    script = _block("# train.py\nprint('hi')\n")
    assert check_accelerate_launch(("accelerate", "launch", "train.py"), "w", [script]) is script
    with pytest.raises(AssertionError, match="fmmlearn rejects"):
        check_accelerate_launch(("accelerate", "launch", "-m", "fmmlearn", "fit", "--epochs", "2"), "w", [])
    with pytest.raises(AssertionError, match="fit_speed.py rejects its arguments"):
        check_script_arguments(("python", "benchmarks/fit_speed.py", "--n-trains", "3"), "w")


def test_the_test_command_must_be_what_ci_runs():
    from helpers.docs import Command

    with pytest.raises(AssertionError, match="does not run 'python -m pytest -x'"):
        check_ci_runs(Command((), ("python", "-m", "pytest", "-x")), "w")
    with pytest.raises(AssertionError, match="does not export HF_HUB_OFFLINE=0"):
        check_ci_runs(Command((("HF_HUB_OFFLINE", "0"),), ("python", "-m", "pytest", "-q")), "w")


def test_a_sphinx_line_must_be_the_warning_free_build():
    check_sphinx_build(("python", "-m", "sphinx", "-W", "--keep-going", "-n", "-b", "html", "docs", "docs/_build/html"),
                       "w")
    with pytest.raises(AssertionError, match=r"must run with \['-n'\]"):
        check_sphinx_build(("python", "-m", "sphinx", "-W", "--keep-going", "-b", "html", "docs", "out"), "w")
    with pytest.raises(AssertionError, match="expected SOURCE"):
        check_sphinx_build(("python", "-m", "sphinx", "-W", "--keep-going", "-n", "-b", "html", "doc", "out"), "w")


def test_a_jq_filter_must_find_its_keys_in_the_json():
    check_jq_filter(".summary[] | {method, racu}", '{"summary": [{"method": "loo-sign", "racu": null}]}', "w")
    with pytest.raises(AssertionError, match="the JSON rows have no key 'racu'"):
        check_jq_filter(".summary[] | {method, racu}", '{"summary": [{"method": "loo-sign"}]}', "w")
    with pytest.raises(AssertionError, match="has no key 'summary'"):
        check_jq_filter(".summary[] | {method}", '{"curves": []}', "w")


def test_shell_lines_split_chains_pipes_assignments_and_console_prompts():
    block = _block("# a comment\nA=1 fmmlearn info && pip install -e \".[test]\"  # why\n"
                   "fmmlearn faithfulness m/ t.csv -o c.csv --json | jq '.summary[] | {method}'\n")
    first, second = shell_lines(block)
    assert first.line == 12 and [[c.argv for c in p] for p in first.pipelines] == [
        [("fmmlearn", "info")], [("pip", "install", "-e", ".[test]")]]
    assert first.pipelines[0][0].env == (("A", "1"),)
    assert [c.argv[0] for c in second.pipelines[0]] == ["fmmlearn", "jq"]
    console = shell_lines(_block("$ fmmlearn fit train.csv -o model/\nerror: column(s) ...\n", "console"))
    assert [line.text for line in console] == ["fmmlearn fit train.csv -o model/"]
    with pytest.raises(ValueError, match="shell syntax '>' is not supported"):
        shell_lines(_block("fmmlearn info > info.txt\n", "bash"))


def test_code_blocks_are_found_in_list_items_and_an_unclosed_fence_fails(tmp_path):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("# Title\n\n* an item:\n\n  ```python\n  x = 1\n  if x:\n      y = 2\n  ```\n\n"
                    "````text\n```\n````\n", encoding="utf-8")
    assert [(b.id, b.kind, b.source) for b in code_blocks(page, tmp_path)] == [
        ("docs/page.md:5", "python", "x = 1\nif x:\n    y = 2\n"), ("docs/page.md:11", "output", "```\n")]
    page.write_text("```bash\nfmmlearn info\n", encoding="utf-8")
    with pytest.raises(ValueError, match="docs/page.md:1: the code fence ``` is never closed"):
        code_blocks(page, tmp_path)

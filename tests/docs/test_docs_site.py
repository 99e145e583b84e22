"""The documentation site, built once as ``docs/building.md`` says and read as a user reads it.

The module builds the site (``python -m sphinx -W --keep-going -n -b html``: warnings are errors,
every reference must resolve, numpydoc validation runs, the gallery's examples are executed) from a
copy of ``docs/`` and ``examples/`` into a temporary directory, offline (``FMMLEARN_DOCS_OFFLINE=1``:
no intersphinx, and no warning for it), then checks the pages in headless Chromium: the
``FaithfulTextClassifier`` page lists every constructor parameter, the gallery pages show their
figures, and no internal link of any page is broken.  Building runs the gallery, so this is slow
(minutes on 2 CPU cores).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from helpers.browser import dump_dom, require_chromium
from helpers.docs import ROOT

pytestmark = pytest.mark.slow

pytest.importorskip("sphinx", reason="the docs extra (pip install -e '.[docs]') is not installed")
for _package in ("pydata_sphinx_theme", "myst_parser", "numpydoc", "sphinx_gallery"):
    pytest.importorskip(_package, reason="the docs extra (pip install -e '.[docs]') is not installed")

GALLERY = "auto_examples"


# --------------------------------------------------------------------------- reading HTML


class _Elements(HTMLParser):
    """Every element's tag, attributes and the text inside it (for the few checks below)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attributes = {k: (v or "") for k, v in attrs}
        self.elements.append((tag, attributes))
        for key in ("id", "name"):
            if attributes.get(key):
                self.ids.add(attributes[key])


def parse_html(text: str) -> _Elements:
    parser = _Elements()
    parser.feed(text)
    return parser


def _internal(url: str) -> bool:
    parts = urlsplit(url)
    return not parts.scheme and not parts.netloc and not url.startswith(("mailto:", "javascript:", "data:"))


def site_pages(site: Path) -> list[Path]:
    """The site's pages: its HTML files but the theme's static templates (``_static/``)."""
    return sorted(path for path in site.rglob("*.html") if "_static" not in path.relative_to(site).parts)


def broken_links(site: Path) -> list[str]:
    """``page -> link`` for every internal ``href``/``src`` of every page whose file or anchor is missing."""
    pages = {path: parse_html(path.read_text(encoding="utf-8", errors="replace")) for path in site_pages(site)}
    broken = []
    for page, parsed in pages.items():
        for tag, attributes in parsed.elements:
            for key in ("href", "src"):
                url = attributes.get(key)
                if not url or not _internal(url):
                    continue
                parts = urlsplit(url)
                target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
                if target.is_dir():
                    target = target / "index.html"
                where = f"{page.relative_to(site)} -> {url}"
                if not target.is_file():
                    broken.append(f"{where} (no file)")
                elif parts.fragment and target.suffix == ".html" and target in pages \
                        and unquote(parts.fragment) not in pages[target].ids:
                    broken.append(f"{where} (no anchor)")
    return broken


def gallery_figures(page: Path, dom: str) -> list[Path]:
    """The files of the gallery figures (``sphx-glr-*-img`` images) a rendered example page shows."""
    files = []
    for tag, attributes in parse_html(dom).elements:
        classes = attributes.get("class", "").split()
        if tag == "img" and {"sphx-glr-single-img", "sphx-glr-multi-img"} & set(classes):
            src = attributes.get("src", "")
            path = Path(unquote(urlsplit(src).path)) if src.startswith("file:") else page.parent / unquote(src)
            files.append(path)
    return files


def documented_parameters(dom: str) -> list[str]:
    """The names in the first ``Parameters`` field list of an API page (numpydoc's ``<dt><strong>``)."""
    start = dom.find(">Parameters<")
    assert start >= 0, "the page has no Parameters section"
    end = dom.find('<dt class="field-even">', start)
    section = dom[start:end if end > 0 else len(dom)]
    names = []
    parser = _Strong()
    parser.feed(section)
    for name in parser.strong:
        names.extend(part.strip().lstrip("*") for part in name.split(","))
    return names


class _Strong(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.strong, self._open = [], False

    def handle_starttag(self, tag, attrs):
        self._open = self._open or tag == "strong"

    def handle_endtag(self, tag):
        if tag == "strong":
            self._open = False

    def handle_data(self, data):
        if self._open:
            self.strong.append(data)


# --------------------------------------------------------------------------- the build


def _conf():
    spec = importlib.util.spec_from_file_location("fmmlearn_docs_conf", ROOT / "docs" / "conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built as docs/building.md says, from a copy of the sources; (html directory, build log)."""
    base = tmp_path_factory.mktemp("docs-site")
    source = base / "src"
    ignore = shutil.ignore_patterns("_build", "api", GALLERY, "__pycache__", "sg_execution_times.rst")
    shutil.copytree(ROOT / "docs", source / "docs", ignore=ignore)
    shutil.copytree(ROOT / "examples", source / "examples", ignore=ignore)
    # docs/reproduction.md shows the figures the reproduction script committed there
    shutil.copytree(ROOT / "benchmarks" / "results" / "reproduce", source / "benchmarks" / "results" / "reproduce")
    html, warnings_file = base / "html", base / "warnings.txt"
    env = {**os.environ, "FMMLEARN_DOCS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-b", "html",
                             "-w", str(warnings_file), str(source / "docs"), str(html)],
                            cwd=source, env=env, capture_output=True, text=True, timeout=3600, check=False)
    log = result.stdout[-5000:] + result.stderr[-20000:]
    warnings = warnings_file.read_text(encoding="utf-8") if warnings_file.is_file() else ""
    return {"html": html, "returncode": result.returncode, "log": log, "warnings": warnings}


def test_the_site_builds_without_a_warning(site):
    assert site["returncode"] == 0 and not site["warnings"].strip(), (
        f"sphinx exit {site['returncode']}; warnings:\n{site['warnings'][-20000:]}\nlog:\n{site['log']}")


def test_every_public_name_has_an_api_page(site):
    conf = _conf()
    pages = set(conf._canonical().values())
    assert len(pages) > 100
    missing = sorted(name for name in pages if not (site["html"] / "api" / "generated" / f"{name}.html").is_file())
    assert not missing, f"public names without an API page: {missing}"
    import fmmlearn

    assert {f"fmmlearn.{name}" for name in fmmlearn.__all__ if name != "__version__"} <= pages


def test_the_classifier_page_lists_every_constructor_parameter(site):
    require_chromium()
    from fmmlearn import FaithfulTextClassifier

    page = site["html"] / "api" / "generated" / "fmmlearn.FaithfulTextClassifier.html"
    documented = documented_parameters(dump_dom(page))
    expected = list(inspect.signature(FaithfulTextClassifier).parameters)
    assert [name for name in expected if name not in documented] == [], documented


def test_gallery_pages_show_their_figures_and_offer_a_notebook(site):
    require_chromium()
    examples = sorted(path.stem for path in (ROOT / "examples").glob("plot_*.py"))
    assert len(examples) >= 6
    for name in examples:
        page = site["html"] / GALLERY / f"{name}.html"
        dom = dump_dom(page)
        figures = gallery_figures(page, dom)
        assert figures, f"{name}: the page shows no figure"
        for figure in figures:
            assert figure.is_file() and figure.stat().st_size > 1000, f"{name}: {figure} is missing or empty"
        notebooks = [a.get("href", "") for tag, a in parse_html(dom).elements if tag == "a"
                     and a.get("href", "").endswith(f"{name}.ipynb")]
        assert notebooks, f"{name}: no notebook to download"


def test_api_pages_list_the_examples_that_use_them(site):
    page = (site["html"] / "api" / "generated" / "fmmlearn.FaithfulTextClassifier.html").read_text(encoding="utf-8")
    assert f"{GALLERY}/plot_explain_tweets.html" in page
    curve = (site["html"] / "api" / "generated" / "fmmlearn.racu.html").read_text(encoding="utf-8")
    assert f"{GALLERY}/plot_faithfulness_curve.html" in curve


def test_no_internal_link_is_broken(site):
    pages = site_pages(site["html"])
    assert len(pages) > 200
    broken = broken_links(site["html"])
    assert not broken, f"{len(broken)} broken internal link(s): {broken[:30]}"


# --------------------------------------------------------------------------- the checks can fail


def test_a_missing_file_or_anchor_is_a_broken_link(tmp_path):
    (tmp_path / "a.html").write_text('<a href="b.html#there">b</a><a href="c.html">c</a>'
                                     '<a href="https://example.org/x">x</a><img src="i.png">', encoding="utf-8")
    (tmp_path / "b.html").write_text('<h1 id="here">b</h1>', encoding="utf-8")
    assert broken_links(tmp_path) == ["a.html -> b.html#there (no anchor)", "a.html -> c.html (no file)",
                                      "a.html -> i.png (no file)"]
    (tmp_path / "b.html").write_text('<h1 id="there">b</h1>', encoding="utf-8")
    (tmp_path / "c.html").write_text("", encoding="utf-8")
    (tmp_path / "i.png").write_bytes(b"png")
    assert broken_links(tmp_path) == []


def test_parameters_are_read_from_the_field_list():
    dom = ('<dl class="field-list"><dt class="field-odd">Parameters<span>:</span></dt><dd><dl>'
           '<dt><strong>model</strong><span>str</span></dt><dd>x</dd><dt><strong>a, b</strong></dt>'
           '<dt><strong>**kwargs</strong></dt></dl></dd><dt class="field-even">Returns</dt><dd><dl>'
           '<dt><strong>out</strong></dt></dl></dd></dl>')
    assert documented_parameters(dom) == ["model", "a", "b", "kwargs"]

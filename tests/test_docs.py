"""The documentation builds without warnings, documents every public name and runs its examples.

The build is ``make docs``'s: Sphinx with ``-W --keep-going``, so a broken reference, a
numpydoc format error or a failing gallery example fails it. It takes about a minute on two
cores (the examples about 20 s of it), once per test session: the module's tests share one
worker under pytest-xdist (``tests/xdist_scopes.py``). It builds a copy of ``docs/``, so that the
pages it generates (the API reference, the gallery) are written beside the copy, in a
temporary folder, never into the checkout. Without Sphinx installed
(``pip install -e ".[docs]"``; ``make test`` installs it) the tests skip, except under CI,
where they fail.
"""

import html
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOCS_PACKAGES = ("sphinx", "numpydoc", "sphinx_gallery", "pydata_sphinx_theme")
#: What a build writes into its source folder.
GENERATED = ("_build", "api", "auto_examples", "sg_execution_times.rst")


def _api_pages():
    spec = importlib.util.spec_from_file_location("api_pages", DOCS / "api_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


api_pages = _api_pages()


def _require_docs_packages():
    missing = [name for name in DOCS_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        message = (
            f"building the docs needs {', '.join(missing)}: "
            'pip install -e ".[docs]" (make test and make docs install it)'
        )
        if os.environ.get("CI"):
            pytest.fail(f"CI needs the docs extra: {message}")
        pytest.skip(message)


@pytest.fixture(scope="session")
def built_docs(tmp_path_factory, fashion_mnist):
    """Build the site into a temporary folder; return the HTML folder.

    The Fashion-MNIST example needs the data set, hence the ``fashion_mnist`` fixture (it
    skips locally without the data, and fails under CI). The examples run: the copy holds
    no output of an earlier build.
    """
    _require_docs_packages()
    out = tmp_path_factory.mktemp("docs")
    source = _source_copy(out / "source")
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-q",
        "-b",
        "html",
        "-d",
        str(out / "doctrees"),
        str(source),
        str(out / "html"),
    ]
    path = os.environ.get("PYTHONPATH")
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
        "PYTHONPATH": os.pathsep.join([str(ROOT), path]) if path else str(ROOT),
    }
    checkout = _files([DOCS, ROOT / "examples"])
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"the docs build failed:\n{log[-20000:]}"
    assert _files([DOCS, ROOT / "examples"]) == checkout, "the build wrote into the checkout"
    assert "WARNING" not in log and "ERROR" not in log, log
    return out / "html"


def _source_copy(folder):
    """Copy ``docs/`` without what builds generate into ``folder``, beside links to the
    checkout's other top-level files and folders; return the copy of ``docs/``.

    The configuration finds the package, the examples and the committed reports beside
    ``docs/``, as in the checkout; the gallery runs each example in the folder its link
    resolves to, the checkout's ``examples/``, where an example finds the repository's
    files.
    """
    shutil.copytree(DOCS, folder / "docs", ignore=shutil.ignore_patterns(*GENERATED))
    for entry in ROOT.iterdir():
        if entry.name != "docs" and not entry.name.startswith("."):
            (folder / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    return folder / "docs"


def _files(folders):
    """Every file under ``folders``, with the time it was last written."""
    return {path: path.stat().st_mtime_ns for folder in folders for path in folder.rglob("*")}


def _exported():
    modules = api_pages.public_modules()
    homes = api_pages.home_modules(modules)
    return [
        (module.__name__, name, homes[(module.__name__, name)])
        for module in modules
        for name in module.__all__
    ]


def test_the_public_modules_are_found():
    names = {module.__name__ for module in api_pages.public_modules()}
    assert {
        "sklearn_calib",
        "sklearn_calib.calibrators",
        "sklearn_calib.metrics",
        "sklearn_calib.scoring",
        "sklearn_calib.losses",
        "sklearn_calib.estimators",
        "sklearn_calib.persistence",
    } <= names
    assert not any("._" in name for name in names)


def test_every_name_has_one_home_that_exports_it():
    for module, name, home in _exported():
        exported_there = importlib.import_module(home)
        assert name in exported_there.__all__, (module, name, home)
        assert getattr(exported_there, name) is getattr(importlib.import_module(module), name)
    assert ("sklearn_calib", "TemperatureScaling", "sklearn_calib.calibrators") in _exported()
    assert ("sklearn_calib.scoring", "brier_score", "sklearn_calib.metrics") in _exported()


@pytest.mark.parametrize(("module", "name", "home"), _exported(), ids=lambda v: str(v))
def test_public_classes_and_functions_have_docstrings(module, name, home):
    obj = getattr(importlib.import_module(module), name)
    if inspect.isclass(obj) or inspect.isroutine(obj):
        assert inspect.getdoc(obj), f"{module}.{name} has no docstring"


@pytest.mark.slow
def test_every_public_name_is_in_the_api_reference(built_docs):
    missing = []
    for module, name, home in _exported():
        page = (built_docs / "api" / f"{module}.html").read_text()
        entry = built_docs / "api" / "generated" / f"{home}.{name}.html"
        if f"{home}.{name}" not in page or not entry.is_file():
            missing.append(f"{module}.{name}")
        elif f'id="{home}.{name}"' not in entry.read_text():
            missing.append(f"{module}.{name} (no entry on {entry.name})")
    assert missing == []


@pytest.mark.slow
def test_the_gallery_draws_its_figures(built_docs):
    examples = sorted((ROOT / "examples").glob("plot_*.py"))
    assert len(examples) >= 5
    for example in examples:
        page = (built_docs / "auto_examples" / f"{example.stem}.html").read_text()
        assert f"sphx_glr_{example.stem}_001.png" in page, example.name


def _text(markup):
    """The text of an HTML fragment: whitespace collapsed, none before punctuation,
    straight apostrophes."""
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())
    return re.sub(r" ([.,;:])", r"\1", text).replace("\u2019", "'")


def test_a_module_summary_is_the_first_paragraph_of_its_docstring():
    package = importlib.import_module("sklearn_calib")
    assert api_pages.summary(package) == (
        "Calibrated neural classifiers, post-hoc calibrators and calibration metrics."
    )
    calibrators = importlib.import_module("sklearn_calib.calibrators")
    assert api_pages.summary(calibrators) == inspect.getdoc(calibrators).split("\n\n")[0]


@pytest.mark.slow
def test_the_api_index_gives_every_public_module_a_one_line_summary(built_docs):
    page = (built_docs / "api" / "index.html").read_text()
    table = _text(re.search(r"<table.*?</table>", page, re.S).group(0))
    for module in api_pages.public_modules():
        summary = _text(api_pages.summary(module).replace("``", ""))
        assert f"{module.__name__} {summary}" in table, module.__name__
        assert f'href="{module.__name__}.html' in page


@pytest.mark.slow
def test_class_pages_are_titled_by_the_class_name(built_docs):
    page = built_docs / "api" / "generated" / "sklearn_calib.calibrators.CalibratedClassifier.html"
    title = re.search(r"<h1>(.*?)<", page.read_text()).group(1)
    assert title == "CalibratedClassifier"


@pytest.mark.slow
def test_the_gallery_pages_give_the_code_the_whole_width(built_docs):
    """An example's page has no outline beside it, and long lines wrap rather than hide."""
    page = (built_docs / "auto_examples" / "plot_measure_classifier.html").read_text()
    assert "On this page" not in page
    assert "On this page" in (built_docs / "user_guide" / "weights.html").read_text()
    style = (built_docs / "_static" / "custom.css").read_text()
    assert "white-space: pre-wrap" in style and 'href="../_static/custom.css' in page


#: Names that serve the package itself: they are no part of any public module's ``__all__``.
INTERNALS = {"DEFAULT_LRS", "REFERENCE_PAIRING", "TEMPERATURE_COLUMN", "interval_column"}
INTERNALS |= {"MixedTarget"}


def test_the_api_reference_leaves_the_internals_out():
    exported = {name for _, name, _ in _exported()}
    assert exported & INTERNALS == set()


@pytest.mark.slow
def test_the_version_page_says_what_the_version_is(built_docs):
    page = _text((built_docs / "api" / "generated" / "sklearn_calib.__version__.html").read_text())
    assert "The version of sklearn_calib installed" in page
    assert "str(object" not in page and "encoding" not in page


@pytest.mark.slow
def test_the_changes_are_a_page_of_the_site(built_docs):
    page = _text((built_docs / "changes.html").read_text())
    version = importlib.import_module("sklearn_calib").__version__
    assert f"Version {version}" in page and "Renamed" in page
    assert 'href="changes.html"' in (built_docs / "index.html").read_text()


def test_the_reproducing_page_links_every_committed_report():
    # Checked without a build: a report added under benchmarks/reports gets its link.
    page = (DOCS / "reproducing.rst").read_text()
    linked = set(re.findall(r":reports:`(?:[^`<]*<)?([^`<>]+?)>?`", page))
    reports = ROOT / "benchmarks" / "reports"
    committed = {
        path.relative_to(reports).as_posix()
        for path in reports.rglob("*.md")
        if path.name in ("report.md", "README.md") or path.parent.name == "calibrator_arena"
    }
    assert committed <= linked, sorted(committed - linked)


@pytest.mark.slow
def test_the_site_holds_the_reports_it_links(built_docs):
    page = (built_docs / "reproducing.html").read_text()
    assert 'href="reports/quick/focal/report.md"' in page
    assert (built_docs / "reports" / "quick" / "focal" / "report.md").is_file()
    assert (built_docs / "reports" / "cpu" / "meta" / "gamma.png").is_file()
    guide = (built_docs / "user_guide" / "measuring.html").read_text()
    assert 'href="../reports/focal/report.md"' in guide
    assert "reproducing.html" in (built_docs / "index.html").read_text()

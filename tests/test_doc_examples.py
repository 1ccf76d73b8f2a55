"""Every code block of the README, the documentation's home page and the user guide runs.

A recipe a user copies from the documentation must work as written, so each document's
Python blocks run here, in order, in one namespace per document: a later block may use
the names an earlier one defined, as a reader following the page would. A block of
plain code runs as a script; a block of ``>>>`` lines runs as a doctest, its printed
output compared with the one shown (``...`` stands for any text). Each document runs in
its own temporary folder, with scikit-learn's configuration restored afterwards (a
recipe may turn on metadata routing) and its figures closed.

What some of the README's recipes compute is checked too, after the block runs, on the
names it defined and what it printed (:data:`README_CHECKS`, by the block's heading).

A block that cannot run here (it starts a cluster of processes) is marked as such, with
its reason, by a comment right before it: ``<!-- not run: REASON -->`` in Markdown,
``.. not run: REASON`` in reStructuredText. Such blocks are few and listed by
:func:`test_few_blocks_are_marked_not_run`.
"""

import contextlib
import doctest
import io
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import sklearn
from scipy.special import softmax

from sklearn_calib.scoring import expected_calibration_error, negative_log_likelihood

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    ROOT / "README.md",
    ROOT / "docs" / "index.rst",
    *sorted((ROOT / "docs" / "user_guide").glob("*.rst")),
]
#: The documents whose recipes train networks, search grids or fit many calibrators: half a
#: second to minutes each.
SLOW = {
    "README.md",
    "docs/index.rst",
    "docs/user_guide/calibrators.rst",
    "docs/user_guide/groups.rst",
    "docs/user_guide/label_shift.rst",
    "docs/user_guide/measuring.rst",
    "docs/user_guide/meta.rst",
    "docs/user_guide/scale.rst",
    "docs/user_guide/weights.rst",
}
#: Blocks deliberately not run, with their reasons: (document, first line of the block).
NOT_RUN = {
    ("README.md", "import joblib"),
    ("docs/user_guide/dask.rst", "import joblib"),
}

_MARKDOWN_BLOCK = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```\s*$", re.M | re.S)
_MARKDOWN_SKIP = re.compile(r"<!-- not run: (?P<reason>.+?) -->\s*$")
_MARKDOWN_HEADING = re.compile(r"^#+ (.+?)\s*$", re.M)
_RST_BLOCK = re.compile(r"^(?P<indent> *)\.\. (?:code-block|code|sourcecode)::\s*(?P<lang>\S*)")
_RST_SKIP = re.compile(r"^ *\.\. not run: (?P<reason>.+\S)\s*$")


@dataclass
class Block:
    """One code block: its language, its code, the line its code starts on, why it is
    not run (None when it runs) and the Markdown heading it is under (None in
    reStructuredText)."""

    language: str
    code: str
    line: int
    not_run: str | None = None
    heading: str | None = None

    @property
    def is_doctest(self):
        return self.code.lstrip().startswith(">>>")


def markdown_blocks(text):
    """The fenced blocks of a Markdown document, each with the comment right before it and
    the heading above it."""
    blocks = []
    for match in _MARKDOWN_BLOCK.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = _MARKDOWN_SKIP.match(before)
        line = text.count("\n", 0, match.start()) + 2
        headings = _MARKDOWN_HEADING.findall(text, 0, match.start())
        blocks.append(
            Block(
                match["lang"],
                match["code"],
                line,
                skip["reason"] if skip else None,
                headings[-1] if headings else None,
            )
        )
    return blocks


def rst_blocks(text):
    """The ``code-block`` directives of a reStructuredText document, with their contents.

    The contents are the lines after the directive's options that are indented deeper
    than the directive; a ``.. not run: REASON`` comment may precede the directive,
    separated by blank lines only.
    """
    lines = text.splitlines()
    blocks = []
    for number, line in enumerate(lines):
        match = _RST_BLOCK.match(line)
        if not match:
            continue
        indent = len(match["indent"])
        body = number + 1
        while body < len(lines) and re.match(r"^\s+:\w[\w-]*:", lines[body]):
            body += 1  # the directive's options
        content = []
        for following in lines[body:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            content.append(following)
        first = body + next((i for i, text in enumerate(content) if text.strip()), 0)
        code = _dedent("\n".join(content).strip("\n"))
        previous = number - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        skip = _RST_SKIP.match(lines[previous]) if previous >= 0 else None
        blocks.append(
            Block(match["lang"], code + "\n", first + 1, skip["reason"] if skip else None)
        )
    return blocks


def _dedent(text):
    widths = [len(line) - len(line.lstrip()) for line in text.splitlines() if line.strip()]
    margin = min(widths, default=0)
    return "\n".join(line[margin:] for line in text.splitlines())


def python_blocks(path):
    """The Python blocks of a document (``python`` and ``pycon``), in order."""
    text = path.read_text()
    blocks = markdown_blocks(text) if path.suffix == ".md" else rst_blocks(text)
    return [block for block in blocks if block.language in ("python", "pycon")]


def run_document(path, namespace, checks=None):
    """Run the blocks of ``path`` that are not marked, in order, in ``namespace``.

    ``checks`` maps a heading to a function called, after the first plain block under
    that heading runs, with the namespace and the text the block printed; every heading
    of ``checks`` must have such a block.
    """
    checks = dict(checks or {})
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    parser = doctest.DocTestParser()
    for block in python_blocks(path):
        if block.not_run:
            continue
        where = f"{_name(path)}, line {block.line}"
        if block.is_doctest:
            test = parser.get_doctest(block.code, namespace, where, str(path), block.line - 1)
            test.globs = namespace  # shared with the document's other blocks, not copied
            output = []
            result = runner.run(test, out=output.append, clear_globs=False)
            assert result.failed == 0, f"{where}:\n" + "".join(output)
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(block.code, where, "exec"), namespace)
        print(printed.getvalue(), end="")
        if block.heading in checks:
            checks.pop(block.heading)(namespace, printed.getvalue())
    assert not checks, f"{_name(path)} has no Python block under the headings {list(checks)}"


# ------------------------------------------------- what the README's recipes compute


def _quickstart(namespace, printed):
    search, X_test, y_test = namespace["search"], namespace["X_test"], namespace["y_test"]
    assert search.best_score_ < 0
    assert 0 < expected_calibration_error(y_test, search.predict_proba(X_test)) < 0.1


def _logits_and_labels_report(namespace, printed):
    labels, proba, ci = namespace["labels"], namespace["proba"], namespace["ci"]
    assert printed.startswith("Calibration report: 10000 samples, 10 classes")
    assert ci.low <= ci.estimate <= ci.high
    assert ci.estimate == expected_calibration_error(labels, proba)
    assert f"ECE {ci.estimate:.4f}" in printed


def _refinement_selection(namespace, printed):
    network = namespace["calibrated"].estimators_[0]
    recorded = network.history[:, "valid_refinement"]
    assert all(value < 0 for value in recorded) and len(recorded) < 30
    assert float(printed.splitlines()[-1]) < 0.2


def _network_quickstart(namespace, printed):
    search, calibrated = namespace["search"], namespace["calibrated"]
    X_test, y_test = namespace["X_test"], namespace["y_test"]
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_["criterion__gamma"] == [1, 3, 5][np.argmax(scores)]
    network, calibrator = calibrated.estimators_[0], calibrated.calibrators_[0]
    assert network.criterion_.gamma == search.best_params_["criterion__gamma"]
    assert calibrator.temperature_ > 0
    # temperature scaling keeps the network's predictions
    np.testing.assert_array_equal(calibrated.predict(X_test), network.predict(X_test))
    ece = expected_calibration_error(y_test, calibrated.predict_proba(X_test))
    assert 0 < ece < 0.1
    assert float(printed.splitlines()[-1]) == pytest.approx(ece)


def _calibrator_selection(namespace, printed):
    selector, y = namespace["selector"], namespace["test_labels"]
    assert namespace["test_proba"].shape == (2000, 10)
    assert printed.splitlines()[0] == repr(selector.best_calibrator_)
    held_out = negative_log_likelihood(y, namespace["test_proba"])
    uncalibrated = softmax(namespace["test_logits"], axis=1)
    assert held_out < negative_log_likelihood(y, uncalibrated) - 0.1


def _persistence(namespace, printed):
    X, net, loaded = namespace["X"], namespace["net"], namespace["loaded"]
    np.testing.assert_array_equal(loaded.predict_proba(X), net.predict_proba(X))


#: Checks of what README recipes compute, by the heading of the block (see run_document).
README_CHECKS = {
    "Quickstart: measuring calibration": _quickstart,
    "I have logits and labels: is my model calibrated, and how sure is that?": (
        _logits_and_labels_report
    ),
    "Select by refinement, then calibrate": _refinement_selection,
    "Quickstart: calibrated neural networks": _network_quickstart,
    "I have logits and labels": _calibrator_selection,
    "Faults and persistence": _persistence,
}
CHECKS = {"README.md": README_CHECKS}


def _name(path):
    """The path relative to the repository (the file name for one outside it)."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, marks=[pytest.mark.slow] if _name(path) in SLOW else [])
        for path in DOCUMENTS
    ],
    ids=_name,
)
def test_the_python_blocks_of_the_document_run(path, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    namespace = {"__name__": f"doc_{path.stem}"}
    try:
        with sklearn.config_context():
            run_document(path, namespace, CHECKS.get(_name(path)))
    finally:
        plt.close("all")


def test_the_slow_documents_are_documents():
    assert SLOW <= {_name(path) for path in DOCUMENTS}


def test_few_blocks_are_marked_not_run():
    marked = {
        (_name(path), block.code.splitlines()[0])
        for path in DOCUMENTS
        for block in python_blocks(path)
        if block.not_run
    }
    assert marked == NOT_RUN


def test_every_python_block_is_found():
    """No Python block escapes the extraction (a ``py`` fence, a literal ``::`` block)."""
    for path in DOCUMENTS:
        text = path.read_text()
        if path.suffix == ".md":
            fences = re.findall(r"^```(\S*)", text, re.M)
            languages = set(fences[::2])  # every other fence opens a block
        else:
            assert not re.search(r"::\s*\n\n\s+>>>", text), f"{_name(path)}: a >>> literal block"
            languages = {block.language for block in rst_blocks(text)}
        assert languages <= {"python", "bash", "pycon", "text"}, (_name(path), languages)
    counts = {_name(path): len(python_blocks(path)) for path in DOCUMENTS}
    assert counts["README.md"] >= 8 and counts["docs/index.rst"] >= 1, counts


def test_the_extraction_on_a_small_document(tmp_path):
    markdown = tmp_path / "doc.md"
    markdown.write_text(
        "Intro\n\n```python\nx = 1\n```\n\n<!-- not run: needs a cluster -->\n"
        "```python\nstart_cluster()\n```\n\n```bash\nmake run\n```\n"
    )
    blocks = python_blocks(markdown)
    assert [(b.code, b.line, b.not_run) for b in blocks] == [
        ("x = 1\n", 4, None),
        ("start_cluster()\n", 9, "needs a cluster"),
    ]
    markdown.write_text("# Title\n\n## Usage\n\n```python\nx = 2\nprint(x)\n```\n")
    assert [b.heading for b in python_blocks(markdown)] == ["Usage"]
    seen = {}
    run_document(
        markdown, {}, {"Usage": lambda names, printed: seen.update(names, printed=printed)}
    )
    assert seen["x"] == 2 and seen["printed"] == "2\n"
    with pytest.raises(AssertionError, match=r"no Python block under the headings \['Title'\]"):
        run_document(markdown, {}, {"Title": lambda names, printed: None})
    rst = tmp_path / "doc.rst"
    rst.write_text(
        "Title\n=====\n\n.. code-block:: python\n   :caption: one\n\n   x = 1\n   if x:\n"
        "       y = 2\n\nText.\n\n.. not run: needs a GPU\n\n.. code-block:: pycon\n\n"
        "   >>> print(x + y)\n   3\n"
    )
    blocks = python_blocks(rst)
    assert [(b.code, b.line, b.not_run) for b in blocks] == [
        ("x = 1\nif x:\n    y = 2\n", 7, None),
        (">>> print(x + y)\n3\n", 17, "needs a GPU"),
    ]
    namespace = {}
    rst.write_text(rst.read_text().replace(".. not run: needs a GPU", ""))
    run_document(rst, namespace)
    assert namespace["y"] == 2
    rst.write_text(rst.read_text().replace("   3\n", "   4\n"))
    with pytest.raises(AssertionError, match=r"line 17(.|\n)*Expected:\s+4\s+Got:\s+3"):
        run_document(rst, {})

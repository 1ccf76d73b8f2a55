"""Every code block of the README, the documentation's home page and the user guide runs.

A recipe a user copies from the documentation must work as written, so each document's
Python blocks run here, in order, in one namespace per document: a later block may use
the names an earlier one defined, as a reader following the page would. A block of
plain code runs as a script; a block of ``>>>`` lines runs as a doctest, its printed
output compared with the one shown (``...`` stands for any text). Each document runs in
its own temporary folder, with scikit-learn's configuration restored afterwards (a
recipe may turn on metadata routing) and its figures closed.

A block that cannot run here (it starts a cluster of processes) is marked as such, with
its reason, by a comment right before it: ``<!-- not run: REASON -->`` in Markdown,
``.. not run: REASON`` in reStructuredText. Such blocks are few and listed by
:func:`test_few_blocks_are_marked_not_run`.
"""

import doctest
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import sklearn

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    ROOT / "README.md",
    ROOT / "docs" / "index.rst",
    *sorted((ROOT / "docs" / "user_guide").glob("*.rst")),
]
#: Blocks deliberately not run, with their reasons: (document, first line of the block).
NOT_RUN = {
    ("README.md", "import joblib"),
    ("docs/user_guide/dask.rst", "import joblib"),
}

_MARKDOWN_BLOCK = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```\s*$", re.M | re.S)
_MARKDOWN_SKIP = re.compile(r"<!-- not run: (?P<reason>.+?) -->\s*$")
_RST_BLOCK = re.compile(r"^(?P<indent> *)\.\. (?:code-block|code|sourcecode)::\s*(?P<lang>\S*)")
_RST_SKIP = re.compile(r"^ *\.\. not run: (?P<reason>.+\S)\s*$")


@dataclass
class Block:
    """One code block: its language, its code, the line its code starts on and why it is
    not run (None when it runs)."""

    language: str
    code: str
    line: int
    not_run: str | None = None

    @property
    def is_doctest(self):
        return self.code.lstrip().startswith(">>>")


def markdown_blocks(text):
    """The fenced blocks of a Markdown document, each with the comment right before it."""
    blocks = []
    for match in _MARKDOWN_BLOCK.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = _MARKDOWN_SKIP.match(before)
        line = text.count("\n", 0, match.start()) + 2
        blocks.append(Block(match["lang"], match["code"], line, skip["reason"] if skip else None))
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


def run_document(path, namespace):
    """Run the blocks of ``path`` that are not marked, in order, in ``namespace``."""
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
        else:
            exec(compile(block.code, where, "exec"), namespace)


def _name(path):
    """The path relative to the repository (the file name for one outside it)."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


@pytest.mark.parametrize("path", DOCUMENTS, ids=_name)
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
            run_document(path, namespace)
    finally:
        plt.close("all")


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

"""Every Python REPL example (``>>>`` lines in a ```python block) in README.md and
docs/ runs as written, as a doctest: ``...`` in the shown output stands for any text.

Python blocks without ``>>>`` are fragments of a larger program (a pytest file, an
app talking to a server) and are not run here.
"""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
from repo_paths import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def repl_blocks(path: Path) -> list[tuple[int, str]]:
    """(first line, text) of each ```python block holding a ``>>>`` line."""
    blocks: list[tuple[int, str]] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    start, body = None, []
    for number, text in enumerate(lines, 1):
        if start is None and text.strip() == "```python":
            start, body = number + 1, []
        elif start is not None and text.startswith("```"):
            if any(line.startswith(">>> ") for line in body):
                blocks.append((start, "\n".join(body) + "\n"))
            start = None
        elif start is not None:
            body.append(text)
    return blocks


def test_repl_blocks_are_found(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("```python\nimport x\n```\n```python\n>>> 1 + 1\n2\n```\n")
    assert repl_blocks(doc) == [(5, ">>> 1 + 1\n2\n")]


def _run(path: Path, line: int, text: str) -> tuple[int, str]:
    name = f"{path.name}:{line}"
    test = doctest.DocTestParser().get_doctest(text, {}, name, str(path), line - 1)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS, verbose=False)
    report: list[str] = []
    runner.run(test, out=report.append)
    return runner.failures, "".join(report)


def test_a_wrong_output_fails(tmp_path):
    failures, report = _run(tmp_path / "x.md", 1, ">>> 1 + 1\n3\n")
    assert failures == 1 and "Expected:" in report


@pytest.mark.parametrize("doc", [d for d in DOCS if repl_blocks(d)], ids=lambda d: d.name)
def test_repl_examples_run_as_written(doc):
    for line, text in repl_blocks(doc):
        failures, report = _run(doc, line, text)
        assert failures == 0, report

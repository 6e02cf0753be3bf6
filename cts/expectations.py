"""The expectations file: known failures of one target (xfail).

One entry per line: a test id or a glob over test ids, then optionally the
reason; ``#`` starts a comment::

    # my-npu: float16 is computed in float32 and rounded late
    generated/*/float16*        b/1234 rounding
    control-flow/loop-timeout/above-maximum

A test whose id matches an entry and does not pass (failed, timed out,
error) is *xfail* and does not fail the run; one that passes is *xpass*,
reported so the file can be brought up to date. Skipped tests stay skipped.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from nnhal.cts.core import Outcome, Result

__all__ = ["Expectation", "Expectations", "load_expectations"]


@dataclass(frozen=True)
class Expectation:
    pattern: str
    reason: str
    line: int


class Expectations:
    def __init__(self, entries: list[Expectation] | None = None, source: str = "") -> None:
        self.entries = entries or []
        self.source = source
        self.used: set[str] = set()

    def match(self, test_id: str) -> Expectation | None:
        for e in self.entries:
            if fnmatch.fnmatchcase(test_id, e.pattern):
                return e
        return None

    def apply(self, result: Result) -> Result:
        """Turn a result into xfail/xpass when an entry covers its test."""
        entry = self.match(result.id)
        if entry is None or result.outcome == Outcome.SKIPPED:
            return result
        self.used.add(entry.pattern)
        result.raw_outcome = result.outcome
        where = f"{self.source}:{entry.line}" if self.source else f"line {entry.line}"
        note = f"expected failure ({where}{': ' + entry.reason if entry.reason else ''})"
        if result.outcome == Outcome.PASSED:
            result.outcome = Outcome.XPASS
            result.message = f"passed, but listed as an {note}"
        elif result.outcome.is_problem:
            result.outcome = Outcome.XFAIL
            result.message = f"{note}: {result.message}"
        return result

    def unused(self) -> list[Expectation]:
        return [e for e in self.entries if e.pattern not in self.used]


def load_expectations(path: str | Path) -> Expectations:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"{p}: cannot read the expectations file ({e.strerror})") from None
    entries = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        pattern, *reason = line.split(None, 1)
        entries.append(Expectation(pattern, reason[0].strip() if reason else "", n))
    return Expectations(entries, str(p))

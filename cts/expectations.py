"""The expectations file: known failures of one target (xfail).

One entry per line: a test id or a glob over test ids, then optionally the
reason; ``#`` starts a comment::

    # my-npu: float16 is computed in float32 and rounded late
    generated/*/float16*        b/1234 rounding
    control-flow/loop-timeout/above-maximum

Every test whose id matches an entry gets pytest's xfail marker
(``nnhal.cts.pytest_items``): failing it (or timing out) is *xfail* and does
not fail the run; passing it is *xpass*, reported so the file can be brought
up to date (with ``--strict`` it fails: a strict xfail). Skipped tests stay
skipped.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

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

    def match(self, test_id: str) -> Expectation | None:
        for e in self.entries:
            if fnmatch.fnmatchcase(test_id, e.pattern):
                return e
        return None


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

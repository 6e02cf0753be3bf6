"""Reports of a run: per-family table, JSON, coverage table (JUnit XML is pytest's).

- ``summary_line``: "N passed, M failed, K skipped" followed by the other
  outcomes that occurred (xfail, xpass, timed out, errors), for reports made
  from Results (pytest prints its own at the end of a session);
- ``skipped_families_line``: every family whose tests were all skipped, with
  the reason (a summary must never hide a family that did not run);
- ``family_table``: one row per family with the count of each outcome;
- ``json_report``: target, summary, per-family counts, every result and the
  coverage;
- ``coverage``: operations x operand types x families, counting the tests
  that exercised each pair and how many of them passed.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from nnhal.cts.core import Outcome, Result

__all__ = [
    "coverage",
    "coverage_table",
    "coverage_totals",
    "family_table",
    "json_report",
    "skipped_families",
    "skipped_families_line",
    "summary_line",
    "write_json",
]

_ORDER = [
    Outcome.PASSED,
    Outcome.FAILED,
    Outcome.SKIPPED,
    Outcome.XFAIL,
    Outcome.XPASS,
    Outcome.TIMEOUT,
    Outcome.ERROR,
]
_WORDS = {
    Outcome.PASSED: "passed",
    Outcome.FAILED: "failed",
    Outcome.SKIPPED: "skipped",
    Outcome.XFAIL: "xfailed",
    Outcome.XPASS: "xpassed",
    Outcome.TIMEOUT: "timed out",
    Outcome.ERROR: "errors",
}


def counts(results: Iterable[Result]) -> Counter:
    return Counter(r.outcome for r in results)


def summary_line(results: Sequence[Result]) -> str:
    n = counts(results)
    head = [f"{n[o]} {_WORDS[o]}" for o in (Outcome.PASSED, Outcome.FAILED, Outcome.SKIPPED)]
    tail = [f"{n[o]} {_WORDS[o]}" for o in _ORDER[3:] if n[o]]
    return ", ".join(head + tail)


def skipped_families(results: Sequence[Result], families: Sequence[str]) -> dict[str, str]:
    """Families whose every test was skipped -> the most frequent skip reason."""
    by_family: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_family[r.family].append(r)
    out: dict[str, str] = {}
    for f in families:
        rs = by_family.get(f)
        if rs and all(r.outcome == Outcome.SKIPPED for r in rs):
            reason, _ = Counter(r.message for r in rs).most_common(1)[0]
            out[f] = reason
    return out


def skipped_families_line(results: Sequence[Result], families: Sequence[str]) -> str:
    """The line naming every family skipped whole, with why ("" when none was)."""
    skipped = skipped_families(results, families)
    if not skipped:
        return ""
    return "skipped whole: " + "; ".join(f"{f} ({why})" for f, why in skipped.items())


def family_table(results: Sequence[Result], families: Sequence[str]) -> str:
    by_family: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        by_family[r.family][r.outcome] += 1
    cols = [o for o in _ORDER if any(c[o] for c in by_family.values())] or [Outcome.PASSED]
    width = max([len(f) for f in families] + [6])
    lines = [f"{'family':<{width}}  " + "  ".join(f"{o.value:>7}" for o in cols)]
    for f in families:
        if f in by_family:
            c = by_family[f]
            lines.append(f"{f:<{width}}  " + "  ".join(f"{c[o]:>7}" for o in cols))
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Coverage
# ---------------------------------------------------------------------------


def coverage(results: Sequence[Result]) -> dict[str, dict[str, dict[str, dict[str, int]]]]:
    """operation -> operand type -> family -> {"tests", "passed"}."""
    table: dict[str, dict[str, dict[str, dict[str, int]]]] = {}
    for r in results:
        for op, t in r.coverage:
            cell = (
                table.setdefault(op, {})
                .setdefault(t, {})
                .setdefault(r.family, {"tests": 0, "passed": 0})
            )
            cell["tests"] += 1
            cell["passed"] += r.outcome in (Outcome.PASSED, Outcome.XPASS)
    return table


def _all_operations() -> list[str]:
    """The HAL's 102 operations (OEM_OPERATION appears only when a test used it)."""
    from nnhal.types import OperationType

    return [op.name for op in OperationType if op != OperationType.OEM_OPERATION]


def coverage_totals(results: Sequence[Result]) -> dict[str, int]:
    """Operations (of the HAL's 102) and (operation, type) pairs with tests, and passing."""
    table = coverage(results)
    ops = _all_operations()
    passed_pairs = [
        (op, t) for op, types in table.items() for t, cells in types.items()
        if any(c["passed"] for c in cells.values())
    ]  # fmt: skip
    return {
        "operations": len(ops),
        "operationsTested": sum(op in table for op in ops),
        "operationsPassed": len({op for op, _ in passed_pairs if op in ops}),
        "pairsTested": sum(len(types) for types in table.values()),
        "pairsPassed": len(passed_pairs),
        "tests": sum(1 for r in results if r.coverage),
    }


def coverage_table(results: Sequence[Result], families: Sequence[str]) -> str:
    """Rows: every operation of the HAL (no test: one row with zeros) by operand type;
    columns: families; cells: passed/tests; a totals line at the end."""
    table = coverage(results)
    used = [
        f
        for f in families
        if any(f in cells for types in table.values() for cells in types.values())
    ]
    rows = {op: table.get(op, {}) for op in _all_operations()}
    rows.update(table)  # extension or unknown operation codes too
    op_w = max(len(op) for op in rows) + 2
    type_w = max([len(t) for types in table.values() for t in types] + [len("(no test)")]) + 2
    col_w = [max(len(f), 7) for f in used]
    header = f"{'operation':<{op_w}}{'operand type':<{type_w}}" + "  ".join(
        f"{f:>{w}}" for f, w in zip(used, col_w)
    )
    header += "    total"
    lines = [header, "-" * len(header)]
    for op in sorted(rows):
        if not rows[op]:
            cells_text = "  ".join(f"{'0/0':>{w}}" for w in col_w)
            lines.append(f"{op:<{op_w}}{'(no test)':<{type_w}}{cells_text}  {'0/0':>7}")
            continue
        for t in sorted(rows[op]):
            cells = rows[op][t]
            row = [f"{cells[f]['passed']}/{cells[f]['tests']}" if f in cells else "-" for f in used]
            total = (
                sum(c["passed"] for c in cells.values()),
                sum(c["tests"] for c in cells.values()),
            )
            lines.append(
                f"{op:<{op_w}}{t:<{type_w}}"
                + "  ".join(f"{c:>{w}}" for c, w in zip(row, col_w))
                + f"  {f'{total[0]}/{total[1]}':>7}"
            )
    n = coverage_totals(results)
    lines.append(
        f"totals: {n['operationsTested']} of {n['operations']} operations tested, "
        f"{n['operationsPassed']} with a passing test; {n['pairsTested']} (operation, operand "
        f"type) pairs tested, {n['pairsPassed']} with a passing test"
    )
    lines.append("(cells: tests passed / tests run that exercise the operation with that type)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------


def json_report(results: Sequence[Result], families: Sequence[str], info: dict[str, Any]) -> dict:
    by_family: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        by_family[r.family][r.outcome.value] += 1
    return {
        **info,
        "summary": summary_line(results),
        "counts": {o.value: n for o, n in counts(results).items()},
        "families": {f: dict(by_family[f]) for f in families if f in by_family},
        "results": [r.to_json() for r in results],
        "coverage": coverage(results),
        "coverageTotals": coverage_totals(results),
    }


def write_json(
    path: str | Path, results: Sequence[Result], families: Sequence[str], info: dict[str, Any]
) -> None:
    doc = json_report(results, families, info)
    Path(path).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")

"""Run ONNX's backend node tests through the importer and print the per-operator table.

    python tests/importers/onnx/onnx_node_table.py            # markdown table
    python tests/importers/onnx/onnx_node_table.py --expected # rewrite onnx_node_expected.json

The expected file records which tests the importer reports unsupported (with
the reason), so the test suite fails when a test that used to pass stops
passing, and never accepts a wrong result.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

EXPECTED = HERE / "onnx_node_expected.json"


def outcomes():
    from nnhal.importers.onnx.node_tests import cases, run_case
    from onnx_exec_helper import execute

    return [run_case(name, op, d, execute) for name, op, d in cases()]


def short(reason: str) -> str:
    reason = re.sub(r"^/\S+/model\.onnx: ", "", reason)
    reason = re.sub(r"'[^']*'", "'…'", reason)
    return reason.split(";")[0][:110]


def table(results) -> str:
    per: dict[str, list] = defaultdict(list)
    for o in results:
        per[o.op].append(o)
    lines = ["| operator | attempted | passed | not passed: reasons (count) |", "|---|---|---|---|"]
    for op in sorted(per):
        rows = per[op]
        passed = sum(o.status == "passed" for o in rows)
        why: dict[str, int] = defaultdict(int)
        for o in rows:
            if o.status != "passed":
                why[f"{o.status}: {short(o.detail)}"] += 1
        text = "; ".join(f"{k} ({v})" for k, v in sorted(why.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {op} | {len(rows)} | {passed} | {text} |")
    total = len(results)
    ok = sum(o.status == "passed" for o in results)
    lines.append(f"| **all** | {total} | {ok} | |")
    return "\n".join(lines)


def main() -> int:
    results = outcomes()
    if "--expected" in sys.argv:
        doc = {o.name: short(o.detail) for o in results if o.status == "unsupported"}
        EXPECTED.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {EXPECTED} ({len(doc)} unsupported)")
    print(table(results))
    bad = [o for o in results if o.status == "failed"]
    for o in bad:
        print(f"FAILED {o.name}: {o.detail}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

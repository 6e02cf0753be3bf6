"""The whole conformance suite against the in-process driver (what CI runs): one run.

``nnhal cts -n 2`` as a user types it: the command starts the driver in its
process behind a real gRPC server and the fuzz oracle beside it, and runs
every default family (the spec library and the shipped NNAPI corpus) as a
pytest session spread over two pytest-xdist workers. Nothing may fail, time
out or error, no family may be skipped whole, and all 102 operations must
have passing tests. (The suite takes minutes: this is its only full run.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter

import pytest

pytestmark = pytest.mark.slow  # the whole conformance suite


@pytest.mark.timeout(2400)
def test_full_suite_with_nnhal_cts_on_two_workers(tmp_path, capsys):
    report = tmp_path / "cts.json"
    command = [sys.executable, "-m", "nnhal", "cts", "-n", "2", "--json-report", str(report),
               "--fuzz-dir", str(tmp_path / "fuzz"), "--", "-q", "-p", "no:cacheprovider"]  # fmt: skip
    started = time.monotonic()
    run = subprocess.run(
        command,
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        timeout=2300,
    )
    elapsed = time.monotonic() - started
    tail = "\n".join(run.stdout.splitlines()[-40:])
    assert run.returncode == 0, f"{tail}\n{run.stderr[-3000:]}"
    doc = json.loads(report.read_text())
    results = doc["results"]
    problems = [r for r in results if r["outcome"] in ("failed", "timeout", "error")]
    assert not problems, problems[:20]
    counts = Counter(r["outcome"] for r in results)
    assert counts["passed"] > 20000, counts
    # the shipped corpus and the spec library: every one of the 102 operations passes somewhere
    totals = doc["coverageTotals"]
    assert totals["operationsPassed"] == totals["operations"] == 102, totals
    assert doc["skippedFamilies"] == {}, doc["skippedFamilies"]
    families = doc["families"]
    assert set(families) == {
        "basic", "generated", "execution", "model-validation", "request-validation", "qos",
        "control-flow", "burst", "fenced", "caching", "memory-domain", "extensions", "fuzz",
    }  # fmt: skip
    assert families["caching"].get("passed", 0) >= 12, families["caching"]
    assert all(r["message"] for r in results if r["outcome"] == "skipped")
    # pytest's own summary and the suite's table, as the command printed them
    assert f"{counts['passed']} passed" in tail and "family " in run.stdout
    per_family = {f: sum(c.values()) for f, c in families.items()}
    with capsys.disabled():
        print(f"\nnnhal cts -n 2 (in-process driver): {dict(counts)} in {elapsed:.1f} s")
        print("tests per family: " + ", ".join(f"{f} {n}" for f, n in per_family.items()))
        print(f"coverage totals: {totals}")

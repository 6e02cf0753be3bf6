"""The whole conformance suite against the in-process driver (what CI runs): two runs.

``nnhal cts -n 2`` as a user types it: the command starts the driver in its
process behind a real gRPC server and the fuzz oracle beside it, and runs
every default family (the spec library and the shipped NNAPI corpus) as a
pytest session spread over two pytest-xdist workers. ``pytest --pyargs
nnhal.cts -n 2`` runs the same session from pytest's own command line against
the same driver served by the test. Nothing may fail, time out or error, no
family may be skipped whole, and all 102 operations must have passing tests.
(The suite takes minutes: these are its only full runs.)
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
    run, elapsed = _run(command, tmp_path)
    _check_full_run(run, report, f"nnhal cts -n 2 (in-process driver) in {elapsed:.1f} s", capsys)


@pytest.mark.timeout(2400)
def test_full_suite_with_pytest_pyargs_on_two_workers(tmp_path, capsys):
    from nnhal.tools.local import local_device

    report = tmp_path / "cts.json"
    # the target and the oracle as `nnhal cts` builds them, served by this process
    with local_device(None) as target, local_device(None) as oracle:
        command = [sys.executable, "-m", "pytest", "--pyargs", "nnhal.cts", "-n", "2",
                   "--cts-target", target.address, "--cts-oracle", oracle.address,
                   "--cts-json-report", str(report), "--cts-fuzz-dir", str(tmp_path / "fuzz"),
                   "-q", "-p", "no:cacheprovider"]  # fmt: skip
        run, elapsed = _run(command, tmp_path)
    _check_full_run(run, report, f"pytest --pyargs nnhal.cts -n 2 in {elapsed:.1f} s", capsys)


def _run(command: list[str], cwd) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    run = subprocess.run(
        command,
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        timeout=2300,
    )
    return run, time.monotonic() - started


def _check_full_run(run: subprocess.CompletedProcess, report, label: str, capsys) -> None:
    tail = "\n".join(run.stdout.splitlines()[-40:])
    assert run.returncode == 0, f"{tail}\n{run.stderr[-3000:]}"
    assert "created: 2/2 workers" in run.stdout or "bringing up nodes" in run.stdout, tail
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
    # pytest's own summary and the suite's table, as the session printed them
    assert f"{counts['passed']} passed" in tail and "family " in run.stdout
    per_family = {f: sum(c.values()) for f, c in families.items()}
    with capsys.disabled():
        print(f"\n{label}: {dict(counts)}")
        print("tests per family: " + ", ".join(f"{f} {n}" for f, n in per_family.items()))
        print(f"coverage totals: {totals}")

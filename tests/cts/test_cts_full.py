"""The whole conformance suite against the in-process driver (what CI runs).

Every default family (the spec library and the shipped NNAPI corpus) runs
against a fresh in-process server with the default profile, the fuzz oracle
a second in-process server; nothing may fail, time out or error, no family
may be skipped whole, and all 102 operations must have passing tests.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter

import pytest
from nnhal.cts.core import Outcome
from nnhal.cts.report import coverage_totals, summary_line
from nnhal.cts.suite import Config, run_suite
from nnhal.cts.target import Options

pytestmark = pytest.mark.slow  # the whole conformance suite


@pytest.mark.timeout(900)
def test_full_suite_against_the_in_process_driver(tmp_path, capsys):
    from nnhal.driver.device import Device
    from nnhal.driver.security import ServerSecurity
    from nnhal.driver.server import create_server

    from nnhal.client import connect

    # the caching family names cache files in the temporary folder: a cache root
    security = ServerSecurity(cache_roots=(tempfile.gettempdir(),))
    server, address = create_server(Device(), "127.0.0.1:0", security=security)
    # the fuzz family's oracle: a second endpoint (here the same implementation)
    oracle_server, oracle_address = create_server(Device(), "127.0.0.1:0")
    client, oracle = connect(address), connect(oracle_address)
    started = time.monotonic()
    try:
        options = Options(fuzz_dir=tmp_path, oracle=oracle)
        report = run_suite(client, address, Config(jobs=2, options=options))
    finally:
        client.close()
        oracle.close()
        server.stop(None)
        oracle_server.stop(None)
    elapsed = time.monotonic() - started
    problems = [r for r in report.results if r.outcome.is_problem]
    assert not problems, "\n".join(f"{r.outcome.value} {r.id}: {r.message}" for r in problems[:20])
    counts = {o: sum(r.outcome == o for r in report.results) for o in Outcome}
    assert counts[Outcome.PASSED] > 20000
    # the shipped corpus and the spec library: every one of the 102 operations passes somewhere
    totals = coverage_totals(report.results)
    assert totals["operationsPassed"] == totals["operations"] == 102, totals
    assert not report.skipped_families(), report.skipped_families()
    caching = [r for r in report.results if r.family == "caching"]
    assert sum(r.outcome == Outcome.PASSED for r in caching) >= 12, caching
    # every family ran something, or was skipped with a reason
    for family in report.families:
        results = [r for r in report.results if r.family == family]
        assert results, family
        assert all(r.message for r in results if r.outcome == Outcome.SKIPPED)
    per_family = Counter(r.family for r in report.results)
    with capsys.disabled():
        print(f"\ncts full run in-process: {summary_line(report.results)} in {elapsed:.1f} s")
        print("tests per family: " + ", ".join(f"{f} {n}" for f, n in per_family.items()))
        print(f"coverage totals: {totals}")

"""The whole conformance suite against the in-process driver (what CI runs).

Every default family runs against a fresh in-process server with the
default profile; nothing may fail, time out or error.
"""

from __future__ import annotations

import time

import pytest
from nnhal.cts.core import Outcome
from nnhal.cts.report import summary_line
from nnhal.cts.suite import Config, run_suite
from nnhal.cts.target import Options


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_full_suite_against_the_in_process_driver(tmp_path, capsys):
    from nnhal.driver.device import Device
    from nnhal.driver.service import create_server

    from nnhal.client import connect

    server, address = create_server(Device(), "127.0.0.1:0")
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
    assert counts[Outcome.PASSED] > 6000
    # every family ran something, or was skipped with a reason
    for family in report.families:
        results = [r for r in report.results if r.family == family]
        assert results, family
        assert all(r.message for r in results if r.outcome == Outcome.SKIPPED)
    with capsys.disabled():
        print(f"\ncts full run in-process: {summary_line(report.results)} in {elapsed:.1f} s")

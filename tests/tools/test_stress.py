"""`nnhal stress` and getResourceUsage: short real runs and the leak check.

The runs start their own `nnhal serve` subprocess and spawn real client processes, as
the command does; they are kept to a few seconds. The resource tests use a fresh
in-process server so that the objects and handles they create are the only change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from nnhal.tools.cli import main
from nnhal.tools.stress import checked_figures, compare, settled_usage
from nnhal.tools.stress_client import DEFAULT_WEIGHTS, KINDS, add_model, plan_kinds

pytestmark = pytest.mark.slow  # client processes against real servers


def _run(capsys, *args: str) -> tuple[int, dict]:
    code = main(["stress", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.mark.timeout(300)
def test_short_run_every_status_as_expected_and_nothing_left(capsys) -> None:
    code, report = _run(capsys, "--clients", "3", "--executions", "30", "--seed", "1")
    assert report["own_server"] and report["devices"] == ["default"]
    assert report["calls"] == 90
    assert set(report["kinds"]) == set(KINDS)  # seeded: every kind came up
    for kind, r in report["kinds"].items():
        assert set(r["outcomes"]) <= set(KINDS[kind]), (kind, r)
        assert r["unexpected"] == 0 and r["p99_ms"] >= r["p50_ms"] > 0
    assert not report["client_errors"] and report["warmup_unexpected"] == 0
    res = report["resources"]
    assert res["problems"] == []
    before, after = checked_figures(res["before"]), checked_figures(res["after"])
    assert before == after
    # nothing of the run is alive on the server, and the figures are real
    for key in ("default.prepared_models", "default.buffers", "default.fences"):
        assert after[key] == 0
    assert after["threads"] > 1 and after["open_files"] > 0
    assert res["after"]["rss_bytes"] > 0
    assert report["ok"] and code == 0


@pytest.mark.timeout(300)
def test_injected_fault_gives_unexpected_statuses_and_exit_1(tmp_path, capsys) -> None:
    profile = tmp_path / "faulty.toml"
    profile.write_text(
        'name = "faulty"\n[faults]\n[[faults.rules]]\nmethod = "execute*"\n'
        'operation = "FULLY_CONNECTED"\nstatus = "GENERAL_FAILURE"\n'
    )
    mix = "add=1,while_fib=1,invalid=1,while_infinite=0,deadline_passed=0,deadline_expires=0,"
    mix += "burst=0,fenced=0,fenced_wait=0,buffer=0,churn=0,add_shared=0"
    code, report = _run(
        capsys, "--clients", "2", "--executions", "20", "--profile", str(profile), "--mix", mix
    )
    assert code == 1 and not report["ok"]
    fib = report["kinds"]["while_fib"]
    assert fib["calls"] > 0 and fib["outcomes"] == {"GENERAL_FAILURE": fib["calls"]}
    assert fib["unexpected"] == fib["calls"] == report["unexpected"]
    assert "GENERAL_FAILURE" in fib["unexpected_samples"][0]
    assert report["kinds"]["add"]["unexpected"] == report["kinds"]["invalid"]["unexpected"] == 0
    assert report["resources"]["problems"] == []  # a failed call leaks nothing either

    # the human-readable form says why
    assert main(["stress", "--clients", "1", "--executions", "6", "--profile", str(profile),
                 "--mix", mix, "--seed", "3"]) == 1  # fmt: skip
    out = capsys.readouterr().out
    assert "UNEXPECTED" in out and "FAILED:" in out and "unexpected while_fib" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--executions", "0"], "needs an end"),
        (["--clients", "0"], "--clients"),
        (["--mix", "add"], "KIND=WEIGHT"),
        (["--mix", "nosuchkind=1"], "unknown kinds"),
        (["--duration", "-1"], "--duration"),
        (["127.0.0.1:1", "--profile", "default"], "--profile"),
        (["nohost"], "bad address"),
    ],
)
def test_usage_errors(args, message, capsys) -> None:
    assert main(["stress", *args]) == 2
    assert message in capsys.readouterr().err


def test_no_server_at_the_address(capsys) -> None:
    assert main(["stress", "127.0.0.1:1", "--clients", "1", "--executions", "1"]) == 1
    assert "no nnhal server answers at 127.0.0.1:1" in capsys.readouterr().err


def test_plan_kinds_covers_then_draws_by_weight() -> None:
    rng = np.random.default_rng(0)
    kinds = list(plan_kinds(rng, DEFAULT_WEIGHTS, 5000, cover=True))
    assert len(kinds) == 5000 and kinds[: len(KINDS)] == list(DEFAULT_WEIGHTS)
    counts = {k: kinds.count(k) for k in KINDS}
    assert counts["add"] > 2 * counts["churn"]  # weights 4 and 1
    only = list(plan_kinds(rng, {"add": 0, "invalid": 1}, 10, cover=True))
    assert only == ["invalid"] * 10


# ---------------------------------------------------------------------------
# getResourceUsage and the leak check on a real server
# ---------------------------------------------------------------------------


@pytest.fixture
def fresh_server():
    from nnhal.driver.device import Device
    from nnhal.driver.service import create_server

    from nnhal.control import Control

    server, address = create_server(Device(), "127.0.0.1:0")
    control = Control(address)
    try:
        yield address, control
    finally:
        control.close()
        server.stop(None).wait()


@contextmanager
def _holding_objects(device: Any) -> Iterator[None]:
    """A prepared model, a driver buffer, a client fence, a fenced execution waiting for it
    (in a thread), a burst with a shared-memory slot and an open file; all released after."""
    from nnhal._client_io import IoPlan
    from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
    from nnhal.client import _rpc
    from nnhal.control import create_fence, signal_fence, wait_fence
    from nnhal.types import BufferDesc, BufferRole

    prepared = device.prepareModel_1_3(add_model())
    role = BufferRole(modelIndex=0, ioIndex=0, frequency=1.0)
    buffer = device.allocate(BufferDesc(), [prepared], [role], [role])
    fence = create_fence(device)
    x = np.ones((2, 3), np.float32)
    plan = IoPlan(prepared.model, [x, x], None, "shared")
    fenced = prepared.executeFenced(plan.request, waitFor=[fence])  # waits in a thread
    burst = prepared.burst()
    burst.register(plan.request.pools[0])  # the server maps the segment in a slot
    handle = open(__file__)  # noqa: SIM115 - one more descriptor in this process
    try:
        yield
    finally:
        handle.close()
        burst.close()
        signal_fence(device, fence)
        assert wait_fence(device, fenced.syncFence, 10.0) == "SIGNALED"
        np.testing.assert_array_equal(plan.read_outputs((), {})[0], x + x)
        fenced.callback.release()
        _rpc(device.fence_stub.release, ppb.ReleaseRequest(id=fence))
        plan.close()
        buffer.release()
        prepared.release()


@pytest.mark.timeout(120)
def test_resource_usage_sees_objects_handles_and_threads(fresh_server, capsys) -> None:
    from nnhal.tools.stress import _saturate

    from nnhal.client import connect

    address, control = fresh_server
    with connect(address, session=False) as device:
        # as `nnhal stress` does: the worker pool at its full size, lazy allocations made
        _saturate(address, 20)
        with _holding_objects(device):
            pass
        before = settled_usage(control, 5.0)
        assert before["pid"] == os.getpid() and before["rss_kind"] == "current"
        with _holding_objects(device):
            now = control.resource_usage()
            problems = "\n".join(compare(before, now, 64.0))
            for key, delta in [
                ("default.prepared_models", 1),
                ("default.buffers", 1),
                ("default.fences", 2),  # the client fence and the execution's sync fence
                ("default.fenced_executions", 1),
                ("default.fenced_active", 1),
                ("threads", 1),  # at least: the fenced execution's waiting thread
            ]:
                assert key in problems
                got, was = checked_figures(now)[key], checked_figures(before)[key]
                assert got - was >= delta if key == "threads" else got - was == delta, key
            assert now["open_files"] > before["open_files"]
            # the client's own mapping and the server's slot (one process here)
            assert now["shm_mappings"] >= before["shm_mappings"] + 2
            assert now["shm_segments"] == before["shm_segments"] + 1
            # this server's 16 workers (max_workers), and those of any other server of
            # this process (the suite's shared one)
            assert now["python_threads"]["nnhal-rpc_*"] >= 16
        # everything released: the figures come back
        after = settled_usage(control, 10.0, like=before)
        assert compare(before, after, 64.0) == [], (before, after)

    assert main(["resources", address]) == 0
    usage = json.loads(capsys.readouterr().out)
    assert usage["devices"]["default"]["objects"]["prepared_models"] == 0
    assert usage["devices"]["default"]["executions_in_flight"] == 0


@pytest.mark.timeout(60)
def test_executions_in_flight_are_counted(fresh_server) -> None:
    from nnhal.tools.stress_client import INFINITE_INPUTS, infinite_model

    from nnhal.client import connect
    from nnhal.errors import MissedDeadline

    address, control = fresh_server
    with connect(address, session=False) as device:
        looping = device.prepareModel_1_3(infinite_model())
        future = looping.execute_async(INFINITE_INPUTS, loop_timeout_ns=3_000_000_000)
        seen = 0
        while not seen and not future.done():  # it loops for 3 s: polling will see it
            seen = control.resource_usage()["devices"]["default"]["executions_in_flight"]
        with pytest.raises(MissedDeadline):
            future.result(timeout=30)
        assert seen == 1
        assert settled_usage(control, 5.0)["devices"]["default"]["executions_in_flight"] == 0
        looping.release()


def test_compare_rss_rule() -> None:
    base = {"rss_bytes": 100 * 2**20, "threads": 3, "devices": {}}
    assert compare(base, {**base, "rss_bytes": 150 * 2**20}, 64.0) == []
    grown = compare(base, {**base, "rss_bytes": 200 * 2**20}, 64.0)
    assert len(grown) == 1 and "grew by 100.0 MiB" in grown[0]
    assert compare(base, {**base, "threads": 4}, 64.0) == ["threads: 3 before, 4 after"]


@pytest.mark.timeout(300)
def test_clients_use_the_chosen_device(capsys) -> None:
    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile
    from nnhal.driver.service import create_server

    from nnhal.control import Control

    devices = [Device(load_profile("default")), Device(load_profile("example-npu"))]
    server, address = create_server(devices, "127.0.0.1:0")
    try:
        code, report = _run(
            capsys, address, "--device", "example-npu", "--clients", "2", "--executions", "15"
        )
        assert not report["own_server"] and report["devices"] == ["default", "example-npu"]
        assert report["unexpected"] == 0 and not report["client_errors"]
        with Control(address) as control:
            npu = control.trace("example-npu")
            assert any(e["method"].startswith("execute") for e in npu)
            assert not any(e["method"].startswith("execute") for e in control.trace("default"))
        assert code == 0 and report["ok"], report["resources"]["problems"]

        assert main(["stress", address, "--device", "nosuch", "--executions", "1"]) == 1
        assert "no device 'nosuch'" in capsys.readouterr().err
    finally:
        server.stop(None).wait()


@pytest.mark.timeout(300)
def test_a_server_that_stops_answering_cannot_hang_the_run(tmp_path, capsys) -> None:
    profile = tmp_path / "slow.toml"
    profile.write_text(
        'name = "slow"\n[faults]\n[[faults.rules]]\nmethod = "execute*"\nlatency_ms = 3000.0\n'
    )
    mix = ",".join(f"{kind}={int(kind == 'add')}" for kind in KINDS)
    code, report = _run(capsys, "--profile", str(profile), "--clients", "1", "--executions",
                        "3", "--mix", mix, "--call-timeout", "0.5", "--settle", "2")  # fmt: skip
    assert code == 1 and not report["ok"]
    add = report["kinds"]["add"]
    assert add["outcomes"] == {"DEVICE_UNAVAILABLE": 3} and add["unexpected"] == 3
    assert "DEADLINE_EXCEEDED" in add["unexpected_samples"][0]


@pytest.mark.timeout(60)
def test_sessions_are_counted_and_the_reaper_ends_with_the_last(fresh_server) -> None:
    from nnhal.client import connect

    address, control = fresh_server
    assert control.resource_usage()["sessions"] == {
        "open": 0, "running": 0, "expired": 0, "reaper": False
    }  # fmt: skip
    with connect(address) as one, connect(address):
        one.prepareModel_1_3(add_model())  # owned by its session: released when it ends
        usage = control.resource_usage()
        assert usage["sessions"]["open"] == 2 and usage["sessions"]["reaper"]
        assert usage["devices"]["default"]["objects"]["prepared_models"] == 1
    # ending the last session ends the reaper thread at once (not a lease later)
    idle = settled_usage(control, 5.0)
    assert idle["sessions"] == {"open": 0, "running": 0, "expired": 0, "reaper": False}
    assert idle["devices"]["default"]["objects"]["prepared_models"] == 0


def test_compare_counts_only_growth_as_a_leak() -> None:
    """A figure that went down (a connection open before the run closed during it) is
    no leak; one that went up is, and unknown figures are not compared."""
    base = {"threads": 25, "open_files": 11, "shm_mappings": 0, "rss_bytes": 0}
    assert compare(base, {**base, "open_files": 10, "threads": 24}, 64.0) == []
    assert compare(base, {**base, "open_files": 12}, 64.0) == ["open_files: 11 before, 12 after"]
    assert compare(base, {**base, "shm_mappings": None}, 64.0) == []


def test_compare_leaves_out_the_call_pool_threads() -> None:
    """The server's call pool grows when calls overlap (more often on a loaded machine)
    and never shrinks: its threads are no leak; any other new thread is."""
    pool = "nnhal-rpc_*"
    base = {"threads": 13, "python_threads": {pool: 4, "MainThread": 1}, "rss_bytes": 0}
    grown_pool = {"threads": 15, "python_threads": {pool: 6, "MainThread": 1}, "rss_bytes": 0}
    assert compare(base, grown_pool, 64.0) == []
    other = {"threads": 15, "python_threads": {pool: 4, "nnhal-fenced": 2}, "rss_bytes": 0}
    assert compare(base, other, 64.0) == ["threads: 9 before, 11 after"]

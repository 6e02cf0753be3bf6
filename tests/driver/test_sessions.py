"""Client sessions (nnhal.driver.sessions, nnhal._client_session) and cancellable executions.

A client's objects are released when it closes its Device, when it drops the
Device without closing it, and when it dies (a real client process killed
with SIGKILL: its lease runs out); its execution still running is cancelled
when its call ends early. Objects of session-less clients stay, as in the HAL.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from nnhal.cts.families.control_flow import infinite_loop
from nnhal.driver._service_support import Registry
from nnhal.driver.device import Device as DriverDevice
from nnhal.driver.executor import compile_model
from nnhal.driver.executor.model import Cancel
from nnhal.driver.server import create_server
from nnhal.driver.sessions import MAX_LEASE_MS, MIN_LEASE_MS, SessionTable
from repo_paths import REPO_ROOT

from nnhal import control
from nnhal._proto.v1_3 import control_pb2 as cpb
from nnhal._proto.v1_3 import control_pb2_grpc as cgrpc
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import prepared_model_pb2_grpc as pgrpc
from nnhal.client import connect
from nnhal.errors import GeneralFailure, InvalidArgument
from nnhal.types import ErrorStatus

REPO = REPO_ROOT


def _wait_for(predicate, timeout_s: float = 20.0, what: str = "condition"):
    """Poll until ``predicate()`` is truthy (a hang guard, not a speed check)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not reached within {timeout_s} s")


#: address -> the in-process server's device state (objects are private to their
#: client, so another client cannot probe them: tests look in the registries)
_STATES: dict[str, object] = {}


@pytest.fixture
def server():
    srv, address = create_server(DriverDevice(), "127.0.0.1:0")
    _STATES[address] = next(iter(srv.states.values()))
    try:
        yield address
    finally:
        _STATES.pop(address, None)
        srv.stop(grace=None).wait()


def _probe_status(address: str, kind: str, key: int) -> str:
    """The message a non-mutating call about object ``key`` gets ("unknown ... id" once gone)."""
    channel = grpc.insecure_channel(address)
    try:
        if kind == "prepared":  # an empty request: unknown id first, else a request error
            reply = pgrpc.IPreparedModelStub(channel).execute_1_3(
                ppb.ExecuteRequest_1_3(preparedModel=key), timeout=10
            )
        elif kind == "buffer":
            reply = pgrpc.IBufferStub(channel).copyFrom(ppb.CopyFromRequest(buffer=key), timeout=10)
        elif kind == "fence":
            reply = pgrpc.ISyncFenceStub(channel).waitFence(
                ppb.WaitFenceRequest(fence=key), timeout=10
            )
        else:
            reply = pgrpc.IFencedExecutionCallbackStub(channel).getExecutionInfo(
                ppb.GetExecutionInfoRequest(callback=key), timeout=10
            )
        return reply.message
    finally:
        channel.close()


_REGISTRIES = {
    "prepared": "prepared_models",
    "buffer": "buffers",
    "fence": "fences",
    "callback": "fenced_executions",
}


def _gone(address: str, kind: str, key: int) -> bool:
    # another client is told "unknown" whether or not the object lives
    assert "unknown" in _probe_status(address, kind, key)
    state = _STATES[address]
    return getattr(state, _REGISTRIES[kind]).peek(key) is None


def _shm_mappings() -> int | None:
    """Shared-memory segments mapped in this process (the in-process server), on Linux."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return None
    return sum("/dev/shm/" in line for line in maps.read_text().splitlines())


def _add_model():
    sys.path.insert(0, str(REPO / "tests"))
    try:
        from dying_client import add_model
    finally:
        sys.path.pop(0)
    return add_model()


# ---------------------------------------------------------------------------
# The executor's Cancel
# ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("each_executor")  # generated and interpreted
def test_cancel_stops_an_endless_loop_from_another_thread():
    model, inputs = infinite_loop()
    compiled = compile_model(model)
    cancel = Cancel()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            compiled.run(inputs, loop_timeout_ns=15 * 10**9, cancel=cancel)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.2)
    cancel.cancel("the test cancelled it")
    thread.join(timeout=30)
    assert not thread.is_alive(), "the cancelled execution went on"
    assert len(outcome) == 1 and isinstance(outcome[0], GeneralFailure)
    assert outcome[0].message == "execution cancelled: the test cancelled it"


@pytest.mark.usefixtures("each_executor")  # generated and interpreted
def test_cancel_keeps_the_deadline_and_does_not_touch_a_finished_run():
    model, inputs = infinite_loop()
    compiled = compile_model(model)
    cancel = Cancel()
    with pytest.raises(Exception) as info:  # the deadline still applies with a Cancel
        compiled.run(inputs, deadline_ns=time.monotonic_ns() + 50_000_000, cancel=cancel)
    assert type(info.value).__name__ == "MissedDeadline" and not cancel.cancelled
    add = compile_model(_add_model())
    x = np.ones(2, np.float32)
    done = Cancel()
    assert add.run([x, x], cancel=done)[0].tolist() == [2.0, 2.0]
    done.cancel("too late")  # after the run: nothing to stop, no error
    already = Cancel()
    already.cancel("before it started")
    with pytest.raises(GeneralFailure, match="cancelled: before it started"):
        add.run([x, x], cancel=already)


# ---------------------------------------------------------------------------
# Ownership bookkeeping
# ---------------------------------------------------------------------------


def test_registry_tracks_owners_through_pop_take_and_eviction():
    registry: Registry[str] = Registry("thing", capacity=3)
    a = registry.add("a", owner="s1")
    b = registry.add("b", owner="s1")
    registry.add("c")  # no owner
    registry.pop(a, None)
    assert registry.owned("s1") == 1
    registry.add("d", owner="s2")
    registry.add("e")  # over capacity: evicts the oldest ("b")
    assert registry.owned("s1") == 0 and registry.peek(b) is None
    assert [obj for _, obj in registry.take_owned("s2")] == ["d"]
    assert registry.take_owned("s2") == [] and len(registry) == 2


def test_an_evicted_fence_is_put_in_error_so_its_waiters_end():
    from nnhal.driver._service_support import ServiceState
    from nnhal.driver.fences import ERROR, Fence

    state = ServiceState(DriverDevice())
    waited = Fence(client_created=True)
    state.fences.add(waited)
    for _ in range(state.fences.capacity):
        state.fences.add(Fence(client_created=True))
    assert waited.wait(0) == ERROR


def test_session_table_clamps_leases_and_rejects_an_empty_id():
    released: list[str] = []
    table = SessionTable(lambda s, reason: released.append(s) or 0)
    try:
        assert table.keep_alive("s", 1) == MIN_LEASE_MS
        assert table.keep_alive("s", 10**9) == MAX_LEASE_MS
        with pytest.raises(InvalidArgument, match="empty session id"):
            table.keep_alive("")
        cancel = Cancel()
        with table.running("s", cancel):
            assert table.running_count() == 1
            table.end("s", "the test ended it")
        assert cancel.reason == "the test ended it" and released == ["s"]
        assert len(table) == 0 and table.running_count() == 0
    finally:
        table.close()


def test_an_expired_lease_releases_and_a_renewed_one_does_not():
    released: list[str] = []
    table = SessionTable(lambda s, reason: released.append(s) or 0)
    try:
        table.keep_alive("short", MIN_LEASE_MS)
        table.keep_alive("long", 60_000)
        before = table._expiry["long"]
        table.keep_alive("long", 60_000)  # a renewal moves the expiry on
        assert table._expiry["long"] > before
        _wait_for(lambda: "short" in released, what="expiry of 'short'")
        assert "long" not in released and table.expired == 1 and len(table) == 1
    finally:
        table.close()


# ---------------------------------------------------------------------------
# Over gRPC
# ---------------------------------------------------------------------------


def test_keep_alive_rpc(server):
    channel = grpc.insecure_channel(server)
    stub = cgrpc.INnhalControlStub(channel)
    try:
        reply = stub.keepAlive(cpb.KeepAliveRequest(session=""), timeout=10)
        assert reply.status == ErrorStatus.INVALID_ARGUMENT and "empty session id" in reply.message
        reply = stub.keepAlive(cpb.KeepAliveRequest(session="x"), timeout=10)
        assert reply.status == ErrorStatus.NONE and reply.leaseMillis == 10_000
        reply = stub.endSession(cpb.EndSessionRequest(session="x"), timeout=10)
        assert reply.status == ErrorStatus.NONE and json.loads(reply.json) == {"released": 0}
    finally:
        channel.close()


def test_close_releases_everything_the_client_still_holds(server):
    device = connect(server, lease_s=5.0)
    prepared = device.prepareModel_1_3(_add_model())
    fence = control.create_fence(device)
    key = prepared.id
    assert not _gone(server, "prepared", key)
    device.close()  # the prepared model was never released by the client
    assert _gone(server, "prepared", key) and _gone(server, "fence", fence)


def test_a_dropped_device_ends_its_session(server):
    device = connect(server, lease_s=60.0)
    key = device.prepareModel_1_3(_add_model()).id
    del device
    gc.collect()
    _wait_for(lambda: _gone(server, "prepared", key), what="release after the Device was dropped")


def test_session_less_objects_stay_as_in_the_hal(server):
    device = connect(server, session=False)
    assert device.session is None
    key = device.prepareModel_1_3(_add_model()).id
    device.close()
    assert not _gone(server, "prepared", key)


@pytest.mark.timeout(60)
def test_a_call_that_ends_early_cancels_its_execution(server):
    """The client gives up (gRPC deadline) on an endless loop: the server stops it."""
    from nnhal._client_io import IoPlan
    from nnhal.convert import optional_timeout_to_pb, request_to_pb

    device = connect(server, session=False)
    model, inputs = infinite_loop()
    prepared = device.prepareModel_1_3(model)
    plan = IoPlan(model, inputs, None, "inline")
    message = ppb.ExecuteRequest_1_3(
        preparedModel=prepared.id,
        request=request_to_pb(plan.request),
        loopTimeoutDuration=optional_timeout_to_pb(15 * 10**9),
    )
    with pytest.raises(grpc.RpcError) as info:
        device.prepared_model_stub.execute_1_3(message, timeout=0.5)
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    with control.Control(server) as ctl:
        entry = _wait_for(
            lambda: next((e for e in ctl.trace() if e["method"] == "execute_1_3"), None),
            timeout_s=12.0,  # well below the 15 s loop timeout: it was cancelled
            what="the cancelled execution in the trace",
        )
    assert entry["status"] == "GENERAL_FAILURE"
    assert "execution cancelled: the call ended" in entry["message"]
    device.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_killed_client_process_leaves_nothing_behind(server):
    """SIGKILL a real client holding a prepared model, a driver buffer, a client fence, a
    fenced execution waiting for it, an open burst, a burst running endless loops and an
    endless execution in shared memory."""
    mappings_before = _shm_mappings()
    child = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "driver" / "dying_client.py"), server, "2.0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])},
    )
    try:
        line = child.stdout.readline()
        assert line, f"the client process exited early (code {child.poll()})"
        ids = json.loads(line)
        for key in ids["prepared"]:
            assert not _gone(server, "prepared", key)
        assert not _gone(server, "buffer", ids["buffer"])
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()

    for key in ids["prepared"]:
        _wait_for(lambda k=key: _gone(server, "prepared", k), what=f"release of model {key}")
    assert _gone(server, "buffer", ids["buffer"])
    assert _gone(server, "fence", ids["fence"])
    assert _gone(server, "callback", ids["callback"])
    assert _gone(server, "fence", ids["fenced_sync_fence"])
    loop_id = ids["prepared"][1]

    def cancelled(method: str):
        def find() -> list:
            with control.Control(server) as ctl:
                return [
                    e
                    for e in ctl.trace()
                    if e["method"] == method
                    and e["args"].get("preparedModel") in (loop_id, None)
                    and "execution cancelled" in e.get("message", "")
                ]

        return find

    # "execution cancelled", not a loop timeout: the endless execution was stopped
    (entry,) = _wait_for(
        cancelled("executeSynchronously_1_3"), 30.0, "the cancelled endless execution"
    )
    assert entry["status"] == "GENERAL_FAILURE"
    (burst,) = _wait_for(cancelled("configureExecutionBurst"), 30.0, "the cancelled burst")
    assert burst["status"] == "GENERAL_FAILURE"
    if mappings_before is not None:  # the server unmapped the dead client's segment
        _wait_for(lambda: _shm_mappings() == mappings_before, what="unmapping of the segment")
    # and the server serves the next client as before
    with connect(server) as device:
        x = np.ones(2, np.float32)
        assert device.prepareModel_1_3(_add_model()).execute([x, x]).outputs[0].tolist() == [2, 2]

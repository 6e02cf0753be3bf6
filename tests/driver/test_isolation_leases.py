"""A busy server never takes a live client for a dead one (driver/sessions.py).

- while calls wait for a server thread (renewals among them), no lease runs out;
- a session with a call being served (a long preparation) keeps its objects even
  when nothing renews it meanwhile, and its lease restarts when the call ends;
- (slow) a compile-heavy preparation over gRPC on a real ``nnhal serve``, far
  longer than the client's 5 s lease, keeps the client's objects.
"""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np
import pytest
from dying_client import add_model
from nnhal.driver.device import Device
from nnhal.driver.faults import parse_toml
from nnhal.driver.server import create_server
from nnhal.driver.streams import StreamLimits

from nnhal import control
from nnhal._client_security import ClientSecurity
from nnhal._proto.v1_3 import control_pb2 as cpb
from nnhal._proto.v1_3 import control_pb2_grpc as cgrpc
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import device_pb2_grpc as dgrpc
from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.control import SESSION_HEADER
from nnhal.convert import model_to_pb
from nnhal.types import OperandType, OperationType

X = np.ones(2, np.float32)
SLOW_VERSION = """
[[rules]]
method = "getVersionString"
latency_ms = 3000
"""
SLOW_PREPARE = """
[[rules]]
method = "prepareModel_1_3"
latency_ms = 3000
"""


@pytest.fixture
def tiny_server():
    """One unary worker, no stream threads: a handful of slow calls is a backlog."""
    server, address = create_server(
        Device(), "127.0.0.1:0", max_workers=1, streams=StreamLimits(0, 0, 0, 0)
    )
    state = next(iter(server.states.values()))
    try:
        yield address, state
    finally:
        server.stop(None).wait()


@pytest.mark.slow  # waits out leases and stream timeouts on the wall clock
def test_no_lease_runs_out_while_calls_wait_for_a_thread(tiny_server):
    address, state = tiny_server
    # a 1 s lease (renewed every ~0.33 s when the client gets to run): well under
    # the 3 to 6 s its renewals wait behind the slow calls, yet not so short
    # that a starved client process on a loaded host misses it on its own
    client = connect(address, lease_s=1.0)
    try:
        fence = control.create_fence(client)
        state.faults.set(parse_toml(SLOW_VERSION))
        channel = grpc.insecure_channel(address)
        stub = dgrpc.IDeviceStub(channel)
        slow = [
            threading.Thread(target=lambda: stub.getVersionString(dpb.DeviceQuery(), timeout=120))
            for _ in range(8)
        ]
        for t in slow:
            t.start()
        for t in slow:  # 6 s with calls queued for the 5 threads, renewals stuck behind them
            t.join()
        state.faults.set(None)
        channel.close()
        assert state.fences.peek(fence) is not None
        assert control.wait_fence(client, fence) == "ACTIVE"
    finally:
        client.close()


@pytest.mark.slow  # waits out leases and stream timeouts on the wall clock
def test_a_long_call_keeps_its_session_without_renewals(tiny_server):
    address, state = tiny_server
    session = "long-call-session"
    channel = grpc.insecure_channel(address)
    try:
        meta = ((SESSION_HEADER, session),)
        control_stub = cgrpc.INnhalControlStub(channel)
        reply = control_stub.keepAlive(
            cpb.KeepAliveRequest(session=session, leaseMillis=200), timeout=30
        )
        assert reply.leaseMillis == 200
        from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
        from nnhal._proto.v1_3 import prepared_model_pb2_grpc as pgrpc

        fence = pgrpc.ISyncFenceStub(channel).createFence(
            ppb.CreateFenceRequest(), metadata=meta, timeout=30
        ).fence
        state.faults.set(parse_toml(SLOW_PREPARE))
        prepared = dgrpc.IDeviceStub(channel).prepareModel_1_3(
            dpb.PrepareModelRequest_1_3(model=model_to_pb(add_model())), metadata=meta, timeout=60
        )
        state.faults.set(None)
        assert prepared.status == 0, prepared.message
        # nothing renewed the 0.2 s lease during the 3 s call: the call itself kept it
        assert state.fences.peek(fence) is not None
        assert state.prepared_models.peek(prepared.preparedModel) is not None
        # and once the client is silent for a lease, it is gone
        end = time.monotonic() + 30
        while state.prepared_models.peek(prepared.preparedModel) is not None:
            assert time.monotonic() < end, "the silent session never expired"
            time.sleep(0.05)
        assert state.fences.peek(fence) is None
    finally:
        channel.close()


def chain_model(n: int):
    """n ADDs in a chain: a preparation whose compilation takes the interpreter a while."""
    mb = ModelBuilder()
    g = mb.main
    x = g.input(OperandType.TENSOR_FLOAT32, [2])
    zero = g.constant(OperandType.INT32, 0)
    for i in range(n):
        y = (
            g.output(OperandType.TENSOR_FLOAT32, [2])
            if i == n - 1
            else g.temporary(OperandType.TENSOR_FLOAT32, [2])
        )
        g.operation(OperationType.ADD, [x, x, zero], [y])
        x = y
    return mb.build()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_compile_heavy_preparation_keeps_the_clients_objects(tmp_path):
    from test_isolation_streams import serve_process

    limits = ("--limit", "max_operations=100000", "--limit", "max_operands=100010")
    proc, address, token = serve_process(tmp_path, *limits)
    try:
        # The lease restarts when the preparation's call ends; the client's next call must
        # come within it. Freeing a large model on both sides lies in that gap, and on a
        # heavily oversubscribed machine a 2 s lease was seen to run out there (the
        # preparation took 12.5 s). 5 s leaves room for that; 100,000 operations keep the
        # preparation about twice as long on an idle machine (about 0.1 ms per operation).
        lease_s = 5.0
        with connect(address, lease_s=lease_s, security=ClientSecurity(token=token)) as dev:
            small = dev.prepareModel_1_3(add_model())
            fence = control.create_fence(dev)
            t0 = time.monotonic()
            big = dev.prepareModel_1_3(chain_model(100_000))
            took = time.monotonic() - t0
            print(f"compile-heavy preparation: {took:.1f} s with a {lease_s:.0f} s lease")
            np.testing.assert_array_equal(small.execute([X, X]).outputs[0], X + X)
            assert control.wait_fence(dev, fence) == "ACTIVE"
            assert big.execute([X]).outputs[0].shape == (2,)
    finally:
        proc.terminate()
        proc.wait(timeout=60)

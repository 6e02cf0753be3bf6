"""What a failed or abandoned execution held is given back (driver/memory.py).

Against a real ``nnhal serve`` process (slow):
- five clients SIGKILLed in the middle of executions on shared memory: the
  server soon maps no segment of theirs (getResourceUsage and /proc/PID/maps);
- a WHILE whose body doubles a tensor until the tensor-size limit stops it,
  run three times: the server's RSS comes back near where it started.
In process (fast): an execution that ends with an error (loop timeout,
deadline) leaves no mapping behind, without waiting for the garbage collector.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from nnhal.cts.families.control_flow import infinite_loop
from nnhal.driver.device import Device
from nnhal.driver.server import create_server
from repo_paths import REPO_ROOT
from test_isolation_streams import serve_process

from nnhal._client_security import ClientSecurity
from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.errors import HalError
from nnhal.types import OperandType, OperationType

F32, I32 = OperandType.TENSOR_FLOAT32, OperandType.TENSOR_INT32
BOOL8 = OperandType.TENSOR_BOOL8


def doubling_loop(n: int = 1 << 16):
    """WHILE(true) { k = 2 k; s = sum(TILE(x, k)) }: the TILE inside the body doubles every
    iteration until the tensor-size limit stops it (WHILE operands themselves are fixed)."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    cond.input(I32, [1])
    cond.input(F32, [1])
    cond.input(F32, [n])
    ci, cn = cond.input(I32, [1]), cond.input(I32, [1])
    flag = cond.output(BOOL8, [1])
    cond.operation(OperationType.GREATER_EQUAL, [ci, cn], [flag])
    bk, _ = body.input(I32, [1]), body.input(F32, [1])
    bx = body.input(F32, [n])
    body.input(I32, [1])
    body.input(I32, [1])
    k2, s2 = body.output(I32, [1]), body.output(F32, [1])
    two = body.constant(I32, np.array([2], np.int32))
    body.operation(OperationType.MUL, [bk, two, body.constant(OperandType.INT32, 0)], [k2])
    tiled = body.temporary(F32, [0])
    body.operation(OperationType.TILE, [bx, k2], [tiled])
    axes = body.constant(I32, np.array([0], np.int32))
    keep = body.constant(OperandType.BOOL, True)
    body.operation(OperationType.REDUCE_SUM, [tiled, axes, keep], [s2])
    g = mb.main
    k, s = g.input(I32, [1]), g.input(F32, [1])
    x, i, m = g.input(F32, [n]), g.input(I32, [1]), g.input(I32, [1])
    ko, so = g.output(I32, [1]), g.output(F32, [1])
    g.operation(
        OperationType.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), k, s, x, i, m], [ko, so]
    )
    inputs = [
        np.array([1], np.int32),
        np.zeros(1, np.float32),
        np.ones(n, np.float32),
        np.array([1], np.int32),
        np.array([0], np.int32),
    ]
    return mb.build(), inputs


def _maps_of(pid: int) -> int:
    return sum("/dev/shm/" in line for line in Path(f"/proc/{pid}/maps").read_text().splitlines())


def _wait_until(predicate, timeout_s: float = 30.0) -> float | None:
    """Seconds until ``predicate()`` held (None: it never did within ``timeout_s``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if predicate():
            return time.monotonic() - t0
        time.sleep(0.02)
    return None


def test_failed_executions_leave_no_mapping_without_the_collector():
    server, address = create_server(Device(), "127.0.0.1:0")
    try:
        with connect(address) as dev:
            model, inputs = infinite_loop()
            prepared = dev.prepareModel_1_3(model)
            before = _maps_of(os.getpid())
            gc.disable()  # the point: no cyclic collection is needed
            try:
                for kwargs in (
                    {"loop_timeout_ns": 100_000_000},
                    {"loop_timeout_ns": 10**10, "deadline_ns": time.monotonic_ns() + 10**8},
                ):
                    with pytest.raises(HalError):
                        prepared.execute(inputs, memory="shared", **kwargs)
                # the reply is sent after the pools were unmapped: nothing to wait for
                assert _maps_of(os.getpid()) == before
            finally:
                gc.enable()
    finally:
        server.stop(None).wait()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_killed_clients_leave_no_segment_mapped(tmp_path):
    proc, address, token = serve_process(tmp_path)
    security = ClientSecurity(token=token)
    children = []
    try:
        with connect(address, security=security) as observer:
            baseline = _maps_of(proc.pid)
            env = {**os.environ, "NNHAL_TOKEN": token}
            for _ in range(5):
                children.append(
                    subprocess.Popen(
                        [sys.executable, str(REPO_ROOT / "tests" / "driver" / "dying_client.py"),
                         address, "60.0"],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                    )
                )
            for child in children:
                assert child.stdout.readline(), "a client process exited early"
            # each is running an endless execution on its shared memory now
            assert _wait_until(lambda: _maps_of(proc.pid) >= baseline + 5) is not None
            held = _maps_of(proc.pid) - baseline
            for child in children:
                child.send_signal(signal.SIGKILL)
            for child in children:
                child.wait(timeout=30)

            took = _wait_until(lambda: _maps_of(proc.pid) == baseline)
            assert took is not None, f"{_maps_of(proc.pid) - baseline} segments still mapped"
            reported = _reported_mappings(observer)
            assert reported is None or reported == baseline
            print(json.dumps({"segments_held_before_kill": held, "released_after_s": took}))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
        proc.terminate()
        proc.wait(timeout=60)


def _reported_mappings(device) -> int | None:
    """shm_mappings as getResourceUsage reports it (None when the platform cannot say)."""
    from nnhal._proto.v1_3 import control_pb2 as cpb
    from nnhal._proto.v1_3 import control_pb2_grpc as cgrpc

    reply = cgrpc.INnhalControlStub(device.channel).getResourceUsage(
        cpb.ResourceUsageRequest(), timeout=30
    )
    return json.loads(reply.json).get("shm_mappings")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_memory_comes_back_after_failed_loops(tmp_path):
    limit = 128 << 20
    proc, address, token = serve_process(tmp_path, "--limit", f"max_tensor_bytes={limit}")
    try:
        with connect(address, security=ClientSecurity(token=token)) as dev:
            model, inputs = doubling_loop()
            prepared = dev.prepareModel_1_3(model)
            rss = [_rss_of(proc.pid)]
            for _ in range(3):
                with pytest.raises(HalError) as info:
                    prepared.execute(inputs, loop_timeout_ns=30 * 10**9)
                assert "max_tensor_bytes" in info.value.message
                rss.append(_rss_of(proc.pid))
            print(json.dumps({"rss_mb": [round(r / 2**20) for r in rss]}))
            # each run peaked near 3 x 64 MB; none of it may stay
            assert rss[-1] - rss[0] < 100 << 20, rss
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _rss_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")

"""Bursts with the memory-slot cache, and fenced executions with client fences."""

from __future__ import annotations

import time
from multiprocessing import shared_memory

import numpy as np
import pytest

from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal.builder import ModelBuilder
from nnhal.control import create_fence, signal_fence, wait_fence
from nnhal.errors import InvalidArgument
from nnhal.types import (
    DataLocation,
    ErrorStatus,
    InlineMemory,
    OperandType,
    OperationType,
    Request,
    RequestArgument,
    SharedMemory,
)

F32 = OperandType.TENSOR_FLOAT32
DIMS = (2, 3)
N = 24


def add_model():
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, list(DIMS))
    b = g.input(F32, list(DIMS))
    y = g.output(F32, list(DIMS))
    g.operation(OperationType.ADD, [a, b, g.constant(OperandType.INT32, 0)], [y])
    return mb.build()


@pytest.fixture
def prepared(client_device):
    p = client_device.prepareModel_1_3(add_model())
    yield p
    p.release()


def arg(pool, offset=0):
    return RequestArgument(location=DataLocation(pool, offset, N))


def vals(seed):
    return np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)


@pytest.fixture
def segment():
    from nnhal._client_io import unlink_segment

    seg = shared_memory.SharedMemory(create=True, size=3 * N)
    yield seg
    unlink_segment(seg)


def test_burst_slots(prepared, segment) -> None:
    a, b = vals(1), vals(2)
    view = np.ndarray((3, *DIMS), np.float32, buffer=segment.buf)
    view[0], view[1] = a, b
    request = Request(
        inputs=(arg(0, 0), arg(0, N)),
        outputs=(arg(0, 2 * N),),
        pools=(SharedMemory(segment.name, 3 * N),),
    )
    with prepared.burst() as burst:
        slot = burst.register(SharedMemory(segment.name, 3 * N))
        for k in range(3):  # later executions name the slot only
            view[0] = a + k
            burst.execute_request(request, slots=[slot])
            np.testing.assert_allclose(view[2], a + k + b)
        # an inline slot mixed with a request pool
        inline_slot = burst.register(InlineMemory(a.tobytes() + b.tobytes()))
        mixed = Request(
            inputs=(arg(0, 0), arg(0, N)),
            outputs=(arg(1),),
            pools=(InlineMemory(b""), InlineMemory(bytes(N))),
        )
        result = burst.execute_request(mixed, slots=[inline_slot, -1])
        np.testing.assert_allclose(np.frombuffer(result.pools[1], np.float32).reshape(DIMS), a + b)
        # errors are per request; the burst goes on
        with pytest.raises(InvalidArgument, match="unknown memory slot 77"):
            burst.execute_request(request, slots=[77])
        with pytest.raises(InvalidArgument, match="poolSlots"):
            burst.execute_request(request, slots=[slot, slot])
        burst.freeMemory(slot)
        burst.freeMemory(slot)  # double free: harmless
        burst.freeMemory(12345)  # unknown: harmless
        with pytest.raises(InvalidArgument, match="unknown memory slot"):
            burst.execute_request(request, slots=[slot])
        burst.execute_request(request)  # the pool itself still works
        np.testing.assert_allclose(view[2], a + 2 + b)


def fenced_request():
    a, b = vals(3), vals(4)
    request = Request(
        inputs=(arg(0), arg(1)),
        outputs=(arg(2),),
        pools=(InlineMemory(a.tobytes()), InlineMemory(b.tobytes()), InlineMemory(bytes(N))),
    )
    return request, a + b


def test_fenced_waits_for_a_client_fence(client_device, prepared) -> None:
    request, expected = fenced_request()
    gate = create_fence(client_device)
    first = prepared.executeFenced(request, waitFor=[gate], measure=True)
    assert first.pools == {}  # started in the background
    assert wait_fence(client_device, first.syncFence) == "ACTIVE"
    assert first.callback.getExecutionInfo()[0] == ErrorStatus.GENERAL_FAILURE
    assert "not signalled" in first.callback.message
    # a second execution chained on the first one's fence
    second = prepared.executeFenced(request, waitFor=[first.syncFence])
    signal_fence(client_device, gate)
    with pytest.raises(InvalidArgument, match="already signalled"):
        signal_fence(client_device, gate)
    assert wait_fence(client_device, second.syncFence, 10) == "SIGNALED"
    status, launched, fenced = first.callback.getExecutionInfo()
    assert status == ErrorStatus.NONE
    assert launched.timeOnDevice <= launched.timeInDriver
    assert fenced.timeOnDevice <= fenced.timeInDriver <= launched.timeInDriver
    got = np.frombuffer(first.callback.pools[2], np.float32).reshape(DIMS)
    np.testing.assert_allclose(got, expected)
    with pytest.raises(InvalidArgument, match="execution"):
        signal_fence(client_device, first.syncFence)  # not a client fence


def test_fenced_error_fence_and_deadline(client_device, prepared) -> None:
    request, _ = fenced_request()
    gate = create_fence(client_device)
    run = prepared.executeFenced(request, waitFor=[gate])
    signal_fence(client_device, gate, ErrorStatus.GENERAL_FAILURE)
    assert wait_fence(client_device, run.syncFence, 10) == "ERROR"
    assert run.callback.getExecutionInfo()[0] == ErrorStatus.GENERAL_FAILURE
    with pytest.raises(InvalidArgument, match="in error"):  # an error fence at launch
        prepared.executeFenced(request, waitFor=[gate])
    # a fence that never signals and a 1 ms duration after it: the deadline wins
    never = create_fence(client_device)
    run = prepared.executeFenced(request, waitFor=[never], deadline_ns=time.monotonic_ns() + 10**6)
    assert wait_fence(client_device, run.syncFence, 10) == "ERROR"
    status = run.callback.getExecutionInfo()[0]
    assert status in (ErrorStatus.MISSED_DEADLINE_TRANSIENT, ErrorStatus.MISSED_DEADLINE_PERSISTENT)
    client_device.fence_stub.release(ppb.ReleaseRequest(id=never))

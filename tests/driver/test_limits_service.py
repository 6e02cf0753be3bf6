"""Resource limits at the service: request pools, per-client quotas, concurrent
executions and gRPC message size (driver/limits.py, driver/occupancy.py)."""

from __future__ import annotations

import numpy as np
import pytest
from limits_models import F32, INT32, O, add_model, device_with, serving
from nnhal.driver.limits import check_request_pools
from nnhal.driver.occupancy import ClientQuota, ExecutionSlots

from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.control import create_fence, signal_fence, wait_fence
from nnhal.errors import GeneralFailure, ResourceExhausted
from nnhal.types import (
    BufferDesc,
    BufferRole,
    DataLocation,
    ErrorStatus,
    InlineMemory,
    Request,
    RequestArgument,
    SharedMemory,
)

X = np.array([1.0, 2.0], np.float32)


def _request(input_pool: int, output_pool: int, pools) -> Request:
    return Request(
        inputs=(RequestArgument(location=DataLocation(input_pool, 0, 8)),),
        outputs=(RequestArgument(location=DataLocation(output_pool, 0, 8)),),
        pools=tuple(pools),
    )


# ---------------------------------------------------------------------------
# Request pools: RESOURCE_EXHAUSTED_PERSISTENT
# ---------------------------------------------------------------------------


def test_pool_checks_unit():
    limits = device_with(max_pool_bytes=100, max_request_bytes=150).limits
    check_request_pools(
        _request(0, 1, [InlineMemory(b"\0" * 100), InlineMemory(b"\0" * 50)]), limits
    )
    with pytest.raises(ResourceExhausted) as info:
        check_request_pools(_request(0, 0, [SharedMemory("seg", 101)]), limits)
    assert not info.value.transient
    assert info.value.message == (
        "request pool 0 (shared memory 'seg') is 101 bytes; this device maps at most 100 bytes "
        "per pool (limit max_pool_bytes)"
    )
    with pytest.raises(ResourceExhausted) as info:
        check_request_pools(
            _request(0, 1, [InlineMemory(b"\0" * 100), InlineMemory(b"\0" * 51)]), limits
        )
    assert info.value.message == (
        "the request's 2 pools hold 151 bytes; this device takes at most 150 bytes per request "
        "(limit max_request_bytes)"
    )


def test_pool_limits_over_grpc():
    with serving(device_with(max_pool_bytes=64, max_request_bytes=100)) as (client, _):
        prepared = client.prepareModel_1_3(add_model())
        data = X.tobytes()
        ok = prepared.execute_request(_request(0, 1, [InlineMemory(data), InlineMemory(data)]))
        assert ok.outputShapes[0].dimensions == (2,)
        big = _request(0, 1, [InlineMemory(data + b"\0" * 60), InlineMemory(data)])
        for call in (
            lambda: prepared.execute_request(big),
            lambda: prepared.execute_request(big, synchronous=False),
            lambda: prepared.executeFenced(big),
        ):
            with pytest.raises(ResourceExhausted) as info:
                call()
            assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
            assert "(limit max_pool_bytes)" in info.value.message
        sum_big = _request(0, 1, [InlineMemory(data + b"\0" * 48), InlineMemory(data + b"\0" * 48)])
        with pytest.raises(ResourceExhausted, match=r"hold 112 bytes.*\(limit max_request_bytes\)"):
            prepared.execute_request(sum_big)
        burst = prepared.burst()
        try:
            # bursts are HAL 1.2 (V1_0::ErrorStatus): the status is downgraded
            with pytest.raises(GeneralFailure) as info:
                burst.execute_request(big)
            assert "(limit max_pool_bytes) [RESOURCE_EXHAUSTED_PERSISTENT reported as" in (
                info.value.message
            )
            assert burst.execute_request(_request(0, 0, [InlineMemory(data)])).outputShapes
        finally:
            burst.close()


# ---------------------------------------------------------------------------
# Per-client quotas: RESOURCE_EXHAUSTED_TRANSIENT
# ---------------------------------------------------------------------------


def test_prepared_models_per_client():
    with serving(device_with(max_prepared_models_per_client=2)) as (client, address):
        first = [client.prepareModel_1_3(add_model()) for _ in range(2)]
        with pytest.raises(ResourceExhausted) as info:
            client.prepareModel_1_3(add_model())
        assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
        assert "holds 2 prepared models; the device allows at most 2 per client" in (
            info.value.message
        )
        assert info.value.message.endswith(
            "(limit max_prepared_models_per_client); release some first"
        )
        # another client (its own session) has its own quota
        other = connect(address, timeout=10.0)
        try:
            kept = [other.prepareModel_1_3(add_model()) for _ in range(2)]
            assert kept[1].execute([X]).outputs[0].tolist() == [2.0, 4.0]
        finally:
            other.close()
        # releasing one makes room again
        first[0].release()
        again = client.prepareModel_1_3(add_model())
        assert again.execute([X]).outputs[0].tolist() == [2.0, 4.0]


def test_buffers_per_client():
    with serving(device_with(max_buffers_per_client=1)) as (client, _):
        prepared = client.prepareModel_1_3(add_model())
        roles = {"preparedModels": [prepared], "inputRoles": [BufferRole(0, 0, 1.0)]}
        buffer = client.allocate(BufferDesc(), **roles)
        with pytest.raises(ResourceExhausted) as info:
            client.allocate(BufferDesc(), **roles)
        assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
        assert "holds 1 buffers" in info.value.message
        assert "(limit max_buffers_per_client)" in info.value.message
        buffer.release()
        client.allocate(BufferDesc(), **roles).release()


def test_buffer_above_the_tensor_limit():
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [0])
    y = g.output(F32, [0])
    g.operation(O.ADD, [x, x, g.constant(INT32, 0)], [y])
    with serving(device_with(max_tensor_bytes=400)) as (client, _):
        prepared = client.prepareModel_1_3(mb.build())
        roles = {"preparedModels": [prepared], "inputRoles": [BufferRole(0, 0, 1.0)]}
        with pytest.raises(ResourceExhausted) as info:
            client.allocate(BufferDesc(dimensions=(1000,)), **roles)
        assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
        assert info.value.message == (
            "allocate: the buffer (TENSOR_FLOAT32 [1000]) needs 4000 bytes; this device's "
            "tensors hold at most 400 bytes (limit max_tensor_bytes)"
        )
        client.allocate(BufferDesc(dimensions=(100,)), **roles).release()


def test_quota_forgets_objects_removed_elsewhere():
    from nnhal.driver._service_support import Registry

    registry: Registry = Registry("prepared model")
    quota = ClientQuota(registry, 2, "prepared models", "max_prepared_models_per_client")
    a = quota.add("c1", object())
    quota.add("c1", object())
    with pytest.raises(ResourceExhausted):
        quota.add("c1", object())
    quota.add("c2", object())  # other clients are not affected
    registry.pop(a, None)  # however the object went (release, session ended)
    assert quota.held("c1") == 1
    quota.add("c1", object())
    assert quota.held("c1") == 2


# ---------------------------------------------------------------------------
# Concurrent executions: RESOURCE_EXHAUSTED_TRANSIENT
# ---------------------------------------------------------------------------


def test_execution_slots_unit():
    slots = ExecutionSlots(2, "d")
    with slots.slot(), slots.slot():
        assert slots.running == 2
        with pytest.raises(ResourceExhausted) as info:
            slots.acquire()
        assert info.value.transient
        assert info.value.message.startswith("device 'd' is running 2 executions")
        assert "(limit max_concurrent_executions)" in info.value.message
    assert slots.running == 0
    with pytest.raises(ValueError), slots.slot():
        raise ValueError("an execution that fails still gives its slot back")
    assert slots.running == 0


def test_waiting_fenced_execution_holds_the_slot():
    with serving(device_with(max_concurrent_executions=1)) as (client, _):
        prepared = client.prepareModel_1_3(add_model())
        gate = create_fence(client)
        pools = [InlineMemory(X.tobytes()), InlineMemory(bytes(8))]
        fenced = prepared.executeFenced(_request(0, 1, pools), waitFor=[gate])  # waits
        for call in (
            lambda: prepared.execute([X]),
            lambda: prepared.execute([X], synchronous=False),
            lambda: prepared.execute_fenced([X]),
        ):
            with pytest.raises(ResourceExhausted) as info:
                call()
            assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
            assert "(limit max_concurrent_executions)" in info.value.message
        burst = prepared.burst()
        try:
            with pytest.raises(GeneralFailure) as info:  # HAL 1.2: downgraded
                burst.execute([X])
            assert "(limit max_concurrent_executions)" in info.value.message
            assert "[RESOURCE_EXHAUSTED_TRANSIENT reported as GENERAL_FAILURE]" in (
                info.value.message
            )
            signal_fence(client, gate)
            assert wait_fence(client, fenced.syncFence, 10.0) == "SIGNALED"
            assert fenced.callback.getExecutionInfo()[0] == ErrorStatus.NONE
            # the slot is free again: every kind of execution runs
            assert burst.execute([X]).outputs[0].tolist() == [2.0, 4.0]
        finally:
            burst.close()
        assert prepared.execute([X]).outputs[0].tolist() == [2.0, 4.0]
        outputs, _ = prepared.execute_fenced([X])
        assert outputs[0].tolist() == [2.0, 4.0]


def test_failed_fenced_wait_gives_the_slot_back():
    with serving(device_with(max_concurrent_executions=1)) as (client, _):
        prepared = client.prepareModel_1_3(add_model())
        gate = create_fence(client)
        pools = [InlineMemory(X.tobytes()), InlineMemory(bytes(8))]
        fenced = prepared.executeFenced(_request(0, 1, pools), waitFor=[gate])
        signal_fence(client, gate, ErrorStatus.GENERAL_FAILURE)  # the wait fails
        assert wait_fence(client, fenced.syncFence, 10.0) == "ERROR"
        assert prepared.execute([X]).outputs[0].tolist() == [2.0, 4.0]


# ---------------------------------------------------------------------------
# Message size: the gRPC transport's RESOURCE_EXHAUSTED, as a HalError
# ---------------------------------------------------------------------------


def test_message_over_the_limit():
    with serving(device_with(max_message_bytes=64 * 1024)) as (client, _):
        big = np.ones(32 * 1024, np.float32)  # 128 KiB
        mb = ModelBuilder()
        g = mb.main
        x = g.input(F32, [big.size])
        y = g.output(F32, [big.size])
        g.operation(O.ADD, [x, g.constant(F32, big), g.constant(INT32, 0)], [y])
        with pytest.raises(ResourceExhausted) as info:
            client.prepareModel_1_3(mb.build())
        assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
        assert "larger than the server accepts (its limit max_message_bytes)" in (
            info.value.message
        )
        # the same data in shared memory passes; the server keeps serving
        prepared = client.prepareModel_1_3(add_model(dims=(big.size,)))
        with pytest.raises(ResourceExhausted, match="max_message_bytes"):
            prepared.execute([big])  # inline pools over the limit
        out = prepared.execute([big], memory="shared")
        np.testing.assert_array_equal(out.outputs[0], 2 * big)


def test_memory_error_in_a_servicer_is_transient():
    """Any MemoryError reaching the service (decoding, a copy...) is a status, not a crash."""
    from nnhal.driver._service_support import hal_method

    from nnhal._proto.v1_3 import prepared_model_pb2 as ppb

    class Servicer:
        state = None

        @hal_method(ppb.StatusReply)
        def release(self, request, context):
            raise MemoryError("cannot allocate 64 GiB")

    reply = Servicer().release(None, None)
    assert reply.status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
    assert reply.message == "release: out of memory: cannot allocate 64 GiB"

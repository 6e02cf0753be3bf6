"""The gRPC service and client, through a real in-process server with the default driver Device.

Fixtures (tests/conftest.py): ``server_address`` (session server), ``client_device``.
A few tests start servers of their own around a small fake device to reach error
paths the real device never takes (an internal crash, a 1.3-only status on a
1.0 method).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from multiprocessing import resource_tracker, shared_memory

import grpc
import numpy as np
import pytest
from repo_paths import REPO_ROOT

from nnhal import convert as cv
from nnhal import convert_legacy as legacy
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.builder import ModelBuilder
from nnhal.client import PreparedModel, connect
from nnhal.errors import (
    GeneralFailure,
    HalError,
    InvalidArgument,
    MissedDeadline,
    OutputInsufficientSize,
)
from nnhal.types import (
    UINT64_MAX,
    DataLocation,
    DeviceStatus,
    DeviceType,
    ErrorStatus,
    InlineMemory,
    Model,
    OperandType,
    OperationType,
    Request,
    RequestArgument,
    SharedMemory,
    Subgraph,
    TokenMemory,
)

pytestmark = pytest.mark.timeout(60)

F32 = OperandType.TENSOR_FLOAT32


def add_model(dims=(2, 3), out_dims=None, op=OperationType.ADD) -> Model:
    """y = a + b (or another binary op with a fused activation), TENSOR_FLOAT32."""
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, list(dims))
    b = g.input(F32, list(dims))
    act = g.constant(OperandType.INT32, 0)
    y = g.output(F32, list(out_dims if out_dims is not None else dims))
    g.operation(op, [a, b, act], [y])
    return mb.build()


def unlink(segment: shared_memory.SharedMemory) -> None:
    """Close and unlink a test-made segment (balancing the resource tracker, see there)."""
    from nnhal._client_io import unlink_segment

    unlink_segment(segment)


@pytest.fixture
def add_prepared(client_device):
    prepared = client_device.prepareModel_1_3(add_model())
    yield prepared
    if prepared.id:
        prepared.release()


def inputs(seed: int = 0, dims=(2, 3)) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal(dims).astype(np.float32),
        rng.standard_normal(dims).astype(np.float32),
    )


# ---------------------------------------------------------------------------
# IDevice queries
# ---------------------------------------------------------------------------


def test_capabilities_1_3(client_device) -> None:
    caps = client_device.getCapabilities_1_3()
    types = [p.type for p in caps.operandPerformance]
    assert types == sorted(types)
    assert OperandType.SUBGRAPH not in types
    assert OperandType.TENSOR_FLOAT32 in types
    for entry in caps.operandPerformance:
        assert entry.info.execTime > 0 and entry.info.powerUsage > 0
    for info in (
        caps.relaxedFloat32toFloat16PerformanceScalar,
        caps.relaxedFloat32toFloat16PerformanceTensor,
        caps.ifPerformance,
        caps.whilePerformance,
    ):
        assert info.execTime > 0 and info.powerUsage > 0


def test_old_capabilities_are_down_converted(client_device) -> None:
    caps = client_device.getCapabilities_1_3()
    by_type = {p.type: p.info for p in caps.operandPerformance}
    stub = client_device.stub
    v1_0 = stub.getCapabilities(dpb.DeviceQuery())
    assert v1_0.status == ErrorStatus.NONE
    assert v1_0.capabilities.float32Performance.execTime == pytest.approx(
        by_type[OperandType.TENSOR_FLOAT32].execTime
    )
    assert v1_0.capabilities.quantized8Performance.execTime == pytest.approx(
        by_type[OperandType.TENSOR_QUANT8_ASYMM].execTime
    )
    v1_1 = stub.getCapabilities_1_1(dpb.DeviceQuery())
    assert v1_1.capabilities.relaxedFloat32toFloat16Performance.execTime == pytest.approx(
        caps.relaxedFloat32toFloat16PerformanceTensor.execTime
    )
    v1_2 = stub.getCapabilities_1_2(dpb.DeviceQuery())
    v1_2_types = [p.type for p in v1_2.capabilities.operandPerformance]
    assert OperandType.TENSOR_QUANT8_ASYMM_SIGNED not in v1_2_types
    assert OperandType.SUBGRAPH not in v1_2_types
    assert OperandType.TENSOR_FLOAT32 in v1_2_types


def test_simple_queries(client_device) -> None:
    assert client_device.getVersionString()
    assert client_device.getType() in set(DeviceType)
    assert client_device.getStatus() == DeviceStatus.AVAILABLE
    # a server without --cache-root takes no client-named cache files: "no caching", as the
    # HAL says it (a server with a root says (1, 1): tests/driver/test_isolation_cache.py)
    assert client_device.getNumberOfCacheFilesNeeded() == (0, 0)
    for extension in client_device.getSupportedExtensions():
        assert "." in extension.name


def test_prepare_model_from_cache_on_a_server_that_does_not_cache(client_device) -> None:
    # no --cache-root and no --cache-dir: (0, 0) files, so GENERAL_FAILURE as the HAL says
    # (a caching server answers INVALID_ARGUMENT: tests/driver/test_cache.py)
    with pytest.raises(GeneralFailure, match="does not cache"):
        client_device.prepareModelFromCache_1_3(token=bytes(32))
    reply = client_device.stub.prepareModelFromCache(
        dpb.PrepareModelFromCacheRequest(token=bytes(32))
    )
    assert reply.status == ErrorStatus.GENERAL_FAILURE
    assert reply.preparedModel == 0


def test_allocate_gives_a_buffer_and_a_token(client_device, add_prepared) -> None:
    # the full rules are in tests/test_buffers.py
    request = dpb.AllocateRequest(
        preparedModels=[add_prepared.id], inputRoles=[tpb.BufferRole(modelIndex=0, frequency=1.0)]
    )
    reply = client_device.stub.allocate(request)
    assert reply.status == ErrorStatus.NONE
    assert reply.buffer > 0 and reply.token > 0
    client_device.buffer_stub.release(ppb.ReleaseRequest(id=reply.buffer))
    with pytest.raises(InvalidArgument, match="no prepared models"):
        client_device.allocate()


def test_allocate_with_unknown_prepared_model_is_invalid(client_device) -> None:
    reply = client_device.stub.allocate(dpb.AllocateRequest(preparedModels=[123456789]))
    assert reply.status == ErrorStatus.INVALID_ARGUMENT
    assert (reply.buffer, reply.token) == (0, 0)


def test_ibuffer_with_unknown_buffer_is_invalid_argument(client_device) -> None:
    stub = client_device.buffer_stub
    memory = tpb.Memory(inlineData=bytes(8))
    reply = stub.copyTo(ppb.CopyToRequest(buffer=77, dst=memory))
    assert reply.status == ErrorStatus.INVALID_ARGUMENT and "77" in reply.message
    reply = stub.copyFrom(ppb.CopyFromRequest(buffer=77, src=memory, dimensions=[2]))
    assert reply.status == ErrorStatus.INVALID_ARGUMENT
    assert (
        stub.copyTo(ppb.CopyToRequest(buffer=0, dst=memory)).status == ErrorStatus.INVALID_ARGUMENT
    )


# ---------------------------------------------------------------------------
# Supported operations and preparation
# ---------------------------------------------------------------------------


def test_supported_operations_and_explain(client_device) -> None:
    model = add_model()
    assert client_device.getSupportedOperations_1_3(model) == [True]
    supported, reasons = client_device.explainSupportedOperations(model)
    assert supported == [True] and reasons == {}


def cycle_model() -> Model:
    """VTS BasicTests CycleTest: 3=ADD(0,4,2); 4=ADD(1,3,2); 5=ADD(4,0,2)."""
    from nnhal.types import Operand, Operation
    from nnhal.types import OperandLifeTime as L

    t = {"type": F32, "dimensions": (1,)}
    operands = (
        Operand(**t, numberOfConsumers=2, lifetime=L.SUBGRAPH_INPUT),
        Operand(**t, numberOfConsumers=1, lifetime=L.SUBGRAPH_INPUT),
        Operand(type=OperandType.INT32, numberOfConsumers=3, lifetime=L.SUBGRAPH_INPUT),
        Operand(**t, numberOfConsumers=1),
        Operand(**t, numberOfConsumers=2),
        Operand(**t, lifetime=L.SUBGRAPH_OUTPUT),
    )
    add = OperationType.ADD
    operations = (
        Operation(add, (0, 4, 2), (3,)),
        Operation(add, (1, 3, 2), (4,)),
        Operation(add, (4, 0, 2), (5,)),
    )
    return Model(main=Subgraph(operands, operations, (0, 1, 2), (5,)))


@pytest.mark.parametrize(
    "model",
    [
        cycle_model(),
        # an operation reading an operand index that does not exist
        dataclasses.replace(
            add_model(),
            main=dataclasses.replace(
                add_model().main,
                operations=(
                    dataclasses.replace(add_model().main.operations[0], inputs=(0, 1, 99)),
                ),
            ),
        ),
    ],
    ids=["cycle", "operand-out-of-range"],
)
def test_invalid_model_is_invalid_argument_and_server_survives(client_device, model) -> None:
    with pytest.raises(InvalidArgument) as info:
        client_device.getSupportedOperations_1_3(model)
    assert info.value.message
    with pytest.raises(InvalidArgument):
        client_device.prepareModel_1_3(model)
    reply = client_device.stub.prepareModel_1_3(
        dpb.PrepareModelRequest_1_3(model=cv.model_to_pb(model))
    )
    assert reply.status == ErrorStatus.INVALID_ARGUMENT and reply.preparedModel == 0
    assert client_device.getStatus() == DeviceStatus.AVAILABLE


@pytest.mark.parametrize("field,value", [("preference", 3), ("priority", -1)])
def test_invalid_preference_or_priority(client_device, field, value) -> None:
    message = dpb.PrepareModelRequest_1_3(model=cv.model_to_pb(add_model()), **{field: value})
    reply = client_device.stub.prepareModel_1_3(message)
    assert reply.status == ErrorStatus.INVALID_ARGUMENT, reply.message


def test_prepare_with_past_deadline_is_missed_deadline(client_device) -> None:
    with pytest.raises(MissedDeadline) as info:
        client_device.prepareModel_1_3(add_model(), deadline_ns=time.monotonic_ns() - 1)
    assert info.value.status == ErrorStatus.MISSED_DEADLINE_PERSISTENT


def test_prepare_model_async(client_device) -> None:
    future = client_device.prepare_model_async(add_model())
    prepared = future.result(timeout=30)
    a, b = inputs(1)
    np.testing.assert_array_equal(prepared.execute([a, b]).outputs[0], a + b)
    prepared.release()
    bad = client_device.prepare_model_async(cycle_model())
    assert isinstance(bad.exception(timeout=30), InvalidArgument)


# ---------------------------------------------------------------------------
# Executions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("memory", ["inline", "shared"])
@pytest.mark.parametrize("synchronous", [True, False])
def test_execute_add(add_prepared, memory, synchronous) -> None:
    a, b = inputs(2)
    result = add_prepared.execute([a, b], memory=memory, synchronous=synchronous)
    np.testing.assert_array_equal(result.outputs[0], a + b)
    assert result.outputs[0].dtype == np.float32
    assert [s.dimensions for s in result.outputShapes] == [(2, 3)]
    assert all(s.isSufficient for s in result.outputShapes)
    assert (result.timing.timeOnDevice, result.timing.timeInDriver) == (UINT64_MAX, UINT64_MAX)


@pytest.mark.parametrize("memory", ["inline", "shared"])
def test_measure_timing(add_prepared, memory) -> None:
    a, b = inputs(3)
    timing = add_prepared.execute([a, b], measure=True, memory=memory).timing
    assert timing.timeInDriver != UINT64_MAX
    assert timing.timeOnDevice <= timing.timeInDriver


def test_execute_async(add_prepared) -> None:
    a, b = inputs(4)
    futures = [add_prepared.execute_async([a * k, b]) for k in range(4)]
    for k, future in enumerate(futures):
        np.testing.assert_array_equal(future.result(timeout=30).outputs[0], a * k + b)


def test_execute_with_past_deadline(add_prepared) -> None:
    a, b = inputs(5)
    with pytest.raises(MissedDeadline):
        add_prepared.execute([a, b], deadline_ns=time.monotonic_ns() - 1)
    # an "unlimited" deadline (VTS sends time_point::max()) runs normally
    result = add_prepared.execute([a, b], deadline_ns=2**63 - 1)
    np.testing.assert_array_equal(result.outputs[0], a + b)


def test_large_inline_messages(client_device) -> None:
    dims = (1, 1_200_000)  # ~4.8 MB per tensor: above gRPC's default 4 MB message limit
    prepared = client_device.prepareModel_1_3(add_model(dims))
    a, b = inputs(6, dims)
    np.testing.assert_array_equal(prepared.execute([a, b]).outputs[0], a + b)
    prepared.release()


def test_unknown_prepared_model_id(client_device) -> None:
    ghost = PreparedModel(client_device, 987654321, add_model())
    with pytest.raises(InvalidArgument, match="987654321"):
        ghost.execute(list(inputs(7)))
    with pytest.raises(InvalidArgument):
        ghost.release()


def test_released_prepared_model_is_unknown(client_device) -> None:
    prepared = client_device.prepareModel_1_3(add_model())
    key = prepared.id
    prepared.release()
    ghost = PreparedModel(client_device, key, add_model())
    with pytest.raises(InvalidArgument):
        ghost.execute(list(inputs(8)))


def request_for(model_dims=(2, 3), out_length=24, out_dims=()) -> tuple[Request, bytes]:
    a, b = inputs(9, model_dims)
    data = a.tobytes() + b.tobytes()
    n = a.nbytes
    request = Request(
        inputs=(
            RequestArgument(location=DataLocation(0, 0, n)),
            RequestArgument(location=DataLocation(0, n, n)),
        ),
        outputs=(RequestArgument(location=DataLocation(1, 0, out_length), dimensions=out_dims),),
        pools=(InlineMemory(data), InlineMemory(bytes(max(out_length, 1)))),
    )
    return request, (a + b).tobytes()


def test_too_small_output_is_output_insufficient_size(add_prepared) -> None:
    request, _ = request_for(out_length=20)
    with pytest.raises(OutputInsufficientSize) as info:
        add_prepared.execute_request(request)
    assert [(s.dimensions, s.isSufficient) for s in info.value.shapes] == [((2, 3), False)]


def test_dynamic_output_shape(client_device) -> None:
    prepared = client_device.prepareModel_1_3(add_model(out_dims=(0, 0)))
    a, b = inputs(10)
    with pytest.raises(ValueError, match="output_shapes"):
        prepared.execute([a, b])
    result = prepared.execute([a, b], output_shapes=[(2, 3)])
    np.testing.assert_array_equal(result.outputs[0], a + b)
    # too small, with the real shape reported back
    request, expected = request_for(out_length=8)
    with pytest.raises(OutputInsufficientSize) as info:
        prepared.execute_request(request)
    assert info.value.shapes[0].dimensions == (2, 3)
    request, expected = request_for(out_length=24)
    result = prepared.execute_request(request)
    assert result.outputShapes[0].dimensions == (2, 3)
    assert result.pools[1] == expected
    prepared.release()


def test_invalid_request_is_invalid_argument(add_prepared) -> None:
    request, _ = request_for()
    with pytest.raises(InvalidArgument):
        add_prepared.execute_request(dataclasses.replace(request, inputs=request.inputs[:1]))
    with pytest.raises(ValueError):  # checked by the client before sending
        add_prepared.execute([inputs(0)[0]])


def test_unknown_memory_token_is_invalid_argument(add_prepared) -> None:
    request, _ = request_for()
    request = dataclasses.replace(request, pools=(request.pools[0], TokenMemory(token=100)))
    request = dataclasses.replace(
        request, outputs=(RequestArgument(location=DataLocation(1, 0, 0)),)
    )
    with pytest.raises(InvalidArgument, match="100"):
        add_prepared.execute_request(request)


def test_missing_shared_memory_segment_is_invalid_argument(add_prepared) -> None:
    request, _ = request_for()
    pools = (request.pools[0], SharedMemory(name="nnhal_test_no_such_segment", size=24))
    with pytest.raises(InvalidArgument, match="nnhal_test_no_such_segment"):
        add_prepared.execute_request(dataclasses.replace(request, pools=pools))


def test_server_never_unlinks_client_segments(add_prepared) -> None:
    request, expected = request_for()
    segment = shared_memory.SharedMemory(create=True, size=64)
    try:
        pools = (request.pools[0], SharedMemory(name=segment.name, size=64))
        result = add_prepared.execute_request(dataclasses.replace(request, pools=pools))
        assert 1 not in result.pools  # written in place, not sent back
        assert bytes(segment.buf[:24]) == expected
        again = shared_memory.SharedMemory(name=segment.name, create=False)
        again.close()
        if sys.version_info < (3, 13):
            resource_tracker.unregister(again._name, "shared_memory")
    finally:
        unlink(segment)


def test_model_pool_in_shared_memory(client_device) -> None:
    """A CONSTANT_REFERENCE pool in shared memory stays mapped by the prepared model."""
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, [2, 2])
    w = g.constant(F32, np.arange(4, dtype=np.float32).reshape(2, 2), dims=[2, 2], reference=True)
    act = g.constant(OperandType.INT32, 0)
    y = g.output(F32, [2, 2])
    g.operation(OperationType.ADD, [a, w, act], [y])
    model = mb.build()
    data = model.pools[0].data
    segment = shared_memory.SharedMemory(create=True, size=len(data))
    try:
        segment.buf[: len(data)] = data
        shared = dataclasses.replace(model, pools=(SharedMemory(segment.name, len(data)),))
        prepared = client_device.prepareModel_1_3(shared)
        x = np.ones((2, 2), np.float32)
        for _ in range(2):
            out = prepared.execute([x]).outputs[0]
            np.testing.assert_array_equal(out, x + np.arange(4, dtype=np.float32).reshape(2, 2))
        prepared.release()
    finally:
        unlink(segment)


# ---------------------------------------------------------------------------
# Old-version entry points
# ---------------------------------------------------------------------------


def test_v1_0_model_end_to_end(client_device) -> None:
    stub, pstub = client_device.stub, client_device.prepared_model_stub
    model = add_model()
    flat = legacy.model_to_v1_0_pb(model)
    reply = stub.getSupportedOperations(dpb.GetSupportedOperationsRequest(model=flat))
    assert reply.status == ErrorStatus.NONE and list(reply.supportedOperations) == [True]
    v1_1 = legacy.model_to_v1_1_pb(model)
    reply = stub.getSupportedOperations_1_1(dpb.GetSupportedOperationsRequest_1_1(model=v1_1))
    assert list(reply.supportedOperations) == [True]
    v1_2 = legacy.model_to_v1_2_pb(model)
    reply = stub.getSupportedOperations_1_2(dpb.GetSupportedOperationsRequest_1_2(model=v1_2))
    assert list(reply.supportedOperations) == [True]

    prepared = stub.prepareModel(dpb.PrepareModelRequest(model=flat))
    assert prepared.status == ErrorStatus.NONE and prepared.preparedModel > 0
    for other in (
        stub.prepareModel_1_1(dpb.PrepareModelRequest_1_1(model=v1_1, preference=0)),
        stub.prepareModel_1_2(dpb.PrepareModelRequest_1_2(model=v1_2, token=bytes(32))),
    ):
        assert other.status == ErrorStatus.NONE and other.preparedModel > 0

    request, expected = request_for()
    v1_0_request = legacy.request_to_v1_0_pb(request)
    key = prepared.preparedModel
    reply = pstub.execute(ppb.ExecuteRequest(preparedModel=key, request=v1_0_request))
    assert reply.status == ErrorStatus.NONE
    assert {p.poolIndex: p.data for p in reply.outputPools} == {1: expected}
    measure = tpb.MEASURE_TIMING_YES
    for method in (pstub.execute_1_2, pstub.executeSynchronously):
        reply = method(
            ppb.ExecuteRequest_1_2(preparedModel=key, request=v1_0_request, measure=measure)
        )
        assert reply.status == ErrorStatus.NONE
        assert reply.outputPools[0].data == expected
        assert reply.timing.timeOnDevice <= reply.timing.timeInDriver != UINT64_MAX


def test_v1_0_entry_point_rejects_newer_operations(client_device) -> None:
    """SUB is a 1.1 operation: not a valid V1_0 model, fine as V1_1."""
    model = add_model(op=OperationType.SUB)
    stub = client_device.stub
    reply = stub.getSupportedOperations(
        dpb.GetSupportedOperationsRequest(model=legacy.model_to_v1_0_pb(model))
    )
    assert reply.status == ErrorStatus.INVALID_ARGUMENT and reply.message
    reply = stub.prepareModel(dpb.PrepareModelRequest(model=legacy.model_to_v1_0_pb(model)))
    assert reply.status == ErrorStatus.INVALID_ARGUMENT
    reply = stub.getSupportedOperations_1_1(
        dpb.GetSupportedOperationsRequest_1_1(model=legacy.model_to_v1_1_pb(model))
    )
    assert reply.status == ErrorStatus.NONE and list(reply.supportedOperations) == [True]


# ---------------------------------------------------------------------------
# executeFenced
# ---------------------------------------------------------------------------


def test_execute_fenced(add_prepared) -> None:
    a, b = inputs(11)
    outputs, first = add_prepared.execute_fenced([a, b], measure=True)
    np.testing.assert_array_equal(outputs[0], a + b)
    assert first.syncFence > 0 and first.callback.id > 0
    status, launched, fenced = first.callback.getExecutionInfo()
    assert status == ErrorStatus.NONE
    assert launched.timeOnDevice <= launched.timeInDriver != UINT64_MAX
    assert fenced.timeOnDevice <= fenced.timeInDriver
    # a later execution may wait for the first one's fence
    outputs, second = add_prepared.execute_fenced([b, b], waitFor=[first.syncFence])
    np.testing.assert_array_equal(outputs[0], b + b)
    status, launched, _ = second.callback.getExecutionInfo()
    assert status == ErrorStatus.NONE and launched.timeInDriver == UINT64_MAX  # not measured
    first.callback.release()
    with pytest.raises(InvalidArgument):
        first.callback.getExecutionInfo()
    with pytest.raises(InvalidArgument):  # its fence went with it
        add_prepared.execute_fenced([a, b], waitFor=[first.syncFence])


@pytest.mark.parametrize("wait_for", [[0], [424242]], ids=["null-fence", "unknown-fence"])
def test_execute_fenced_bad_wait_for(add_prepared, wait_for) -> None:
    request, _ = request_for()
    reply = add_prepared.device.prepared_model_stub.executeFenced(
        ppb.ExecuteFencedRequest(
            preparedModel=add_prepared.id, request=cv.request_to_pb(request), waitFor=wait_for
        )
    )
    assert reply.status == ErrorStatus.INVALID_ARGUMENT
    assert (reply.syncFence, reply.callback) == (0, 0)


def test_execute_fenced_needs_specified_sufficient_outputs(client_device, add_prepared) -> None:
    request, _ = request_for(out_length=20)
    with pytest.raises(InvalidArgument):
        add_prepared.executeFenced(request)
    dynamic = client_device.prepareModel_1_3(add_model(out_dims=(0, 0)))
    request, _ = request_for()
    with pytest.raises(InvalidArgument, match="fully specified"):
        dynamic.executeFenced(request)
    dynamic.release()


# ---------------------------------------------------------------------------
# Bursts
# ---------------------------------------------------------------------------


def test_burst_runs_requests_in_order(add_prepared) -> None:
    with add_prepared.burst() as burst:
        for k in range(5):
            a, b = inputs(20 + k)
            result = burst.execute([a, b], measure=k % 2 == 1)
            np.testing.assert_array_equal(result.outputs[0], a + b)
            if k % 2:
                assert result.timing.timeOnDevice <= result.timing.timeInDriver != UINT64_MAX
            else:
                assert result.timing.timeInDriver == UINT64_MAX
        # an invalid request gets its own INVALID_ARGUMENT reply; the stream goes on
        request, expected = request_for()
        with pytest.raises(InvalidArgument):
            burst.execute_request(dataclasses.replace(request, outputs=()))
        assert burst.execute_request(request).pools[1] == expected


def test_burst_with_unknown_prepared_model(client_device) -> None:
    ghost = PreparedModel(client_device, 55555, add_model())
    with ghost.burst() as burst, pytest.raises(InvalidArgument, match="55555"):
        burst.execute(list(inputs(30)))


# ---------------------------------------------------------------------------
# Error mapping, with a fake device
# ---------------------------------------------------------------------------


class _FakeDevice:
    """Only what the tests below call; everything else is the real device's job."""

    name = "fake"

    def __init__(self) -> None:
        self.calls = 0

    def getVersionString(self) -> str:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("boom")
        return "fake-1"

    def getStatus(self) -> DeviceStatus:
        return DeviceStatus.AVAILABLE

    def prepareModel_1_3(self, model, preference, priority, deadline_ns, *, version, size_checked):
        raise MissedDeadline("the fake device is always late", transient=True)


@pytest.fixture
def fake_client():
    from nnhal.driver.service import create_server

    server, address = create_server(_FakeDevice(), "127.0.0.1:0", max_workers=2)
    device = connect(address)
    yield device
    device.close()
    server.stop(None).wait()


def test_internal_error_is_general_failure_and_server_keeps_serving(fake_client) -> None:
    with pytest.raises(GeneralFailure, match="RuntimeError: boom"):
        fake_client.getVersionString()
    assert fake_client.getVersionString() == "fake-1"
    # a method the fake lacks is an internal error too, never a gRPC UNIMPLEMENTED
    reply = fake_client.stub.getType(dpb.DeviceQuery())
    assert reply.status == ErrorStatus.GENERAL_FAILURE and "AttributeError" in reply.message
    assert fake_client.getStatus() == DeviceStatus.AVAILABLE


def test_1_3_statuses_are_downgraded_on_v1_0_replies(fake_client) -> None:
    model = add_model()
    reply = fake_client.stub.prepareModel_1_3(
        dpb.PrepareModelRequest_1_3(model=cv.model_to_pb(model))
    )
    assert reply.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    for method, message in (
        (
            fake_client.stub.prepareModel,
            dpb.PrepareModelRequest(model=legacy.model_to_v1_0_pb(model)),
        ),
        (
            fake_client.stub.prepareModel_1_2,
            dpb.PrepareModelRequest_1_2(model=legacy.model_to_v1_2_pb(model)),
        ),
    ):
        reply = method(message)
        assert reply.status == ErrorStatus.GENERAL_FAILURE
        assert "MISSED_DEADLINE_TRANSIENT" in reply.message


def test_connect_to_nothing_is_device_unavailable() -> None:
    from nnhal.errors import DeviceUnavailable

    with pytest.raises(DeviceUnavailable):
        connect("127.0.0.1:1", timeout=0.5)


def test_every_reply_is_a_status_never_a_grpc_error(client_device) -> None:
    """Empty messages for every unary method: a HAL status each time, no RpcError."""
    from nnhal._proto.v1_3 import device_pb2, prepared_model_pb2

    calls = []
    for module, stub in (
        (device_pb2, client_device.stub),
        (prepared_model_pb2, client_device.prepared_model_stub),
        (prepared_model_pb2, client_device.buffer_stub),
        (prepared_model_pb2, client_device.callback_stub),
    ):
        for service in module.DESCRIPTOR.services_by_name.values():
            if not type(stub).__name__.startswith(service.name):
                continue
            for method in service.methods:
                if method.client_streaming:
                    continue
                calls.append((method.name, getattr(stub, method.name), method.input_type))
    assert len(calls) > 25
    for name, call, input_type in calls:
        from google.protobuf import message_factory

        message = message_factory.GetMessageClass(input_type)()
        try:
            reply = call(message)
        except grpc.RpcError as exc:  # pragma: no cover - the failure being tested for
            pytest.fail(f"{name}: gRPC error {exc.code()}")
        assert reply.status in set(ErrorStatus), name
        if reply.status != ErrorStatus.NONE:
            assert reply.message, name


# ---------------------------------------------------------------------------
# nnhal.driver.memory
# ---------------------------------------------------------------------------


def test_map_pool_forms() -> None:
    from nnhal.driver.memory import MappedPools, map_pool

    original = b"\x01\x02\x03"
    view = map_pool(InlineMemory(original))
    view[0] = 9  # a private, writable copy
    assert bytes(view) == b"\x09\x02\x03" and original == b"\x01\x02\x03"
    with pytest.raises(GeneralFailure):
        map_pool(TokenMemory(token=1))
    with pytest.raises(InvalidArgument):
        map_pool(SharedMemory(name="nnhal_test_missing", size=4))

    segment = shared_memory.SharedMemory(create=True, size=16)
    try:
        with pytest.raises(InvalidArgument, match="claims"):
            map_pool(SharedMemory(name=segment.name, size=1 << 20))
        with MappedPools([SharedMemory(segment.name, 16), InlineMemory(b"ab")]) as mapped:
            assert [v.nbytes for v in mapped.views] == [16, 2]
            mapped.views[0][3] = 42  # zero copy: the client sees it at once
            assert segment.buf[3] == 42
            kept = np.frombuffer(mapped.views[0], dtype=np.uint8)  # outlives the block
        assert kept[3] == 42
        del kept
    finally:
        unlink(segment)


def test_hal_errors_keep_their_class_through_the_wire(add_prepared) -> None:
    request, _ = request_for(out_length=4)
    try:
        add_prepared.execute_request(request)
    except HalError as exc:
        assert exc.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
        assert "OUTPUT_INSUFFICIENT_SIZE" in str(exc)
    else:  # pragma: no cover
        pytest.fail("no error")


# ---------------------------------------------------------------------------
# A server in another process (the real shared-memory case) and serve_forever
# ---------------------------------------------------------------------------

_SERVE = (
    "from nnhal.driver.device import Device\n"
    "from nnhal.driver.service import serve_forever\n"
    "serve_forever(Device(), '127.0.0.1:0', on_ready=lambda a: print(a, flush=True))\n"
)


def test_serve_forever_in_another_process(tmp_path) -> None:
    import signal
    import subprocess

    repo = REPO_ROOT
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    segment = shared_memory.SharedMemory(create=True, size=64)
    try:
        address = proc.stdout.readline().strip()
        assert address.startswith("127.0.0.1:"), proc.stderr.read() if not address else address
        with connect(address) as device:
            prepared = device.prepareModel_1_3(add_model())
            a, b = inputs(40)
            result = prepared.execute([a, b], memory="shared")
            np.testing.assert_array_equal(result.outputs[0], a + b)
            request, expected = request_for()
            pools = (request.pools[0], SharedMemory(name=segment.name, size=64))
            prepared.execute_request(dataclasses.replace(request, pools=pools))
            assert bytes(segment.buf[:24]) == expected
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        stderr = proc.stderr.read()
        # the server attached client segments without adopting them
        assert "resource_tracker" not in stderr and "leaked" not in stderr, stderr
        again = shared_memory.SharedMemory(name=segment.name, create=False)  # still there
        again.close()
        if sys.version_info < (3, 13):
            resource_tracker.unregister(again._name, "shared_memory")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        unlink(segment)

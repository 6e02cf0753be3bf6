"""Memory domains (driver/buffers.py): allocate, IBuffer copyTo/copyFrom, token pools."""

from __future__ import annotations

import numpy as np
import pytest

from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure, InvalidArgument
from nnhal.types import (
    BufferDesc,
    BufferRole,
    DataLocation,
    ErrorStatus,
    InlineMemory,
    OperandType,
    OperationType,
    Request,
    RequestArgument,
    TokenMemory,
)

F32 = OperandType.TENSOR_FLOAT32
DIMS = (2, 3)
NBYTES = 24


def add_model(dims=DIMS, type=F32, scale=0.0, act_input=False):
    mb = ModelBuilder()
    g = mb.main
    kw = {"scale": scale} if scale else {}
    a = g.input(type, list(dims), **kw)
    b = g.input(type, list(dims), **kw)
    act = g.input(OperandType.INT32, None) if act_input else g.constant(OperandType.INT32, 0)
    y = g.output(type, list(dims), **kw)
    g.operation(OperationType.ADD, [a, b, act], [y])
    return mb.build()


@pytest.fixture
def prepared(client_device):
    p = client_device.prepareModel_1_3(add_model())
    yield p
    p.release()


@pytest.fixture
def other(client_device):
    p = client_device.prepareModel_1_3(add_model())
    yield p
    p.release()


def role(io=0, model=0, freq=1.0):
    return BufferRole(modelIndex=model, ioIndex=io, frequency=freq)


def arr(seed):
    return np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)


def request(args_in, args_out, pools):
    """args: pool index per argument (None = hasNoValue); token pools use the whole buffer."""

    def arg(p):
        if isinstance(pools[p], TokenMemory):
            return RequestArgument(location=DataLocation(p, 0, 0))
        return RequestArgument(location=DataLocation(p, 0, NBYTES))

    return Request(
        inputs=tuple(arg(p) for p in args_in),
        outputs=tuple(arg(p) for p in args_out),
        pools=tuple(pools),
    )


def inline(x=None):
    return InlineMemory(bytes(NBYTES) if x is None else x.tobytes())


def test_buffer_round_trip_through_executions(client_device, prepared) -> None:
    a = client_device.allocate(
        BufferDesc(), [prepared], inputRoles=[role(0), role(1)], outputRoles=[role(0)]
    )
    out = client_device.allocate(BufferDesc(), [prepared], [role(0)], [role(0)])
    assert a.token > 0 and out.token > 0 and a.token != out.token
    x = arr(1)
    a.copyFrom(inline(x))
    # out = a + a, inputs from one buffer twice (allowed)
    pools = [TokenMemory(a.token), TokenMemory(out.token)]
    prepared.execute_request(request([0, 0], [1], pools))
    got = np.frombuffer(out.copyTo(inline()), np.float32).reshape(DIMS)
    np.testing.assert_allclose(got, x + x)
    # the buffer stays valid: feed it back as an input (out + shared)
    shared = inline(np.ones(DIMS, np.float32))
    result = prepared.execute_request(
        request([0, 1], [2], [TokenMemory(out.token), shared, inline()])
    )
    np.testing.assert_allclose(np.frombuffer(result.pools[2], np.float32).reshape(DIMS), x + x + 1)
    a.release()
    with pytest.raises(InvalidArgument, match="unknown buffer"):
        prepared.execute_request(request([0, 0], [1], pools))
    out.release()


def test_uninitialized_buffer(client_device, prepared) -> None:
    buf = client_device.allocate(BufferDesc(list(DIMS)), [prepared], [role(0)], [role(0)])
    with pytest.raises(GeneralFailure, match="uninitialized"):
        buf.copyTo(inline())
    pools = [TokenMemory(buf.token), inline(arr(2))]
    with pytest.raises(GeneralFailure, match="uninitialized"):
        prepared.execute_request(request([0, 1], [1], [*pools]))
    # as an output it is fine, and then it can be an input
    prepared.execute_request(request([1, 1], [0], pools))
    prepared.execute_request(request([0, 1], [1], pools))
    buf.release()


def test_misuse_in_requests(client_device, prepared, other) -> None:
    in0 = client_device.allocate(BufferDesc(), [prepared], [role(0)], [])
    out0 = client_device.allocate(BufferDesc(), [prepared], [role(0)], [role(0)])
    in0.copyFrom(inline(arr(3)))
    out0.copyFrom(inline(arr(3)))
    x = inline(arr(4))
    cases = {
        "token 0": request([0, 1], [1], [TokenMemory(0), x]),
        "unknown token": request([0, 1], [1], [TokenMemory(100000), x]),
        "input role as output": request([1, 1], [0], [TokenMemory(in0.token), x]),
        "wrong io index": request([1, 0], [1], [TokenMemory(in0.token), x]),
        "input and output": request([0, 1], [0], [TokenMemory(out0.token), x]),
    }
    for what, req in cases.items():
        with pytest.raises(InvalidArgument):
            prepared.execute_request(req)
        assert what
    with pytest.raises(InvalidArgument, match="role"):  # a buffer of another prepared model
        other.execute_request(request([0, 1], [1], [TokenMemory(in0.token), x]))
    # two outputs on one buffer
    two = client_device.prepareModel_1_3(two_output_model())
    both = client_device.allocate(BufferDesc(), [two], [], [role(0), role(1)])
    with pytest.raises(InvalidArgument, match="already used"):
        two.execute_request(request([1], [0, 0], [TokenMemory(both.token), x]))
    two.release()
    for b in (in0, out0, both):
        b.release()


def two_output_model():
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, list(DIMS))
    y = g.output(F32, list(DIMS))
    z = g.output(F32, list(DIMS))
    zero = g.constant(OperandType.INT32, 0)
    g.operation(OperationType.ADD, [a, a, zero], [y])
    g.operation(OperationType.MUL, [a, a, zero], [z])
    return mb.build()


def test_dimension_rules(client_device) -> None:
    p = client_device.prepareModel_1_3(add_model(dims=(0, 3)))
    buf = client_device.allocate(BufferDesc([2, 3]), [p], [role(0)], [role(0)])
    buf.copyFrom(inline(arr(5)))
    bad = RequestArgument(location=DataLocation(0, 0, 0), dimensions=(4, 3))
    x = RequestArgument(location=DataLocation(1, 0, NBYTES), dimensions=DIMS)
    out = RequestArgument(location=DataLocation(2, 0, NBYTES), dimensions=DIMS)
    pools = (TokenMemory(buf.token), inline(arr(6)), inline())
    with pytest.raises(InvalidArgument, match="do not match"):
        p.execute_request(Request(inputs=(bad, x), outputs=(out,), pools=pools))
    with pytest.raises(InvalidArgument, match="do not match"):
        p.execute_request(Request(inputs=(x, x), outputs=(bad,), pools=pools))
    # a shared input of another shape makes the device output's shape wrong
    big = RequestArgument(location=DataLocation(1, 0, 2 * NBYTES), dimensions=(4, 3))
    pools2 = (TokenMemory(buf.token), inline(np.zeros((4, 3), np.float32)), inline())
    with pytest.raises(GeneralFailure):
        p.execute_request(
            Request(
                inputs=(big, big),
                outputs=(RequestArgument(location=DataLocation(0, 0, 0)),),
                pools=pools2,
            )
        )
    buf.release()
    # an unknown size cannot be allocated (as the sample driver: GENERAL_FAILURE)
    with pytest.raises(GeneralFailure, match="not fully specified"):
        client_device.allocate(BufferDesc(), [p], [role(0)], [])
    p.release()


def test_copy_from_rules(client_device, prepared) -> None:
    buf = client_device.allocate(BufferDesc(), [prepared], [role(0)], [role(0)])
    for size in (NBYTES // 2, NBYTES * 2):
        with pytest.raises(InvalidArgument, match="bytes"):
            buf.copyFrom(InlineMemory(bytes(size)))
    for dims in ([2, 3, 1], [4, 3], [0, 3]):
        with pytest.raises(InvalidArgument, match="dimensions"):
            buf.copyFrom(inline(), dims)
    buf.copyFrom(inline(arr(7)), [])
    buf.copyFrom(inline(arr(7)), list(DIMS))
    assert np.frombuffer(buf.copyTo(inline()), np.float32).reshape(DIMS)[0, 0] == arr(7)[0, 0]
    for size in (NBYTES // 2, NBYTES * 2):
        with pytest.raises(InvalidArgument, match="bytes"):
            buf.copyTo(InlineMemory(bytes(size)))
    # a failed copyFrom leaves it uninitialized
    with pytest.raises(InvalidArgument):
        buf.copyFrom(inline(), [9, 9])
    with pytest.raises(GeneralFailure, match="uninitialized"):
        buf.copyTo(inline())
    token = buf.id
    buf.release()
    reply = client_device.buffer_stub.copyTo(ppb.CopyToRequest(buffer=token))
    assert reply.status == ErrorStatus.INVALID_ARGUMENT


def _allocate_status(client_device, models, desc=(), inputs=(), outputs=()):
    message = dpb.AllocateRequest(
        desc=tpb.BufferDesc(dimensions=list(desc)),
        preparedModels=[m.id for m in models],
        inputRoles=[tpb.BufferRole(modelIndex=r[0], ioIndex=r[1], frequency=r[2]) for r in inputs],
        outputRoles=[
            tpb.BufferRole(modelIndex=r[0], ioIndex=r[1], frequency=r[2]) for r in outputs
        ],
    )
    reply = client_device.stub.allocate(message)
    if reply.status != ErrorStatus.NONE:
        assert (reply.buffer, reply.token) == (0, 0)
    return ErrorStatus(reply.status)


def test_allocate_validation(client_device, prepared, other) -> None:
    p = prepared
    f16 = client_device.prepareModel_1_3(add_model(type=OperandType.TENSOR_FLOAT16))
    q1 = client_device.prepareModel_1_3(add_model(type=OperandType.TENSOR_QUANT8_ASYMM, scale=0.5))
    q2 = client_device.prepareModel_1_3(add_model(type=OperandType.TENSOR_QUANT8_ASYMM, scale=1.0))
    rank3 = client_device.prepareModel_1_3(add_model(dims=(1, 2, 3)))
    dim4 = client_device.prepareModel_1_3(add_model(dims=(4, 3)))
    scalar = client_device.prepareModel_1_3(add_model(act_input=True))
    ok = (0, 0, 1.0)
    invalid = {
        "no models": ([], (), [ok], []),
        "no roles": ([p], (), [], []),
        "model index": ([p], (), [(1, 0, 1.0)], []),
        "io index": ([p], (), [(0, 3, 1.0)], []),
        "output io index": ([p], (), [], [(0, 1, 1.0)]),
        "frequency 10": ([p], (), [(0, 0, 10.0)], []),
        "frequency 0": ([p], (), [(0, 0, 0.0)], []),
        "frequency -0.5": ([p], (), [(0, 0, -0.5)], []),
        "same role twice": ([p], (), [ok, ok], []),
        "same model twice": ([p, p], (), [ok, (1, 0, 1.0)], []),
        "type": ([p, f16], (), [ok], [(1, 0, 1.0)]),
        "scale": ([q1, q2], (), [ok, (1, 0, 1.0)], []),
        "rank between roles": ([p, rank3], (), [], [ok, (1, 0, 1.0)]),
        "dims between roles": ([p, dim4], (), [ok], [(1, 0, 1.0)]),
        "rank vs desc": ([p], (2, 3, 1), [ok], []),
        "dims vs desc": ([p], (4, 3), [ok], []),
        "scalar with dims": ([scalar], (1,), [(0, 2, 1.0)], []),
    }
    for what, (models, desc, ins, outs) in invalid.items():
        status = _allocate_status(client_device, models, desc, ins, outs)
        assert status == ErrorStatus.INVALID_ARGUMENT, what
    reply = client_device.stub.allocate(
        dpb.AllocateRequest(preparedModels=[0], inputRoles=[tpb.BufferRole(frequency=1.0)])
    )
    assert reply.status == ErrorStatus.INVALID_ARGUMENT  # null prepared model
    # valid: two models sharing a role, a scalar buffer
    assert _allocate_status(client_device, [p, other], (2, 3), [ok], [(1, 0, 1.0)]) == 0
    assert _allocate_status(client_device, [scalar], (), [(0, 2, 0.5)]) == 0
    for m in (f16, q1, q2, rank3, dim4, scalar):
        m.release()


def test_buffers_go_with_the_client(server_address, prepared) -> None:
    from nnhal.client import connect

    other = connect(server_address)
    p = other.prepareModel_1_3(add_model())
    buf = other.allocate(BufferDesc(), [p], [role(0)], [role(0)])
    token = buf.token
    buf.copyFrom(inline(arr(9)))
    other.close()  # the client goes away: its buffers are released
    with connect(server_address) as again:
        reply = again.buffer_stub.copyTo(ppb.CopyToRequest(buffer=token))
        assert reply.status == ErrorStatus.INVALID_ARGUMENT

"""Objects belong to the client that created them (docs/security.md, "Ownership").

Two clients of one server: the owner creates one object of every kind
(prepared model, driver buffer, sync fence, fenced execution and its callback,
a burst bound to its model); the intruder names each of them in every RPC that
takes that kind of id. Every such call must get exactly the reply an unknown
id gets (INVALID_ARGUMENT, same message up to the id itself), and the owner's
objects must still work afterwards. Clients with a session (``nnhal-session``)
and without one (the connection is the client) are crossed both ways.
"""

from __future__ import annotations

import secrets
import uuid

import grpc
import numpy as np
import pytest
from dying_client import add_model
from nnhal.driver.device import Device as DriverDevice
from nnhal.driver.service import create_server

from nnhal import control
from nnhal import convert as cv
from nnhal._client_io import IoPlan
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import device_pb2_grpc as dgrpc
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import prepared_model_pb2_grpc as pgrpc
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.client import connect
from nnhal.control import SESSION_HEADER
from nnhal.types import (
    BufferDesc,
    BufferRole,
    DataLocation,
    ErrorStatus,
    InlineMemory,
    Request,
    RequestArgument,
    TokenMemory,
)

X = np.ones(2, np.float32)


@pytest.fixture(scope="module")
def address():
    server, bound = create_server(DriverDevice(), "127.0.0.1:0")
    try:
        yield bound
    finally:
        server.stop(grace=None).wait()


class Intruder:
    """Raw stubs on a connection of its own, with or without a session."""

    def __init__(self, address: str, session: bool) -> None:
        self.channel = grpc.insecure_channel(address)
        self.metadata = ((SESSION_HEADER, str(uuid.uuid4())),) if session else ()
        self.device = dgrpc.IDeviceStub(self.channel)
        self.prepared = pgrpc.IPreparedModelStub(self.channel)
        self.buffer = pgrpc.IBufferStub(self.channel)
        self.callback = pgrpc.IFencedExecutionCallbackStub(self.channel)
        self.fence = pgrpc.ISyncFenceStub(self.channel)

    def call(self, method, message):
        return method(message, metadata=self.metadata, timeout=30)

    def burst(self, key: int):
        replies = self.prepared.configureExecutionBurst(
            iter([ppb.ExecuteRequest_1_2(preparedModel=key)]), metadata=self.metadata, timeout=30
        )
        return next(iter(replies))

    def close(self) -> None:
        self.channel.close()


def _token_request(token: int) -> tpb.Request:
    """ADD's inputs from a driver buffer named by ``token``; the output inline."""
    request = Request(
        inputs=(
            RequestArgument(location=DataLocation(0, 0, 0)),
            RequestArgument(location=DataLocation(0, 0, 0)),
        ),
        outputs=(RequestArgument(location=DataLocation(1, 0, 8)),),
        pools=(TokenMemory(token), InlineMemory(bytes(8))),
    )
    return cv.request_to_pb(request)


def _probes(intruder: Intruder, own_model: int):
    """(kind, rpc name, call(key) -> reply) for every RPC naming an object by id."""
    p, b, c, f = intruder.prepared, intruder.buffer, intruder.callback, intruder.fence
    call = intruder.call
    return [
        ("prepared", "execute", lambda k: call(p.execute, ppb.ExecuteRequest(preparedModel=k))),
        (
            "prepared",
            "execute_1_2",
            lambda k: call(p.execute_1_2, ppb.ExecuteRequest_1_2(preparedModel=k)),
        ),
        (
            "prepared",
            "executeSynchronously",
            lambda k: call(p.executeSynchronously, ppb.ExecuteRequest_1_2(preparedModel=k)),
        ),
        (
            "prepared",
            "execute_1_3",
            lambda k: call(p.execute_1_3, ppb.ExecuteRequest_1_3(preparedModel=k)),
        ),
        (
            "prepared",
            "executeSynchronously_1_3",
            lambda k: call(p.executeSynchronously_1_3, ppb.ExecuteRequest_1_3(preparedModel=k)),
        ),
        (
            "prepared",
            "executeFenced",
            lambda k: call(p.executeFenced, ppb.ExecuteFencedRequest(preparedModel=k)),
        ),
        ("prepared", "configureExecutionBurst", intruder.burst),
        (
            "prepared",
            "allocate",
            lambda k: call(
                intruder.device.allocate,
                dpb.AllocateRequest(
                    preparedModels=[k],
                    inputRoles=[tpb.BufferRole(modelIndex=0, ioIndex=0, frequency=1.0)],
                ),
            ),
        ),
        ("prepared", "release", lambda k: call(p.release, ppb.ReleaseRequest(id=k))),
        (
            "buffer",
            "copyTo",
            lambda k: call(b.copyTo, ppb.CopyToRequest(buffer=k, dst=cv.memory_to_pb(InlineMemory(bytes(8))))),
        ),
        (
            "buffer",
            "copyFrom",
            lambda k: call(
                b.copyFrom,
                ppb.CopyFromRequest(buffer=k, src=cv.memory_to_pb(InlineMemory(bytes(8))), dimensions=[2]),
            ),
        ),
        (
            "buffer",
            "execute_1_3 token pool",
            lambda k: call(
                p.execute_1_3,
                ppb.ExecuteRequest_1_3(preparedModel=own_model, request=_token_request(k)),
            ),
        ),
        ("buffer", "release", lambda k: call(b.release, ppb.ReleaseRequest(id=k))),
        (
            "fence",
            "signalFence",
            lambda k: call(f.signalFence, ppb.SignalFenceRequest(fence=k, fenceStatus=0)),
        ),
        ("fence", "waitFence", lambda k: call(f.waitFence, ppb.WaitFenceRequest(fence=k))),
        (
            "fence",
            "executeFenced waitFor",
            lambda k: call(
                p.executeFenced,
                ppb.ExecuteFencedRequest(preparedModel=own_model, waitFor=[k]),
            ),
        ),
        ("fence", "release", lambda k: call(f.release, ppb.ReleaseRequest(id=k))),
        (
            "callback",
            "getExecutionInfo",
            lambda k: call(c.getExecutionInfo, ppb.GetExecutionInfoRequest(callback=k)),
        ),
        ("callback", "release", lambda k: call(c.release, ppb.ReleaseRequest(id=k))),
    ]


def _normalised(reply, key: int) -> tuple[int, str]:
    return reply.status, reply.message.replace(str(key), "<id>")


def _unknown_key(bits: int = 64) -> int:
    return secrets.randbits(bits) or 1


@pytest.mark.parametrize("owner_session", [True, False], ids=["owner-session", "owner-peer"])
@pytest.mark.parametrize(
    "intruder_session", [True, False], ids=["intruder-session", "intruder-peer"]
)
def test_another_clients_objects_are_unknown_ids(address, owner_session, intruder_session):
    owner = connect(address, session=owner_session)
    intruder = Intruder(address, intruder_session)
    try:
        model = add_model()
        prepared = owner.prepareModel_1_3(model)
        buffer = owner.allocate(BufferDesc(dimensions=(2,)), [prepared], [BufferRole(0, 0, 1.0)])
        buffer.copyFrom(InlineMemory(X.tobytes()), (2,))
        fence = control.create_fence(owner)
        plan = IoPlan(model, [X, X], None, "inline")
        fenced = prepared.executeFenced(plan.request, waitFor=[fence])
        objects = {
            "prepared": prepared.id,
            "buffer": buffer.token,
            "fence": fence,
            "callback": fenced.callback.id,
        }
        assert buffer.id == buffer.token and 0 < buffer.token < 1 << 32

        # the intruder's own prepared model, for the calls that need one
        own = intruder.call(
            intruder.device.prepareModel_1_3,
            dpb.PrepareModelRequest_1_3(model=cv.model_to_pb(model)),
        )
        assert own.status == ErrorStatus.NONE, own.message

        checked = set()
        for kind, name, probe in _probes(intruder, own.preparedModel):
            key = objects[kind]
            unknown = _unknown_key(32 if kind == "buffer" else 64)
            foreign_reply, unknown_reply = probe(key), probe(unknown)
            assert foreign_reply.status == ErrorStatus.INVALID_ARGUMENT, (name, foreign_reply)
            assert _normalised(foreign_reply, key) == _normalised(unknown_reply, unknown), name
            assert "unknown" in foreign_reply.message, (name, foreign_reply.message)
            checked.add((kind, name))
        assert {k for k, _ in checked} == set(objects)

        # nothing the intruder did touched the owner's objects
        assert control.wait_fence(owner, fence) == "ACTIVE"
        control.signal_fence(owner, fence)
        assert control.wait_fence(owner, fenced.syncFence, timeout_s=30) == "SIGNALED"
        fenced.callback.getExecutionInfo()  # the owner's callback answers (raises otherwise)
        out = prepared.execute([X, X]).outputs[0]
        np.testing.assert_array_equal(out, X + X)
        assert np.frombuffer(buffer.copyTo(InlineMemory(bytes(8))), np.float32).tolist() == [1, 1]
    finally:
        intruder.close()
        owner.close()


def test_ids_are_random_64_bit(address):
    client = connect(address)
    try:
        ids = [client.prepareModel_1_3(add_model()).id for _ in range(8)]
        fences = [control.create_fence(client) for _ in range(8)]
    finally:
        client.close()
    # sequential ids would be small and consecutive; random 64-bit ones are neither
    assert len(set(ids)) == 8 and len(set(fences)) == 8
    assert max(ids) >= 1 << 40 and max(fences) >= 1 << 40
    assert sorted(ids) != list(range(min(ids), min(ids) + 8))


def test_same_session_on_two_connections_shares_its_objects(address):
    """The session is the client: a second connection naming it sees its objects."""
    owner = connect(address)
    try:
        key = owner.prepareModel_1_3(add_model()).id
        other = Intruder(address, session=True)
        other.metadata = ((SESSION_HEADER, owner.session.id),)
        reply = other.call(other.prepared.execute_1_3, ppb.ExecuteRequest_1_3(preparedModel=key))
        # past the id: the empty request is what is wrong now
        assert reply.status == ErrorStatus.INVALID_ARGUMENT and "unknown" not in reply.message
        other.close()
    finally:
        owner.close()

"""The gRPC target: malformed bytes for every RPC of a live server.

Input layout: byte 0 picks the RPC (``RPCS``, every method of IDevice,
IPreparedModel, IBuffer, IFencedExecutionCallback, ISyncFence and
INnhalControl except ``setFaults`` / ``setOffline``, whose whole purpose is to
make the device fail or stall); the rest is the request message, sent as is
(``channel.unary_unary`` with identity serializers, so it may be any bytes).
For the burst stream the rest is split into messages at each ``0xFE 0xFE``.

The server (``nnhal.driver.server.create_server`` on 127.0.0.1, in this process)
starts once with three seed models prepared (ids 1 to 3). Each case must end
with an answer: a reply that parses, whose HAL status is an ErrorStatus and
whose message is not an internal error or a traceback, or a gRPC status other
than UNKNOWN (an exception escaping a servicer) and DEADLINE_EXCEEDED (a call
that never answers; waitFence may wait as long as it is told). After every
case a getVersionString must still be answered NONE.

Requests naming a shared-memory segment that exists on this host are not
sent: attaching another process's segment is exactly what a fuzzer must not
do to the machine it runs on (that the server lets a client name any segment
belongs to the exposure rules, not to this target).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import grpc
from google.protobuf.message import Message
from nnhal.tools.fuzz.targets import FuzzFailure, internal_text

from nnhal import convert as cv
from nnhal._proto.v1_3 import control_pb2 as cpb
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.types import ErrorStatus

CALL_TIMEOUT_S = 30.0
EXCLUDED = frozenset({"setFaults", "setOffline"})
_STATUSES = frozenset(int(s) for s in ErrorStatus)
_SPLIT = b"\xfe\xfe"


def _rpcs() -> list[tuple[str, Any, Any, bool]]:
    out = []
    for module in (dpb, ppb, cpb):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                if method.name in EXCLUDED:
                    continue
                path = f"/{service.full_name}/{method.name}"
                request = _message_class(method.input_type)
                reply = _message_class(method.output_type)
                out.append((path, request, reply, method.client_streaming))
    return sorted(out, key=lambda r: r[0])


def _message_class(descriptor: Any) -> Any:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


RPCS = _rpcs()


class Live:
    """The server, a channel and one identity-serialized callable per RPC."""

    def __init__(self) -> None:
        from nnhal.driver.device import Device
        from nnhal.driver.server import create_server

        self.server, self.address = create_server(Device(), "127.0.0.1:0")
        self.channel = grpc.insecure_channel(
            self.address, options=[("grpc.max_receive_message_length", -1),
                                   ("grpc.max_send_message_length", -1)])  # fmt: skip
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.calls: dict[str, Any] = {}
        for path, _req, _rep, streaming in RPCS:
            make = self.channel.stream_stream if streaming else self.channel.unary_unary
            self.calls[path] = make(path, request_serializer=None, response_deserializer=None)
        self.prepared: list[int] = []
        for seed in seed_model_list():
            msg = dpb.PrepareModelRequest_1_3(model=cv.model_to_pb(seed.model))
            reply = dpb.PrepareModelReply.FromString(
                self.calls["/nnhal.v1_3.IDevice/prepareModel_1_3"](msg.SerializeToString())
            )
            self.prepared.append(reply.preparedModel)

    def alive(self) -> None:
        """getVersionString still answers NONE (else a FuzzFailure)."""
        query = dpb.DeviceQuery().SerializeToString()
        try:
            raw = self.calls["/nnhal.v1_3.IDevice/getVersionString"](query, timeout=10)
        except grpc.RpcError as exc:
            raise FuzzFailure("hang", f"the server stopped serving: {exc.code().name}") from exc
        if dpb.GetVersionStringReply.FromString(raw).status != ErrorStatus.NONE:
            raise FuzzFailure("status", "getVersionString no longer answers NONE")


@functools.lru_cache(maxsize=1)
def live() -> Live:
    return Live()


def close_live(wait_s: float = 10.0) -> bool:
    """Stop the server of ``live()`` if it was started; False if it did not finish stopping.

    Bounded on purpose: after a burst stream whose messages failed to deserialize,
    grpcio's server sometimes never completes its shutdown (see the README, Fuzzing).
    """
    if not live.cache_info().currsize:
        return True
    server = live()
    live.cache_clear()
    server.channel.close()
    return server.server.stop(grace=0).wait(wait_s)


def seed_model_list():
    from nnhal.tools.fuzz.corpus import seed_models

    return [s for s in seed_models() if not s.model.referenced][:2] + [
        s for s in seed_models() if s.model.referenced
    ][:1]


def _shm_names(message: Any) -> list[str]:
    names = []
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif isinstance(value, Message):
            items = [value]
        else:
            items = list(value)
        for item in items:
            if not hasattr(item, "ListFields"):
                continue
            if item.DESCRIPTOR.full_name == "nnhal.v1_3.SharedMemory":
                names.append(item.name)
            else:
                names.extend(_shm_names(item))
    return names


def _touches_host_segment(request_cls: Any, payload: bytes) -> bool:
    try:
        message = request_cls.FromString(payload)
    except Exception:  # noqa: BLE001 - unparsable: the server rejects it, nothing is attached
        return False
    for name in _shm_names(message):
        if name and os.path.exists(f"/dev/shm/{name.lstrip('/')}"):
            return True
    return False


def _check_reply(path: str, reply_cls: Any, raw: bytes) -> None:
    try:
        reply = reply_cls.FromString(raw)
    except Exception as exc:
        raise FuzzFailure("crash", f"{path}: the reply does not parse: {exc}") from exc
    fields = reply.DESCRIPTOR.fields_by_name
    if "status" in fields and reply.status not in _STATUSES:
        raise FuzzFailure("status", f"{path}: reply status {reply.status} is no ErrorStatus")
    message = getattr(reply, "message", "")
    if internal_text(message) or "internal error" in message:
        raise FuzzFailure("internal", f"{path}: {message}")


def _check_rpc_error(path: str, exc: grpc.RpcError) -> None:
    code, details = exc.code(), exc.details() or ""
    if code == grpc.StatusCode.UNKNOWN or "Traceback" in details:
        raise FuzzFailure("crash", f"{path}: gRPC {code.name}: {details}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED and not path.endswith("/waitFence"):
        raise FuzzFailure("hang", f"{path}: no answer within {CALL_TIMEOUT_S} s")
    if code == grpc.StatusCode.UNAVAILABLE:
        raise FuzzFailure("crash", f"{path}: the server is gone: {details}")


def grpc_target(data: bytes) -> None:
    if not data:
        return
    server = live()
    path, request_cls, reply_cls, streaming = RPCS[data[0] % len(RPCS)]
    payload = data[1:]
    parts = payload.split(_SPLIT)[:4] if streaming else [payload]
    if any(_touches_host_segment(request_cls, p) for p in parts):
        return
    call = server.calls[path]
    try:
        if streaming:
            for raw in call(iter(parts), timeout=CALL_TIMEOUT_S):
                _check_reply(path, reply_cls, raw)
        else:
            _check_reply(path, reply_cls, call(payload, timeout=CALL_TIMEOUT_S))
    except grpc.RpcError as exc:
        _check_rpc_error(path, exc)
    server.alive()


def seed_calls() -> tuple[bytes, ...]:
    """One or more valid requests per RPC, against the seed models prepared at start."""
    from nnhal.tools.fuzz.models import request_for

    seeds = seed_model_list()
    request = request_for(seeds[0].model, seeds[0].inputs)
    req13 = cv.request_to_pb(request)
    from nnhal import convert_legacy as legacy

    req10 = legacy.request_to_v1_0_pb(request)
    model13 = cv.model_to_pb(seeds[0].model)
    flat = seeds[0].model
    by_name: dict[str, list[Any]] = {
        "prepareModel_1_3": [
            dpb.PrepareModelRequest_1_3(model=cv.model_to_pb(s.model)) for s in seeds
        ],
        "getSupportedOperations_1_3": [dpb.GetSupportedOperationsRequest_1_3(model=model13)],
        "explainSupportedOperations": [dpb.ExplainSupportedOperationsRequest(model=model13)],
        "prepareModel_1_2": [dpb.PrepareModelRequest_1_2(model=legacy.model_to_v1_2_pb(flat))],
        "getSupportedOperations_1_2": [
            dpb.GetSupportedOperationsRequest_1_2(model=legacy.model_to_v1_2_pb(flat))
        ],
        "execute_1_3": [
            ppb.ExecuteRequest_1_3(preparedModel=1, request=req13, measure=tpb.MEASURE_TIMING_YES)
        ],
        "executeSynchronously_1_3": [ppb.ExecuteRequest_1_3(preparedModel=1, request=req13)],
        "executeFenced": [ppb.ExecuteFencedRequest(preparedModel=1, request=req13)],
        "execute_1_2": [ppb.ExecuteRequest_1_2(preparedModel=1, request=req10)],
        "executeSynchronously": [ppb.ExecuteRequest_1_2(preparedModel=1, request=req10)],
        "execute": [ppb.ExecuteRequest(preparedModel=1, request=req10)],
        "configureExecutionBurst": [ppb.ExecuteRequest_1_2(preparedModel=1, request=req10)],
        "waitFence": [ppb.WaitFenceRequest(fence=1, timeoutMs=1)],
        "signalFence": [ppb.SignalFenceRequest(fence=1)],
        "release": [ppb.ReleaseRequest(id=123456)],
        "allocate": [dpb.AllocateRequest(preparedModels=[1])],
        "copyTo": [ppb.CopyToRequest(buffer=1)],
        "copyFrom": [ppb.CopyFromRequest(buffer=1)],
        "getExecutionInfo": [ppb.GetExecutionInfoRequest(callback=1)],
    }
    out: list[bytes] = []
    for i, (path, request_cls, _reply, streaming) in enumerate(RPCS):
        name = path.rsplit("/", 1)[1]
        messages = by_name.get(name) or [request_cls()]
        for message in messages:
            raw = message.SerializeToString()
            out.append(bytes([i]) + (raw + _SPLIT + raw if streaming else raw))
    return tuple(out)

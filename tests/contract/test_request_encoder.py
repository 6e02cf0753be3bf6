"""The client's RequestEncoder fills request messages exactly as request_to_pb and
request_to_v1_0_pb build them, with the last arguments' encoding kept and reused."""

from __future__ import annotations

import pytest

from nnhal import convert as cv
from nnhal import convert_legacy as legacy
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import types_legacy_pb2 as lpb
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.types import (
    DataLocation,
    InlineMemory,
    OptionalTimeoutDuration,
    OptionalTimePoint,
    Request,
    RequestArgument,
    SharedMemory,
    TokenMemory,
)

A = Request(
    inputs=(
        RequestArgument(location=DataLocation(0, 0, 8), dimensions=(2,)),
        RequestArgument(hasNoValue=True),
    ),
    outputs=(RequestArgument(location=DataLocation(1, 4, 8)),),
    pools=(InlineMemory(b"abcdefgh"), SharedMemory("seg", 64)),
)
B = Request(inputs=(), outputs=(RequestArgument(),), pools=(InlineMemory(bytearray(b"zz")),))
C = Request(
    inputs=(RequestArgument(location=DataLocation(0, 0, 4)),),
    outputs=(),
    pools=(TokenMemory(3),),
)


def test_it_encodes_as_request_to_pb_again_and_again() -> None:
    encoder = cv.RequestEncoder()
    for request in (A, A, B, A, C, C, B):
        msg = tpb.Request()
        encoder.fill(msg, request)
        assert msg.SerializeToString() == cv.request_to_pb(request).SerializeToString()


def test_new_bytes_in_the_same_arguments_are_sent() -> None:
    encoder = cv.RequestEncoder()
    for data in (b"12345678", b"abcdefgh"):
        request = Request(A.inputs, A.outputs, (InlineMemory(data), A.pools[1]))
        msg = tpb.Request()
        encoder.fill(msg, request)
        assert msg.pools[0].inlineData == data
        assert msg == cv.request_to_pb(request)


def test_v1_0_requests_as_request_to_v1_0_pb() -> None:
    encoder = cv.RequestEncoder()
    for request in (A, A, B):
        msg = lpb.V1_0.Request()
        encoder.fill(msg, request, v1_0=True)
        assert msg.SerializeToString() == legacy.request_to_v1_0_pb(request).SerializeToString()
    with pytest.raises(TypeError, match="only valid in a 1.3 Request"):
        encoder.fill(lpb.V1_0.Request(), C, v1_0=True)


@pytest.mark.parametrize("value", [None, 0, 5, OptionalTimePoint(7), OptionalTimePoint()])
def test_time_points_and_timeouts_as_their_to_pb(value) -> None:
    msg = ppb.ExecuteRequest_1_3()
    cv.fill_time_point(msg.deadline, value)
    assert msg == ppb.ExecuteRequest_1_3(deadline=cv.optional_time_point_to_pb(value))
    timeout = (
        OptionalTimeoutDuration(value.nanosecondsSinceEpoch)
        if isinstance(value, OptionalTimePoint)
        else value
    )
    msg = ppb.ExecuteRequest_1_3()
    cv.fill_timeout(msg.loopTimeoutDuration, timeout)
    assert msg == ppb.ExecuteRequest_1_3(loopTimeoutDuration=cv.optional_timeout_to_pb(timeout))
    assert cv.deadline_ns_from_pb(msg.deadline) is None


def _execution(prepared_model, measure, request, deadline=None, timeout=None):
    return ppb.ExecuteRequest_1_3(
        preparedModel=prepared_model,
        measure=measure,
        request=cv.request_to_pb(request),
        deadline=cv.optional_time_point_to_pb(deadline),
        loopTimeoutDuration=cv.optional_timeout_to_pb(timeout),
    )


def test_execution_messages_as_built_field_by_field() -> None:
    """The kept encoding serves only the same arguments, prepared model and measure; a
    deadline or a loop timeout is always filled anew."""
    encoder = cv.RequestEncoder()
    calls = [
        (7, 0, A, None, None),
        (7, 0, A, None, None),
        (7, 1, A, None, None),
        (8, 1, A, None, None),
        (8, 1, B, None, None),
        (8, 1, B, 123, None),
        (8, 1, B, None, 0),
        (8, 1, B, OptionalTimePoint(), OptionalTimeoutDuration(5)),
        (8, 1, B, None, None),
        (7, 0, A, None, None),
        (7, 0, Request(A.inputs, A.outputs, (InlineMemory(b"12345678"), A.pools[1])), None, None),
    ]
    for prepared_model, measure, request, deadline, timeout in calls:
        msg = ppb.ExecuteRequest_1_3()
        encoder.fill_execution(msg, prepared_model, measure, request, deadline, timeout)
        built = _execution(prepared_model, measure, request, deadline, timeout)
        assert msg.SerializeToString() == built.SerializeToString()


def test_burst_execution_messages_as_built_field_by_field() -> None:
    """Bursts and other executions alternate on one encoder, each served its own entry."""
    encoder = cv.RequestEncoder()
    calls = [(7, 0, A, ()), (7, 0, A, ()), (7, 1, A, ()), (7, 1, B, ()), (7, 1, B, (3,))]
    calls += [(8, 1, B, ()), (7, 0, A, (-1, 2)), (7, 0, A, ())]
    for prepared_model, measure, request, slots in calls:
        msg = ppb.ExecuteRequest_1_2()
        encoder.fill_burst_execution(msg, prepared_model, measure, request, slots)
        built = ppb.ExecuteRequest_1_2(
            preparedModel=prepared_model,
            measure=measure,
            request=legacy.request_to_v1_0_pb(request),
            slots=ppb.BurstSlots(poolSlots=list(slots)),
        )
        assert msg.SerializeToString() == built.SerializeToString()
        unary = ppb.ExecuteRequest_1_3()
        encoder.fill_execution(unary, prepared_model, measure, request)
        assert unary == _execution(prepared_model, measure, request)

"""The call trace (nnhal.driver.trace): a small request kept serialized and summed up when the
trace is read gives the entry a request summed up at once gives."""

from __future__ import annotations

import pytest
from nnhal.driver import trace
from nnhal.driver.trace import DEFER_BYTES, Trace, brief

from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import types_pb2 as tpb


def _execution(**fields) -> ppb.ExecuteRequest_1_3:
    msg = ppb.ExecuteRequest_1_3(**fields)
    msg.request.pools.add(inlineData=b"\0" * 8)
    return msg


MESSAGES = [
    _execution(preparedModel=5),
    _execution(preparedModel=5, measure=tpb.MEASURE_TIMING_YES),
    _execution(deadline=tpb.OptionalTimePoint(), loopTimeoutDuration=tpb.OptionalTimeoutDuration()),
    _execution(deadline=tpb.OptionalTimePoint(nanosecondsSinceEpoch=0)),
    _execution(loopTimeoutDuration=tpb.OptionalTimeoutDuration(nanoseconds=7)),
    ppb.ExecuteRequest_1_2(preparedModel=3, slots=ppb.BurstSlots(poolSlots=[1, -1])),
    ppb.ExecuteRequest_1_2(preparedModel=3, slots=ppb.BurstSlots(free=list(range(20)))),
    dpb.PrepareModelRequest_1_3(token=b"\1" * 32),
    ppb.ReleaseRequest(),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_a_request_kept_serialized_reads_as_summed_up_at_once(message, monkeypatch) -> None:
    assert message.ByteSize() <= DEFER_BYTES
    deferred = Trace()
    deferred.record("m", message, 1.0, 0.5, 0, "")
    monkeypatch.setattr(trace, "DEFER_BYTES", -1)  # sums up every request when recorded
    at_once = Trace()
    at_once.record("m", message, 1.0, 0.5, 0, "")
    assert deferred.entries() == at_once.entries()
    assert deferred.entries()[0]["args"] == brief(message)


def test_a_large_request_is_summed_up_when_recorded() -> None:
    message = _execution(preparedModel=9)
    message.request.pools.add(inlineData=b"\0" * (DEFER_BYTES + 1))
    recorded = Trace()
    recorded.record("m", message, 1.0, 0.5, 0, "")
    (row,) = [row for _, row in recorded._entries]
    assert (
        row[1] == brief(message) == {"preparedModel": 9, "request": "0 inputs, 0 outputs, 2 pools"}
    )


def test_executions_are_traced_with_their_summary() -> None:
    from nnhal.driver.device import Device
    from nnhal.driver.service import create_server
    from nnhal.tools import bench as fib

    from nnhal.client import connect
    from nnhal.control import Control

    server, address = create_server(Device(), "127.0.0.1:0")
    try:
        with connect(address, timeout=10.0) as client, Control(address) as control:
            prepared = client.prepareModel_1_3(fib.fibonacci_while_model())
            prepared.execute_request(fib.fibonacci_request(0), measure=True)
            with prepared.burst() as burst:
                burst.execute_request(fib.fibonacci_request(0))
            unary, streamed = control.trace("default")[-2:]
    finally:
        server.stop(None).wait()
    assert unary["method"] == "executeSynchronously_1_3" and unary["status"] == "NONE"
    assert unary["args"] == {
        "preparedModel": prepared.id,
        "request": "2 inputs, 2 outputs, 2 pools",
        "measure": tpb.MEASURE_TIMING_YES,
        "deadline": None,
        "loopTimeoutDuration": None,
    }
    assert streamed["method"] == "configureExecutionBurst"
    assert streamed["args"] == {
        "preparedModel": prepared.id,
        "request": "2 inputs, 2 outputs, 2 pools",
        "slots": None,
    }

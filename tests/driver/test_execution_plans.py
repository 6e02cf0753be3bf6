"""Execution plans (nnhal.driver.execution_plans): a layout that passed the checks runs by its
plan, and a request that differs from it in anything a check reads is checked again."""

from __future__ import annotations

import numpy as np
import pytest
from validation_models import F32, add_model

from nnhal import convert as cv
from nnhal.errors import InvalidArgument, MissedDeadline, ResourceExhausted
from nnhal.types import DataLocation, InlineMemory, Request, RequestArgument, TokenMemory

TWO = np.array([1.0, 2.0], np.float32).tobytes()


def _request(pool0: bytes = TWO + TWO, pool1: int = 8, out_dims: tuple[int, ...] = ()) -> Request:
    return Request(
        inputs=(
            RequestArgument(location=DataLocation(0, 0, 8)),
            RequestArgument(location=DataLocation(0, 8, 8)),
        ),
        outputs=(RequestArgument(location=DataLocation(1, 0, 8), dimensions=out_dims),),
        pools=(InlineMemory(pool0), InlineMemory(bytes(pool1))),
    )


def _plans(prepared) -> list:
    return [k for k in prepared.request_layouts if k[0] == "plan"]


@pytest.fixture
def serving():
    """A client of a server of its own, and the server's device state."""
    from nnhal.driver.device import Device
    from nnhal.driver.server import create_server

    from nnhal.client import connect

    server, address = create_server(Device(), "127.0.0.1:0")
    client = connect(address, timeout=10.0)
    try:
        (state,) = server.states.values()
        yield client, state
    finally:
        client.close()
        server.stop(None).wait()


_STATES: dict[int, object] = {}


def _execute(prepared, request: Request, **kwargs):
    """service.execute on a driver PreparedModel, as the servicers call it (by default on
    one device state per prepared model: the same limits on every call)."""
    from nnhal.driver._service_support import ServiceState
    from nnhal.driver.device import Device
    from nnhal.driver.request_layouts import decode_request
    from nnhal.driver.service import execute

    state = kwargs.pop("state", None)
    if state is None:
        if id(prepared) not in _STATES:
            _STATES[id(prepared)] = ServiceState(Device())
        state = _STATES[id(prepared)]
    decoded, layout = decode_request(prepared, cv.request_to_pb(request))
    return execute(state, prepared, decoded, measure=False, layout=layout, **kwargs)


def test_the_planned_reply_is_the_reply_built_field_by_field(serving) -> None:
    client, state = serving
    prepared = client.prepareModel_1_3(add_model())
    first = prepared.execute_request(_request())
    served = state.prepared_models.peek(prepared.id)
    assert len(_plans(served)) == 1
    second = prepared.execute_request(_request())  # by the plan
    assert second == first
    assert second.pools[1] == np.array([2.0, 4.0], np.float32).tobytes()
    other = prepared.execute_request(_request(pool0=TWO + TWO[::-1]), measure=True)
    assert other.timing.timeOnDevice <= other.timing.timeInDriver < 10**9  # measured
    assert len(_plans(served)) == 1


def test_a_planned_layout_with_a_smaller_input_pool_is_refused(client_device) -> None:
    prepared = client_device.prepareModel_1_3(add_model())
    prepared.execute_request(_request())
    prepared.execute_request(_request())
    with pytest.raises(InvalidArgument, match="outside pool 0"):
        prepared.execute_request(_request(pool0=TWO + TWO[:4]))
    assert (
        prepared.execute_request(_request()).pools[1] == np.array([2.0, 4.0], np.float32).tobytes()
    )


def test_a_planned_layout_with_a_smaller_output_pool_is_refused(client_device) -> None:
    prepared = client_device.prepareModel_1_3(add_model())
    prepared.execute_request(_request())
    prepared.execute_request(_request())
    with pytest.raises(InvalidArgument, match="outside pool 1"):
        prepared.execute_request(_request(pool1=4))


def test_other_arguments_are_not_served_the_plan(client_device) -> None:
    prepared = client_device.prepareModel_1_3(add_model())
    prepared.execute_request(_request())
    wrong = Request(
        (_request().inputs[0], RequestArgument(location=DataLocation(0, 8, 4))),
        _request().outputs,
        _request().pools,
    )
    with pytest.raises(InvalidArgument, match="length"):
        prepared.execute_request(wrong)


def test_a_plan_made_with_unspecified_outputs_allowed_does_not_serve_a_call_without() -> None:
    from nnhal.driver.device import Device

    from nnhal.builder import ModelBuilder
    from nnhal.types import OperandType as T
    from nnhal.types import OperationType as O

    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, [2]), g.input(F32, [2])
    g.operation(O.ADD, [a, b, g.constant(T.INT32, 0)], [g.output(F32, [0])])
    prepared = Device().prepareModel_1_3(mb.build())
    _execute(prepared, _request())
    _execute(prepared, _request())  # by the plan
    with pytest.raises(InvalidArgument, match="every output dimension must be known"):
        _execute(prepared, _request(), allow_unspecified_output=False)


def test_a_plan_checked_against_other_limits_checks_the_pools_again() -> None:
    from limits_models import device_with
    from nnhal.driver._service_support import ServiceState
    from nnhal.driver.device import Device

    prepared = Device().prepareModel_1_3(add_model())
    _execute(prepared, _request())
    _execute(prepared, _request())  # by the plan, against the default limits
    strict = ServiceState(device_with(max_pool_bytes=12))
    with pytest.raises(ResourceExhausted, match="limit max_pool_bytes"):
        _execute(prepared, _request(), state=strict)


def test_a_planned_layout_still_misses_a_past_deadline() -> None:
    import time

    from nnhal.driver.device import Device

    prepared = Device().prepareModel_1_3(add_model())
    _execute(prepared, _request())
    _execute(prepared, _request())
    with pytest.raises(MissedDeadline, match="had passed on arrival"):
        _execute(prepared, _request(), deadline_ns=time.monotonic_ns() - 1)


def test_requests_with_driver_buffers_get_no_plan(serving) -> None:
    from nnhal.types import BufferRole

    client, state = serving
    prepared = client.prepareModel_1_3(add_model())
    buffer = client.allocate(preparedModels=[prepared], outputRoles=[BufferRole(0, 0, 1.0)])
    request = Request(
        _request().inputs,
        (RequestArgument(location=DataLocation(1, 0, 0)),),
        (InlineMemory(TWO + TWO), TokenMemory(buffer.token)),
    )
    prepared.execute_request(request)
    prepared.execute_request(request)
    assert _plans(state.prepared_models.peek(prepared.id)) == []


def test_a_planned_layout_skips_only_the_checks_it_passed(monkeypatch) -> None:
    from nnhal.driver import request_layouts, service
    from nnhal.driver.device import Device

    calls: list[str] = []
    validate, pools = request_layouts.validate_request, service.check_request_pools
    monkeypatch.setattr(
        request_layouts, "validate_request", lambda *a, **k: (calls.append("v"), validate(*a, **k))
    )
    monkeypatch.setattr(service, "check_request_pools", lambda *a: (calls.append("p"), pools(*a)))
    prepared = Device().prepareModel_1_3(add_model())
    _execute(prepared, _request())
    assert calls == ["p", "v"]
    _execute(prepared, _request(pool0=TWO[::-1] + TWO))  # new bytes, the same layout
    assert calls == ["p", "v"]
    _execute(prepared, _request(pool1=12))  # a larger output pool: another layout
    assert calls == ["p", "v", "p", "v"]


def test_a_burst_runs_by_the_plan_and_still_refuses_what_differs(serving) -> None:
    client, state = serving
    prepared = client.prepareModel_1_3(add_model())
    summed = np.array([2.0, 4.0], np.float32).tobytes()
    with prepared.burst() as burst:
        assert burst.execute_request(_request()).pools[1] == summed
        assert burst.execute_request(_request()).pools[1] == summed  # by the plan
        assert len(_plans(state.prepared_models.peek(prepared.id))) == 1
        with pytest.raises(InvalidArgument, match="outside pool 0"):
            burst.execute_request(_request(pool0=TWO + TWO[:4]))
        # pool 0 from a memory slot of the same size: the same layout, by the plan
        slot = burst.register(InlineMemory(TWO + TWO))
        assert burst.execute_request(_request(), slots=(slot, -1)).pools[1] == summed
        short = burst.register(InlineMemory(TWO))
        with pytest.raises(InvalidArgument, match="outside pool 0"):
            burst.execute_request(_request(), slots=(short, -1))
        assert burst.execute_request(_request()).pools[1] == summed

"""Request layouts validated once per prepared model (nnhal.driver.request_layouts): the memo
never lets through a request that validate_request refuses."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.request_layouts import MAX_LAYOUTS
from validation_models import add_model

from nnhal.errors import InvalidArgument
from nnhal.types import DataLocation, InlineMemory, Request, RequestArgument


def _request(pool0: int = 16, out_dims: tuple[int, ...] = ()) -> Request:
    x = np.array([1.0, 2.0], np.float32).tobytes()
    return Request(
        inputs=(
            RequestArgument(location=DataLocation(0, 0, 8)),
            RequestArgument(location=DataLocation(0, 8, 8)),
        ),
        outputs=(RequestArgument(location=DataLocation(1, 0, 8), dimensions=out_dims),),
        pools=(InlineMemory((x + x)[:pool0]), InlineMemory(bytes(8))),
    )


def test_a_known_layout_with_a_smaller_pool_is_still_refused(client_device) -> None:
    prepared = client_device.prepareModel_1_3(add_model())
    result = prepared.execute_request(_request())
    assert result.pools[1] == np.array([2.0, 4.0], np.float32).tobytes()
    # the same arguments, but pool 0 holds 12 bytes: input 1 (8..16) lies outside it
    with pytest.raises(InvalidArgument, match="outside pool 0"):
        prepared.execute_request(_request(pool0=12))
    # and the valid layout still runs
    assert prepared.execute_request(_request()).pools[1] == result.pools[1]


def test_a_layout_valid_with_unspecified_outputs_is_checked_again_without() -> None:
    """The memo's key holds allow_unspecified_output (False: executeFenced)."""
    from nnhal.driver.device import Device
    from nnhal.driver.request_layouts import decode_request, validate_once
    from validation_models import F32

    from nnhal import convert as cv
    from nnhal.builder import ModelBuilder
    from nnhal.types import OperandType as T
    from nnhal.types import OperationType as O

    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, [2]), g.input(F32, [2])
    y = g.output(F32, [0])  # unknown dimension
    g.operation(O.ADD, [a, b, g.constant(T.INT32, 0)], [y])
    prepared = Device().prepareModel_1_3(mb.build())
    request, key = decode_request(prepared, cv.request_to_pb(_request()))
    assert request == _request()
    validate_once(prepared, request, key, True)
    validate_once(prepared, request, key, True)  # remembered
    with pytest.raises(InvalidArgument, match="every output dimension must be known"):
        validate_once(prepared, request, key, False)


def test_the_memo_of_a_prepared_model_stays_bounded() -> None:
    from nnhal.driver.device import Device
    from nnhal.driver.server import create_server

    from nnhal.client import connect

    server, address = create_server(Device(), "127.0.0.1:0")
    client = connect(address, timeout=10.0)
    try:
        prepared = client.prepareModel_1_3(add_model())
        (state,) = server.states.values()
        served = state.prepared_models.peek(prepared.id)
        for extra in range(MAX_LAYOUTS + 20):  # distinct layouts: output pools of distinct sizes
            request = _request()
            pools = (request.pools[0], InlineMemory(bytes(8 + extra)))
            prepared.execute_request(Request(request.inputs, request.outputs, pools))
        assert 0 < len(served.request_layouts) <= MAX_LAYOUTS
    finally:
        client.close()
        server.stop(None).wait()


def _views(request: Request) -> list[memoryview]:
    return [memoryview(bytearray(p.data)) for p in request.pools]  # type: ignore[union-attr]


def test_a_kept_input_plan_serves_only_its_own_arguments() -> None:
    """PreparedModel keeps the last layout's input plan (by the arguments' identity): other
    arguments, equal or not, are checked anew, and the pools on every execution."""
    from nnhal.driver.device import Device

    prepared = Device().prepareModel_1_3(add_model())
    good = _request()
    prepared.execute(good, _views(good), validated=True)
    # the kept arguments with a pool too small for input 1: refused
    short = Request(good.inputs, good.outputs, (InlineMemory(bytes(12)), InlineMemory(bytes(8))))
    with pytest.raises(InvalidArgument, match="outside pool 0"):
        prepared.execute(short, _views(short), validated=True)
    # new arguments (input 1 is 4 bytes long): planned anew and refused, not served the old plan
    wrong = Request(
        (good.inputs[0], RequestArgument(location=DataLocation(0, 8, 4))),
        good.outputs,
        good.pools,
    )
    with pytest.raises(InvalidArgument, match="location length is 4 bytes"):
        prepared.execute(wrong, _views(wrong), validated=True)
    views = _views(good)
    prepared.execute(good, views, validated=True)
    assert bytes(views[1]) == np.array([2.0, 4.0], np.float32).tobytes()


def test_a_kept_output_check_is_redone_for_other_results() -> None:
    """The accepted output check is kept for the same arguments and results of the same
    shapes and dtypes only: anything else is checked again."""
    from nnhal.driver.device import Device

    from nnhal.errors import GeneralFailure

    prepared = Device().prepareModel_1_3(add_model())
    request = _request()
    ok = [np.zeros(2, np.float32)]
    shapes, _ = prepared._checked_outputs(request, ok)
    assert shapes[0].dimensions == (2,) and shapes[0].isSufficient
    with pytest.raises(GeneralFailure, match="not compatible with the model's dimensions"):
        prepared._checked_outputs(request, [np.zeros(3, np.float32)])
    with pytest.raises(GeneralFailure, match="produced float64 data"):
        prepared._checked_outputs(request, [np.zeros(2, np.float64)])
    assert prepared._checked_outputs(request, ok)[0] == shapes


def test_the_last_arguments_serve_only_requests_with_the_same_arguments() -> None:
    """decode_request keeps the last arguments (compared as messages): any request whose
    arguments differ, however little, is decoded as itself."""
    from nnhal.driver.device import Device
    from nnhal.driver.request_layouts import decode_request

    from nnhal import convert as cv

    prepared = Device().prepareModel_1_3(add_model())
    good = _request()
    variants = [
        good,
        _request(out_dims=(2,)),
        Request((good.inputs[0], RequestArgument(hasNoValue=True)), good.outputs, good.pools),
        Request(good.inputs, (RequestArgument(location=DataLocation(1, 0, 4)),), good.pools),
        Request(good.inputs, (RequestArgument(location=DataLocation(1, 4, 8)),), good.pools),
        Request(good.inputs[:1], good.outputs, good.pools),
        good,
        good,
    ]
    keys = {}
    for request in variants:
        decoded, key = decode_request(prepared, cv.request_to_pb(request))
        assert decoded == request
        assert keys.setdefault(request, key) == key
    assert len(set(keys.values())) == len(keys) == 6
    # a location present but empty is another message than no location: another key
    message = cv.request_to_pb(good)
    message.inputs[0].ClearField("location")
    absent = decode_request(prepared, message)[1]
    message.inputs[0].location.SetInParent()
    assert decode_request(prepared, message)[1] != absent

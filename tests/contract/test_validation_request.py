"""Tests for validate_request (hal13.md §4.6) and the preference / priority checks."""

from __future__ import annotations

from dataclasses import replace

import pytest
from validation_models import (  # tests/validation_models.py
    T,
    add_model,
    with_operand,
)

from nnhal.errors import InvalidArgument
from nnhal.types import (
    DataLocation,
    InlineMemory,
    Model,
    Request,
    RequestArgument,
    SharedMemory,
    TokenMemory,
)
from nnhal.validation import (
    validate_execution_preference,
    validate_priority,
    validate_request,
)

# ---------------------------------------------------------------------------
# Preference and priority
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, 2])
def test_valid_preference_and_priority(value):
    validate_execution_preference(value)
    validate_priority(value)


@pytest.mark.parametrize("value", [-1, 3, True, "1", 1.0])
def test_invalid_preference_and_priority(value):
    with pytest.raises(InvalidArgument, match="execution preference .* is invalid"):
        validate_execution_preference(value)
    with pytest.raises(InvalidArgument, match="priority .* is invalid; valid values: LOW"):
        validate_priority(value)


# ---------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------


def request_for(model: Model, pools=None, inputs=None, outputs=None) -> Request:
    """A request with every main input/output in one inline pool, 8 bytes each."""
    main = model.main
    n = len(main.inputIndexes) + len(main.outputIndexes)
    args = [RequestArgument(location=DataLocation(0, 8 * j, 8)) for j in range(n)]
    return Request(
        inputs=tuple(inputs if inputs is not None else args[: len(main.inputIndexes)]),
        outputs=tuple(outputs if outputs is not None else args[len(main.inputIndexes) :]),
        pools=tuple(pools if pools is not None else (InlineMemory(bytes(8 * n)),)),
    )


def expect_invalid_request(request, model, *fragments, **kwargs):
    with pytest.raises(InvalidArgument) as info:
        validate_request(request, model, **kwargs)
    for fragment in fragments:
        assert fragment in info.value.message, f"{fragment!r} not in {info.value.message!r}"


def test_valid_request():
    m = add_model()
    validate_request(request_for(m), m)
    validate_request(request_for(m, pools=(SharedMemory("nnhal-x", 24),)), m)


def test_request_argument_counts():
    m = add_model()
    r = request_for(m)
    expect_invalid_request(
        replace(r, inputs=r.inputs[:1]),
        m,
        "request has 1 inputs but the model's main subgraph has 2",
    )
    expect_invalid_request(replace(r, outputs=r.outputs * 2), m, "request has 2 outputs")


def test_request_has_no_value():
    m = add_model()
    r = request_for(m)
    validate_request(replace(r, inputs=(RequestArgument(hasNoValue=True), r.inputs[1])), m)
    for bad in (
        RequestArgument(True, DataLocation(0, 0, 8)),
        RequestArgument(True, dimensions=(2,)),
    ):
        expect_invalid_request(
            replace(r, inputs=(bad, r.inputs[1])),
            m,
            "request input 0",
            "hasNoValue",
            "must be zero / empty",
        )


def test_request_location_bounds():
    m = add_model()
    r = request_for(m)  # one 24-byte pool
    out = RequestArgument(location=DataLocation(1, 0, 8))
    expect_invalid_request(
        replace(r, outputs=(out,)),
        m,
        "request output 0 (main operand 3",
        "poolIndex 1 is out of range",
        "1 pools",
    )
    out = RequestArgument(location=DataLocation(0, 20, 8))
    expect_invalid_request(
        replace(r, outputs=(out,)),
        m,
        "request output 0",
        "(offset 20, length 8) is outside pool 0 (24 bytes",
    )
    expect_invalid_request(
        request_for(m, pools=(SharedMemory("nnhal-x", 16),)),
        m,
        "request output 0",
        "outside pool 0 (16 bytes",
    )


def test_request_token_pool_counts_as_size_zero():
    m = add_model()
    r = request_for(m)
    whole = RequestArgument(location=DataLocation(1, 0, 0))
    validate_request(replace(r, outputs=(whole,), pools=(*r.pools, TokenMemory(5))), m)
    part = RequestArgument(location=DataLocation(1, 0, 8))
    expect_invalid_request(
        replace(r, outputs=(part,), pools=(*r.pools, TokenMemory(5))),
        m,
        "request output 0",
        "outside pool 1 (0 bytes; a token pool",
    )
    expect_invalid_request(
        replace(r, pools=(*r.pools, TokenMemory(0))), m, "request pool 1", "token 0 is invalid"
    )
    expect_invalid_request(replace(r, pools=(b"raw",)), m, "request pool 0", "not a memory pool")


def test_request_dimensions():
    m = add_model(dims=(2, 0))  # model fixes axis 0 to 2, axis 1 unknown
    r = request_for(m)
    dims = lambda j, d: RequestArgument(location=DataLocation(0, 8 * j, 8), dimensions=d)
    validate_request(replace(r, inputs=(dims(0, (2, 1)), dims(1, (2, 1)))), m)
    expect_invalid_request(
        replace(r, inputs=(dims(0, (2,)), r.inputs[1])),
        m,
        "request input 0",
        "have rank 1 but the model's have rank 2",
    )
    expect_invalid_request(
        replace(r, inputs=(dims(0, (3, 1)), r.inputs[1])),
        m,
        "request dimension 0 is 3 but the model fixes it to 2",
    )
    expect_invalid_request(
        replace(r, inputs=(dims(0, (2, 0)), dims(1, (2, 1)))),
        m,
        "request input 0",
        "dimension 1 is 0 (unknown)",
    )
    # inputs need every dimension; outputs only when unspecified outputs are disallowed
    expect_invalid_request(r, m, "request input 0", "the request gives none")
    inputs = (dims(0, (2, 1)), dims(1, (2, 1)))
    validate_request(replace(r, inputs=inputs), m)
    validate_request(replace(r, inputs=inputs, outputs=(dims(2, (2, 0)),)), m)
    expect_invalid_request(
        replace(r, inputs=inputs),
        m,
        "request output 0",
        "the request gives none",
        allow_unspecified_output=False,
    )
    expect_invalid_request(
        replace(r, inputs=inputs, outputs=(dims(2, (2, 0)),)),
        m,
        "request output 0",
        "dimension 1 is 0",
        allow_unspecified_output=False,
    )
    validate_request(
        replace(r, inputs=inputs, outputs=(dims(2, (2, 3)),)), m, allow_unspecified_output=False
    )


def test_request_scalar_and_unknown_rank_inputs():
    m = with_operand(add_model(), 0, 1, dimensions=())  # input 1: unknown rank
    r = request_for(m)
    expect_invalid_request(r, m, "request input 1", "rank unknown")
    known = RequestArgument(location=DataLocation(0, 8, 8), dimensions=(2,))
    validate_request(replace(r, inputs=(r.inputs[0], known)), m)
    scalar = with_operand(m, 0, 1, type=T.INT32)
    bad = RequestArgument(location=DataLocation(0, 8, 4), dimensions=(1,))
    expect_invalid_request(
        replace(r, inputs=(r.inputs[0], bad)),
        scalar,
        "request input 1",
        "scalars take no dimensions",
    )

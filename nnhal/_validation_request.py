"""Request validation (hal13.md §4.6) and the prepare-time enum checks.

Private to ``nnhal.validation``, which re-exports ``validate_request``,
``validate_execution_preference`` and ``validate_priority``.
"""

from __future__ import annotations

from collections.abc import Sequence

from nnhal._validation_control_flow import describe as _describe
from nnhal._validation_control_flow import dims_text as _dims
from nnhal.errors import InvalidArgument
from nnhal.types import (
    OPERAND_TYPE_INFO,
    ExecutionPreference,
    InlineMemory,
    Model,
    Operand,
    Priority,
    Request,
    RequestArgument,
    SharedMemory,
    TokenMemory,
)

_UINT32_MAX = 0xFFFFFFFF


def _request_pool_sizes(request: Request) -> list[int]:
    sizes = []
    for p, pool in enumerate(request.pools):
        if isinstance(pool, InlineMemory):
            sizes.append(len(pool.data))
        elif isinstance(pool, SharedMemory):
            if not pool.name or not isinstance(pool.size, int) or pool.size < 0:
                raise InvalidArgument(
                    f"request pool {p}: shared memory {pool.name!r} of size {pool.size!r} is"
                    " not valid memory (needs a name and a size >= 0)"
                )
            sizes.append(pool.size)
        elif isinstance(pool, TokenMemory):
            if not isinstance(pool.token, int) or not 0 < pool.token <= _UINT32_MAX:
                raise InvalidArgument(
                    f"request pool {p}: token {pool.token!r} is invalid; tokens are > 0"
                )
            sizes.append(0)  # a token pool counts as size 0 (§4.6): offset/length must be 0
        else:
            raise InvalidArgument(f"request pool {p} is a {type(pool).__name__}, not a memory pool")
    return sizes


def _check_request_arguments(
    kind: str,
    arguments: Sequence[RequestArgument],
    indexes: Sequence[int],
    operands: Sequence[Operand],
    pool_sizes: list[int],
    allow_unspecified: bool,
) -> None:
    if len(arguments) != len(indexes):
        raise InvalidArgument(
            f"request has {len(arguments)} {kind}s but the model's main subgraph has"
            f" {len(indexes)}; there must be one per main {kind}"
        )
    for a, (argument, index) in enumerate(zip(arguments, indexes)):
        operand = operands[index]

        # only formatted for an error message: this runs on every execution
        def where(a: int = a, index: int = index, operand: Operand = operand) -> str:
            return f"request {kind} {a} (main operand {index}, {_describe(operand)})"

        loc = argument.location
        req_dims = tuple(argument.dimensions)
        if argument.hasNoValue:
            if loc.poolIndex or loc.offset or loc.length or req_dims:
                raise InvalidArgument(
                    f"{where()}: hasNoValue but location (poolIndex {loc.poolIndex}, offset"
                    f" {loc.offset}, length {loc.length}) / dimensions {_dims(req_dims)} are set;"
                    " they must be zero / empty"
                )
            continue
        if not 0 <= loc.poolIndex < len(pool_sizes):
            raise InvalidArgument(
                f"{where()}: poolIndex {loc.poolIndex} is out of range; the request has"
                f" {len(pool_sizes)} pools"
            )
        size = pool_sizes[loc.poolIndex]
        if loc.offset < 0 or loc.length < 0 or loc.offset + loc.length > size:
            raise InvalidArgument(
                f"{where()}: location (offset {loc.offset}, length {loc.length}) is outside pool"
                f" {loc.poolIndex} ({size} bytes; a token pool counts as 0 bytes)"
            )
        model_dims = tuple(operand.dimensions)
        info = OPERAND_TYPE_INFO.get(operand.type)
        if not req_dims:
            if not allow_unspecified and 0 in model_dims:
                raise InvalidArgument(
                    f"{where()}: the model leaves a dimension unknown ({_dims(model_dims)}) and"
                    f" the request gives none; every {kind} dimension must be known"
                )
            # Stricter than AOSP, which lets this through to fail at execution:
            # an input tensor of unknown rank with no request dimensions has no shape.
            if kind == "input" and not model_dims and info is not None and not info.is_scalar:
                raise InvalidArgument(
                    f"{where()}: the model leaves the rank unknown and the request gives no"
                    " dimensions; an input's shape must be known"
                )
            continue
        if info is not None and info.is_scalar:
            raise InvalidArgument(
                f"{where()}: request dimensions {_dims(req_dims)} given for a scalar; scalars"
                " take no dimensions"
            )
        if model_dims and len(req_dims) != len(model_dims):
            raise InvalidArgument(
                f"{where()}: request dimensions {_dims(req_dims)} have rank {len(req_dims)} but"
                f" the model's have rank {len(model_dims)}; they must match"
            )
        for axis, d in enumerate(req_dims):
            if not isinstance(d, int) or d < 0 or d > _UINT32_MAX:
                raise InvalidArgument(f"{where()}: dimension {axis} is {d!r}, not a uint32")
            if model_dims and model_dims[axis] and d != model_dims[axis]:
                raise InvalidArgument(
                    f"{where()}: request dimension {axis} is {d} but the model fixes it to"
                    f" {model_dims[axis]}"
                )
            if d == 0 and not allow_unspecified:
                raise InvalidArgument(
                    f"{where()}: request dimension {axis} is 0 (unknown); {kind} dimensions must"
                    " be known here"
                )


def validate_request(
    request: Request, model: Model, *, allow_unspecified_output: bool = True
) -> None:
    """Raise InvalidArgument unless ``request`` is valid for ``model`` (§4.6).

    ``model`` must already be valid. ``allow_unspecified_output`` is True for
    execute / executeSynchronously / burst and False for executeFenced.
    Whether a token is known to the driver is the driver's business.
    """
    pool_sizes = _request_pool_sizes(request)
    main = model.main
    _check_request_arguments(
        "input", request.inputs, main.inputIndexes, main.operands, pool_sizes, False
    )
    _check_request_arguments(
        "output",
        request.outputs,
        main.outputIndexes,
        main.operands,
        pool_sizes,
        allow_unspecified_output,
    )


def _check_enum_value(what: str, value: int, enum_type: type) -> None:
    valid = {int(m) for m in enum_type}
    if isinstance(value, bool) or not isinstance(value, int) or value not in valid:
        accepted = ", ".join(f"{m.name} ({int(m)})" for m in enum_type)
        raise InvalidArgument(f"{what} {value!r} is invalid; valid values: {accepted}")


def validate_execution_preference(value: int) -> None:
    """Raise InvalidArgument unless ``value`` is an ExecutionPreference."""
    _check_enum_value("execution preference", value, ExecutionPreference)


def validate_priority(value: int) -> None:
    """Raise InvalidArgument unless ``value`` is a Priority."""
    _check_enum_value("priority", value, Priority)

"""What client calls hand back, and how replies become results or errors.

Shared by ``nnhal.client`` (unary calls) and ``nnhal._client_burst`` (burst
streams): result types, the status check of a reply, and the mapping of gRPC
transport faults to HAL errors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import numpy as np

from nnhal import convert as cv
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.errors import DeviceUnavailable, HalError, ResourceExhausted, error_from_status
from nnhal.types import NO_TIMING, UINT64_MAX, ErrorStatus, OutputShape, Timing


@dataclass(frozen=True)
class ExecutionResult:
    """Outputs of ``PreparedModel.execute``: one array per main output, at its runtime shape."""

    outputs: list[np.ndarray]
    outputShapes: tuple[OutputShape, ...]
    timing: Timing


@dataclass(frozen=True)
class RequestResult:
    """Outcome of ``execute_request``; ``pools`` holds the new contents of inline output pools."""

    outputShapes: tuple[OutputShape, ...]
    timing: Timing
    pools: dict[int, bytes]


def _check(reply: Any) -> Any:
    """Raise the HalError of a non-NONE reply (with output shapes when it has some)."""
    if reply.status != ErrorStatus.NONE:
        shapes = tuple(cv.output_shape_from_pb(s) for s in getattr(reply, "outputShapes", ()))
        raise error_from_status(reply.status, reply.message, shapes)
    return reply


def transport_error(exc: grpc.RpcError, what: str = "gRPC transport error") -> HalError:
    """The HalError for a failed RPC: DEVICE_UNAVAILABLE, except gRPC RESOURCE_EXHAUSTED
    (a message over the server's ``max_message_bytes``, or the server out of resources),
    which is RESOURCE_EXHAUSTED_PERSISTENT for a message too large, else _TRANSIENT."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        too_large = "larger than max" in (details or "")
        hint = (
            "; the message is larger than the server accepts (its limit max_message_bytes): "
            'send fewer or smaller inline pools, or use shared memory (memory="shared")'
            if too_large
            else ""
        )
        return ResourceExhausted(
            f"{what} RESOURCE_EXHAUSTED: {details}{hint}", transient=not too_large
        )
    return DeviceUnavailable(f"{what} {code}: {details}")


def _call(method: Callable[[Any], Any], message: Any) -> Any:
    """Call one unary RPC; a transport fault is DEVICE_UNAVAILABLE (``transport_error``)."""
    try:
        return method(message)
    except grpc.RpcError as exc:
        raise transport_error(exc) from exc


def _rpc(method: Callable[[Any], Any], message: Any) -> Any:
    """``_call`` and raise the HalError of a non-NONE status."""
    return _check(_call(method, message))


def _timing(reply: Any, field: str = "timing") -> Timing:
    if not reply.HasField(field):
        return NO_TIMING
    msg = getattr(reply, field)
    if msg.timeOnDevice == UINT64_MAX and msg.timeInDriver == UINT64_MAX:
        return NO_TIMING  # "not measured", the common answer: no new object for it
    return cv.timing_from_pb(msg)


#: the output shapes of recent replies by their values (OutputShape is immutable): a client
#: reads the same shapes reply after reply; at most ``_SHAPES_KEPT``, emptied when full
_SHAPES: dict[tuple[tuple[tuple[int, ...], bool], ...], tuple[OutputShape, ...]] = {}
_SHAPES_KEPT = 256
#: the last shapes read: their messages (copied out of the reply, which may hold large
#: pools) and values, replaced in one assignment (thread-safe)
_last_shapes: tuple[Any, tuple[OutputShape, ...]] | None = None
_REPLY_TYPE = ppb.ExecuteReply


def _output_shapes(reply: Any) -> tuple[OutputShape, ...]:
    """``cv.output_shape_from_pb`` of every output shape of ``reply``, inline: once per
    execution. Shapes equal to the last ones (compared as messages, in C) are those."""
    global _last_shapes
    messages, last = reply.outputShapes, _last_shapes
    if last is not None and messages == last[0]:
        return last[1]
    key = tuple([(tuple(s.dimensions), s.isSufficient) for s in messages])
    shapes = _SHAPES.get(key)
    if shapes is None:
        if len(_SHAPES) >= _SHAPES_KEPT:
            _SHAPES.clear()
        shapes = _SHAPES[key] = tuple([OutputShape(dims, ok) for dims, ok in key])
    kept = _REPLY_TYPE()
    kept.outputShapes.extend(messages)
    _last_shapes = (kept.outputShapes, shapes)
    return shapes


def _request_result(reply: Any) -> RequestResult:
    return RequestResult(
        _output_shapes(reply),
        _timing(reply),
        {p.poolIndex: p.data for p in reply.outputPools},  # bytes already
    )


def _measure(measure: bool) -> int:
    return tpb.MEASURE_TIMING_YES if measure else tpb.MEASURE_TIMING_NO

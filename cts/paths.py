"""Execution paths and the checks every execution result goes through.

``execute(target, prepared, request, path)`` sends one request down one path
and returns the raw outcome (``Execution``: status, message, output shapes,
timing, output pools, wall time), never raising for an error status:

- ``sync``  = executeSynchronously_1_3, ``async`` = execute_1_3 (over this
  wire both return the callback's outcome in the reply);
- ``fenced`` = executeFenced (also reads ``getExecutionInfo`` on success);
- ``burst`` = one execution in a configureExecutionBurst stream (the client's
  ``Burst``; a V1_0 request, no deadline and no loop timeout).

``layout(test, ...)`` builds the request for a ``TestModel`` (inline or
shared memory; outputs fully specified, unspecified, or with output 0 one
byte short), ``check_success`` / ``check_insufficient`` apply the VTS rules
(hal13.md §1.1 item 9 and §5.7) and compare values with the tolerance table,
and ``run_test_model`` does all of it for one test model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import grpc
import numpy as np
from nnhal.cts.core import check, fail

from nnhal import convert as cv
from nnhal._client_io import IoPlan, extension_output_dtypes
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.errors import DeviceUnavailable, HalError, OutputInsufficientSize
from nnhal.tolerance import compare
from nnhal.types import (
    NO_TIMING,
    UINT64_MAX,
    ErrorStatus,
    OutputShape,
    Request,
    Timing,
    is_tensor_type,
)
from nnhal.vectors import TestModel

__all__ = [
    "ALL_PATHS",
    "Execution",
    "check_error",
    "check_insufficient",
    "check_success",
    "execute",
    "has_unknown_outputs",
    "layout",
    "run_test_model",
]

ALL_PATHS = ("sync", "async", "burst", "fenced")
MISSED_DEADLINE = (ErrorStatus.MISSED_DEADLINE_TRANSIENT, ErrorStatus.MISSED_DEADLINE_PERSISTENT)


@dataclass
class Execution:
    path: str
    status: ErrorStatus
    message: str = ""
    shapes: tuple[OutputShape, ...] = ()
    timing: Timing = NO_TIMING
    pools: dict[int, bytes] = field(default_factory=dict)
    elapsed: float = 0.0
    #: fenced: (syncFence, callback id, getExecutionInfo tuple or None)
    fenced: tuple[int, int, Any] | None = None
    outputs: list[np.ndarray] | None = None

    def describe(self) -> str:
        text = f"{self.path}: {self.status.name}"
        return f"{text} ({self.message})" if self.message else text


def _raw(method: Any, message: Any) -> Any:
    try:
        return method(message)
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        raise DeviceUnavailable(f"gRPC transport error {code}: {exc.details()}") from exc


def _timing(reply: Any, name: str = "timing") -> Timing:
    return cv.timing_from_pb(getattr(reply, name)) if reply.HasField(name) else NO_TIMING


def execute(
    target: Any,
    prepared: Any,
    request: Request,
    path: str,
    *,
    measure: bool = False,
    deadline_ns: int | None = None,
    loop_timeout_ns: int | None = None,
    duration_ns: int | None = None,
    wait_for: Sequence[int] = (),
    burst: Any = None,
) -> Execution:
    """One execution of ``request`` on ``prepared`` down ``path``; error statuses are returned."""
    started = time.monotonic()
    measure_pb = tpb.MEASURE_TIMING_YES if measure else tpb.MEASURE_TIMING_NO
    stub = prepared.device.prepared_model_stub
    if path in ("sync", "async"):
        message = ppb.ExecuteRequest_1_3(
            preparedModel=prepared.id,
            request=cv.request_to_pb(request),
            measure=measure_pb,
            deadline=cv.optional_time_point_to_pb(deadline_ns),
            loopTimeoutDuration=cv.optional_timeout_to_pb(loop_timeout_ns),
        )
        method = stub.executeSynchronously_1_3 if path == "sync" else stub.execute_1_3
        reply = _raw(method, message)
        return Execution(
            path,
            ErrorStatus(reply.status),
            reply.message,
            tuple(cv.output_shape_from_pb(s) for s in reply.outputShapes),
            _timing(reply),
            {p.poolIndex: bytes(p.data) for p in reply.outputPools},
            time.monotonic() - started,
        )
    if path == "fenced":
        message = ppb.ExecuteFencedRequest(
            preparedModel=prepared.id,
            request=cv.request_to_pb(request),
            waitFor=list(wait_for),
            measure=measure_pb,
            deadline=cv.optional_time_point_to_pb(deadline_ns),
            loopTimeoutDuration=cv.optional_timeout_to_pb(loop_timeout_ns),
            duration=cv.optional_timeout_to_pb(duration_ns),
        )
        reply = _raw(stub.executeFenced, message)
        status = ErrorStatus(reply.status)
        info = None
        if status == ErrorStatus.NONE and reply.callback:
            info_reply = _raw(
                prepared.device.callback_stub.getExecutionInfo,
                ppb.GetExecutionInfoRequest(callback=reply.callback),
            )
            info = (
                ErrorStatus(info_reply.status),
                _timing(info_reply, "timingLaunched"),
                _timing(info_reply, "timingFenced"),
            )
        return Execution(
            path,
            status,
            reply.message,
            (),
            NO_TIMING if info is None else info[1],
            {p.poolIndex: bytes(p.data) for p in reply.outputPools},
            time.monotonic() - started,
            (reply.syncFence, reply.callback, info),
        )
    if path == "burst":
        own = burst is None
        stream = prepared.burst() if own else burst
        try:
            result = stream.execute_request(request, measure=measure)
            return Execution(
                path,
                ErrorStatus.NONE,
                "",
                result.outputShapes,
                result.timing,
                result.pools,
                time.monotonic() - started,
            )
        except OutputInsufficientSize as e:
            return Execution(
                path, e.status, e.message, e.shapes, NO_TIMING, {}, time.monotonic() - started
            )
        except DeviceUnavailable:
            raise
        except HalError as e:
            return Execution(
                path, e.status, e.message, (), NO_TIMING, {}, time.monotonic() - started
            )
        finally:
            if own:
                stream.close()
    raise ValueError(f"unknown execution path {path!r}")


# ---------------------------------------------------------------------------
# Requests for test models
# ---------------------------------------------------------------------------


def has_unknown_outputs(test: TestModel) -> bool:
    """True when some main output tensor has unknown dimensions in the model."""
    main = test.model.main
    for i in main.outputIndexes:
        o = main.operands[i]
        if is_tensor_type(o.type) and (not o.dimensions or 0 in o.dimensions):
            return True
    return False


def layout(test: TestModel, *, memory: str = "inline", outputs: str = "empty") -> IoPlan | None:
    """The request memory for ``test``; the caller closes the plan.

    Output buffers are sized by the expected shapes. ``outputs``: "empty"
    (request dimensions empty, as VTS sends them), "specified" (request
    dimensions = the expected shapes) or "insufficient" (empty, and output 0
    one byte short; None when output 0 has at most one byte).
    """
    dtypes = extension_output_dtypes(test.model, test.expected)  # extension-typed outputs
    plan = IoPlan(test.model, test.inputs, test.expected_shapes, memory, dtypes)
    if outputs == "specified":
        return plan
    args = [replace(a, dimensions=()) for a in plan.request.outputs]
    if outputs == "insufficient":
        loc = args[0].location
        if loc.length <= 1:
            plan.close()
            return None
        args[0] = replace(args[0], location=replace(loc, length=loc.length - 1))
    plan.request = replace(plan.request, outputs=tuple(args))
    return plan


def check_timing(execution: Execution, measure: bool) -> None:
    t = execution.timing
    if not measure:
        check(
            t.timeOnDevice == UINT64_MAX and t.timeInDriver == UINT64_MAX,
            lambda: (
                f"{execution.path}: timing {t} reported although MeasureTiming is NO "
                "(both must be UINT64_MAX)"
            ),
        )
    elif t.timeOnDevice != UINT64_MAX and t.timeInDriver != UINT64_MAX:
        check(
            t.timeOnDevice <= t.timeInDriver,
            lambda: (
                f"{execution.path}: timeOnDevice {t.timeOnDevice} µs > timeInDriver "
                f"{t.timeInDriver} µs"
            ),
        )


def check_error(execution: Execution, allowed: Sequence[ErrorStatus], what: str) -> None:
    """An error status from ``allowed``, with no output shapes and no timing."""
    names = "/".join(s.name for s in allowed)
    check(
        execution.status in allowed,
        lambda: f"{what}: expected {names}, got {execution.describe()}",
    )
    check(
        not execution.shapes,
        lambda: (
            f"{what}: {execution.status.name} came with {len(execution.shapes)} output shapes "
            "(must be empty)"
        ),
    )
    check(
        execution.timing == NO_TIMING,
        lambda: f"{what}: {execution.status.name} came with timing {execution.timing}",
    )


def check_success(test: TestModel, plan: IoPlan, execution: Execution, *, measure: bool) -> None:
    """NONE, shapes and timing per the HAL, values within the tolerance table.

    Output shapes may be empty or one per output; one per output is required
    when the model leaves some output's dimensions unknown.
    """
    unspecified = has_unknown_outputs(test)
    check(
        execution.status == ErrorStatus.NONE,
        lambda: f"expected NONE, got {execution.describe()}",
    )
    shapes = execution.shapes
    n = len(test.expected_shapes)
    if unspecified:
        check(
            len(shapes) == n,
            lambda: (
                f"{execution.path}: {len(shapes)} output shapes for "
                f"{n} outputs with unspecified dimensions"
            ),
        )
    else:
        check(
            len(shapes) in (0, n),
            lambda: (
                f"{execution.path}: {len(shapes)} output shapes for "
                f"{n} outputs (must be 0 or one per output)"
            ),
        )
    for k, (shape, golden) in enumerate(zip(shapes, test.expected_shapes)):
        check(shape.isSufficient, f"output {k}: isSufficient is false after NONE")
        if is_tensor_type(test.output_types[k]):
            check(
                tuple(shape.dimensions) == tuple(golden),
                f"output {k}: dimensions {list(shape.dimensions)}, expected {list(golden)}",
            )
    check_timing(execution, measure)
    outputs = plan.read_outputs(shapes, execution.pools)
    execution.outputs = outputs
    problems = []
    for k, (expected, actual) in enumerate(zip(test.expected, outputs)):
        if expected is None or test.ignored[k]:
            continue
        ok, _, message = compare(expected, actual, test.output_types[k], test, output_index=k)
        if not ok:
            problems.append(message)
    if problems:
        fail(f"{execution.path}: " + "; ".join(problems))


def check_insufficient(test: TestModel, execution: Execution) -> None:
    """OUTPUT_INSUFFICIENT_SIZE, one shape per output, only output 0 insufficient."""
    check(
        execution.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE,
        lambda: (
            f"output 0 one byte short: expected OUTPUT_INSUFFICIENT_SIZE, got "
            f"{execution.describe()}"
        ),
    )
    shapes = execution.shapes
    n = len(test.expected_shapes)
    check(
        len(shapes) == n,
        lambda: f"OUTPUT_INSUFFICIENT_SIZE with {len(shapes)} output shapes for {n} outputs",
    )
    for k, (shape, golden) in enumerate(zip(shapes, test.expected_shapes)):
        want = k != 0
        check(
            shape.isSufficient == want,
            f"output {k}: isSufficient is {shape.isSufficient}, expected {want}",
        )
        if not is_tensor_type(test.output_types[k]):
            continue
        dims = tuple(shape.dimensions)
        check(len(dims) == len(golden), f"output {k}: rank {len(dims)}, expected {len(golden)}")
        check(
            all(d == 0 or d == g for d, g in zip(dims, golden)),
            f"output {k}: dimensions {list(dims)} disagree with {list(golden)}",
        )


def run_test_model(
    target: Any,
    test: TestModel,
    *,
    path: str = "sync",
    measure: bool = False,
    memory: str = "inline",
    outputs: str = "empty",
    prepared: Any = None,
    burst: Any = None,
    loop_timeout_ns: int | None = None,
) -> Execution | None:
    """Support check (skip), prepare, execute, check. Expected failures pass on any error.

    Returns the execution (None when an expectFailure model failed as expected).
    """
    own = prepared is None
    if own:
        try:
            target.require_supported(test.model)
        except HalError as e:
            if test.expectFailure:
                return None
            fail(f"getSupportedOperations_1_3: {e}")
        try:
            prepared = target.device.prepareModel_1_3(test.model)
        except HalError as e:
            if test.expectFailure:
                return None
            fail(f"prepareModel_1_3: {e}")
    plan = layout(test, memory=memory, outputs=outputs)
    assert plan is not None
    try:
        execution = execute(
            target,
            prepared,
            plan.request,
            path,
            measure=measure,
            burst=burst,
            loop_timeout_ns=loop_timeout_ns,
        )
        if test.expectFailure:
            check(
                execution.status != ErrorStatus.NONE,
                f"{path}: expected a failure (expectFailure), but the execution succeeded",
            )
            return None
        check_success(test, plan, execution, measure=measure)
        return execution
    finally:
        plan.close()
        if own:
            try:
                prepared.release()
            except HalError:
                pass

"""Execution plans: a request layout a prepared model has run before goes straight to its run.

Clients repeat one request layout (``nnhal.driver.request_layouts``): the same
arguments, pools of the same kinds and sizes, only the bytes differ. For such a
layout the service's checks before an execution have one outcome each, worked
out the first time and kept in a ``LayoutPlan``:

- ``validate_request`` passed, with the call's ``allow_unspecified_output``;
- the pools passed the device's size limits (``check_request_pools``, against the
  very ``Limits`` object the plan holds);
- which inline pools hold outputs (their new contents go back in the reply).

``plan_key`` is the plan's key in the prepared model's memo of layouts: the
arguments' bytes, the pools' kinds and sizes (``request_layouts.pools_key``) and
``allow_unspecified_output``, everything those checks read. A plan is only made
after the checks passed for such a request (``remember_plan``), and never for a
request with driver-buffer (token) pools: their buffers' holder and state are
checked on every call. ``run_planned`` then does only what can differ from one
request to the next: an execution slot, the pools mapped (a shared segment
attached by name on every call), ``PreparedModel.execute`` (the deadline, the loop
timeout, every input read and output write within its pool, the outputs checked
against the request), and the reply. ``execute_reply`` builds the reply of every
successful execution, planned or not.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from nnhal.driver.executor.model import Cancel
from nnhal.driver.limits import Limits
from nnhal.driver.memory import MappedPools
from nnhal.driver.request_layouts import pools_key, remember

from nnhal import convert as cv
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal.types import NO_TIMING, ErrorStatus, InlineMemory, OutputShape, Request, Timing

_NONE = ErrorStatus.NONE
_NO_TIMING_PB = cv.timing_to_pb(NO_TIMING)  # copied into each reply, never changed
_FROM_STRING = ppb.ExecuteReply.FromString


class LayoutPlan:
    """One layout's checks, passed (module docstring), and its last reply's fixed part."""

    __slots__ = ("_reply", "limits", "output_pools")

    def __init__(self, limits: Limits, output_pools: tuple[int, ...]) -> None:
        self.limits = limits
        self.output_pools = output_pools
        # (shapes, the serialized reply without pools): the reply of the last output
        # shapes, found by the shapes' identity (PreparedModel hands back the same tuple
        # while the outputs keep their shapes) and holding them, so it serves only them
        self._reply: tuple[tuple[OutputShape, ...], bytes] | None = None


def plan_key(arguments_key: Hashable, request: Request, allow_unspecified_output: bool) -> tuple:
    """The key of ``request``'s plan (``arguments_key``: from ``decode_request``)."""
    return ("plan", arguments_key, pools_key(request.pools), allow_unspecified_output)


def output_pool_indexes(request: Request) -> tuple[int, ...]:
    """The inline pools that hold an output, in order: their contents go back in the reply."""
    indexes = {
        arg.location.poolIndex
        for arg in request.outputs
        if not arg.hasNoValue and arg.location.poolIndex < len(request.pools)
    }
    return tuple(sorted(i for i in indexes if isinstance(request.pools[i], InlineMemory)))


def remember_plan(prepared: Any, key: tuple, request: Request, limits: Limits) -> None:
    """Keep the plan of a request that passed the checks (``validate_request`` and
    ``check_request_pools`` against ``limits``) and has no token pools."""
    remember(prepared.request_layouts, key, LayoutPlan(limits, output_pool_indexes(request)))


def find_plan(prepared: Any, key: tuple, limits: Limits) -> LayoutPlan | None:
    """The plan kept under ``key``, if its pools were checked against ``limits``."""
    plan = prepared.request_layouts.get(key)
    if plan is None or plan.limits is not limits:
        return None
    return plan


def run_planned(
    state: Any,
    prepared: Any,
    plan: LayoutPlan,
    request: Request,
    measure: bool,
    deadline_ns: int | None,
    loop_timeout_ns: int | None,
    premapped: dict[int, memoryview] | None,
    cancel: Cancel | None,
) -> ppb.ExecuteReply:
    """One execution of a planned request (HalErrors propagate)."""
    executions = state.executions
    executions.acquire()
    try:
        with MappedPools(request.pools, premapped) as mapped:
            views = mapped.views
            shapes, timing = prepared.execute(
                request,
                views,
                measure=measure,
                deadline_ns=deadline_ns,
                loop_timeout_ns=loop_timeout_ns,
                cancel=cancel,
                validated=True,
            )
            return execute_reply(shapes, timing, views, plan.output_pools, plan)
    finally:
        executions.release()


def execute_reply(
    shapes: tuple[OutputShape, ...],
    timing: Timing,
    views: Sequence[memoryview],
    output_pools: Sequence[int],
    plan: LayoutPlan | None = None,
) -> ppb.ExecuteReply:
    """The reply of a successful execution: status, shapes, timing, the output pools'
    contents. With a ``plan``, the fixed part is parsed from the bytes kept for the same
    shapes (the same message as built field by field)."""
    last = None if plan is None else plan._reply
    if last is not None and last[0] is shapes:
        reply = _FROM_STRING(last[1])
    else:
        reply = ppb.ExecuteReply()
        # built in place: sub-messages handed to a constructor would be copied
        reply.status = _NONE
        add_shape = reply.outputShapes.add
        for shape in shapes:
            add_shape(dimensions=shape.dimensions, isSufficient=shape.isSufficient)
        reply.timing.CopyFrom(_NO_TIMING_PB)
        if plan is not None:
            plan._reply = (shapes, reply.SerializeToString())  # one assignment: thread-safe
    if timing is not NO_TIMING:
        reply.timing.CopyFrom(cv.timing_to_pb(timing))
    add_pool = reply.outputPools.add
    for i in output_pools:
        add_pool(poolIndex=i, data=bytes(views[i]))
    return reply

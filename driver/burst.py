"""One configureExecutionBurst stream: the HAL's burst context with its memory-slot cache.

The stream is bound to the prepared model named by its first message (held
for the stream's life, as IBurstContext holds it). Each message applies its
``BurstSlots`` (``free``, then ``add``, then ``poolSlots``; see
prepared_model.proto) and, when it carries a request, runs it; replies come
in request order, one per message, each with its own status.

The cache is the point of bursts: a shared-memory slot is attached once when
added and stays mapped until freed or the stream ends, so later executions
name the slot and skip the attach/map work; inline slots keep their bytes.
Freeing an unknown slot or freeing twice is harmless (VTS does both). A burst
carries V1_0 requests: no deadline, and the default loop timeout (2 s).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from nnhal.driver.execution_plans import find_plan, plan_key, run_planned
from nnhal.driver.memory import attach_shared_memory
from nnhal.driver.request_layouts import decode_request

from nnhal import convert as cv
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.errors import InvalidArgument
from nnhal.types import NO_TIMING, ErrorStatus, SharedMemory

log = logging.getLogger("nnhal.driver.burst")


class BurstSession:
    """The server side of one burst stream (used by one thread at a time)."""

    def __init__(self, state: Any, execute: Callable[..., Any], caller: str | None = None) -> None:
        self.state = state
        self.caller = caller  # the client of the stream: it may name its own objects only
        self._execute = execute
        self.bound_id = 0
        self.prepared: Any = None
        self.slots: dict[int, tuple[Any, memoryview | None]] = {}  # slot -> (pool, view)
        self.cancel: Any = None  # the stream's executor.model.Cancel, if any

    def _bind(self, key: int) -> None:
        if self.prepared is None:
            self.prepared = self.state.prepared_models.get(key, "burst", self.caller)
            self.bound_id = key
        elif key not in (0, self.bound_id):
            raise InvalidArgument(
                f"burst: bound to prepared model {self.bound_id}, request names {key}"
            )

    def _free(self, slot: int) -> None:
        entry = self.slots.pop(int(slot), None)
        if entry is not None and entry[1] is not None:
            try:
                entry[1].release()
            except BufferError:
                pass  # still exported by a running execution: unmapped with its last user

    def _add(self, slot: int, memory: Any) -> None:
        if slot < 0:
            raise InvalidArgument(f"burst: slot id {slot} is negative")
        pool = cv.memory_from_pb(memory)
        self._free(slot)
        view = None
        if isinstance(pool, SharedMemory):
            view = attach_shared_memory(pool.name, int(pool.size))
        self.slots[slot] = (pool, view)

    def run(self, message: Any) -> Any:
        """One message -> one ExecuteReply (HalErrors propagate to the caller's hal_method)."""
        self._bind(message.preparedModel)
        slots = message.slots
        named = slots.ByteSize() != 0  # most messages free, add and name no slot at all
        if named:
            for slot in slots.free:
                self._free(slot)
            if slots.add:  # no sorted copy of an empty map
                for slot, memory in sorted(slots.add.items()):
                    self._add(slot, memory)
        if not message.HasField("request"):
            return ppb.ExecuteReply(status=ErrorStatus.NONE, timing=cv.timing_to_pb(NO_TIMING))
        request, layout = decode_request(self.prepared, message.request, v1_0=True)
        premapped: dict[int, memoryview] = {}
        if named and slots.poolSlots:
            if len(slots.poolSlots) != len(request.pools):
                raise InvalidArgument(
                    f"burst: poolSlots has {len(slots.poolSlots)} entries; the request has "
                    f"{len(request.pools)} pools"
                )
            pools = list(request.pools)
            for p, slot in enumerate(slots.poolSlots):
                if slot < 0:
                    continue
                entry = self.slots.get(slot)
                if entry is None:
                    raise InvalidArgument(
                        f"burst: request pool {p} names unknown memory slot {slot}"
                    )
                pool, view = entry
                pools[p] = pool
                if view is not None:
                    premapped[p] = memoryview(view)  # a per-call view of the cached mapping
            request = dataclasses.replace(request, pools=tuple(pools))
        measure = message.measure == tpb.MEASURE_TIMING_YES
        # the service's execute() would find the plan too: here without its arguments
        plan = find_plan(self.prepared, plan_key(layout, request, True), self.state.limits)
        if plan is not None:  # no deadline and no loop timeout in a burst: the defaults
            return run_planned(
                self.state, self.prepared, plan, request, measure, None, None,
                premapped or None, self.cancel,
            )  # fmt: skip
        # The HAL burst carries no deadline and no loop timeout: the default applies.
        return self._execute(
            self.state,
            self.prepared,
            request,
            measure=measure,
            premapped=premapped or None,
            cancel=self.cancel,
            caller=self.caller,
            layout=layout,
        )

    def close(self) -> None:
        for slot in list(self.slots):
            self._free(slot)
        self.prepared = None

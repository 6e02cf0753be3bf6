"""The client side of configureExecutionBurst (``nnhal.client.Burst``): one stream of
executions in order, with the HAL's memory-slot cache (``register``, ``freeMemory``,
requests naming slots)."""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np

from nnhal import convert as cv
from nnhal._client_results import (
    ExecutionResult,
    RequestResult,
    _check,
    _measure,
    _request_result,
    transport_error,
)
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal.errors import DeviceUnavailable
from nnhal.types import InlineMemory, Request, SharedMemory

if TYPE_CHECKING:
    from typing_extensions import Self

    from nnhal.client import PreparedModel


class Burst:
    """A configureExecutionBurst stream; executions run in order, one at a time."""

    def __init__(self, prepared: PreparedModel) -> None:
        self.prepared = prepared
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        # the messages put in the queue until None: a C iterator, no generator frame to
        # resume for every message
        self._replies = prepared._stub.configureExecutionBurst(iter(self._requests.get, None))
        self._closed = False
        self._next_slot = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute_request(
        self, request: Request, *, measure: bool = False, slots: Sequence[int] = ()
    ) -> RequestResult:
        """One burst execution of a V1_0-style request (no token pools, no deadline).

        ``slots``: one per pool, a memory slot from ``register`` (the pool in
        ``request`` is then not sent) or -1 for the request's own pool.
        """
        if slots:
            pools = tuple(InlineMemory(b"") if k >= 0 else p for k, p in zip(slots, request.pools))
            request = dataclasses.replace(request, pools=pools)
        # filled in place (request_to_v1_0_pb and BurstSlots, without their copies)
        message = ppb.ExecuteRequest_1_2()
        self.prepared._encoder.fill_burst_execution(
            message, self.prepared.id, _measure(measure), request, slots
        )
        return self._send(message)

    def register(self, memory: InlineMemory | SharedMemory, slot: int | None = None) -> int:
        """Put a memory in the burst's slot cache (IBurstCallback::getMemories); its slot."""
        slot = self._next_slot if slot is None else slot
        self._next_slot = max(self._next_slot, slot + 1)
        add = {slot: cv.memory_to_pb(memory)}
        self._send(
            ppb.ExecuteRequest_1_2(preparedModel=self.prepared.id, slots=ppb.BurstSlots(add=add))
        )
        return slot

    def freeMemory(self, slot: int) -> None:
        """IBurstContext::freeMemory (an unknown slot is harmless)."""
        message = ppb.ExecuteRequest_1_2(
            preparedModel=self.prepared.id, slots=ppb.BurstSlots(free=[slot])
        )
        self._send(message)

    def _send(self, message: Any) -> RequestResult:
        with self._lock:
            if self._closed:
                raise ValueError("the burst is closed")
            self._requests.put(message)
            try:
                reply = next(self._replies)
            except grpc.RpcError as exc:
                raise transport_error(exc, "burst stream ended:") from exc
            except StopIteration as exc:
                raise DeviceUnavailable(f"burst stream ended: {exc}") from exc
        return _request_result(_check(reply))

    def execute(
        self,
        inputs: Sequence[np.ndarray | None],
        *,
        output_shapes: Sequence[Sequence[int] | None] | None = None,
        output_dtypes: Sequence[Any] | None = None,
        measure: bool = False,
        memory: str = "inline",
    ) -> ExecutionResult:
        """One burst execution on numpy inputs (``output_shapes``, ``output_dtypes`` as
        for ``PreparedModel.execute``)."""
        plan = self.prepared._plan(inputs, output_shapes, memory, output_dtypes)
        try:
            result = self.execute_request(plan.request, measure=measure)
            outputs = plan.read_outputs(result.outputShapes, result.pools)
        finally:
            plan.close()
        return ExecutionResult(outputs, result.outputShapes, result.timing)

    def close(self) -> None:
        """End the stream (the server releases its burst context)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._requests.put(None)
            try:
                for _ in self._replies:
                    pass
            except grpc.RpcError:
                pass

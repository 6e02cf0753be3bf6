"""The devices a compilation can use, seen through one small interface.

``RuntimeDevice`` is what the partitioner and the executor need from a device:
its name, capabilities, which operations of a model it supports (with reasons),
and ``prepare`` giving a ``StepModel`` that runs numpy inputs to numpy outputs.

- ``ClientDevice`` wraps an ``nnhal.client.Device`` (any server speaking the
  proto; ``ADDR/DEVICE`` selects one of a server's devices).
- ``nnhal.runtime.reference.ReferenceDevice`` is the runtime's own CPU device,
  ``nnapi-reference`` (that module is the only one importing the driver).

Execution modes (``mode``): "sync" (executeSynchronously_1_3), "async"
(execute_1_3), "burst" (one burst per step model, kept for its lifetime) and
"fenced" (executeFenced). The reference device runs every mode the same way,
as Android's CpuPreparedModel does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnhal.errors import DeviceUnavailable, HalError, error_from_status
from nnhal.types import (
    NO_TIMING,
    Capabilities,
    DeviceType,
    ErrorStatus,
    Model,
    OutputShape,
    Timing,
)

#: Android's name for the runtime's CPU device.
REFERENCE_NAME = "nnapi-reference"

MODES = ("sync", "async", "burst", "fenced")


@dataclass(slots=True)
class StepResult:
    outputs: list[np.ndarray]
    shapes: tuple[OutputShape, ...]
    timing: Timing


class StepModel:
    """A model prepared on one device; ``run`` raises HalError subclasses."""

    def run(
        self,
        inputs: Sequence[np.ndarray | None],
        output_shapes: Sequence[Sequence[int] | None] | None,
        *,
        mode: str = "sync",
        measure: bool = False,
        deadline_ns: int | None = None,
        loop_timeout_ns: int | None = None,
    ) -> StepResult:
        raise NotImplementedError

    def release(self) -> None:
        pass


class RuntimeDevice:
    """Base: a device as the runtime sees it."""

    name: str = ""
    is_reference: bool = False

    def capabilities(self) -> Capabilities:
        raise NotImplementedError

    def device_type(self) -> DeviceType:
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    def explain(self, model: Model) -> tuple[list[bool], dict[int, str]]:
        raise NotImplementedError

    def prepare(self, model: Model, preference: int, priority: int, **kw: Any) -> StepModel:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


# --------------------------------------------------------------------------
# A device over the wire
# --------------------------------------------------------------------------


class ClientStep(StepModel):
    def __init__(self, prepared: Any) -> None:
        self.prepared = prepared
        self._burst = None
        self._lock = threading.Lock()

    def run(self, inputs, output_shapes, *, mode="sync", measure=False, deadline_ns=None,
            loop_timeout_ns=None) -> StepResult:  # fmt: skip
        if mode == "burst":
            with self._lock:
                if self._burst is None:
                    self._burst = self.prepared.burst()
                r = self._burst.execute(inputs, output_shapes=output_shapes, measure=measure)
            return StepResult(list(r.outputs), tuple(r.outputShapes), r.timing)
        if mode == "fenced":
            outputs, fenced = self.prepared.execute_fenced(
                inputs,
                output_shapes=output_shapes,
                measure=measure,
                deadline_ns=deadline_ns,
                loop_timeout_ns=loop_timeout_ns,
            )
            try:
                status, _launched, timing = fenced.callback.getExecutionInfo()
            finally:
                fenced.callback.release()
            if status != ErrorStatus.NONE:
                raise error_from_status(status, getattr(fenced.callback, "message", ""))
            shapes = tuple(OutputShape(tuple(a.shape), True) for a in outputs)
            return StepResult(list(outputs), shapes, timing)
        r = self.prepared.execute(
            inputs,
            output_shapes=output_shapes,
            measure=measure,
            deadline_ns=deadline_ns,
            loop_timeout_ns=loop_timeout_ns,
            synchronous=mode != "async",
        )
        return StepResult(list(r.outputs), tuple(r.outputShapes), r.timing)

    def release(self) -> None:
        with self._lock:
            if self._burst is not None:
                self._burst.close()
                self._burst = None
        try:
            self.prepared.release()
        except HalError:
            pass  # the server is gone: nothing left to free


class ClientDevice(RuntimeDevice):
    """A device served over gRPC (``nnhal.client.Device``)."""

    def __init__(self, device: Any, name: str | None = None) -> None:
        self.device = device
        self.name = name or device.getVersionString()
        self._caps: Capabilities | None = None
        self.cache_hits = 0  # steps prepared from a compilation cache

    def capabilities(self) -> Capabilities:
        if self._caps is None:
            self._caps = self.device.getCapabilities_1_3()
        return self._caps

    def device_type(self) -> DeviceType:
        return self.device.getType()

    def version(self) -> str:
        return self.device.getVersionString()

    def explain(self, model: Model) -> tuple[list[bool], dict[int, str]]:
        try:
            try:
                supported, reasons = self.device.explainSupportedOperations(model)
                reasons = {int(k): v for k, v in reasons.items()}
            except HalError as exc:
                if exc.status == ErrorStatus.INVALID_ARGUMENT:
                    raise
                # a server without the nnhal extension: the HAL call has no reasons
                supported = self.device.getSupportedOperations_1_3(model)
                reasons = {i: "not supported" for i, ok in enumerate(supported) if not ok}
        except HalError as exc:
            # Android's DriverDevice::getSupportedOperations: a failed call means "none"
            why = f"getSupportedOperations_1_3 failed: {exc}"
            n = len(model.main.operations)
            return [False] * n, dict.fromkeys(range(n), why)
        n = len(model.main.operations)
        if len(supported) != n:  # so does an answer of the wrong length
            why = (f"getSupportedOperations_1_3 returned {len(supported)} answers for "
                   f"{n} operations")  # fmt: skip
            return [False] * n, dict.fromkeys(range(n), why)
        return supported, reasons

    def prepare(self, model: Model, preference: int, priority: int, **kw: Any) -> StepModel:
        cache = kw.get("modelCache"), kw.get("dataCache"), kw.get("token")
        if cache[2] and _cache_written(cache[0], cache[1]):
            # as Android's runtime: a compilation cached earlier is tried first
            try:
                prepared = self.device.prepareModelFromCache_1_3(
                    cache[0], cache[1], cache[2], kw.get("deadline_ns"), model=model
                )
                self.cache_hits += 1
                return ClientStep(prepared)
            except HalError:
                pass  # stale or foreign files: compile (and write them) again
        return ClientStep(self.device.prepareModel_1_3(model, preference, priority, **kw))


def _cache_written(model_cache: Any, data_cache: Any) -> bool:
    import os

    paths = [h[0] for h in (*(model_cache or ()), *(data_cache or ()))]
    return bool(paths) and all(os.path.exists(p) and os.path.getsize(p) > 0 for p in paths)


def connect_target(target: str, timeout: float = 10.0) -> ClientDevice:
    """``ADDR`` or ``ADDR/DEVICE`` -> a ClientDevice (DeviceUnavailable when nobody answers)."""
    from nnhal.client import connect

    address, _, device = target.partition("/")
    if not address:
        raise ValueError(f"target {target!r}: no address")
    client = connect(address, timeout=timeout, device=device or None)
    name = device or _first_device_name(address) or client.getVersionString()
    return ClientDevice(client, name)


def _first_device_name(address: str) -> str | None:
    from nnhal.control import list_devices

    try:
        devices = list_devices(address)
    except (HalError, DeviceUnavailable, Exception):  # noqa: BLE001 - a plain HAL server
        return None
    return devices[0].get("name") if devices else None


def now_ns() -> int:
    return time.monotonic_ns()


NO = NO_TIMING

"""The runtime's own CPU device, ``nnapi-reference`` (Android's name).

The driver's ``Device`` with the default profile, called in this process (no
gRPC), as Android's runtime calls its CpuDevice. This is the only module of the
runtime that imports the driver.
"""

from __future__ import annotations

import threading
from typing import Any

from nnhal.driver.device import Device
from nnhal.driver.profile import load_profile
from nnhal.runtime.devices import REFERENCE_NAME, RuntimeDevice, StepModel, StepResult

from nnhal._client_io import IoPlan
from nnhal.errors import InvalidArgument
from nnhal.types import Capabilities, DeviceType, Model


class ReferenceStep(StepModel):
    def __init__(self, prepared: Any) -> None:
        self.prepared = prepared

    def run(self, inputs, output_shapes, *, mode="sync", measure=False, deadline_ns=None,
            loop_timeout_ns=None) -> StepResult:  # fmt: skip
        try:
            plan = IoPlan(self.prepared.model, inputs, output_shapes, "inline")
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
        views = [memoryview(bytearray(p.data)) for p in plan.request.pools]
        if mode == "burst":  # bursts carry no deadline and no loop timeout (HAL 1.2)
            deadline_ns = loop_timeout_ns = None
        shapes, timing = self.prepared.execute(
            plan.request,
            views,
            measure=measure,
            deadline_ns=deadline_ns,
            loop_timeout_ns=loop_timeout_ns,
        )
        outputs = plan.read_outputs(shapes, {1: bytes(views[1])})
        return StepResult(outputs, tuple(shapes), timing)


class ReferenceDevice(RuntimeDevice):
    """``nnapi-reference``: the driver with the default profile, in this process."""

    is_reference = True

    def __init__(self) -> None:
        self.driver = Device(load_profile("default"))
        self.name = REFERENCE_NAME

    def capabilities(self) -> Capabilities:
        return self.driver.getCapabilities_1_3()

    def device_type(self) -> DeviceType:
        return DeviceType.CPU

    def version(self) -> str:
        return self.driver.getVersionString()

    def explain(self, model: Model) -> tuple[list[bool], dict[int, str]]:
        try:
            return self.driver.explainSupportedOperations(model)
        except InvalidArgument:
            # The driver validates as a HAL driver must (no control-flow operand of unknown
            # size). Android's CpuDevice validates as the runtime does and says yes to every
            # operation; the operations that need it go to the runtime's interpreter.
            return [True] * len(model.main.operations), {}

    def prepare(self, model: Model, preference: int, priority: int, **kw: Any) -> StepModel:
        kw.pop("modelCache", None), kw.pop("dataCache", None), kw.pop("token", None)
        return ReferenceStep(self.driver.prepareModel_1_3(model, preference, priority, **kw))


_reference: ReferenceDevice | None = None
_reference_lock = threading.Lock()


def reference_device() -> ReferenceDevice:
    """The process-wide ``nnapi-reference`` device (created on first use)."""
    global _reference
    with _reference_lock:
        if _reference is None:
            _reference = ReferenceDevice()
        return _reference

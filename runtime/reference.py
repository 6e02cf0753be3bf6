"""The runtime's own CPU device, ``nnapi-reference`` (Android's name).

The driver's ``Device`` with the default profile, called in this process (no
gRPC), as Android's runtime calls its CpuDevice. This is the only module of the
runtime that imports the driver.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from nnhal.driver.device import Device
from nnhal.driver.profile import load_profile
from nnhal.runtime.devices import REFERENCE_NAME, RuntimeDevice, StepModel, StepResult

from nnhal._client_io import IoPlan
from nnhal.errors import InvalidArgument
from nnhal.types import (
    OPERAND_TYPE_INFO,
    Capabilities,
    DeviceType,
    InlineMemory,
    Model,
    Request,
    element_count,
)


class ReferenceStep(StepModel):
    """A step prepared on the reference driver, executed with an inline request.

    The request's layout (where each input and output lives) depends only on the inputs'
    types and shapes and on the output shapes asked for, so it is worked out once
    (``nnhal._client_io.IoPlan``) and reused while they stay the same: a repeated
    execution then only copies its input bytes. The driver validates every request as
    usual; an input that would need a conversion takes the full ``IoPlan`` path."""

    def __init__(self, prepared: Any) -> None:
        self.prepared = prepared
        self._layout: _Layout | None = None

    def run(self, inputs, output_shapes, *, mode="sync", measure=False, deadline_ns=None,
            loop_timeout_ns=None) -> StepResult:  # fmt: skip
        layout = self._layout
        if layout is not None and layout.fits(inputs, output_shapes):
            request, views = layout.request(inputs)
            outputs_meta = layout.outputs
        else:
            try:
                plan = IoPlan(self.prepared.model, inputs, output_shapes, "inline")
            except ValueError as exc:
                raise InvalidArgument(str(exc)) from None
            request = plan.request
            views = [memoryview(bytearray(p.data)) for p in request.pools]
            outputs_meta = plan.outputs
            self._layout = _Layout.of(plan, self.prepared.model, inputs, output_shapes)
        if mode == "burst":  # bursts carry no deadline and no loop timeout (HAL 1.2)
            deadline_ns = loop_timeout_ns = None
        shapes, timing = self.prepared.execute(
            request,
            views,
            measure=measure,
            deadline_ns=deadline_ns,
            loop_timeout_ns=loop_timeout_ns,
        )
        return StepResult(_read_outputs(outputs_meta, shapes, views[1]), tuple(shapes), timing)


class _Layout:
    """One request layout (IoPlan's, inline pools) and the inputs it was made for: each
    input's dtype and shape exactly as the model's type encodes them (so its bytes are the
    request's as they are), and the output shapes asked for."""

    __slots__ = (
        "args_in",
        "args_out",
        "in_size",
        "key",
        "locations",
        "out_pool",
        "out_size",
        "outputs",
        "shapes_asked",
    )  # fmt: skip

    @classmethod
    def of(cls, plan: IoPlan, model: Model, inputs, output_shapes) -> _Layout | None:
        main = model.main
        key = []
        for value, index in zip(inputs, main.inputIndexes):
            if value is None:
                key.append(None)
                continue
            info = OPERAND_TYPE_INFO.get(main.operands[index].type)
            if type(value) is not np.ndarray or info is None or value.dtype != info.dtype:
                return None  # converted on the way in: IoPlan each time
            if info.is_scalar and value.shape != ():
                return None
            key.append((value.dtype, value.shape))
        layout = cls()
        layout.key = tuple(key)
        layout.shapes_asked = None if output_shapes is None else list(output_shapes)
        layout.args_in = plan.request.inputs
        layout.args_out = plan.request.outputs
        layout.locations = [
            None if a.hasNoValue else (a.location.offset, a.location.offset + a.location.length)
            for a in layout.args_in
        ]
        layout.in_size = len(plan.request.pools[0].data)
        layout.out_size = len(plan.request.pools[1].data)
        layout.out_pool = InlineMemory(bytes(layout.out_size))  # zeros, immutable: shared
        layout.outputs = plan.outputs
        return layout

    def fits(self, inputs, output_shapes) -> bool:
        if output_shapes != self.shapes_asked or len(inputs) != len(self.key):
            return False
        for value, key in zip(inputs, self.key):
            if value is None:
                if key is not None:
                    return False
            elif (
                key is None
                or type(value) is not np.ndarray
                or value.dtype != key[0]
                or value.shape != key[1]
            ):
                return False
        return True

    def request(self, inputs) -> tuple[Request, list[memoryview]]:
        buffer = bytearray(self.in_size)
        for value, at in zip(inputs, self.locations):
            if at is not None:
                buffer[at[0] : at[1]] = value.tobytes()
        pools = (InlineMemory(bytes(buffer)), self.out_pool)
        request = Request(inputs=self.args_in, outputs=self.args_out, pools=pools)
        return request, [memoryview(buffer), memoryview(bytearray(self.out_size))]


def _read_outputs(outputs_meta, shapes, region) -> list[np.ndarray]:
    """The outputs from the output pool (as ``IoPlan.read_outputs``), at the shapes the
    driver reported."""
    outputs = []
    for j, (offset, dims, dtype, _size, is_bool) in enumerate(outputs_meta):
        if j < len(shapes):
            dims = tuple(shapes[j].dimensions)
        count = element_count(dims)
        raw = np.frombuffer(region, dtype=np.uint8 if is_bool else dtype, count=count,
                            offset=offset)  # fmt: skip
        array = (raw != 0) if is_bool else raw.copy()
        outputs.append(array.reshape(dims))
    return outputs


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

"""Host steps: operations no NNAPI device runs, run in this process by a host library.

An importer that meets a node with no NNAPI mapping (ONNX Runtime for ONNX
files, LiteRT for TFLite files) can still write one NNAPI model: the node
becomes an *extension operation* of a host extension, whose first input is a
constant holding everything the host library needs to run it (for ONNX, a
single-node ONNX model), and whose other inputs and outputs are ordinary
NNAPI operands. No driver knows the extension, so every device refuses the
operation; the compilation's ``HostDevice`` (added automatically when the
model declares a host extension, see ``host_devices``) accepts it, so the
partitioner gives it a step of its own, between the NNAPI steps, exactly as
it would give an operation to any other device. Plans and execution reports
show those steps under the device name ``HOST_NAME``, with the backend's
reason for each operation (``HostBackend.describe``).

The hook, for any host library (``register_backend``):

- ``HostBackend.extension``: the extension name (``Model.extensionNameToPrefix``);
- ``HostBackend.describe(blob)``: one line saying what the operation is and why
  it runs on the host (for plans);
- ``HostBackend.kernel(blob)``: a callable taking the operation's input arrays
  (NNAPI form, in operand order, the blob excluded) and returning its output
  arrays (NNAPI form: int32 for 64-bit integers, rank 0 as [1]). It raises
  ``HostError`` (or any exception, reported as GENERAL_FAILURE) when the host
  library cannot run it.

Backends known by name are imported on first use (``BACKENDS``: extension
name -> ``module:attribute``), so ``nnhal.runtime`` needs no host library
unless a model uses it. Host steps do not take part in the runtime's CPU
fallback: the host is the CPU already, so a full fallback keeps them.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from nnhal.runtime.devices import RuntimeDevice, StepModel, StepResult

from nnhal.errors import GeneralFailure, HalError, InvalidArgument
from nnhal.types import (
    NO_TIMING,
    Capabilities,
    DeviceType,
    Model,
    OperandLifeTime,
    OperandPerformance,
    OperandType,
    PerformanceInfo,
    Timing,
)

#: the device name host steps run under (plans, reports)
HOST_NAME = "nnhal-host"

#: host extension name -> "module:attribute" of its HostBackend (imported on first use)
BACKENDS: dict[str, str] = {
    "org.nnhal.host.onnxruntime": "nnhal.runtime.host_onnx:BACKEND",
}

#: the extension operation code every host extension uses for "run this blob"
HOST_OPERATION = 0
#: the extension operand type code of the blob operand
HOST_BLOB_TYPE = 0


class HostError(Exception):
    """A host library cannot run an operation; the message says which and why."""


class HostBackend:
    """A host library running the operations of one host extension (see the module doc)."""

    extension: str = ""
    label: str = ""  # the library's name, for plans ("ONNX Runtime")

    def describe(self, blob: bytes) -> str:
        raise NotImplementedError

    def kernel(self, blob: bytes) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
        raise NotImplementedError


_loaded: dict[str, HostBackend] = {}
_lock = threading.Lock()


def register_backend(backend: HostBackend) -> None:
    """Make ``backend`` run its extension's operations in this process."""
    with _lock:
        _loaded[backend.extension] = backend


def backend_for(extension: str) -> HostBackend | None:
    """The backend of ``extension`` (imported on first use), or None if there is none."""
    with _lock:
        if extension in _loaded:
            return _loaded[extension]
        target = BACKENDS.get(extension)
    if target is None:
        return None
    module, _, attr = target.partition(":")
    backend = getattr(importlib.import_module(module), attr)
    register_backend(backend)
    return backend


def host_extensions(model: Model) -> dict[int, HostBackend]:
    """prefix -> backend, for the host extensions ``model`` declares."""
    out = {}
    for entry in model.extensionNameToPrefix:
        backend = backend_for(entry.name)
        if backend is not None:
            out[entry.prefix] = backend
    return out


def host_devices(model: Model) -> list[HostDevice]:
    """The host device a compilation of ``model`` needs ([] when it uses no host extension)."""
    return [HostDevice()] if host_extensions(model) else []


def _blob(model: Model, sub, operation) -> bytes:
    from dataclasses import replace

    from nnhal.runtime.slicing import constant_value

    if not operation.inputs:
        raise HostError("a host operation needs its blob as input 0")
    operand = sub.operands[operation.inputs[0]]
    if operand.lifetime not in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE):
        raise HostError("input 0 of a host operation (its blob) must be a constant")
    # the blob's bytes, wherever they live (operandValues or a pool): read as a byte tensor
    raw = replace(operand, type=OperandType.TENSOR_OEM_BYTE, dimensions=(operand.location.length,))
    return constant_value(model, raw).tobytes()


def _host_op(model: Model, prefixes: dict[int, HostBackend], op) -> HostBackend | None:
    code = int(op.type)
    if code <= 0xFFFF or (code & 0xFFFF) != HOST_OPERATION:
        return None
    return prefixes.get(code >> 16)


class HostDevice(RuntimeDevice):
    """The device host steps run on: it supports exactly the host extensions' operations."""

    def __init__(self) -> None:
        self.name = HOST_NAME

    def capabilities(self) -> Capabilities:
        # nothing else supports its operations, so the figures never decide anything
        slow = PerformanceInfo(1e9, 1e9)
        return Capabilities(slow, slow, tuple(OperandPerformance(t, slow) for t in range(15)),
                            slow, slow)  # fmt: skip

    def device_type(self) -> DeviceType:
        return DeviceType.CPU

    def version(self) -> str:
        return "nnhal host operations"

    def explain(self, model: Model) -> tuple[list[bool], dict[int, str]]:
        prefixes = host_extensions(model)
        supported, reasons = [], {}
        for k, op in enumerate(model.main.operations):
            backend = _host_op(model, prefixes, op)
            supported.append(backend is not None)
            if backend is None:
                reasons[k] = "not a host operation (the host runs only host-extension operations)"
        return supported, reasons

    def describe(self, model: Model, sub, operation) -> str:
        """The backend's line for one host operation of ``sub`` (for plans)."""
        backend = _host_op(model, host_extensions(model), operation)
        if backend is None:
            return ""
        try:
            return f"{backend.label}: {backend.describe(_blob(model, sub, operation))}"
        except HostError as exc:
            return f"{backend.label}: {exc}"

    def prepare(self, model: Model, preference: int, priority: int, **kw: Any) -> StepModel:
        prefixes = host_extensions(model)
        main = model.main
        kernels = []
        for k, op in enumerate(main.operations):
            backend = _host_op(model, prefixes, op)
            if backend is None:
                raise InvalidArgument(f"operation {k} is not a host operation")
            try:
                kernels.append((backend.kernel(_blob(model, main, op)), op))
            except HostError as exc:
                raise InvalidArgument(f"operation {k} ({backend.label}): {exc}") from None
        return HostStep(main, kernels)


class HostStep(StepModel):
    """Host operations of one step, run in order on numpy values."""

    def __init__(self, sub, kernels: list) -> None:
        self.sub = sub
        self.kernels = kernels

    def run(self, inputs: Sequence[np.ndarray | None], output_shapes, *, mode="sync",
            measure=False, deadline_ns=None, loop_timeout_ns=None) -> StepResult:  # fmt: skip
        from nnhal.types import OutputShape

        started = time.monotonic_ns()
        values: dict[int, Any] = dict(zip(self.sub.inputIndexes, inputs))
        for k, (kernel, op) in enumerate(self.kernels):
            args = [values.get(i) for i in op.inputs[1:]]
            try:
                outs = kernel(args)
            except HalError:
                raise
            except Exception as exc:  # noqa: BLE001  (a host library's failure is the step's)
                raise GeneralFailure(f"host operation {k}: {exc}") from None
            if len(outs) != len(op.outputs):
                raise GeneralFailure(f"host operation {k}: {len(outs)} outputs, expected "
                                     f"{len(op.outputs)}")  # fmt: skip
            for i, value in zip(op.outputs, outs):
                values[i] = np.asarray(value)
        outputs = [values[i] for i in self.sub.outputIndexes]
        took = (time.monotonic_ns() - started) // 1000
        timing = Timing(took, took) if measure else NO_TIMING
        return StepResult(outputs, tuple(OutputShape(tuple(a.shape), True) for a in outputs),
                          timing)  # fmt: skip

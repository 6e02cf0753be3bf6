"""Delegated partitions run through the emulated NNAPI runtime (``nnhal.runtime``).

On a phone the layering is: TFLite's interpreter runs the graph; each run of
nodes its NNAPI delegate took is one delegate kernel, and that kernel is one
NNAPI model compiled with ``ANeuralNetworksCompilation`` — the NNAPI runtime
then partitions *that* model over the accelerators and its CPU device
(``nnapi-reference``), with its own fallback. Nodes the delegate refused are
TFLite CPU kernels between those kernels. This module keeps that layering:

- ``RuntimePartition`` is one delegated partition compiled with
  ``nnhal.runtime.api.Compilation`` over the given devices (plus
  ``nnapi-reference`` unless ``use_reference=False``). It is shaped like a
  prepared model (``execute(feeds)`` -> ``.outputs``, ``release()``) so
  ``fallback.TfliteRunner`` runs it between its LiteRT steps; LiteRT steps are
  therefore not steps of the runtime's plan, as TFLite's kernels are not part of
  an NNAPI compilation.
- ``runtime_steps`` describes the runtime's plan of a partition in TFLite terms
  (which device runs which TFLite nodes).
- ``import_for_devices`` is the delegate with ``disallow_nnapi_cpu`` (its default
  when it picks the accelerators itself): it asks the devices which operations
  they support (``getSupportedOperationsForDevices``) and leaves every node with
  an operation none of them takes to TFLite's CPU kernels, re-partitioning
  until every delegated node has a device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from nnhal.importers.tflite.convert import ImportResult, Partition, convert
from nnhal.importers.tflite.reader import TfModel
from nnhal.runtime.api import Compilation, Execution
from nnhal.runtime.devices import RuntimeDevice
from nnhal.runtime.partition import DeviceStep, IfStep, WhileStep, iter_steps

from nnhal.types import ExecutionPreference, operation_name

__all__ = [
    "RuntimePartition",
    "RuntimeStepInfo",
    "device_refusals",
    "import_for_devices",
    "runtime_steps",
]


@dataclass
class RuntimeStepInfo:
    """One step of the runtime's plan for a partition, in TFLite terms."""

    step: int
    device: str  # a device name, or "interpreter" for the runtime's own IF/WHILE
    operations: list[int]  # NNAPI operations of the partition's main subgraph
    nodes: list[int] = field(default_factory=list)  # the TFLite nodes they come from

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "device": self.device,
            "operations": self.operations,
            "nodes": self.nodes,
        }


class _Outputs:
    def __init__(self, outputs: list[np.ndarray]) -> None:
        self.outputs = outputs


class RuntimePartition:
    """One delegated partition, compiled and run by the emulated NNAPI runtime."""

    def __init__(
        self,
        partition: Partition,
        devices: Sequence[RuntimeDevice],
        *,
        preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
        use_reference: bool = True,
        mode: str = "sync",
    ) -> None:
        self.partition = partition
        self.mode = mode
        self.compilation = Compilation(partition.model, devices, use_reference=use_reference)
        self.compilation.set_preference(preference)
        self.compilation.finish()
        #: the last execution's report (steps run, fallbacks)
        self.report: Any = None

    def execute(self, feeds: Sequence[np.ndarray], output_shapes: Any = None) -> _Outputs:
        execution = Execution(self.compilation)
        for k, x in enumerate(feeds):
            execution.set_input(k, x)
        for k in range(len(execution.outputs)):
            execution.set_output(k)
        execution.set_measure_step_timing(True)
        try:
            outputs = execution.compute(self.mode)
        finally:
            self.report = execution.report
        return _Outputs(list(outputs))

    def steps(self) -> list[RuntimeStepInfo]:
        return runtime_steps(self.partition, self.compilation)

    def release(self) -> None:
        self.compilation.release()


def runtime_steps(partition: Partition, compilation: Compilation) -> list[RuntimeStepInfo]:
    """The main subgraph's steps of a finished compilation, with their TFLite nodes (steps
    inside an IF/WHILE the runtime interprets are listed under that operation's node)."""
    plan = compilation.plan
    out: list[RuntimeStepInfo] = []
    nodes_of = partition.operation_nodes
    for step in plan.steps:
        if isinstance(step, DeviceStep):
            name = plan.devices[step.device].name
            ops = list(step.operations)
        elif isinstance(step, (IfStep, WhileStep)):
            inner = {
                plan.devices[s.device].name
                for s in iter_steps(step.then_plan if isinstance(step, IfStep) else step.body_plan)
                if isinstance(s, DeviceStep)
            }
            name = "interpreter" + (f" ({', '.join(sorted(inner))})" if inner else "")
            ops = [step.operation]
        else:  # pragma: no cover - the runtime has no other kinds
            continue
        nodes = sorted({nodes_of[k] for k in ops if k < len(nodes_of)})
        out.append(RuntimeStepInfo(step.index, name, ops, nodes))
    return out


def device_refusals(result: ImportResult, devices: Sequence[RuntimeDevice]) -> dict[int, str]:
    """Delegated nodes with an NNAPI operation none of ``devices`` supports, with why."""
    refused: dict[int, str] = {}
    for p in result.partitions:
        answers = [(d.name, *d.explain(p.model)) for d in devices]
        for k, op in enumerate(p.model.main.operations):
            if any(supported[k] for _, supported, _ in answers):
                continue
            node = p.operation_nodes[k] if k < len(p.operation_nodes) else p.nodes[-1]
            if node in refused:
                continue
            why = "; ".join(
                f"{name}: {reasons.get(k, 'not supported')}" for name, _, reasons in answers
            )
            refused[node] = (
                f"no target device supports its NNAPI operation {operation_name(op.type)} "
                f"({why or 'no devices'})"
            )
    return refused


def import_for_devices(
    model: TfModel,
    devices: Sequence[RuntimeDevice],
    custom_ops: dict[str, tuple[Any, ...]] | None = None,
) -> ImportResult:
    """Convert, then leave to the CPU every node the devices cannot run, and again, until
    every delegated node has a device (each round only removes nodes: it ends)."""
    refuse: dict[int, str] = {}
    while True:
        result = convert(model, custom_ops, refuse)
        more = {n: r for n, r in device_refusals(result, devices).items() if n not in refuse}
        if not more:
            return result
        refuse.update(more)

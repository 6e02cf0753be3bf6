"""Partitioning a model across devices (Android's ModelBuilder::partitionTheWork).

Per operation, the best device among those whose getSupportedOperations_1_3
says yes (``best_devices``, after ``findBestDeviceForEachOperation``):

- the figure compared is ``execTime`` (``powerUsage`` for LOW_POWER) of the
  operand type of the operation's first input (the relaxed figures for
  FLOAT32 / TENSOR_FLOAT32 in a relaxed model); IF adds ifPerformance and half
  of both branches' totals, WHILE adds whilePerformance and the condition's and
  body's totals;
- the lower figure wins; on a tie the earlier device keeps it, except that the
  CPU device (``nnapi-reference``) wins every tie it takes part in, as Android's
  runtime does; the figures are float32, as Android's, and the CPU device's are
  1.0 for every type (its CpuDevice), a type missing from a driver's table FLT_MAX;
- an IF/WHILE whose best device is the CPU device goes to the runtime's own
  control-flow interpreter (``INTERPRETER``), whose condition, branches and body
  are partitioned in turn. Android sends a control-flow operation with an
  operand of unknown size to its CPU device whole; our CPU device is a HAL
  driver and must refuse those, so such operations go to the interpreter too.

Steps (``partitionTheWorkInternal``): operations become ready when every operand
they read is available; each goes to the back of its device's queue (first in,
first out: the operations ready from the start in index order, then in the order
they become ready); the runtime takes the non-empty queue of the highest device
index (the interpreter is last, then the CPU device) and puts every operation of
that queue into one step, including those that become ready meanwhile. When every
operation of ``main`` has the same device, the plan is "simple": the whole
model is prepared on that device.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from nnhal.runtime.devices import RuntimeDevice
from nnhal.runtime.slicing import StepIo, referenced_index, step_model, subgraph_of

from nnhal.errors import InvalidArgument
from nnhal.types import (
    Capabilities,
    ExecutionPreference,
    Model,
    OperandType,
    OperationType,
    PerformanceInfo,
    is_fully_specified,
    operation_name,
)

#: the device index standing for the runtime's control-flow interpreter
INTERPRETER = -1


@dataclass
class Choice:
    """Where one operation goes, and why."""

    operation: int
    type: int
    device: int  # index into the compilation's devices, or INTERPRETER
    perf: dict[int, float]  # device index -> figure compared (supporting devices only)
    unsupported: dict[int, str]  # device index -> the device's reason
    note: str = ""


@dataclass
class DeviceStep:
    source: int  # subgraph number (main = 0)
    device: int
    operations: list[int]
    io: StepIo | None = None
    index: int = 0  # position in the whole plan (for reports)
    guess: list | None = None  # first output buffer shapes (set by the executor)
    run_shapes: list | None = None  # guess, or None when no output needs one
    writes_main_outputs: bool = False


@dataclass
class IfStep:
    source: int
    operation: int
    then_plan: SubgraphPlan
    else_plan: SubgraphPlan
    index: int = 0


@dataclass
class WhileStep:
    source: int
    operation: int
    cond_plan: SubgraphPlan
    body_plan: SubgraphPlan
    index: int = 0


@dataclass
class SubgraphPlan:
    source: int
    steps: list[Any] = field(default_factory=list)
    choices: list[Choice] = field(default_factory=list)
    simple: bool = False
    #: the devices the step device indexes refer to (the compilation's, or the CPU alone)
    devices: list[RuntimeDevice] = field(default_factory=list)


#: FLT_MAX: Android's figure for a type missing from a driver's capabilities table
FLT_MAX = float(np.finfo(np.float32).max)

#: Android's CpuDevice: "the performance of the CPU is 1.0" for every type and figure
CPU_PERFORMANCE = PerformanceInfo(1.0, 1.0)


def _f32(x: float) -> float:
    """Rounded to float32, as Android computes the figures (a sum past FLT_MAX is inf)."""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


class _Figures:
    """The performance figures of one device, looked up as Android's Device classes do."""

    def __init__(self, device: RuntimeDevice) -> None:
        self.cpu = device.is_reference
        self.caps: Capabilities | None = None if self.cpu else device.capabilities()

    def _pick(self, info: PerformanceInfo, preference: int) -> float:
        return info.powerUsage if preference == ExecutionPreference.LOW_POWER else info.execTime

    def of_type(self, type_code: int, preference: int) -> float:
        if self.cpu:
            return self._pick(CPU_PERFORMANCE, preference)
        for entry in self.caps.operandPerformance:
            if entry.type == type_code:
                return _f32(self._pick(entry.info, preference))
        return FLT_MAX

    def named(self, field_name: str, preference: int) -> float:
        if self.cpu:
            return self._pick(CPU_PERFORMANCE, preference)
        return _f32(self._pick(getattr(self.caps, field_name), preference))


def subgraph_perf(model: Model, s: int, figures: _Figures, preference: int) -> float:
    """ModelBuilder::getPerformance of a whole subgraph: a float32 running sum."""
    sub = subgraph_of(model, s)
    total = 0.0
    for k in range(len(sub.operations)):
        total = _f32(total + operation_perf(model, s, k, figures, preference))
    return total


def operation_perf(model: Model, s: int, k: int, figures: _Figures, preference: int) -> float:
    """ModelBuilder::getPerformance for operation ``k`` of subgraph ``s`` (float32)."""
    sub = subgraph_of(model, s)
    op = sub.operations[k]
    if op.type == OperationType.IF:
        then_s = referenced_index(sub.operands[op.inputs[1]])
        else_s = referenced_index(sub.operands[op.inputs[2]])
        branches = _f32(
            subgraph_perf(model, then_s, figures, preference)
            + subgraph_perf(model, else_s, figures, preference)
        )
        # float + 0.5 * float: computed in double, returned as float
        return _f32(figures.named("ifPerformance", preference) + 0.5 * branches)
    if op.type == OperationType.WHILE:
        cond_s = referenced_index(sub.operands[op.inputs[0]])
        body_s = referenced_index(sub.operands[op.inputs[1]])
        head = _f32(
            figures.named("whilePerformance", preference)
            + subgraph_perf(model, cond_s, figures, preference)
        )
        return _f32(head + subgraph_perf(model, body_s, figures, preference))
    type_code = sub.operands[op.inputs[0]].type if op.inputs else OperandType.TENSOR_FLOAT32
    if model.relaxComputationFloat32toFloat16:
        if type_code == OperandType.FLOAT32:
            return figures.named("relaxedFloat32toFloat16PerformanceScalar", preference)
        if type_code == OperandType.TENSOR_FLOAT32:
            return figures.named("relaxedFloat32toFloat16PerformanceTensor", preference)
    return figures.of_type(type_code, preference)


def has_unknown_size(model: Model, s: int, k: int) -> bool:
    """isControlFlowOperationWithOperandOfUnknownSize: any IF/WHILE operand, or an input or
    output of a subgraph it references, of unknown size (not an extension type)."""
    sub = subgraph_of(model, s)
    op = sub.operations[k]
    if op.type not in (OperationType.IF, OperationType.WHILE):
        return False

    def unknown(subgraph, indexes) -> bool:
        for i in indexes:
            o = subgraph.operands[i]
            if o.type == OperandType.SUBGRAPH or o.type > 0xFFFF:
                continue
            if not is_fully_specified(o):
                return True
        return False

    refs = op.inputs[1:3] if op.type == OperationType.IF else op.inputs[0:2]
    if unknown(sub, op.inputs) or unknown(sub, op.outputs):
        return True
    for r in refs:
        inner = subgraph_of(model, referenced_index(sub.operands[r]))
        if unknown(inner, inner.inputIndexes) or unknown(inner, inner.outputIndexes):
            return True
    return False


def as_main(model: Model, s: int) -> Model:
    """The model devices are asked about for subgraph ``s`` (Android's MetaModel of a
    referenced model): that subgraph as main, every referenced subgraph kept."""
    return model if s == 0 else replace(model, main=subgraph_of(model, s))


def best_devices(
    model: Model, s: int, devices: Sequence[RuntimeDevice], preference: int
) -> list[Choice]:
    """findBestDeviceForEachOperation over subgraph ``s``."""
    asked = as_main(model, s)
    answers = []
    for d in devices:
        supported, reasons = d.explain(asked)
        answers.append((supported, reasons))
    sub = subgraph_of(model, s)
    figures = [_Figures(d) for d in devices]
    choices = []
    for k, op in enumerate(sub.operations):
        perf: dict[int, float] = {}
        unsupported: dict[int, str] = {}
        best = None
        best_perf = 0.0
        unknown = has_unknown_size(model, s, k)
        for d, dev in enumerate(devices):
            supported, reasons = answers[d]
            if not supported[k]:
                unsupported[d] = reasons.get(k, "not supported")
                continue
            if unknown and not dev.is_reference:
                unsupported[d] = (
                    "a control-flow operand has unknown size: only the CPU may run it "
                    "(HAL 1.3 forbids drivers to accept it)"
                )
                continue
            value = operation_perf(model, s, k, figures[d], preference)
            perf[d] = value
            if best is None or value < best_perf or (value == best_perf and dev.is_reference):
                best, best_perf = d, value
        note = ""
        if unknown and op.type in (OperationType.IF, OperationType.WHILE):
            # The reference driver refuses these too (rightly): the interpreter runs them.
            best, note = INTERPRETER, "operand of unknown size: runtime interpreter"
        elif (
            best is None
            and op.type in (OperationType.IF, OperationType.WHILE)
            and any(dev.is_reference for dev in devices)
        ):
            # Android's CpuDevice says yes to every non-extension operation without looking
            # into referenced subgraphs, and CPU control flow goes to the interpreter; the
            # operations inside (a host operation, say) then find their own devices.
            best, note = INTERPRETER, "no device runs it whole: runtime interpreter"
        elif best is None:
            reasons_text = "; ".join(f"{devices[d].name}: {r}" for d, r in unsupported.items())
            raise InvalidArgument(
                f"no device can run operation {k} ({operation_name(op.type)}) of subgraph {s}: "
                f"{reasons_text}"
            )
        elif devices[best].is_reference and op.type in (OperationType.IF, OperationType.WHILE):
            best, note = INTERPRETER, "best on the CPU: runtime interpreter"
        choices.append(Choice(k, op.type, best, perf, unsupported, note))
    return choices


def partition(
    model: Model, devices: Sequence[RuntimeDevice], preference: int, s: int = 0
) -> SubgraphPlan:
    """The plan of subgraph ``s`` (recursing into interpreted control flow)."""
    choices = best_devices(model, s, devices, preference)
    sub = subgraph_of(model, s)
    plan = SubgraphPlan(s, choices=choices, devices=list(devices))
    targets = {c.device for c in choices}
    if s == 0 and len(targets) == 1 and INTERPRETER not in targets:
        plan.simple = True
        d = targets.pop()
        plan.steps.append(DeviceStep(0, d, list(range(len(sub.operations))), _whole(model)))
        return plan

    # producers: operand -> operation writing it; readiness by unknown-input counts
    producer = {}
    for k, op in enumerate(sub.operations):
        for o in op.outputs:
            producer[o] = k
    waiting = [0] * len(sub.operations)
    readers: dict[int, list[int]] = {}
    for k, op in enumerate(sub.operations):
        for i in set(op.inputs):
            if i in producer:
                waiting[k] += 1
                readers.setdefault(i, []).append(k)
    n_queues = len(devices) + 1  # the interpreter's queue is last
    queues: list[deque[int]] = [deque() for _ in range(n_queues)]

    def queue_of(k: int) -> int:
        d = choices[k].device
        return len(devices) if d == INTERPRETER else d

    def processed(k: int) -> None:
        for o in sub.operations[k].outputs:
            for r in readers.get(o, ()):
                waiting[r] -= 1
                if waiting[r] == 0:
                    queues[queue_of(r)].append(r)

    for k in range(len(sub.operations)):
        if waiting[k] == 0:
            queues[queue_of(k)].append(k)
    while True:
        q = next((i for i in range(n_queues - 1, -1, -1) if queues[i]), None)
        if q is None:
            break
        if q == len(devices):
            k = queues[q].popleft()
            plan.steps.append(_control_flow_step(model, s, k, devices, preference))
            processed(k)
            continue
        step = DeviceStep(s, q, [])
        while queues[q]:
            k = queues[q].popleft()
            step.operations.append(k)
            processed(k)
        plan.steps.append(step)
    if sum(len(st.operations) if isinstance(st, DeviceStep) else 1 for st in plan.steps) != len(
        sub.operations
    ):
        raise InvalidArgument(f"subgraph {s} has a cycle: some operations never become ready")
    _finish_steps(model, plan)
    return plan


def _whole(model: Model) -> StepIo:
    main = model.main
    return StepIo(model, tuple(main.inputIndexes), tuple(main.outputIndexes))


def _finish_steps(model: Model, plan: SubgraphPlan) -> None:
    """Cut each device step's model: its outputs are what other steps read."""
    sub = subgraph_of(model, plan.source)
    for step in plan.steps:
        if not isinstance(step, DeviceStep):
            continue
        mine = set(step.operations)
        outside = set()
        for k, op in enumerate(sub.operations):
            if k not in mine:
                outside.update(op.inputs)
        step.io = step_model(model, plan.source, step.operations, outside)


def _control_flow_step(
    model: Model, s: int, k: int, devices: Sequence[RuntimeDevice], preference: int
) -> Any:
    sub = subgraph_of(model, s)
    op = sub.operations[k]
    if op.type == OperationType.IF:
        then_s = referenced_index(sub.operands[op.inputs[1]])
        else_s = referenced_index(sub.operands[op.inputs[2]])
        return IfStep(
            s,
            k,
            _branch(model, then_s, devices, preference),
            _branch(model, else_s, devices, preference),
        )
    cond_s = referenced_index(sub.operands[op.inputs[0]])
    body_s = referenced_index(sub.operands[op.inputs[1]])
    return WhileStep(
        s,
        k,
        _branch(model, cond_s, devices, preference),
        _branch(model, body_s, devices, preference),
    )


def _branch(
    model: Model, s: int, devices: Sequence[RuntimeDevice], preference: int
) -> SubgraphPlan:
    sub = subgraph_of(model, s)
    if not sub.operations:  # a subgraph passing inputs through: nothing to run
        return SubgraphPlan(s, devices=list(devices))
    return partition(model, devices, preference, s)


def number_steps(plan: SubgraphPlan, start: int = 0) -> int:
    """Give every step of the plan (nested ones too) a report number; the next free one."""
    n = start
    for step in plan.steps:
        step.index = n
        n += 1
        if isinstance(step, IfStep):
            n = number_steps(step.then_plan, n)
            n = number_steps(step.else_plan, n)
        elif isinstance(step, WhileStep):
            n = number_steps(step.cond_plan, n)
            n = number_steps(step.body_plan, n)
    return n


def iter_steps(plan: SubgraphPlan):
    for step in plan.steps:
        yield step
        if isinstance(step, IfStep):
            yield from iter_steps(step.then_plan)
            yield from iter_steps(step.else_plan)
        elif isinstance(step, WhileStep):
            yield from iter_steps(step.cond_plan)
            yield from iter_steps(step.body_plan)

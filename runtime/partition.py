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
  runtime does;
- an IF/WHILE whose best device is the CPU device goes to the runtime's own
  control-flow interpreter (``INTERPRETER``), whose condition, branches and body
  are partitioned in turn. Android sends a control-flow operation with an
  operand of unknown size to its CPU device whole; our CPU device is a HAL
  driver and must refuse those, so such operations go to the interpreter too.

Steps (``partitionTheWorkInternal``): operations become ready when every operand
they read is available; each goes to its device's queue (lowest operation index
first); the runtime takes the non-empty queue of the highest device index
(the interpreter is last, then the CPU device) and puts every operation of that
queue into one step, including those that become ready meanwhile. When every
operation of ``main`` has the same device, the plan is "simple": the whole
model is prepared on that device.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

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


def _pick(info: PerformanceInfo, preference: int) -> float:
    return info.powerUsage if preference == ExecutionPreference.LOW_POWER else info.execTime


def _type_perf(caps: Capabilities, type_code: int) -> PerformanceInfo:
    for entry in caps.operandPerformance:
        if entry.type == type_code:
            return entry.info
    # Android's lookup returns FLT_MAX when a type is missing (the device is then never
    # preferred); a capabilities table without the type says nothing better about it.
    return PerformanceInfo(float("inf"), float("inf"))


def subgraph_perf(model: Model, s: int, caps: Capabilities, preference: int) -> float:
    sub = subgraph_of(model, s)
    return sum(operation_perf(model, s, k, caps, preference) for k in range(len(sub.operations)))


def operation_perf(model: Model, s: int, k: int, caps: Capabilities, preference: int) -> float:
    """ModelBuilder::getPerformance for operation ``k`` of subgraph ``s``."""
    sub = subgraph_of(model, s)
    op = sub.operations[k]
    if op.type == OperationType.IF:
        then_s = referenced_index(sub.operands[op.inputs[1]])
        else_s = referenced_index(sub.operands[op.inputs[2]])
        return _pick(caps.ifPerformance, preference) + 0.5 * (
            subgraph_perf(model, then_s, caps, preference)
            + subgraph_perf(model, else_s, caps, preference)
        )
    if op.type == OperationType.WHILE:
        cond_s = referenced_index(sub.operands[op.inputs[0]])
        body_s = referenced_index(sub.operands[op.inputs[1]])
        return (
            _pick(caps.whilePerformance, preference)
            + subgraph_perf(model, cond_s, caps, preference)
            + subgraph_perf(model, body_s, caps, preference)
        )
    type_code = sub.operands[op.inputs[0]].type if op.inputs else OperandType.TENSOR_FLOAT32
    if model.relaxComputationFloat32toFloat16:
        if type_code == OperandType.FLOAT32:
            return _pick(caps.relaxedFloat32toFloat16PerformanceScalar, preference)
        if type_code == OperandType.TENSOR_FLOAT32:
            return _pick(caps.relaxedFloat32toFloat16PerformanceTensor, preference)
    return _pick(_type_perf(caps, type_code), preference)


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
            value = operation_perf(model, s, k, dev.capabilities(), preference)
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
    queues: list[list[int]] = [[] for _ in range(n_queues)]

    def queue_of(k: int) -> int:
        d = choices[k].device
        return len(devices) if d == INTERPRETER else d

    def processed(k: int) -> None:
        for o in sub.operations[k].outputs:
            for r in readers.get(o, ()):
                waiting[r] -= 1
                if waiting[r] == 0:
                    heapq.heappush(queues[queue_of(r)], r)

    for k in range(len(sub.operations)):
        if waiting[k] == 0:
            heapq.heappush(queues[queue_of(k)], k)
    while True:
        q = next((i for i in range(n_queues - 1, -1, -1) if queues[i]), None)
        if q is None:
            break
        if q == len(devices):
            k = heapq.heappop(queues[q])
            plan.steps.append(_control_flow_step(model, s, k, devices, preference))
            processed(k)
            continue
        step = DeviceStep(s, q, [])
        while queues[q]:
            k = heapq.heappop(queues[q])
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

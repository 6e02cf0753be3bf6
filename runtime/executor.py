"""Running a plan: device steps, the control-flow interpreter, and CPU fallback.

One ``PlanRun`` is one execution (Android's ExecutionBuilder with its
ExecutionPlan::Controller):

- a device step gets its inputs from the values computed so far and returns
  its outputs. A step output of unknown size is first given a buffer of the
  size its declared dimensions allow (none, or one element for unknown rank);
  on OUTPUT_INSUFFICIENT_SIZE the step runs again with the shapes the device
  reported, as Android's dynamic temporaries do;
- IF reads its condition and runs the chosen branch's plan; WHILE runs the
  condition's plan, then the body's, until the condition is false, checking
  the loop timeout after every true condition (MISSED_DEADLINE_TRANSIENT);
- fallback (``asyncStartComputePartitioned``): a step failing with any status
  other than OUTPUT_INSUFFICIENT_SIZE or a missed deadline is run again on
  the CPU device (partial fallback); if that fails too, or the failing step was
  already on the CPU, the whole model runs on the CPU device (full fallback).
  A simple plan on the CPU device has no fallback; a simple plan elsewhere
  has only the partial one (which is the whole model). Every fallback is
  recorded in the report and the runtime's call trace.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from nnhal.runtime.devices import RuntimeDevice, StepModel, StepResult
from nnhal.runtime.partition import DeviceStep, IfStep, SubgraphPlan, WhileStep
from nnhal.runtime.slicing import constant_value, subgraph_of

from nnhal.errors import GeneralFailure, HalError, MissedDeadline, OutputInsufficientSize
from nnhal.types import (
    LOOP_TIMEOUT_DEFAULT_NS,
    LOOP_TIMEOUT_MAXIMUM_NS,
    OPERAND_TYPE_INFO,
    ErrorStatus,
    OperandLifeTime,
    OperandType,
    Timing,
    is_fully_specified,
)

log = logging.getLogger("nnhal.runtime")

#: statuses no fallback can help (Android: OUTPUT_INSUFFICIENT_SIZE ends the execution;
#: a missed deadline would only be missed again)
NOT_RECOVERABLE = frozenset(
    {
        ErrorStatus.OUTPUT_INSUFFICIENT_SIZE,
        ErrorStatus.MISSED_DEADLINE_TRANSIENT,
        ErrorStatus.MISSED_DEADLINE_PERSISTENT,
    }
)


@dataclass
class StepRecord:
    """One device-step run in an execution's report."""

    step: int
    device: str
    operations: list[int]
    source: int
    status: str = "NONE"
    timing: Timing | None = None
    reruns: int = 0  # re-runs with larger buffers (dynamic output shapes)
    fallback: str = ""  # "", "partial" (this run is the CPU retry of a failed step)

    def to_json(self) -> dict[str, Any]:
        d = {
            "step": self.step,
            "device": self.device,
            "subgraph": self.source,
            "operations": list(self.operations),
            "status": self.status,
            "reruns": self.reruns,
            "fallback": self.fallback,
        }
        if self.timing is not None:
            d["timeOnDevice_us"] = self.timing.timeOnDevice
            d["timeInDriver_us"] = self.timing.timeInDriver
        return d


@dataclass
class Fallback:
    kind: str  # "partial" | "full"
    step: int | None
    device: str
    status: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class ExecutionReport:
    steps: list[StepRecord] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    loop_iterations: dict[int, int] = field(default_factory=dict)  # WHILE step -> iterations

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": [s.to_json() for s in self.steps],
            "fallbacks": [f.to_json() for f in self.fallbacks],
            "loop_iterations": {str(k): v for k, v in self.loop_iterations.items()},
            "trace": self.trace,
        }


class _FullFallback(Exception):
    """Raised inside a partitioned run when only running everything on the CPU can help."""

    def __init__(self, error: HalError) -> None:
        self.error = error


def loop_timeout(value: int | None) -> int:
    if value is None:
        return LOOP_TIMEOUT_DEFAULT_NS
    return min(int(value), LOOP_TIMEOUT_MAXIMUM_NS)


class PlanRun:
    """One execution of a compiled plan."""

    def __init__(
        self,
        compiled: Any,  # nnhal.runtime.api.Compilation (finished)
        *,
        mode: str = "sync",
        measure: bool = False,
        deadline_ns: int | None = None,
        loop_timeout_ns: int | None = None,
        output_shapes: Sequence[Any] | None = None,
    ) -> None:
        self.c = compiled
        #: the caller's output dimensions (None entries: the model's), for the main outputs
        self.output_shapes = (
            list(output_shapes)
            if output_shapes and any(s is not None for s in output_shapes)
            else None
        )
        self.mode = mode
        self.measure = measure
        self.deadline_ns = deadline_ns
        self.loop_timeout_ns = loop_timeout(loop_timeout_ns)
        self.report = ExecutionReport()
        #: the error of a first attempt made outside (Execution's fast path): the first device
        #: step takes it as its own first attempt's outcome instead of running again
        self._first_error: HalError | None = None

    # -- entry --------------------------------------------------------------

    def run(
        self, inputs: Sequence[np.ndarray | None], first_error: HalError | None = None
    ) -> list[np.ndarray]:
        self._first_error = first_error
        plan: SubgraphPlan = self.c.plan
        main = self.c.model.main
        allow = self.c.allow_fallback and not (
            plan.simple and plan.devices[plan.steps[0].device].is_reference
        )
        try:
            values = self._run_subgraph(plan, dict(zip(main.inputIndexes, inputs)), allow)
        except _FullFallback as full:
            return self._full_fallback(inputs, full.error)
        except HalError as exc:
            if not allow or exc.status in NOT_RECOVERABLE or plan.simple:
                raise
            # an error of the interpreter itself (not a missed deadline): Android breaks to
            # the full fallback
            return self._full_fallback(inputs, exc)
        return [values.get(i) for i in main.outputIndexes]

    def _full_fallback(self, inputs, error: HalError) -> list[np.ndarray]:
        cpu_plan = self.c.cpu_plan()
        self._event("full-fallback", None, self.c.reference.name, error)
        self.report.fallbacks.append(
            Fallback("full", None, self.c.reference.name, error.status.name, error.message)
        )
        log.info("full fallback to %s after %s", self.c.reference.name, error)
        main = self.c.model.main
        values = self._run_subgraph(cpu_plan, dict(zip(main.inputIndexes, inputs)), False)
        return [values.get(i) for i in main.outputIndexes]

    # -- subgraphs ------------------------------------------------------------

    def _value(self, s: int, index: int, values: dict[int, Any]) -> Any:
        if index in values:
            return values[index]
        operand = subgraph_of(self.c.model, s).operands[index]
        if operand.lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE):
            value = constant_value(self.c.model, operand)
            values[index] = value
            return value
        if operand.lifetime == OperandLifeTime.NO_VALUE:
            return None
        raise GeneralFailure(f"subgraph {s} operand {index} has no value when it is read")

    def _run_subgraph(self, plan: SubgraphPlan, values: dict[int, Any], allow: bool) -> dict:
        for step in plan.steps:
            if self.deadline_ns is not None and time.monotonic_ns() >= self.deadline_ns:
                raise MissedDeadline("the execution's deadline passed between steps")
            if isinstance(step, DeviceStep):
                self._device_step(plan, step, values, allow)
            elif isinstance(step, IfStep):
                self._if_step(step, values, allow)
            else:
                self._while_step(step, values, allow)
        return values

    def _if_step(self, step: IfStep, values: dict, allow: bool) -> None:
        sub = subgraph_of(self.c.model, step.source)
        op = sub.operations[step.operation]
        cond = self._value(step.source, op.inputs[0], values)
        if cond is None:
            raise GeneralFailure(f"IF (operation {step.operation}): the condition has no value")
        branch = step.then_plan if bool(np.asarray(cond).reshape(-1)[0]) else step.else_plan
        self._trace(
            "if", step.index, "", "NONE", branch="then" if branch is step.then_plan else "else"
        )
        inner = subgraph_of(self.c.model, branch.source)
        args = [self._value(step.source, i, values) for i in op.inputs[3:]]
        out = self._call(branch, args, allow)
        for outer, inner_i in zip(op.outputs, inner.outputIndexes):
            values[outer] = out[inner_i]

    def _while_step(self, step: WhileStep, values: dict, allow: bool) -> None:
        sub = subgraph_of(self.c.model, step.source)
        op = sub.operations[step.operation]
        cond_sub = subgraph_of(self.c.model, step.cond_plan.source)
        body_sub = subgraph_of(self.c.model, step.body_plan.source)
        state = [self._value(step.source, i, values) for i in op.inputs[2:]]
        carried = len(body_sub.outputIndexes)
        started = time.monotonic_ns()
        iterations = 0
        while True:
            c = self._call(step.cond_plan, state, allow)[cond_sub.outputIndexes[0]]
            if not bool(np.asarray(c).reshape(-1)[0]):
                break
            if time.monotonic_ns() - started > self.loop_timeout_ns:
                self._trace(
                    "while", step.index, "", "MISSED_DEADLINE_TRANSIENT", iterations=iterations
                )
                raise MissedDeadline(
                    f"WHILE (operation {step.operation} of subgraph {step.source}) ran longer than "
                    f"the loop timeout of {self.loop_timeout_ns} ns ({iterations} iterations)",
                    transient=True,
                )
            out = self._call(step.body_plan, state, allow)
            state = [out[i] for i in body_sub.outputIndexes] + state[carried:]
            iterations += 1
        self.report.loop_iterations[step.index] = iterations
        self._trace("while", step.index, "", "NONE", iterations=iterations)
        for k, outer in enumerate(op.outputs):
            values[outer] = _own(state[k])

    def _call(self, plan: SubgraphPlan, args: Sequence[Any], allow: bool) -> dict[int, Any]:
        """Run a referenced subgraph's plan on ``args``; its values by operand index."""
        inner = subgraph_of(self.c.model, plan.source)
        values = dict(zip(inner.inputIndexes, args))
        self._run_subgraph(plan, values, allow)
        for i in inner.outputIndexes:
            if i not in values:
                values[i] = self._value(plan.source, i, values)
        return values

    # -- device steps ---------------------------------------------------------

    def _device_step(self, plan: SubgraphPlan, step: DeviceStep, values: dict, allow: bool) -> None:
        simple = plan.simple
        device = plan.devices[step.device]
        inputs = [
            values[i] if i in values else self._value(step.source, i, values)
            for i in step.io.inputs
        ]
        record = StepRecord(step.index, device.name, step.operations, step.source)
        self.report.steps.append(record)
        try:
            result = self._run_on(device, self.c.step_model(step, device), step, inputs, record)
        except HalError as exc:
            record.status = exc.status.name
            if not allow or exc.status in NOT_RECOVERABLE:
                raise
            if device.is_reference:
                if simple:
                    raise
                raise _FullFallback(exc) from exc
            result = self._partial_fallback(step, device, inputs, exc, simple)
        for i, array in zip(step.io.outputs, result.outputs):
            values[i] = array

    def _partial_fallback(self, step: DeviceStep, step_device, inputs, error: HalError, simple):
        cpu = self.c.reference
        failed = step_device.name
        self.report.fallbacks.append(
            Fallback("partial", step.index, failed, error.status.name, error.message)
        )
        self._event("partial-fallback", step.index, cpu.name, error, failed=failed)
        log.info("step %d on %s failed (%s): retrying on %s", step.index, failed, error, cpu.name)
        record = StepRecord(step.index, cpu.name, list(step.operations), step.source)
        record.fallback = "partial"
        self.report.steps.append(record)
        try:
            return self._run_on(cpu, self.c.step_model(step, cpu), step, inputs, record)
        except HalError as exc:
            record.status = exc.status.name
            if simple or exc.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
                raise  # Android does not fall back twice on a simple plan
            raise _FullFallback(exc) from exc

    def _run_on(
        self, device: RuntimeDevice, model: StepModel, step: DeviceStep, inputs, record: StepRecord
    ) -> StepResult:
        if step.guess is None:  # worked out once per step (the CPU fallback plan's lazily)
            prime_step(step, self.c.model)
        guess = step.guess
        shapes = guess
        if self.output_shapes is not None and step.writes_main_outputs:
            # the caller's own output dimensions, when it gave them
            shapes = [g if g is not None else s for g, s in zip(self.output_shapes, guess)]
        for attempt in range(3):
            try:
                if self._first_error is not None:  # that attempt was made already
                    error, self._first_error = self._first_error, None
                    raise error
                result = model.run(
                    inputs,
                    shapes,
                    mode=self.mode,
                    measure=self.measure,
                    deadline_ns=self.deadline_ns,
                    loop_timeout_ns=self.loop_timeout_ns,
                )
            except OutputInsufficientSize as exc:
                grown = [tuple(s.dimensions) for s in exc.shapes]
                self._trace("execute", step.index, device.name, exc.status.name, attempt=attempt)
                if attempt == 2 or len(grown) != len(shapes) or grown == shapes:
                    raise
                shapes = grown  # dynamic temporaries: grow to the reported shapes, re-run
                record.reruns += 1
                continue
            except HalError as exc:
                self._trace(
                    "execute", step.index, device.name, exc.status.name, message=exc.message
                )
                raise
            record.timing = result.timing
            self._trace("execute", step.index, device.name, "NONE")
            return result
        raise AssertionError("unreachable")

    # -- trace ----------------------------------------------------------------

    def _trace(self, call: str, step: int | None, device: str, status: str, **extra: Any) -> None:
        entry = {"call": call, "step": step, "device": device, "status": status}
        entry.update(extra)
        self.report.trace.append(entry)

    def _event(self, call: str, step, device: str, error: HalError, **extra: Any) -> None:
        self._trace(call, step, device, error.status.name, message=error.message, **extra)


def prime_step(step: DeviceStep, model: Any) -> None:
    """Work out once what every run of a device step needs: its outputs' first buffer
    shapes, and whether it writes exactly the model's outputs."""
    main = step.io.model.main
    step.guess = [_first_guess(main.operands[i]) for i in main.outputIndexes]
    # what the first run passes: nothing when every output's size is known (the same request)
    step.run_shapes = step.guess if any(g is not None for g in step.guess) else None
    step.writes_main_outputs = step.source == 0 and step.io.outputs == tuple(
        model.main.outputIndexes
    )


def single_report(step: DeviceStep, device: str, timing: Timing | None) -> ExecutionReport:
    """The report of a one-step run that succeeded at once (Execution's fast path): what
    PlanRun records for it."""
    record = StepRecord(step.index, device, step.operations, step.source)
    record.timing = timing
    report = ExecutionReport(steps=[record])
    report.trace.append({"call": "execute", "step": step.index, "device": device, "status": "NONE"})
    return report


def _first_guess(operand) -> tuple[int, ...] | None:
    """The output buffer a step output first gets: its declared dimensions (an unknown axis
    gives an empty buffer, an unknown rank one element; the re-run grows it)."""
    info = OPERAND_TYPE_INFO.get(operand.type)
    if info is None or info.is_scalar or is_fully_specified(operand):
        return None
    return tuple(operand.dimensions)


def _own(value: Any) -> Any:
    return None if value is None else np.array(value, copy=True)


__all__ = [
    "ExecutionReport",
    "Fallback",
    "OperandType",
    "PlanRun",
    "StepRecord",
    "loop_timeout",
    "prime_step",
    "single_report",
]

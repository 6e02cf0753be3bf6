"""The plan interpreter: a model's first executions without generated code.

Generating and compiling a subgraph's Python (``codegen``) is most of a small
model's preparation: CPython's ``compile`` alone costs about half a microsecond
per syntax-tree node here, and the generator's passes as much again. A model
prepared and run once (a conformance vector, an app's one-off check) never
earns that back. ``CompiledModel`` therefore runs its first execution here,
straight from the plans, and generates code only when the model is executed
again (``model.EXECUTORS``).

The interpreter keeps the semantics of the generated code without its
``specialize`` patterns (``Generator(specialize=False)``), step for step:

- an operand environment per subgraph call (a list indexed by operand, the
  constants filled in once); temporaries are dropped after their last reader,
  as the generated code's ``del`` lines do (``release``);
- an operation: the deadline test of the checked variant, the tensor-size
  guard and run-time shape rule where the generated code has them, the kernel
  (or its late binding), the size test of unproven results, and the test of
  each unproven result against its declared dimensions;
- IF: a NO_VALUE or missing condition fails naming the IF; a constant
  condition picks its branch; the branch runs on the IF's operands;
- WHILE: the condition, then the loop timeout (loopTimeoutDuration from the
  start of the WHILE), then the body, whose outputs replace the state by
  reference; a result that is still its initial value is copied;
- errors: what a step raises becomes the HAL error naming that step
  (``codegen.step_error``), carried up as ``StepFailed`` so that the IF or
  WHILE around it does not name it again; the HAL errors the generated code lets
  through unchanged (``codegen._PASS``) pass here too.

Per operation it costs a few list reads and one call more than the generated
code; loops run without the counter and one-hot patterns of ``specialize``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nnhal.driver.executor.codegen import (
    _PASS,
    _missed,
    _shape_fail,
    declared_dims,
    input_shape_check,
    step_error,
)
from nnhal.driver.executor.control_flow import _copy, _loop_timeout, _no_condition, _no_input
from nnhal.driver.executor.plan import Step, StepKind, SubgraphPlan
from nnhal.driver.executor.tensor_guard import (
    TensorGuard,
    needs_guard,
    too_big_result,
    unproven_tensors,
)

from nnhal.errors import HalError
from nnhal.types import OperandLifeTime

_mono = time.monotonic_ns


class StepFailed(Exception):
    """A step's failure, already turned into the HAL error naming it (``error``)."""

    def __init__(self, error: HalError) -> None:
        super().__init__(str(error))
        self.error = error


#: errors that travel up through IF and WHILE steps unchanged
_THROUGH = (*_PASS, StepFailed)


def _conflicts(value, dims: tuple[int, ...], known: bool) -> bool:
    shape = value.shape
    if known:
        return shape != dims
    if len(shape) != len(dims):
        return True
    return any(d and shape[axis] != d for axis, d in enumerate(dims))


@dataclass
class _Op:
    """One step of a subgraph as the interpreter runs it (built on first use)."""

    step: Step
    location: str
    #: the operand indexes dropped after this step (their last reader)
    dead: tuple[int, ...]
    #: (position, operand, declared dims, all known) of the results tested
    shape_tests: tuple[tuple[int, int, tuple[int, ...], bool], ...]
    #: IF/WHILE: (position, operand) of a NO_VALUE value input (fails when run)
    missing: tuple[int, int] | None = None
    #: operations
    guard: Callable | None = None
    shape_check: Callable | None = None
    #: output positions whose size is tested after the kernel (a limit is set)
    sized: tuple[int, ...] = ()
    #: IF: the branch a constant condition picks (None: decided at run time)
    constant_branch: int | None = None
    #: IF: the condition operand is NO_VALUE
    no_condition: bool = False
    #: WHILE: the values its body carries to the next iteration
    carried: int = 0
    #: the kernel of an operation with one result and nothing else to do around it
    #: (no late binding, guard, run-time shape rule or result test), else None
    simple: Callable | None = None
    #: that result's operand, the kernel's argument count and its first three operands
    result: int = -1
    arity: int = 0
    first: int = -1
    second: int = -1
    third: int = -1


@dataclass
class _Program:
    """A subgraph ready to interpret."""

    template: list
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    ops: list[_Op]


class Interpreter:
    """Runs the plans of one model in one variant (with or without deadline tests).

    ``run(number, args, lt[, dl])`` takes what a generated subgraph function takes
    (the subgraph's inputs, the loop timeout in ns and, when checked, the deadline
    cell of ``model.Cancel``) and gives the subgraph's outputs as a list. Thread-safe:
    each call has its own environment; what is built on first use is only ever
    replaced by an equal.
    """

    def __init__(
        self, plans: dict[int, SubgraphPlan], *, checked: bool, max_tensor_bytes: int | None
    ) -> None:
        self.plans = plans
        self.checked = checked
        self.limit = max_tensor_bytes
        self._programs: dict[int, _Program] = {}

    def run(self, number: int, args: Sequence, lt: int, dl: list[int] | None = None) -> list:
        # One Python frame per nesting level, as the generated code has (IF and WHILE
        # call this again for their subgraphs): ``limits.EXECUTOR_MAX_NESTING`` holds.
        program = self._programs.get(number)
        if program is None:
            program = self._programs[number] = self._program(number)
        env = program.template.copy()
        for index, value in zip(program.inputs, args):
            env[index] = value
        checked = self.checked
        for op in program.ops:
            if checked and _mono() > dl[0]:
                raise _missed(op.location)
            kernel = op.simple
            step = op.step
            try:
                if kernel is not None:  # one kernel, one result, nothing to test
                    # (by arity: a list comprehension is a frame of its own in 3.11)
                    arity = op.arity
                    if arity == 2:
                        env[op.result] = kernel(env[op.first], env[op.second])
                    elif arity == 1:
                        env[op.result] = kernel(env[op.first])
                    elif arity == 3:
                        env[op.result] = kernel(env[op.first], env[op.second], env[op.third])
                    else:
                        env[op.result] = kernel(*[env[i] for i in step.kernel_inputs])
                elif step.kind is StepKind.OPERATION:
                    self._operation(op, step, env)
                elif step.kind is StepKind.IF:
                    if op.missing is not None:
                        raise _no_input(op.location, *op.missing)
                    branch = op.constant_branch
                    if branch is None:
                        condition = None if op.no_condition else env[step.inputs[0]]
                        if condition is None:
                            raise _no_condition(op.location, step.inputs[0])
                        branch = step.refs[0] if condition[0] else step.refs[1]
                    results = self.run(branch, [env[i] for i in step.inputs[3:]], lt, dl)
                    for index, value in zip(step.outputs, results):
                        env[index] = value
                else:  # WHILE: condition, loop timeout, body, by reference
                    if op.missing is not None:
                        raise _no_input(op.location, *op.missing)
                    cond_ref, body_ref = step.refs
                    state = [env[i] for i in step.inputs[2:]]
                    initial = list(state)
                    carried = op.carried
                    run = self.run
                    limit = _mono() + lt
                    while True:
                        (verdict,) = run(cond_ref, state, lt, dl)
                        if not verdict[0]:
                            break
                        if _mono() > limit:
                            raise _loop_timeout(op.location, lt)
                        state[:carried] = run(body_ref, state, lt, dl)
                    for index, final, first in zip(step.outputs, state, initial):
                        env[index] = final if final is not first else _copy(final)
                for position, index, dims, known in op.shape_tests:
                    value = env[index]
                    if _conflicts(value, dims, known):
                        raise _shape_fail(op.location, position, index, value, dims)
            except _THROUGH:
                raise
            except Exception as exc:
                raise StepFailed(step_error(exc, op.location)) from exc
            if op.dead:
                for index in op.dead:
                    env[index] = None
        outputs = program.outputs
        if len(outputs) == 1:
            return [env[outputs[0]]]
        return [env[index] for index in outputs]

    def _operation(self, op: _Op, step: Step, env: list) -> None:
        """One registry operation (its errors are named by ``run``)."""
        args = [env[i] for i in step.kernel_inputs]
        if op.guard is not None:
            op.guard(*[env[i] for i in step.inputs])
        if op.shape_check is not None:
            op.shape_check(*args)
        late = step.late
        if late is None:
            result = step.kernel(*args)
        else:
            result = late.bind(*[env[step.inputs[p]] for p in late.positions])(*args)
        outputs = step.outputs
        if len(outputs) == 1:
            env[outputs[0]] = result
        else:
            values = tuple(result)
            if len(values) != len(outputs):
                raise ValueError(f"expected {len(outputs)} results, the kernel gave {len(values)}")
            for index, value in zip(outputs, values):
                env[index] = value
        for position in op.sized:
            value = env[outputs[position]]
            if getattr(value, "nbytes", 0) > self.limit:
                raise too_big_result(op.location, position, outputs[position], value, self.limit)

    # -- building --------------------------------------------------------------

    def _program(self, number: int) -> _Program:
        plan = self.plans[number]
        subgraph = plan.subgraph
        operands = subgraph.operands
        template: list = [None] * len(operands)
        for index, value in plan.constants.items():
            template[index] = value
        keep = set(subgraph.outputIndexes) | set(subgraph.inputIndexes)
        last: dict[int, int] = {}
        written: set[int] = set()
        for position, step in enumerate(plan.steps):
            for index in (*step.inputs, *step.outputs):  # a result nobody reads: at once
                last[index] = position
            written.update(step.outputs)
        dead: dict[int, list[int]] = {}
        for index, position in last.items():
            if index in written and index not in keep:
                dead.setdefault(position, []).append(index)
        ops = [
            self._op(plan, step, tuple(sorted(dead.get(position, ()))))
            for position, step in enumerate(plan.steps)
        ]
        return _Program(template, tuple(subgraph.inputIndexes), tuple(subgraph.outputIndexes), ops)

    def _op(self, plan: SubgraphPlan, step: Step, dead: tuple[int, ...]) -> _Op:
        operands = plan.subgraph.operands
        tests = []
        for position, index in enumerate(step.outputs):
            if position in step.proven:
                continue
            found = declared_dims(operands[index])
            if found is not None:
                tests.append((position, index, *found))
        op = _Op(step, step.location, dead, tuple(tests))
        if step.kind is StepKind.OPERATION:
            sized = tuple(unproven_tensors(step, operands, self.limit))
            op.sized = sized
            if needs_guard(step, sized):
                op.guard = TensorGuard(step, operands, self.limit)
            op.shape_check = input_shape_check(plan, step)
            if (
                len(step.outputs) == 1
                and step.late is None
                and not sized
                and op.shape_check is None
                and not tests
            ):
                op.simple, op.result = step.kernel, step.outputs[0]
                arguments = step.kernel_inputs
                op.arity = len(arguments)
                op.first, op.second, op.third = (*arguments[:3], -1, -1, -1)[:3]
            return op
        first = 3 if step.kind is StepKind.IF else 2
        if step.kind is StepKind.WHILE:
            op.carried = len(self.plans[step.refs[1]].subgraph.outputIndexes)
        for position in range(first, len(step.inputs)):
            if operands[step.inputs[position]].lifetime == OperandLifeTime.NO_VALUE:
                op.missing = (position, step.inputs[position])
                break
        if step.kind is StepKind.IF:
            condition = step.inputs[0]
            constant = plan.constants.get(condition)
            if constant is not None and constant.size >= 1:
                op.constant_branch = step.refs[0 if bool(constant.reshape(-1)[0]) else 1]
            elif operands[condition].lifetime == OperandLifeTime.NO_VALUE:
                op.no_condition = True
        return op


__all__ = ["Interpreter", "StepFailed"]

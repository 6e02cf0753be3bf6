"""compile_model: turn a validated Model into plans, then into generated code.

Each subgraph reachable from main is compiled exactly once into a
``SubgraphPlan`` (constants decoded once, every ordinary operation validated
and bound to its kernel through the registry). IF and WHILE are not registry
operations: the compiler only records which subgraphs they refer to; the
code generator (``codegen`` / ``control_flow``) decides how to run them.

Errors found here are the model's fault: InvalidArgument naming the
subgraph, the operation and the rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from nnhal.driver.executor.operands import decode_constant, is_constant, operand_info
from nnhal.driver.executor.plan import LateBinding, Step, StepKind, SubgraphPlan
from nnhal.driver.extensions import kernel_definition
from nnhal.driver.ops.registry import (
    OpContext,
    OperandInfo,
    lookup,
    validate_operation,
)

from nnhal.errors import GeneralFailure, HalError, InvalidArgument
from nnhal.types import (
    OPERAND_TYPE_INFO,
    Model,
    OperandLifeTime,
    OperandType,
    OperationType,
    Subgraph,
    operation_name,
)

_BOOL_TYPES = frozenset({OperandType.BOOL, OperandType.TENSOR_BOOL8})
#: operand types handed to kernels through the context, not as arguments
_SCALAR_TYPES = frozenset(code for code, info in OPERAND_TYPE_INFO.items() if info.is_scalar)
#: lifetimes of a scalar whose value is known at preparation (NO_VALUE: its default)
_BOUND_LIFETIMES = frozenset(
    {OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE, OperandLifeTime.NO_VALUE}
)


@dataclass(frozen=True)
class Checked:
    """What a device's analysis of this very model established, for the compiler to reuse.

    ``definitions``: (subgraph, operation) -> the definition whose checks the operation
    passed; they are not run again when the compiler binds the same definition (the
    checks are pure functions of the descriptions and constant values; an operation an
    op package overrides is checked again). ``infos``: (subgraph, operand) -> the
    operand's description; those of operands that are not constants are reused as they
    are; a constant's carries the compiler's own decoded value, except when
    ``model_views`` says its value is a read-only view of this very model's
    ``operandValues`` bytes (``in_place_view``): that is what ``decode_constant`` would
    make. ``proven``: (subgraph, operation) -> output positions ``shapes.prove_shapes``
    proved for an identical model under the same strictness and tensor limit (None:
    prove them).
    """

    definitions: Mapping[tuple[int, int], object] = field(default_factory=dict)
    infos: Mapping[tuple[int, int], OperandInfo] = field(default_factory=dict)
    proven: Mapping[tuple[int, int], frozenset[int]] | None = None
    #: the constants' values in ``infos`` were read from the compiled model's own
    #: ``operandValues`` (False for descriptions kept from an identical model)
    model_views: bool = False
    #: (subgraph, operation) -> the OpContext the checks ran on; the compiler binds
    #: the kernel on it when its own would hold the very same descriptions, so what
    #: the checks worked out (``OpContext.remember``) serves the binding and the proofs
    contexts: Mapping[tuple[int, int], OpContext] = field(default_factory=dict)


def in_place_view(model: Model, operand, value: np.ndarray | None) -> bool:
    """Whether ``decode_constant`` would give ``operand`` an array equal to ``value``, a
    read-only view of ``model.operandValues`` the device made: immutable bytes read in
    place, aligned for the dtype (decode_constant copies misaligned data), and not a
    BOOL type (those are converted; the device leaves them to decode_constant)."""
    if value is None or operand.lifetime != OperandLifeTime.CONSTANT_COPY:
        return False
    info = OPERAND_TYPE_INFO.get(operand.type)
    if (
        info is None
        or info.dtype is None
        or value.dtype != info.dtype
        or operand.type in _BOOL_TYPES
        or type(model.operandValues) is not bytes
    ):
        return False
    flags = value.flags  # (a new object at each attribute read)
    return not flags.writeable and flags.aligned


def subgraph_at(model: Model, number: int) -> Subgraph:
    """Subgraph ``number``: 0 = main, k = referenced[k-1]."""
    return model.main if number == 0 else model.referenced[number - 1]


def compile_plans(
    model: Model,
    pool_views: Sequence[memoryview],
    checked: Checked | None = None,
) -> dict[int, SubgraphPlan]:
    """Plans for main and every subgraph reachable from it, each compiled once.

    Walks the references iteratively (no recursion: nesting may be deep).
    ``checked``: what the device's analysis of this model established (``Checked``).
    """
    plans: dict[int, SubgraphPlan] = {}
    pending = [0]
    while pending:
        number = pending.pop()
        if number in plans:
            continue
        plan = compile_subgraph(model, number, pool_views, checked)
        plans[number] = plan
        for step in plan.steps:
            if step.refs:  # IF / WHILE (a generator per step had cost more than the rest)
                pending.extend(ref for ref in step.refs if ref not in plans)
    return plans


def compile_subgraph(
    model: Model,
    number: int,
    pool_views: Sequence[memoryview],
    checked: Checked | None = None,
) -> SubgraphPlan:
    subgraph = subgraph_at(model, number)
    plan = SubgraphPlan(index=number, subgraph=subgraph)
    views = list(pool_views)
    checked = checked if checked is not None else Checked()
    # one description per operand, shared by the operations reading it
    infos: dict[int, OperandInfo] = {}
    #: constants whose description is the compiler's own (not the analysis'): a context
    #: the checks ran on does not describe an operation reading one of them
    own: set[int] = set()
    for index, operand in enumerate(subgraph.operands):
        if is_constant(operand):
            if checked.model_views:
                # the device's description already holds the array decode_constant
                # would make: take both over (a decode and a description per weight)
                seen = checked.infos.get((number, index))
                if seen is not None and in_place_view(model, operand, seen.value):
                    plan.constants[index] = seen.value
                    infos[index] = seen
                    continue
            own.add(index)
            try:
                plan.constants[index] = decode_constant(model, operand, views)
            except InvalidArgument as exc:
                raise InvalidArgument(f"subgraph {number}, operand {index}: {exc.message}") from exc

    def info(index: int) -> OperandInfo:
        found = infos.get(index)
        if found is None:
            if index not in plan.constants:
                found = checked.infos.get((number, index))
            if found is None:
                value = plan.constants.get(index)
                found = operand_info(model, subgraph, index, views, value=value)
            infos[index] = found
        return found

    relaxed = model.relaxComputationFloat32toFloat16
    for op_index, operation in enumerate(subgraph.operations):
        where = f"subgraph {number}, operation {op_index}"
        if operation.type == OperationType.IF:
            plan.steps.append(_control_flow_step(model, plan, op_index, StepKind.IF, where))
        elif operation.type == OperationType.WHILE:
            plan.steps.append(_control_flow_step(model, plan, op_index, StepKind.WHILE, where))
        else:
            passed = checked.definitions.get((number, op_index))
            seen = checked.contexts.get((number, op_index)) if checked.model_views else None
            if seen is not None and (
                seen.relaxed != relaxed or not own.isdisjoint(operation.inputs)
            ):
                seen = None
            plan.steps.append(_operation_step(plan, op_index, info, where, relaxed, passed, seen))
    return plan


def _operation_step(
    plan: SubgraphPlan,
    op_index: int,
    info: Callable[[int], OperandInfo],
    where: str,
    relaxed: bool,
    validated_with: object = None,
    checked_context: OpContext | None = None,
) -> Step:
    """The step of an ordinary operation. ``checked_context``: the context the device's
    checks ran on, describing this very operation with the descriptions ``info`` gives
    (the caller leaves it out otherwise); it serves as is when the definition is the
    same, so what the checks worked out (``OpContext.remember``) serves the binding."""
    subgraph = plan.subgraph
    operation = subgraph.operations[op_index]
    name = operation_name(operation.type)
    # a device compiling with op packages binds extension operations (and
    # built-ins a package overrides) from the package backend; else the registry.
    definition = kernel_definition(operation.type) or lookup(operation.type)
    if definition is not None and not isinstance(definition.type, OperationType):
        name = definition.type.name  # the package op's name, for messages
    if definition is None:
        raise InvalidArgument(f"{name} ({where}): operation is not supported")

    ctx = checked_context
    if ctx is None or ctx.op is not definition or ctx.where != where:
        inputs = [info(i) for i in operation.inputs]
        outputs = [info(i) for i in operation.outputs]
        ctx = OpContext(op=definition, inputs=inputs, outputs=outputs, relaxed=relaxed, where=where)
    # Scalars reach the kernel through the context (those that are not constants at
    # run time: ``late``); tensors as arguments.
    operands = subgraph.operands
    kernel_inputs: list[int] = []
    late: list[int] = []
    for position, index in enumerate(operation.inputs):
        operand = operands[index]
        if operand.type not in _SCALAR_TYPES:
            kernel_inputs.append(index)
        elif operand.lifetime not in _BOUND_LIFETIMES:
            late.append(position)
    late_positions = tuple(late)
    step = Step(
        kind=StepKind.OPERATION,
        subgraph=plan.index,
        index=op_index,
        name=name,
        inputs=tuple(operation.inputs),
        outputs=tuple(operation.outputs),
        kernel_inputs=tuple(kernel_inputs),
        context=ctx,
        pure=definition.pure,
    )
    try:
        # An op check needing a runtime scalar's value is deferred by
        # validate_operation; LateBinding.bind runs it when the value is known.
        # The checks are pure functions of the operand descriptions and constant
        # values, so a pass by the device's analysis of this model with this very
        # definition stands (a package overriding the operation is checked here).
        if validated_with is not definition:
            validate_operation(ctx)
    except HalError:
        raise
    except Exception as exc:
        raise GeneralFailure(f"{name} ({where}): validation failed: {exc!r}") from exc
    if late_positions:
        step.late = LateBinding(definition, ctx, late_positions)
        return step
    try:
        step.kernel = definition.kernel(ctx)
    except HalError:
        raise
    except Exception as exc:
        raise GeneralFailure(
            f"{name} ({where}): cannot bind kernel: {type(exc).__name__}: {exc}"
        ) from exc
    if not callable(step.kernel):
        raise GeneralFailure(f"{name} ({where}): execute() did not return a kernel")
    return step


def _subgraph_ref(model: Model, plan: SubgraphPlan, index: int, what: str, where: str) -> int:
    operand = plan.subgraph.operands[index]
    if (
        operand.type != OperandType.SUBGRAPH
        or operand.lifetime != OperandLifeTime.SUBGRAPH
        or not 0 <= operand.location.offset < len(model.referenced)
    ):
        raise InvalidArgument(f"{where}: {what} operand {index} is not a valid SUBGRAPH reference")
    return operand.location.offset + 1


def _control_flow_step(
    model: Model, plan: SubgraphPlan, op_index: int, kind: StepKind, where: str
) -> Step:
    """IF / WHILE: check the shape of the wiring the generated code relies on."""
    operation = plan.subgraph.operations[op_index]
    name = kind.value
    prefix = f"{name} ({where})"
    n_in, n_out = len(operation.inputs), len(operation.outputs)
    if n_in < 3 or n_out < 1:
        raise InvalidArgument(f"{prefix}: needs at least 3 inputs and 1 output")
    if kind is StepKind.IF:
        refs = (
            _subgraph_ref(model, plan, operation.inputs[1], "then", prefix),
            _subgraph_ref(model, plan, operation.inputs[2], "else", prefix),
        )
        for label, ref in zip(("then", "else"), refs):
            branch = subgraph_at(model, ref)
            if len(branch.inputIndexes) != n_in - 3 or len(branch.outputIndexes) != n_out:
                raise InvalidArgument(
                    f"{prefix}: {label} branch (subgraph {ref}) has "
                    f"{len(branch.inputIndexes)} inputs / {len(branch.outputIndexes)} outputs; "
                    f"the IF passes {n_in - 3} and expects {n_out}"
                )
    else:
        refs = (
            _subgraph_ref(model, plan, operation.inputs[0], "condition", prefix),
            _subgraph_ref(model, plan, operation.inputs[1], "body", prefix),
        )
        cond, body = (subgraph_at(model, ref) for ref in refs)
        n_values = n_in - 2
        if len(cond.inputIndexes) != n_values or len(cond.outputIndexes) != 1:
            raise InvalidArgument(
                f"{prefix}: condition (subgraph {refs[0]}) must take {n_values} inputs and "
                f"give 1 output; it has {len(cond.inputIndexes)} / {len(cond.outputIndexes)}"
            )
        n_body_out = len(body.outputIndexes)
        if len(body.inputIndexes) != n_values or not n_out <= n_body_out <= n_values:
            raise InvalidArgument(
                f"{prefix}: body (subgraph {refs[1]}) must take {n_values} inputs and give "
                f"between {n_out} and {n_values} outputs; it has {len(body.inputIndexes)} / "
                f"{n_body_out}"
            )
    return Step(
        kind=kind,
        subgraph=plan.index,
        index=op_index,
        name=name,
        inputs=tuple(operation.inputs),
        outputs=tuple(operation.outputs),
        refs=refs,
    )


def output_dtypes(model: Model) -> list[np.dtype | None]:
    """numpy dtype of each main output (None for types without one)."""
    result = []
    for index in model.main.outputIndexes:
        info = OPERAND_TYPE_INFO.get(model.main.operands[index].type)
        result.append(None if info is None else info.dtype)
    return result


__all__ = ["Checked", "compile_plans", "compile_subgraph", "output_dtypes", "subgraph_at"]

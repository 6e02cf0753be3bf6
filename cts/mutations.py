"""VTS 1.3 ValidateModel mutations (hal13.md §5.4) as a reusable generator.

``model_mutations(model)`` yields ``(description, mutated_model)`` for the
model mutations 1-19 of VTS ``ValidateModel.cpp``, applied to ``model.main``
only, in the VTS order. Every mutated model of a valid input model is
invalid: a driver must answer INVALID_ARGUMENT from both
``getSupportedOperations_1_3`` and ``prepareModel_1_3``. Some mutations are
caught by the structural rules (``nnhal.validation``) alone; others (an
operand switched to another valid type, an input removed or added) only by
the per-operation signature table. ``preference_mutations`` and
``priority_mutations`` are mutations 20-21: invalid prepare arguments used
with the unchanged model (only ``prepareModel_1_3`` is checked with them).

The skip tables of VTS (combinations that are legitimately valid, so that
mutating them would not make the model invalid) are kept as data below.

Deliberate differences from VTS, all noted where they happen:
- mutation 2 uses -1 (int32) for FUNDAMENTAL_MIN - 1, since our wire carries
  operand types as int32; read as uint32 it is VTS's 0xFFFFFFFF;
- mutation 4 skips OEM and extension operand types (0.0 is a valid scale for
  them, VTS models never contain them);
- mutation 14 renumbers operand indexes after the removal, which is what VTS
  intends (its renumbering lambda decrements a copy and so changes nothing).

Depends only on ``nnhal`` (and its tables in ``nnhal.cts.mutation_tables``) so the
conformance suite can run it against any endpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from nnhal.cts.mutation_tables import (
    ADD_OPERATION_INPUT_SKIPS,
    INVALID_OPERAND_TYPES,
    INVALID_OPERATION_TYPES,
    INVALID_RANK_TYPES,
    INVALID_SCALES,
    INVALID_ZERO_POINTS,
    MAX_MODEL_BYTES,
    OPERATION_OPERAND_TYPE_SKIPS,
    REMOVE_OPERAND_SKIP_OPERATIONS,
    REMOVE_OPERATION_INPUT_SKIPS,
    preference_mutations,
    priority_mutations,
)

from nnhal.types import (
    OPERAND_TYPE_INFO,
    DataLocation,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    Operation,
    SymmPerChannelQuantParams,
)

__all__ = [
    "ADD_OPERATION_INPUT_SKIPS",
    "INVALID_OPERAND_TYPES",
    "INVALID_OPERATION_TYPES",
    "MUTATION_FAMILIES",
    "OPERATION_OPERAND_TYPE_SKIPS",
    "REMOVE_OPERAND_SKIP_OPERATIONS",
    "REMOVE_OPERATION_INPUT_SKIPS",
    "model_mutations",
    "preference_mutations",
    "priority_mutations",
]

_T = OperandType
_L = OperandLifeTime

Mutations = Iterator[tuple[str, Model]]

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _with_main(model: Model, **changes: object) -> Model:
    return replace(model, main=replace(model.main, **changes))


def _with_operand(model: Model, index: int, operand: Operand, **changes: object) -> Model:
    operands = list(model.main.operands)
    operands[index] = operand
    return _with_main(model, operands=tuple(operands), **changes)


def _lifetime(value: int) -> str:
    return OperandLifeTime(value).name


def _size_of_data(operand: Operand) -> int:
    """Byte size of a fundamental operand's data; 0 if unknown, OEM or extension."""
    info = OPERAND_TYPE_INFO.get(operand.type)
    if info is None or info.byte_size == 0 or operand.type in (_T.OEM, _T.TENSOR_OEM_BYTE):
        return 0
    if info.is_scalar:
        return info.byte_size
    size = info.byte_size
    for d in operand.dimensions:
        size *= d
    return size if operand.dimensions else 0


def _approx_model_bytes(model: Model) -> int:
    """Rough size of the model's representation (as VTS's sizeForBinder)."""
    size = len(model.operandValues)
    for sg in (model.main, *model.referenced):
        size += sum(36 + 4 * len(o.dimensions) for o in sg.operands)
        size += sum(4 + 4 * (len(op.inputs) + len(op.outputs)) for op in sg.operations)
        size += 4 * (len(sg.inputIndexes) + len(sg.outputIndexes))
    return size


def _can_become_constant_copy(model: Model, operand: Operand) -> bool:
    size = _size_of_data(operand)
    extra = max(0, size - len(model.operandValues))
    return size > 0 and _approx_model_bytes(model) + extra <= MAX_MODEL_BYTES


def _as_constant_copy(model: Model, operand: Operand) -> tuple[Operand, bytes]:
    """The operand as CONSTANT_COPY at offset 0 of operandValues (grown with zeros)."""
    size = _size_of_data(operand)
    values = model.operandValues
    if len(values) < size:
        values = values + bytes(size - len(values))
    return (
        replace(operand, lifetime=_L.CONSTANT_COPY, location=DataLocation(0, 0, size)),
        values,
    )


def _without(indexes: tuple[int, ...], value: int) -> tuple[int, ...]:
    return tuple(i for i in indexes if i != value)


# ---------------------------------------------------------------------------
# The mutation families, in VTS order
# ---------------------------------------------------------------------------


def mutate_execution_order(model: Model) -> Mutations:  # 1
    operands, operations = model.main.operands, model.main.operations
    readable = (_L.TEMPORARY_VARIABLE, _L.SUBGRAPH_OUTPUT)
    for k, op in enumerate(operations):
        rest = operations[:k] + operations[k + 1 :]
        if any(operands[i].lifetime in readable for i in op.inputs):
            yield (
                f"mutateExecutionOrderTest: operation {k} is a reader",
                _with_main(model, operations=(op, *rest)),
            )
        if any(operands[i].numberOfConsumers > 0 for i in op.outputs):
            yield (
                f"mutateExecutionOrderTest: operation {k} is a writer",
                _with_main(model, operations=(*rest, op)),
            )


def mutate_operand_type(model: Model) -> Mutations:  # 2
    for i, operand in enumerate(model.main.operands):
        for t in INVALID_OPERAND_TYPES:
            yield (
                f"mutateOperandTypeTest: operand {i} set to value {t}",
                _with_operand(model, i, replace(operand, type=t)),
            )


def mutate_operand_rank(model: Model) -> Mutations:  # 3
    for i, operand in enumerate(model.main.operands):
        if operand.type in INVALID_RANK_TYPES:
            yield (
                f"mutateOperandRankTest: operand {i} has rank of 1",
                _with_operand(model, i, replace(operand, dimensions=(0,))),
            )


def mutate_operand_scale(model: Model) -> Mutations:  # 4
    for i, operand in enumerate(model.main.operands):
        scale = INVALID_SCALES.get(operand.type)
        if scale is None:  # OEM / extension: any scale (or 0) is valid for them
            continue
        yield (
            f"mutateOperandScaleTest: operand {i} has scale of {scale}",
            _with_operand(model, i, replace(operand, scale=scale)),
        )


def mutate_operand_zero_point(model: Model) -> Mutations:  # 5
    for i, operand in enumerate(model.main.operands):
        for zp in INVALID_ZERO_POINTS.get(operand.type, ()):
            yield (
                f"mutateOperandZeroPointTest: operand {i} has zero point of {zp}",
                _with_operand(model, i, replace(operand, zeroPoint=zp)),
            )


def mutate_operand_lifetime(model: Model) -> Mutations:  # 6
    main = model.main
    for i, operand in enumerate(main.operands):
        old = operand.lifetime
        if old in (_L.SUBGRAPH_OUTPUT, _L.TEMPORARY_VARIABLE):
            targets = [_L.SUBGRAPH_INPUT, _L.CONSTANT_COPY]
        elif old in (_L.CONSTANT_COPY, _L.CONSTANT_REFERENCE, _L.SUBGRAPH_INPUT):
            targets = [_L.TEMPORARY_VARIABLE, _L.SUBGRAPH_OUTPUT]
        else:  # NO_VALUE (written or not? unknown), SUBGRAPH
            continue
        if not _can_become_constant_copy(model, operand) and _L.CONSTANT_COPY in targets:
            targets.remove(_L.CONSTANT_COPY)
        for new in targets:
            inputs, outputs = main.inputIndexes, main.outputIndexes
            if old == _L.SUBGRAPH_INPUT:
                inputs = _without(inputs, i)
            elif old == _L.SUBGRAPH_OUTPUT:
                outputs = _without(outputs, i)
            mutated = replace(operand, lifetime=new, location=DataLocation())
            values = model.operandValues
            if new == _L.CONSTANT_COPY:
                mutated, values = _as_constant_copy(model, mutated)
            elif new == _L.SUBGRAPH_INPUT:
                inputs = (*inputs, i)
            elif new == _L.SUBGRAPH_OUTPUT:
                outputs = (*outputs, i)
            m = _with_operand(model, i, mutated, inputIndexes=inputs, outputIndexes=outputs)
            what = f"has lifetime {_lifetime(new)} instead of lifetime {_lifetime(old)}"
            yield f"mutateOperandLifetimeTest: operand {i} {what}", replace(m, operandValues=values)


_INPUT_OUTPUT_SWAP = {
    _L.CONSTANT_COPY: _L.SUBGRAPH_INPUT,
    _L.CONSTANT_REFERENCE: _L.SUBGRAPH_INPUT,
    _L.SUBGRAPH_INPUT: _L.CONSTANT_COPY,
    _L.SUBGRAPH_OUTPUT: _L.TEMPORARY_VARIABLE,
    _L.TEMPORARY_VARIABLE: _L.SUBGRAPH_OUTPUT,
}


def mutate_operand_input_output(model: Model) -> Mutations:  # 7
    for i, operand in enumerate(model.main.operands):
        new = _INPUT_OUTPUT_SWAP.get(operand.lifetime)
        if new is None:
            continue
        if new == _L.CONSTANT_COPY and not _can_become_constant_copy(model, operand):
            continue
        mutated = replace(operand, lifetime=new, location=DataLocation())
        values = model.operandValues
        if new == _L.CONSTANT_COPY:
            mutated, values = _as_constant_copy(model, mutated)
        what = f"has lifetime {_lifetime(new)} instead of lifetime {_lifetime(operand.lifetime)}"
        m = _with_operand(model, i, mutated)
        yield f"mutateOperandInputOutputTest: operand {i} {what}", replace(m, operandValues=values)


def mutate_operand_number_of_consumers(model: Model) -> Mutations:  # 8
    for i, operand in enumerate(model.main.operands):
        n = operand.numberOfConsumers
        for bad in (1,) if n == 0 else (n - 1, n + 1):
            yield (
                f"mutateOperandNumberOfConsumersTest: operand {i} numberOfConsumers = {bad}",
                _with_operand(model, i, replace(operand, numberOfConsumers=bad)),
            )


def _fresh_output_copy(operand: Operand) -> Operand:
    lifetime = operand.lifetime
    if lifetime == _L.SUBGRAPH_OUTPUT:
        lifetime = _L.TEMPORARY_VARIABLE
    return replace(operand, numberOfConsumers=0, lifetime=lifetime)


def mutate_operand_add_writer(model: Model) -> Mutations:  # 9
    main = model.main
    for k, op in enumerate(main.operations):
        for bad in range(len(op.outputs)):
            operands = list(main.operands)
            for i in op.inputs:
                operands[i] = replace(
                    operands[i], numberOfConsumers=operands[i].numberOfConsumers + 1
                )
            outputs = list(op.outputs)
            for j, idx in enumerate(op.outputs):
                if j != bad:  # only ONE operand gets a second writer
                    operands.append(_fresh_output_copy(main.operands[idx]))
                    outputs[j] = len(operands) - 1
            yield (
                f"mutateOperandAddWriterTest: operation {k} writes to {op.outputs[bad]}",
                _with_main(
                    model,
                    operands=tuple(operands),
                    operations=(*main.operations, replace(op, outputs=tuple(outputs))),
                ),
            )


def _retyped(operand: Operand, t: int) -> Operand:
    """VTS mutateOperand: the operand as type ``t``, individually as valid as possible."""
    dims = operand.dimensions or (1,)
    if t in (_T.FLOAT16, _T.FLOAT32, _T.INT32, _T.UINT32, _T.BOOL):
        return replace(operand, type=t, dimensions=(), scale=0.0, zeroPoint=0)
    if t in (_T.TENSOR_BOOL8, _T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32):
        return replace(operand, type=t, dimensions=dims, scale=0.0, zeroPoint=0)
    if t == _T.TENSOR_INT32:
        return replace(operand, type=t, dimensions=dims, zeroPoint=0)
    if t in (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_SYMM, _T.TENSOR_QUANT16_ASYMM,
             _T.TENSOR_QUANT16_SYMM):  # fmt: skip
        return replace(operand, type=t, dimensions=dims, scale=operand.scale or 1.0)
    if t == _T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        channels = operand.dimensions[0] if operand.dimensions else 0
        params = SymmPerChannelQuantParams(scales=(1.0,) * channels, channelDim=0)
        return replace(operand, type=t, dimensions=dims, scale=0.0, zeroPoint=0,
                       extraParams=params)  # fmt: skip
    return replace(operand, type=t)  # SUBGRAPH, TENSOR_QUANT8_ASYMM_SIGNED: type only


def _operand_type_skip(index: int, t: int, operations: tuple[Operation, ...]) -> bool:
    for op in operations:
        for op_type, position, types in OPERATION_OPERAND_TYPE_SKIPS:
            if op.type != op_type or (types is not None and t not in types):
                continue
            if position is None:
                return True
            side, pos = position
            indexes = op.inputs if side == "input" else op.outputs
            if pos < len(indexes) and indexes[pos] == index:
                return True
    return False


def mutate_operation_operand_type(model: Model) -> Mutations:  # 10
    operations = model.main.operations
    for i, operand in enumerate(model.main.operands):
        for t in OperandType:
            if t == operand.type or t in (_T.OEM, _T.TENSOR_OEM_BYTE):
                continue
            if _operand_type_skip(i, t, operations):
                continue
            yield (
                f"mutateOperationOperandTypeTest: operand {i} set to type {t.name}",
                _with_operand(model, i, _retyped(operand, t)),
            )


def _with_operation(model: Model, k: int, op: Operation, **changes: object) -> Model:
    operations = list(model.main.operations)
    operations[k] = op
    return _with_main(model, operations=tuple(operations), **changes)


def mutate_operation_type(model: Model) -> Mutations:  # 11
    for k, op in enumerate(model.main.operations):
        for t in INVALID_OPERATION_TYPES:
            yield (
                f"mutateOperationTypeTest: operation {k} set to value {t}",
                _with_operation(model, k, replace(op, type=t)),
            )


def mutate_operation_input_operand_index(model: Model) -> Mutations:  # 12
    bad = len(model.main.operands)
    for k, op in enumerate(model.main.operations):
        for j in range(len(op.inputs)):
            inputs = op.inputs[:j] + (bad,) + op.inputs[j + 1 :]
            yield (
                f"mutateOperationInputOperandIndexTest: operation {k} input {j}",
                _with_operation(model, k, replace(op, inputs=inputs)),
            )


def mutate_operation_output_operand_index(model: Model) -> Mutations:  # 12
    bad = len(model.main.operands)
    for k, op in enumerate(model.main.operations):
        for j in range(len(op.outputs)):
            outputs = op.outputs[:j] + (bad,) + op.outputs[j + 1 :]
            yield (
                f"mutateOperationOutputOperandIndexTest: operation {k} output {j}",
                _with_operation(model, k, replace(op, outputs=outputs)),
            )


def mutate_operation_remove_write(model: Model) -> Mutations:  # 13
    main = model.main
    for k, op in enumerate(main.operations):
        for j, idx in enumerate(op.outputs):
            if main.operands[idx].numberOfConsumers == 0:
                continue
            operands = (*main.operands, _fresh_output_copy(main.operands[idx]))
            outputs = op.outputs[:j] + (len(operands) - 1,) + op.outputs[j + 1 :]
            yield (
                f"mutateOperationRemoveWriteTest: operation {k} writes to {idx}",
                _with_operation(model, k, replace(op, outputs=outputs), operands=operands),
            )


def _renumbered(indexes: tuple[int, ...], removed: int) -> tuple[int, ...]:
    return tuple(i - (i > removed) for i in indexes if i != removed)


def remove_operand(model: Model) -> Mutations:  # 14
    main = model.main
    for i, operand in enumerate(main.operands):
        if operand.numberOfConsumers == 0:  # removing an unused operand changes nothing
            continue
        if any(
            op.type in REMOVE_OPERAND_SKIP_OPERATIONS and i in op.outputs for op in main.operations
        ):
            continue
        # Removing the operand removes an input of every operation reading it; where
        # that input is optional or one of CONCATENATION's tensors the shorter form is
        # legal and the model may stay valid: skipped, as item 16 skips them.
        if any(
            _remove_input_skip(op, j)
            for op in main.operations
            for j, k in enumerate(op.inputs)
            if k == i
        ):
            continue
        operations = tuple(
            replace(op, inputs=_renumbered(op.inputs, i), outputs=_renumbered(op.outputs, i))
            for op in main.operations
        )
        yield (
            f"removeOperandTest: operand {i}",
            _with_main(
                model,
                operands=main.operands[:i] + main.operands[i + 1 :],
                operations=operations,
                inputIndexes=_renumbered(main.inputIndexes, i),
                outputIndexes=_renumbered(main.outputIndexes, i),
            ),
        )


def _consumers_decremented(operands: tuple[Operand, ...], indexes: tuple[int, ...]) -> tuple:
    out = list(operands)
    for i in indexes:
        out[i] = replace(out[i], numberOfConsumers=out[i].numberOfConsumers - 1)
    return tuple(out)


def remove_operation(model: Model) -> Mutations:  # 15
    main = model.main
    for k, op in enumerate(main.operations):
        yield (
            f"removeOperationTest: operation {k}",
            _with_main(
                model,
                operands=_consumers_decremented(main.operands, op.inputs),
                operations=main.operations[:k] + main.operations[k + 1 :],
            ),
        )


def _remove_input_skip(op: Operation, j: int) -> bool:
    n = len(op.inputs)
    for (count_lo, count_hi), (lo, hi) in REMOVE_OPERATION_INPUT_SKIPS.get(op.type, ()):
        lo, hi = (lo + n if lo < 0 else lo), (hi + n if hi < 0 else hi)
        if count_lo <= n <= count_hi and lo <= j <= hi:
            return True
    return False


def remove_operation_input(model: Model) -> Mutations:  # 16
    main = model.main
    for k, op in enumerate(main.operations):
        for j, idx in enumerate(op.inputs):
            if _remove_input_skip(op, j):
                continue
            yield (
                f"removeOperationInputTest: operation {k}, input {j}",
                _with_operation(
                    model,
                    k,
                    replace(op, inputs=op.inputs[:j] + op.inputs[j + 1 :]),
                    operands=_consumers_decremented(main.operands, (idx,)),
                ),
            )


def remove_operation_output(model: Model) -> Mutations:  # 17
    for k, op in enumerate(model.main.operations):
        for j in range(len(op.outputs)):
            yield (
                f"removeOperationOutputTest: operation {k}, output {j}",
                _with_operation(
                    model, k, replace(op, outputs=op.outputs[:j] + op.outputs[j + 1 :])
                ),
            )


def _new_int32(lifetime: OperandLifeTime) -> Operand:
    # As VTS addOperand(model, lifetime): numberOfConsumers is 1 whatever the lifetime.
    return Operand(type=int(_T.INT32), numberOfConsumers=1, lifetime=lifetime)


def add_operation_input(model: Model) -> Mutations:  # 18
    main = model.main
    index = len(main.operands)
    for k, op in enumerate(main.operations):
        lo, hi = ADD_OPERATION_INPUT_SKIPS.get(op.type, (1, 0))
        if lo <= len(op.inputs) <= hi:
            continue
        yield (
            f"addOperationInputTest: operation {k}",
            _with_operation(
                model,
                k,
                replace(op, inputs=(*op.inputs, index)),
                operands=(*main.operands, _new_int32(_L.SUBGRAPH_INPUT)),
                inputIndexes=(*main.inputIndexes, index),
            ),
        )


def add_operation_output(model: Model) -> Mutations:  # 19
    main = model.main
    index = len(main.operands)
    for k, op in enumerate(main.operations):
        yield (
            f"addOperationOutputTest: operation {k}",
            _with_operation(
                model,
                k,
                replace(op, outputs=(*op.outputs, index)),
                operands=(*main.operands, _new_int32(_L.SUBGRAPH_OUTPUT)),
                outputIndexes=(*main.outputIndexes, index),
            ),
        )


#: VTS test name -> mutation family, in the order VTS runs them.
MUTATION_FAMILIES: dict[str, Callable[[Model], Mutations]] = {
    "mutateExecutionOrderTest": mutate_execution_order,
    "mutateOperandTypeTest": mutate_operand_type,
    "mutateOperandRankTest": mutate_operand_rank,
    "mutateOperandScaleTest": mutate_operand_scale,
    "mutateOperandZeroPointTest": mutate_operand_zero_point,
    "mutateOperandLifeTimeTest": mutate_operand_lifetime,
    "mutateOperandInputOutputTest": mutate_operand_input_output,
    "mutateOperandNumberOfConsumersTest": mutate_operand_number_of_consumers,
    "mutateOperandAddWriterTest": mutate_operand_add_writer,
    "mutateOperationOperandTypeTest": mutate_operation_operand_type,
    "mutateOperationTypeTest": mutate_operation_type,
    "mutateOperationInputOperandIndexTest": mutate_operation_input_operand_index,
    "mutateOperationOutputOperandIndexTest": mutate_operation_output_operand_index,
    "mutateOperationRemoveWriteTest": mutate_operation_remove_write,
    "removeOperandTest": remove_operand,
    "removeOperationTest": remove_operation,
    "removeOperationInputTest": remove_operation_input,
    "removeOperationOutputTest": remove_operation_output,
    "addOperationInputTest": add_operation_input,
    "addOperationOutputTest": add_operation_output,
}


def model_mutations(model: Model) -> Mutations:
    """Every VTS model mutation (1-19) of ``model``: ``(description, mutated model)``."""
    for family in MUTATION_FAMILIES.values():
        yield from family(model)

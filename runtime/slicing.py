"""Cutting a step model out of a source model (Android's ExecutionStep::finishStepModel).

A step is some operations of one subgraph of the source model (main, or a
referenced subgraph the runtime interprets). Its model:

- reads as inputs every operand its operations read that is neither a constant,
  a NO_VALUE nor a SUBGRAPH reference, nor produced inside the step;
- writes as outputs every operand it produces that the source subgraph outputs
  or that an operation outside the step reads (``needed_outside``): the
  temporaries crossing steps become step inputs and outputs;
- keeps constants where they were (operandValues and pools are shared with the
  source model, so their locations stay valid), and carries the referenced
  subgraphs its IF/WHILE operations reach, renumbered.

Helpers here also read constant values (``constant_value``), which the
control-flow interpreter needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from multiprocessing import shared_memory

import numpy as np

from nnhal.types import (
    OPERAND_TYPE_INFO,
    DataLocation,
    InlineMemory,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    SharedMemory,
    Subgraph,
)

L = OperandLifeTime
_CONSTANT = frozenset({L.CONSTANT_COPY, L.CONSTANT_REFERENCE})
_NOT_DATA = frozenset({L.CONSTANT_COPY, L.CONSTANT_REFERENCE, L.NO_VALUE, L.SUBGRAPH})


def subgraph_of(model: Model, index: int) -> Subgraph:
    """Subgraph ``index``: 0 is main, k > 0 is referenced[k-1] (nnhal.validation's numbering)."""
    return model.main if index == 0 else model.referenced[index - 1]


def referenced_index(operand: Operand) -> int:
    """The subgraph number (main = 0) a SUBGRAPH operand names."""
    return operand.location.offset + 1


@dataclass(frozen=True)
class StepIo:
    """The step model and where its inputs and outputs are in the source subgraph."""

    model: Model
    inputs: tuple[int, ...]  # source operand indexes, in step-input order
    outputs: tuple[int, ...]  # source operand indexes, in step-output order


def step_model(
    model: Model,
    source: int,
    operations: Sequence[int],
    needed_outside: Iterable[int],
) -> StepIo:
    """The model of a step made of ``operations`` (indexes into subgraph ``source``)."""
    sub = subgraph_of(model, source)
    ops = [sub.operations[k] for k in operations]
    produced: set[int] = set()
    for op in ops:
        produced.update(op.outputs)
    needed = set(needed_outside) | set(sub.outputIndexes)

    order: list[int] = []  # source operand indexes, first use order
    seen: set[int] = set()
    inputs: list[int] = []
    for op in ops:
        for i in (*op.inputs, *op.outputs):
            if i not in seen:
                seen.add(i)
                order.append(i)
                if i not in produced and sub.operands[i].lifetime not in _NOT_DATA:
                    inputs.append(i)
    outputs = [i for i in order if i in produced and i in needed]
    if not outputs:  # operations whose results nobody reads: keep them observable
        outputs = [i for i in order if i in produced]
    remap = {old: new for new, old in enumerate(order)}
    consumers = dict.fromkeys(order, 0)
    for op in ops:
        for i in op.inputs:
            consumers[i] += 1
    in_set, out_set = set(inputs), set(outputs)

    referenced = _reachable(model, [sub.operands[i] for i in order])
    sub_remap = {old: new for new, old in enumerate(referenced)}
    operands = []
    for i in order:
        operand = sub.operands[i]
        if i in in_set:
            lifetime = L.SUBGRAPH_INPUT
        elif i in out_set:
            lifetime = L.SUBGRAPH_OUTPUT
        elif operand.lifetime in _NOT_DATA:
            lifetime = operand.lifetime
        else:
            lifetime = L.TEMPORARY_VARIABLE
        location = (
            operand.location
            if lifetime in _CONSTANT or lifetime == L.SUBGRAPH
            else (DataLocation())
        )
        operand = replace(
            operand, lifetime=lifetime, location=location, numberOfConsumers=consumers[i]
        )
        operands.append(_renumber(operand, sub_remap))
    main = Subgraph(
        operands=tuple(operands),
        operations=tuple(
            replace(op, inputs=tuple(remap[i] for i in op.inputs),
                    outputs=tuple(remap[i] for i in op.outputs))
            for op in ops
        ),
        inputIndexes=tuple(remap[i] for i in inputs),
        outputIndexes=tuple(remap[i] for i in outputs),
    )  # fmt: skip
    refs = tuple(
        replace(
            subgraph_of(model, s),
            operands=tuple(_renumber(o, sub_remap) for o in subgraph_of(model, s).operands),
        )
        for s in referenced
    )
    step = replace(model, main=main, referenced=refs)
    return StepIo(step, tuple(inputs), tuple(outputs))


def _reachable(model: Model, operands: Iterable[Operand]) -> list[int]:
    """Referenced subgraph numbers (1-based) reachable from these operands, in order found."""
    found: list[int] = []
    stack = [referenced_index(o) for o in operands if o.lifetime == L.SUBGRAPH]
    while stack:
        s = stack.pop(0)
        if s in found:
            continue
        found.append(s)
        stack.extend(
            referenced_index(o) for o in subgraph_of(model, s).operands if o.lifetime == L.SUBGRAPH
        )
    return found


def _renumber(operand: Operand, sub_remap: dict[int, int]) -> Operand:
    if operand.lifetime != L.SUBGRAPH:
        return operand
    new = sub_remap[referenced_index(operand)]
    return replace(operand, location=replace(operand.location, offset=new))


# --------------------------------------------------------------------------
# Constant values
# --------------------------------------------------------------------------


def constant_value(model: Model, operand: Operand) -> np.ndarray:
    """The value of a CONSTANT_COPY / CONSTANT_REFERENCE operand as a numpy array."""
    loc = operand.location
    if operand.lifetime == L.CONSTANT_COPY:
        raw = bytes(model.operandValues[loc.offset : loc.offset + loc.length])
    else:
        pool = model.pools[loc.poolIndex]
        if isinstance(pool, InlineMemory):
            raw = bytes(pool.data[loc.offset : loc.offset + loc.length])
        elif isinstance(pool, SharedMemory):
            segment = shared_memory.SharedMemory(name=pool.name)
            try:
                raw = bytes(segment.buf[loc.offset : loc.offset + loc.length])
            finally:
                segment.close()
        else:
            raise ValueError(f"a constant in a {type(pool).__name__} pool cannot be read")
    info = OPERAND_TYPE_INFO[operand.type]
    if operand.type in (OperandType.BOOL, OperandType.TENSOR_BOOL8):
        array = np.frombuffer(raw, dtype=np.uint8) != 0
    else:
        array = np.frombuffer(raw, dtype=info.dtype).copy()
    return array.reshape(() if info.is_scalar else operand.dimensions)

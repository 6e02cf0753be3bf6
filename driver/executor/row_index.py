"""An index picked from one row, and the table row it selects: a decoder's token.

A greedy decoder's body takes ``tok = ARGMAX(logits)`` over a ``[1, vocabulary]``
row and looks its embedding up with ``GATHER(E, 0, tok)``: as tensors that is
``argmax(axis).astype(int32)`` making an int32 [1] array (0.43 µs), and a
GATHER kernel reading the index back out of it (0.26 µs). In a counter loop
(``specialize.find_counter``) these steps are recognised at preparation:

- ``RowArgmax``: ARGMAX (or ARGMIN) whose input, of rank 1 or 2, has fully known
  dimensions that are all 1 but the reduced axis (so the kernel's result is an
  int32 [1], as the output is declared): the index
  is a Python int, ``int(x.argmax())`` (the flat index of a single row is the
  index along its axis; ties and NaN pick as the kernel's own ndarray method
  does), made an array only when other steps read it as one. Unless the input
  is an earlier step's result whose shape was proven at preparation, the
  generated code checks that the run-time shape is the declared one;
  otherwise the step's kernel runs and its result is read into the int.
- ``RowGather``: GATHER along the first axis of a constant table (at most
  ``slicing.ROWS_BYTES``) at an index held as a Python int (such an index, or
  one derived from the counter): the table's rows are made read-only arrays
  once, when the loop is generated, and the result is one of them (a copy
  when it is a body output). An index out of range calls the GATHER kernel,
  so the failure is the kernel's own.

The index values join the counter's Python ints (``specialize.scalar_steps``),
so ADD/SUB/MUL, comparisons and the one-hot write (``one_hot``) read them as
ints too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from nnhal.driver.executor.plan import Step, StepKind, SubgraphPlan
from nnhal.driver.ops.slicing import ROWS_BYTES

from nnhal.types import OperandLifeTime, OperandType

_CONSTANTS = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)
_METHODS = {"ARGMAX": "argmax", "ARGMIN": "argmin"}


@dataclass(frozen=True)
class RowArgmax:
    """``output = x.argmax()`` as a Python int (see the module docstring)."""

    step: Step
    output: int
    method: str  # "argmax" or "argmin"
    dims: tuple[int, ...]  # the input's declared dimensions
    #: the input is an earlier step's result proven to have ``dims``: no run-time test
    proven: bool = False


@dataclass(frozen=True)
class RowGather:
    """``result = rows[index]`` of a constant table (see the module docstring)."""

    step: Step
    index: int  # operand index of the int-held index
    count: int  # rows of the table


def _plain(step: Step) -> bool:
    return step.kind is StepKind.OPERATION and step.late is None and len(step.outputs) == 1


def _int_constant(plan: SubgraphPlan, index: int) -> int | None:
    value = plan.constants.get(index)
    if value is None or value.size != 1:
        return None
    return int(value.reshape(-1)[0])


def argmax_step(plan: SubgraphPlan, step: Step) -> RowArgmax | None:
    """The step as a ``RowArgmax``, or None."""
    method = _METHODS.get(step.name)
    if method is None or not _plain(step) or len(step.inputs) != 2:
        return None
    operands = plan.subgraph.operands
    out = operands[step.outputs[0]]
    if out.type != OperandType.TENSOR_INT32 or tuple(out.dimensions) != (1,):
        return None
    x = operands[step.inputs[0]]
    dims = tuple(x.dimensions)
    axis = _int_constant(plan, step.inputs[1])
    if not dims or not all(dims) or axis is None or not -len(dims) <= axis < len(dims):
        return None
    if int(math.prod(dims)) != dims[axis]:  # one row: every other axis is 1
        return None
    if len(dims) > 2:  # the kernel's result would be [1, 1, ...]: not the declared [1]
        return None
    return RowArgmax(step, step.outputs[0], method, dims, _proven(plan, step.inputs[0]))


def _proven(plan: SubgraphPlan, index: int) -> bool:
    """Whether operand ``index`` is a result whose shape ``shapes`` proved (its declared
    dimensions, fully known here, are then its run-time shape)."""
    for step in plan.steps:
        if index in step.outputs:
            return step.kind is StepKind.OPERATION and step.outputs.index(index) in step.proven
    return False


def gather_step(plan: SubgraphPlan, step: Step, ints: dict) -> RowGather | None:
    """The step as a ``RowGather`` when its index is an int of ``ints``, or None."""
    if step.name != "GATHER" or not _plain(step) or len(step.inputs) != 3:
        return None
    table, axis, index = step.inputs
    if ints.get(index) is not False or plan.subgraph.operands[table].lifetime not in _CONSTANTS:
        return None
    values = plan.constants.get(table)
    if values is None or values.ndim < 1 or not len(values) or values.nbytes > ROWS_BYTES:
        return None
    if _int_constant(plan, axis) not in (0, -values.ndim):
        return None
    if tuple(plan.subgraph.operands[index].dimensions) not in ((1,), ()) or 0 not in step.proven:
        return None  # a proven result: the row's shape is the declared one
    return RowGather(step, index, len(values))


def rows(plan: SubgraphPlan, step: Step) -> list[np.ndarray]:
    """The rows ``step`` (a ``RowGather``'s GATHER) picks from: ``table[k:k + 1]`` each,
    read-only arrays of their own."""
    table = plan.constants[step.inputs[0]]
    made = [np.array(table[k : k + 1]) for k in range(len(table))]
    for row in made:
        row.flags.writeable = False
    return made


def emit_argmax(gen, source, plan: SubgraphPlan, found: RowArgmax, ints, arrays, namer):
    """An emitter of ``found``: the Python int (and its array when ``arrays`` has it)."""
    step = found.step

    def emit(at: int) -> None:
        x, out, k = namer(step.inputs[0]), namer(found.output), ints[found.output]
        if found.proven:
            source.line(at, f"{k} = int({x}.{found.method}())")  # not .item(): 0.42 µs
            if found.output in arrays:
                source.line(at, f"{out} = _i32({k})")
            return
        source.line(at, f"if {x}.shape == {found.dims!r}:")
        source.line(at + 1, f"{k} = int({x}.{found.method}())")
        if found.output in arrays:
            source.line(at + 1, f"{out} = _i32({k})")
        source.line(at, "else:  # shapes other than the declared ones: the step itself")
        gen.emit_operation(source, plan, step, namer, at + 1)
        source.line(at + 1, f"{k} = {out}.item()")

    return emit


def emit_gather(gen, source, plan: SubgraphPlan, found: RowGather, ints, namer):
    """An emitter of ``found``: a bounds test and the row (the kernel out of range)."""
    step = found.step
    body_output = step.outputs[0] in plan.subgraph.outputIndexes

    def emit(at: int) -> None:
        table, _axis, index = step.inputs
        out, i = namer(step.outputs[0]), ints[index]
        table_rows = source.bind(f"r{plan.index}_{step.index}", gen.bind("r", plan, step))
        row = f"{table_rows}[{i}]" + (".copy()" if body_output else "")
        kernel = source.bind(f"k{plan.index}_{step.index}", gen.bind("k", plan, step))
        source.line(at, f"if 0 <= {i} < {found.count}: {out} = {row}")
        source.line(
            at, f"else: {out} = {kernel}({namer(table)}, _i32({i}))  # raises: out of range"
        )

    return emit

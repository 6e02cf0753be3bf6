"""Index vectors made from a counter loop's Python int, and the SLICE they feed.

A loop that reads row ``t`` of a sequence builds its SLICE ``begin`` from the
counter, e.g. ``begin = MUL(t, [1, 0])``: as tensors that is an int32 [1]
array made from the counter, a broadcasting MUL and a SLICE kernel that turns
the [2] result back into Python ints (about 1.5 µs per iteration together).
In a counter loop (``specialize.find_counter``) these steps are recognised at
preparation and emitted as Python:

- ``VectorStep``: ADD / SUB / MUL (activation NONE) of a counter-derived
  int32 [1] value and an int32 constant vector of ``2..MAX_LENGTH`` elements:
  one Python int per element, int32 wrap-around kept as numpy's int32
  arithmetic has it (an element multiplied by 0 or 1, or added 0, is the
  value itself: no line at all).
- ``SliceStep``: SLICE whose ``begin`` is such a vector (or the counter-derived
  [1] value, for a rank-1 input), with a constant, non-negative ``size``, an
  input of fully known dimensions and a result shape proven at preparation:
  one bounds test on the Python ints and ``x[b:b + n, ...].copy()`` (a fresh
  array, as the kernel returns). A begin out of range calls the SLICE kernel
  itself with the begin as an array, so the failure is the kernel's own.

The values are made arrays as well where other steps or the body outputs read
them (``specialize.scalar_steps`` decides which).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from nnhal.driver.executor.plan import Step, SubgraphPlan

from nnhal.types import OperandLifeTime, OperandType

#: longest constant vector combined with the counter (SLICE begins: one per axis, rank <= 4
#: in practice; longer vectors stay numpy's, where one call beats a Python line per element)
MAX_LENGTH = 6

_CONSTANTS = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)
_ARITH = {"ADD": "+", "SUB": "-", "MUL": "*"}
#: ints' marker of a vector value (False: an int, True: a bool)
VECTOR = "vector"


@dataclass(frozen=True)
class VectorStep:
    """``output[k] = scalar OP constants[k]`` (or ``constants[k] OP scalar``) on Python ints."""

    output: int
    operator: str
    scalar: int  # operand index of the counter-derived int
    constants: tuple[int, ...]
    scalar_first: bool


@dataclass(frozen=True)
class SliceStep:
    """SLICE of ``step`` with a counter-derived begin (see the module docstring)."""

    step: Step
    begin: int  # operand index of the begin (a vector, or an int for rank 1)
    sizes: tuple[int, ...]
    dims: tuple[int, ...]


def _constant_vector(plan: SubgraphPlan, index: int) -> tuple[int, ...] | None:
    operand = plan.subgraph.operands[index]
    if operand.lifetime not in _CONSTANTS or operand.type != OperandType.TENSOR_INT32:
        return None
    value = plan.constants.get(index)
    if value is None or value.ndim != 1 or value.dtype != np.int32:
        return None
    return tuple(int(v) for v in value)


def vector_step(plan: SubgraphPlan, step: Step, ints: dict) -> VectorStep | None:
    """The step as a ``VectorStep``, or None."""
    operator = _ARITH.get(step.name)
    if operator is None or len(step.inputs) != 3 or len(step.outputs) != 1:
        return None
    activation = plan.constants.get(step.inputs[2])
    if activation is None or int(activation.reshape(-1)[0]) != 0:
        return None
    a, b = step.inputs[:2]
    if ints.get(a) is False:
        scalar, other, first = a, b, True
    elif ints.get(b) is False:
        scalar, other, first = b, a, False
    else:
        return None
    constants = _constant_vector(plan, other)
    if constants is None or not 2 <= len(constants) <= MAX_LENGTH:
        return None
    out = plan.subgraph.operands[step.outputs[0]]
    if out.type != OperandType.TENSOR_INT32 or tuple(out.dimensions) not in (
        (len(constants),),
        (0,),
    ):
        return None
    return VectorStep(step.outputs[0], operator, scalar, constants, first)


def slice_step(plan: SubgraphPlan, step: Step, ints: dict, lengths: dict) -> SliceStep | None:
    """The step as a ``SliceStep``, or None; ``lengths``: vector operand -> element count."""
    if step.name != "SLICE" or step.late is not None or len(step.inputs) != 3:
        return None
    if 0 not in step.proven or tuple(step.kernel_inputs) != tuple(step.inputs):
        return None  # a result checked at run time keeps the kernel's path
    x, begin, size = step.inputs
    if x in ints:
        return None  # a value held as a Python int: the slice needs the array
    dims = tuple(plan.subgraph.operands[x].dimensions)
    if not dims or not all(dims):
        return None
    marker = ints.get(begin)
    if not (marker == VECTOR and lengths.get(begin) == len(dims)) and not (
        marker is False and len(dims) == 1
    ):
        return None
    sizes = _constant_vector(plan, size)
    if sizes is None or len(sizes) != len(dims) or any(n < 0 for n in sizes):
        return None
    return SliceStep(step, begin, sizes, dims)


def emit_vector(source, vector: VectorStep, ints: dict, elements: dict, arrays, namer):
    """An emitter of ``vector``: its elements' expressions go into ``elements``."""

    def emit(at: int) -> None:
        scalar = ints[vector.scalar]
        exprs = []
        for k, c in enumerate(vector.constants):
            if _identity(vector, c):
                exprs.append(scalar)
            elif vector.operator == "*" and c == 0:
                exprs.append("0")
            else:
                name = f"{ints[vector.output]}_{k}"
                left, right = (scalar, str(c)) if vector.scalar_first else (str(c), scalar)
                source.line(at, f"{name} = {left} {vector.operator} {right}")
                source.line(
                    at, f"if not -2147483649 < {name} < 2147483648: {name} = _wrap32({name})"
                )
                exprs.append(name)
        elements[vector.output] = exprs
        if vector.output in arrays:
            source.line(at, f"{namer(vector.output)} = _i32v({', '.join(exprs)})")

    return emit


def _identity(vector: VectorStep, c: int) -> bool:
    """Whether ``scalar OP c`` (in the vector's order) is the scalar itself."""
    if vector.operator == "*":
        return c == 1
    return c == 0 and (vector.operator == "+" or vector.scalar_first)


def emit_slice(gen, source, plan: SubgraphPlan, found: SliceStep, ints, elements, namer):
    """An emitter of ``found``: a bounds test and a copied basic slice."""
    step = found.step

    def emit(at: int) -> None:
        begins = elements.get(found.begin) or [ints[found.begin]]
        tests, parts = [], []
        for b, n, d in zip(begins, found.sizes, found.dims):
            highest = d - n
            if b.lstrip("-").isdigit():
                if not 0 <= int(b) <= highest:
                    tests.append("False")
            else:
                tests.append(f"0 <= {b} <= {highest}")
            parts.append(":" if b == "0" and n == d else f"{b}:{b} + {n}")
        while parts and parts[-1] == ":":
            parts.pop()  # trailing whole axes
        x, out = namer(step.inputs[0]), namer(step.outputs[0])
        taken = f"{out} = {x}[{', '.join(parts) or '...'}].copy()"
        if not tests:
            source.line(at, taken)
            return
        kernel = source.bind(f"k{plan.index}_{step.index}", gen.bind("k", plan, step))
        args = f"{x}, _i32v({', '.join(begins)}), {namer(step.inputs[2])}"
        source.line(at, f"if {' and '.join(tests)}: {taken}")
        source.line(at, f"else: {out} = {kernel}({args})  # raises: begin out of range")

    return emit


def _i32v(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


#: names the generated code uses (module globals of each generated function)
RUNTIME_HELPERS: dict[str, object] = {"_i32v": _i32v}

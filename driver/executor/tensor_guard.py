"""The tensor-size limit inside the executor (``Limits.max_tensor_bytes``).

A kernel must never be asked to produce a tensor above the limit: TILE,
PAD, RESIZE or a broadcasting ADD given huge parameters or shapes at run time
would otherwise allocate until the process is killed. Three places check:

- ``check_proven``: at compile time, every result whose shape
  ``shapes.prove_shapes`` proved (prepare fails with
  RESOURCE_EXHAUSTED_PERSISTENT: the model can never run here);
- ``TensorGuard``: at run time, before a step whose result shape was not
  proven, the operation's own shape rule (the registry's ``prepare``) is
  asked with the values and shapes the step is about to receive; a result
  above the limit fails the execution with RESOURCE_EXHAUSTED_PERSISTENT
  before the kernel runs. A rule that cannot decide (or raises) leaves the
  step to its kernel, whose own checks report bad values. Shapes and
  parameter values found safe are remembered per step;
- ``too_big_result`` after such a step: a result above the limit
  (an operation without a shape rule, e.g. from an op package) stops there.

A ``MemoryError`` anywhere is RESOURCE_EXHAUSTED_TRANSIENT (``codegen._wrap``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from nnhal.driver.executor.plan import Step, StepKind, SubgraphPlan
from nnhal.driver.limits import tensor_bytes, tensor_reason
from nnhal.driver.ops.registry import OpContext, OperandInfo

from nnhal.errors import ResourceExhausted
from nnhal.types import OPERAND_TYPE_INFO

#: run-time values handed to a shape rule only up to this many elements
#: (parameters are small; a data tensor's shape is all a rule needs)
_VALUE_ELEMENTS = 4096


def is_tensor(type_code: int) -> bool:
    info = OPERAND_TYPE_INFO.get(type_code)
    return info is not None and not info.is_scalar and info.dtype is not None


def unproven_tensors(step: Step, operands: Sequence[Any], limit: int | None) -> list[int]:
    """Output positions whose size the limit checks at run time (none without a limit):
    the tensor results ``shapes.prove_shapes`` did not prove."""
    if limit is None:
        return []
    return [
        p
        for p, i in enumerate(step.outputs)
        if p not in step.proven and is_tensor(operands[i].type)
    ]


def needs_guard(step: Step, unproven: Sequence[int]) -> bool:
    """Whether a ``TensorGuard`` runs before ``step``: it has unproven tensor results
    (``unproven_tensors``) and a shape rule to ask."""
    return bool(unproven) and step.context is not None and step.context.op.prepare is not None


def _exhausted(location: str, position: int, operand: int, type_code: int, dims, limit: int):
    size = tensor_bytes(type_code, dims)
    what = f"{location}: output {position} (operand {operand})"
    return ResourceExhausted(
        tensor_reason(what, type_code, tuple(dims), size, limit), transient=False
    )


def check_proven(
    plans: dict[int, SubgraphPlan], static: dict[int, dict[int, tuple[int, ...]]], limit: int
) -> None:
    """Results proven at compile time (``static``: subgraph -> operand -> shape)."""
    for number, plan in plans.items():
        shapes = static.get(number, {})
        operands = plan.subgraph.operands
        for step in plan.steps:
            if step.kind is not StepKind.OPERATION:
                continue  # IF/WHILE results come from operations checked themselves
            for position, index in enumerate(step.outputs):
                shape = shapes.get(index)
                if shape is None:
                    continue
                # a known shape has no unknown axis: tensor_bytes without its cases
                type_code = operands[index].type
                if math.prod(shape) * OPERAND_TYPE_INFO[type_code].byte_size > limit:
                    raise _exhausted(step.location, position, index, type_code, shape, limit)


def too_big_result(location: str, position: int, operand: int, value: Any, limit: int):
    """The error for a computed result above the limit (raised by generated code)."""
    shape = tuple(np.shape(value))
    return ResourceExhausted(
        tensor_reason(
            f"{location}: output {position} (operand {operand})",
            _type_of(value),
            shape,
            int(getattr(value, "nbytes", 0)),
            limit,
        ),
        transient=False,
    )


def _type_of(value: Any) -> int:
    dtype = getattr(value, "dtype", None)
    for code, info in OPERAND_TYPE_INFO.items():
        if info.dtype is not None and info.dtype == dtype and not info.is_scalar:
            return code
    return -1


#: how a guard treats each input: left as compiled, its shape only, shape and value
_KEEP, _SHAPE, _VALUE = range(3)
#: input shapes/values a guard remembers as safe (then it costs one set lookup)
_SAFE_CACHE = 64


def _input_kind(info: OperandInfo, type_code: int) -> int:
    """Scalars and integer tensors may set a result's shape (multiples, paddings,
    sizes, scales): their values count; of a data tensor only its shape does."""
    if info.omitted:
        return _KEEP
    type_info = OPERAND_TYPE_INFO.get(type_code)
    if type_info is None or type_info.dtype is None:
        return _KEEP
    if type_info.is_scalar or type_info.dtype.kind in "iu":
        return _VALUE
    return _SHAPE


class TensorGuard:
    """Before one unproven step: its results' sizes from its shape rule, at run time.

    Inputs whose shapes (and parameter values) were found safe before are
    remembered, so a step that runs again with the same shapes costs a lookup.
    """

    def __init__(self, step: Step, operands: Sequence[Any], limit: int) -> None:
        ctx = step.context
        assert ctx is not None and ctx.op.prepare is not None
        self.ctx = ctx
        self.prepare = ctx.op.prepare
        self.limit = limit
        self.location = step.location
        self.outputs = step.outputs
        self.types = [operands[i].type for i in step.outputs]
        self.kinds = [
            _input_kind(info, operands[i].type) for info, i in zip(ctx.inputs, step.inputs)
        ]
        self.scalars = [not is_tensor(operands[i].type) for i in step.inputs]
        self._safe: set[tuple] = set()

    def __call__(self, *values: Any) -> None:
        """Raise RESOURCE_EXHAUSTED_PERSISTENT when a result would exceed the limit."""
        try:
            seen = self._key(values)
            if seen in self._safe:
                return
            shapes = self._shapes(values)
        except Exception:  # noqa: BLE001 - undecided: the kernel's own checks report
            return
        for position, shape in enumerate(shapes or ()):
            if shape is None or position >= len(self.types):
                continue
            if tensor_bytes(self.types[position], shape) > self.limit:
                raise _exhausted(
                    self.location,
                    position,
                    self.outputs[position],
                    self.types[position],
                    shape,
                    self.limit,
                )
        if len(self._safe) >= _SAFE_CACHE:
            self._safe.clear()
        self._safe.add(seen)

    def _key(self, values: Sequence[Any]) -> tuple:
        """What the result shapes depend on: shapes, and the parameters' values."""
        key = []
        for value, kind in zip(values, self.kinds):
            if value is None or kind == _KEEP:
                key.append(None)
            elif kind == _VALUE:
                array = np.asarray(value)
                small = array.size <= _VALUE_ELEMENTS
                key.append((array.shape, array.tobytes() if small else None))
            else:
                key.append(np.shape(value))
        return tuple(key)

    def _shapes(self, values: Sequence[Any]) -> Any:
        """The step's shape rule asked with the run-time shapes and parameter values."""
        ctx = self.ctx
        inputs = []
        for info, value, kind, scalar in zip(ctx.inputs, values, self.kinds, self.scalars):
            if value is None or kind == _KEEP:
                inputs.append(info)
                continue
            array = np.asarray(value)
            keep = array if kind == _VALUE and array.size <= _VALUE_ELEMENTS else None
            inputs.append(
                OperandInfo(
                    type=info.type,
                    dimensions=() if scalar else tuple(array.shape),
                    scale=info.scale,
                    zeroPoint=info.zeroPoint,
                    extraParams=info.extraParams,
                    value=keep,
                )
            )
        return self.prepare(OpContext(ctx.op, inputs, ctx.outputs, ctx.relaxed, ctx.where))


__all__ = [
    "TensorGuard",
    "check_proven",
    "is_tensor",
    "needs_guard",
    "too_big_result",
    "unproven_tensors",
]

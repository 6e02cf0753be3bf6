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
  step to its kernel, whose own checks report bad values;
- ``too_big_result`` after such a step: a result above the limit
  (an operation without a shape rule, e.g. from an op package) stops there.

A ``MemoryError`` anywhere is RESOURCE_EXHAUSTED_TRANSIENT (``codegen._wrap``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from driver.executor.plan import Step, StepKind, SubgraphPlan
from driver.limits import tensor_bytes, tensor_reason
from driver.ops.registry import OpContext
from nnhal.errors import ResourceExhausted
from nnhal.types import OPERAND_TYPE_INFO

#: run-time values handed to a shape rule only up to this many elements
#: (parameters are small; a data tensor's shape is all a rule needs)
_VALUE_ELEMENTS = 4096


def is_tensor(type_code: int) -> bool:
    info = OPERAND_TYPE_INFO.get(type_code)
    return info is not None and not info.is_scalar and info.dtype is not None


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
                type_code = operands[index].type
                if tensor_bytes(type_code, shape) > limit:
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


class TensorGuard:
    """Before one unproven step: its results' sizes from its shape rule, at run time."""

    def __init__(self, step: Step, operands: Sequence[Any], limit: int) -> None:
        ctx = step.context
        assert ctx is not None and ctx.op.prepare is not None
        self.ctx = ctx
        self.prepare = ctx.op.prepare
        self.limit = limit
        self.location = step.location
        self.outputs = step.outputs
        self.types = [operands[i].type for i in step.outputs]
        self.tensors = [is_tensor(operands[i].type) for i in step.inputs]

    def __call__(self, *values: Any) -> None:
        """Raise RESOURCE_EXHAUSTED_PERSISTENT when a result would exceed the limit."""
        ctx = self.ctx
        try:
            inputs = []
            for info, value, tensor in zip(ctx.inputs, values, self.tensors):
                if value is None or info.omitted:
                    inputs.append(info)
                    continue
                array = np.asarray(value)
                keep = array if array.size <= _VALUE_ELEMENTS else None
                dims = tuple(array.shape) if tensor else info.dimensions
                inputs.append(replace(info, dimensions=dims, value=keep))
            shapes = self.prepare(OpContext(ctx.op, inputs, ctx.outputs, ctx.relaxed, ctx.where))
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


__all__ = ["TensorGuard", "check_proven", "is_tensor", "too_big_result"]

"""FILL and RANK (HAL 1.3).

FILL builds a tensor of the shape given by a 1-D TENSOR_INT32 input, every
element the value scalar (FLOAT32, FLOAT16 or INT32, matching the output
TENSOR_FLOAT32, TENSOR_FLOAT16 or TENSOR_INT32). The value may be a model
input or another operation's result: the executor then binds the kernel
when the value is known (``ctx.scalar`` raises ValueNotConstant at compile
time). A 0 in the shape gives a zero-sized output; negative sizes fail.

RANK gives the number of dimensions of its input (any of ten tensor types)
as an INT32 scalar: the kernel returns a fresh 0-d int32 array. As in the
reference (no zero-sized input support), an empty input fails.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops.common import INT32_SCALAR, TENSOR_INT32, check_rank, dtype_of, int_vector
from nnhal.driver.ops.common import runtime_failure as _runtime_failure
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.errors import HalError
from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion

# ---------------------------------------------------------------------------
# FILL
# ---------------------------------------------------------------------------

#: value scalar type -> output tensor type
FILL_TYPES = {
    _T.FLOAT32: _T.TENSOR_FLOAT32,
    _T.FLOAT16: _T.TENSOR_FLOAT16,
    _T.INT32: _T.TENSOR_INT32,
}


def _fill_output_type(value_type: int) -> frozenset:
    return frozenset({FILL_TYPES[value_type]})


def _check_dims(dims: list[int], fail: Callable[[str], HalError]) -> tuple[int, ...]:
    for axis, size in enumerate(dims):
        if size < 0:
            raise fail(f"input 0 (shape) has {size} at position {axis}; sizes must be >= 0")
    return tuple(dims)


def _fill_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, exact=1)
    dims = int_vector(ctx, 0)
    if dims is not None:
        _check_dims(dims, ctx.fail)


def _fill_prepare(ctx: OpContext) -> list[Shape]:
    dims = int_vector(ctx, 0)
    if dims is not None:
        return [_check_dims(dims, ctx.fail)]
    vector = ctx.inputs[0].dimensions
    return [(0,) * vector[0] if vector and vector[0] else None]


def _fill_execute(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    dtype = dtype_of(ctx.outputs[0].type)
    value = dtype.type(ctx.scalar(1))
    dims = int_vector(ctx, 0)
    if dims is not None:
        shape = _check_dims(dims, ctx.fail)
        return lambda _s: np.full(shape, value, dtype)

    def fail(message: str) -> HalError:
        return _runtime_failure(ctx, message)

    def fill(s: np.ndarray) -> np.ndarray:
        return np.full(_check_dims(s.tolist(), fail), value, dtype)

    return fill


FILL = register(
    OperationDef(
        OperationType.FILL,
        inputs=(Arg("shape", TENSOR_INT32), Arg("value")),
        outputs=(Arg("output", _fill_output_type),),
        types={t: _V.V1_3 for t in FILL_TYPES},
        execute=_fill_execute,
        prepare=_fill_prepare,
        validate=_fill_validate,
        primary=1,
    )
)

# ---------------------------------------------------------------------------
# RANK
# ---------------------------------------------------------------------------

RANK_TYPES = (
    _T.TENSOR_FLOAT16,
    _T.TENSOR_FLOAT32,
    _T.TENSOR_INT32,
    _T.TENSOR_QUANT8_ASYMM,
    _T.TENSOR_QUANT16_SYMM,
    _T.TENSOR_BOOL8,
    _T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
    _T.TENSOR_QUANT16_ASYMM,
    _T.TENSOR_QUANT8_SYMM,
    _T.TENSOR_QUANT8_ASYMM_SIGNED,
)


def _rank_prepare(ctx: OpContext) -> list[Shape]:
    return [()]  # a scalar


def _rank_execute(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    def rank(x: np.ndarray) -> np.ndarray:
        return np.array(x.ndim, np.int32)

    return rank


RANK = register(
    OperationDef(
        OperationType.RANK,
        inputs=(Arg("input"),),
        outputs=(Arg("output", INT32_SCALAR),),
        types={t: _V.V1_3 for t in RANK_TYPES},
        execute=_rank_execute,
        zero_sized_inputs=False,
        prepare=_rank_prepare,
    )
)

"""LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL.

Broadcasting comparisons giving TENSOR_BOOL8. Quantized inputs are compared
by real value, computed in float32 as ``(q - zeroPoint) * scale`` exactly as
the reference does, so the two inputs may have different scales; the kernel
is a 256 x 256 boolean table built at bind time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant
from nnhal.driver.ops._operand_rules import (
    BOOL8,
    QUANT8,
    broadcast_shape,
    one_element_as_scalar,
)
from nnhal.driver.ops.quant import QuantParams, quant_params
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion

TYPES = {
    _T.TENSOR_BOOL8: _V.V1_2,
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_FLOAT32: _V.V1_2,
    _T.TENSOR_INT32: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}


@functools.lru_cache(maxsize=256)
def _table(ufunc: np.ufunc, a: QuantParams, b: QuantParams) -> np.ndarray:
    real_a = quant.real_values(a.dtype, a.scale, a.zeroPoint)
    real_b = quant.real_values(b.dtype, b.scale, b.zeroPoint)
    return quant.frozen(ufunc(real_a[:, None], real_b[None, :]))


def compare(op_type: OperationType, ufunc: np.ufunc) -> OperationDef:
    """Register a broadcasting comparison implemented by ``ufunc``."""

    def prepare(ctx: OpContext) -> list[Shape]:
        return [broadcast_shape(ctx, ctx.inputs[0].dimensions, ctx.inputs[1].dimensions)]

    def execute(ctx: OpContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        if ctx.primary_type not in QUANT8:
            # numpy compares float16, int32 and bool natively
            return one_element_as_scalar(ctx, ufunc)
        table = _table(ufunc, quant_params(ctx.inputs[0]), quant_params(ctx.inputs[1]))

        def kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return table[x.view(np.uint8), y.view(np.uint8)]

        return kernel

    return register(
        OperationDef(
            op_type,
            inputs=(Arg("input0"), Arg("input1")),
            outputs=(Arg("output", BOOL8),),
            types=TYPES,
            execute=execute,
            prepare=prepare,
        )
    )


LESS = compare(OperationType.LESS, np.less)
LESS_EQUAL = compare(OperationType.LESS_EQUAL, np.less_equal)
GREATER = compare(OperationType.GREATER, np.greater)
GREATER_EQUAL = compare(OperationType.GREATER_EQUAL, np.greater_equal)
EQUAL = compare(OperationType.EQUAL, np.equal)
NOT_EQUAL = compare(OperationType.NOT_EQUAL, np.not_equal)

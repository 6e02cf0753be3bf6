"""ABS, EXP, LOG, SQRT, RSQRT, SIN, NEG, FLOOR: one tensor in, the same shape out.

The reference computes each element in float32 (``static_cast<float>``, the C
function, cast back), so float32 kernels are the numpy ufunc itself and
float16 kernels go through float32 where two roundings could differ from the
reference's one (RSQRT); a single float16 ufunc already computes in float32
and rounds once. ABS and NEG also take TENSOR_INT32 (wrapping like the C
int32 arithmetic). FLOOR is limited to rank 4, as the reference's validation
and prepare say; the others take any rank, zero-sized tensors included.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._act_util import same_shape_prepare, via_float32
from nnhal.driver.ops._operand_rules import check_rank
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
F16 = _T.TENSOR_FLOAT16

FLOAT_V1_2 = {_T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_FLOAT16: _V.V1_2}


def _rsqrt(x: np.ndarray) -> np.ndarray:
    out = np.sqrt(x)
    np.divide(1, out, out=out)
    return out


def _unary(
    op_type: OperationType,
    types: dict[int, HalVersion],
    fn: Callable[[np.ndarray], np.ndarray],
    *,
    f16: Callable[[np.ndarray], np.ndarray] | None = None,
    max_rank: int | None = None,
) -> OperationDef:
    """Register a one-input elementwise operation (output type = input type)."""
    f16_kernel = f16 or fn

    def validate(ctx: OpContext) -> None:
        if max_rank is not None:
            check_rank(ctx, 0, max_rank=max_rank)

    def execute(ctx: OpContext):
        return f16_kernel if ctx.primary_type == F16 else fn

    return register(
        OperationDef(
            op_type,
            inputs=(Arg("input"),),
            outputs=(Arg("output"),),
            types=types,
            execute=execute,
            prepare=same_shape_prepare,
            validate=validate,
        )
    )


ABS = _unary(OperationType.ABS, {**FLOAT_V1_2, _T.TENSOR_INT32: _V.V1_3}, np.abs)
EXP = _unary(OperationType.EXP, FLOAT_V1_2, np.exp)
LOG = _unary(OperationType.LOG, FLOAT_V1_2, np.log)
SQRT = _unary(OperationType.SQRT, FLOAT_V1_2, np.sqrt)
RSQRT = _unary(OperationType.RSQRT, FLOAT_V1_2, _rsqrt, f16=via_float32(_rsqrt))
SIN = _unary(OperationType.SIN, FLOAT_V1_2, np.sin)
NEG = _unary(OperationType.NEG, {**FLOAT_V1_2, _T.TENSOR_INT32: _V.V1_2}, np.negative)
FLOOR = _unary(
    OperationType.FLOOR,
    {_T.TENSOR_FLOAT32: _V.V1_0, _T.TENSOR_FLOAT16: _V.V1_2},
    np.floor,
    max_rank=4,
)

"""MAXIMUM, MINIMUM and POW: broadcasting binary operations without an activation.

Float and int32 kernels are the numpy ufuncs (float16 ufuncs compute in
float32 and round once, as the reference's ``static_cast<float>`` does).
Quantized MAXIMUM/MINIMUM first requantize each input to the output's scale
and zero point with the reference's ``requantize<T>`` (double arithmetic,
``std::round``), then compare; both steps fold into one 256 x 256 table over
the two inputs, bound once, so the kernel is a single broadcasting gather.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant
from nnhal.driver.ops._operand_rules import QUANT8, broadcast_shape
from nnhal.driver.ops.quant import QuantParams, quant_params
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion


def _requantized(a: QuantParams, out: QuantParams) -> np.ndarray:
    table = quant.requantize_table(a.dtype, a.scale, a.zeroPoint, out.scale, out.zeroPoint)
    return quant.table_domain(a.dtype).astype(a.dtype) if table is None else table


@functools.lru_cache(maxsize=256)
def _minmax_table(a: QuantParams, b: QuantParams, out: QuantParams, minimum: bool) -> np.ndarray:
    ra = _requantized(a, out)[:, None]
    rb = _requantized(b, out)[None, :]
    return quant.frozen(np.minimum(ra, rb) if minimum else np.maximum(ra, rb))


def _prepare(ctx: OpContext) -> list[Shape]:
    return [broadcast_shape(ctx, ctx.inputs[0].dimensions, ctx.inputs[1].dimensions)]


def _binary(
    op_type: OperationType,
    types: dict[int, HalVersion],
    numeric: Callable[[np.ndarray, np.ndarray], np.ndarray],
    names: tuple[str, str] = ("input0", "input1"),
    minimum: bool | None = None,
) -> OperationDef:
    def execute(ctx: OpContext):
        if ctx.primary_type in QUANT8:
            params = (quant_params(i) for i in (*ctx.inputs, ctx.outputs[0]))
            table = _minmax_table(*params, minimum)

            def gather(x: np.ndarray, y: np.ndarray) -> np.ndarray:
                return table[x.view(np.uint8), y.view(np.uint8)]

            return gather
        return numeric

    return register(
        OperationDef(
            op_type,
            inputs=(Arg(names[0]), Arg(names[1])),
            outputs=(Arg("output"),),
            types=types,
            execute=execute,
            prepare=_prepare,
        )
    )


_MINMAX_TYPES = {
    _T.TENSOR_FLOAT32: _V.V1_2,
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_INT32: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}

MAXIMUM = _binary(OperationType.MAXIMUM, _MINMAX_TYPES, np.maximum, minimum=False)
MINIMUM = _binary(OperationType.MINIMUM, _MINMAX_TYPES, np.minimum, minimum=True)
POW = _binary(
    OperationType.POW,
    {_T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_FLOAT16: _V.V1_2},
    np.power,
    names=("base", "exponent"),
)

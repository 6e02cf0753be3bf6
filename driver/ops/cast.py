"""CAST: convert a tensor's element type, keeping its shape.

Since HAL 1.2 any of TENSOR_FLOAT16, TENSOR_FLOAT32, TENSOR_INT32 and
TENSOR_QUANT8_ASYMM converts to any other of them; HAL 1.3 adds identity
casts of TENSOR_BOOL8, TENSOR_QUANT16_ASYMM, TENSOR_QUANT16_SYMM,
TENSOR_QUANT8_ASYMM_SIGNED and TENSOR_QUANT8_SYMM. Quantized data is cast
as raw integers (scale and zero point are ignored), floats convert to
integers by truncation toward zero, and conversions to TENSOR_QUANT8_ASYMM
clamp to [0, 255] first, as the reference's ``static_cast`` path does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._operand_rules import dtype_of
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion

#: the types that convert into one another
CONVERTIBLE = frozenset(
    {_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32, _T.TENSOR_INT32, _T.TENSOR_QUANT8_ASYMM}
)
#: the types only the identity cast supports (HAL 1.3)
IDENTITY_ONLY = frozenset(
    {
        _T.TENSOR_BOOL8,
        _T.TENSOR_QUANT16_ASYMM,
        _T.TENSOR_QUANT16_SYMM,
        _T.TENSOR_QUANT8_ASYMM_SIGNED,
        _T.TENSOR_QUANT8_SYMM,
    }
)


def _output_types(primary: int) -> frozenset:
    return CONVERTIBLE if primary in CONVERTIBLE else frozenset({primary})


def _merged_shape(ctx: OpContext) -> Shape:
    """Input and output shapes merged; CAST keeps the shape, so they must agree.

    The reference rejects a fully given output shape that differs from the
    input's; axes unknown (0) on either side are left to run time here.
    """
    a, out = ctx.inputs[0].dimensions, ctx.outputs[0].dimensions
    if a is None or out is None:
        return None if a is None and out is None else tuple(a if out is None else out)
    if len(a) != len(out) or any(x and y and x != y for x, y in zip(a, out)):
        raise ctx.fail(
            f"output 0 has dimensions {list(out)} but input 0 has {list(a)}; CAST keeps the shape"
        )
    return tuple(x or y for x, y in zip(a, out))


def _validate(ctx: OpContext) -> None:
    _merged_shape(ctx)


def _prepare(ctx: OpContext) -> list[Shape]:
    return [_merged_shape(ctx)]


def _execute(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    src = dtype_of(ctx.inputs[0].type)
    dst = dtype_of(ctx.outputs[0].type)
    if src == dst:
        return np.copy
    if ctx.outputs[0].type == _T.TENSOR_QUANT8_ASYMM and src != np.uint8:
        # static_cast<uint8_t> after clamping to [0, 255]; floats truncate.
        return lambda x: np.clip(x, 0, 255).astype(dst)
    # astype truncates floats toward zero (C's static_cast) and rounds to float16.
    return lambda x: x.astype(dst)


CAST = register(
    OperationDef(
        OperationType.CAST,
        inputs=(Arg("input"),),
        outputs=(Arg("output", _output_types),),
        types={**{t: _V.V1_2 for t in CONVERTIBLE}, **{t: _V.V1_3 for t in IDENTITY_ONLY}},
        execute=_execute,
        prepare=_prepare,
        validate=_validate,
    )
)

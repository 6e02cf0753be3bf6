"""ADD, SUB, MUL, DIV: broadcasting binary arithmetic with a fused activation.

Float and int32 kernels are the numpy ufunc itself (plus an in-place clamp
when an activation is fused); float16 needs nothing special because numpy
computes each float16 ufunc in float32 and rounds once, as the reference's
"convert to float32, compute, convert back" does. Quantized kernels are one
256 x 256 table built at bind time with the reference's fixed-point steps
(see quant.py) and the activation clamp folded in.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant
from nnhal.driver.ops._operand_rules import (
    INT32_SCALAR,
    QUANT8,
    bound_activation,
    broadcast_shape,
    check_activation,
    check_rank,
    fuse_float_activation,
    one_element_as_scalar,
)
from nnhal.driver.ops.quant import QuantParams, quant_params
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32

#: NNAPI limits ADD/SUB/MUL/DIV to rank 4 (the reference's prepare checks it).
MAX_RANK = 4


@functools.lru_cache(maxsize=512)
def _fixed_point_add(
    a: QuantParams, b: QuantParams, out: QuantParams, activation: int, subtract: bool
) -> np.ndarray:
    """The reference quantized ADD/SUB (TFLite ``Add`` with left_shift 20) as a table."""
    left_shift = 20
    s1, s2, so = f32(a.scale), f32(b.scale), f32(out.scale)
    with np.errstate(over="ignore"):  # inf for huge scales: quantize_multiplier refuses it
        twice_max = f32(2) * max(s1, s2)
    m1, e1 = quant.quantize_multiplier(float(s1) / float(twice_max))
    m2, e2 = quant.quantize_multiplier(float(s2) / float(twice_max))
    mo, eo = quant.quantize_multiplier(float(twice_max) / float(f32(1 << left_shift) * so))
    if subtract:  # SUB is ADD with the second multiplier negated, as in the reference
        m2 = -m2

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        sx = quant.multiply_by_quantized_multiplier((x - a.zeroPoint) << left_shift, m1, e1)
        sy = quant.multiply_by_quantized_multiplier((y - b.zeroPoint) << left_shift, m2, e2)
        return quant.multiply_by_quantized_multiplier(sx + sy, mo, eo) + out.zeroPoint

    raw = quant.binary_table(fn, a.dtype, b.dtype)
    lo, hi = quant.activation_range(activation, out.scale, out.zeroPoint, out.dtype)
    return quant.frozen(np.clip(raw, lo, hi).astype(out.dtype))


@functools.lru_cache(maxsize=512)
def _fixed_point_mul(
    a: QuantParams, b: QuantParams, out: QuantParams, activation: int
) -> np.ndarray:
    """The reference quantized MUL (TFLite ``Mul``) as a table."""
    # input_product_scale is a float32 product in the reference.
    product_scale = f32(a.scale) * f32(b.scale)
    m, e = quant.quantize_multiplier(float(product_scale) / float(f32(out.scale)))

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        prod = (x - a.zeroPoint) * (y - b.zeroPoint)
        return quant.multiply_by_quantized_multiplier(prod, m, e) + out.zeroPoint

    raw = quant.binary_table(fn, a.dtype, b.dtype)
    lo, hi = quant.activation_range(activation, out.scale, out.zeroPoint, out.dtype)
    return quant.frozen(np.clip(raw, lo, hi).astype(out.dtype))


def _table_kernel(table: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # Fancy indexing broadcasts the two index arrays like the operation does.
        return table[a.view(np.uint8), b.view(np.uint8)]

    return kernel


QuantTable = Callable[[QuantParams, QuantParams, QuantParams, int], np.ndarray]


def binary_broadcast(
    op_type: OperationType,
    types: dict[int, HalVersion],
    numeric: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    int_numeric: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    quant_table: QuantTable | None = None,
    extra_validate: Callable[[OpContext], None] | None = None,
) -> OperationDef:
    """Register a broadcasting binary op with a fused activation (input 2)."""
    int_fn = int_numeric or numeric

    def validate(ctx: OpContext) -> None:
        check_activation(ctx, 2, only_none=ctx.primary_type == _T.TENSOR_INT32)
        for i in (0, 1):
            check_rank(ctx, i, max_rank=MAX_RANK)
        if extra_validate is not None:
            extra_validate(ctx)

    def prepare(ctx: OpContext) -> list[Shape]:
        return [broadcast_shape(ctx, ctx.inputs[0].dimensions, ctx.inputs[1].dimensions)]

    def execute(ctx: OpContext):
        activation = bound_activation(ctx, 2)
        t = ctx.primary_type
        if t in QUANT8:
            a, b, out = (quant_params(i) for i in (ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]))
            return _table_kernel(quant_table(a, b, out, activation))
        if t == _T.TENSOR_INT32:
            if activation:
                raise ctx.fail("input 2 (activation) must be NONE (0) with TENSOR_INT32")
            return one_element_as_scalar(ctx, int_fn)
        return fuse_float_activation(one_element_as_scalar(ctx, numeric), activation)

    return register(
        OperationDef(
            op_type,
            inputs=(Arg("input0"), Arg("input1"), Arg("activation", INT32_SCALAR)),
            outputs=(Arg("output"),),
            types=types,
            execute=execute,
            prepare=prepare,
            validate=validate,
        )
    )


def _mul_scale_rule(ctx: OpContext) -> None:
    # The reference rejects QUANT8_ASYMM MUL unless outputScale > scale0 * scale1.
    if ctx.primary_type != _T.TENSOR_QUANT8_ASYMM:
        return
    a, b, out = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    product = f32(a.scale) * f32(b.scale)
    if not f32(out.scale) > product:
        raise ctx.fail(
            f"output 0 has scale {out.scale}; with TENSOR_QUANT8_ASYMM it must be greater than "
            f"input0 scale * input1 scale ({float(product)})"
        )


ADD = binary_broadcast(
    OperationType.ADD,
    {
        _T.TENSOR_FLOAT32: _V.V1_0,
        _T.TENSOR_QUANT8_ASYMM: _V.V1_0,
        _T.TENSOR_FLOAT16: _V.V1_2,
        _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        _T.TENSOR_INT32: _V.V1_3,
    },
    np.add,
    quant_table=lambda a, b, o, act: _fixed_point_add(a, b, o, act, subtract=False),
)

SUB = binary_broadcast(
    OperationType.SUB,
    {
        _T.TENSOR_FLOAT32: _V.V1_1,
        _T.TENSOR_FLOAT16: _V.V1_2,
        _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
        _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        _T.TENSOR_INT32: _V.V1_3,
    },
    np.subtract,
    quant_table=lambda a, b, o, act: _fixed_point_add(a, b, o, act, subtract=True),
)

MUL = binary_broadcast(
    OperationType.MUL,
    {
        _T.TENSOR_FLOAT32: _V.V1_0,
        _T.TENSOR_QUANT8_ASYMM: _V.V1_0,
        _T.TENSOR_FLOAT16: _V.V1_2,
        _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        _T.TENSOR_INT32: _V.V1_3,
    },
    np.multiply,
    quant_table=_fixed_point_mul,
    extra_validate=_mul_scale_rule,
)

DIV = binary_broadcast(
    OperationType.DIV,
    {
        _T.TENSOR_FLOAT32: _V.V1_1,
        _T.TENSOR_FLOAT16: _V.V1_2,
        _T.TENSOR_INT32: _V.V1_3,
    },
    np.divide,
    # The reference DIV on TENSOR_INT32 rounds toward negative infinity.
    int_numeric=np.floor_divide,
)

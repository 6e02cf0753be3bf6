"""L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, INSTANCE_NORMALIZATION.

- L2_NORMALIZATION divides each vector along ``axis`` (optional, default -1,
  negative counts from the end; rank at most 4) by its L2 norm (at least
  1e-6, so an all-zero vector stays zero). Quantized outputs have scale 1/128
  and zero point 128 (QUANT8_ASYMM) or 0 (QUANT8_ASYMM_SIGNED); the kernel
  follows the reference's fixed point: the inverse square root of the int32
  sum of squares as a Q31 multiplier and shift (``GetInvSqrtQuantizedMultiplierExp``,
  a Newton-Raphson iteration in gemmlowp fixed point, vectorized over all
  vectors at once), then a rescale of each centered value.
- LOCAL_RESPONSE_NORMALIZATION: ``x / (bias + alpha * sum(x^2 over
  [i - radius, i + radius] along axis)) ** beta``; the window sums come from
  one cumulative sum along the axis.
- INSTANCE_NORMALIZATION: per batch and channel, ``(x - mean) * gamma /
  sqrt(var + epsilon) + beta`` over the spatial axes (NHWC or NCHW).

Float kernels accumulate in float64 and round once to the output type.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant
from nnhal.driver.ops._conv_util import multiply_by_quantized_multiplier
from nnhal.driver.ops._operand_rules import (
    INT32_SCALAR,
    QUANT8,
    check_rank,
    dtype_of,
    runtime_failure,
)
from nnhal.driver.ops.layout import layout_is_nchw
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32
INT32_MAX = 2**31 - 1
L2_EPSILON = f32(1e-6)


def _axis(ctx: OpContext, index: int) -> int | None:
    """The axis input (default -1) made non-negative; None while the rank is unknown."""
    axis = int(ctx.scalar(index, -1))
    rank = ctx.inputs[0].rank
    if rank is None:
        return None
    if not -rank <= axis < rank:
        raise ctx.fail(f"input {index} (axis) is {axis}; it must be in [{-rank}, {rank})")
    return axis % rank


def _runtime_axis(ctx: OpContext, index: int) -> Callable[[int], int]:
    """axis for a rank known only at run time (checked then)."""
    axis = int(ctx.scalar(index, -1))

    def resolve(rank: int) -> int:
        if not -rank <= axis < rank:
            raise runtime_failure(ctx, f"input {index} (axis) is {axis}; the input has rank {rank}")
        return axis % rank

    return resolve


def _same_shape(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    return [None if dims is None else tuple(dims)]


# ---------------------------------------------------------------------------
# L2_NORMALIZATION
# ---------------------------------------------------------------------------

#: required output (scale, zero point) of the quantized L2_NORMALIZATION
L2_OUTPUT_QUANT = {_T.TENSOR_QUANT8_ASYMM: 128, _T.TENSOR_QUANT8_ASYMM_SIGNED: 0}


def _l2_validate(ctx: OpContext) -> HalVersion | None:
    check_rank(ctx, 0, min_rank=1, max_rank=4)
    _axis(ctx, 1)
    out = ctx.outputs[0]
    zero_point = L2_OUTPUT_QUANT.get(out.type)
    if zero_point is not None and (f32(out.scale) != f32(1 / 128) or out.zeroPoint != zero_point):
        raise ctx.fail(
            f"output 0 has scale {out.scale} and zero point {out.zeroPoint}; with "
            f"{_T(out.type).name} they must be 1/128 (0.0078125) and {zero_point}"
        )
    if len(ctx.inputs) > 1 or ctx.inputs[0].rank != 4:
        return _V.V1_2
    return None


def _srdhm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul (both int32 values in int64)."""
    overflow = (a == -(2**31)) & (b == -(2**31))
    result = quant.saturating_rounding_doubling_high_mul(a, b)
    return np.where(overflow, INT32_MAX, result)


def _mul_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingMultiplyByPOT for a positive exponent."""
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, -(2**31), x << exponent))


def inv_sqrt_multiplier(total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``GetInvSqrtQuantizedMultiplierExp(total, -1)`` for an int64 array.

    Returns (multiplier, shift), shift <= 0 meaning a right shift, such that
    ``x * multiplier * 2**shift / 2**31 ~= x / sqrt(total)``.
    """
    small = total <= 1
    x = np.where(small, 2, total).astype(np.int64)
    shift = np.full(x.shape, 11, dtype=np.int64)
    while True:
        big = x >= 1 << 29
        if not big.any():
            break
        x = np.where(big, x // 4, x)
        shift += big
    bit_length = np.frexp(x.astype(np.float64))[1].astype(np.int64)
    left_pairs = (32 - bit_length - 1) // 2 - 1
    shift -= left_pairs
    x = x << (2 * left_pairs)
    # Fixed point with 3 integer bits: 1.0 is 2**28.
    half_input = quant.rounding_divide_by_pot(x >> 1, 1)
    half_three = (1 << 28) + (1 << 27)
    y = np.full(x.shape, 1 << 28, dtype=np.int64)
    for _ in range(5):
        y3 = _mul_by_pot(_srdhm(_srdhm(y, y), y), 6)
        diff = quant.wrap_int32(_srdhm(np.int64(half_three), y) - _srdhm(half_input, y3))
        y = _mul_by_pot(diff, 3)
    y = _srdhm(y, np.int64(1518500250))  # * sqrt(2) / 2
    negative = shift < 0
    y = np.where(negative, quant.wrap_int32(y << np.where(negative, -shift, 0)), y)
    shift = np.where(negative, 0, shift)
    return np.where(small, INT32_MAX, y), np.where(small, 0, -shift)


def _l2_kernel(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    resolve = _runtime_axis(ctx, 1)
    out_type = ctx.outputs[0].type
    dtype = dtype_of(out_type)
    if ctx.primary_type not in QUANT8:

        def l2_float(x: np.ndarray) -> np.ndarray:
            axis = resolve(x.ndim)
            x32 = x.astype(f32, copy=False)
            total = np.sum(np.square(x32, dtype=np.float64), axis=axis, keepdims=True)
            norm = np.maximum(np.sqrt(total).astype(f32), L2_EPSILON)
            return (x32 / norm).astype(dtype, copy=False)

        return l2_float

    zp = ctx.inputs[0].zeroPoint
    signed = out_type == _T.TENSOR_QUANT8_ASYMM_SIGNED
    lo, hi = quant.QUANT_RANGE[np.dtype(dtype)]

    def l2_quant(x: np.ndarray) -> np.ndarray:
        axis = resolve(x.ndim)
        centered = x.astype(np.int64) - zp
        total = quant.wrap_int32(np.sum(centered * centered, axis=axis, keepdims=True))
        mult, shift = inv_sqrt_multiplier(total)
        if signed and axis == x.ndim - 1:
            # reference_integer_ops::L2Normalization: the 1/128 output scale is a shift of 7
            res = multiply_by_quantized_multiplier(centered, mult, shift + 7)
        else:
            res = multiply_by_quantized_multiplier(centered * 128, mult, shift)
            if not signed:
                res += 128
        return np.clip(res, lo, hi).astype(dtype)

    return l2_quant


L2_NORMALIZATION = register(
    OperationDef(
        OperationType.L2_NORMALIZATION,
        inputs=(Arg("input"), Arg("axis", INT32_SCALAR, optional=True)),
        outputs=(Arg("output"),),
        types={
            _T.TENSOR_FLOAT32: _V.V1_0,
            _T.TENSOR_FLOAT16: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_l2_kernel,
        prepare=_same_shape,
        validate=_l2_validate,
    )
)


# ---------------------------------------------------------------------------
# LOCAL_RESPONSE_NORMALIZATION
# ---------------------------------------------------------------------------


def _float_scalar(primary: int) -> frozenset:
    """FLOAT32 parameters with TENSOR_FLOAT32 data, FLOAT16 with TENSOR_FLOAT16."""
    return frozenset({_T.FLOAT16 if primary == _T.TENSOR_FLOAT16 else _T.FLOAT32})


def _lrn_validate(ctx: OpContext) -> HalVersion | None:
    check_rank(ctx, 0, min_rank=1, max_rank=4)
    _axis(ctx, 5)
    if len(ctx.inputs) > 5 or ctx.inputs[0].rank != 4:
        return _V.V1_2
    return None


def _lrn_kernel(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    resolve = _runtime_axis(ctx, 5)
    radius = int(ctx.scalar(1))
    # The reference computes in float32 with float32 parameters.
    bias, alpha, beta = (float(f32(ctx.scalar(i))) for i in (2, 3, 4))
    dtype = dtype_of(ctx.outputs[0].type)

    def lrn(x: np.ndarray) -> np.ndarray:
        axis = resolve(x.ndim)
        xm = np.moveaxis(x, axis, -1).astype(np.float64)
        size = xm.shape[-1]
        cumulative = np.zeros((*xm.shape[:-1], size + 1))
        np.cumsum(xm * xm, axis=-1, out=cumulative[..., 1:])
        index = np.arange(size)
        lo = np.clip(index - radius, 0, size)
        hi = np.clip(index + radius + 1, 0, size)
        window = np.maximum(cumulative[..., hi] - cumulative[..., lo], 0.0)
        out = xm * (bias + alpha * window) ** -beta
        return np.ascontiguousarray(np.moveaxis(out, -1, axis), dtype=dtype)

    return lrn


LOCAL_RESPONSE_NORMALIZATION = register(
    OperationDef(
        OperationType.LOCAL_RESPONSE_NORMALIZATION,
        inputs=(
            Arg("input"),
            Arg("radius", INT32_SCALAR),
            Arg("bias", _float_scalar),
            Arg("alpha", _float_scalar),
            Arg("beta", _float_scalar),
            Arg("axis", INT32_SCALAR, optional=True),
        ),
        outputs=(Arg("output"),),
        types={_T.TENSOR_FLOAT32: _V.V1_0, _T.TENSOR_FLOAT16: _V.V1_2},
        execute=_lrn_kernel,
        prepare=_same_shape,
        validate=_lrn_validate,
    )
)


# ---------------------------------------------------------------------------
# INSTANCE_NORMALIZATION
# ---------------------------------------------------------------------------


def _instance_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, exact=4)


def _instance_kernel(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    gamma, beta, epsilon = (float(ctx.scalar(i)) for i in (1, 2, 3))
    spatial = (2, 3) if layout_is_nchw(ctx) else (1, 2)
    dtype = dtype_of(ctx.outputs[0].type)

    def instance_norm(x: np.ndarray) -> np.ndarray:
        x64 = x.astype(np.float64)
        mean = x64.mean(axis=spatial, keepdims=True)
        x64 -= mean
        sigma = np.sqrt(np.mean(x64 * x64, axis=spatial, keepdims=True) + epsilon)
        x64 *= gamma
        x64 /= sigma
        x64 += beta
        return x64.astype(dtype)

    return instance_norm


INSTANCE_NORMALIZATION = register(
    OperationDef(
        OperationType.INSTANCE_NORMALIZATION,
        inputs=(
            Arg("input"),
            Arg("gamma", _float_scalar),
            Arg("beta", _float_scalar),
            Arg("epsilon", _float_scalar),
            Arg("layout", frozenset({_T.BOOL})),
        ),
        outputs=(Arg("output"),),
        layout=4,
        types={_T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_FLOAT16: _V.V1_2},
        execute=_instance_kernel,
        prepare=_same_shape,
        validate=_instance_validate,
    )
)

"""Helpers of the activation, unary and softmax families.

Two groups:

- gemmlowp's fixed-point transcendental functions (``exp_on_negative_values``,
  ``logistic``, ``tanh``, ``one_over_one_plus_x_for_x_in_0_1``) on int64 numpy
  arrays holding int32 raw values, step for step as the reference's TFLite
  kernels run them (Q-format ``FixedPoint<int32, k>`` values are kept as their
  raw integers; the number of integer bits is a parameter). They build the
  256-entry tables of quantized LOGISTIC and TANH at bind time, and the
  per-difference exponential table of quantized SOFTMAX.
- small registration helpers shared by the modules: float16 computed through
  float32, fixed output quantization checks, same-shape prepare.

Everything here is vectorized; nothing runs per element in Python.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant
from nnhal.driver.ops.registry import OpContext, Shape

from nnhal.types import OperandType

_T = OperandType
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

# ---------------------------------------------------------------------------
# gemmlowp fixed point (int32 raw values in int64 arrays)
# ---------------------------------------------------------------------------


def _c_div_pow2(x: np.ndarray, bits: int) -> np.ndarray:
    """C integer division by 2**bits (truncates toward zero)."""
    return np.where(x >= 0, x >> bits, -((-x) >> bits))


def srdhm(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """``SaturatingRoundingDoublingHighMul`` of two int32 operands (either may be an array)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    out = _c_div_pow2(ab + nudge, 31)
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, out)


def rdbpot(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
    """``RoundingDivideByPOT`` with a scalar or per-element exponent (>= 0)."""
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def saturating_shift_left(x: np.ndarray, exponent: int) -> np.ndarray:
    """``SaturatingRoundingMultiplyByPOT<exponent>`` for exponent > 0 on int32."""
    threshold = (1 << (31 - exponent)) - 1
    out = x << exponent
    out = np.where(x > threshold, INT32_MAX, out)
    return np.where(x < -threshold, INT32_MIN, out)


def rescale(x: np.ndarray, src_bits: int, dst_bits: int) -> np.ndarray:
    """``Rescale<dst_bits>`` of a FixedPoint with ``src_bits`` integer bits."""
    exponent = src_bits - dst_bits
    if exponent > 0:
        return saturating_shift_left(x, exponent)
    if exponent < 0:
        return rdbpot(x, -exponent)
    return x


def wrap32(x: np.ndarray) -> np.ndarray:
    """int32 wrap-around of an int64 array (the C++ int32 additions)."""
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def _exp_quarter(a: np.ndarray) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out (a Taylor series around -1/8)."""
    constant_term = 1895147668  # exp(-1/8)
    one_third = 715827883
    x = a + (1 << 28)  # + 1/8
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    poly = rdbpot(srdhm(x4_over_4 + x3, one_third) + x2, 1)
    return wrap32(constant_term + srdhm(constant_term, x + poly))


#: exp(-2**k) in Q0.31 for the barrel shifter of exp_on_negative_values.
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))  # fmt: skip


def exp_on_negative_values(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp ``exp_on_negative_values`` of a FixedPoint<int32, integer_bits> (a <= 0).

    Returns Q0.31 raw values (``One()`` is INT32_MAX).
    """
    a = np.asarray(a, dtype=np.int64)
    fractional = 31 - integer_bits
    quarter = 1 << (fractional - 2)
    a_mod_quarter_minus_quarter = (a & (quarter - 1)) - quarter
    result = _exp_quarter(rescale(a_mod_quarter_minus_quarter, integer_bits, 0))
    remainder = wrap32(a_mod_quarter_minus_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (fractional + exponent)
            result = np.where(remainder & bit, srdhm(result, multiplier), result)
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, INT32_MAX, result)


def _newton_reciprocal(a: np.ndarray) -> np.ndarray:
    """The Newton-Raphson loop shared by the two (..)/(1 + x) functions; Q2.29 result."""
    half_denominator = a + INT32_MAX
    half_denominator = np.where(
        half_denominator >= 0, (half_denominator + 1) // 2, -((-(half_denominator - 1)) // 2)
    )  # RoundingHalfSum(a, One())
    one_f2 = 1 << 29
    x = 1515870810 + srdhm(half_denominator, -1010580540)  # 48/17 - 32/17 * d
    for _ in range(3):
        one_minus = one_f2 - srdhm(half_denominator, x)
        x = wrap32(x + saturating_shift_left(srdhm(x, one_minus), 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """gemmlowp ``one_over_one_plus_x_for_x_in_0_1`` (Q0.31 in and out)."""
    return saturating_shift_left(_newton_reciprocal(np.asarray(a, dtype=np.int64)), 1)


def one_minus_x_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """gemmlowp ``one_minus_x_over_one_plus_x_for_x_in_0_1`` (Q0.31 in and out)."""
    x = _newton_reciprocal(np.asarray(a, dtype=np.int64))
    return saturating_shift_left(wrap32(x - (1 << 29)), 2)


def fixed_logistic(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp ``logistic`` of a FixedPoint<int32, integer_bits>; Q0.31 result."""
    a = np.asarray(a, dtype=np.int64)
    positive = a > 0
    abs_input = np.where(positive, a, -a)
    if_positive = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(-abs_input, integer_bits))
    result = np.where(positive, if_positive, wrap32(INT32_MAX - if_positive))
    return np.where(a == 0, 1 << 30, result)


def fixed_tanh(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp ``tanh`` of a FixedPoint<int32, integer_bits>; Q0.31 result."""
    a = np.asarray(a, dtype=np.int64)
    negative = a < 0
    n = np.where(negative, a, -a)
    # ExactMulByPot<1>: same raw value, one more integer bit.
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, -t, t))


# ---------------------------------------------------------------------------
# Multipliers (OperationsUtils.cpp)
# ---------------------------------------------------------------------------


def quantize_multiplier_greater_than_one(real: float) -> tuple[int, int] | None:
    """``QuantizeMultiplierGreaterThanOne``; None where the reference fails (real <= 1)."""
    if not real > 1.0:
        return None
    q, shift = math.frexp(real)
    fixed = quant.round_half_away(q * (1 << 31))
    if fixed == 1 << 31:
        fixed //= 2
        shift += 1
    return fixed, shift


def input_radius(integer_bits: int, left_shift: int, total_bits: int = 31) -> int:
    """``CalculateInputRadius``: the largest |input| the rescaled fixed point can hold."""
    top = ((1 << integer_bits) - 1) * (1 << (total_bits - integer_bits)) / (1 << left_shift)
    return math.floor(top)


def mul_greater_than_one(x: np.ndarray, multiplier: int, left_shift: int) -> np.ndarray:
    """``MultiplyByQuantizedMultiplierGreaterThanOne``."""
    return srdhm(wrap32(np.asarray(x, dtype=np.int64) << left_shift), multiplier)


# ---------------------------------------------------------------------------
# Registration helpers
# ---------------------------------------------------------------------------


def same_shape_prepare(ctx: OpContext) -> list[Shape]:
    """The output has the input's shape (unknown axes stay unknown)."""
    dims = ctx.inputs[0].dimensions
    return [None if dims is None else tuple(dims)]


def via_float32(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """A float16 kernel that computes ``fn`` in float32 and rounds once, as the reference."""

    def kernel(x: np.ndarray) -> np.ndarray:
        return fn(x.astype(np.float32)).astype(np.float16)

    return kernel


def check_output_quant(
    ctx: OpContext, scale: float | None = None, zero_point: int | None = None, *, why: str = ""
) -> None:
    """A quantized output must have the given scale and zero point (None: the input's).

    Scales compare as float32, the reference's type.
    """
    out, inp = ctx.outputs[0], ctx.inputs[0]
    want_scale = inp.scale if scale is None else scale
    want_zero = inp.zeroPoint if zero_point is None else zero_point
    if np.float32(out.scale) == np.float32(want_scale) and out.zeroPoint == want_zero:
        return
    rule = why or f"scale {want_scale!r} and zeroPoint {want_zero}"
    raise ctx.fail(
        f"output 0 has scale {out.scale!r} and zeroPoint {out.zeroPoint}; with "
        f"{_T(ctx.primary_type).name} it must have {rule}"
    )


def table_kernel(table: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """An 8-bit unary kernel: one gather through a 256-entry table (fresh result)."""
    table = quant.frozen(table)

    def kernel(x: np.ndarray) -> np.ndarray:
        return table[x.view(np.uint8)]

    return kernel

"""Exact integer arithmetic of quantized kernels done in floating point, where provably exact.

A quantized convolution or matmul sums products ``(x - zp_x) * (w - zp_w)``
of small integers. Floating-point BLAS adds integers exactly as long as every
partial sum stays below 2**24 (float32) or 2**53 (float64), whatever the
order of the additions; every partial sum is bounded by
``max|x - zp_x| * sum_k |w[k, o] - zp_w|`` for output channel ``o``. So:

- ``accumulation_dtype`` picks float32 (twice the speed of float64 GEMM and
  half the memory) when that bound is below 2**24, float64 when below 2**53,
  None otherwise (the caller keeps its integer path).
- ``float_requantizer`` is TFLite's ``MultiplyByQuantizedMultiplier``
  (gemmlowp's ``SaturatingRoundingDoublingHighMul`` then
  ``RoundingDivideByPOT``) on float64 values, bit-exact while
  ``|acc| * 2**left_shift < 2**22`` (then ``acc * multiplier`` < 2**53 is
  exact, divisions by powers of two are exact, and no int32 wrap can occur);
  ``requant_limit`` gives that bound per channel, and callers use the integer
  requantizer above it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant

F32_EXACT = float(2**24)
F64_EXACT = float(2**53)
#: |accumulator| below which float_requantizer is exact (times 2**-left_shift)
REQUANT_EXACT = float(2**22)


def centered_bound(zero_point: int, dtype) -> int:
    """max |x - zero_point| over the quantized type's range."""
    qmin, qmax = quant.QUANT_RANGE[np.dtype(dtype)]
    return max(zero_point - qmin, qmax - zero_point)


def channel_bounds(x_bound: int, abs_sums: np.ndarray) -> np.ndarray:
    """Per-output-channel bound of every partial sum (float64, exact for these sizes)."""
    return float(x_bound) * np.asarray(abs_sums, dtype=np.float64)


def accumulation_dtype(bounds: np.ndarray):
    """float32 or float64 when every partial sum provably fits its mantissa, else None."""
    top = float(np.max(bounds)) if np.size(bounds) else 0.0
    if top < F32_EXACT:
        return np.float32
    if top < F64_EXACT:
        return np.float64
    return None


def requant_limit(exp: np.ndarray) -> np.ndarray:
    """Per channel: the largest |accumulator + bias| float_requantizer handles exactly."""
    left = np.maximum(np.asarray(exp, dtype=np.int64), 0)
    return REQUANT_EXACT / np.exp2(left.astype(np.float64))


def float_requantizer(
    mult: np.ndarray, exp: np.ndarray, zero_point: int, lo: int, hi: int, dtype
) -> Callable[[np.ndarray], np.ndarray]:
    """float64 accumulators (last axis = channel; consumed) -> clamped quantized output.

    Bit-exact with ``_conv_util.requantizer`` for ``|acc| < requant_limit(exp)``.
    """
    mult = np.asarray(mult, dtype=np.int64)
    exp = np.asarray(exp, dtype=np.int64)
    # x << left, * multiplier, / 2**31: one multiply, exact (scaling by powers of two
    # keeps the significand of the exact integer product)
    scaled = mult.astype(np.float64) * np.exp2(np.maximum(exp, 0).astype(np.float64) - 31)
    right = np.maximum(-exp, 0)
    shifting = right > 0
    inv = np.exp2(-right.astype(np.float64))
    # channels without a right shift keep q: no sign term, no offset (both pre-scaled)
    sign_half = np.where(shifting, 0.5, 0.0) * inv
    half_less = np.where(shifting, np.exp2((right - 1).astype(np.float64)) - 0.5, 0.0) * inv
    rounding = bool(np.any(shifting))
    if np.all(scaled == scaled.flat[0]) and np.all(right == right.flat[0]):
        scaled, inv = float(scaled.flat[0]), float(inv.flat[0])
        sign_half, half_less = float(sign_half.flat[0]), float(half_less.flat[0])
    # the zero point (an integer) joins the last floor's argument: floor(v) + zp = floor(v + zp)
    first_offset = 0.5 if rounding else 0.5 + zero_point
    half_less = half_less + zero_point

    def requant(acc: np.ndarray) -> np.ndarray:
        # SaturatingRoundingDoublingHighMul: (ab + nudge) / 2**31 truncated toward zero
        # with nudge 2**30 (ab >= 0) or 1 - 2**30: for integer ab both are floor((ab + 2**30)
        # / 2**31) (halves up, for either sign); no saturation: the multiplier is < 2**31.
        # ab / 2**31 + 0.5 is (ab + 2**30) / 2**31, an integer below 2**53 scaled: exact.
        np.multiply(acc, scaled, out=acc)
        acc += first_offset
        np.floor(acc, out=acc)
        if rounding:
            # RoundingDivideByPOT(q, e): floor((q + 2**(e-1) - [q < 0]) / 2**e), halves away
            # from zero; for integer q, q + copysign(0.5, q) + 2**(e-1) - 0.5 is that numerator
            # (q = -0.0 included), here each term already divided by 2**e. |q| < 2**22:
            # every step exact.
            np.multiply(acc, inv, out=acc)
            tmp = np.copysign(sign_half, acc)
            acc += tmp
            acc += half_less
            np.floor(acc, out=acc)
        np.clip(acc, lo, hi, out=acc)
        return acc.astype(dtype)

    return requant

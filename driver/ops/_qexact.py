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


#: accumulator elements requantized per pass (512 KB of float64): the requantization
#: is a dozen elementwise passes, and chunks this size stay in the core's L2 cache
#: between them (measured 3x faster than whole-tensor passes on MobileNet layers)
CHUNK_ELEMENTS = 1 << 16


def float_requantizer(
    mult: np.ndarray, exp: np.ndarray, zero_point: int, lo: int, hi: int, dtype
) -> Callable[..., np.ndarray]:
    """(accumulators, bias) -> clamped quantized output of the accumulators' shape.

    The accumulators are float32 or float64 integers (last axis = channel), the bias
    per channel (float64 integers; None for none). Bit-exact with ``_conv_util.requantizer`` on
    ``acc + bias`` while ``|acc + bias| < requant_limit(exp)``.
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
        # numpy scalars, not Python floats: a Python float is "weak" and would let a
        # float32 accumulator pick the float32 multiply (inexact)
        scaled, inv = np.float64(scaled.flat[0]), np.float64(inv.flat[0])
        sign_half, half_less = np.float64(sign_half.flat[0]), np.float64(half_less.flat[0])
    # the zero point (an integer) joins the last floor's argument: floor(v) + zp = floor(v + zp)
    first_offset = np.float64(0.5 if rounding else 0.5 + zero_point)
    half_less = half_less + zero_point
    out_dtype = np.dtype(dtype)

    def requant(acc: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        channels = acc.shape[-1] if acc.ndim else 1
        flat = acc.reshape(-1, channels)
        out = np.empty(flat.shape, dtype=out_dtype)
        # (acc + bias) * scaled + 0.5 as acc * scaled + (bias * scaled + 0.5): both
        # products are exact (integers below 2**22 / 2**left times a 31-bit multiplier
        # scaled by a power of two), and so is their sum, the exactly representable
        # value the unfused steps computed.
        offset = first_offset if bias is None else bias * scaled + first_offset
        rows = max(1, CHUNK_ELEMENTS // max(channels, 1))
        scratch = np.empty((min(rows, flat.shape[0]), channels), dtype=np.float64)
        signs = np.empty_like(scratch) if rounding else None
        for r0 in range(0, flat.shape[0], rows):
            part = flat[r0 : r0 + rows]
            v = scratch[: part.shape[0]]
            # SaturatingRoundingDoublingHighMul: (ab + nudge) / 2**31 truncated toward
            # zero with nudge 2**30 (ab >= 0) or 1 - 2**30: for integer ab both are
            # floor((ab + 2**30) / 2**31) (halves up, for either sign); no saturation:
            # the multiplier is < 2**31. ab / 2**31 + 0.5 is (ab + 2**30) / 2**31, an
            # integer below 2**53 scaled: exact.
            np.multiply(part, scaled, out=v, dtype=np.float64)
            v += offset
            np.floor(v, out=v)
            if rounding:
                # RoundingDivideByPOT(q, e): floor((q + 2**(e-1) - [q < 0]) / 2**e),
                # halves away from zero; for integer q, q + copysign(0.5, q) + 2**(e-1)
                # - 0.5 is that numerator (q = -0.0 included), here each term already
                # divided by 2**e. |q| < 2**22: every step exact.
                v *= inv
                t = signs[: part.shape[0]]
                np.copysign(sign_half, v, out=t)
                v += t
                v += half_less
                np.floor(v, out=v)
            np.clip(v, lo, hi, out=v)
            np.copyto(out[r0 : r0 + rows], v, casting="unsafe")
        return out.reshape(acc.shape)

    return requant

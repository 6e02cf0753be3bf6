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
  ``RoundingDivideByPOT``) on float64 values, with the bias folded in, in
  cache-sized chunks. Its ``limit`` attribute gives, per channel, the largest
  ``|acc + bias|`` it handles exactly (about ``2**22 / 2**left_shift``: then
  ``acc * multiplier`` < 2**53 is exact, divisions by powers of two are exact,
  and no int32 wrap can occur); callers use the integer requantizer above it.
  When the clamp starts at or above the zero point the two roundings merge
  into one floor (see ``float_requantizer``).
"""

from __future__ import annotations

import math
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
#: is several elementwise passes, and chunks this size stay in the core's L2 cache
#: between them (measured 3x faster than whole-tensor passes on MobileNet layers)
CHUNK_ELEMENTS = 1 << 16
#: below this many channels a per-channel operand is tiled to the chunk's shape:
#: numpy's inner loops over short broadcast rows run at half speed
TILE_BELOW = 256


def _per_channel(values: np.ndarray):
    """A per-channel float64 array, or one numpy scalar when all channels agree.

    numpy scalars, not Python floats: a Python float is "weak" and would let a float32
    operand pick a float32 loop (inexact).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size and np.all(values == values.flat[0]):
        return np.float64(values.flat[0])
    return values


def float_requantizer(
    mult: np.ndarray, exp: np.ndarray, zero_point: int, lo: int, hi: int, dtype
) -> Callable[..., np.ndarray]:
    """(accumulators, bias[, out]) -> clamped quantized output of the accumulators' shape.

    The accumulators are float32 or float64 integers (last axis = channel), the bias
    per channel (float64 integers; None for none); ``out``, when given, is a contiguous
    array of the output type that receives the result. Bit-exact with
    ``_conv_util.requantizer`` on ``acc + bias`` while ``|acc + bias|`` stays below the
    returned function's ``limit`` (per channel).

    Two forms, both exact within their limit:

    - one floor: ``floor(a * M * 2**left / 2**(31 + e) + (2**30 + 2**(30 + e)) / 2**(31 + e)
      + zp)`` for a right shift ``e`` (``e = 0``: no ``2**(30 + e)`` term). For integer
      ``h``, ``floor((floor(t) + h) / 2**e) = floor((t + h) / 2**e)``, so the two floors of
      ``SaturatingRoundingDoublingHighMul`` and ``RoundingDivideByPOT`` merge, except that
      the latter rounds a negative ``q`` one lower at exact halves. A negative ``q`` gives
      a result at most ``zp`` either way, so when the clamp's low end is at least ``zp``
      (every ReLU-like activation, and outputs whose zero point is their minimum) both
      clamp to ``lo`` and the one floor is exact; so it is without right shifts.
    - two floors otherwise (``requant_limit``): the fixed-point steps one by one.
    """
    mult = np.asarray(mult, dtype=np.int64)
    exp = np.asarray(exp, dtype=np.int64)
    if mult.size == 1 and exp.size == 1 and (exp.item() >= 0 or lo >= zero_point):
        return _one_channel(mult.item(), exp.item(), zero_point, lo, hi, np.dtype(dtype))
    left = np.maximum(exp, 0)
    right = np.maximum(-exp, 0)
    shifting = right > 0
    rounding = bool(np.any(shifting))
    out_dtype = np.dtype(dtype)
    if not rounding or lo >= zero_point:
        m_left = mult.astype(np.float64) * np.exp2(left.astype(np.float64))
        scale = m_left * np.exp2(-31.0 - right)
        nudges = np.exp2(30.0) + np.where(shifting, np.exp2(30.0 + right), 0.0)
        first_offset = nudges * np.exp2(-31.0 - right) + zero_point
        # every value a * scale + offset is N / 2**(31 + e) with an integer N; it is
        # exact while |N| <= 2**53 (a margin of 1 keeps the comparison strict)
        room = 2.0**53 - nudges - abs(zero_point) * np.exp2(31.0 + right)
        limit = np.where(m_left > 0, np.floor(room / np.maximum(m_left, 1.0)) - 1, 2.0**53)
        body = _one_floor(_per_channel(scale), _per_channel(first_offset), lo, hi, out_dtype)
        # the per-channel coefficients, for compiled kernels that fuse the same formula
        body.one_floor = (scale, first_offset)
    else:
        limit = requant_limit(exp)
        body = _two_floors(mult, left, right, shifting, zero_point, lo, hi, out_dtype)
        body.one_floor = None
    body.limit = limit
    return body


def _one_channel(mult: int, exp: int, zero_point: int, lo: int, hi: int, out_dtype):
    """``float_requantizer``'s one-floor form for a single channel (a per-tensor scale).

    The coefficients in Python floats: the very operations of the array form, in the
    same order, on the same float64 values (powers of two are exact either way), without
    numpy's calls on one-element arrays (15 of the 20 µs it took per layer).
    """
    left, right = max(exp, 0), max(-exp, 0)
    m_left = float(mult) * 2.0**left
    scale = m_left * 2.0 ** (-31 - right)
    nudges = 2.0**30 + (2.0 ** (30 + right) if right > 0 else 0.0)
    first_offset = nudges * 2.0 ** (-31 - right) + zero_point
    room = 2.0**53 - nudges - abs(zero_point) * 2.0 ** (31 + right)
    limit = float(math.floor(room / max(m_left, 1.0))) - 1 if m_left > 0 else 2.0**53
    body = _one_floor(np.float64(scale), np.float64(first_offset), lo, hi, out_dtype)
    body.one_floor = (np.array([scale]), np.array([first_offset]))
    body.limit = np.array([limit])
    return body


def _chunks(acc: np.ndarray, out_dtype, out: np.ndarray | None):
    """(rows of acc as [R, C], output [R, C] (``out`` viewed so, or new), rows per chunk)."""
    channels = acc.shape[-1] if acc.ndim else 1
    flat = acc.reshape(-1, channels)
    if out is None:
        out = np.empty(flat.shape, dtype=out_dtype)
    else:
        if not out.flags.c_contiguous:  # a reshape would copy, and the result be lost
            raise ValueError("out must be C-contiguous")
        out = out.reshape(flat.shape)
    return flat, out, max(1, CHUNK_ELEMENTS // max(channels, 1))


def _tiled(values, rows: int, channels: int):
    """A per-channel operand as the chunk operations take it (see TILE_BELOW)."""
    if np.ndim(values) == 0 or channels >= TILE_BELOW or rows == 1:
        return values
    return np.ascontiguousarray(np.broadcast_to(values, (rows, channels)))


def _one_floor(scale, first_offset, lo: int, hi: int, out_dtype):
    # a clamped value at least 0 truncates as it floors: the cast does the floor
    floor_in_cast = lo >= 0

    def requant(acc: np.ndarray, bias: np.ndarray | None = None, out=None) -> np.ndarray:
        flat, out, rows = _chunks(acc, out_dtype, out)
        rows = min(rows, flat.shape[0])
        channels = flat.shape[1]
        # (acc + bias) * scale + c as acc * scale + (bias * scale + c): both products
        # are exact and so is their sum (the exact value is representable)
        offset = first_offset if bias is None else bias * scale + first_offset
        scale_t, offset_t = _tiled(scale, rows, channels), _tiled(offset, rows, channels)
        v_all = np.empty((rows, channels), dtype=np.float64)
        for r0 in range(0, flat.shape[0], rows):
            part = flat[r0 : r0 + rows]
            n = part.shape[0]
            v = v_all[:n]
            np.copyto(v, part)  # float32 -> float64 (exact), then in place
            np.multiply(v, scale_t if n == rows or np.ndim(scale_t) < 2 else scale_t[:n], out=v)
            v += offset_t if n == rows or np.ndim(offset_t) < 2 else offset_t[:n]
            if not floor_in_cast:
                np.floor(v, out=v)
            np.clip(v, lo, hi, out=v)
            np.copyto(out[r0 : r0 + n], v, casting="unsafe")
        return out.reshape(acc.shape)

    return requant


def _two_floors(mult, left, right, shifting, zero_point: int, lo: int, hi: int, out_dtype):
    # x << left, * multiplier, / 2**31: one multiply, exact (scaling by powers of two
    # keeps the significand of the exact integer product)
    scaled = _per_channel(mult.astype(np.float64) * np.exp2(left.astype(np.float64) - 31))
    inv = np.exp2(-right.astype(np.float64))
    # channels without a right shift keep q: no sign term, no offset (both pre-scaled)
    sign_half = _per_channel(np.where(shifting, 0.5, 0.0) * inv)
    half_less = _per_channel(
        np.where(shifting, np.exp2((right - 1).astype(np.float64)) - 0.5, 0.0) * inv + zero_point
    )
    inv = _per_channel(inv)
    first_offset = np.float64(0.5)

    def requant(acc: np.ndarray, bias: np.ndarray | None = None, out=None) -> np.ndarray:
        flat, out, rows = _chunks(acc, out_dtype, out)
        offset = first_offset if bias is None else bias * scaled + first_offset
        scratch = np.empty((min(rows, flat.shape[0]), flat.shape[1]), dtype=np.float64)
        signs = np.empty_like(scratch)
        for r0 in range(0, flat.shape[0], rows):
            part = flat[r0 : r0 + rows]
            v = scratch[: part.shape[0]]
            # SaturatingRoundingDoublingHighMul: (ab + nudge) / 2**31 truncated toward
            # zero with nudge 2**30 (ab >= 0) or 1 - 2**30: for integer ab both are
            # floor((ab + 2**30) / 2**31) (halves up, for either sign); no saturation:
            # the multiplier is < 2**31. ab / 2**31 + 0.5 is (ab + 2**30) / 2**31, an
            # integer below 2**53 scaled: exact. The bias joins as in the one-floor form.
            np.copyto(v, part)
            v *= scaled
            v += offset
            np.floor(v, out=v)
            # RoundingDivideByPOT(q, e): floor((q + 2**(e-1) - [q < 0]) / 2**e),
            # halves away from zero; for integer q, q + copysign(0.5, q) + 2**(e-1)
            # - 0.5 is that numerator (q = -0.0 included), here each term already
            # divided by 2**e (the zero point joins the last floor's argument:
            # floor(v) + zp = floor(v + zp)). |q| < 2**22: every step exact.
            v *= inv
            t = signs[: part.shape[0]]
            np.copysign(sign_half, v, out=t)
            v += t
            v += half_less
            np.floor(v, out=v)
            np.clip(v, lo, hi, out=v)
            np.copyto(out[r0 : r0 + part.shape[0]], v, casting="unsafe")
        return out.reshape(acc.shape)

    return requant

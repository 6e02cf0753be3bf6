"""Quantized arithmetic the way the NNAPI reference (its TFLite kernels) does it.

The reference CPU executor stores scales as float32 and requantizes with
fixed-point multipliers: a real multiplier ``m`` becomes a Q31 integer and a
power-of-two exponent (``QuantizeMultiplier``), and products are rounded with
gemmlowp's ``SaturatingRoundingDoublingHighMul`` and ``RoundingDivideByPOT``.
Reproducing those steps bit for bit (rather than computing in float) is what
keeps quantized outputs within the vectors' tolerance of one unit.

Everything here works on int64 numpy arrays that hold int32 values, so
intermediate products cannot overflow. Helpers that build lookup tables live
here too: an 8-bit operand has only 256 values, so a binary quantized
operation is one 256 x 256 table computed once when the kernel is bound, and
the kernel itself is a single fancy-indexing gather (which also broadcasts).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from nnhal.errors import InvalidArgument
from nnhal.types import OPERAND_TYPE_INFO, FusedActivationFunc

f32 = np.float32
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

#: (qmin, qmax) of the 8-bit quantized numpy dtypes.
QUANT_RANGE: dict[np.dtype, tuple[int, int]] = {
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int8): (-128, 127),
}


class QuantParams(NamedTuple):
    """The hashable quantization of one operand: tables are cached by these."""

    dtype: np.dtype
    scale: float
    zeroPoint: int


def quant_params(info) -> QuantParams:  # info: registry.OperandInfo
    return QuantParams(OPERAND_TYPE_INFO[info.type].dtype, float(info.scale), int(info.zeroPoint))


def frozen(table: np.ndarray) -> np.ndarray:
    """Mark a (cached, shared) table read-only."""
    table.flags.writeable = False
    return table


def round_half_away(x: float) -> int:
    """C's ``std::round``: halves go away from zero (Python's round() does not)."""
    a = abs(x)
    r = math.floor(a)
    if a - r >= 0.5:
        r += 1
    return int(r) if x >= 0 else -int(r)


def round_half_away_array(x: np.ndarray) -> np.ndarray:
    """Vectorized ``std::round`` (np.round rounds halves to even)."""
    return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))


def quantize_multiplier(real: float) -> tuple[int, int]:
    """``QuantizeMultiplier``: ``real ~= multiplier * 2**(exponent - 31)``.

    ``multiplier`` is a Q31 value in [2**30, 2**31); tiny multipliers flush to
    (0, 0) as the reference does (shift below -31).
    """
    if real == 0.0:
        return 0, 0
    if not math.isfinite(real):
        # extreme scales (e.g. 3.4e38 * 2) overflow float: there is no rescale to apply
        raise InvalidArgument(
            f"the operands' quantization scales give a rescale multiplier of {real};"
            " it must be finite"
        )
    q, exponent = math.frexp(real)
    fixed = round_half_away(q * (1 << 31))
    if fixed == 1 << 31:
        fixed //= 2
        exponent += 1
    if exponent < -31:
        return 0, 0
    return fixed, exponent


#: below this many values quantize_multipliers takes the scalar form value by value
_FEW = 8


def quantize_multipliers(reals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``quantize_multiplier`` of every value at once: (multipliers, exponents), int64.

    A per-channel filter has one rescale per output channel: one numpy pass over
    1024 of them takes 14 µs against 620 µs value by value. ``frexp`` and the
    rounding are exact, as in the scalar form.
    """
    reals = np.asarray(reals, dtype=np.float64)
    # a few values (a per-tensor scale) go faster one by one than through numpy's calls;
    # a non-finite one gets the scalar form's error naming it
    if reals.size < _FEW or not np.all(np.isfinite(reals)):
        pairs = [quantize_multiplier(float(r)) for r in reals.reshape(-1)]
        return (
            np.array([m for m, _ in pairs], dtype=np.int64),
            np.array([e for _, e in pairs], dtype=np.int64),
        )
    fraction, exponent = np.frexp(reals)
    fixed = round_half_away_array(fraction * float(1 << 31)).astype(np.int64)
    exponent = exponent.astype(np.int64)
    full = fixed == 1 << 31
    fixed[full] //= 2
    exponent[full] += 1
    tiny = exponent < -31
    fixed[tiny] = 0
    exponent[tiny] = 0
    return fixed, exponent


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 values held in int64.

    The only saturating case (both operands INT32_MIN) cannot happen: ``b`` is
    a Q31 multiplier, at most 2**31 - 1 in magnitude.
    """
    ab = a * b
    ab = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    # C integer division truncates toward zero; >> floors, so divide |x|.
    return np.where(ab >= 0, ab >> 31, -((-ab) >> 31))


def rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: x / 2**exponent, halves away from zero."""
    if exponent <= 0:
        return x
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap to int32, as the C++ int32 arithmetic does."""
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: int, exponent: int) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier`` (positive exponent = left shift).

    For exponent <= 0 this is also ``MultiplyByQuantizedMultiplierSmallerThanOneExp``.
    """
    if exponent > 0:
        x = wrap_int32(x << exponent)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), -exponent)


def activation_range(
    activation: int, scale: float, zero_point: int, dtype: np.dtype
) -> tuple[int, int]:
    """``CalculateActivationRange{Uint8,Int8}``: the clamp of a fused activation.

    The reference quantizes the bounds in float32 (``zp + round(f / scale)``).
    """
    qmin, qmax = QUANT_RANGE[np.dtype(dtype)]
    s = f32(scale)

    def quantize(f: float) -> int:
        return zero_point + round_half_away(float(f32(f) / s))

    if activation == FusedActivationFunc.RELU:
        return max(qmin, quantize(0.0)), qmax
    if activation == FusedActivationFunc.RELU6:
        return max(qmin, quantize(0.0)), min(qmax, quantize(6.0))
    if activation == FusedActivationFunc.RELU1:
        return max(qmin, quantize(-1.0)), min(qmax, quantize(1.0))
    return qmin, qmax


def table_domain(dtype: np.dtype) -> np.ndarray:
    """The value of each index 0..255 of ``x.view(np.uint8)`` for an 8-bit dtype.

    Kernels index tables with the uint8 view of their input (free for int8:
    -1 is byte 255), so a table for int8 data lists 0..127 then -128..-1.
    """
    index = np.arange(256, dtype=np.int64)
    if np.dtype(dtype) == np.int8:
        return np.where(index < 128, index, index - 256)
    return index


def real_values(dtype: np.dtype, scale: float, zero_point: int) -> np.ndarray:
    """float32 ``(q - zeroPoint) * scale`` for every table index, as the reference computes it."""
    with np.errstate(over="ignore"):  # a huge scale overflows to inf, as in float32 C++
        return (table_domain(dtype) - zero_point).astype(np.float32) * f32(scale)


def binary_table(
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray], dtype_a: np.dtype, dtype_b: np.dtype
) -> np.ndarray:
    """A 256 x 256 table ``fn(a, b)`` over the int64 values of two 8-bit operands."""
    return fn(table_domain(dtype_a)[:, None], table_domain(dtype_b)[None, :])


def requantize_table(
    dtype: np.dtype, in_scale: float, in_zero: int, out_scale: float, out_zero: int
) -> np.ndarray | None:
    """The reference ``requantize<T>`` (used by SELECT) as a 256-entry table.

    Returns None when the table is the identity (same scale and zero point),
    so callers can skip the gather.
    """
    qmin, qmax = QUANT_RANGE[np.dtype(dtype)]
    q = table_domain(dtype)
    # (value - offset) * scale is int * float: a float32 product, then double.
    real = ((q - in_zero).astype(np.float32) * f32(in_scale)).astype(np.float64)
    ret = real / float(f32(out_scale)) + out_zero
    out = np.where(ret < qmin, qmin, np.where(ret > qmax, qmax, round_half_away_array(ret)))
    table = out.astype(dtype)
    return None if np.array_equal(table.astype(np.int64), q) else table


def rescale_table(
    dtype: np.dtype, in_scale: float, in_zero: int, out_scale: float, out_zero: int
) -> np.ndarray | None:
    """TFLite ``ConcatenationWithScaling`` for one input, as a 256-entry table.

    The reference works in uint8: int8 data is shifted by +128 (zero points
    too) before and after. The arithmetic is float32:
    ``round(q * (s_in / s_out) - zp_in * (s_in / s_out)) + zp_out``.
    Returns None when scale and zero point already match (a plain copy).
    """
    if f32(in_scale) == f32(out_scale) and in_zero == out_zero:
        return None
    shift = 128 if np.dtype(dtype) == np.int8 else 0
    q = (table_domain(dtype) + shift).astype(np.float32)
    scale = f32(in_scale) * (f32(1.0) / f32(out_scale))
    bias = f32(-(in_zero + shift)) * scale
    value = round_half_away_array(q * scale + bias).astype(np.int64) + out_zero + shift
    return (np.clip(value, 0, 255) - shift).astype(dtype)

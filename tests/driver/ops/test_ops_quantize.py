"""QUANTIZE and DEQUANTIZE: positive rows, rounding and saturation, per-channel, negatives.

References are computed element by element in Python from the rule NNAPI's
reference states (float32 quotient, std::round, clamp; float32 product), not
with the kernels' vectorized steps.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from nnhal.driver.ops.registry import OpContext, lookup, validate_operation
from ops_harness import (
    WHERE,
    Bad,
    b8,
    context,
    f16,
    f32,
    i32,
    out,
    s8,
    t,
    u8,
)

from nnhal.errors import InvalidArgument
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op
from nnhal.types import SymmPerChannelQuantParams

U8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
RANGE = {U8: (0, 255), S8: (-128, 127)}


def c_round(v: float) -> float:
    """std::round: halves away from zero."""
    if math.isnan(v) or math.isinf(v):
        return v
    return math.copysign(math.floor(abs(v) + 0.5), v)


def quantize_reference(x: np.ndarray, out_type: T, scale: float, zp: int) -> np.ndarray:
    lo, hi = RANGE[out_type]
    result = []
    for value in x.astype(np.float32).reshape(-1):
        q = float(np.float32(value) / np.float32(scale))  # float32 division
        v = zp + c_round(q)
        v = hi if not v < hi else v  # std::min<float>(hi, v): NaN -> hi
        v = max(v, lo)  # std::max<float>(lo, v) (v is no longer NaN here)
        result.append(int(v))
    dtype = np.uint8 if out_type == U8 else np.int8
    return np.array(result, dtype).reshape(x.shape)


def _run(op: Op, ins: list, outs: list, version: V | None = None):
    ctx = context(op, ins, outs)
    got_version = validate_operation(ctx)
    if version is not None:
        assert got_version == version
    shapes = ctx.op.prepare(ctx)
    return shapes, ctx.op.kernel(ctx)


# ---------------------------------------------------------------------------
# QUANTIZE
# ---------------------------------------------------------------------------

QUANTIZE_CASES = [
    ("f32-u8", f32((3, 5)), U8, 0.05, 128, V.V1_2),
    ("f32-u8-coarse", f32((40,)), U8, 10.0, 120, V.V1_2),
    ("f16-u8", f16((2, 3, 4)), U8, 0.03, 7, V.V1_2),
    ("f32-s8", f32((4, 4)), S8, 0.02, -8, V.V1_3),
    ("f16-s8", f16((10,)), S8, 0.5, 3, V.V1_3),
    ("f32-s8-unknown-dims", f32((2, 3), dims=(0, 3)), S8, 1.0, 0, V.V1_3),
]


@pytest.mark.parametrize("case", QUANTIZE_CASES, ids=lambda c: c[0])
def test_quantize(case):
    _, x, out_type, scale, zp, version = case
    shapes, kernel = _run(Op.QUANTIZE, [x], [out(out_type, scale=scale, zp=zp)], version)
    got = kernel(x.data)
    assert np.array_equal(got, quantize_reference(x.data, out_type, scale, zp))
    assert got.shape == x.data.shape and not np.shares_memory(got, x.data)
    assert all(p in (0, s) for p, s in zip(shapes[0], got.shape))


def test_quantize_rounds_halves_away_from_zero_and_saturates():
    data = np.array(
        [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, np.nan, np.inf, -np.inf, 1e30, -1e30],
        np.float32,
    )
    _, kernel = _run(Op.QUANTIZE, [f32(data=data)], [out(U8, scale=1.0, zp=10)])
    assert kernel(data).tolist() == [11, 12, 13, 9, 8, 7, 10, 255, 255, 0, 255, 0]
    _, kernel = _run(Op.QUANTIZE, [f32(data=data)], [out(S8, scale=1.0, zp=0)])
    assert kernel(data).tolist() == [1, 2, 3, -1, -2, -3, 0, 127, 127, -128, 127, -128]


def test_quantize_zero_sized():
    _, kernel = _run(Op.QUANTIZE, [f32((2, 3), dims=(0, 3))], [out(U8, scale=1.0)])
    got = kernel(np.zeros((0, 3), np.float32))
    assert got.shape == (0, 3) and got.dtype == np.uint8


# ---------------------------------------------------------------------------
# DEQUANTIZE
# ---------------------------------------------------------------------------


def dequantize_reference(x: np.ndarray, scales, zp: int, axis: int | None, dtype) -> np.ndarray:
    result = np.empty(x.shape, np.float32)
    for index in np.ndindex(x.shape):
        scale = scales if axis is None else scales[index[axis]]
        result[index] = np.float32(scale) * np.float32(int(x[index]) - zp)
    return result.astype(dtype)


DEQUANTIZE_CASES = [
    ("u8-f32", u8((2, 5), scale=0.5, zp=127), T.TENSOR_FLOAT32, V.V1_0),
    ("u8-f16", u8((1, 2, 2, 1), scale=0.1, zp=3), T.TENSOR_FLOAT16, V.V1_2),
    ("s8-f32", s8((10,), scale=0.25, zp=-1), T.TENSOR_FLOAT32, V.V1_3),
    ("s8-f16", s8((3, 3), scale=0.7, zp=5), T.TENSOR_FLOAT16, V.V1_3),
    ("symm-f32", t(T.TENSOR_QUANT8_SYMM, (2, 2, 2), scale=0.5), T.TENSOR_FLOAT32, V.V1_2),
    ("symm-f16", t(T.TENSOR_QUANT8_SYMM, (4,), scale=0.125), T.TENSOR_FLOAT16, V.V1_2),
]


@pytest.mark.parametrize("case", DEQUANTIZE_CASES, ids=lambda c: c[0])
def test_dequantize(case):
    _, x, out_type, version = case
    shapes, kernel = _run(Op.DEQUANTIZE, [x], [out(out_type)], version)
    got = kernel(x.data)
    dtype = np.float32 if out_type == T.TENSOR_FLOAT32 else np.float16
    assert got.dtype == dtype
    assert np.array_equal(got, dequantize_reference(x.data, x.scale, x.zp, None, dtype))
    assert shapes == [x.data.shape]


def _per_channel_ctx(data: np.ndarray, scales, axis: int, out_type: T, dims="data") -> OpContext:
    x = t(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, data=data, dims=dims)
    info = replace(x.info(), extraParams=SymmPerChannelQuantParams(tuple(scales), axis))
    return OpContext(lookup(Op.DEQUANTIZE), [info], [out(out_type).info()], where=WHERE)


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("out_type", [T.TENSOR_FLOAT32, T.TENSOR_FLOAT16])
def test_dequantize_per_channel(axis, out_type):
    data = np.arange(-128, -104, dtype=np.int8).reshape(2, 3, 4)
    scales = [2.0, 0.5, 1.0, 0.25][: data.shape[axis]]
    ctx = _per_channel_ctx(data, scales, axis, out_type)
    assert validate_operation(ctx) == V.V1_2
    got = ctx.op.kernel(ctx)(data)
    dtype = np.float32 if out_type == T.TENSOR_FLOAT32 else np.float16
    assert np.array_equal(got, dequantize_reference(data, scales, 0, axis, dtype))


def test_dequantize_zero_sized():
    x = u8((2, 3), dims=(0, 3), scale=0.5, zp=1)
    _, kernel = _run(Op.DEQUANTIZE, [x], [out(T.TENSOR_FLOAT32)])
    got = kernel(np.zeros((0, 3), np.uint8))
    assert got.shape == (0, 3) and got.dtype == np.float32
    ctx = _per_channel_ctx(np.zeros((2, 3), np.int8), [1.0, 2.0, 3.0], 1, T.TENSOR_FLOAT32)
    validate_operation(ctx)
    assert ctx.op.kernel(ctx)(np.zeros((0, 3), np.int8)).shape == (0, 3)


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

F32_OUT = out(T.TENSOR_FLOAT32)
U8_OUT = out(U8, scale=0.5, zp=128)

BAD_ROWS = [
    Bad("quantize-two-inputs", Op.QUANTIZE, [f32(), f32()], [U8_OUT], r"expected 1 inputs, got 2"),
    Bad("quantize-no-output", Op.QUANTIZE, [f32()], [], r"expected 1 outputs, got 0"),
    Bad("quantize-u8-input", Op.QUANTIZE, [u8()], [U8_OUT],
        r"input 0 \(input\) has type TENSOR_QUANT8_ASYMM; supported: TENSOR_FLOAT32 \(1.2\), "
        r"TENSOR_FLOAT16 \(1.2\)"),
    Bad("quantize-int32-input", Op.QUANTIZE, [i32()], [U8_OUT],
        r"input 0 \(input\) has type TENSOR_INT32; supported"),
    Bad("quantize-float-output", Op.QUANTIZE, [f32()], [F32_OUT],
        r"output 0 \(output\) has type TENSOR_FLOAT32; with TENSOR_FLOAT32 supported: "
        r"TENSOR_QUANT8_ASYMM, TENSOR_QUANT8_ASYMM_SIGNED"),
    Bad("quantize-symm-output", Op.QUANTIZE, [f16()], [out(T.TENSOR_QUANT8_SYMM, scale=1.0)],
        r"output 0 \(output\) has type TENSOR_QUANT8_SYMM"),
    Bad("quantize-shape", Op.QUANTIZE, [f32((2, 3))], [out(U8, (3, 2), scale=1.0)],
        r"QUANTIZE .*output 0 has dimensions \[3, 2\] but input 0 has \[2, 3\]; QUANTIZE keeps "
        r"the shape"),
    Bad("dequantize-f32-input", Op.DEQUANTIZE, [f32()], [F32_OUT],
        r"input 0 \(input\) has type TENSOR_FLOAT32; supported: TENSOR_QUANT8_ASYMM \(1.0\)"),
    Bad("dequantize-quant16", Op.DEQUANTIZE, [t(T.TENSOR_QUANT16_SYMM, scale=1.0)], [F32_OUT],
        r"input 0 \(input\) has type TENSOR_QUANT16_SYMM; supported"),
    Bad("dequantize-int-output", Op.DEQUANTIZE, [u8()], [out(T.TENSOR_INT32)],
        r"output 0 \(output\) has type TENSOR_INT32; with TENSOR_QUANT8_ASYMM supported: "
        r"TENSOR_FLOAT16, TENSOR_FLOAT32"),
    Bad("dequantize-quant-output", Op.DEQUANTIZE, [s8()], [out(S8, scale=0.5)],
        r"output 0 \(output\) has type TENSOR_QUANT8_ASYMM_SIGNED"),
    Bad("dequantize-rank5", Op.DEQUANTIZE, [u8((1, 1, 1, 2, 3))], [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4"),
    Bad("dequantize-shape", Op.DEQUANTIZE, [u8((2, 3))], [out(T.TENSOR_FLOAT32, (2, 4))],
        r"output 0 has dimensions \[2, 4\] but input 0 has \[2, 3\]"),
    Bad("dequantize-bool", Op.DEQUANTIZE, [b8()], [F32_OUT],
        r"input 0 \(input\) has type TENSOR_BOOL8; supported"),
]  # fmt: skip


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_argument(row: Bad):
    row.check()


def test_per_channel_needs_its_parameters():
    x = t(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, (2, 3))
    ctx = context(Op.DEQUANTIZE, [x], [F32_OUT])
    with pytest.raises(InvalidArgument, match=r"DEQUANTIZE .*input 0 .*without channelQuant"):
        validate_operation(ctx)
    ctx = _per_channel_ctx(np.zeros((2, 3), np.int8), [1.0, 2.0], 2, T.TENSOR_FLOAT32)
    with pytest.raises(InvalidArgument, match=r"input 0 has channelDim 2; it must be in \[0, 2\)"):
        validate_operation(ctx)

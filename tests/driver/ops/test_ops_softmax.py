"""Tables of SOFTMAX and LOG_SOFTMAX: beta, default / negative / inner axes, the HAL
versions the signature needs, the fixed quantized output, zero-sized inputs,
and negative rows. See ops_harness.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.registry import ValueNotConstant, validate_operation
from ops_harness import RNG, Bad, Row, context, f16, f32, i32, out, run, s8, scalar, t, u8

from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32_OUT = out(T.TENSOR_FLOAT32)
F16_OUT = out(T.TENSOR_FLOAT16)
U8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
SOFTMAX_U8 = out(U8, scale=1 / 256, zp=0)
SOFTMAX_S8 = out(S8, scale=1 / 256, zp=-128)


def beta32(value):
    return scalar(value, T.FLOAT32)


def beta16(value):
    return scalar(value, T.FLOAT16)


def axis(value):
    return scalar(value)


def softmax(beta=1.0, ax=-1):
    def ref(x):
        z = (np.asarray(x, np.float64) - np.max(x, axis=ax, keepdims=True)) * beta
        e = np.exp(z)
        return e / e.sum(axis=ax, keepdims=True)

    return ref


def log_softmax(beta=1.0, ax=-1):
    def ref(x):
        z = (np.asarray(x, np.float64) - np.max(x, axis=ax, keepdims=True)) * beta
        return z - np.log(np.exp(z).sum(axis=ax, keepdims=True))

    return ref


def rows_of(type_, shape, **kw):
    """Random 8-bit data (full range)."""
    return t(type_, shape, **kw)


SOFTMAX_ROWS = [
    Row("softmax-f32-rank2", Op.SOFTMAX, [f32((2, 5)), beta32(1.0)], F32_OUT, softmax(), V.V1_0),
    Row(
        "softmax-f32-rank4",
        Op.SOFTMAX,
        [f32((1, 2, 2, 3)), beta32(0.5)],
        F32_OUT,
        softmax(0.5),
        V.V1_0,
    ),
    Row("softmax-f32-rank1", Op.SOFTMAX, [f32((7,)), beta32(2.0)], F32_OUT, softmax(2.0), V.V1_2),
    Row("softmax-f32-rank3", Op.SOFTMAX, [f32((2, 2, 3)), beta32(1.0)], F32_OUT, softmax(), V.V1_2),
    Row(
        "softmax-f32-axis0",
        Op.SOFTMAX,
        [f32((3, 4)), beta32(1.0), axis(0)],
        F32_OUT,
        softmax(ax=0),
        V.V1_2,
    ),
    Row(
        "softmax-f32-axis-negative-inner",
        Op.SOFTMAX,
        [f32((2, 3, 4)), beta32(0.1), axis(-2)],
        F32_OUT,
        softmax(0.1, -2),
        V.V1_2,
    ),
    Row(
        "softmax-f32-large-logits",
        Op.SOFTMAX,
        [f32((2, 3), data=[[1000, 1001, 1002], [-1e4, 0, 1e4]]), beta32(1.0)],
        F32_OUT,
        softmax(),
    ),
    Row(
        "softmax-f16-axis",
        Op.SOFTMAX,
        [f16((2, 4)), beta16(1.5), axis(1)],
        F16_OUT,
        softmax(1.5, 1),
        V.V1_2,
    ),
    Row("softmax-f16", Op.SOFTMAX, [f16((3, 2)), beta16(1.0)], F16_OUT, softmax(), V.V1_2),
    Row(
        "softmax-u8",
        Op.SOFTMAX,
        [rows_of(U8, (4, 10), scale=0.5, zp=0), beta32(1.0)],
        SOFTMAX_U8,
        softmax(),
        V.V1_0,
    ),
    Row(
        "softmax-u8-small-scale-beta",
        Op.SOFTMAX,
        [rows_of(U8, (3, 16), scale=0.05, zp=128), beta32(0.7)],
        SOFTMAX_U8,
        softmax(0.7),
    ),
    Row(
        "softmax-u8-axis0-rank3",
        Op.SOFTMAX,
        [rows_of(U8, (6, 2, 3), scale=0.1, zp=10), beta32(1.0), axis(0)],
        SOFTMAX_U8,
        softmax(ax=0),
        V.V1_2,
    ),
    Row(
        "softmax-u8-large-beta-cuts-off",
        Op.SOFTMAX,
        [rows_of(U8, (2, 30), scale=1.0, zp=0), beta32(1.0)],
        SOFTMAX_U8,
        softmax(),
    ),
    Row(
        "softmax-s8",
        Op.SOFTMAX,
        [rows_of(S8, (4, 8), scale=0.25, zp=-128), beta32(1.0)],
        SOFTMAX_S8,
        softmax(),
        V.V1_3,
    ),
    Row(
        "softmax-s8-axis-negative",
        Op.SOFTMAX,
        [rows_of(S8, (5, 3, 2), scale=0.1, zp=3), beta32(2.0), axis(-3)],
        SOFTMAX_S8,
        softmax(2.0, -3),
        V.V1_3,
    ),
    Row(
        "softmax-s8-uniform-row",
        Op.SOFTMAX,
        [s8((1, 4), data=[[5, 5, 5, 5]], scale=0.5), beta32(1.0)],
        SOFTMAX_S8,
        softmax(),
    ),
    Row("softmax-zero-sized", Op.SOFTMAX, [f32((0, 3)), beta32(1.0)], F32_OUT, softmax()),
    Row(
        "softmax-u8-zero-sized",
        Op.SOFTMAX,
        [u8((0, 4), scale=0.5, zp=0), beta32(1.0), axis(-1)],
        SOFTMAX_U8,
        softmax(),
    ),
    Row(
        "softmax-unknown-out",
        Op.SOFTMAX,
        [f32((2, 3)), beta32(1.0)],
        out(T.TENSOR_FLOAT32, None),
        softmax(),
        shape=(2, 3),
    ),
]

LOG_SOFTMAX_ROWS = [
    Row(
        "log-softmax-f32",
        Op.LOG_SOFTMAX,
        [f32((2, 5)), beta32(1.0), axis(-1)],
        F32_OUT,
        log_softmax(),
        V.V1_2,
    ),
    Row(
        "log-softmax-f32-axis0-beta",
        Op.LOG_SOFTMAX,
        [f32((3, 2, 2)), beta32(10.0), axis(0)],
        F32_OUT,
        log_softmax(10.0, 0),
    ),
    Row(
        "log-softmax-f32-rank5",
        Op.LOG_SOFTMAX,
        [f32((1, 2, 1, 2, 3)), beta32(0.3), axis(3)],
        F32_OUT,
        log_softmax(0.3, 3),
    ),
    Row(
        "log-softmax-f16",
        Op.LOG_SOFTMAX,
        [f16((2, 4)), beta16(1.0), axis(1)],
        F16_OUT,
        log_softmax(),
        V.V1_2,
    ),
    Row(
        "log-softmax-zero-sized",
        Op.LOG_SOFTMAX,
        [f32((0, 4)), beta32(1.0), axis(-1)],
        F32_OUT,
        log_softmax(),
    ),
]


@pytest.mark.parametrize("row", SOFTMAX_ROWS + LOG_SOFTMAX_ROWS, ids=lambda r: r.id)
def test_softmax_family(row: Row):
    row.check()


@pytest.mark.parametrize("type_, spec", [(U8, SOFTMAX_U8), (S8, SOFTMAX_S8)])
def test_quant_softmax_rows_sum_to_one(type_, spec):
    """Each quantized row adds up to about 256 units above the zero point (1.0)."""
    x = rows_of(type_, (50, 12), scale=0.2, zp=0 if type_ == U8 else -10)
    got = run(Op.SOFTMAX, [x, beta32(1.0)], [spec])[2].astype(np.int64) - spec.zp
    assert np.all(np.abs(got.sum(axis=1) - 256) <= 12)


def test_quant_softmax_with_a_tiny_beta_spreads_evenly():
    """beta * scale * 2**26 = 335.5 (> 1): differences of <= 9.5 barely matter, each gets 1/4."""
    x = u8((1, 4), data=[[1, 2, 10, 20]], scale=0.5, zp=0)
    got = run(Op.SOFTMAX, [x, beta32(1e-5)], [SOFTMAX_U8])[2]
    assert got.tolist() == [[64, 64, 64, 64]]


def test_runtime_beta_binds_late():
    """A non-constant beta or axis passes validation; the kernel waits for the value."""
    ctx = context(Op.SOFTMAX, [f32(), scalar(1.0, T.FLOAT32, const=False)], [F32_OUT])
    assert validate_operation(ctx) == V.V1_0
    with pytest.raises(ValueNotConstant):
        ctx.op.kernel(ctx)
    ctx = context(Op.LOG_SOFTMAX, [f32(), beta32(1.0), scalar(0, const=False)], [F32_OUT])
    assert validate_operation(ctx) == V.V1_2
    with pytest.raises(ValueNotConstant):
        ctx.op.kernel(ctx)


def test_unknown_rank_axis_is_checked_by_the_kernel():
    """With the rank unknown at bind time a bad axis fails when the kernel runs."""
    ctx = context(Op.SOFTMAX, [f32((2, 3), dims=None), beta32(1.0), axis(2)], [F32_OUT])
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(Exception):  # noqa: B017  (the executor turns it into GENERAL_FAILURE)
        kernel(RNG.random((2, 3)).astype(np.float32))


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

BAD_ROWS = [
    Bad("softmax-one-input", Op.SOFTMAX, [f32()], [F32_OUT], r"expected 2 to 3 inputs, got 1"),
    Bad(
        "softmax-four-inputs",
        Op.SOFTMAX,
        [f32(), beta32(1.0), axis(0), axis(0)],
        [F32_OUT],
        r"expected 2 to 3 inputs, got 4",
    ),
    Bad(
        "softmax-int32",
        Op.SOFTMAX,
        [i32(), beta32(1.0)],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported: TENSOR_FLOAT32 \(1\.0\)",
    ),
    Bad(
        "softmax-f16-beta-float32",
        Op.SOFTMAX,
        [f16(), beta32(1.0)],
        [F16_OUT],
        r"input 1 \(beta\) has type FLOAT32; with TENSOR_FLOAT16 supported: FLOAT16",
    ),
    Bad(
        "softmax-u8-beta-float16",
        Op.SOFTMAX,
        [u8(), beta16(1.0)],
        [SOFTMAX_U8],
        r"input 1 \(beta\) has type FLOAT16; with TENSOR_QUANT8_ASYMM supported: FLOAT32",
    ),
    Bad(
        "softmax-axis-float",
        Op.SOFTMAX,
        [f32(), beta32(1.0), beta32(0.0)],
        [F32_OUT],
        r"input 2 \(axis\) has type FLOAT32; with TENSOR_FLOAT32 supported: INT32",
    ),
    Bad(
        "softmax-beta-zero",
        Op.SOFTMAX,
        [f32(), beta32(0.0)],
        [F32_OUT],
        r"input 1 \(beta\) has value 0\.0; it must be > 0",
    ),
    Bad(
        "softmax-beta-negative",
        Op.SOFTMAX,
        [u8(), beta32(-1.0)],
        [SOFTMAX_U8],
        r"input 1 \(beta\) has value -1\.0; it must be > 0",
    ),
    Bad(
        "softmax-axis-too-big",
        Op.SOFTMAX,
        [f32((2, 3)), beta32(1.0), axis(2)],
        [F32_OUT],
        r"input 2 \(axis\) has value 2; with a rank 2 input 0 it must be in \[-2, 2\)",
    ),
    Bad(
        "softmax-axis-too-negative",
        Op.SOFTMAX,
        [f32((2, 3, 1)), beta32(1.0), axis(-4)],
        [F32_OUT],
        r"input 2 \(axis\) has value -4; with a rank 3 input 0 it must be in \[-3, 3\)",
    ),
    Bad(
        "softmax-rank5",
        Op.SOFTMAX,
        [f32((1, 1, 1, 2, 3)), beta32(1.0)],
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "softmax-u8-output-scale",
        Op.SOFTMAX,
        [u8(), beta32(1.0)],
        [out(U8, scale=1 / 128, zp=0)],
        r"output 0 has scale 0\.0078125 and zeroPoint 0; with TENSOR_QUANT8_ASYMM it must have "
        r"scale 1/256 \(0\.00390625\) and zeroPoint 0",
    ),
    Bad(
        "softmax-s8-output-zero-point",
        Op.SOFTMAX,
        [s8(), beta32(1.0)],
        [out(S8, scale=1 / 256, zp=0)],
        r"with TENSOR_QUANT8_ASYMM_SIGNED it must have scale 1/256 \(0\.00390625\) and "
        r"zeroPoint -128",
    ),
    Bad(
        "softmax-u8-tiny-beta-times-scale",
        Op.SOFTMAX,
        [u8(scale=2.0**-20), beta32(2.0**-10)],
        [SOFTMAX_U8],
        r"the reference needs beta \* scale \* 2\*\*26 > 1",
    ),
    Bad(
        "softmax-output-type",
        Op.SOFTMAX,
        [f32(), beta32(1.0)],
        [F16_OUT],
        r"output 0 \(output\) has type TENSOR_FLOAT16",
    ),
    Bad(
        "log-softmax-no-axis",
        Op.LOG_SOFTMAX,
        [f32(), beta32(1.0)],
        [F32_OUT],
        r"expected 3 inputs, got 2",
    ),
    Bad(
        "log-softmax-quant8",
        Op.LOG_SOFTMAX,
        [u8(), beta32(1.0), axis(-1)],
        [out(U8)],
        r"input 0 \(input\) has type TENSOR_QUANT8_ASYMM; supported: TENSOR_FLOAT32 \(1\.2\)",
    ),
    Bad(
        "log-softmax-f16-beta-float32",
        Op.LOG_SOFTMAX,
        [f16(), beta32(1.0), axis(-1)],
        [F16_OUT],
        r"input 1 \(beta\) has type FLOAT32; with TENSOR_FLOAT16 supported: FLOAT16",
    ),
    Bad(
        "log-softmax-axis-range",
        Op.LOG_SOFTMAX,
        [f32((4,)), beta32(1.0), axis(1)],
        [F32_OUT],
        r"input 2 \(axis\) has value 1; with a rank 1 input 0 it must be in \[-1, 1\)",
    ),
    Bad(
        "log-softmax-axis-no-value",
        Op.LOG_SOFTMAX,
        [f32(), beta32(1.0), t(T.TENSOR_INT32, (1,), data=[0])],
        [F32_OUT],
        r"input 2 \(axis\) has type TENSOR_INT32; with TENSOR_FLOAT32 supported: INT32",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_softmax(row: Bad):
    row.check()

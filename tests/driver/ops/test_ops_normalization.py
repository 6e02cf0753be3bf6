"""L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, INSTANCE_NORMALIZATION: tables of rows."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.normalization import inv_sqrt_multiplier
from ops_harness import Bad, Row, f16, f32, out, s8, scalar, t, u8

from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32, F16, U8, S8 = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)
L2, LRN, INST = Op.L2_NORMALIZATION, Op.LOCAL_RESPONSE_NORMALIZATION, Op.INSTANCE_NORMALIZATION
TRUE, FALSE = scalar(True, T.BOOL), scalar(False, T.BOOL)


def ref_l2(axis=-1):
    def fn(x):
        norm = np.sqrt(np.sum(np.square(x.astype(np.float64)), axis=axis, keepdims=True))
        return x / np.maximum(norm, 1e-6)

    return fn


def ref_lrn(radius, bias, alpha, beta, axis=-1):
    def fn(x):
        xm = np.moveaxis(x.astype(np.float64), axis, -1)
        result = np.empty_like(xm)
        size = xm.shape[-1]
        for i in range(size):
            window = xm[..., max(0, i - radius) : min(size, i + radius + 1)]
            result[..., i] = xm[..., i] / (bias + alpha * np.sum(window**2, axis=-1)) ** beta
        return np.moveaxis(result, -1, axis)

    return fn


def ref_instance(gamma, beta, epsilon, nchw=False):
    def fn(x):
        axes = (2, 3) if nchw else (1, 2)
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
        return (x - mean) * gamma / np.sqrt(var + epsilon) + beta

    return fn


L2_U8_OUT = out(U8, scale=1 / 128, zp=128)
L2_S8_OUT = out(S8, scale=1 / 128, zp=0)
F32S = T.FLOAT32

ROWS = [
    Row("l2-f32-rank4", L2, [f32((2, 2, 3, 5))], out(F32), ref_l2(), V.V1_0),
    Row("l2-f32-rank2-v12", L2, [f32((3, 4))], out(F32), ref_l2(), V.V1_2),
    Row("l2-f32-axis0", L2, [f32((3, 4, 2)), scalar(0)], out(F32), ref_l2(0), V.V1_2),
    Row("l2-f32-negative-axis", L2, [f32((2, 3, 4)), scalar(-2)], out(F32), ref_l2(-2)),
    Row("l2-f32-rank1", L2, [f32((6,))], out(F32), ref_l2()),
    Row("l2-f32-zeros", L2, [f32((2, 3), data=np.zeros((2, 3)))], out(F32), ref_l2()),
    Row("l2-f16", L2, [f16((2, 5)), scalar(1)], out(F16), ref_l2(1), V.V1_2),
    Row("l2-u8-last-axis", L2, [u8((2, 3, 4), scale=0.1, zp=120)], L2_U8_OUT, ref_l2(), V.V1_2),
    Row("l2-u8-axis1", L2, [u8((2, 5, 3), scale=0.1, zp=128), scalar(1)], L2_U8_OUT, ref_l2(1)),
    Row("l2-s8-last-axis", L2, [s8((3, 6), scale=0.3, zp=-2)], L2_S8_OUT, ref_l2(), V.V1_3),
    Row("l2-s8-axis0", L2, [s8((4, 3, 2), scale=0.3, zp=5), scalar(-3)], L2_S8_OUT, ref_l2(0)),
    Row(
        "l2-u8-zeros",
        L2,
        [u8((2, 3), scale=0.1, zp=7, data=np.full((2, 3), 7))],
        L2_U8_OUT,
        ref_l2(),
    ),
    Row(
        "lrn-f32-rank4",
        LRN,
        [f32((2, 2, 3, 6)), scalar(2), scalar(1.0, F32S), scalar(0.5, F32S), scalar(0.75, F32S)],
        out(F32),
        ref_lrn(2, 1.0, 0.5, 0.75),
        V.V1_0,
    ),
    Row(
        "lrn-f32-axis1-big-radius",
        LRN,
        [
            f32((2, 7, 3)),
            scalar(20),
            scalar(0.5, F32S),
            scalar(2.0, F32S),
            scalar(0.5, F32S),
            scalar(1),
        ],
        out(F32),
        ref_lrn(20, 0.5, 2.0, 0.5, 1),
        V.V1_2,
    ),
    Row(
        "lrn-f32-negative-axis-radius0",
        LRN,
        [
            f32((4, 5)),
            scalar(0),
            scalar(2.0, F32S),
            scalar(1.0, F32S),
            scalar(1.0, F32S),
            scalar(-2),
        ],
        out(F32),
        ref_lrn(0, 2.0, 1.0, 1.0, 0),
    ),
    Row(
        "lrn-f16",
        LRN,
        [f16((1, 2, 2, 5)), scalar(1), *(scalar(v, T.FLOAT16) for v in (1.0, 0.25, 0.5))],
        out(F16),
        ref_lrn(1, 1.0, 0.25, 0.5),
        V.V1_2,
    ),
    Row(
        "instance-f32-nhwc",
        INST,
        [f32((2, 3, 4, 5)), scalar(1.5, F32S), scalar(0.25, F32S), scalar(1e-3, F32S), FALSE],
        out(F32),
        ref_instance(1.5, 0.25, 1e-3),
        V.V1_2,
    ),
    Row(
        "instance-f32-nchw",
        INST,
        [f32((2, 3, 4, 2)), scalar(0.5, F32S), scalar(-1.0, F32S), scalar(1e-4, F32S), TRUE],
        out(F32),
        ref_instance(0.5, -1.0, 1e-4, nchw=True),
    ),
    Row(
        "instance-f16",
        INST,
        [f16((1, 3, 3, 2)), *(scalar(v, T.FLOAT16) for v in (1.0, 0.0, 0.001)), FALSE],
        out(F16),
        ref_instance(1.0, 0.0, 0.001),
        V.V1_2,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_normalization_rows(row: Row):
    row.check()


def test_inv_sqrt_multiplier_approximates_the_inverse_square_root():
    totals = np.array([2, 3, 17, 255, 65025, 1 << 20, (1 << 29) + 5, 2**31 - 1], dtype=np.int64)
    mult, shift = inv_sqrt_multiplier(totals)
    got = mult.astype(np.float64) * 2.0**shift / 2**31
    np.testing.assert_allclose(got, 1 / np.sqrt(totals), rtol=1e-5)
    mult, shift = inv_sqrt_multiplier(np.array([0, 1]))
    assert mult.tolist() == [2**31 - 1] * 2 and shift.tolist() == [0, 0]


F32_OUT = out(F32)
LRN_PARAMS = [scalar(1), scalar(1.0, F32S), scalar(1.0, F32S), scalar(0.5, F32S)]

BAD_ROWS = [
    Bad("l2-arity", L2, [f32(), scalar(0), scalar(0)], [F32_OUT], r"expected 1 to 2 inputs, got 3"),
    Bad("l2-rank5", L2, [f32((1, 1, 1, 2, 3))], [F32_OUT], r"input 0 has rank 5; the maximum"),
    Bad(
        "l2-axis",
        L2,
        [f32((2, 3)), scalar(2)],
        [F32_OUT],
        r"input 1 \(axis\) is 2; it must be in \[-2, 2\)",
    ),
    Bad(
        "l2-axis-type",
        L2,
        [f32((2, 3)), scalar(1.0, F32S)],
        [F32_OUT],
        r"input 1 \(axis\) has type FLOAT32",
    ),
    Bad(
        "l2-int32",
        L2,
        [t(T.TENSOR_INT32)],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32",
    ),
    Bad(
        "l2-u8-output-scale",
        L2,
        [u8((2, 3))],
        [out(U8, scale=0.5, zp=128)],
        r"output 0 has scale 0.5 and zero point 128; with TENSOR_QUANT8_ASYMM they must be 1/128",
    ),
    Bad(
        "l2-s8-output-zero-point",
        L2,
        [s8((2, 3))],
        [out(S8, scale=1 / 128, zp=128)],
        r"zero point 128; with TENSOR_QUANT8_ASYMM_SIGNED .* and 0",
    ),
    Bad(
        "l2-axis-not-constant",
        L2,
        [f32(), scalar(0, const=False)],
        [F32_OUT],
        r"input 1 \(axis\) must be a constant",
    ),
    Bad("lrn-arity", LRN, [f32(), *LRN_PARAMS[:3]], [F32_OUT], r"expected 5 to 6 inputs, got 4"),
    Bad(
        "lrn-f16-params",
        LRN,
        [f16((1, 2)), *LRN_PARAMS],
        [out(F16)],
        r"input 2 \(bias\) has type FLOAT32; with TENSOR_FLOAT16 supported: FLOAT16",
    ),
    Bad(
        "lrn-u8", LRN, [u8(), *LRN_PARAMS], [out(U8, scale=0.5)], r"TENSOR_QUANT8_ASYMM; supported"
    ),
    Bad("lrn-rank5", LRN, [f32((1, 1, 1, 1, 2)), *LRN_PARAMS], [F32_OUT], r"input 0 has rank 5"),
    Bad(
        "lrn-axis",
        LRN,
        [f32((2, 3)), *LRN_PARAMS, scalar(-3)],
        [F32_OUT],
        r"input 5 \(axis\) is -3",
    ),
    Bad(
        "lrn-radius-type",
        LRN,
        [f32(), scalar(1.0, F32S), *LRN_PARAMS[1:]],
        [F32_OUT],
        r"input 1 \(radius\) has type FLOAT32",
    ),
    Bad(
        "instance-rank",
        INST,
        [f32((2, 3, 4)), *(scalar(1.0, F32S) for _ in range(3)), FALSE],
        [F32_OUT],
        r"input 0 has rank 3; it must have rank 4",
    ),
    Bad(
        "instance-layout-type",
        INST,
        [f32((1, 2, 2, 1)), *(scalar(1.0, F32S) for _ in range(3)), scalar(0)],
        [F32_OUT],
        r"input 4 \(layout\) has type INT32",
    ),
    Bad(
        "instance-arity",
        INST,
        [f32((1, 2, 2, 1)), *(scalar(1.0, F32S) for _ in range(3))],
        [F32_OUT],
        r"expected 5 inputs, got 4",
    ),
    Bad(
        "instance-epsilon-not-constant",
        INST,
        [
            f32((1, 2, 2, 1)),
            scalar(1.0, F32S),
            scalar(1.0, F32S),
            scalar(1.0, F32S, const=False),
            FALSE,
        ],
        [F32_OUT],
        r"input 3 \(epsilon\) must be a constant",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid(row: Bad):
    row.check()

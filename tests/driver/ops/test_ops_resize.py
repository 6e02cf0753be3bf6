"""RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR: tables of rows.

References loop over the output pixels with the sampling rules of the
NNAPI specification (legacy, align_corners, half_pixel_centers), on real
values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
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
BILINEAR, NEAREST = Op.RESIZE_BILINEAR, Op.RESIZE_NEAREST_NEIGHBOR
TRUE, FALSE = scalar(True, T.BOOL), scalar(False, T.BOOL)


def _scale(in_size, out_size, align):
    return (in_size - 1) / (out_size - 1) if align and out_size > 1 else in_size / out_size


def ref_resize(bilinear: bool, oh: int, ow: int, align=False, half=False, nchw=False):
    def fn(x):
        if nchw:
            x = x.transpose(0, 2, 3, 1)
        n, h, w, c = x.shape
        sh, sw = _scale(h, oh, align), _scale(w, ow, align)
        result = np.zeros((n, oh, ow, c))
        for y in range(oh):
            for z in range(ow):
                if bilinear:
                    fy = (y + 0.5) * sh - 0.5 if half else y * sh
                    fz = (z + 0.5) * sw - 0.5 if half else z * sw
                    y0, z0 = max(math.floor(fy), 0), max(math.floor(fz), 0)
                    y1, z1 = min(math.ceil(fy), h - 1), min(math.ceil(fz), w - 1)
                    dy, dz = fy - y0, fz - z0
                    result[:, y, z] = (
                        x[:, y0, z0] * (1 - dy) * (1 - dz)
                        + x[:, y1, z0] * dy * (1 - dz)
                        + x[:, y0, z1] * (1 - dy) * dz
                        + x[:, y1, z1] * dy * dz
                    )
                else:
                    fy = (y + 0.5) * sh if half else y * sh
                    fz = (z + 0.5) * sw if half else z * sw
                    pick = (lambda v: math.floor(v + 0.5)) if align else math.floor
                    iy, iz = min(pick(fy), h - 1), min(pick(fz), w - 1)
                    result[:, y, z] = x[:, max(iy, 0), max(iz, 0)]
        return result.transpose(0, 3, 1, 2) if nchw else result

    return fn


def truncated(fn):
    """Quantized bilinear in the raw domain, as the reference: value + 0.5, truncated toward 0.

    (For negative int8 values this can differ from rounding the real result by
    up to 1.5 units, so these rows compare raw values.)
    """
    return lambda x: np.trunc(fn(x.astype(np.float64)) + 0.5)


def ints(*values):
    return [scalar(v) for v in values]


def scales(*values, type_=T.FLOAT32):
    return [scalar(v, type_) for v in values]


ROWS = [
    Row(
        "bilinear-f32-size-v10",
        BILINEAR,
        [f32((2, 3, 4, 2)), *ints(7, 5)],
        out(F32),
        ref_resize(True, 5, 7),
        V.V1_0,
        shape=(2, 5, 7, 2),
    ),
    Row(
        "bilinear-f32-scale",
        BILINEAR,
        [f32((1, 4, 3, 2)), *scales(1.7, 2.5)],
        out(F32),
        ref_resize(True, 10, 5),
        V.V1_2,
        shape=(1, 10, 5, 2),
    ),
    Row(
        "bilinear-f32-nchw-downscale",
        BILINEAR,
        [f32((1, 2, 6, 5)), *ints(3, 4), TRUE],
        out(F32),
        ref_resize(True, 4, 3, nchw=True),
        V.V1_2,
    ),
    Row(
        "bilinear-f32-align-corners",
        BILINEAR,
        [f32((1, 3, 3, 1)), *ints(5, 4), FALSE, TRUE],
        out(F32),
        ref_resize(True, 4, 5, align=True),
        V.V1_3,
    ),
    Row(
        "bilinear-f32-half-pixel",
        BILINEAR,
        [f32((2, 3, 4, 2)), *ints(6, 5), FALSE, FALSE, TRUE],
        out(F32),
        ref_resize(True, 5, 6, half=True),
        V.V1_3,
    ),
    Row(
        "bilinear-f16-scale",
        BILINEAR,
        [f16((1, 2, 2, 3)), *scales(2.0, 1.5, type_=T.FLOAT16), FALSE],
        out(F16),
        ref_resize(True, 3, 4),
        V.V1_2,
    ),
    Row(
        "bilinear-u8",
        BILINEAR,
        [u8((1, 3, 3, 2), scale=0.1, zp=100), *ints(5, 5), FALSE],
        out(U8, scale=0.1, zp=100),
        truncated(ref_resize(True, 5, 5)),
        V.V1_2,
        raw=True,
    ),
    Row(
        "bilinear-s8-half-pixel-nchw",
        BILINEAR,
        [s8((1, 2, 3, 4), scale=0.2, zp=-5), *ints(7, 4), TRUE, FALSE, TRUE],
        out(S8, scale=0.2, zp=-5),
        truncated(ref_resize(True, 4, 7, half=True, nchw=True)),
        V.V1_3,
        raw=True,
    ),
    Row(
        "nearest-f32-size",
        NEAREST,
        [f32((2, 3, 4, 2)), *ints(7, 5), FALSE],
        out(F32),
        ref_resize(False, 5, 7),
        V.V1_2,
    ),
    Row(
        "nearest-f32-scale-nchw",
        NEAREST,
        [f32((1, 2, 4, 3)), *scales(0.7, 1.6), TRUE],
        out(F32),
        ref_resize(False, 6, 2, nchw=True),
        shape=(1, 2, 6, 2),
    ),
    Row(
        "nearest-f32-align-corners",
        NEAREST,
        [f32((1, 4, 4, 1)), *ints(3, 7), FALSE, TRUE, FALSE],
        out(F32),
        ref_resize(False, 7, 3, align=True),
        V.V1_3,
    ),
    Row(
        "nearest-f32-half-pixel",
        NEAREST,
        [f32((1, 3, 5, 2)), *ints(2, 8), FALSE, FALSE, TRUE],
        out(F32),
        ref_resize(False, 8, 2, half=True),
    ),
    Row(
        "nearest-f16",
        NEAREST,
        [f16((1, 2, 3, 2)), *ints(5, 4), FALSE],
        out(F16),
        ref_resize(False, 4, 5),
    ),
    Row(
        "nearest-u8-downscale",
        NEAREST,
        [u8((1, 6, 6, 1), scale=0.5, zp=3), *ints(4, 2), FALSE],
        out(U8, scale=0.5, zp=3),
        ref_resize(False, 2, 4),
    ),
    Row(
        "nearest-s8",
        NEAREST,
        [s8((2, 3, 3, 2), scale=0.5, zp=1), *scales(2.0, 2.0), FALSE, FALSE, TRUE],
        out(S8, scale=0.5, zp=1),
        ref_resize(False, 6, 6, half=True),
        V.V1_3,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_resize_rows(row: Row):
    row.check()


F32_OUT = out(F32)

BAD_ROWS = [
    Bad(
        "bilinear-arity",
        BILINEAR,
        [f32((1, 2, 2, 1)), scalar(2)],
        [F32_OUT],
        r"expected 3 to 6 inputs, got 2",
    ),
    Bad(
        "nearest-needs-layout",
        NEAREST,
        [f32((1, 2, 2, 1)), *ints(2, 2)],
        [F32_OUT],
        r"expected 4 to 6 inputs, got 3",
    ),
    Bad(
        "bilinear-rank",
        BILINEAR,
        [f32((2, 2, 1)), *ints(2, 2)],
        [F32_OUT],
        r"input 0 has rank 3; it must have rank 4",
    ),
    Bad(
        "bilinear-mixed-size-types",
        BILINEAR,
        [f32((1, 2, 2, 1)), scalar(2), scalar(2.0, T.FLOAT32)],
        [F32_OUT],
        r"input 1 \(width\) has type INT32 but input 2 \(height\) has FLOAT32",
    ),
    Bad(
        "bilinear-f16-float32-scale",
        BILINEAR,
        [f16((1, 2, 2, 1)), *scales(2.0, 2.0)],
        [out(F16)],
        r"input 1 \(width\) has type FLOAT32; with TENSOR_FLOAT16 supported: FLOAT16, INT32",
    ),
    Bad(
        "bilinear-zero-size",
        BILINEAR,
        [f32((1, 2, 2, 1)), *ints(0, 2)],
        [F32_OUT],
        r"input 1 \(width\) is 0; the output size must be > 0",
    ),
    Bad(
        "bilinear-negative-scale",
        BILINEAR,
        [f32((1, 2, 2, 1)), *scales(-1.0, 2.0)],
        [F32_OUT],
        r"input 1 \(width\) is -1.0; the output scale",
    ),
    Bad(
        "bilinear-scale-to-zero",
        BILINEAR,
        [f32((1, 2, 2, 1)), *scales(0.2, 1.0)],
        [F32_OUT],
        r"the output width would be 0",
    ),
    Bad(
        "nearest-align-and-half-pixel",
        NEAREST,
        [f32((1, 2, 2, 1)), *ints(3, 3), FALSE, TRUE, TRUE],
        [F32_OUT],
        r"inputs 4 \(align_corners\) and 5 \(half_pixel_centers\) are both true",
    ),
    Bad(
        "nearest-layout-type",
        NEAREST,
        [f32((1, 2, 2, 1)), *ints(3, 3, 0)],
        [F32_OUT],
        r"input 3 \(layout\) has type INT32",
    ),
    Bad(
        "nearest-int32-input",
        NEAREST,
        [t(T.TENSOR_INT32, (1, 2, 2, 1)), *ints(3, 3), FALSE],
        [out(T.TENSOR_INT32)],
        r"TENSOR_INT32; supported",
    ),
    Bad(
        "bilinear-size-not-constant",
        BILINEAR,
        [f32((1, 2, 2, 1)), scalar(3, const=False), scalar(3)],
        [F32_OUT],
        r"input 1 \(width\) must be a constant",
    ),
    Bad(
        "bilinear-output-type",
        BILINEAR,
        [u8((1, 2, 2, 1)), *ints(3, 3)],
        [F32_OUT],
        r"output 0 \(output\) has type TENSOR_FLOAT32",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid(row: Bad):
    row.check()

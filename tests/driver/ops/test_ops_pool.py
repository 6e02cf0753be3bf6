"""AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D: tables of rows.

The reference loops over the output positions of small inputs and reduces
the window clipped to the input (padding never counts).
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.registry import validate_operation
from ops_harness import (
    NONE,
    Bad,
    Row,
    act,
    assert_matches,
    context,
    f16,
    f32,
    out,
    relu,
    relu1,
    relu6,
    s8,
    scalar,
    t,
    u8,
)

from nnhal.errors import GeneralFailure
from nnhal.types import FusedActivationFunc as Act
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32, F16, U8, S8 = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)
SAME, VALID = 1, 2
TRUE, FALSE = scalar(True, T.BOOL), scalar(False, T.BOOL)
AVG, MAX, L2 = Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D, Op.L2_POOL_2D


def ints(*values):
    return [scalar(v) for v in values]


def same_pads(size: int, k: int, stride: int) -> tuple[int, int]:
    total = max((-(-size // stride) - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def ref_pool(mode: str, pads, strides, window, nchw=False):
    """Reference on real NHWC values: pads (l, r, t, b), strides and window (w, h)."""
    left, right, top, bottom = pads
    sw, sh = strides
    kw, kh = window

    def pool(x):
        if nchw:
            x = x.transpose(0, 2, 3, 1)
        n, h, w, c = x.shape
        oh = (h + top + bottom - kh) // sh + 1
        ow = (w + left + right - kw) // sw + 1
        result = np.zeros((n, oh, ow, c))
        for y in range(oh):
            for z in range(ow):
                y0, z0 = y * sh - top, z * sw - left
                win = x[:, max(y0, 0) : min(y0 + kh, h), max(z0, 0) : min(z0 + kw, w)]
                if mode == "max":
                    result[:, y, z] = win.max(axis=(1, 2))
                elif mode == "average":
                    result[:, y, z] = win.mean(axis=(1, 2))
                else:
                    result[:, y, z] = np.sqrt(np.mean(np.square(win), axis=(1, 2)))
        return result.transpose(0, 3, 1, 2) if nchw else result

    return pool


def then(fn, activation):
    return lambda x: activation(fn(x))


X = f32((2, 5, 6, 3))
ROWS = [
    Row(
        "avg-f32-same",
        AVG,
        [X, *ints(SAME, 1, 1, 3, 3), NONE],
        out(F32),
        ref_pool("average", (*same_pads(6, 3, 1), *same_pads(5, 3, 1)), (1, 1), (3, 3)),
        V.V1_0,
        shape=(2, 5, 6, 3),
    ),
    Row(
        "avg-f32-explicit-stride-relu6",
        AVG,
        [X, *ints(1, 0, 2, 1, 2, 3, 2, 3), act(Act.RELU6)],
        out(F32),
        then(ref_pool("average", (1, 0, 2, 1), (2, 3), (2, 3)), relu6),
    ),
    Row(
        "avg-f32-nchw",
        AVG,
        [f32((1, 3, 5, 4)), *ints(SAME, 2, 2, 2, 2), NONE, TRUE],
        out(F32),
        ref_pool("average", (*same_pads(4, 2, 2), *same_pads(5, 2, 2)), (2, 2), (2, 2), nchw=True),
        V.V1_2,
        shape=(1, 3, 3, 2),
    ),
    Row(
        "avg-f16",
        AVG,
        [f16((1, 4, 4, 2)), *ints(VALID, 2, 2, 2, 2), NONE],
        out(F16),
        ref_pool("average", (0, 0, 0, 0), (2, 2), (2, 2)),
        V.V1_2,
    ),
    Row(
        "avg-u8-same-relu",
        AVG,
        [u8((1, 5, 5, 2), scale=0.1, zp=128), *ints(SAME, 2, 2, 3, 3), act(Act.RELU)],
        out(U8, scale=0.1, zp=128),
        then(ref_pool("average", (1, 1, 1, 1), (2, 2), (3, 3)), relu),
        V.V1_0,
    ),
    Row(
        "avg-s8-explicit",
        AVG,
        [s8((1, 4, 5, 3), scale=0.2, zp=-4), *ints(1, 1, 1, 1, 1, 1, 3, 2), NONE],
        out(S8, scale=0.2, zp=-4),
        ref_pool("average", (1, 1, 1, 1), (1, 1), (3, 2)),
        V.V1_3,
    ),
    Row(
        "max-f32-2x2-stride2",
        MAX,
        [f32((1, 6, 8, 4)), *ints(VALID, 2, 2, 2, 2), NONE],
        out(F32),
        ref_pool("max", (0, 0, 0, 0), (2, 2), (2, 2)),
        V.V1_0,
        shape=(1, 3, 4, 4),
    ),
    Row(
        "max-f32-padded-relu1",
        MAX,
        [X, *ints(2, 1, 0, 2, 1, 2, 3, 3), act(Act.RELU1)],
        out(F32),
        then(ref_pool("max", (2, 1, 0, 2), (1, 2), (3, 3)), relu1),
    ),
    Row(
        "max-f32-same-nchw-explicit",
        MAX,
        [f32((2, 2, 5, 5)), *ints(1, 1, 1, 1, 2, 2, 3, 3), NONE, TRUE],
        out(F32),
        ref_pool("max", (1, 1, 1, 1), (2, 2), (3, 3), nchw=True),
        V.V1_2,
    ),
    Row(
        "max-f16",
        MAX,
        [f16((1, 3, 3, 2)), *ints(SAME, 1, 1, 2, 2), NONE],
        out(F16),
        ref_pool("max", (0, 1, 0, 1), (1, 1), (2, 2)),
    ),
    Row(
        "max-u8-relu6",
        MAX,
        [u8((1, 4, 4, 3), scale=0.05, zp=100), *ints(SAME, 2, 2, 3, 3), act(Act.RELU6)],
        out(U8, scale=0.05, zp=100),
        then(ref_pool("max", (0, 1, 0, 1), (2, 2), (3, 3)), relu6),
    ),
    Row(
        "max-s8-nchw",
        MAX,
        [s8((1, 2, 4, 4), scale=0.1, zp=1), *ints(VALID, 1, 1, 2, 2), NONE, TRUE],
        out(S8, scale=0.1, zp=1),
        ref_pool("max", (0, 0, 0, 0), (1, 1), (2, 2), nchw=True),
        V.V1_3,
    ),
    # global pools (the whole input one window; few outputs, many taps: one reduction)
    Row(
        "avg-f32-global-7x7",
        AVG,
        [f32((2, 7, 7, 6)), *ints(VALID, 1, 1, 7, 7), act(Act.RELU6)],
        out(F32),
        then(ref_pool("average", (0, 0, 0, 0), (1, 1), (7, 7)), relu6),
        V.V1_0,
        shape=(2, 1, 1, 6),
    ),
    Row(
        "avg-f32-global-nchw",
        AVG,
        [f32((1, 5, 4, 6)), *ints(VALID, 1, 1, 6, 4), NONE, TRUE],
        out(F32),
        ref_pool("average", (0, 0, 0, 0), (1, 1), (6, 4), nchw=True),
        V.V1_2,
    ),
    Row(
        "avg-u8-global",
        AVG,
        [u8((1, 5, 5, 4), scale=0.1, zp=128), *ints(VALID, 1, 1, 5, 5), NONE],
        out(U8, scale=0.1, zp=128),
        ref_pool("average", (0, 0, 0, 0), (1, 1), (5, 5)),
        V.V1_0,
    ),
    Row(
        "max-f32-global-one-channel",
        MAX,
        [f32((1, 6, 6, 1)), *ints(VALID, 1, 1, 6, 6), NONE],
        out(F32),
        ref_pool("max", (0, 0, 0, 0), (1, 1), (6, 6)),
    ),
    Row(
        "l2-f32-large-window-strided",
        L2,
        [f32((1, 8, 8, 3)), *ints(VALID, 3, 3, 5, 5), NONE],
        out(F32),
        ref_pool("l2", (0, 0, 0, 0), (3, 3), (5, 5)),
    ),
    Row(
        "l2-f32-same",
        L2,
        [X, *ints(SAME, 1, 2, 2, 3), NONE],
        out(F32),
        ref_pool("l2", (*same_pads(6, 2, 1), *same_pads(5, 3, 2)), (1, 2), (2, 3)),
        V.V1_0,
    ),
    Row(
        "l2-f16-nchw-explicit-relu",
        L2,
        [f16((1, 2, 4, 4)), *ints(1, 0, 1, 0, 2, 2, 2, 2), act(Act.RELU), TRUE],
        out(F16),
        then(ref_pool("l2", (1, 0, 1, 0), (2, 2), (2, 2), nchw=True), relu),
        V.V1_2,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_pool_rows(row: Row):
    row.check()


F32_OUT = out(F32)
GOOD = [X, *ints(SAME, 1, 1, 2, 2), NONE]

BAD_ROWS = [
    Bad("avg-arity", AVG, GOOD[:6], [F32_OUT], r"expected 7 to 11 inputs, got 6"),
    Bad(
        "avg-9-inputs",
        AVG,
        [*GOOD, FALSE, scalar(1)],
        [F32_OUT],
        r"9 inputs; with implicit padding",
    ),
    Bad(
        "avg-input-type",
        AVG,
        [t(T.TENSOR_INT32, (1, 2, 2, 1)), *GOOD[1:]],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported",
    ),
    Bad("l2-u8", L2, [u8((1, 4, 4, 1)), *GOOD[1:]], [out(U8, scale=0.5)], r"TENSOR_QUANT8_ASYMM"),
    Bad("max-rank", MAX, [f32((4, 4, 1)), *GOOD[1:]], [F32_OUT], r"input 0 has rank 3"),
    Bad(
        "max-layout-type",
        MAX,
        [*GOOD, scalar(1)],
        [F32_OUT],
        r"input 7 \(layout\|filter_width\) has type INT32|input 7 \(layout\) has type INT32",
    ),
    Bad(
        "max-filter-zero",
        MAX,
        [X, *ints(SAME, 1, 1, 0, 2), NONE],
        [F32_OUT],
        r"input 4 \(filter_width\) is 0",
    ),
    Bad(
        "max-stride-zero",
        MAX,
        [X, *ints(SAME, 1, 0, 2, 2), NONE],
        [F32_OUT],
        r"input 3 \(stride_height\) is 0",
    ),
    Bad(
        "max-padding-code",
        MAX,
        [X, *ints(0, 1, 1, 2, 2), NONE],
        [F32_OUT],
        r"input 1 \(padding\) is 0; supported",
    ),
    Bad(
        "avg-pad-exceeds-filter",
        AVG,
        [X, *ints(0, 0, 2, 0, 1, 1, 2, 2), NONE],
        [F32_OUT],
        r"padding top is 2; it must be smaller than the filter height \(2\)",
    ),
    Bad(
        "avg-empty-output",
        AVG,
        [f32((1, 2, 2, 1)), *ints(VALID, 1, 1, 3, 3), NONE],
        [F32_OUT],
        r"output height would be 0",
    ),
    Bad(
        "avg-activation",
        AVG,
        [*GOOD[:6], scalar(4)],
        [F32_OUT],
        r"input 6 \(activation\) has value 4",
    ),
    Bad(
        "avg-filter-not-constant",
        AVG,
        [X, *ints(SAME, 1, 1), scalar(2, const=False), scalar(2), NONE],
        [F32_OUT],
        r"input 4 .* must be a constant",
    ),
    Bad("max-output-type", MAX, GOOD, [out(F16)], r"output 0 \(output\) has type TENSOR_FLOAT16"),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid(row: Bad):
    row.check()


def test_runtime_shape_failure():
    ins = [t(F32, (1, 2, 2, 1), dims=(1, 0, 0, 1)), *ints(VALID, 1, 1, 3, 3), NONE]
    ctx = context(MAX, ins, [F32_OUT])
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(GeneralFailure) as err:
        kernel(ins[0].data)
    assert_matches(err.value.message, r"MAX_POOL_2D .*output height would be 0")

"""Tables of DEPTH_TO_SPACE, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND
and CHANNEL_SHUFFLE (driver/ops/space.py).

References are element loops over the index formulas of the NNAPI docs (not
the kernels' reshape/transpose), in NHWC; an NCHW row transposes its input
and the reference's result. Negative rows assert INVALID_ARGUMENT naming the
operation, the operand and the rule.
"""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from nnhal.driver.ops.registry import validate_operation
from ops_harness import (
    Bad,
    Row,
    context,
    f16,
    f32,
    i32,
    ivec,
    no_value,
    out,
    run_model,
    s8,
    scalar,
    u8,
)

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32_OUT = out(T.TENSOR_FLOAT32)
NHWC, NCHW = scalar(False, T.BOOL), scalar(True, T.BOOL)

# ---------------------------------------------------------------------------
# References (NHWC)
# ---------------------------------------------------------------------------


def depth_to_space(x, s):
    n, h, w, c = x.shape
    co = c // (s * s)
    y = np.empty((n, h * s, w * s, co), x.dtype)
    for b, r, q, i, j in product(range(n), range(h), range(w), range(s), range(s)):
        y[b, r * s + i, q * s + j] = x[b, r, q, (i * s + j) * co : (i * s + j + 1) * co]
    return y


def space_to_depth(x, s):
    n, h, w, c = x.shape
    y = np.empty((n, h // s, w // s, c * s * s), x.dtype)
    for b, r, q, i, j in product(range(n), range(h // s), range(w // s), range(s), range(s)):
        y[b, r, q, (i * s + j) * c : (i * s + j + 1) * c] = x[b, r * s + i, q * s + j]
    return y


def batch_to_space(x, bh, bw):
    batch, h, w, c = x.shape
    n = batch // (bh * bw)
    y = np.empty((n, h * bh, w * bw, c), x.dtype)
    for b, r, q, i, j in product(range(n), range(h), range(w), range(bh), range(bw)):
        y[b, r * bh + i, q * bw + j] = x[(i * bw + j) * n + b, r, q]
    return y


def space_to_batch(x, bh, bw, pads, value):
    xp = np.pad(x, [(0, 0), pads[0], pads[1], (0, 0)], constant_values=value)
    n, h, w, c = xp.shape
    y = np.empty((n * bh * bw, h // bh, w // bw, c), x.dtype)
    for b, r, q, i, j in product(range(n), range(h // bh), range(w // bw), range(bh), range(bw)):
        y[(i * bw + j) * n + b, r, q] = xp[b, r * bh + i, q * bw + j]
    return y


def channel_shuffle(x, groups, axis):
    size = x.shape[axis]
    per_group = size // groups
    # output k = i * groups + j takes input i + j * per_group
    source = [(k // groups) + (k % groups) * per_group for k in range(size)]
    return np.take(x, source, axis=axis)


def nchw(ref):
    """The NHWC reference applied to an NCHW tensor."""
    return lambda x, *a: ref(x.transpose(0, 2, 3, 1), *a).transpose(0, 3, 1, 2)


# ---------------------------------------------------------------------------
# Positive rows
# ---------------------------------------------------------------------------

ROWS = [
    # --- DEPTH_TO_SPACE / SPACE_TO_DEPTH
    Row(
        "d2s-f32",
        Op.DEPTH_TO_SPACE,
        [f32((1, 2, 2, 8)), scalar(2)],
        F32_OUT,
        lambda x: depth_to_space(x, 2),
        V.V1_0,
        raw=True,
        shape=(1, 4, 4, 2),
    ),
    Row(
        "d2s-u8-block3",
        Op.DEPTH_TO_SPACE,
        [u8((2, 1, 2, 9)), scalar(3)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        lambda x: depth_to_space(x, 3),
        V.V1_0,
        raw=True,
    ),
    Row(
        "d2s-f16-nhwc-layout-given",
        Op.DEPTH_TO_SPACE,
        [f16((1, 1, 1, 4)), scalar(2), NHWC],
        out(T.TENSOR_FLOAT16),
        lambda x: depth_to_space(x, 2),
        V.V1_2,
        raw=True,
    ),
    Row(
        "d2s-f32-nchw",
        Op.DEPTH_TO_SPACE,
        [f32((2, 8, 2, 3)), scalar(2), NCHW],
        F32_OUT,
        nchw(lambda x: depth_to_space(x, 2)),
        V.V1_2,
        raw=True,
        shape=(2, 2, 4, 6),
    ),
    Row(
        "d2s-s8-block1",
        Op.DEPTH_TO_SPACE,
        [s8((1, 2, 2, 3)), scalar(1)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        lambda x: x,
        V.V1_3,
        raw=True,
    ),
    Row(
        "s2d-f32",
        Op.SPACE_TO_DEPTH,
        [f32((1, 4, 6, 2)), scalar(2)],
        F32_OUT,
        lambda x: space_to_depth(x, 2),
        V.V1_0,
        raw=True,
        shape=(1, 2, 3, 8),
    ),
    Row(
        "s2d-u8-nchw",
        Op.SPACE_TO_DEPTH,
        [u8((2, 3, 3, 3), zp=0), scalar(3), NCHW],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=0),
        nchw(lambda x: space_to_depth(x, 3)),
        V.V1_2,
        raw=True,
        shape=(2, 27, 1, 1),
    ),
    Row(
        "s2d-s8",
        Op.SPACE_TO_DEPTH,
        [s8((1, 2, 2, 1)), scalar(2)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        lambda x: space_to_depth(x, 2),
        V.V1_3,
        raw=True,
    ),
    Row(
        "s2d-f16-unknown-dims",
        Op.SPACE_TO_DEPTH,
        [f16((1, 4, 2, 1), dims=(0, 4, 0, 1)), scalar(2)],
        out(T.TENSOR_FLOAT16),
        lambda x: space_to_depth(x, 2),
        V.V1_2,
        raw=True,
        shape=(0, 2, 0, 4),
    ),
    # --- BATCH_TO_SPACE_ND
    Row(
        "b2s-f32",
        Op.BATCH_TO_SPACE_ND,
        [f32((4, 2, 2, 1)), ivec([2, 2])],
        F32_OUT,
        lambda x, _b: batch_to_space(x, 2, 2),
        V.V1_1,
        raw=True,
        shape=(1, 4, 4, 1),
    ),
    Row(
        "b2s-u8-uneven-blocks",
        Op.BATCH_TO_SPACE_ND,
        [u8((6, 1, 2, 2)), ivec([3, 1])],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        lambda x, _b: batch_to_space(x, 3, 1),
        V.V1_1,
        raw=True,
        shape=(2, 3, 2, 2),
    ),
    Row(
        "b2s-f16-nchw",
        Op.BATCH_TO_SPACE_ND,
        [f16((4, 3, 1, 2)), ivec([1, 2]), NCHW],
        out(T.TENSOR_FLOAT16),
        nchw(lambda x, _b: batch_to_space(x, 1, 2)),
        V.V1_2,
        raw=True,
        shape=(2, 3, 1, 4),
    ),
    Row(
        "b2s-s8-block-model-input",
        Op.BATCH_TO_SPACE_ND,
        [s8((4, 1, 1, 2)), ivec([2, 2], const=False)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        lambda x, _b: batch_to_space(x, 2, 2),
        V.V1_3,
        raw=True,
        shape=(0, 0, 0, 0),
    ),
    Row(
        "b2s-f32-nchw-block-model-input",
        Op.BATCH_TO_SPACE_ND,
        [f32((4, 2, 1, 3)), ivec([2, 2], const=False), NCHW],
        F32_OUT,
        nchw(lambda x, _b: batch_to_space(x, 2, 2)),
        raw=True,
    ),
    # --- SPACE_TO_BATCH_ND
    Row(
        "s2b-f32",
        Op.SPACE_TO_BATCH_ND,
        [f32((1, 4, 4, 1)), ivec([2, 2]), ivec([[0, 0], [0, 0]])],
        F32_OUT,
        lambda x, _b, _p: space_to_batch(x, 2, 2, [(0, 0), (0, 0)], 0),
        V.V1_1,
        raw=True,
        shape=(4, 2, 2, 1),
    ),
    Row(
        "s2b-f32-padded",
        Op.SPACE_TO_BATCH_ND,
        [f32((2, 3, 2, 2)), ivec([2, 3]), ivec([[1, 0], [2, 2]])],
        F32_OUT,
        lambda x, _b, _p: space_to_batch(x, 2, 3, [(1, 0), (2, 2)], 0),
        raw=True,
        shape=(12, 2, 2, 2),
    ),
    Row(
        "s2b-u8-zero-point-0",
        Op.SPACE_TO_BATCH_ND,
        [u8((1, 2, 3, 1), zp=0), ivec([2, 2]), ivec([[0, 0], [1, 0]])],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=0),
        lambda x, _b, _p: space_to_batch(x, 2, 2, [(0, 0), (1, 0)], 0),
        V.V1_1,
        raw=True,
    ),
    Row(
        "s2b-u8-pads-with-the-zero-point",
        Op.SPACE_TO_BATCH_ND,
        [u8((1, 3, 3, 1), zp=77), ivec([2, 2]), ivec([[1, 0], [0, 1]])],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=77),
        lambda x, _b, _p: space_to_batch(x, 2, 2, [(1, 0), (0, 1)], 77),
        V.V1_2,
        raw=True,
    ),
    Row(
        "s2b-s8-nchw",
        Op.SPACE_TO_BATCH_ND,
        [s8((1, 2, 2, 4), zp=-3), ivec([2, 2]), ivec([[0, 0], [0, 0]]), NCHW],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zp=-3),
        nchw(lambda x, _b, _p: space_to_batch(x, 2, 2, [(0, 0), (0, 0)], -3)),
        V.V1_3,
        raw=True,
        shape=(4, 2, 1, 2),
    ),
    Row(
        "s2b-f16-paddings-model-input",
        Op.SPACE_TO_BATCH_ND,
        [f16((1, 3, 1, 1)), ivec([3, 1]), ivec([[0, 0], [0, 0]], const=False), NHWC],
        out(T.TENSOR_FLOAT16),
        lambda x, _b, _p: space_to_batch(x, 3, 1, [(0, 0), (0, 0)], 0),
        V.V1_2,
        raw=True,
        shape=(0, 0, 0, 0),
    ),
    # --- CHANNEL_SHUFFLE
    Row(
        "shuffle-f32-last-axis",
        Op.CHANNEL_SHUFFLE,
        [f32((2, 2, 2, 6)), scalar(3), scalar(-1)],
        F32_OUT,
        lambda x: channel_shuffle(x, 3, 3),
        V.V1_2,
        raw=True,
        shape=(2, 2, 2, 6),
    ),
    Row(
        "shuffle-f32-axis0",
        Op.CHANNEL_SHUFFLE,
        [f32((12, 2)), scalar(4), scalar(0)],
        F32_OUT,
        lambda x: channel_shuffle(x, 4, 0),
        raw=True,
    ),
    Row(
        "shuffle-f16-1d",
        Op.CHANNEL_SHUFFLE,
        [f16((6,)), scalar(2), scalar(0)],
        out(T.TENSOR_FLOAT16),
        lambda x: channel_shuffle(x, 2, 0),
        V.V1_2,
        raw=True,
    ),
    Row(
        "shuffle-u8-middle-axis",
        Op.CHANNEL_SHUFFLE,
        [u8((2, 4, 3)), scalar(2), scalar(-2)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        lambda x: channel_shuffle(x, 2, 1),
        V.V1_2,
        raw=True,
    ),
    Row(
        "shuffle-s8-one-group",
        Op.CHANNEL_SHUFFLE,
        [s8((3, 4)), scalar(1), scalar(1)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        lambda x: x,
        V.V1_3,
        raw=True,
    ),
    Row(
        "shuffle-unknown-dims",
        Op.CHANNEL_SHUFFLE,
        [f32((2, 6), dims=(0, 0)), scalar(3), scalar(1)],
        F32_OUT,
        lambda x: channel_shuffle(x, 3, 1),
        raw=True,
        shape=(0, 0),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_space(row: Row):
    row.check()


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

BAD_ROWS = [
    # --- DEPTH_TO_SPACE / SPACE_TO_DEPTH
    Bad(
        "d2s-rank3",
        Op.DEPTH_TO_SPACE,
        [f32((2, 2, 4)), scalar(2)],
        [F32_OUT],
        r"input 0 has rank 3; it must have rank 4",
    ),
    Bad(
        "d2s-block0",
        Op.DEPTH_TO_SPACE,
        [f32((1, 2, 2, 4)), scalar(0)],
        [F32_OUT],
        r"input 1 \(block_size\) is 0; it must be at least 1",
    ),
    Bad(
        "d2s-depth-not-multiple",
        Op.DEPTH_TO_SPACE,
        [f32((1, 2, 2, 6)), scalar(2)],
        [F32_OUT],
        r"input 0 has depth 6, which is not a multiple of block_size\^2 = 4",
    ),
    Bad(
        "d2s-nchw-depth-not-multiple",
        Op.DEPTH_TO_SPACE,
        [f32((1, 6, 2, 4)), scalar(2), NCHW],
        [F32_OUT],
        r"input 0 has depth 6",
    ),
    Bad(
        "d2s-layout-no-value",
        Op.DEPTH_TO_SPACE,
        [f32((1, 2, 2, 4)), scalar(2), no_value(T.BOOL)],
        [F32_OUT],
        r"input 2 \(layout\) has no value; leave it off the input list for NHWC or give a BOOL",
    ),
    Bad(
        "d2s-layout-type",
        Op.DEPTH_TO_SPACE,
        [f32((1, 2, 2, 4)), scalar(2), scalar(1)],
        [F32_OUT],
        r"input 2 \(layout\) has type INT32; with TENSOR_FLOAT32 supported: BOOL",
    ),
    Bad(
        "d2s-i32",
        Op.DEPTH_TO_SPACE,
        [i32((1, 1, 1, 4)), scalar(2)],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported:",
    ),
    Bad(
        "d2s-u8-output-scale",
        Op.DEPTH_TO_SPACE,
        [u8((1, 1, 1, 4)), scalar(2)],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.1, zp=128)],
        r"output 0 has scale 0.1 and zero point 128",
    ),
    Bad(
        "d2s-four-inputs",
        Op.DEPTH_TO_SPACE,
        [f32((1, 1, 1, 4)), scalar(2), NHWC, NHWC],
        [F32_OUT],
        r"expected 2 to 3 inputs, got 4",
    ),
    Bad(
        "s2d-height-not-multiple",
        Op.SPACE_TO_DEPTH,
        [f32((1, 3, 4, 1)), scalar(2)],
        [F32_OUT],
        r"input 0 has height 3, which is not a multiple of block_size 2",
    ),
    Bad(
        "s2d-nchw-width-not-multiple",
        Op.SPACE_TO_DEPTH,
        [f32((1, 1, 4, 3)), scalar(2), NCHW],
        [F32_OUT],
        r"input 0 has width 3",
    ),
    Bad(
        "s2d-block-negative",
        Op.SPACE_TO_DEPTH,
        [f32((1, 2, 2, 1)), scalar(-2)],
        [F32_OUT],
        r"input 1 \(block_size\) is -2",
    ),
    # --- BATCH_TO_SPACE_ND
    Bad(
        "b2s-block-length",
        Op.BATCH_TO_SPACE_ND,
        [f32((4, 1, 1, 1)), ivec([2, 2, 1])],
        [F32_OUT],
        r"input 1 \(block_shape\) has shape \[3\]; it must be \[2\]",
    ),
    Bad(
        "b2s-block-zero",
        Op.BATCH_TO_SPACE_ND,
        [f32((4, 1, 1, 1)), ivec([2, 0])],
        [F32_OUT],
        r"input 1 \(block_shape\) is \[2, 0\]; both sizes must be at least 1",
    ),
    Bad(
        "b2s-batch-not-multiple",
        Op.BATCH_TO_SPACE_ND,
        [f32((3, 1, 1, 1)), ivec([2, 1])],
        [F32_OUT],
        r"input 0 has batch 3, which is not a multiple of block_shape 2 x 1",
    ),
    Bad(
        "b2s-rank2",
        Op.BATCH_TO_SPACE_ND,
        [f32((4, 1)), ivec([2, 2])],
        [F32_OUT],
        r"input 0 has rank 2; it must have rank 4",
    ),
    Bad(
        "b2s-layout-no-value",
        Op.BATCH_TO_SPACE_ND,
        [f32((4, 1, 1, 1)), ivec([2, 2]), no_value(T.BOOL)],
        [F32_OUT],
        r"input 2 \(layout\) has no value",
    ),
    Bad(
        "b2s-s8-output-zero-point",
        Op.BATCH_TO_SPACE_ND,
        [s8((4, 1, 1, 1)), ivec([2, 2])],
        [out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zp=1)],
        r"output 0 has scale 0.5 and zero point 1; with TENSOR_QUANT8_ASYMM_SIGNED",
    ),
    # --- SPACE_TO_BATCH_ND
    Bad(
        "s2b-padded-not-multiple",
        Op.SPACE_TO_BATCH_ND,
        [f32((1, 3, 4, 1)), ivec([2, 2]), ivec([[0, 0], [0, 0]])],
        [F32_OUT],
        r"padded height 3 is not a multiple of its block size 2",
    ),
    Bad(
        "s2b-negative-padding",
        Op.SPACE_TO_BATCH_ND,
        [f32((1, 2, 2, 1)), ivec([2, 2]), ivec([[0, -1], [0, 0]])],
        [F32_OUT],
        r"input 2 \(paddings\) is \[\[0, -1\], \[0, 0\]\]; a padding is negative",
    ),
    Bad(
        "s2b-paddings-shape",
        Op.SPACE_TO_BATCH_ND,
        [f32((1, 2, 2, 1)), ivec([2, 2]), ivec([[0, 0, 0], [0, 0, 0]])],
        [F32_OUT],
        r"input 2 \(paddings\) has shape \[2, 3\]; it must be \[2, 2\]",
    ),
    Bad(
        "s2b-block-zero",
        Op.SPACE_TO_BATCH_ND,
        [f32((1, 2, 2, 1)), ivec([0, 2]), ivec([[0, 0], [0, 0]])],
        [F32_OUT],
        r"input 1 \(block_shape\) is \[0, 2\]",
    ),
    Bad(
        "s2b-two-inputs",
        Op.SPACE_TO_BATCH_ND,
        [f32((1, 2, 2, 1)), ivec([2, 2])],
        [F32_OUT],
        r"expected 3 to 4 inputs, got 2",
    ),
    Bad(
        "s2b-layout-no-value",
        Op.SPACE_TO_BATCH_ND,
        [f32((1, 2, 2, 1)), ivec([2, 2]), ivec([[0, 0], [0, 0]]), no_value(T.BOOL)],
        [F32_OUT],
        r"input 3 \(layout\) has no value",
    ),
    # --- CHANNEL_SHUFFLE
    Bad(
        "shuffle-groups-zero",
        Op.CHANNEL_SHUFFLE,
        [f32((2, 4)), scalar(0), scalar(1)],
        [F32_OUT],
        r"input 1 \(num_groups\) is 0; it must be at least 1",
    ),
    Bad(
        "shuffle-not-multiple",
        Op.CHANNEL_SHUFFLE,
        [f32((2, 4)), scalar(3), scalar(1)],
        [F32_OUT],
        r"input 0 has size 4 on axis 1, which is not a multiple of num_groups 3",
    ),
    Bad(
        "shuffle-axis-out-of-range",
        Op.CHANNEL_SHUFFLE,
        [f32((2, 4)), scalar(2), scalar(-3)],
        [F32_OUT],
        r"input 2 \(axis\) is -3; for a rank 2 input it must be in \[-2, 2\)",
    ),
    Bad(
        "shuffle-rank5",
        Op.CHANNEL_SHUFFLE,
        [f32((1, 1, 1, 1, 2)), scalar(1), scalar(0)],
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "shuffle-i32",
        Op.CHANNEL_SHUFFLE,
        [i32((2, 2)), scalar(1), scalar(0)],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported:",
    ),
    Bad(
        "shuffle-u8-output-scale",
        Op.CHANNEL_SHUFFLE,
        [u8((2, 2)), scalar(1), scalar(0)],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.25, zp=128)],
        r"output 0 has scale 0.25",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_space_invalid(row: Bad):
    row.check()


@pytest.mark.parametrize(
    "op, ins, args, match",
    [
        (
            Op.BATCH_TO_SPACE_ND,
            [f32((4, 1, 1, 1)), ivec([2, 2], const=False)],
            (np.zeros((4, 1, 1, 1), np.float32), np.array([3, 1], np.int32)),
            r"input 0 has batch 4, which is not a multiple of block_shape 3 x 1",
        ),
        (
            Op.BATCH_TO_SPACE_ND,
            [f32((4, 1, 1, 1)), ivec([2, 2], const=False)],
            (np.zeros((4, 1, 1, 1), np.float32), np.array([-1, 1], np.int32)),
            r"input 1 \(block_shape\) is \[-1, 1\]; both sizes must be at least 1",
        ),
        (
            Op.SPACE_TO_BATCH_ND,
            [f32((1, 2, 2, 1)), ivec([2, 2]), ivec([[0, 0], [0, 0]], const=False)],
            (np.zeros((1, 2, 2, 1), np.float32), None, np.array([[0, 1], [0, 0]], np.int32)),
            r"padded height 3 is not a multiple of its block size 2",
        ),
        (
            Op.DEPTH_TO_SPACE,
            [f32((1, 1, 1, 4), dims=(0, 0, 0, 0)), scalar(2)],
            (np.zeros((1, 1, 1, 6), np.float32),),
            r"depth 6 is not a multiple of 4",
        ),
        (
            Op.SPACE_TO_DEPTH,
            [f32((1, 2, 2, 1), dims=(0, 0, 0, 0)), scalar(2)],
            (np.zeros((0, 2, 2, 1), np.float32),),
            r"zero-sized input: input 0 ",
        ),
        (
            Op.CHANNEL_SHUFFLE,
            [f32((2, 4), dims=(0, 0)), scalar(3), scalar(1)],
            (np.zeros((2, 4), np.float32),),
            r"axis 1 of size 4 cannot be split into 3 groups",
        ),
    ],
    ids=lambda v: v.name if isinstance(v, Op) else None,
)
def test_runtime_failures(op, ins, args, match):
    ctx = context(op, ins, [F32_OUT])
    validate_operation(ctx)
    with pytest.raises(GeneralFailure, match=match) as err:
        ctx.op.kernel(ctx)(*args)
    assert err.value.message.startswith(f"{op.name} (")


@pytest.mark.usefixtures("shapes_mode")
@pytest.mark.parametrize("layout", [False, True])
def test_layout_given_at_run_time(layout):
    """A layout that is a model input is bound when the step runs."""
    x = np.arange(32, dtype=np.float32).reshape(1, 4, 2, 4)  # depth 4 in either layout
    (y,) = run_model(
        Op.DEPTH_TO_SPACE,
        [("in", T.TENSOR_FLOAT32, x), ("const", T.INT32, 2), ("in", T.BOOL, np.bool_(layout))],
        [(T.TENSOR_FLOAT32, [0, 0, 0, 0])],
    )
    want = nchw(depth_to_space)(x, 2) if layout else depth_to_space(x, 2)
    np.testing.assert_array_equal(y, want)


@pytest.mark.usefixtures("shapes_mode")
def test_space_to_batch_then_back_through_the_executor():
    x = np.arange(18, dtype=np.int8).reshape(1, 3, 3, 2)
    (y,) = run_model(
        Op.SPACE_TO_BATCH_ND,
        [
            ("in", T.TENSOR_QUANT8_ASYMM_SIGNED, x, 0.5, -1),
            ("const", T.TENSOR_INT32, [2, 2]),
            ("in", T.TENSOR_INT32, np.array([[1, 0], [0, 1]], np.int32)),
        ],
        [(T.TENSOR_QUANT8_ASYMM_SIGNED, [4, 2, 2, 2], 0.5, -1)],
    )
    np.testing.assert_array_equal(y, space_to_batch(x, 2, 2, [(1, 0), (0, 1)], -1))
    (z,) = run_model(
        Op.BATCH_TO_SPACE_ND,
        [("in", T.TENSOR_QUANT8_ASYMM_SIGNED, y, 0.5, -1), ("const", T.TENSOR_INT32, [2, 2])],
        [(T.TENSOR_QUANT8_ASYMM_SIGNED, [1, 4, 4, 2], 0.5, -1)],
    )
    np.testing.assert_array_equal(z[:, 1:, :3], x)

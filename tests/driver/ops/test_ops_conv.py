"""CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D: tables of positive rows.

The rows compare with direct references written here (a loop over the output
positions of small inputs, on real values). Negative rows and run-time
failures: tests/test_ops_conv_invalid.py; shared operands: tests/conv_operands.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from conv_operands import (
    B1,
    F16,
    F32,
    FALSE,
    PC_SCALES,
    S8,
    SAME,
    TRUE,
    U8,
    VALID,
    W1,
    WPC,
    WPC_S8,
    WQ,
    WS,
    X1,
    XN,
    XQ,
    XS,
    bias_for,
    ints,
    per_channel,
)
from nnhal.driver.ops import conv as conv_ops
from ops_harness import (
    NONE,
    Row,
    act,
    f16,
    f32,
    i32,
    ivec,
    out,
    relu,
    relu1,
    relu6,
    s8,
    u8,
)

from nnhal.types import FusedActivationFunc as Act
from nnhal.types import HalVersion as V
from nnhal.types import OperationType as Op

# ---------------------------------------------------------------------------
# References (NHWC, real values)
# ---------------------------------------------------------------------------


def same_pads(size: int, k: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TensorFlow SAME padding: output ceil(size / stride), extra split with the odd one last."""
    eff = (k - 1) * dilation + 1
    total = max((-(-size // stride) - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


def ref_conv(x, w, b, pads, strides=(1, 1), dilation=(1, 1), groups=1, depthwise=False):
    """x [N,H,W,C], w [O,KH,KW,Cg] (depthwise: [1,KH,KW,C*M]); pads (l, r, t, b); (w, h) pairs."""
    left, right, top, bottom = pads
    sw, sh = strides
    dw, dh = dilation
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    n, hp, wp, c = xp.shape
    if depthwise:
        kh, kw, o = w.shape[1], w.shape[2], w.shape[3]
    else:
        o, kh, kw, cg = w.shape
    oh = (hp - (kh - 1) * dh - 1) // sh + 1
    ow = (wp - (kw - 1) * dw - 1) // sw + 1
    result = np.zeros((n, oh, ow, o))
    for y in range(oh):
        for z in range(ow):
            win = xp[
                :,
                y * sh : y * sh + (kh - 1) * dh + 1 : dh,
                z * sw : z * sw + (kw - 1) * dw + 1 : dw,
            ]
            if depthwise:
                m = o // c
                result[:, y, z] = (np.repeat(win, m, axis=3) * w[0]).sum(axis=(1, 2))
            else:
                og = o // groups
                for g in range(groups):
                    part = win[..., g * cg : (g + 1) * cg]
                    result[:, y, z, g * og : (g + 1) * og] = np.einsum(
                        "nijc,oijc->no", part, w[g * og : (g + 1) * og]
                    )
    return result + b


def ref_transpose(x, w, b, pads, strides):
    """x [N,H,W,C], w [O,KH,KW,C]; pads (l, r, t, b), r/b may be negative."""
    left, right, top, bottom = pads
    sw, sh = strides
    n, h, wd, _ = x.shape
    o, kh, kw, _ = w.shape
    full = np.zeros(
        (n, (h - 1) * sh + kh + max(0, -bottom), (wd - 1) * sw + kw + max(0, -right), o)
    )
    for y in range(h):
        for z in range(wd):
            full[:, y * sh : y * sh + kh, z * sw : z * sw + kw] += np.einsum(
                "nc,oijc->nijo", x[:, y, z], w
            )
    oh = h * sh + kh - sh - top - bottom
    ow = wd * sw + kw - sw - left - right
    return full[:, top : top + oh, left : left + ow] + b


def nchw(fn):
    """A reference on NCHW data from an NHWC one (first argument transposed)."""

    def wrapped(x, *rest):
        return fn(x.transpose(0, 2, 3, 1), *rest).transpose(0, 3, 1, 2)

    return wrapped


def quant_bias(scale_in: float, scales) -> callable:
    """Real per-channel bias from its int32 values."""
    return lambda b: b * scale_in * np.asarray(scales)


# ---------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------


CONV_ROWS = [
    Row(
        "conv-f32-same",
        Op.CONV_2D,
        [X1, W1, B1, *ints(SAME, 1, 1), NONE],
        out(F32),
        lambda x, w, b: ref_conv(x, w, b, (*same_pads(6, 3, 1), *same_pads(5, 3, 1))),
        V.V1_0,
        shape=(2, 5, 6, 4),
    ),
    Row(
        "conv-f32-valid-stride-relu",
        Op.CONV_2D,
        [X1, W1, B1, *ints(VALID, 2, 1), act(Act.RELU)],
        out(F32),
        lambda x, w, b: relu(ref_conv(x, w, b, (0, 0, 0, 0), (2, 1))),
        shape=(2, 3, 2, 4),
    ),
    Row(
        "conv-f32-explicit-pads-stride",
        Op.CONV_2D,
        [X1, W1, B1, *ints(1, 2, 0, 1, 2, 3), act(Act.RELU1)],
        out(F32),
        lambda x, w, b: relu1(ref_conv(x, w, b, (1, 2, 0, 1), (2, 3))),
    ),
    Row(
        "conv-f32-1x1",
        Op.CONV_2D,
        [X1, f32((2, 1, 1, 3), const=True), f32((2,), const=True), *ints(VALID, 1, 1), NONE],
        out(F32),
        lambda x, w, b: ref_conv(x, w, b, (0, 0, 0, 0)),
    ),
    Row(
        "conv-f32-dilation-nhwc",
        Op.CONV_2D,
        [
            f32((1, 7, 8, 2)),
            f32((3, 2, 3, 2), const=True),
            f32((3,)),
            *ints(SAME, 1, 1, 0),
            FALSE,
            *ints(2, 3),
        ],
        out(F32),
        lambda x, w, b: ref_conv(
            x, w, b, (*same_pads(8, 3, 1, 2), *same_pads(7, 2, 1, 3)), (1, 1), (2, 3)
        ),
        V.V1_2,
    ),
    Row(
        "conv-f32-explicit-dilation-stride",
        Op.CONV_2D,
        [
            f32((1, 9, 9, 2)),
            f32((2, 3, 3, 2)),
            f32((2,)),
            *ints(1, 1, 2, 0, 2, 1, 0),
            FALSE,
            *ints(2, 1),
        ],
        out(F32),
        lambda x, w, b: ref_conv(x, w, b, (1, 1, 2, 0), (2, 1), (2, 1)),
        V.V1_2,
    ),
    Row(
        "conv-f32-nchw",
        Op.CONV_2D,
        [XN, f32((2, 3, 2, 3), const=True), f32((2,), const=True), *ints(SAME, 2, 2, 0), TRUE],
        out(F32),
        nchw(lambda x, w, b: ref_conv(x, w, b, (*same_pads(5, 2, 2), *same_pads(6, 3, 2)), (2, 2))),
        V.V1_2,
        shape=(1, 2, 3, 3),
    ),
    Row(
        "conv-f32-weights-as-inputs",
        Op.CONV_2D,
        [X1, f32((4, 3, 3, 3)), f32((4,)), *ints(SAME, 1, 1), act(Act.RELU6)],
        out(F32),
        lambda x, w, b: relu6(ref_conv(x, w, b, (*same_pads(6, 3, 1), *same_pads(5, 3, 1)))),
    ),
    Row(
        "conv-f16",
        Op.CONV_2D,
        [
            f16((1, 4, 4, 2)),
            f16((2, 2, 2, 2), const=True),
            f16((2,), const=True),
            *ints(VALID, 1, 1),
            NONE,
        ],
        out(F16),
        lambda x, w, b: ref_conv(x, w, b, (0, 0, 0, 0)),
        V.V1_2,
    ),
    Row(
        "conv-u8",
        Op.CONV_2D,
        [XQ, WQ, bias_for(4, 0.05 * 0.02), *ints(SAME, 1, 1), NONE],
        out(U8, scale=0.1, zp=128),
        lambda x, w, b: ref_conv(x, w, b, (1, 1, 1, 1)),
        V.V1_0,
    ),
    Row(
        "conv-u8-relu-output-scale-small",
        Op.CONV_2D,
        [XQ, WQ, bias_for(4, 0.05 * 0.02), *ints(VALID, 2, 2), act(Act.RELU)],
        out(U8, scale=0.0005, zp=10),
        lambda x, w, b: relu(ref_conv(x, w, b, (0, 0, 0, 0), (2, 2))),
        V.V1_2,  # outputScale <= inputScale * filterScale needs HAL 1.2
    ),
    Row(
        "conv-s8-nchw",
        Op.CONV_2D,
        [
            s8((1, 3, 5, 5), scale=0.05, zp=-3),
            WS,
            bias_for(4, 0.05 * 0.02),
            *ints(SAME, 1, 1, 0),
            TRUE,
        ],
        out(S8, scale=0.1, zp=2),
        nchw(lambda x, w, b: ref_conv(x, w, b, (1, 1, 1, 1))),
        V.V1_3,
    ),
    Row(
        "conv-u8-per-channel",
        Op.CONV_2D,
        [XQ, WPC, i32((4,), const=True), *ints(SAME, 1, 1), act(Act.RELU6)],
        out(U8, scale=0.08, zp=5),
        lambda x, w, b: relu6(ref_conv(x, w, quant_bias(0.05, PC_SCALES)(b), (1, 1, 1, 1))),
        V.V1_2,
    ),
    Row(
        "conv-s8-per-channel-explicit",
        Op.CONV_2D,
        [XS, WPC_S8, i32((4,), const=True), *ints(0, 1, 1, 0, 1, 2), act(Act.RELU1)],
        out(S8, scale=0.02, zp=-1),
        lambda x, w, b: relu1(ref_conv(x, w, quant_bias(0.05, PC_SCALES)(b), (0, 1, 1, 0), (1, 2))),
        V.V1_3,
    ),
]

DW_W = f32((1, 3, 3, 6), const=True)
DEPTHWISE_ROWS = [
    Row(
        "depthwise-f32-same-m2",
        Op.DEPTHWISE_CONV_2D,
        [f32((2, 5, 4, 3)), DW_W, f32((6,), const=True), *ints(SAME, 1, 1, 2), NONE],
        out(F32),
        lambda x, w, b: ref_conv(
            x, w, b, (*same_pads(4, 3, 1), *same_pads(5, 3, 1)), depthwise=True
        ),
        V.V1_0,
        shape=(2, 5, 4, 6),
    ),
    Row(
        "depthwise-f32-explicit-stride-relu",
        Op.DEPTHWISE_CONV_2D,
        [f32((1, 6, 7, 6)), DW_W, f32((6,)), *ints(1, 0, 2, 1, 2, 3, 1), act(Act.RELU)],
        out(F32),
        lambda x, w, b: relu(ref_conv(x, w, b, (1, 0, 2, 1), (2, 3), depthwise=True)),
    ),
    Row(
        "depthwise-f32-nchw-dilation",
        Op.DEPTHWISE_CONV_2D,
        [f32((1, 3, 7, 7)), DW_W, f32((6,)), *ints(SAME, 1, 1, 2, 0), TRUE, *ints(2, 2)],
        out(F32),
        nchw(
            lambda x, w, b: ref_conv(
                x, w, b, (*same_pads(7, 3, 1, 2),) * 2, (1, 1), (2, 2), depthwise=True
            )
        ),
        V.V1_2,
    ),
    Row(
        "depthwise-f16-m1",
        Op.DEPTHWISE_CONV_2D,
        [f16((1, 4, 4, 2)), f16((1, 2, 2, 2)), f16((2,)), *ints(VALID, 1, 1, 1), act(Act.RELU6)],
        out(F16),
        lambda x, w, b: relu6(ref_conv(x, w, b, (0, 0, 0, 0), depthwise=True)),
        V.V1_2,
    ),
    Row(
        "depthwise-u8",
        Op.DEPTHWISE_CONV_2D,
        [
            u8((1, 4, 5, 2), scale=0.1, zp=100),
            u8((1, 3, 3, 4), scale=0.05, zp=128),
            bias_for(4, 0.005),
            *ints(SAME, 1, 1, 2),
            NONE,
        ],
        out(U8, scale=0.2, zp=128),
        lambda x, w, b: ref_conv(x, w, b, (1, 1, 1, 1), depthwise=True),
    ),
    Row(
        "depthwise-s8-per-channel-nchw",
        Op.DEPTHWISE_CONV_2D,
        [
            s8((1, 2, 4, 4), scale=0.1, zp=3),
            per_channel((1, 2, 2, 4), (0.01, 0.02, 0.03, 0.04), 3),
            i32((4,)),
            *ints(VALID, 1, 2, 2, 0),
            TRUE,
        ],
        out(S8, scale=0.05, zp=-4),
        nchw(
            lambda x, w, b: ref_conv(
                x,
                w,
                quant_bias(0.1, (0.01, 0.02, 0.03, 0.04))(b),
                (0, 0, 0, 0),
                (1, 2),
                depthwise=True,
            )
        ),
        V.V1_3,
    ),
]

GROUPED_ROWS = [
    Row(
        "grouped-f32-explicit",
        Op.GROUPED_CONV_2D,
        [
            f32((2, 5, 5, 4)),
            f32((6, 3, 2, 2), const=True),
            f32((6,), const=True),
            *ints(1, 0, 1, 1, 1, 2, 2),
            NONE,
            FALSE,
        ],
        out(F32),
        lambda x, w, b: ref_conv(x, w, b, (1, 0, 1, 1), (1, 2), groups=2),
        V.V1_2,
    ),
    Row(
        "grouped-f32-implicit-nchw-relu",
        Op.GROUPED_CONV_2D,
        [
            f32((1, 6, 4, 5)),
            f32((3, 2, 2, 2)),
            f32((3,)),
            *ints(SAME, 2, 1, 3),
            act(Act.RELU),
            TRUE,
        ],
        out(F32),
        nchw(
            lambda x, w, b: relu(
                ref_conv(x, w, b, (*same_pads(5, 2, 2), *same_pads(4, 2, 1)), (2, 1), groups=3)
            )
        ),
    ),
    Row(
        "grouped-f16",
        Op.GROUPED_CONV_2D,
        [f16((1, 3, 3, 4)), f16((4, 2, 2, 2)), f16((4,)), *ints(VALID, 1, 1, 2), NONE, FALSE],
        out(F16),
        lambda x, w, b: ref_conv(x, w, b, (0, 0, 0, 0), groups=2),
    ),
    Row(
        "grouped-u8-per-channel",
        Op.GROUPED_CONV_2D,
        [
            u8((1, 4, 4, 4), scale=0.1, zp=128),
            per_channel((4, 2, 2, 2), PC_SCALES),
            i32((4,)),
            *ints(SAME, 1, 1, 2),
            NONE,
            FALSE,
        ],
        out(U8, scale=0.1, zp=120),
        lambda x, w, b: ref_conv(x, w, quant_bias(0.1, PC_SCALES)(b), (0, 1, 0, 1), groups=2),
    ),
    Row(
        "grouped-s8",
        Op.GROUPED_CONV_2D,
        [
            s8((1, 4, 4, 4), scale=0.1, zp=-1),
            s8((2, 2, 2, 2), scale=0.05, zp=3),
            bias_for(2, 0.005),
            *ints(VALID, 1, 1, 2),
            act(Act.RELU),
            FALSE,
        ],
        out(S8, scale=0.2, zp=0),
        lambda x, w, b: relu(ref_conv(x, w, b, (0, 0, 0, 0), groups=2)),
        V.V1_3,
    ),
]


def tpads(out_size: int, stride: int, k: int) -> tuple[int, int]:
    """Transpose SAME padding for the requested output size (the tail may be negative)."""
    needed = (-(-out_size // stride) - 1) * stride + k
    head = max(needed - out_size, 0) // 2
    return head, needed - out_size - head


TRANSPOSE_ROWS = [
    Row(
        "transpose-f32-explicit",
        Op.TRANSPOSE_CONV_2D,
        [
            f32((2, 3, 4, 3)),
            f32((2, 3, 2, 3), const=True),
            f32((2,), const=True),
            *ints(1, 0, 0, 1, 2, 2),
            NONE,
            FALSE,
        ],
        out(F32),
        lambda x, w, b: ref_transpose(x, w, b, (1, 0, 0, 1), (2, 2)),
        V.V1_2,
        shape=(2, 6, 7, 2),
    ),
    Row(
        "transpose-f32-same-output-shape",
        Op.TRANSPOSE_CONV_2D,
        [
            f32((1, 3, 3, 2)),
            f32((3, 3, 3, 2)),
            f32((3,)),
            ivec([1, 6, 6, 3]),
            *ints(SAME, 2, 2),
            act(Act.RELU),
            FALSE,
        ],
        out(F32),
        lambda x, w, b, _s: relu(
            ref_transpose(x, w, b, (*tpads(6, 2, 3), *tpads(6, 2, 3)), (2, 2))
        ),
        shape=(1, 6, 6, 3),
    ),
    Row(
        "transpose-f32-valid-nchw",
        Op.TRANSPOSE_CONV_2D,
        [
            f32((1, 2, 3, 2)),
            f32((2, 2, 3, 2)),
            f32((2,)),
            ivec([1, 2, 4, 6]),
            *ints(VALID, 3, 1),
            NONE,
            TRUE,
        ],
        out(F32),
        nchw(lambda x, w, b, _s: ref_transpose(x, w, b, (0, 0, 0, 0), (3, 1))),
    ),
    Row(
        "transpose-f32-negative-tail-pad",
        Op.TRANSPOSE_CONV_2D,
        [f32((1, 2, 2, 1)), f32((1, 3, 3, 1)), f32((1,)), *ints(1, -1, 1, -1, 2, 2), NONE, FALSE],
        out(F32),
        lambda x, w, b: ref_transpose(x, w, b, (1, -1, 1, -1), (2, 2)),
    ),
    Row(
        "transpose-f16",
        Op.TRANSPOSE_CONV_2D,
        [
            f16((1, 2, 2, 2)),
            f16((2, 2, 2, 2)),
            f16((2,)),
            *ints(0, 0, 0, 0, 1, 1),
            act(Act.RELU1),
            FALSE,
        ],
        out(F16),
        lambda x, w, b: relu1(ref_transpose(x, w, b, (0, 0, 0, 0), (1, 1))),
    ),
    Row(
        "transpose-u8",
        Op.TRANSPOSE_CONV_2D,
        [
            u8((1, 2, 3, 2), scale=0.1, zp=120),
            u8((2, 2, 2, 2), scale=0.05, zp=130),
            bias_for(2, 0.005),
            *ints(0, 0, 0, 0, 2, 2),
            NONE,
            FALSE,
        ],
        out(U8, scale=0.1, zp=128),
        lambda x, w, b: ref_transpose(x, w, b, (0, 0, 0, 0), (2, 2)),
    ),
    Row(
        "transpose-u8-per-channel",
        Op.TRANSPOSE_CONV_2D,
        [
            u8((1, 3, 3, 3), scale=0.1, zp=128),
            per_channel((4, 3, 3, 3), PC_SCALES),
            i32((4,)),
            ivec([1, 6, 6, 4]),
            *ints(SAME, 2, 2),
            act(Act.RELU),
            FALSE,
        ],
        out(U8, scale=0.2, zp=0),
        lambda x, w, b, _s: relu(
            ref_transpose(x, w, quant_bias(0.1, PC_SCALES)(b), (*tpads(6, 2, 3),) * 2, (2, 2))
        ),
    ),
    Row(
        "transpose-s8-nchw",
        Op.TRANSPOSE_CONV_2D,
        [
            s8((1, 2, 2, 2), scale=0.1, zp=-2),
            s8((3, 2, 2, 2), scale=0.05, zp=0),
            bias_for(3, 0.005),
            *ints(0, 0, 0, 0, 1, 1),
            NONE,
            TRUE,
        ],
        out(S8, scale=0.05, zp=1),
        nchw(lambda x, w, b: ref_transpose(x, w, b, (0, 0, 0, 0), (1, 1))),
        V.V1_3,
    ),
]


@pytest.mark.parametrize(
    "row", CONV_ROWS + DEPTHWISE_ROWS + GROUPED_ROWS + TRANSPOSE_ROWS, ids=lambda r: r.id
)
def test_conv_rows(row: Row):
    row.check()


@pytest.mark.parametrize("elements", [64, 200, 4096])
def test_conv_in_slabs(monkeypatch, elements):
    """Large convolutions run in slabs of rows (64: one row; 4096: whole images)."""
    monkeypatch.setattr(conv_ops, "SLAB_ELEMENTS", elements)
    for row in CONV_ROWS[:3] + CONV_ROWS[9:10]:
        row.check()


@pytest.mark.parametrize("elements", [1, 7, 64, 1 << 16])
def test_conv_in_output_slabs_on_one_thread(monkeypatch, elements):
    """On one BLAS thread, convolutions and depthwise run in slabs of output pixels
    (bias, activation and requantization per slab), float and quantized alike."""
    from nnhal.driver.ops import threads

    monkeypatch.setattr(threads, "single_threaded", lambda: True)
    monkeypatch.setattr(conv_ops, "OUT_SLAB_ELEMENTS", elements)
    for row in CONV_ROWS + DEPTHWISE_ROWS + GROUPED_ROWS:
        row.check()


def test_zero_batch():
    row = Row(
        "conv-zero-batch",
        Op.CONV_2D,
        [
            f32((0, 4, 4, 2)),
            f32((3, 3, 3, 2), const=True),
            f32((3,), const=True),
            *ints(SAME, 1, 1),
            NONE,
        ],
        out(F32),
        lambda x, w, b: np.zeros((0, 4, 4, 3)),
    )
    row.check()

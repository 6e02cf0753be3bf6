"""Tables of ROI_ALIGN and ROI_POOLING.

The references below are plain loops over boxes, cells and samples written
from the operations' definitions (the reference CPU kernels' order of
arithmetic, in the boxes' float type), independent of the vectorized kernels.
Quantized references accumulate the same integer sums but requantize in
floating point, so they may differ by one unit (the harness allows it).

``MultiRow``, ``deq``, ``quantize`` and the literal NMS live in
tests/multi_output_harness.py (shared with the bbox and detection tables).
"""

from __future__ import annotations

import math

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
    out,
    s8,
    scalar,
    t,
    u8,
)

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F = np.float32
Q16 = T.TENSOR_QUANT16_ASYMM
BOOL = T.BOOL


def boxes(n, height, width, stride=1.0, seed=0):
    """n random (x1, y1, x2, y2) boxes inside a height x width map, in image units."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, width * stride, (n, 2)), axis=1)
    y = np.sort(rng.uniform(0, height * stride, (n, 2)), axis=1)
    return np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1)


def q16(values) -> np.ndarray:
    return np.round(np.asarray(values) / 0.125).astype(np.uint16)


def fscalar(value, half=False):
    return scalar(value, T.FLOAT16 if half else T.FLOAT32)


def layout(nchw):
    return scalar(bool(nchw), BOOL)


# ---------------------------------------------------------------------------
# ROI_ALIGN reference
# ---------------------------------------------------------------------------


def roi_align_ref(fmap, rois, batch, oh, ow, hs, ws, hr, wr, *, nchw, half=False, quant=None):
    """quant = (zp_in, scale_in, scale_out, zp_out, (lo, hi)) for integer data."""
    rd = np.float16 if half else F
    m = fmap.transpose(0, 2, 3, 1) if nchw else fmap
    _, height, width, depth = m.shape
    hscale, wscale = rd(F(1) / F(hs)), rd(F(1) / F(ws))
    res = np.zeros((len(rois), oh, ow, depth))
    for r, roi in enumerate(rois):
        if quant:
            x1, y1, x2, y2 = (
                F(v) * F(wscale if k % 2 == 0 else hscale) * F(0.125) for k, v in enumerate(roi)
            )
        else:
            x1, y1, x2, y2 = (rd(v) * (wscale if k % 2 == 0 else hscale) for k, v in enumerate(roi))
        t_ = type(x1)
        roi_w = t_(max(F(x2 - x1), F(1)))
        roi_h = t_(max(F(y2 - y1), F(1)))
        wstep, hstep = roi_w / t_(ow), roi_h / t_(oh)
        wn = wr if wr > 0 else math.ceil(F(wstep))
        hn = hr if hr > 0 else math.ceil(F(hstep))
        wbin, hbin = wstep / t_(wn), hstep / t_(hn)
        image = m[batch[r]]
        for i in range(oh):
            for j in range(ow):
                wstart = wstep * t_(j) + x1
                hstart = hstep * t_(i) + y1
                acc = np.zeros(depth)
                for yi in range(hn):
                    for xi in range(wn):
                        y = hstart + hbin / t_(2) + hbin * t_(yi)
                        x = wstart + wbin / t_(2) + wbin * t_(xi)
                        xl, yl = math.floor(F(x)), math.floor(F(y))
                        xh, yh = xl + 1, yl + 1
                        dx1, dy1 = x - t_(xl), y - t_(yl)
                        if xl >= width - 1:
                            xl = xh = width - 1
                            dx1 = t_(0)
                        if yl >= height - 1:
                            yl = yh = height - 1
                            dy1 = t_(0)
                        dx2, dy2 = t_(1) - dx1, t_(1) - dy1
                        corners = [
                            (dx2 * dy2, yl, xl),
                            (dx1 * dy2, yl, xh),
                            (dx2 * dy1, yh, xl),
                            (dx1 * dy1, yh, xh),
                        ]
                        for w, yy, xx in corners:
                            if quant:
                                wq = math.floor(float(F(w) / (F(1) / F(255))) + 0.5)
                                acc += wq * (image[yy, xx].astype(np.int64) - quant[0])
                            else:
                                acc += float(w) * image[yy, xx].astype(np.float64)
                if quant:
                    _zp_in, s_in, s_out, zp_out, (lo, hi) = quant
                    real = s_in / 255 / s_out / (hn * wn)
                    res[r, i, j] = np.clip(np.floor(acc * real + 0.5) + zp_out, lo, hi)
                else:
                    res[r, i, j] = acc / (hn * wn)
    return res.transpose(0, 3, 1, 2) if nchw else res


def align_row(rid, kind, shape, n_rois, oh, ow, hs, ws, hr, wr, nchw, version, out_q=(0.1, 128)):
    """A ROI_ALIGN row on random data; shape is the NHWC feature map."""
    n, height, width, depth = shape
    rois_real = boxes(n_rois, height, width, stride=hs, seed=n_rois + oh)
    batch = np.arange(n_rois, dtype=np.int32) % n
    map_shape = (n, depth, height, width) if nchw else shape
    half = kind == "f16"
    if kind in ("u8", "s8"):
        x = (u8 if kind == "u8" else s8)(map_shape, scale=0.25, zp=3)
        roi_x = t(Q16, data=q16(rois_real), scale=0.125)
        scalars = [fscalar(hs), fscalar(ws)]
        out_type = T.TENSOR_QUANT8_ASYMM if kind == "u8" else T.TENSOR_QUANT8_ASYMM_SIGNED
        lohi = (0, 255) if kind == "u8" else (-128, 127)
        quant = (x.zp, x.scale, out_q[0], out_q[1], lohi)
        o = out(out_type, scale=out_q[0], zp=out_q[1])
    else:
        x = (f16 if half else f32)(map_shape)
        roi_x = (f16 if half else f32)(data=rois_real)
        scalars = [fscalar(hs, half), fscalar(ws, half)]
        quant = None
        o = out(T.TENSOR_FLOAT16 if half else T.TENSOR_FLOAT32)

    def ref(_x, _r, _b):
        return roi_align_ref(
            x.data, roi_x.data, batch, oh, ow, hs, ws, hr, wr, nchw=nchw, half=half, quant=quant
        )

    ins = [x, roi_x, i32(data=batch), scalar(oh), scalar(ow), *scalars]
    ins += [scalar(hr), scalar(wr), layout(nchw)]
    want = (n_rois, depth, oh, ow) if nchw else (n_rois, oh, ow, depth)
    return Row(rid, Op.ROI_ALIGN, ins, o, ref, version, raw=True, shape=want)


ALIGN_ROWS = [
    align_row("align-f32-nhwc", "f32", (2, 5, 6, 3), 4, 2, 3, 1.0, 1.0, 2, 2, False, V.V1_2),
    align_row("align-f32-nchw-stride", "f32", (1, 8, 8, 2), 3, 3, 3, 2.0, 4.0, 1, 3, True, V.V1_2),
    align_row("align-f32-adaptive", "f32", (1, 9, 7, 2), 3, 2, 2, 0.5, 0.5, 0, 0, False, V.V1_2),
    align_row("align-f16", "f16", (2, 6, 6, 2), 3, 2, 2, 2.0, 2.0, 0, 2, True, V.V1_2),
    align_row("align-u8", "u8", (2, 6, 5, 3), 4, 2, 2, 1.0, 1.0, 2, 0, False, V.V1_2, (0.05, 100)),
    align_row(
        "align-s8-nchw", "s8", (1, 7, 7, 2), 2, 3, 2, 2.0, 2.0, 0, 0, True, V.V1_3, (0.1, -3)
    ),
    Row(
        "align-zero-rois",
        Op.ROI_ALIGN,
        [f32((1, 4, 4, 2)), f32((0, 4)), i32((0,))]
        + [scalar(2), scalar(3), fscalar(1.0), fscalar(1.0), scalar(0), scalar(0), layout(0)],
        out(T.TENSOR_FLOAT32),
        lambda *a: np.zeros((0, 2, 3, 2)),
        shape=(0, 2, 3, 2),
    ),
]


@pytest.mark.parametrize("row", ALIGN_ROWS, ids=lambda r: r.id)
def test_roi_align(row: Row):
    row.check()


# ---------------------------------------------------------------------------
# ROI_POOLING reference
# ---------------------------------------------------------------------------


def roi_pool_ref(fmap, rois, batch, oh, ow, hs, ws, *, nchw, half=False, quant_zp=None):
    rd = F if quant_zp is not None or not half else np.float16
    m = fmap.transpose(0, 2, 3, 1) if nchw else fmap
    _, height, width, depth = m.shape
    hscale, wscale = rd(F(1) / F(hs)), rd(F(1) / F(ws))
    res = np.zeros((len(rois), oh, ow, depth), dtype=m.dtype)
    for r, roi in enumerate(rois):
        values = [rd(F(v) * F(0.125)) if quant_zp is not None else rd(v) for v in roi]
        scaled = [v * (wscale if k % 2 == 0 else hscale) for k, v in enumerate(values)]
        x1, y1, x2, y2 = (int(np.sign(v) * math.floor(abs(float(v)) + 0.5)) for v in scaled)
        roi_w, roi_h = rd(max(x2 - x1 + 1, 1)), rd(max(y2 - y1 + 1, 1))
        wstep, hstep = roi_w / rd(ow), roi_h / rd(oh)
        for i in range(oh):
            for j in range(ow):
                w0 = min(math.floor(F(wstep * rd(j) + rd(x1))), width)
                w1 = min(math.ceil(F(wstep * rd(j + 1) + rd(x1))), width)
                h0 = min(math.floor(F(hstep * rd(i) + rd(y1))), height)
                h1 = min(math.ceil(F(hstep * rd(i + 1) + rd(y1))), height)
                cell = m[batch[r], h0:h1, w0:w1].reshape(-1, depth)
                if cell.shape[0]:
                    res[r, i, j] = cell.max(axis=0)
                else:
                    res[r, i, j] = quant_zp or 0
    return res.transpose(0, 3, 1, 2) if nchw else res


def pool_row(rid, kind, shape, rois_real, oh, ow, hs, ws, nchw, version, seed=1):
    n, height, width, depth = shape
    batch = np.arange(len(rois_real), dtype=np.int32) % n
    map_shape = (n, depth, height, width) if nchw else shape
    half = kind == "f16"
    if kind in ("u8", "s8"):
        make = u8 if kind == "u8" else s8
        x = make(map_shape, scale=0.5, zp=-7 if kind == "s8" else 140)
        roi_x = t(Q16, data=q16(rois_real), scale=0.125)
        scalars = [fscalar(hs), fscalar(ws)]
        o = out(x.type, scale=0.5, zp=x.zp)
        zp = x.zp
    else:
        x = (f16 if half else f32)(map_shape)
        roi_x = (f16 if half else f32)(data=rois_real)
        scalars = [fscalar(hs, half), fscalar(ws, half)]
        o = out(x.type)
        zp = None

    def ref(_x, _r, _b):
        return roi_pool_ref(
            x.data, roi_x.data, batch, oh, ow, hs, ws, nchw=nchw, half=half, quant_zp=zp
        )

    ins = [x, roi_x, i32(data=batch), scalar(oh), scalar(ow), *scalars, layout(nchw)]
    return Row(rid, Op.ROI_POOLING, ins, o, ref, version, raw=True)


EDGE_BOXES = np.array([[0, 0, 6, 6], [5.9, 5.9, 6, 6], [1, 2, 3, 6], [2.5, 0.5, 3.5, 5.5]])

POOL_ROWS = [
    pool_row("pool-f32", "f32", (2, 6, 6, 3), boxes(5, 6, 6), 2, 2, 1.0, 1.0, False, V.V1_2),
    pool_row("pool-f32-nchw-edges", "f32", (1, 6, 6, 2), EDGE_BOXES, 3, 2, 1.0, 1.0, True, V.V1_2),
    pool_row(
        "pool-f32-stride", "f32", (1, 5, 7, 2), boxes(4, 5, 7, 2.0), 2, 3, 2.0, 2.0, False, V.V1_2
    ),
    pool_row("pool-f16", "f16", (1, 6, 6, 2), boxes(3, 6, 6, 4.0), 4, 3, 4.0, 4.0, True, V.V1_2),
    pool_row(
        "pool-f32-long-cells",
        "f32",
        (1, 24, 20, 3),
        np.array([[0, 0, 19, 23], [1, 2, 17, 20], [3, 0, 19, 5]]),
        2,
        3,
        1.0,
        1.0,
        False,
        V.V1_2,
    ),
    pool_row("pool-u8", "u8", (2, 6, 6, 2), boxes(4, 6, 6), 2, 2, 1.0, 1.0, False, V.V1_2),
    pool_row("pool-s8-edges", "s8", (1, 6, 6, 1), EDGE_BOXES, 2, 2, 1.0, 1.0, True, V.V1_3),
]


@pytest.mark.parametrize("row", POOL_ROWS, ids=lambda r: r.id)
def test_roi_pooling(row: Row):
    row.check()


def test_roi_pooling_empty_cell_gives_the_zero_point():
    # A box on the last pixel: its cells past the map are empty.
    x = u8((1, 2, 2, 1), scale=0.5, zp=77, data=np.full((1, 2, 2, 1), 200))
    ins = [x, t(Q16, data=q16([[2, 2, 2, 2]]), scale=0.125), i32(data=[0])]
    ins += [scalar(2), scalar(2), fscalar(1.0), fscalar(1.0), layout(0)]
    ctx = context(Op.ROI_POOLING, ins, [out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=77)])
    validate_operation(ctx)
    got = ctx.op.kernel(ctx)(x.data, ins[1].data, ins[2].data)
    assert got.reshape(-1).tolist() == [77, 77, 77, 77]


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------


def align_ins(change: dict | None = None) -> list:
    """Valid float32 ROI_ALIGN inputs, with some positions replaced."""
    ins = {
        0: f32((1, 4, 4, 2)),
        1: f32(data=[[0, 0, 2, 2]]),
        2: i32(data=[0]),
        3: scalar(2),
        4: scalar(2),
        5: fscalar(1.0),
        6: fscalar(1.0),
        7: scalar(0),
        8: scalar(0),
        9: layout(0),
    }
    ins.update(change or {})
    return [ins[k] for k in sorted(ins)]


def pool_ins(change: dict | None = None) -> list:
    return align_ins(change)[:7] + [layout(0)]


F32_OUT = out(T.TENSOR_FLOAT32)
U8_IN = u8((1, 4, 4, 1), scale=0.5, zp=10)
Q16_ROIS = t(Q16, data=q16([[0, 0, 2, 2]]), scale=0.125)

BAD_ROWS = [
    Bad("align-arity", Op.ROI_ALIGN, align_ins()[:9], [F32_OUT], r"expected 10 inputs, got 9"),
    Bad("pool-arity", Op.ROI_POOLING, align_ins(), [F32_OUT], r"expected 8 inputs, got 10"),
    Bad("align-outputs", Op.ROI_ALIGN, align_ins(), [F32_OUT, F32_OUT], r"expected 1 outputs"),
    Bad(
        "align-int32-input",
        Op.ROI_ALIGN,
        align_ins({0: i32((1, 4, 4, 2))}),
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported: .*TENSOR_FLOAT32 \(1.2\)",
    ),
    Bad(
        "align-rois-f16",
        Op.ROI_ALIGN,
        [f32((1, 4, 4, 2)), f16(data=[[0, 0, 2, 2]])] + align_ins()[2:],
        [F32_OUT],
        r"input 1 \(rois\) has type TENSOR_FLOAT16; with TENSOR_FLOAT32 supported: TENSOR_FLOAT32",
    ),
    Bad(
        "align-quant-rois-f32",
        Op.ROI_ALIGN,
        [U8_IN, f32(data=[[0, 0, 2, 2]])] + align_ins()[2:],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.5)],
        r"input 1 \(rois\) has type TENSOR_FLOAT32; .*supported: TENSOR_QUANT16_ASYMM",
    ),
    Bad(
        "align-batch-f32",
        Op.ROI_ALIGN,
        align_ins()[:2] + [f32(data=[0])] + align_ins()[3:],
        [F32_OUT],
        r"input 2 \(batch_indices\) has type TENSOR_FLOAT32; .*supported: TENSOR_INT32",
    ),
    Bad(
        "align-ratio-f16-scalar",
        Op.ROI_ALIGN,
        align_ins()[:5] + [fscalar(1.0, True)] + align_ins()[6:],
        [F32_OUT],
        r"input 5 \(height_ratio\) has type FLOAT16; .*supported: FLOAT32",
    ),
    Bad(
        "align-layout-int",
        Op.ROI_ALIGN,
        align_ins()[:9] + [scalar(0)],
        [F32_OUT],
        r"input 9 \(layout\) has type INT32; .*supported: BOOL",
    ),
    Bad(
        "align-rank3",
        Op.ROI_ALIGN,
        [f32((4, 4, 2))] + align_ins()[1:],
        [F32_OUT],
        r"input 0 has rank 3; it must have rank 4",
    ),
    Bad(
        "align-rois-5-wide",
        Op.ROI_ALIGN,
        align_ins()[:1] + [f32(data=[[0, 0, 2, 2, 1]])] + align_ins()[2:],
        [F32_OUT],
        r"input 1 \(rois\) has 5 on axis 1; boxes are \[num_rois, 4\] \(4\)",
    ),
    Bad(
        "align-batch-count",
        Op.ROI_ALIGN,
        align_ins()[:2] + [i32(data=[0, 0])] + align_ins()[3:],
        [F32_OUT],
        r"input 2 \(batch_indices\) has 2 on axis 0; one batch index per box",
    ),
    Bad(
        "align-height-0",
        Op.ROI_ALIGN,
        align_ins()[:3] + [scalar(0)] + align_ins()[4:],
        [F32_OUT],
        r"input 3 \(output_height\) is 0; it must be positive",
    ),
    Bad(
        "align-ratio-negative",
        Op.ROI_ALIGN,
        align_ins()[:6] + [fscalar(-2.0)] + align_ins()[7:],
        [F32_OUT],
        r"input 6 \(width_ratio\) is -2.0; it must be positive",
    ),
    Bad(
        "align-samples-negative",
        Op.ROI_ALIGN,
        align_ins()[:8] + [scalar(-1)] + align_ins()[9:],
        [F32_OUT],
        r"input 8 \(width_samples\) is -1; it must not be negative",
    ),
    Bad(
        "align-rois-scale",
        Op.ROI_ALIGN,
        [U8_IN, t(Q16, data=[[0, 0, 8, 8]], scale=0.25)] + align_ins()[2:],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.5)],
        r"input 1 \(rois\) has scale 0.25 and zero point 0; .*scale 0.125 and zero point 0",
    ),
    Bad(
        "align-layout-not-constant",
        Op.ROI_ALIGN,
        align_ins()[:9] + [scalar(False, BOOL, const=False)],
        [F32_OUT],
        r"input 9 \(layout\) must be a constant",
    ),
    Bad(
        "pool-output-scale",
        Op.ROI_POOLING,
        [U8_IN, Q16_ROIS] + pool_ins()[2:],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.25, zp=10)],
        r"output 0 \(output\) has scale 0.25 .*must have the scale and zero point of input 0",
    ),
    Bad(
        "pool-width-negative",
        Op.ROI_POOLING,
        pool_ins()[:4] + [scalar(-3)] + pool_ins()[5:],
        [F32_OUT],
        r"input 4 \(output_width\) is -3; it must be positive",
    ),
    Bad(
        "pool-output-type",
        Op.ROI_POOLING,
        pool_ins(),
        [out(T.TENSOR_FLOAT16)],
        r"output 0 \(output\) has type TENSOR_FLOAT16",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_roi_ops(row: Bad):
    row.check()


@pytest.mark.parametrize(
    ("op", "change", "pattern"),
    [
        (Op.ROI_ALIGN, {2: i32(data=[1])}, r"batch index is outside \[0, 1\)"),
        (Op.ROI_ALIGN, {1: f32(data=[[0, 0, 9, 2]])}, r"box lies outside the feature map"),
        (Op.ROI_ALIGN, {1: f32(data=[[3, 0, 2, 2]])}, r"x2 < x1 or y2 < y1"),
        (Op.ROI_ALIGN, {1: f32(data=[[-1, 0, 2, 2]])}, r"negative coordinate"),
        (Op.ROI_POOLING, {2: i32(data=[-1])}, r"batch index is outside"),
        (Op.ROI_POOLING, {1: f32((0, 4)), 2: i32((0,))}, r"zero-sized inputs"),
    ],
)
def test_malformed_boxes_fail_at_run_time(op, change, pattern):
    ins = pool_ins(change) if op == Op.ROI_POOLING else align_ins(change)
    ctx = context(op, ins, [F32_OUT])
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(GeneralFailure, match=pattern):
        kernel(*[x.data for x in ins if x.is_tensor])


def test_roi_align_loops_only_over_boxes():
    # One box covering a big map with many samples: vectorized within the box.
    x = f32((1, 64, 64, 8))
    ins = align_ins({0: x, 1: f32(data=[[0, 0, 63, 63]]), 3: scalar(7), 4: scalar(7)})
    ins[7], ins[8] = scalar(4), scalar(4)
    ctx = context(Op.ROI_ALIGN, ins, [F32_OUT])
    validate_operation(ctx)
    got = ctx.op.kernel(ctx)(x.data, ins[1].data, ins[2].data)
    want = roi_align_ref(x.data, ins[1].data, [0], 7, 7, 1.0, 1.0, 4, 4, nchw=False)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

"""Tables of AXIS_ALIGNED_BBOX_TRANSFORM, BOX_WITH_NMS_LIMIT and GENERATE_PROPOSALS.

References are element-by-element loops in float32 scalars written from the
reference kernels' definitions; NMS is simulated literally (``literal_nms`` of
test_ops_roi.py: a dropped box is swapped with the last remaining one),
independently of the vectorized ``_box_util.nms``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from multi_output_harness import MultiRow, deq, literal_nms, quantize, soft_drop
from nnhal.driver.ops._box_util import hard_suppress, nms, soft_suppress
from nnhal.driver.ops.registry import validate_operation
from ops_harness import Bad, context, f16, f32, i32, out, s8, scalar, t, u8

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F = np.float32
Q16 = T.TENSOR_QUANT16_ASYMM
I32_OUT = out(T.TENSOR_INT32)


# ---------------------------------------------------------------------------
# AXIS_ALIGNED_BBOX_TRANSFORM
# ---------------------------------------------------------------------------


def transform_one(box, delta, height, width):
    x1, y1, x2, y2 = (F(v) for v in box)
    dx, dy, dw, dh = (F(v) for v in delta)
    w, h = x2 - x1, y2 - y1
    cx, cy = (x1 + x2) / F(2), (y1 + y2) / F(2)
    nw, nh = F(np.exp(dw)) * w, F(np.exp(dh)) * h
    nx, ny = cx + dx * w, cy + dy * h
    corners = [nx - nw / F(2), ny - nh / F(2), nx + nw / F(2), ny + nh / F(2)]
    limits = [width, height, width, height]
    return [min(max(c, F(0)), F(lim)) for c, lim in zip(corners, limits)]


def transform_row(rid, kind, n, classes, version=V.V1_2, seed=0):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 60, (n, 2))
    rois = np.concatenate([xy, xy + rng.uniform(0, 40, (n, 2))], axis=1)
    deltas = rng.uniform(-1, 1, (n, classes * 4))
    image = np.array([[64, 80], [100, 50], [128, 128]], dtype=float)
    batch = np.array([k % 3 for k in range(n)], np.int32)
    if kind in ("u8", "s8"):
        roi_x = t(Q16, data=np.round(rois / 0.125), scale=0.125)
        make = u8 if kind == "u8" else s8
        zp = 128 if kind == "u8" else 0
        delta_x = make(data=np.round(deltas / 0.05) + zp, scale=0.05, zp=zp)
        image_x = t(Q16, data=image / 0.125, scale=0.125)
        o = out(Q16, scale=0.125)
    else:
        make = f16 if kind == "f16" else f32
        roi_x, delta_x, image_x = make(data=rois), make(data=deltas), make(data=image)
        o = out(roi_x.type)

    def ref():
        r, d, im = deq(roi_x), deq(delta_x), deq(image_x)
        res = [
            value
            for i in range(n)
            for c in range(classes)
            for value in transform_one(r[i], d[i, 4 * c : 4 * c + 4], *im[batch[i]])
        ]
        return [quantize(np.array(res, F).reshape(n, classes * 4), o)]

    ins = [roi_x, delta_x, i32(data=batch), image_x]
    return MultiRow(rid, Op.AXIS_ALIGNED_BBOX_TRANSFORM, ins, [o], ref, version, [(n, 4 * classes)])


TRANSFORM_ROWS = [
    transform_row("transform-f32", "f32", 5, 3),
    transform_row("transform-f16", "f16", 4, 2, seed=1),
    transform_row("transform-u8", "u8", 6, 2, seed=2),
    transform_row("transform-s8", "s8", 3, 1, V.V1_3, seed=3),
    transform_row("transform-zero-rois", "f32", 0, 2),
]


@pytest.mark.parametrize("row", TRANSFORM_ROWS, ids=lambda r: r.id)
def test_axis_aligned_bbox_transform(row: MultiRow):
    row.check()


# ---------------------------------------------------------------------------
# BOX_WITH_NMS_LIMIT
# ---------------------------------------------------------------------------


def nms_limit_ref(scores_x, rois_x, batch, params, outs):
    thr, max_det, kernel, iou_t, sigma, nms_t = params
    scores = deq(scores_x).copy()
    boxes = deq(rois_x)
    n, classes = scores.shape
    rows = []
    start = 0
    while start < n:
        end = start
        while end < n and batch[end] == batch[start]:
            end += 1
        sc = scores[start:end].reshape(-1)
        bx = boxes[start:end].reshape(-1, 4)
        chosen = []
        for c in range(1, classes):
            cand = [i * classes + c for i in range(end - start) if sc[i * classes + c] > F(thr)]
            drop = soft_drop(sc, kernel, F(iou_t), sigma, nms_t)
            chosen += literal_nms(sc, bx, cand, max_det, drop)
        chosen.sort(key=lambda i: -sc[i])
        if max_det >= 0:
            chosen = chosen[:max_det]
        chosen.sort(key=lambda i: (i % classes, -sc[i]))
        for i in chosen:
            rows.append(
                (
                    sc[i],
                    rois_x.data[start + i // classes].reshape(-1, 4)[i % classes],
                    i % classes,
                    batch[start],
                )
            )
        start = end
    o_scores = quantize([r[0] for r in rows], outs[0])
    o_boxes = np.array([r[1] for r in rows]).reshape(-1, 4)
    return [
        o_scores.reshape(-1),
        o_boxes,
        np.array([r[2] for r in rows], np.int32),
        np.array([r[3] for r in rows], np.int32),
    ]


def nms_limit_row(rid, kind, n, classes, batches, params, version=V.V1_2, seed=0):
    rng = np.random.default_rng(seed)
    xy = rng.integers(0, 12, (n, classes, 2))
    wh = rng.integers(2, 8, (n, classes, 2))
    rois = np.concatenate([xy, xy + wh], axis=2).reshape(n, 4 * classes).astype(float)
    scores = rng.integers(0, 20, (n, classes)) / 20  # many ties
    batch = np.sort(rng.integers(0, batches, n)).astype(np.int32)
    half = kind == "f16"
    if kind in ("u8", "s8"):
        make = u8 if kind == "u8" else s8
        zp = 10 if kind == "u8" else -100
        scores_x = make(data=np.round(scores / 0.05) + zp, scale=0.05, zp=zp)
        rois_x = t(Q16, data=rois / 0.125, scale=0.125)
        outs = [out(scores_x.type, scale=0.05, zp=zp), out(Q16, scale=0.125)]
        fs = T.FLOAT32
    else:
        make = f16 if half else f32
        scores_x, rois_x = make(data=scores), make(data=rois)
        outs = [out(scores_x.type), out(scores_x.type)]
        fs = T.FLOAT16 if half else T.FLOAT32
    outs += [I32_OUT, I32_OUT]
    thr, max_det, kernel, iou_t, sigma, nms_t = params
    ins = [scores_x, rois_x, i32(data=batch), scalar(thr, fs), scalar(max_det), scalar(kernel)]
    ins += [scalar(iou_t, fs), scalar(sigma, fs), scalar(nms_t, fs)]
    # float16 parameters are float16 values
    cast = (lambda v: float(np.float16(v))) if half else float
    real = (cast(thr), max_det, kernel, cast(iou_t), cast(sigma), cast(nms_t))

    def ref():
        return nms_limit_ref(scores_x, rois_x, batch, real, outs)

    shapes = [(0,), (0, 4), (0,), (0,)]
    return MultiRow(rid, Op.BOX_WITH_NMS_LIMIT, ins, outs, ref, version, shapes)


NMS_ROWS = [
    nms_limit_row("nms-hard-f32", "f32", 12, 3, 2, (0.3, -1, 0, 0.4, 1.0, 0.3)),
    nms_limit_row("nms-hard-limit", "f32", 15, 4, 3, (0.1, 4, 0, 0.3, 1.0, 0.2), seed=1),
    nms_limit_row("nms-linear-f32", "f32", 14, 3, 2, (0.2, -1, 1, 0.3, 1.0, 0.25), seed=2),
    nms_limit_row("nms-gaussian-f32", "f32", 10, 3, 1, (0.1, 8, 2, 0.5, 0.5, 0.2), seed=3),
    nms_limit_row("nms-hard-zero-floor", "f32", 8, 2, 2, (0.0, -1, 0, 0.3, 1.0, 0.0), seed=4),
    nms_limit_row("nms-f16-linear", "f16", 10, 3, 2, (0.25, -1, 1, 0.4, 1.0, 0.3), seed=5),
    nms_limit_row("nms-u8-gaussian", "u8", 12, 3, 2, (0.2, 6, 2, 0.4, 0.7, 0.3), seed=6),
    nms_limit_row("nms-s8-hard", "s8", 11, 2, 3, (0.3, -1, 0, 0.5, 1.0, 0.3), V.V1_3, seed=7),
    nms_limit_row("nms-nothing-passes", "f32", 5, 3, 1, (0.99, -1, 0, 0.5, 1.0, 0.3), seed=8),
    nms_limit_row("nms-zero-rois", "f32", 0, 3, 1, (0.3, -1, 0, 0.5, 1.0, 0.3)),
]


@pytest.mark.parametrize("row", NMS_ROWS, ids=lambda r: r.id)
def test_box_with_nms_limit(row: MultiRow):
    row.check()


def test_nms_keeps_the_reference_order_with_ties():
    """The vectorized NMS against the literal swap-to-the-end simulation."""
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(1, 20))
        xy = rng.integers(0, 8, (n, 2)).astype(F)
        boxes = np.concatenate([xy, xy + rng.integers(1, 5, (n, 2))], axis=1).astype(F)
        scores = (rng.integers(0, 5, n) / 4).astype(F)
        cand = rng.permutation(n)[: rng.integers(0, n + 1)]
        max_det = int(rng.integers(-1, n + 1))
        want = literal_nms(scores, boxes, cand, max_det, lambda i, v: v >= F(0.3))
        got = nms(scores.copy(), boxes, cand, max_det, hard_suppress(0.3))
        assert list(got) == want
        ref_scores, our_scores = scores.copy(), scores.copy()
        want = literal_nms(
            ref_scores, boxes, cand, max_det, soft_drop(ref_scores, 1, F(0.3), 1, 0.2)
        )
        got = nms(our_scores, boxes, cand, max_det, soft_suppress(1, 0.3, 1.0, 0.2))
        assert list(got) == want
        np.testing.assert_array_equal(our_scores, ref_scores)


# ---------------------------------------------------------------------------
# GENERATE_PROPOSALS
# ---------------------------------------------------------------------------


def proposals_ref(xs, params, outs):
    hs, ws, pre, post, iou_t, min_size, nchw = params
    s, d, a, im = (deq(x) for x in xs)
    if nchw:
        s, d = s.transpose(0, 2, 3, 1), d.transpose(0, 2, 3, 1)
    batches, height, width, count = s.shape
    res_s, res_b, res_i = [], [], []
    for b in range(batches):
        boxes, flat = [], []
        for h in range(height):
            for w in range(width):
                for k in range(count):
                    anchor = a[k] + np.array([w * F(ws), h * F(hs)] * 2, F)
                    delta = d[b, h, w, 4 * k : 4 * k + 4]
                    boxes.append(transform_one(anchor, delta, *im[b]))
                    flat.append(s[b, h, w, k])
        boxes = np.array(boxes, F)
        sc = np.array(flat, F)
        sel = list(range(len(sc)))
        if 0 < pre < len(sel):
            sel = sorted(sel, key=lambda i: -sc[i])[:pre]
        keep = []
        for i in sel:
            x1, y1, x2, y2 = boxes[i]
            bw, bh = x2 - x1, y2 - y1
            if (
                bw > F(min_size)
                and bh > F(min_size)
                and x1 + bw / F(2) < im[b, 1]
                and y1 + bh / F(2) < im[b, 0]
            ):
                keep.append(i)
        sel = literal_nms(sc, boxes, keep, post, lambda i, v: v >= F(iou_t))
        res_s += [sc[i] for i in sel]
        res_b += [boxes[i] for i in sel]
        res_i += [b] * len(sel)
    return [
        quantize(res_s, outs[0]).reshape(-1),
        quantize(np.array(res_b, F).reshape(-1, 4), outs[1]),
        np.array(res_i, np.int32),
    ]


def proposals_row(rid, kind, shape, params, version=V.V1_2, seed=0):
    batches, height, width, count = shape
    hs, ws, pre, post, iou_t, min_size, nchw = params
    rng = np.random.default_rng(seed)
    sc = rng.integers(0, 40, shape) / 40
    de = rng.integers(-8, 8, (batches, height, width, 4 * count)) / 16
    ctr = rng.uniform(2, 6, (count, 2))
    size = rng.uniform(2, 10, (count, 2))
    anchors = np.round(np.concatenate([ctr - size / 2, ctr + size / 2], axis=1) * 8) / 8
    image = np.array([[height * hs, width * ws]] * batches, float)
    if nchw:
        sc, de = sc.transpose(0, 3, 1, 2), de.transpose(0, 3, 1, 2)
    if kind in ("u8", "s8"):
        make = u8 if kind == "u8" else s8
        zp = 0 if kind == "u8" else -128
        xs = [
            make(data=np.round(sc / 0.025) + zp, scale=0.025, zp=zp),
            make(data=np.round(de / 0.0625) + zp + 64, scale=0.0625, zp=zp + 64),
            t(T.TENSOR_QUANT16_SYMM, data=np.round(anchors * 8), scale=0.125),
            t(Q16, data=image / 0.125, scale=0.125),
        ]
        outs = [out(xs[0].type, scale=0.025, zp=zp), out(Q16, scale=0.125), I32_OUT]
        fs = T.FLOAT32
    else:
        make = f16 if kind == "f16" else f32
        xs = [make(data=sc), make(data=de), make(data=anchors), make(data=image)]
        outs = [out(xs[0].type), out(xs[0].type), I32_OUT]
        fs = T.FLOAT16 if kind == "f16" else T.FLOAT32
    ins = xs + [scalar(hs, fs), scalar(ws, fs), scalar(pre), scalar(post)]
    ins += [scalar(iou_t, fs), scalar(min_size, fs), scalar(nchw, T.BOOL)]
    if kind == "f16":
        params = (hs, ws, pre, post, float(np.float16(iou_t)), float(np.float16(min_size)), nchw)

    def ref():
        return proposals_ref(xs, params, outs)

    return MultiRow(rid, Op.GENERATE_PROPOSALS, ins, outs, ref, version, [(0,), (0, 4), (0,)])


PROPOSAL_ROWS = [
    proposals_row("proposals-f32-nhwc", "f32", (1, 3, 4, 2), (4.0, 4.0, -1, -1, 0.3, 1.0, False)),
    proposals_row(
        "proposals-f32-nchw-topn", "f32", (2, 4, 3, 3), (2.0, 3.0, 10, 5, 0.4, 0.5, True), seed=1
    ),
    proposals_row(
        "proposals-f16", "f16", (1, 3, 3, 2), (4.0, 4.0, 12, -1, 0.5, 2.0, False), seed=2
    ),
    proposals_row("proposals-u8", "u8", (2, 3, 3, 2), (4.0, 4.0, -1, 6, 0.3, 1.0, True), seed=3),
    proposals_row("proposals-s8", "s8", (1, 4, 4, 1), (2.0, 2.0, 8, 4, 0.3, 0.5, False), V.V1_3, 4),
    proposals_row(
        "proposals-min-size-drops-all", "f32", (1, 2, 2, 1), (4.0, 4.0, -1, -1, 0.3, 99.0, False)
    ),
]


@pytest.mark.parametrize("row", PROPOSAL_ROWS, ids=lambda r: r.id)
def test_generate_proposals(row: MultiRow):
    row.check()


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

F32_OUT = out(T.TENSOR_FLOAT32)


def transform_ins(change=None):
    ins = {0: f32(data=[[0, 0, 4, 4]]), 1: f32((1, 8)), 2: i32(data=[0]), 3: f32(data=[[8, 8]])}
    ins.update(change or {})
    return [ins[k] for k in sorted(ins)]


def nms_ins(change=None):
    ins = {
        0: f32((3, 2)),
        1: f32(data=[[0, 0, 2, 2] * 2] * 3),
        2: i32(data=[0, 0, 0]),
        3: scalar(0.1, T.FLOAT32),
        4: scalar(-1),
        5: scalar(0),
        6: scalar(0.5, T.FLOAT32),
        7: scalar(1.0, T.FLOAT32),
        8: scalar(0.1, T.FLOAT32),
    }
    ins.update(change or {})
    return [ins[k] for k in sorted(ins)]


NMS_OUTS = [F32_OUT, F32_OUT, I32_OUT, I32_OUT]


def proposal_ins(change=None):
    ins = {
        0: f32((1, 2, 2, 3)),
        1: f32((1, 2, 2, 12)),
        2: f32((3, 4)),
        3: f32(data=[[8, 8]]),
        4: scalar(4.0, T.FLOAT32),
        5: scalar(4.0, T.FLOAT32),
        6: scalar(-1),
        7: scalar(-1),
        8: scalar(0.3, T.FLOAT32),
        9: scalar(1.0, T.FLOAT32),
        10: scalar(False, T.BOOL),
    }
    ins.update(change or {})
    return [ins[k] for k in sorted(ins)]


PROPOSAL_OUTS = [F32_OUT, F32_OUT, I32_OUT]
U8_SCORES = u8((3, 2), scale=0.1, zp=0)
Q16_BOXES = t(Q16, data=[[0, 0, 16, 16] * 2] * 3, scale=0.125)

BAD_ROWS = [
    Bad(
        "transform-arity",
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        transform_ins()[:3],
        [F32_OUT],
        r"expected 4 inputs, got 3",
    ),
    Bad(
        "transform-u8-rois",
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        transform_ins({0: u8((1, 4))}),
        [F32_OUT],
        r"input 0 \(rois\) has type TENSOR_QUANT8_ASYMM; supported: .*TENSOR_QUANT16_ASYMM \(1.2\)",
    ),
    Bad(
        "transform-quant-deltas-f32",
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        transform_ins({0: Q16_BOXES, 3: t(Q16, data=[[64, 64]], scale=0.125)}),
        [out(Q16, scale=0.125)],
        r"input 1 \(bbox_deltas\) has type TENSOR_FLOAT32; .*TENSOR_QUANT8_ASYMM, TENSOR_QUANT8_ASYMM_SIGNED",
    ),
    Bad(
        "transform-deltas-not-4k",
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        transform_ins({1: f32((1, 6))}),
        [F32_OUT],
        r"input 1 \(bbox_deltas\) has 6 on axis 1; it must be 4 \* num_classes",
    ),
    Bad(
        "transform-image-info-3",
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        transform_ins({3: f32((1, 3))}),
        [F32_OUT],
        r"input 3 \(image_info\) has 3 on axis 1; image info is \[batches, 2\]",
    ),
    Bad(
        "transform-batches-rank2",
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        transform_ins({2: i32((1, 1))}),
        [F32_OUT],
        r"input 2 has rank 2; it must have rank 1",
    ),
    Bad(
        "transform-output-scale",
        Op.AXIS_ALIGNED_BBOX_TRANSFORM,
        transform_ins(
            {
                0: t(Q16, data=[[0, 0, 8, 8]], scale=0.125),
                1: u8((1, 4), scale=0.1),
                2: i32(data=[0]),
                3: t(Q16, data=[[64, 64]], scale=0.125),
            }
        ),
        [out(Q16, scale=0.25)],
        r"output 0 \(output\) has scale 0.25 and zero point 0; .*must have scale 0.125",
    ),
    Bad("nms-arity", Op.BOX_WITH_NMS_LIMIT, nms_ins()[:8], NMS_OUTS, r"expected 9 inputs, got 8"),
    Bad(
        "nms-outputs", Op.BOX_WITH_NMS_LIMIT, nms_ins(), NMS_OUTS[:3], r"expected 4 outputs, got 3"
    ),
    Bad(
        "nms-i32-scores",
        Op.BOX_WITH_NMS_LIMIT,
        nms_ins({0: i32((3, 2))}),
        NMS_OUTS,
        r"input 0 \(scores\) has type TENSOR_INT32; supported",
    ),
    Bad(
        "nms-threshold-f16",
        Op.BOX_WITH_NMS_LIMIT,
        nms_ins({3: scalar(0.1, T.FLOAT16)}),
        NMS_OUTS,
        r"input 3 \(score_threshold\) has type FLOAT16; with TENSOR_FLOAT32 supported: FLOAT32",
    ),
    Bad(
        "nms-kernel-3",
        Op.BOX_WITH_NMS_LIMIT,
        nms_ins({5: scalar(3)}),
        NMS_OUTS,
        r"input 5 \(nms_kernel\) is 3; supported: 0 \(hard\), 1 \(linear\), 2 \(gaussian\)",
    ),
    Bad(
        "nms-one-class",
        Op.BOX_WITH_NMS_LIMIT,
        nms_ins({0: f32((3, 1)), 1: f32((3, 4))}),
        NMS_OUTS,
        r"input 0 \(scores\) has 1 class; it needs at least 2",
    ),
    Bad(
        "nms-rois-width",
        Op.BOX_WITH_NMS_LIMIT,
        nms_ins({1: f32((3, 4))}),
        NMS_OUTS,
        r"input 1 \(rois\) has 4 on axis 1; boxes are \[num_rois, 4 \* num_classes\] \(8\)",
    ),
    Bad(
        "nms-quant-score-out-scale",
        Op.BOX_WITH_NMS_LIMIT,
        nms_ins({0: U8_SCORES, 1: Q16_BOXES}),
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.2), out(Q16, scale=0.125), I32_OUT, I32_OUT],
        r"output 0 \(scores_out\) has scale 0.2 .*scale and zero point of input 0",
    ),
    Bad(
        "nms-quant-rois-f32",
        Op.BOX_WITH_NMS_LIMIT,
        nms_ins({0: U8_SCORES}),
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.1), out(Q16, scale=0.125), I32_OUT, I32_OUT],
        r"input 1 \(rois\) has type TENSOR_FLOAT32; .*supported: TENSOR_QUANT16_ASYMM",
    ),
    Bad(
        "nms-classes-out-f32",
        Op.BOX_WITH_NMS_LIMIT,
        nms_ins(),
        [F32_OUT, F32_OUT, F32_OUT, I32_OUT],
        r"output 2 \(classes_out\) has type TENSOR_FLOAT32; .*supported: TENSOR_INT32",
    ),
    Bad(
        "proposals-arity",
        Op.GENERATE_PROPOSALS,
        proposal_ins()[:10],
        PROPOSAL_OUTS,
        r"expected 11 inputs, got 10",
    ),
    Bad(
        "proposals-quant-anchors-f32",
        Op.GENERATE_PROPOSALS,
        proposal_ins({0: u8((1, 2, 2, 3), scale=0.1), 1: u8((1, 2, 2, 12), scale=0.1)}),
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.1), out(Q16, scale=0.125), I32_OUT],
        r"input 2 \(anchors\) has type TENSOR_FLOAT32; .*supported: TENSOR_QUANT16_SYMM",
    ),
    Bad(
        "proposals-anchor-count",
        Op.GENERATE_PROPOSALS,
        proposal_ins({2: f32((2, 4))}),
        PROPOSAL_OUTS,
        r"input 2 \(anchors\) has 2 on axis 0; one anchor per score channel \(3\)",
    ),
    Bad(
        "proposals-deltas-nchw",
        Op.GENERATE_PROPOSALS,
        proposal_ins({10: scalar(True, T.BOOL)}),
        PROPOSAL_OUTS,
        r"input 1 \(bbox_deltas\) has 12 on axis 3; bbox_deltas has the width of scores \(3\)",
    ),
    Bad(
        "proposals-stride-zero",
        Op.GENERATE_PROPOSALS,
        proposal_ins({5: scalar(0.0, T.FLOAT32)}),
        PROPOSAL_OUTS,
        r"input 5 \(width_stride\) is 0.0; it must be positive",
    ),
    Bad(
        "proposals-rank3",
        Op.GENERATE_PROPOSALS,
        proposal_ins({0: f32((2, 2, 3))}),
        PROPOSAL_OUTS,
        r"input 0 has rank 3; it must have rank 4",
    ),
    Bad(
        "proposals-layout-not-constant",
        Op.GENERATE_PROPOSALS,
        proposal_ins({10: scalar(False, T.BOOL, const=False)}),
        PROPOSAL_OUTS,
        r"input 10 \(layout\) must be a constant",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_bbox_ops(row: Bad):
    row.check()


@pytest.mark.parametrize(
    ("op", "ins", "outs", "pattern"),
    [
        (
            Op.AXIS_ALIGNED_BBOX_TRANSFORM,
            transform_ins({2: i32(data=[1])}),
            [F32_OUT],
            r"batch index",
        ),
        (
            Op.AXIS_ALIGNED_BBOX_TRANSFORM,
            transform_ins({0: f32(data=[[4, 0, 2, 4]])}),
            [F32_OUT],
            r"x2 < x1",
        ),
        (
            Op.BOX_WITH_NMS_LIMIT,
            nms_ins({1: f32(data=[[3, 0, 2, 2] * 2] * 3)}),
            NMS_OUTS,
            r"x2 < x1",
        ),
        (
            Op.GENERATE_PROPOSALS,
            proposal_ins({2: f32(data=[[4, 0, 2, 2]] * 3)}),
            PROPOSAL_OUTS,
            r"anchor has x2 < x1",
        ),
        (
            Op.GENERATE_PROPOSALS,
            proposal_ins({0: f32((0, 2, 2, 3)), 1: f32((0, 2, 2, 12)), 3: f32((0, 2))}),
            PROPOSAL_OUTS,
            r"zero-sized",
        ),
    ],
)
def test_bbox_run_time_failures(op, ins, outs, pattern):
    ctx = context(op, ins, outs)
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(GeneralFailure, match=pattern):
        kernel(*[x.data for x in ins if x.is_tensor])


def test_box_with_nms_limit_keeps_batches_apart():
    # Two identical boxes in different batches never suppress each other.
    ins = nms_ins(
        {
            0: f32(data=[[0, 0.9], [0, 0.8]]),
            1: f32(data=[[0, 0, 2, 2] * 2] * 2),
            2: i32(data=[0, 3]),
        }
    )
    ctx = context(Op.BOX_WITH_NMS_LIMIT, ins, NMS_OUTS)
    validate_operation(ctx)
    scores, rois, classes, batches = ctx.op.kernel(ctx)(*[x.data for x in ins if x.is_tensor])
    assert scores.tolist() == pytest.approx([0.9, 0.8])
    assert classes.tolist() == [1, 1] and batches.tolist() == [0, 3]
    assert rois.shape == (2, 4) and math.isclose(float(rois[1, 2]), 2.0)


def test_box_with_nms_limit_with_a_run_time_limit_and_unknown_output_sizes():
    """max_detections as a model input (bound when the value arrives); outputs of unknown size."""
    from nnhal.driver.executor import compile_model

    from nnhal.builder import ModelBuilder

    mb = ModelBuilder()
    g = mb.main
    scores = g.input(T.TENSOR_FLOAT32, [4, 2])
    rois = g.input(T.TENSOR_FLOAT32, [4, 8])
    limit = g.input(T.INT32, [])
    outs = [g.output(T.TENSOR_FLOAT32, [0]), g.output(T.TENSOR_FLOAT32, [0, 0])]
    outs += [g.output(T.TENSOR_INT32, [0]), g.output(T.TENSOR_INT32, [])]
    params = [g.constant(T.FLOAT32, 0.1), limit, g.constant(T.INT32, 0)]
    params += [g.constant(T.FLOAT32, v) for v in (0.5, 1.0, 0.1)]
    batches = g.constant(T.TENSOR_INT32, np.zeros(4, np.int32))
    g.operation(Op.BOX_WITH_NMS_LIMIT, [scores, rois, batches, *params], outs)
    model = compile_model(mb.build())
    boxes = np.array([[0, 0, 1, 1, 10 * k, 0, 10 * k + 1, 1] for k in range(4)], np.float32)
    values = np.array([[0, 0.9], [0, 0.6], [0, 0.8], [0, 0.7]], np.float32)
    for n, want in ((-1, [0.9, 0.8, 0.7, 0.6]), (2, [0.9, 0.8]), (0, [])):
        got = model.run([values, boxes, np.int32(n)])
        assert got[0].tolist() == pytest.approx(want)
        assert got[1].shape == (len(want), 4) and got[2].shape == got[3].shape == (len(want),)

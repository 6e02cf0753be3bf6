"""Tables of DETECTION_POSTPROCESSING and HEATMAP_MAX_KEYPOINT.

References are loops over batches, anchors, classes, boxes and keypoints in
float32 scalars, written from the operations' definitions (the center-size
box decoding, regular and fast NMS, the quadratic refinement of the heatmap
maximum); NMS is the literal simulation of test_ops_bbox.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from multi_output_harness import MultiRow, deq, literal_nms, quantize
from nnhal.driver.ops.registry import validate_operation
from ops_harness import Bad, context, f16, f32, out, s8, scalar, t, u8

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F = np.float32
Q16 = T.TENSOR_QUANT16_ASYMM
I32_OUT = out(T.TENSOR_INT32)
FLT_MAX = np.finfo(F).max


# ---------------------------------------------------------------------------
# DETECTION_POSTPROCESSING
# ---------------------------------------------------------------------------


def postprocess_ref(xs, params, outs):
    sy, sx, sh, sw, regular, max_det, per_det, per_class, thr, iou_t, bg = params
    scores, deltas, anchors = (deq(x) for x in xs)
    batches, count, classes = scores.shape
    total = max_det if regular else max_det * per_det
    o_scores = np.zeros((batches, total), F)
    o_boxes = np.zeros((batches, total, 4), F)
    o_classes = np.zeros((batches, total), np.int32)
    found = np.zeros(batches, np.int32)

    def hard(i, v):
        return v >= F(iou_t)

    for b in range(batches):
        boxes = []
        for a in range(count):
            ay, ax, ah, aw = anchors[a]
            d = deltas[b, a]
            y = ay + ah * d[0] / F(sy)
            x = ax + aw * d[1] / F(sx)
            hh = ah * F(np.exp(d[2] / F(sh))) * F(0.5)
            hw = aw * F(np.exp(d[3] / F(sw))) * F(0.5)
            boxes.append([y - hh, x - hw, y + hh, x + hw])
        boxes = np.array(boxes, F)
        picked = []
        if regular:
            for c in range(1, classes):
                sc = scores[b, :, c].copy()
                cand = [a for a in range(count) if sc[a] > F(thr)]
                picked += [(sc[a], a, c) for a in literal_nms(sc, boxes, cand, per_class, hard)]
            picked.sort(key=lambda p: -p[0])
            picked = picked[:max_det]
        else:
            best = np.array([max(scores[b, a, 1:]) for a in range(count)], F)
            cand = [a for a in range(count) if best[a] > F(thr)]
            for a in literal_nms(best, boxes, cand, max_det, hard):
                ranked = sorted(range(1, classes), key=lambda c: -scores[b, a, c])
                picked += [(scores[b, a, c], a, c) for c in ranked[: min(classes - 1, per_det)]]
        for k, (value, a, c) in enumerate(picked):
            o_scores[b, k] = value
            o_boxes[b, k] = boxes[a]
            o_classes[b, k] = c - (0 if bg else 1)
        found[b] = len(picked)
    return [quantize(o_scores, outs[0]), quantize(o_boxes, outs[1]), o_classes, found]


def postprocess_row(rid, kind, shape, params, seed=0):
    batches, count, _classes = shape
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 10, shape) / 10  # ties
    deltas = rng.uniform(-1, 1, (batches, count, 4))
    anchors = np.concatenate([rng.uniform(0, 1, (count, 2)), rng.uniform(0.1, 0.5, (count, 2))], 1)
    make = f16 if kind == "f16" else f32
    fs = T.FLOAT16 if kind == "f16" else T.FLOAT32
    xs = [make(data=scores), make(data=deltas), make(data=anchors)]
    sy, sx, sh, sw, regular, max_det, per_det, per_class, thr, iou_t, bg = params
    ins = xs + [scalar(v, fs) for v in (sy, sx, sh, sw)]
    ins += [scalar(regular, T.BOOL), scalar(max_det), scalar(per_det), scalar(per_class)]
    ins += [scalar(thr, fs), scalar(iou_t, fs), scalar(bg, T.BOOL)]
    outs = [out(xs[0].type), out(xs[0].type), I32_OUT, I32_OUT]
    if kind == "f16":
        params = params[:8] + (float(np.float16(thr)), float(np.float16(iou_t)), bg)
    total = max_det if regular else max_det * per_det
    shapes = [(batches, total), (batches, total, 4), (batches, total), (batches,)]

    def ref():
        return postprocess_ref(xs, params, outs)

    return MultiRow(rid, Op.DETECTION_POSTPROCESSING, ins, outs, ref, V.V1_2, shapes)


POSTPROCESS_ROWS = [
    postprocess_row(
        "regular-f32", "f32", (1, 8, 3), (10, 10, 5, 5, True, 5, 1, 2, 0.1, 0.5, False)
    ),
    postprocess_row(
        "regular-bg-in-label", "f32", (2, 10, 4), (5, 5, 2, 2, True, 4, 1, 3, 0.3, 0.3, True), 1
    ),
    postprocess_row(
        "fast-f32", "f32", (2, 9, 4), (10, 10, 5, 5, False, 3, 2, 1, 0.2, 0.5, False), 2
    ),
    postprocess_row(
        "fast-many-classes", "f32", (1, 12, 3), (1, 1, 1, 1, False, 6, 5, 1, 0.0, 0.4, True), 3
    ),
    postprocess_row(
        "regular-f16", "f16", (1, 6, 3), (10, 10, 5, 5, True, 3, 1, 1, 0.0, 0.5, False), 4
    ),
    postprocess_row(
        "fast-f16", "f16", (1, 7, 5), (10, 10, 5, 5, False, 2, 2, 1, 0.4, 0.5, False), 5
    ),
    postprocess_row(
        "none-above", "f32", (1, 4, 3), (10, 10, 5, 5, True, 3, 1, 2, 0.95, 0.5, False), 6
    ),
]


@pytest.mark.parametrize("row", POSTPROCESS_ROWS, ids=lambda r: r.id)
def test_detection_postprocessing(row: MultiRow):
    row.check()


# ---------------------------------------------------------------------------
# HEATMAP_MAX_KEYPOINT
# ---------------------------------------------------------------------------


def solve(g, best, tol):
    """Quadratic refinement around the maximum, scalar float32."""
    two = F(2)
    b0 = -(g[1][2] - g[1][0]) / two
    b1 = -(g[2][1] - g[0][1]) / two
    a00 = g[1][0] - two * g[1][1] + g[1][2]
    a01 = (g[2][2] - g[2][0] - g[0][2] + g[0][0]) / F(4)
    a11 = g[0][1] - two * g[1][1] + g[2][1]
    cross = a00 * a11
    det = cross - a01 * a01
    if abs(det) < tol + tol * cross:
        return F(0), F(0), best
    d0 = (a11 * b0 - a01 * b1) / det
    d1 = (a00 * b1 - a01 * b0) / det
    if abs(d0) > 1.5 or abs(d1) > 1.5:
        scale = F(1.5) / max(abs(d0), abs(d1))
        d0, d1 = d0 * scale, d1 * scale
    quad = ((a00 * d0 + a01 * d1) * d0 + (a01 * d0 + a11 * d1) * d1) / two
    return d0, d1, g[1][1] - b0 * d0 - b1 * d1 + quad


def heatmap_ref(hm_x, boxes_x, nchw, outs, tol):
    hm, boxes = deq(hm_x), deq(boxes_x)
    if nchw:
        hm = hm.transpose(0, 2, 3, 1)
    n, size, _, keypoints = hm.shape
    scores = np.zeros((n, keypoints), F)
    points = np.zeros((n, keypoints, 2), F)
    for i in range(n):
        for j in range(keypoints):
            best, index = -FLT_MAX, 0
            for k in range(size * size):
                if best < hm[i, k // size, k % size, j]:
                    best, index = hm[i, k // size, k % size, j], k
            row, col = divmod(index, size)

            def mirror(v):
                return 1 if v < 0 else (size - 2 if v >= size else v)

            grid = [
                [hm[i, mirror(row + dh), mirror(col + dw), j] for dw in (-1, 0, 1)]
                for dh in (-1, 0, 1)
            ]
            d0, d1, score = solve(grid, F(best), F(tol))
            x1, y1, x2, y2 = boxes[i]
            scores[i, j] = score
            points[i, j, 0] = (F(col) + d0 + F(0.5)) / F(size) * (x2 - x1) + x1
            points[i, j, 1] = (F(row) + d1 + F(0.5)) / F(size) * (y2 - y1) + y1
    return [quantize(scores, outs[0]), quantize(points, outs[1])]


def heatmap_row(rid, kind, n, size, keypoints, nchw, version=V.V1_2, seed=0, data=None):
    rng = np.random.default_rng(seed)
    hm = rng.uniform(-10, 10, (n, size, size, keypoints)) if data is None else np.asarray(data)
    xy = rng.uniform(0, 20, (n, 2))
    boxes = np.round(np.concatenate([xy, xy + rng.uniform(1, 30, (n, 2))], 1) * 8) / 8
    if nchw:
        hm = hm.transpose(0, 3, 1, 2)
    if kind in ("u8", "s8"):
        make = u8 if kind == "u8" else s8
        zp = 128 if kind == "u8" else 0
        hm_x = make(data=np.clip(np.round(hm / 0.1) + zp, -128 + zp, 127 + zp), scale=0.1, zp=zp)
        boxes_x = t(Q16, data=boxes * 8, scale=0.125)
        outs = [out(hm_x.type, scale=0.05, zp=zp - 20), out(Q16, scale=0.125)]
    else:
        make = f16 if kind == "f16" else f32
        hm_x, boxes_x = make(data=hm), make(data=boxes)
        outs = [out(hm_x.type), out(hm_x.type)]
    tol = 1e-3 if kind == "f16" else 1e-5
    ins = [hm_x, boxes_x, scalar(nchw, T.BOOL)]

    def ref():
        return heatmap_ref(hm_x, boxes_x, nchw, outs, tol)

    return MultiRow(
        rid, Op.HEATMAP_MAX_KEYPOINT, ins, outs, ref, version, [(n, keypoints), (n, keypoints, 2)]
    )


def _peaks():
    """Maxima on the border, a flat map (singular fit) and a steep ridge (clipped shift)."""
    hm = np.zeros((3, 4, 4, 2))
    hm[0, 0, 3, 0], hm[0, 3, 0, 1] = 5, 7  # corners: mirrored neighbourhoods
    hm[1] = 1.0  # flat: no refinement
    hm[2, :, :, 0] = np.arange(16).reshape(4, 4) ** 2  # maximum at the far corner
    hm[2, 1, 2, 1], hm[2, 1, 1, 1] = 3, 2.9
    return hm


HEATMAP_ROWS = [
    heatmap_row("heatmap-f32-nhwc", "f32", 3, 5, 2, False),
    heatmap_row("heatmap-f32-nchw", "f32", 2, 6, 3, True, seed=1),
    heatmap_row("heatmap-f32-edges", "f32", 3, 4, 2, False, data=_peaks()),
    heatmap_row("heatmap-f16", "f16", 2, 4, 2, True, seed=2),
    heatmap_row("heatmap-u8", "u8", 3, 5, 2, False, seed=3),
    heatmap_row("heatmap-s8-nchw", "s8", 2, 3, 3, True, V.V1_3, seed=4),
]


@pytest.mark.parametrize("row", HEATMAP_ROWS, ids=lambda r: r.id)
def test_heatmap_max_keypoint(row: MultiRow):
    row.check()


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

F32_OUT = out(T.TENSOR_FLOAT32)
POST_OUTS = [F32_OUT, F32_OUT, I32_OUT, I32_OUT]


def post_ins(change=None):
    ins = {0: f32((1, 4, 3)), 1: f32((1, 4, 4)), 2: f32((4, 4))}
    for k, v in enumerate((10.0, 10.0, 5.0, 5.0), start=3):
        ins[k] = scalar(v, T.FLOAT32)
    ins.update({7: scalar(True, T.BOOL), 8: scalar(3), 9: scalar(1), 10: scalar(1)})
    ins.update({11: scalar(0.1, T.FLOAT32), 12: scalar(0.5, T.FLOAT32), 13: scalar(False, T.BOOL)})
    ins.update(change or {})
    return [ins[k] for k in sorted(ins)]


def heat_ins(change=None):
    ins = {
        0: f32((2, 4, 4, 3)),
        1: f32(data=[[0, 0, 4, 4], [1, 1, 2, 2]]),
        2: scalar(False, T.BOOL),
    }
    ins.update(change or {})
    return [ins[k] for k in sorted(ins)]


HEAT_OUTS = [F32_OUT, F32_OUT]

BAD_ROWS = [
    Bad(
        "post-arity",
        Op.DETECTION_POSTPROCESSING,
        post_ins()[:13],
        POST_OUTS,
        r"expected 14 inputs, got 13",
    ),
    Bad(
        "post-u8",
        Op.DETECTION_POSTPROCESSING,
        post_ins({0: u8((1, 4, 3))}),
        POST_OUTS,
        r"input 0 \(scores\) has type TENSOR_QUANT8_ASYMM; supported: TENSOR_FLOAT32 \(1.2\), TENSOR_FLOAT16 \(1.2\)",
    ),
    Bad(
        "post-scale-zero",
        Op.DETECTION_POSTPROCESSING,
        post_ins({5: scalar(0.0, T.FLOAT32)}),
        POST_OUTS,
        r"input 5 \(scale_h\) is 0.0; it must be positive",
    ),
    Bad(
        "post-max-detections-0",
        Op.DETECTION_POSTPROCESSING,
        post_ins({8: scalar(0)}),
        POST_OUTS,
        r"input 8 \(max_detections\) is 0; it must be positive",
    ),
    Bad(
        "post-regular-per-class-0",
        Op.DETECTION_POSTPROCESSING,
        post_ins({10: scalar(0)}),
        POST_OUTS,
        r"input 10 \(max_detections_per_class\) is 0; it must be positive",
    ),
    Bad(
        "post-fast-per-detection-0",
        Op.DETECTION_POSTPROCESSING,
        post_ins({7: scalar(False, T.BOOL), 9: scalar(0)}),
        POST_OUTS,
        r"input 9 \(max_classes_per_detection\) is 0; it must be positive",
    ),
    Bad(
        "post-negative-threshold",
        Op.DETECTION_POSTPROCESSING,
        post_ins({11: scalar(-0.5, T.FLOAT32)}),
        POST_OUTS,
        r"input 11 \(score_threshold\) is -0.5; it must not be negative",
    ),
    Bad(
        "post-anchors-3",
        Op.DETECTION_POSTPROCESSING,
        post_ins({2: f32((4, 3))}),
        POST_OUTS,
        r"input 2 \(anchors\) has 3 on axis 1; anchors are \[num_anchors, 4\]",
    ),
    Bad(
        "post-short-encoding",
        Op.DETECTION_POSTPROCESSING,
        post_ins({1: f32((1, 4, 3))}),
        POST_OUTS,
        r"input 1 \(bbox_deltas\) has 3 values per box; the minimum is 4",
    ),
    Bad(
        "post-one-class",
        Op.DETECTION_POSTPROCESSING,
        post_ins({0: f32((1, 4, 1))}),
        POST_OUTS,
        r"input 0 \(scores\) has 1 class; it needs at least 2",
    ),
    Bad(
        "post-count-f32",
        Op.DETECTION_POSTPROCESSING,
        post_ins(),
        [F32_OUT, F32_OUT, I32_OUT, F32_OUT],
        r"output 3 \(num_detections\) has type TENSOR_FLOAT32; .*supported: TENSOR_INT32",
    ),
    Bad(
        "post-scale-f16-scalar",
        Op.DETECTION_POSTPROCESSING,
        post_ins({3: scalar(1.0, T.FLOAT16)}),
        POST_OUTS,
        r"input 3 \(scale_y\) has type FLOAT16; with TENSOR_FLOAT32 supported: FLOAT32",
    ),
    Bad(
        "heat-arity",
        Op.HEATMAP_MAX_KEYPOINT,
        heat_ins()[:2],
        HEAT_OUTS,
        r"expected 3 inputs, got 2",
    ),
    Bad(
        "heat-outputs",
        Op.HEATMAP_MAX_KEYPOINT,
        heat_ins(),
        HEAT_OUTS[:1],
        r"expected 2 outputs, got 1",
    ),
    Bad(
        "heat-not-square",
        Op.HEATMAP_MAX_KEYPOINT,
        heat_ins({0: f32((2, 4, 5, 3))}),
        HEAT_OUTS,
        r"input 0 \(heatmap\) is 5 x 4; heatmaps must be square",
    ),
    Bad(
        "heat-size-1",
        Op.HEATMAP_MAX_KEYPOINT,
        heat_ins({0: f32((2, 3, 1, 1)), 2: scalar(True, T.BOOL)}),
        HEAT_OUTS,
        r"input 0 \(heatmap\) is 1 x 1; the minimum heatmap size is 2",
    ),
    Bad(
        "heat-boxes-5",
        Op.HEATMAP_MAX_KEYPOINT,
        heat_ins({1: f32((2, 5))}),
        HEAT_OUTS,
        r"input 1 \(boxes\) has 5 on axis 1; boxes are \[num_boxes, 4\]",
    ),
    Bad(
        "heat-box-count",
        Op.HEATMAP_MAX_KEYPOINT,
        heat_ins({1: f32((3, 4))}),
        HEAT_OUTS,
        r"input 1 \(boxes\) has 3 on axis 0; one box per heatmap",
    ),
    Bad(
        "heat-quant-boxes-f32",
        Op.HEATMAP_MAX_KEYPOINT,
        heat_ins({0: u8((2, 4, 4, 3), scale=0.1)}),
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.1), out(Q16, scale=0.125)],
        r"input 1 \(boxes\) has type TENSOR_FLOAT32; .*supported: TENSOR_QUANT16_ASYMM",
    ),
    Bad(
        "heat-keypoints-scale",
        Op.HEATMAP_MAX_KEYPOINT,
        heat_ins({0: u8((2, 4, 4, 3), scale=0.1), 1: t(Q16, data=[[0, 0, 8, 8]] * 2, scale=0.125)}),
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.1), out(Q16, scale=0.5)],
        r"output 1 \(keypoints\) has scale 0.5 and zero point 0; .*scale 0.125",
    ),
    Bad(
        "heat-rank3",
        Op.HEATMAP_MAX_KEYPOINT,
        heat_ins({0: f32((2, 4, 4))}),
        HEAT_OUTS,
        r"input 0 has rank 3; it must have rank 4",
    ),
    Bad(
        "heat-layout-not-constant",
        Op.HEATMAP_MAX_KEYPOINT,
        heat_ins({2: scalar(False, T.BOOL, const=False)}),
        HEAT_OUTS,
        r"input 2 \(layout\) must be a constant",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_detection_ops(row: Bad):
    row.check()


@pytest.mark.parametrize(
    ("op", "ins", "outs", "pattern"),
    [
        (
            Op.HEATMAP_MAX_KEYPOINT,
            heat_ins({1: f32(data=[[4, 0, 0, 4], [1, 1, 2, 2]])}),
            HEAT_OUTS,
            r"x2 < x1",
        ),
        (
            Op.HEATMAP_MAX_KEYPOINT,
            heat_ins({0: f32((0, 4, 4, 3)), 1: f32((0, 4))}),
            HEAT_OUTS,
            r"zero-sized",
        ),
        (
            Op.DETECTION_POSTPROCESSING,
            post_ins({0: f32((0, 4, 3)), 1: f32((0, 4, 4))}),
            POST_OUTS,
            r"zero-sized",
        ),
    ],
)
def test_detection_run_time_failures(op, ins, outs, pattern):
    ctx = context(op, ins, outs)
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(GeneralFailure, match=pattern):
        kernel(*[x.data for x in ins if x.is_tensor])


def test_detection_postprocessing_pads_with_zeros():
    ins = post_ins({0: f32(data=[[[0, 0.9, 0.1], [0, 0.05, 0.05], [0, 0.2, 0.8], [0, 0, 0]]])})
    ins[1] = f32(data=np.zeros((1, 4, 4)))
    ins[2] = f32(data=[[0.5, 0.5, 1, 1], [3, 3, 1, 1], [6, 6, 1, 1], [9, 9, 1, 1]])
    ctx = context(Op.DETECTION_POSTPROCESSING, ins, POST_OUTS)
    validate_operation(ctx)
    scores, boxes, classes, found = ctx.op.kernel(ctx)(*[x.data for x in ins if x.is_tensor])
    assert found.tolist() == [2]
    assert scores.tolist()[0] == pytest.approx([0.9, 0.8, 0.0])
    assert classes.tolist() == [[0, 1, 0]]  # background not in the labels: class - 1
    assert boxes[0, 0].tolist() == [0.0, 0.0, 1.0, 1.0] and not boxes[0, 2].any()
    assert math.isclose(float(boxes[0, 1, 0]), 5.5)

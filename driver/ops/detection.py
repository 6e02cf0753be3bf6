"""DETECTION_POSTPROCESSING and HEATMAP_MAX_KEYPOINT.

DETECTION_POSTPROCESSING (the SSD post-processing of TFLite) decodes anchor
deltas in the center-size encoding: an anchor ``(y, x, h, w)`` and deltas
``(dy, dx, dh, dw)`` give the center ``(y + h*dy/scale_y, x + w*dx/scale_x)``
and the size ``(h*exp(dh/scale_h), w*exp(dw/scale_w))``; boxes come out as
``(y1, x1, y2, x2)``. Then, per batch, either

- regular NMS: per class (class 0 is the background and skipped), hard NMS
  over the boxes scoring above the threshold, at most
  ``max_detections_per_class`` each; the best ``max_detections`` of all
  classes by descending score; or
- fast NMS: one hard NMS over the best class score of each box, at most
  ``max_detections`` boxes, each reported with its ``max_classes_per_detection``
  best classes.

Outputs are padded with zeros to ``max_detections`` (times
``max_classes_per_detection`` for fast NMS); the last output counts the
detections. Classes are reported minus one unless ``is_bg_in_label``.

HEATMAP_MAX_KEYPOINT finds, per box and keypoint, the maximum of the square
heatmap, refines its position and score with the quadratic (second order
Taylor) fit of the 3x3 neighbourhood (mirrored at the borders; skipped when
the Hessian is singular; the shift is limited to 1.5 pixels), and maps the
position into the box. Vectorized over boxes and keypoints.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._box_util import (
    BOOL,
    INT32,
    INT32_TENSOR,
    box_type,
    by_score,
    check_box_quant,
    check_dim,
    check_positive,
    const_scalar,
    dequantizer,
    dim,
    float_scalar,
    hard_suppress,
    nms,
    quantizer,
)
from nnhal.driver.ops._operand_rules import check_rank, dtype_of, runtime_failure
from nnhal.driver.ops.layout import layout_if_constant, layout_is_nchw, to_nhwc
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32
FLT_MAX = np.finfo(f32).max

# ---------------------------------------------------------------------------
# DETECTION_POSTPROCESSING
# ---------------------------------------------------------------------------


def _detection_count(ctx: OpContext) -> int:
    """Detections per batch in the outputs (0 when a parameter is not known yet)."""
    regular = const_scalar(ctx, 7)
    max_det = const_scalar(ctx, 8)
    per_detection = const_scalar(ctx, 9)
    if regular is None or max_det is None:
        return 0
    if regular:
        return max(int(max_det), 0)
    return 0 if per_detection is None else max(int(max_det) * int(per_detection), 0)


def _postprocess_validate(ctx: OpContext) -> None:
    for index, rank in ((0, 3), (1, 3), (2, 2)):
        check_rank(ctx, index, exact=rank)
    scores = ctx.inputs[0].dimensions
    check_dim(ctx, 1, 0, dim(scores, 0), "bbox_deltas has the batches of scores")
    check_dim(ctx, 1, 1, dim(scores, 1), "bbox_deltas has one row per anchor")
    check_dim(ctx, 2, 0, dim(scores, 1), "one anchor per score row")
    check_dim(ctx, 2, 1, 4, "anchors are [num_anchors, 4]")
    if dim(scores, 2) == 1:
        raise ctx.fail("input 0 (scores) has 1 class; it needs at least 2 (class 0 is background)")
    encoding = dim(ctx.inputs[1].dimensions, 2)
    if encoding and encoding < 4:
        raise ctx.fail(f"input 1 (bbox_deltas) has {encoding} values per box; the minimum is 4")
    for index in (3, 4, 5, 6, 8):
        check_positive(ctx, index)
    for index in (11, 12):
        check_positive(ctx, index, allow_zero=True)
    regular = const_scalar(ctx, 7)
    if regular is not None:
        check_positive(ctx, 10 if regular else 9)


def _postprocess_prepare(ctx: OpContext) -> list[Shape]:
    batches = dim(ctx.inputs[0].dimensions, 0)
    count = _detection_count(ctx)
    return [(batches, count), (batches, count, 4), (batches, count), (batches,)]


def decode_center_size(anchors: np.ndarray, deltas: np.ndarray, scales) -> np.ndarray:
    """Boxes (y1, x1, y2, x2) from anchors (y, x, h, w) and deltas, in float32."""
    sy, sx, sh, sw = scales
    ay, ax, ah, aw = (anchors[:, i] for i in range(4))
    y = ay + ah * deltas[:, 0] / sy
    x = ax + aw * deltas[:, 1] / sx
    half_h = ah * np.exp(deltas[:, 2] / sh) * f32(0.5)
    half_w = aw * np.exp(deltas[:, 3] / sw) * f32(0.5)
    return np.stack([y - half_h, x - half_w, y + half_h, x + half_w], axis=1)


def _postprocess_execute(ctx: OpContext) -> Callable[..., tuple]:
    scales = tuple(f32(ctx.scalar(i)) for i in (3, 4, 5, 6))
    regular = bool(ctx.scalar(7))
    max_det = int(ctx.scalar(8))
    per_detection = int(ctx.scalar(9))
    per_class = int(ctx.scalar(10))
    threshold = f32(ctx.scalar(11))
    suppress = hard_suppress(ctx.scalar(12))
    label_shift = 0 if ctx.scalar(13) else 1
    if min(scales) <= 0 or max_det <= 0 or (per_class if regular else per_detection) <= 0:
        raise ctx.fail(
            "scales, max_detections and max_detections_per_class (regular NMS) or "
            "max_classes_per_detection (fast NMS) must be positive"
        )
    count = max_det if regular else max_det * per_detection
    out_dtype = dtype_of(ctx.outputs[0].type)
    to_float = dequantizer(ctx.inputs[0])

    def regular_nms(scores: np.ndarray, boxes: np.ndarray):
        classes = scores.shape[1]
        chosen = []
        for c in range(1, classes):
            column = np.ascontiguousarray(scores[:, c])
            candidates = np.flatnonzero(column > threshold)
            if candidates.size:
                kept = nms(column, boxes, candidates, per_class, suppress)
                chosen.append(kept * classes + c)
        if not chosen:
            return np.empty(0, np.intp), np.empty(0, np.intp), np.empty(0, f32)
        flat = np.concatenate(chosen)
        order = by_score(scores.reshape(-1), flat)[:max_det]
        anchor, cls = np.divmod(order, classes)
        return anchor, cls, scores.reshape(-1)[order]

    def fast_nms(scores: np.ndarray, boxes: np.ndarray):
        classes = scores.shape[1]
        best = scores[:, 1:].max(axis=1)
        kept = nms(best, boxes, np.flatnonzero(best > threshold), max_det, suppress)
        top = min(classes - 1, per_detection)
        ranked = np.argsort(-scores[kept, 1:], axis=1, kind="stable")[:, :top] + 1
        anchor = np.repeat(kept, top)
        cls = ranked.reshape(-1)
        return anchor, cls, scores[anchor, cls]

    select = regular_nms if regular else fast_nms

    def detection_postprocessing(
        scores: np.ndarray, deltas: np.ndarray, anchors: np.ndarray
    ) -> tuple:
        batches, n_anchors, _ = scores.shape
        if deltas.shape[:2] != (batches, n_anchors) or anchors.shape != (n_anchors, 4):
            raise runtime_failure(ctx, "bbox_deltas / anchors do not match the scores")
        s, d, a = to_float(scores), to_float(deltas), to_float(anchors)
        out_scores = np.zeros((batches, count), f32)
        out_boxes = np.zeros((batches, count, 4), f32)
        out_classes = np.zeros((batches, count), np.int32)
        found = np.zeros((batches,), np.int32)
        for b in range(batches):
            boxes = decode_center_size(a, d[b], scales)
            anchor, cls, value = select(s[b], boxes)
            k = anchor.size
            out_scores[b, :k] = value
            out_boxes[b, :k] = boxes[anchor]
            out_classes[b, :k] = cls - label_shift
            found[b] = k
        return out_scores.astype(out_dtype), out_boxes.astype(out_dtype), out_classes, found

    return detection_postprocessing


FLOAT_TYPES = {_T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_FLOAT16: _V.V1_2}

DETECTION_POSTPROCESSING = register(
    OperationDef(
        OperationType.DETECTION_POSTPROCESSING,
        inputs=(
            Arg("scores"),
            Arg("bbox_deltas"),
            Arg("anchors"),
            Arg("scale_y", float_scalar),
            Arg("scale_x", float_scalar),
            Arg("scale_h", float_scalar),
            Arg("scale_w", float_scalar),
            Arg("use_regular_nms", BOOL),
            Arg("max_detections", INT32),
            Arg("max_classes_per_detection", INT32),
            Arg("max_detections_per_class", INT32),
            Arg("score_threshold", float_scalar),
            Arg("iou_threshold", float_scalar),
            Arg("is_bg_in_label", BOOL),
        ),
        outputs=(
            Arg("scores_out"),
            Arg("rois_out"),
            Arg("classes_out", INT32_TENSOR),
            Arg("num_detections", INT32_TENSOR),
        ),
        types=FLOAT_TYPES,
        execute=_postprocess_execute,
        zero_sized_inputs=False,
        prepare=_postprocess_prepare,
        validate=_postprocess_validate,
    )
)

# ---------------------------------------------------------------------------
# HEATMAP_MAX_KEYPOINT
# ---------------------------------------------------------------------------


def _heatmap_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, exact=4)
    check_rank(ctx, 1, exact=2)
    dims = ctx.inputs[0].dimensions
    check_dim(ctx, 1, 0, dim(dims, 0), "one box per heatmap (num_boxes)")
    check_dim(ctx, 1, 1, 4, "boxes are [num_boxes, 4]")
    layout = layout_if_constant(ctx)
    if layout is not None and dims is not None:
        size, other = dim(dims, 2), dim(dims, 3 if layout else 1)
        if size and other and size != other:
            raise ctx.fail(f"input 0 (heatmap) is {size} x {other}; heatmaps must be square")
        if size == 1:
            raise ctx.fail("input 0 (heatmap) is 1 x 1; the minimum heatmap size is 2")
    check_box_quant(ctx, 1)
    check_box_quant(ctx, 1, output=True)


def _heatmap_prepare(ctx: OpContext) -> list[Shape]:
    layout = layout_is_nchw(ctx)
    dims = ctx.inputs[0].dimensions
    boxes, keypoints = dim(dims, 0), dim(dims, 1 if layout else 3)
    return [(boxes, keypoints), (boxes, keypoints, 2)]


def _refine(grid: list[np.ndarray], best: np.ndarray, atol: f32, rtol: f32):
    """The reference's ``solveForDelta`` on arrays: (dx, dy, score)."""
    g = grid  # g[3 * (dh + 1) + (dw + 1)]
    two, four, half = f32(2), f32(4), f32(1.5)
    b0 = -(g[5] - g[3]) / two
    b1 = -(g[7] - g[1]) / two
    a00 = g[3] - two * g[4] + g[5]
    a01 = (g[8] - g[6] - g[2] + g[0]) / four
    a11 = g[1] - two * g[4] + g[7]
    cross1 = a00 * a11
    det = cross1 - a01 * a01
    solvable = ~(np.abs(det) < atol + rtol * cross1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d0 = (a11 * b0 - a01 * b1) / det
        d1 = (a00 * b1 - a01 * b0) / det
        big = np.maximum(np.abs(d0), np.abs(d1))
        shrink = np.where(big > half, half / big, f32(1))
        d0 = np.where(big > half, d0 * shrink, d0)
        d1 = np.where(big > half, d1 * shrink, d1)
        quad = ((a00 * d0 + a01 * d1) * d0 + (a01 * d0 + a11 * d1) * d1) / two
        score = g[4] - b0 * d0 - b1 * d1 + quad
    zero = f32(0)
    return (
        np.where(solvable, d0, zero),
        np.where(solvable, d1, zero),
        np.where(solvable, score, best),
    )


def _heatmap_execute(ctx: OpContext) -> Callable[..., tuple]:
    nchw = layout_is_nchw(ctx)
    heat_of, boxes_of = dequantizer(ctx.inputs[0]), dequantizer(ctx.inputs[1])
    score_out, point_out = ctx.outputs
    score_back = quantizer(score_out.type, score_out.scale, score_out.zeroPoint)
    point_back = quantizer(point_out.type, point_out.scale, point_out.zeroPoint)
    tol = f32(1e-3) if ctx.primary_type == _T.TENSOR_FLOAT16 else f32(1e-5)

    def heatmap_max_keypoint(heatmap: np.ndarray, boxes: np.ndarray) -> tuple:
        hm = to_nhwc(heat_of(heatmap), nchw)
        n, size, width, keypoints = hm.shape
        if size != width or size < 2 or boxes.shape != (n, 4):
            raise runtime_failure(ctx, "heatmaps must be square (at least 2 x 2), one box each")
        bx = boxes_of(boxes)
        if (bx[:, 0] > bx[:, 2]).any() or (bx[:, 1] > bx[:, 3]).any():
            raise runtime_failure(ctx, "a box has x2 < x1 or y2 < y1")
        flat = np.fmax(hm.reshape(n, size * size, keypoints), -FLT_MAX)
        index = flat.argmax(axis=1)  # [n, keypoints], the first maximum
        best = np.take_along_axis(flat, index[:, None, :], axis=1)[:, 0, :]
        row, col = np.divmod(index, size)
        boxes_ix = np.arange(n)[:, None]
        points_ix = np.arange(keypoints)[None, :]
        grid = []
        for dh in (-1, 0, 1):
            h = row + dh
            h = np.where(h < 0, 1, np.where(h >= size, size - 2, h))
            for dw in (-1, 0, 1):
                w = col + dw
                w = np.where(w < 0, 1, np.where(w >= size, size - 2, w))
                grid.append(hm[boxes_ix, h, w, points_ix])
        dx, dy, score = _refine(grid, best, tol, tol)
        x1, y1 = bx[:, 0:1], bx[:, 1:2]
        fsize = f32(size)
        rel_x = (col.astype(f32) + dx + f32(0.5)) / fsize
        rel_y = (row.astype(f32) + dy + f32(0.5)) / fsize
        points = np.stack([rel_x * (bx[:, 2:3] - x1) + x1, rel_y * (bx[:, 3:4] - y1) + y1], axis=-1)
        return score_back(score), point_back(points)

    return heatmap_max_keypoint


HEATMAP_MAX_KEYPOINT = register(
    OperationDef(
        OperationType.HEATMAP_MAX_KEYPOINT,
        inputs=(Arg("heatmap"), Arg("boxes", box_type), Arg("layout", BOOL)),
        layout=2,
        outputs=(Arg("scores"), Arg("keypoints", box_type)),
        types={
            _T.TENSOR_FLOAT32: _V.V1_2,
            _T.TENSOR_FLOAT16: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_heatmap_execute,
        zero_sized_inputs=False,
        prepare=_heatmap_prepare,
        validate=_heatmap_validate,
    )
)

"""AXIS_ALIGNED_BBOX_TRANSFORM, BOX_WITH_NMS_LIMIT and GENERATE_PROPOSALS.

Boxes are ``(x1, y1, x2, y2)``. All three work in float32 as the reference
does: float16 and quantized operands are converted first (quantized boxes are
TENSOR_QUANT16_ASYMM with scale 0.125), results converted back.

- AXIS_ALIGNED_BBOX_TRANSFORM applies Faster R-CNN deltas ``(dx, dy, dw, dh)``
  to each box for each class: with the box as center ``(x, y)`` and size
  ``(w, h)``, the new center is ``(x + dx*w, y + dy*h)``, the new size
  ``(w*exp(dw), h*exp(dh))``, and the corners are clipped to the image
  ``[0, width] x [0, height]`` of the box's batch.
- BOX_WITH_NMS_LIMIT runs, per batch (boxes of a batch are consecutive) and
  per class except class 0, NMS over the boxes scoring above the score
  threshold, with a hard, linear or gaussian kernel that lowers the scores of
  overlapping boxes (those falling below the NMS score threshold are
  dropped), keeps the best ``max_detections`` of the batch (negative: all)
  and returns them by class, then by descending score.
- GENERATE_PROPOSALS places the anchors at every feature-map pixel (shifted
  by the strides), applies the deltas as above, keeps the ``pre_nms`` best
  (when positive), drops boxes not larger than ``min_size`` or centered
  outside the image, and runs hard NMS keeping at most ``post_nms``.

The data-dependent outputs of the last two have their size fixed by the
kernel (the model declares them unknown); NMS loops over winners, everything
else is array arithmetic.
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
    check_same_quant,
    const_scalar,
    dequantizer,
    dim,
    float_scalar,
    hard_suppress,
    nms,
    quantizer,
    soft_suppress,
)
from nnhal.driver.ops._operand_rules import FLOATS, QUANT8, check_rank, dtype_of, runtime_failure
from nnhal.driver.ops.layout import layout_if_constant, layout_is_nchw, to_nhwc
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32

DETECTION_TYPES = {
    _T.TENSOR_FLOAT32: _V.V1_2,
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}


def transform_boxes(boxes: np.ndarray, deltas: np.ndarray, image: np.ndarray) -> np.ndarray:
    """The reference's ``bboxTransformFloat32`` on float32 arrays.

    boxes [n, 4], deltas [n, k*4], image [n, 2] (height, width of each box's
    image) -> [n, k*4], clipped to the image.
    """
    x1, y1, x2, y2 = (boxes[:, i : i + 1] for i in range(4))
    w, h = x2 - x1, y2 - y1
    cx, cy = (x1 + x2) / f32(2), (y1 + y2) / f32(2)
    d = deltas.reshape(deltas.shape[0], -1, 4)
    nw = np.exp(d[..., 2]) * w
    nh = np.exp(d[..., 3]) * h
    nx = cx + d[..., 0] * w
    ny = cy + d[..., 1] * h
    half_w, half_h = nw / f32(2), nh / f32(2)
    out = np.stack([nx - half_w, ny - half_h, nx + half_w, ny + half_h], axis=-1)
    limit = np.stack([image[:, 1], image[:, 0], image[:, 1], image[:, 0]], axis=-1)
    out = np.minimum(np.maximum(out, f32(0)), limit[:, None, :])
    return out.reshape(deltas.shape[0], -1)


def _bad_box(boxes: np.ndarray) -> bool:
    return bool((boxes[:, 0] > boxes[:, 2]).any() or (boxes[:, 1] > boxes[:, 3]).any())


# ---------------------------------------------------------------------------
# AXIS_ALIGNED_BBOX_TRANSFORM
# ---------------------------------------------------------------------------


def _deltas_types(primary: int) -> frozenset:
    if primary in FLOATS:
        return frozenset({primary})
    return QUANT8


def _transform_validate(ctx: OpContext) -> HalVersion | None:
    for index, rank in ((0, 2), (1, 2), (2, 1), (3, 2)):
        check_rank(ctx, index, exact=rank)
    rois = dim(ctx.inputs[0].dimensions, 0)
    check_dim(ctx, 0, 1, 4, "boxes are [num_rois, 4]")
    check_dim(ctx, 1, 0, rois, "one row of deltas per box (num_rois)")
    check_dim(ctx, 2, 0, rois, "one batch index per box (num_rois)")
    check_dim(ctx, 3, 1, 2, "image info is [batches, 2]")
    width = dim(ctx.inputs[1].dimensions, 1)
    if width and width % 4:
        raise ctx.fail(f"input 1 (bbox_deltas) has {width} on axis 1; it must be 4 * num_classes")
    for index in (0, 3):
        check_box_quant(ctx, index)
    check_box_quant(ctx, 0, output=True)
    if ctx.inputs[1].type == _T.TENSOR_QUANT8_ASYMM_SIGNED:
        return _V.V1_3
    return None


def _transform_prepare(ctx: OpContext) -> list[Shape]:
    return [(dim(ctx.inputs[0].dimensions, 0), dim(ctx.inputs[1].dimensions, 1))]


def _transform_execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    boxes_of, deltas_of, image_of = (dequantizer(ctx.inputs[i]) for i in (0, 1, 3))
    out = ctx.outputs[0]
    back = quantizer(out.type, out.scale, out.zeroPoint)

    def axis_aligned_bbox_transform(
        rois: np.ndarray, deltas: np.ndarray, batches: np.ndarray, image: np.ndarray
    ) -> np.ndarray:
        n = rois.shape[0]
        if n == 0 or deltas.size == 0:
            return np.empty((n, deltas.shape[1]), dtype=dtype_of(out.type))
        if deltas.shape[1] % 4 or deltas.shape[0] != n or batches.shape[0] != n:
            raise runtime_failure(ctx, "deltas must be [num_rois, 4 * num_classes]")
        if batches.min() < 0 or batches.max() >= image.shape[0]:
            raise runtime_failure(ctx, f"a batch index is outside [0, {image.shape[0]})")
        boxes = boxes_of(rois)
        if _bad_box(boxes):
            raise runtime_failure(ctx, "a box has x2 < x1 or y2 < y1")
        result = transform_boxes(boxes, deltas_of(deltas), image_of(image)[batches])
        return back(result)

    return axis_aligned_bbox_transform


AXIS_ALIGNED_BBOX_TRANSFORM = register(
    OperationDef(
        OperationType.AXIS_ALIGNED_BBOX_TRANSFORM,
        inputs=(
            Arg("rois"),
            Arg("bbox_deltas", _deltas_types),
            Arg("batch_indices", INT32_TENSOR),
            Arg("image_info"),
        ),
        outputs=(Arg("output"),),
        types={
            _T.TENSOR_FLOAT32: _V.V1_2,
            _T.TENSOR_FLOAT16: _V.V1_2,
            _T.TENSOR_QUANT16_ASYMM: _V.V1_2,
        },
        execute=_transform_execute,
        prepare=_transform_prepare,
        validate=_transform_validate,
    )
)


# ---------------------------------------------------------------------------
# BOX_WITH_NMS_LIMIT
# ---------------------------------------------------------------------------

KERNELS = "0 (hard), 1 (linear), 2 (gaussian)"


def _nms_validate(ctx: OpContext) -> None:
    for index, rank in ((0, 2), (1, 2), (2, 1)):
        check_rank(ctx, index, exact=rank)
    rois, classes = dim(ctx.inputs[0].dimensions, 0), dim(ctx.inputs[0].dimensions, 1)
    if classes == 1:
        raise ctx.fail("input 0 (scores) has 1 class; it needs at least 2 (class 0 is background)")
    check_dim(ctx, 1, 0, rois, "one row of boxes per score row (num_rois)")
    check_dim(ctx, 1, 1, 4 * classes, "boxes are [num_rois, 4 * num_classes]")
    check_dim(ctx, 2, 0, rois, "one batch index per box (num_rois)")
    kernel = const_scalar(ctx, 5)
    if kernel is not None and kernel not in (0, 1, 2):
        raise ctx.fail(f"input 5 (nms_kernel) is {kernel}; supported: {KERNELS}")
    check_box_quant(ctx, 1)
    check_box_quant(ctx, 1, output=True)
    check_same_quant(ctx, 0, 0)


def _unknown_count(ctx: OpContext) -> list[Shape]:
    return [(0,), (0, 4), (0,), (0,)][: len(ctx.op.outputs)]


def _nms_execute(ctx: OpContext) -> Callable[..., tuple]:
    score_threshold = f32(ctx.scalar(3))
    max_detections = int(ctx.scalar(4))
    kernel = int(ctx.scalar(5))
    if kernel not in (0, 1, 2):
        raise ctx.fail(f"input 5 (nms_kernel) is {kernel}; supported: {KERNELS}")
    suppress = soft_suppress(kernel, ctx.scalar(6), ctx.scalar(7), ctx.scalar(8))
    scores_of, boxes_of = dequantizer(ctx.inputs[0]), dequantizer(ctx.inputs[1])
    inp = ctx.inputs[0]
    score_back = quantizer(ctx.outputs[0].type, inp.scale, inp.zeroPoint)
    score_dtype, box_dtype = dtype_of(ctx.outputs[0].type), dtype_of(ctx.outputs[1].type)

    def empty() -> tuple:
        return (
            np.empty((0,), score_dtype),
            np.empty((0, 4), box_dtype),
            np.empty((0,), np.int32),
            np.empty((0,), np.int32),
        )

    def one_batch(scores: np.ndarray, boxes: np.ndarray, count: int) -> np.ndarray:
        """Selected flat indices (box * num_classes + class) of one batch."""
        classes = scores.shape[1]
        flat_scores = scores.reshape(-1)
        flat_boxes = boxes.reshape(-1, 4)
        # The reference checks the first `count` boxes of the flat list (sic).
        if _bad_box(flat_boxes[:count]):
            raise runtime_failure(ctx, "a box has x2 < x1 or y2 < y1")
        chosen = []
        for c in range(1, classes):
            candidates = np.flatnonzero(scores[:, c] > score_threshold) * classes + c
            if candidates.size:
                chosen.append(nms(flat_scores, flat_boxes, candidates, max_detections, suppress))
        if not chosen:
            return np.empty((0,), np.intp)
        selected = by_score(flat_scores, np.concatenate(chosen))
        if 0 <= max_detections < selected.size:
            selected = selected[:max_detections]
        # then by class, and by descending score within a class
        order = np.lexsort((-flat_scores[selected], selected % classes))
        return selected[order]

    def box_with_nms_limit(scores: np.ndarray, rois: np.ndarray, batches: np.ndarray) -> tuple:
        n, classes = scores.shape
        if n == 0:
            return empty()
        if rois.shape != (n, 4 * classes) or batches.shape != (n,):
            raise runtime_failure(ctx, "boxes must be [num_rois, 4 * num_classes]")
        real = scores_of(scores)  # the kernels lower these in place
        boxes = boxes_of(rois)
        starts = np.flatnonzero(np.r_[True, batches[1:] != batches[:-1]])
        ends = np.r_[starts[1:], n]
        picked, batch_ids = [], []
        for start, end in zip(starts, ends):
            sel = one_batch(real[start:end], boxes[start:end], end - start)
            picked.append(sel + start * classes)
            batch_ids.append(np.full(sel.size, batches[start], np.int32))
        flat = np.concatenate(picked)
        if flat.size == 0:
            return empty()
        row, cls = np.divmod(flat, classes)
        out_boxes = rois.reshape(n, classes, 4)[row, cls]
        return (
            score_back(real.reshape(-1)[flat]),
            out_boxes.astype(box_dtype),
            cls.astype(np.int32),
            np.concatenate(batch_ids),
        )

    return box_with_nms_limit


BOX_WITH_NMS_LIMIT = register(
    OperationDef(
        OperationType.BOX_WITH_NMS_LIMIT,
        inputs=(
            Arg("scores"),
            Arg("rois", box_type),
            Arg("batch_indices", INT32_TENSOR),
            Arg("score_threshold", float_scalar),
            Arg("max_detections", INT32),
            Arg("nms_kernel", INT32),
            Arg("iou_threshold", float_scalar),
            Arg("sigma", float_scalar),
            Arg("nms_score_threshold", float_scalar),
        ),
        outputs=(
            Arg("scores_out"),
            Arg("rois_out", box_type),
            Arg("classes_out", INT32_TENSOR),
            Arg("batch_indices_out", INT32_TENSOR),
        ),
        types=DETECTION_TYPES,
        execute=_nms_execute,
        prepare=_unknown_count,
        validate=_nms_validate,
    )
)


# ---------------------------------------------------------------------------
# GENERATE_PROPOSALS
# ---------------------------------------------------------------------------


def _anchor_type(primary: int) -> frozenset:
    return frozenset({_T.TENSOR_QUANT16_SYMM}) if primary in QUANT8 else frozenset({primary})


def _proposals_validate(ctx: OpContext) -> None:
    for index, rank in ((0, 4), (1, 4), (2, 2), (3, 2)):
        check_rank(ctx, index, exact=rank)
    check_dim(ctx, 2, 1, 4, "anchors are [num_anchors, 4]")
    check_dim(ctx, 3, 1, 2, "image info is [batches, 2]")
    scores = ctx.inputs[0].dimensions
    check_dim(ctx, 1, 0, dim(scores, 0), "bbox_deltas has the batches of scores")
    check_dim(ctx, 3, 0, dim(scores, 0), "image info has one row per batch")
    layout = layout_if_constant(ctx)
    if layout is not None:
        h_axis, w_axis, a_axis = (2, 3, 1) if layout else (1, 2, 3)
        anchors = dim(scores, a_axis)
        check_dim(ctx, 1, h_axis, dim(scores, h_axis), "bbox_deltas has the height of scores")
        check_dim(ctx, 1, w_axis, dim(scores, w_axis), "bbox_deltas has the width of scores")
        check_dim(ctx, 1, a_axis, 4 * anchors, "bbox_deltas has 4 values per anchor")
        check_dim(ctx, 2, 0, anchors, "one anchor per score channel")
    for index in (4, 5):
        check_positive(ctx, index)
    for index in (2, 3):
        check_box_quant(ctx, index)
    check_box_quant(ctx, 1, output=True)
    check_same_quant(ctx, 0, 0)


def _proposals_execute(ctx: OpContext) -> Callable[..., tuple]:
    h_stride, w_stride = f32(ctx.scalar(4)), f32(ctx.scalar(5))
    pre_nms, post_nms = int(ctx.scalar(6)), int(ctx.scalar(7))
    suppress = hard_suppress(ctx.scalar(8))
    min_size = f32(ctx.scalar(9))
    nchw = layout_is_nchw(ctx)
    scores_of, deltas_of, anchors_of, image_of = (dequantizer(ctx.inputs[i]) for i in range(4))
    inp, rois_out = ctx.inputs[0], ctx.outputs[1]
    score_back = quantizer(ctx.outputs[0].type, inp.scale, inp.zeroPoint)
    box_back = quantizer(rois_out.type, rois_out.scale, rois_out.zeroPoint)

    def generate_proposals(
        scores: np.ndarray, deltas: np.ndarray, anchors: np.ndarray, image: np.ndarray
    ) -> tuple:
        s = to_nhwc(scores_of(scores), nchw)
        d = to_nhwc(deltas_of(deltas), nchw)
        batches, height, width, count = s.shape
        if d.shape != (batches, height, width, 4 * count) or anchors.shape != (count, 4):
            raise runtime_failure(ctx, "bbox_deltas / anchors do not match the scores")
        if image.shape != (batches, 2):
            raise runtime_failure(ctx, "image info must be [batches, 2]")
        a = anchors_of(anchors)
        hs = np.arange(height, dtype=f32) * h_stride
        ws = np.arange(width, dtype=f32) * w_stride
        shift = np.zeros((height, width, 1, 4), f32)
        shift[..., 0::2] = ws[None, :, None, None]
        shift[..., 1::2] = hs[:, None, None, None]
        grid = (a[None, None] + shift).reshape(-1, 4)
        if _bad_box(grid):
            raise runtime_failure(ctx, "an anchor has x2 < x1 or y2 < y1")
        info = image_of(image)
        size = height * width * count
        out_scores, out_boxes, out_batch = [], [], []
        for b in range(batches):
            sc = s[b].reshape(-1)
            boxes = transform_boxes(
                grid, d[b].reshape(size, 4), np.broadcast_to(info[b], (size, 2))
            )
            select = np.arange(size)
            if 0 < pre_nms < size:
                select = by_score(sc, select)[:pre_nms]
            bx = boxes[select]
            bw, bh = bx[:, 2] - bx[:, 0], bx[:, 3] - bx[:, 1]
            keep = (
                (bw > min_size)
                & (bh > min_size)
                & (bx[:, 0] + bw / f32(2) < info[b, 1])
                & (bx[:, 1] + bh / f32(2) < info[b, 0])
            )
            select = nms(sc, boxes, select[keep], post_nms, suppress)
            out_scores.append(sc[select])
            out_boxes.append(boxes[select])
            out_batch.append(np.full(select.size, b, np.int32))
        return (
            score_back(np.concatenate(out_scores)),
            box_back(np.concatenate(out_boxes).reshape(-1, 4)),
            np.concatenate(out_batch),
        )

    return generate_proposals


GENERATE_PROPOSALS = register(
    OperationDef(
        OperationType.GENERATE_PROPOSALS,
        inputs=(
            Arg("scores"),
            Arg("bbox_deltas"),
            Arg("anchors", _anchor_type),
            Arg("image_info", box_type),
            Arg("height_stride", float_scalar),
            Arg("width_stride", float_scalar),
            Arg("pre_nms_max", INT32),
            Arg("post_nms_max", INT32),
            Arg("iou_threshold", float_scalar),
            Arg("min_size", float_scalar),
            Arg("layout", BOOL),
        ),
        outputs=(
            Arg("scores_out"),
            Arg("rois_out", box_type),
            Arg("batch_indices_out", INT32_TENSOR),
        ),
        layout=10,
        types=DETECTION_TYPES,
        execute=_proposals_execute,
        zero_sized_inputs=False,
        prepare=_unknown_count,
        validate=_proposals_validate,
    )
)

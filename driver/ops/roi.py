"""ROI_ALIGN and ROI_POOLING: fixed-size feature maps cut out of regions of interest.

Both take a feature map (NHWC, or NCHW with ``layout`` true), boxes
``[num_rois, 4]`` as ``(x1, y1, x2, y2)`` in image coordinates, the batch of
each box (TENSOR_INT32), the output height and width, and the ratios from
the image to the feature map (``box / ratio`` is in feature-map pixels).
The output is ``[num_rois, out_h, out_w, depth]`` (or NCHW).

ROI_ALIGN averages, per output cell, ``h_samples x w_samples`` points on a
regular grid inside the cell (0 samples: ``ceil(cell size)``, per box), each
interpolated bilinearly from the four pixels around it (a point past the last
row/column takes that row/column). Float data: the sample positions and
weights are those of the reference (in the boxes' type); the weighted sums
run as two small matrix products over the pixels the box touches, in
float64 (the reference sums in float32). Quantized data follows the reference's
integer path: each of the four weights is rounded to a multiple of 1/255,
products with ``q - zeroPoint`` are summed in integers, and the sum is
requantized by ``in_scale / 255 / out_scale / samples`` with a fixed-point
multiplier. Coordinates are computed in the boxes' float type (float16 for
TENSOR_FLOAT16) in the reference's order of operations.

ROI_POOLING rounds the box to whole pixels, splits it into ``out_h x out_w``
cells (``floor`` of the start, ``ceil`` of the end, clamped to the map) and
takes the maximum of each cell (an empty cell gives the zero point), along x
then along y, with a sparse table of window maxima.

The kernels loop over boxes (each has its own grid); within a box everything
is array arithmetic: samples are separable in y and x, cell maxima are masked
reductions. (1x64x64x256 map, 100 boxes, 7x7 cells, 2x2 samples: about
10 ms for ROI_ALIGN float32.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant
from nnhal.driver.ops._box_util import (
    BOOL,
    INT32,
    INT32_TENSOR,
    box_type,
    check_box_quant,
    check_dim,
    check_positive,
    check_same_quant,
    dim,
    float_scalar,
)
from nnhal.driver.ops._operand_rules import QUANT8, check_rank, dtype_of, runtime_failure
from nnhal.driver.ops.layout import from_nhwc, layout_is_nchw, to_nhwc
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32

TYPES = {
    _T.TENSOR_FLOAT32: _V.V1_2,
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}


# ---------------------------------------------------------------------------
# Shared validation / shapes
# ---------------------------------------------------------------------------


def _validate_common(ctx: OpContext) -> None:
    check_rank(ctx, 0, exact=4)
    check_rank(ctx, 1, exact=2)
    check_rank(ctx, 2, exact=1)
    check_dim(ctx, 1, 1, 4, "boxes are [num_rois, 4]")
    check_dim(ctx, 2, 0, dim(ctx.inputs[1].dimensions, 0), "one batch index per box (num_rois)")
    for index in (3, 4, 5, 6):
        check_positive(ctx, index)
    check_box_quant(ctx, 1)


def _prepare(ctx: OpContext) -> list[Shape]:
    nchw = layout_is_nchw(ctx)
    out_h, out_w = int(ctx.scalar(3)), int(ctx.scalar(4))
    dims = ctx.inputs[0].dimensions
    rois = dim(ctx.inputs[1].dimensions, 0)
    depth = dim(dims, 1 if nchw else 3)
    if nchw:
        return [(rois, depth, out_h, out_w)]
    return [(rois, out_h, out_w, depth)]


def _box_checks(
    ctx: OpContext, boxes: np.ndarray, scaled: np.ndarray, batch: np.ndarray, shape, signed: bool
) -> None:
    """The reference's checks of malformed boxes (a failure of the execution)."""
    n, height, width = shape[0], shape[1], shape[2]
    if batch.size and (batch.min() < 0 or batch.max() >= n):
        raise runtime_failure(ctx, f"a batch index is outside [0, {n})")
    if signed and (boxes < 0).any():
        raise runtime_failure(ctx, "a box has a negative coordinate")
    limit = np.array([width, height, width, height], dtype=np.float64)
    if (scaled.astype(np.float64) > limit).any():
        raise runtime_failure(ctx, "a box lies outside the feature map")
    if (boxes[:, 0] > boxes[:, 2]).any() or (boxes[:, 1] > boxes[:, 3]).any():
        raise runtime_failure(ctx, "a box has x2 < x1 or y2 < y1")


# ---------------------------------------------------------------------------
# ROI_ALIGN
# ---------------------------------------------------------------------------


def _align_validate(ctx: OpContext) -> None:
    _validate_common(ctx)
    for index in (7, 8):
        check_positive(ctx, index, allow_zero=True)


def _sample_axis(start, step, bins: int, ratio: int, size: int, rdtype):
    """Sample coordinates along one axis: (low index, high index, low weight, high weight).

    ``x = step * j + start + bin / 2 + bin * k`` for cell j, sample k, in the
    boxes' float type; the low pixel is ``floor(x)``, clamped to the last one
    (with weight 1) past the end.
    """
    bin_size = step / rdtype(ratio)
    cell = step * np.arange(bins, dtype=rdtype) + start
    k = bin_size * np.arange(ratio, dtype=rdtype)
    x = ((cell[:, None] + bin_size / rdtype(2)) + k[None, :]).reshape(-1)
    low = np.floor(x.astype(f32)).astype(np.int64)
    frac = x - low.astype(rdtype)
    past = low >= size - 1
    low = np.where(past, size - 1, low)
    high = np.where(past, size - 1, low + 1)
    frac = np.where(past, rdtype(0), frac)
    return low, high, (rdtype(1) - frac), frac


def _align_grid(roi, out_h, out_w, h_ratio, w_ratio, height, width, rdtype):
    """Per-box sampling grid; roi = (x1, y1, x2, y2) already in feature-map units."""
    roi_w = rdtype(max(f32(roi[2] - roi[0]), f32(1)))
    roi_h = rdtype(max(f32(roi[3] - roi[1]), f32(1)))
    w_step = roi_w / rdtype(out_w)
    h_step = roi_h / rdtype(out_h)
    wr = w_ratio if w_ratio > 0 else int(np.ceil(f32(w_step)))
    hr = h_ratio if h_ratio > 0 else int(np.ceil(f32(h_step)))
    ys = _sample_axis(roi[1], h_step, out_h, hr, height, rdtype)
    xs = _sample_axis(roi[0], w_step, out_w, wr, width, rdtype)
    return ys, xs, hr, wr


def _cell_weights(low, high, w_low, w_high, ratio: int, bins: int, size: int) -> np.ndarray:
    """[bins, size] float64: the summed interpolation weight of each pixel in each cell."""
    cell = np.repeat(np.arange(bins), ratio) * size
    n = bins * size
    weights = np.bincount(cell + low, weights=w_low.astype(np.float64), minlength=n)
    weights += np.bincount(cell + high, weights=w_high.astype(np.float64), minlength=n)
    return weights.reshape(bins, size)


def _align_execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    nchw = layout_is_nchw(ctx)
    out_h, out_w = int(ctx.scalar(3)), int(ctx.scalar(4))
    h_stride, w_stride = float(ctx.scalar(5)), float(ctx.scalar(6))
    h_ratio, w_ratio = int(ctx.scalar(7)), int(ctx.scalar(8))
    if min(out_h, out_w) <= 0 or min(h_stride, w_stride) <= 0 or min(h_ratio, w_ratio) < 0:
        raise ctx.fail(
            "output size and ratios must be positive and sampling ratios not negative "
            f"(got {out_h}x{out_w}, ratios {h_stride}/{w_stride}, samples {h_ratio}/{w_ratio})"
        )
    t = ctx.primary_type
    quantized = t in QUANT8
    out_dtype = dtype_of(ctx.outputs[0].type)
    rdtype = np.float16 if t == _T.TENSOR_FLOAT16 else f32
    # 1.0f / stride, stored in the boxes' type
    h_scale, w_scale = rdtype(f32(1) / f32(h_stride)), rdtype(f32(1) / f32(w_stride))
    box_scale = np.array([w_scale, h_scale, w_scale, h_scale], dtype=rdtype)
    if quantized:
        inp, out = ctx.inputs[0], ctx.outputs[0]
        zp_in, zp_out = inp.zeroPoint, out.zeroPoint
        lo, hi = quant.QUANT_RANGE[out_dtype]
        weight_scale = f32(1) / f32(255)
        base_multiplier = f32(inp.scale) * weight_scale / f32(out.scale)

    def one_box(fmap: np.ndarray, roi: np.ndarray) -> np.ndarray:
        height, width, depth = fmap.shape
        (y0, y1, wy0, wy1), (x0, x1, wx0, wx1), hr, wr = _align_grid(
            roi, out_h, out_w, h_ratio, w_ratio, height, width, rdtype
        )
        # only the pixels the samples touch
        top, bottom = int(y0.min()), int(y1.max()) + 1
        left, right = int(x0.min()), int(x1.max()) + 1
        crop = fmap[top:bottom, left:right]
        y0, y1, x0, x1 = y0 - top, y1 - top, x0 - left, x1 - left
        if not quantized:
            # Each cell is a weighted sum of pixels, separable in y and x:
            # rows [out_h, crop_h] @ crop @ cols [out_w, crop_w], in float64.
            rows = _cell_weights(y0, y1, wy0, wy1, hr, out_h, bottom - top)
            cols = _cell_weights(x0, x1, wx0, wx1, wr, out_w, right - left)
            by_row = np.tensordot(rows, crop.astype(np.float64), axes=(1, 0))
            return np.matmul(cols, by_row) / (hr * wr)
        centered = crop.astype(np.int64) - zp_in
        acc = 0
        for ya, wya in ((y0, wy0), (y1, wy1)):
            picked = centered[ya]
            for xb, wxb in ((x0, wx0), (x1, wx1)):
                # the reference rounds each corner weight to a multiple of 1/255
                w = (wxb.astype(f32)[None, :] * wya.astype(f32)[:, None]) / weight_scale
                w = w.astype(np.float64)
                wq = np.where(w >= 0, np.floor(w + 0.5), np.ceil(w - 0.5)).astype(np.int64)
                acc = acc + wq[:, :, None] * picked[:, xb]
        sums = acc.reshape(out_h, hr, out_w, wr, depth).sum(axis=(1, 3))
        real = float(base_multiplier / f32(hr * wr))
        if not 0 <= real < 1:
            raise runtime_failure(ctx, f"requantization multiplier {real} is not below 1")
        m, e = quant.quantize_multiplier(real)
        res = quant.multiply_by_quantized_multiplier(sums, m, e) + zp_out
        return np.clip(res, lo, hi)

    def roi_align(x: np.ndarray, rois: np.ndarray, batch: np.ndarray) -> np.ndarray:
        fmap = to_nhwc(x, nchw)
        n_rois = rois.shape[0]
        depth = fmap.shape[3]
        out = np.empty((n_rois, out_h, out_w, depth), dtype=out_dtype)
        if n_rois == 0:
            return from_nhwc(out, nchw)
        if quantized:
            boxes = rois.astype(f32) * f32(0.125)
            scaled = boxes * box_scale.astype(f32)
            _box_checks(ctx, boxes, scaled, batch, fmap.shape, False)
        else:
            boxes = rois.astype(rdtype)
            scaled = boxes * box_scale
            _box_checks(ctx, boxes, scaled, batch, fmap.shape, True)
        for r in range(n_rois):
            out[r] = one_box(fmap[batch[r]], scaled[r])
        return from_nhwc(out, nchw)

    return roi_align


ROI_ALIGN = register(
    OperationDef(
        OperationType.ROI_ALIGN,
        inputs=(
            Arg("input"),
            Arg("rois", box_type),
            Arg("batch_indices", INT32_TENSOR),
            Arg("output_height", INT32),
            Arg("output_width", INT32),
            Arg("height_ratio", float_scalar),
            Arg("width_ratio", float_scalar),
            Arg("height_samples", INT32),
            Arg("width_samples", INT32),
            Arg("layout", BOOL),
        ),
        outputs=(Arg("output"),),
        types=TYPES,
        execute=_align_execute,
        layout=9,
        prepare=_prepare,
        validate=_align_validate,
    )
)


# ---------------------------------------------------------------------------
# ROI_POOLING
# ---------------------------------------------------------------------------


def _pool_validate(ctx: OpContext) -> None:
    _validate_common(ctx)
    check_same_quant(ctx, 0, 0)


def _pool_cells(start: int, end: int, bins: int, size: int, rdtype):
    """[start, end) of each output cell along one axis, clamped to the map."""
    length = rdtype(max(end - start + 1, 1))
    step = length / rdtype(bins)
    j = np.arange(bins + 1, dtype=rdtype)
    edges = step * j + rdtype(start)
    lo = np.minimum(np.floor(edges[:-1].astype(f32)).astype(np.int64), size)
    hi = np.minimum(np.ceil(edges[1:].astype(f32)).astype(np.int64), size)
    return lo, hi


def _cell_max(data: np.ndarray, starts, ends, axis: int) -> np.ndarray:
    """Maximum over [start, end) of each cell along ``axis``.

    A sparse table: ``level[k][i]`` is the maximum of ``k`` (a power of two)
    values from ``i``; a cell of length ``n`` is the maximum of two
    overlapping windows of the largest ``k <= n``. log2(cell size) passes
    over the data. Empty cells give garbage here; the caller overwrites them.
    """
    d = np.moveaxis(data, axis, 0)
    size = d.shape[0]
    lengths = ends - starts
    top = int(lengths.max()) if lengths.size else 0
    levels = {1: d}
    k, window = 1, d
    while 2 * k <= top:
        window = np.maximum(window[:-k], window[k:])
        k *= 2
        levels[k] = window
    power = 1 << np.floor(np.log2(np.maximum(lengths, 1))).astype(np.int64)
    first = np.clip(starts, 0, size - 1)
    res = np.empty((len(starts),) + d.shape[1:], dtype=d.dtype)
    for k, window in levels.items():
        sel = np.flatnonzero(power == k)
        if sel.size:
            last = np.clip(ends[sel] - k, 0, window.shape[0] - 1)
            res[sel] = np.maximum(window[first[sel]], window[last])
    return np.moveaxis(res, 0, axis)


def _pool_execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    nchw = layout_is_nchw(ctx)
    out_h, out_w = int(ctx.scalar(3)), int(ctx.scalar(4))
    h_stride, w_stride = float(ctx.scalar(5)), float(ctx.scalar(6))
    if min(out_h, out_w) <= 0 or min(h_stride, w_stride) <= 0:
        raise ctx.fail(
            f"output size and ratios must be positive (got {out_h}x{out_w}, "
            f"ratios {h_stride}/{w_stride})"
        )
    t = ctx.primary_type
    quantized = t in QUANT8
    dtype = dtype_of(t)
    rdtype = np.float16 if t == _T.TENSOR_FLOAT16 else f32
    h_scale, w_scale = rdtype(f32(1) / f32(h_stride)), rdtype(f32(1) / f32(w_stride))
    box_scale = np.array([w_scale, h_scale, w_scale, h_scale], dtype=rdtype)
    empty = dtype.type(ctx.inputs[0].zeroPoint if quantized else 0)

    def one_box(fmap: np.ndarray, corners: np.ndarray) -> np.ndarray:
        height, width = fmap.shape[0], fmap.shape[1]
        x1, y1, x2, y2 = (int(v) for v in corners)
        hs, he = _pool_cells(y1, y2, out_h, height, rdtype)
        ws, we = _pool_cells(x1, x2, out_w, width, rdtype)
        top, left = int(hs[0]), int(ws[0])
        crop = fmap[top : int(he[-1]), left : int(we[-1])]
        cells = np.full((out_h, out_w, fmap.shape[2]), empty, dtype=dtype)
        if crop.size:
            cols = _cell_max(crop, ws - left, we - left, axis=1)
            cells[...] = _cell_max(cols, hs - top, he - top, axis=0)
            hollow = (he <= hs)[:, None] | (we <= ws)[None, :]
            cells[hollow] = empty
        return cells

    def roi_pooling(x: np.ndarray, rois: np.ndarray, batch: np.ndarray) -> np.ndarray:
        fmap = to_nhwc(x, nchw)
        n_rois, depth = rois.shape[0], fmap.shape[3]
        boxes = rois.astype(f32) * f32(0.125) if quantized else rois.astype(rdtype)
        scaled = boxes * box_scale.astype(boxes.dtype)
        _box_checks(ctx, boxes, scaled, batch, fmap.shape, True)
        f = scaled.astype(np.float64)
        corners = np.where(f >= 0, np.floor(f + 0.5), np.ceil(f - 0.5)).astype(np.int64)
        out = np.empty((n_rois, out_h, out_w, depth), dtype=dtype)
        for r in range(n_rois):
            out[r] = one_box(fmap[batch[r]], corners[r])
        return from_nhwc(out, nchw)

    return roi_pooling


ROI_POOLING = register(
    OperationDef(
        OperationType.ROI_POOLING,
        inputs=(
            Arg("input"),
            Arg("rois", box_type),
            Arg("batch_indices", INT32_TENSOR),
            Arg("output_height", INT32),
            Arg("output_width", INT32),
            Arg("height_ratio", float_scalar),
            Arg("width_ratio", float_scalar),
            Arg("layout", BOOL),
        ),
        outputs=(Arg("output"),),
        types=TYPES,
        execute=_pool_execute,
        zero_sized_inputs=False,
        layout=7,
        prepare=_prepare,
        validate=_pool_validate,
    )
)

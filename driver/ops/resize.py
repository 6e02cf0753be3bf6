"""RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR.

Inputs: a rank-4 input, the output width and height (two INT32 sizes, or two
FLOAT32 — FLOAT16 for a TENSOR_FLOAT16 input — scales: ``floor(in * scale)``),
then the optional BOOL ``layout`` (NCHW when true; required for
RESIZE_NEAREST_NEIGHBOR), ``align_corners`` and ``half_pixel_centers``
(both true is invalid).

Both kernels compute, once per input shape, the source rows and columns
(and for bilinear the float32 weights) of every output row and column as
the reference does (``calculateResizeScale``, ``ComputeInterpolationValues``),
then gather whole rows and columns with fancy indexing. Bilinear
interpolates in float32 in the reference's order; quantized values are
interpolated as floats, offset by 0.5 and truncated, keeping the input's
quantization.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._conv_util import last_shape_cache
from nnhal.driver.ops._operand_rules import check_rank, dtype_of, runtime_failure
from nnhal.driver.ops.layout import (
    from_nhwc,
    layout_dims,
    layout_is_nchw,
    nhwc_dims,
    to_nhwc,
)
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType, type_name

_T = OperandType
_V = HalVersion
f32 = np.float32
_BOOL = frozenset({_T.BOOL})


def _size_types(primary: int) -> frozenset:
    scale = _T.FLOAT16 if primary == _T.TENSOR_FLOAT16 else _T.FLOAT32
    return frozenset({_T.INT32, scale})


class _Params:
    """Scalars of one resize, checked: sizes or scales, layout and the two flags."""

    def __init__(self, ctx: OpContext) -> None:
        width, height = ctx.inputs[1], ctx.inputs[2]
        if width.type != height.type:
            raise ctx.fail(
                f"input 1 (width) has type {type_name(width.type)} but input 2 (height) has "
                f"{type_name(height.type)}; both are INT32 sizes or both are scales"
            )
        self.by_scale = width.type != _T.INT32
        self.width, self.height = ctx.scalar(1), ctx.scalar(2)
        for index, name, value in ((1, "width", self.width), (2, "height", self.height)):
            if not value > 0 or (self.by_scale and not math.isfinite(value)):
                what = "scale must be finite and" if self.by_scale else "size must be"
                raise ctx.fail(f"input {index} ({name}) is {value}; the output {what} > 0")
        self.nchw = layout_is_nchw(ctx)
        self.align_corners, self.half_pixel = (bool(ctx.scalar(i, False)) for i in (4, 5))
        if self.align_corners and self.half_pixel:
            raise ctx.fail(
                "inputs 4 (align_corners) and 5 (half_pixel_centers) are both true; "
                "at most one may be"
            )

    def out_size(self, in_h: int, in_w: int) -> tuple[int, int]:
        """(height, width) of the output for an input of in_h x in_w."""
        if not self.by_scale:
            return int(self.height), int(self.width)
        scale_h, scale_w = f32(self.height), f32(self.width)
        return int(np.floor(f32(in_h) * scale_h)), int(np.floor(f32(in_w) * scale_w))


def _validate(bilinear: bool) -> Callable[[OpContext], HalVersion | None]:
    def validate(ctx: OpContext) -> HalVersion | None:
        check_rank(ctx, 0, exact=4)
        params = _Params(ctx)
        n = len(ctx.inputs)
        if n > 4:
            return _V.V1_3
        if bilinear and (n == 4 or params.by_scale):
            return _V.V1_2
        return None

    return validate


def _prepare(ctx: OpContext) -> list[Shape]:
    params = _Params(ctx)
    n, h, w, c = nhwc_dims(ctx.inputs[0].dimensions, params.nchw) or (0, 0, 0, 0)
    # A scale needs the input side; a size does not (0 stays unknown).
    oh = params.out_size(h, w)[0] if h or not params.by_scale else 0
    ow = params.out_size(h, w)[1] if w or not params.by_scale else 0
    for name, side, known in (("height", oh, h), ("width", ow, w)):
        if side < 1 and (known or not params.by_scale):
            raise ctx.fail(f"the output {name} would be {side}; it must be > 0")
    return [layout_dims(n, oh, ow, c, params.nchw)]


def _scale(in_size: int, out: int, align_corners: bool) -> np.float32:
    """``calculateResizeScale`` (float32)."""
    if align_corners and out > 1:
        return f32(in_size - 1) / f32(out - 1)
    return f32(in_size) / f32(out)


def _nearest_index(in_size: int, out: int, params: _Params) -> np.ndarray:
    scale = _scale(in_size, out, params.align_corners)
    pos = np.arange(out, dtype=f32)
    if params.half_pixel:
        pos = pos + f32(0.5)
    scaled = pos * scale
    if params.align_corners:
        # roundf: halves away from zero (values are >= 0 here)
        index = np.floor(scaled + f32(0.5))
    else:
        index = np.floor(scaled)
    index = np.minimum(index.astype(np.int64), in_size - 1)
    return np.maximum(index, 0) if params.half_pixel else index


def _bilinear_axis(in_size: int, out: int, params: _Params):
    """(lower index, upper index, weight of the upper) along one axis (float32)."""
    scale = _scale(in_size, out, params.align_corners)
    pos = np.arange(out, dtype=f32)
    if params.half_pixel:
        scaled = (pos + f32(0.5)) * scale - f32(0.5)
    else:
        scaled = pos * scale
    lower = np.maximum(np.floor(scaled).astype(np.int64), 0)
    upper = np.minimum(np.ceil(scaled).astype(np.int64), in_size - 1)
    return lower, upper, (scaled - lower.astype(f32)).astype(f32)


def _execute(bilinear: bool) -> Callable[[OpContext], Callable[[np.ndarray], np.ndarray]]:
    def execute(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
        params = _Params(ctx)
        nchw = params.nchw
        dtype = dtype_of(ctx.outputs[0].type)
        integer = np.dtype(dtype).kind in "iu"

        def plan(shape):
            _, h, w, _ = shape
            oh, ow = params.out_size(h, w)
            if oh < 1 or ow < 1:
                raise runtime_failure(ctx, f"the output would be {oh} x {ow} for a {h} x {w} input")
            if not bilinear:
                return _nearest_index(h, oh, params), _nearest_index(w, ow, params)
            y0, y1, dy = _bilinear_axis(h, oh, params)
            x0, x1, dx = _bilinear_axis(w, ow, params)
            one = f32(1)
            wy = ((one - dy)[None, :, None, None], dy[None, :, None, None])
            wx = ((one - dx)[None, None, :, None], dx[None, None, :, None])
            return y0, y1, x0, x1, wy, wx

        geometry = last_shape_cache(plan)

        if not bilinear:

            def nearest(x: np.ndarray) -> np.ndarray:
                xn = to_nhwc(x, nchw)
                rows, cols = geometry(xn.shape)
                return from_nhwc(xn[:, rows[:, None], cols[None, :]], nchw)

            return nearest

        def bilinear_kernel(x: np.ndarray) -> np.ndarray:
            xn = to_nhwc(x, nchw)
            y0, y1, x0, x1, (wy0, wy1), (wx0, wx1) = geometry(xn.shape)
            top, bottom = xn[:, y0].astype(f32), xn[:, y1].astype(f32)
            # v00 * (1-dy) * (1-dx) + v10 * dy * (1-dx) + v01 * (1-dy) * dx + v11 * dy * dx
            out = top[:, :, x0] * wy0 * wx0
            out += bottom[:, :, x0] * wy1 * wx0
            out += top[:, :, x1] * wy0 * wx1
            out += bottom[:, :, x1] * wy1 * wx1
            if integer:
                out += f32(0.5)
                np.trunc(out, out=out)
            return from_nhwc(out.astype(dtype), nchw)

        return bilinear_kernel

    return execute


def _register(op: OperationType, bilinear: bool, types: dict) -> OperationDef:
    return register(
        OperationDef(
            op,
            inputs=(
                Arg("input"),
                Arg("width", _size_types),
                Arg("height", _size_types),
                Arg("layout", _BOOL, optional=bilinear),
                Arg("align_corners", _BOOL, optional=True),
                Arg("half_pixel_centers", _BOOL, optional=True),
            ),
            outputs=(Arg("output"),),
            layout=3,
            types=types,
            execute=_execute(bilinear),
            prepare=_prepare,
            validate=_validate(bilinear),
        )
    )


RESIZE_BILINEAR = _register(
    OperationType.RESIZE_BILINEAR,
    True,
    {
        _T.TENSOR_FLOAT32: _V.V1_0,
        _T.TENSOR_FLOAT16: _V.V1_2,
        _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
        _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
    },
)
RESIZE_NEAREST_NEIGHBOR = _register(
    OperationType.RESIZE_NEAREST_NEIGHBOR,
    False,
    {
        _T.TENSOR_FLOAT32: _V.V1_2,
        _T.TENSOR_FLOAT16: _V.V1_2,
        _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
        _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
    },
)

"""Resize -> RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR (NCHW layout flag, API 30 flags).

NNAPI resizes the two spatial axes of a 4-D tensor to a given output size,
with the scale ``in / out`` (``(in - 1) / (out - 1)`` with align_corners)
and two flags. Linear: ONNX's coordinate transformations asymmetric,
align_corners and half_pixel are NNAPI's no flag, align_corners and
half_pixel_centers; pytorch_half_pixel is half_pixel_centers when every
output axis is longer than 1. Nearest: the source index of every output
row and column is worked out exactly at import, as ONNX defines it (its
transformation and nearest_mode) and as each NNAPI flag setting defines it;
the first setting giving the same indices on both axes is used. So the
common exports map (asymmetric + floor, half_pixel + round_prefer_ceil,
align_corners + round_prefer_ceil, tf_half_pixel_for_nn + floor), and the
default half_pixel + round_prefer_floor maps whenever no sample falls
exactly half-way (integer upsampling).

The output size is the statically inferred one. When ONNX is given scales,
its coordinates use those scales, so ``in * scale`` must be the output size
exactly. Cubic, antialiasing, tf_crop_and_resize, a resize of the batch or
channel axis and an aspect-ratio policy other than stretch have no NNAPI
equivalent.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from nnhal.types import OperationType

from . import types_map as tm
from .errors import Unsupported
from .node import Node
from .registry import mapping

O = OperationType

_LINEAR = {  # coordinate_transformation_mode -> (align_corners, half_pixel_centers)
    "asymmetric": (False, False),
    "align_corners": (True, False),
    "half_pixel": (False, True),
    "pytorch_half_pixel": (False, True),
}
_SETTINGS = ((False, False), (True, False), (False, True))


@mapping("Resize")
def resize(n: Node) -> None:
    x = n.t(0)
    if x.elem not in (tm.FLOAT, tm.FLOAT16, tm.UINT8, tm.INT8):
        raise Unsupported(f"Resize on {tm.elem_name(x.elem)}")
    mode = n.attr("mode", "nearest")
    transform = n.attr("coordinate_transformation_mode", "half_pixel")
    nearest = n.attr("nearest_mode", "round_prefer_floor") if mode == "nearest" else None
    if n.attr("antialias", 0):
        raise Unsupported("antialias=1 (NNAPI resizes without a filter)")
    if n.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise Unsupported("keep_aspect_ratio_policy other than stretch")
    in_shape = n.shape(0)
    if len(in_shape) != 4:
        raise Unsupported(f"Resize of a rank-{len(in_shape)} tensor (NNAPI resizes 4-D NCHW)")
    out_shape = n.out_static(0)
    if tuple(out_shape[:2]) != tuple(in_shape[:2]):
        raise Unsupported("Resize of the batch or channel axis (NNAPI resizes H and W only)")
    scales = _scales(n)
    if scales is not None:
        for axis in (2, 3):
            if in_shape[axis] * float(scales[axis]) != out_shape[axis]:
                raise Unsupported(
                    f"scale {float(scales[axis])} on axis {axis} is not output / input"
                    f" ({out_shape[axis]} / {in_shape[axis]}): ONNX's coordinates use the scale"
                )
    what = f"mode {mode}, coordinate_transformation_mode {transform}"
    if mode == "linear":
        flags = _LINEAR.get(transform)
        if transform == "pytorch_half_pixel" and min(out_shape[2:]) < 2:
            flags = None  # it samples 0 on an axis of length 1
    elif mode == "nearest":
        what += f", nearest_mode {nearest}"
        flags = next((f for f in _SETTINGS if all(
            _onnx_nearest(in_shape[a], out_shape[a], transform, nearest)
            == _nnapi_nearest(in_shape[a], out_shape[a], *f) for a in (2, 3))), None)  # fmt: skip
    else:
        raise Unsupported(f"mode {mode} has no NNAPI equivalent")
    if flags is None:
        sizes = f" for the sizes {list(in_shape[2:])} -> {list(out_shape[2:])}"
        raise Unsupported(f"{what} has no NNAPI equivalent{sizes if mode == 'nearest' else ''}")
    op = O.RESIZE_BILINEAR if mode == "linear" else O.RESIZE_NEAREST_NEIGHBOR
    out = n.out(0, like=0)
    ins = [n.i(0), n.scalar_i32(out_shape[3]), n.scalar_i32(out_shape[2]), n.bool_scalar(True),
           n.bool_scalar(flags[0]), n.bool_scalar(flags[1])]  # fmt: skip
    n.op(op, ins, [out])


def _scales(n: Node) -> np.ndarray | None:
    """The four per-axis scales when the node is given scales (None when sizes)."""
    k = 1 if n.opset < 11 else 2
    if not n.has(k):
        return None
    scales = np.asarray(n.const(k, "scales"), np.float64).reshape(-1)
    if scales.size == 0:
        return None
    axes = n.attr("axes")
    if axes is None:
        if scales.size != 4:
            raise Unsupported(f"{scales.size} scales for a 4-D input")
        return scales
    full = np.ones(4)
    for a, s in zip(axes, scales):
        full[a % 4] = s
    return full


def _onnx_nearest(size: int, out: int, transform: str, rounding: str) -> list[int] | None:
    """ONNX's source indices along one axis (exact arithmetic), None for other transforms."""
    scale = Fraction(out, size)
    idx = []
    for x in range(out):
        if transform == "half_pixel":
            v = (x + Fraction(1, 2)) / scale - Fraction(1, 2)
        elif transform == "pytorch_half_pixel":
            v = (x + Fraction(1, 2)) / scale - Fraction(1, 2) if out > 1 else Fraction(0)
        elif transform == "asymmetric":
            v = x / scale
        elif transform == "tf_half_pixel_for_nn":
            v = (x + Fraction(1, 2)) / scale
        elif transform == "align_corners":
            v = Fraction(x * (size - 1), out - 1) if out > 1 else Fraction(0)
        else:
            return None
        if rounding == "floor":
            k = math.floor(v)
        elif rounding == "ceil":
            k = math.ceil(v)
        elif v - math.floor(v) == Fraction(1, 2):
            k = math.floor(v) if rounding == "round_prefer_floor" else math.ceil(v)
        else:
            k = math.floor(v + Fraction(1, 2))
        idx.append(min(max(k, 0), size - 1))
    return idx


def _nnapi_nearest(size: int, out: int, align: bool, half: bool) -> list[int]:
    """RESIZE_NEAREST_NEIGHBOR's source indices along one axis (exact arithmetic)."""
    scale = Fraction(size - 1, out - 1) if align and out > 1 else Fraction(size, out)
    idx = []
    for x in range(out):
        v = (x + (Fraction(1, 2) if half else 0)) * scale
        k = math.floor(v + Fraction(1, 2)) if align else math.floor(v)
        idx.append(min(max(k, 0), size - 1))
    return idx

"""Helpers of the detection operations (roi.py, bbox.py, detection.py).

- Type rules: boxes are the float type of the operation or, with 8-bit
  quantized data, TENSOR_QUANT16_ASYMM with scale 0.125 and zero point 0;
  float parameters are FLOAT16 scalars with TENSOR_FLOAT16 data, else FLOAT32.
- Conversions exactly as the reference's ``convertQuantToFloat32`` /
  ``convertFloat32ToQuant`` (float32 arithmetic, ``std::round``, saturation).
- Layout: NCHW data is moved to NHWC and back (the reference does the same).
- Non-maximum suppression as the reference's ``hardNmsSingleClass`` /
  ``softNmsSingleClass``, including the order in which candidates are left
  after each round (the winner is the *first* maximum in that order, so ties
  are broken the way the reference breaks them).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._operand_rules import FLOATS, QUANT8, dtype_of
from nnhal.driver.ops.quant import QUANT_RANGE
from nnhal.driver.ops.registry import OpContext, Shape

from nnhal.types import OperandType

_T = OperandType
f32 = np.float32

#: the quantization every TENSOR_QUANT16_ASYMM box operand must have
BOX_SCALE = 0.125
QUANT16_RANGE = (0, 65535)
INT32_TENSOR = frozenset({_T.TENSOR_INT32})
INT32 = frozenset({_T.INT32})
BOOL = frozenset({_T.BOOL})


# ---------------------------------------------------------------------------
# Type rules
# ---------------------------------------------------------------------------


def box_type(primary: int) -> frozenset:
    """Boxes: the float type itself, or QUANT16_ASYMM with 8-bit quantized data."""
    if primary in QUANT8:
        return frozenset({_T.TENSOR_QUANT16_ASYMM})
    return frozenset({primary})


def float_scalar(primary: int) -> frozenset:
    """FLOAT16 parameters with TENSOR_FLOAT16 data, FLOAT32 otherwise."""
    return frozenset({_T.FLOAT16 if primary == _T.TENSOR_FLOAT16 else _T.FLOAT32})


# ---------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------


def const_scalar(ctx: OpContext, index: int):
    """A scalar's value when it is a constant, else None (checked at bind time)."""
    value = ctx.constant(index)
    if value is None:
        return None
    return value.reshape(-1)[0].item()


def check_box_quant(ctx: OpContext, index: int, *, output: bool = False, symm=False) -> None:
    """A QUANT16 box operand must have scale 0.125 and zero point 0."""
    info = (ctx.outputs if output else ctx.inputs)[index]
    if info.type not in (_T.TENSOR_QUANT16_ASYMM, _T.TENSOR_QUANT16_SYMM) or info.omitted:
        return
    if f32(info.scale) != f32(BOX_SCALE) or info.zeroPoint != 0:
        what = "output" if output else "input"
        name = (ctx.op.outputs if output else ctx.op.inputs)[index].name
        raise ctx.fail(
            f"{what} {index} ({name}) has scale {info.scale} and zero point {info.zeroPoint}; "
            f"{OperandType(info.type).name} boxes must have scale 0.125 and zero point 0"
        )


def check_same_quant(ctx: OpContext, out_index: int, in_index: int) -> None:
    """An 8-bit quantized output that must keep the input's scale and zero point."""
    inp, out = ctx.inputs[in_index], ctx.outputs[out_index]
    if inp.type not in QUANT8:
        return
    if f32(inp.scale) != f32(out.scale) or inp.zeroPoint != out.zeroPoint:
        raise ctx.fail(
            f"output {out_index} ({ctx.op.outputs[out_index].name}) has scale {out.scale} and "
            f"zero point {out.zeroPoint}; it must have the scale and zero point of input "
            f"{in_index} ({inp.scale}, {inp.zeroPoint})"
        )


def check_positive(ctx: OpContext, index: int, *, allow_zero: bool = False) -> None:
    value = const_scalar(ctx, index)
    if value is None:
        return
    if not (value > 0 or (value == 0 and allow_zero)):
        rule = "must not be negative" if allow_zero else "must be positive"
        raise ctx.fail(f"input {index} ({ctx.op.inputs[index].name}) is {value}; it {rule}")


def dim(shape: Shape, axis: int) -> int:
    """An axis of a prepared shape, 0 when unknown."""
    if shape is None or axis >= len(shape):
        return 0
    return int(shape[axis])


def check_dim(ctx: OpContext, index: int, axis: int, want: int, rule: str) -> None:
    """Axis ``axis`` of input ``index`` must be ``want`` (when both are known)."""
    got = dim(ctx.inputs[index].dimensions, axis)
    if got and want and got != want:
        raise ctx.fail(
            f"input {index} ({ctx.op.inputs[index].name}) has {got} on axis {axis}; {rule} ({want})"
        )


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------


def dequantizer(info) -> Callable[[np.ndarray], np.ndarray]:
    """float32 view of an operand's data, as the reference converts it.

    Quantized: ``(float(q) - zeroPoint) * scale`` in float32. Float16 and
    float32: a float32 copy.
    """
    if info.type in FLOATS:
        return lambda x: x.astype(f32)
    zero, scale = f32(info.zeroPoint), f32(info.scale)
    return lambda x: (x.astype(f32) - zero) * scale


def quantizer(type_code: int, scale: float, zero_point: int) -> Callable[[np.ndarray], np.ndarray]:
    """float32 values to an output operand's data (``convertFloat32ToQuant``).

    ``round(x / scale + zeroPoint)`` in float32 with halves away from zero,
    then saturated to the type's range; float types are a plain cast.
    """
    dtype = dtype_of(type_code)
    if type_code in FLOATS:
        return lambda x: x.astype(dtype)
    if dtype == np.uint16:
        lo, hi = QUANT16_RANGE
    elif dtype == np.int16:
        lo, hi = -32768, 32767
    else:
        lo, hi = QUANT_RANGE[dtype]
    s, z = f32(scale), f32(zero_point)

    def quantize(x: np.ndarray) -> np.ndarray:
        v = (x.astype(f32) / s + z).astype(np.float64)
        r = np.where(v >= 0, np.floor(v + 0.5), np.ceil(v - 0.5))
        return np.clip(np.nan_to_num(r), lo, hi).astype(dtype)

    return quantize


# ---------------------------------------------------------------------------
# Boxes
# ---------------------------------------------------------------------------


def areas(boxes: np.ndarray) -> np.ndarray:
    """float32 ``(x2 - x1) * (y2 - y1)`` of [n, 4] boxes."""
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def iou_one(boxes: np.ndarray, area: np.ndarray, box: np.ndarray, box_area) -> np.ndarray:
    """``getIoUAxisAligned(boxes[i], box)`` for every i, in float32 as the reference.

    0/0 gives NaN as in the reference (callers silence the warning).
    """
    w = np.minimum(boxes[:, 2], box[2]) - np.maximum(boxes[:, 0], box[0])
    h = np.minimum(boxes[:, 3], box[3]) - np.maximum(boxes[:, 1], box[1])
    inter = np.maximum(w, f32(0)) * np.maximum(h, f32(0))
    return inter / (area + box_area - inter)


#: decides, for the candidates ``rest`` left after a winner, which to drop
#: (may lower their scores in place): (scores, rest, iou) -> drop mask
Suppress = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def hard_suppress(iou_threshold: float) -> Suppress:
    """``hardNmsSingleClass``: drop when IoU >= threshold."""
    t = f32(iou_threshold)
    return lambda scores, rest, iou: iou >= t


def soft_suppress(kernel: int, iou_threshold: float, sigma: float, score_threshold: float):
    """``softNmsSingleClass``: scale the scores, drop those below the threshold.

    Kernel 0 (hard): x0 when IoU >= threshold; 1 (linear): x(1 - IoU) when
    IoU >= threshold; 2 (gaussian): x exp(-IoU^2 / sigma).
    """
    t, s, floor = f32(iou_threshold), f32(sigma), f32(score_threshold)
    one, minus_one = f32(1), f32(-1)

    if kernel == 0:

        def factor(iou: np.ndarray) -> np.ndarray:
            return np.where(iou < t, one, f32(0))

    elif kernel == 1:

        def factor(iou: np.ndarray) -> np.ndarray:
            return np.where(iou < t, one, one - iou)

    else:

        def factor(iou: np.ndarray) -> np.ndarray:
            return np.exp(minus_one * iou * iou / s)

    def suppress(scores: np.ndarray, rest: np.ndarray, iou: np.ndarray) -> np.ndarray:
        updated = scores[rest] * factor(iou)
        scores[rest] = updated
        return updated < floor

    return suppress


def nms(
    scores: np.ndarray,
    boxes: np.ndarray,
    candidates: np.ndarray,
    max_detections: int,
    suppress: Suppress,
) -> np.ndarray:
    """The candidates kept, in the order the reference selects them.

    ``scores`` (float32, indexed by candidate id; soft kernels lower them in
    place) and ``boxes`` ([n, 4] float32, same ids). Each round takes the
    first maximum of the remaining candidates, then drops the suppressed ones
    the way the reference does: a dropped candidate is swapped with the last
    remaining one, so the survivors past the first holes move into them from
    the back, last first. That order decides later ties.
    """
    ids = np.asarray(candidates, dtype=np.intp)
    local = scores[ids]  # the candidates' scores (soft kernels lower them)
    cand_boxes = boxes[ids]
    area = areas(cand_boxes)
    order = np.arange(ids.size)
    end = ids.size
    if max_detections < 0:
        max_detections = end
    start = 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        start = _rounds(local, cand_boxes, area, order, end, max_detections, suppress)
    scores[ids] = local
    return ids[order[:start]]


def _rounds(local, cand_boxes, area, order, end, max_detections, suppress) -> int:
    """The NMS rounds on local arrays; permutes ``order``, returns how many were kept."""
    start = 0
    while start < end and start < max_detections:
        best = start + int(np.argmax(local[order[start:end]]))
        if best != start:
            order[start], order[best] = order[best], order[start]
        winner = order[start]
        rest = order[start + 1 : end]
        if rest.size:
            iou = iou_one(cand_boxes[rest], area[rest], cand_boxes[winner], area[winner])
            drop = suppress(local, rest, iou)
            if drop.any():
                keep = ~drop
                kept = int(keep.sum())
                front = rest[:kept].copy()
                front[drop[:kept]] = rest[kept:][keep[kept:]][::-1]
                order[start + 1 : start + 1 + kept] = front
                end = start + 1 + kept
        start += 1
    return start


def by_score(scores: np.ndarray, selected: np.ndarray) -> np.ndarray:
    """``selected`` sorted by descending score (ties keep their order)."""
    return selected[np.argsort(-scores[selected], kind="stable")]

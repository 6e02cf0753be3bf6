"""Harness for operations with several outputs (the ROI, bbox and detection tables).

``MultiRow`` validates, prepares and runs one operation and compares each
output with its reference (raw, in the operand's dtype). Also: the float32
conversions the reference kernels make (``deq``, ``quantize``) and a literal,
step-by-step simulation of the reference's in-place NMS (``literal_nms``, with
``soft_drop`` for the soft-NMS kernels).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from nnhal.driver.ops.registry import validate_operation
from ops_harness import QUANT, X, assert_close, context

from nnhal.types import OPERAND_TYPE_INFO
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F = np.float32
Q16 = T.TENSOR_QUANT16_ASYMM


@dataclass
class MultiRow:
    id: str
    op: Op
    ins: list[X]
    outs: list[X]
    ref: Callable[[], list[np.ndarray]]  # expected outputs, raw (operand dtypes)
    version: V | None = None
    shapes: list | None = None  # expected prepared shapes

    def check(self) -> None:
        ctx = context(self.op, self.ins, self.outs)
        version = validate_operation(ctx)
        if self.version is not None:
            assert version == self.version
        prepared = ctx.op.prepare(ctx)
        if self.shapes is not None:
            assert [tuple(s) for s in prepared] == self.shapes
        tensors = [x.data for x in self.ins if x.is_tensor]
        got = ctx.op.kernel(ctx)(*tensors)
        if not isinstance(got, tuple):
            got = (got,)
        for g in got:
            assert not any(np.shares_memory(g, x) for x in tensors), "an output is a view"
        want = self.ref()
        assert len(got) == len(want) == len(self.outs)
        for g, w, o, p in zip(got, want, self.outs, prepared):
            w = np.asarray(w).astype(OPERAND_TYPE_INFO[o.type].dtype)
            assert len(p) == g.ndim and all(d in (0, s) for d, s in zip(p, g.shape))
            if o.type == Q16:
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_allclose(g.astype(float), w.astype(float), atol=1, rtol=0)
            else:
                assert_close(g, w, o.type)


# ---------------------------------------------------------------------------
# Scalar references
# ---------------------------------------------------------------------------


def deq(x: X) -> np.ndarray:
    """float32 values of an operand as the reference converts them."""
    if x.type in QUANT or x.type in (Q16, T.TENSOR_QUANT16_SYMM):
        return (x.data.astype(F) - F(x.zp)) * F(x.scale)
    return x.data.astype(F)


def quantize(values, o: X) -> np.ndarray:
    dtype = OPERAND_TYPE_INFO[o.type].dtype
    v = np.asarray(values, dtype=F)
    if o.type not in QUANT and o.type != Q16:
        return v.astype(dtype)
    info = np.iinfo(dtype)
    r = (v / F(o.scale) + F(o.zp)).astype(np.float64)
    r = np.sign(r) * np.floor(np.abs(r) + 0.5)
    return np.clip(r, info.min, info.max).astype(dtype)


def iou(a, b):
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    w = max(min(a[2], b[2]) - max(a[0], b[0]), F(0))
    h = max(min(a[3], b[3]) - max(a[1], b[1]), F(0))
    inter = w * h
    with np.errstate(invalid="ignore", divide="ignore"):
        return inter / (area_a + area_b - inter)


def literal_nms(scores, boxes, candidates, max_det, drop):
    """The reference's in-place NMS, step by step; drop(i, iou) may lower scores[i]."""
    sel = list(candidates)
    start, end = 0, len(sel)
    if max_det < 0:
        max_det = end
    while start < end and start < max_det:
        best = start
        for k in range(start, end):
            if scores[sel[best]] < scores[sel[k]]:
                best = k
        sel[best], sel[start] = sel[start], sel[best]
        i = start + 1
        while i < end:
            if drop(sel[i], iou(boxes[sel[i]], boxes[sel[start]])):
                end -= 1
                sel[i], sel[end] = sel[end], sel[i]
                i -= 1
            i += 1
        start += 1
    return sel[:start]


def soft_drop(scores, kernel, iou_t, sigma, nms_t):
    def drop(i, v):
        if kernel == 0:
            factor = F(1) if v < iou_t else F(0)
        elif kernel == 1:
            factor = F(1) if v < iou_t else F(1) - v
        else:
            factor = F(np.exp(F(-1) * v * v / F(sigma)))
        scores[i] = F(scores[i] * factor)
        return scores[i] < F(nms_t)

    return drop

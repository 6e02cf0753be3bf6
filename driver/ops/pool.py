"""AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D.

Inputs (the reference's two forms): the input, then either a padding code or
four explicit paddings, stride width/height, filter width/height, the fused
activation, and an optional ``layout`` (NCHW when true). Windows never count
padding: an average (or L2 norm) divides by the number of input elements the
window covers, and a maximum ignores the padding.

Kernels take a strided view ``[N, OH, OW, KH, KW, C]`` of the padded input
and reduce it one filter tap at a time (a vectorized maximum or add over the
whole output per tap; a 2x2 pool is three ``np.maximum`` calls; a small output
with many taps, like a global average, one reduction over the taps), then divide
by the per-position counts. With numba (``kernels``), a float maximum or
average is one compiled pass instead (``_jit_conv.max_pool_float``,
``average_pool_float``: no padded copy; a maximum's value, an average's value
to float32 rounding). Quantized averages sum the raw 8-bit values in int32 and
round half away from zero; the output keeps the input's quantization. Float16
computes in float32.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import kernels, quant
from nnhal.driver.ops._conv_util import (
    Params,
    Signature,
    axis_geometry,
    float_clamp,
    last_shape_cache,
    patches,
    read_params,
)
from nnhal.driver.ops._operand_rules import QUANT8, check_rank, dtype_of, runtime_failure
from nnhal.driver.ops.layout import from_nhwc, layout_dims, nhwc_dims, to_nhwc
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32

SIGNATURE = Signature(
    ("input",),
    ("stride_width", "stride_height", "filter_width", "filter_height"),
    trailing_counts=(0, 1),
    by_type=False,
)


def _params(ctx: OpContext) -> Params:
    return read_params(ctx, SIGNATURE.resolve(ctx), SIGNATURE)


def _validate(ctx: OpContext) -> HalVersion | None:
    where = SIGNATURE.resolve(ctx)
    check_rank(ctx, 0, exact=4)
    read_params(ctx, where, SIGNATURE)
    return _V.V1_2 if "layout" in where else None


def _filter(params: Params) -> tuple[int, int]:
    """(height, width) of the pooling window."""
    return params.extra["filter_height"], params.extra["filter_width"]


def _prepare(ctx: OpContext) -> list[Shape]:
    params = _params(ctx)
    n, h, w, c = nhwc_dims(ctx.inputs[0].dimensions, params.nchw) or (0, 0, 0, 0)
    kh, kw = _filter(params)
    oh = axis_geometry(params, "height", h, kh, ctx.fail)[1] if h else 0
    ow = axis_geometry(params, "width", w, kw, ctx.fail)[1] if w else 0
    return [layout_dims(n, oh, ow, c, params.nchw)]


def _counts(size: int, k: int, stride: int, head: int, out: int) -> np.ndarray:
    """Input elements each output position's window covers along one axis."""
    start = np.arange(out) * stride - head
    return np.minimum(start + k, size) - np.maximum(start, 0)


def _geometry(ctx: OpContext, params: Params):
    """NHWC input shape -> (top, left, OH, OW, counts [OH, OW, 1]) checked at run time.

    Counts are int64 for quantized inputs and float32 otherwise; one scalar when
    every window covers as many input elements.
    """
    count_dtype = np.int64 if ctx.primary_type in QUANT8 else f32
    kh, kw = _filter(params)
    sw, sh = params.stride

    def fail(message: str) -> Exception:
        return runtime_failure(ctx, message)

    def compute(shape):
        _, h, w, _ = shape
        top, oh = axis_geometry(params, "height", h, kh, fail)
        left, ow = axis_geometry(params, "width", w, kw, fail)
        counts = np.outer(_counts(h, kh, sh, top, oh), _counts(w, kw, sw, left, ow))
        if counts.size and np.all(counts == counts.flat[0]):
            # one count for every window (no padding under any): dividing by a scalar
            # gives the same quotients as by the broadcast array, and numpy's loop over
            # a broadcast [OH, OW, 1] runs one short inner loop per output pixel
            # (1x56x56x64: 31 against 16 us)
            return top, left, oh, ow, count_dtype(counts.flat[0])
        return top, left, oh, ow, counts[:, :, None].astype(count_dtype)

    return last_shape_cache(compute)


def _windows(params: Params, x: np.ndarray, top: int, left: int, oh: int, ow: int, pad):
    n, h, w, c = x.shape
    if (oh, ow, top, left) == (1, 1, 0, 0) and _filter(params) == (h, w):
        # a global pool: the input itself is the one window. A reshape instead of
        # numpy's sliding_window_view, whose Python code took ~100 us at the end of a
        # MobileNet run (its code and data evicted from the caches by the GEMMs
        # before it) against 2 us when warm
        return x.reshape(n, 1, 1, h, w, c)
    return patches(x, _filter(params), params.stride[::-1], (1, 1), (top, left), (oh, ow), pad)


#: output values per tap below which one ``reduce`` call over the taps beats a
#: ufunc call per tap: a 7x7 global average of 1x7x7x1024 took 29 us tap by tap
#: (49 calls on 1,024 values) against 4 us reduced; 1x14x14x256 5x5 was about even
#: (86 against 73 us), and large outputs are 2x-3x faster tap by tap (a reduce
#: keeps the output's pixels, not the channels, in its inner loop)
REDUCE_OUTPUTS = 1 << 12


def _reduce(view: np.ndarray, combine, dtype=None) -> np.ndarray:
    """Fold the KH x KW taps of ``view`` with ``combine(acc, tap, out=acc)``.

    A small output with several channels takes one ``combine.reduce`` over the tap
    axes instead: its inner loop runs over the contiguous channels and each output
    still adds its taps one after another in the same (row-major) order, so float
    sums are the same bits (one channel would make the taps the inner loop, which
    numpy sums pairwise).
    """
    kh, kw = view.shape[3:5]
    n, oh, ow, c = view.shape[0], view.shape[1], view.shape[2], view.shape[5]
    if c > 1 and n * oh * ow * c <= REDUCE_OUTPUTS and kh * kw > 4:
        return combine.reduce(view, axis=(3, 4), dtype=dtype)
    acc = np.array(view[:, :, :, 0, 0], dtype=dtype)
    for i in range(kh):
        for j in range(kw):
            if i or j:
                combine(acc, view[:, :, :, i, j], out=acc)
    return acc


def _kernel(ctx: OpContext, mode: str) -> Callable[[np.ndarray], np.ndarray]:
    params = _params(ctx)
    geometry = _geometry(ctx, params)
    nchw = params.nchw
    out_info = ctx.outputs[0]
    out_dtype = dtype_of(out_info.type)
    quantized = ctx.primary_type in QUANT8

    if quantized:
        lo, hi = quant.activation_range(
            params.activation, out_info.scale, out_info.zeroPoint, out_dtype
        )
        low = int(np.iinfo(out_dtype).min)

        def quant_pool(x: np.ndarray) -> np.ndarray:
            xn = to_nhwc(x, nchw)
            top, left, oh, ow, counts = geometry(xn.shape)
            if mode == "max":
                acc = _reduce(_windows(params, xn, top, left, oh, ow, low), np.maximum)
            else:
                total = _reduce(_windows(params, xn, top, left, oh, ow, 0), np.add, np.int32)
                half = counts // 2
                # round half away from zero (the reference's integer average)
                acc = np.where(total >= 0, (total + half) // counts, -((half - total) // counts))
            return from_nhwc(np.clip(acc, lo, hi).astype(out_dtype), nchw)

        return quant_pool

    clamp = float_clamp(params.activation)
    compiled = mode in ("max", "average") and kernels.jit_wanted()
    kernel_name = f"{mode}_pool_float"
    kh, kw = _filter(params)
    sw, sh = params.stride

    def jit_pool(xn: np.ndarray, top: int, left: int, oh: int, ow: int) -> np.ndarray | None:
        """The compiled maximum or average (``_jit_conv.max_pool_float``,
        ``average_pool_float``), or None: numpy runs."""
        module = kernels.jit_module()
        if module is None:
            return None
        out = np.empty((xn.shape[0], oh, ow, xn.shape[3]), dtype=f32)
        try:
            kernel = getattr(module, kernel_name)
            kernel(np.ascontiguousarray(xn), top, left, sh, sw, kh, kw, out)
        except Exception as exc:  # noqa: BLE001 (a compile failure: numpy from now on)
            kernels.run_failed(exc)
            return None
        return out

    def numpy_pool(xn: np.ndarray, top: int, left: int, oh: int, ow: int, counts):
        if mode == "max":
            return _reduce(_windows(params, xn, top, left, oh, ow, -np.inf), np.maximum)
        if mode == "average":
            out = _reduce(_windows(params, xn, top, left, oh, ow, 0), np.add)
        else:
            squares = np.square(xn)
            out = _reduce(_windows(params, squares, top, left, oh, ow, 0), np.add)
        out /= counts
        if mode != "average":
            np.sqrt(out, out=out)
        return out

    def float_pool(x: np.ndarray) -> np.ndarray:
        xn = to_nhwc(x, nchw)
        top, left, oh, ow, counts = geometry(xn.shape)
        if xn.dtype != f32:
            xn = xn.astype(f32)
        out = jit_pool(xn, top, left, oh, ow) if compiled else None
        if out is None:
            out = numpy_pool(xn, top, left, oh, ow, counts)
        if clamp is not None:
            clamp(out)
        return from_nhwc(out, nchw).astype(out_dtype, copy=False)

    return float_pool


def _register(op: OperationType, mode: str, types: dict) -> OperationDef:
    return register(
        OperationDef(
            op,
            inputs=SIGNATURE.args((Arg("input"),)),
            outputs=(Arg("output"),),
            layout=SIGNATURE.layout_index,
            types=types,
            execute=lambda ctx: _kernel(ctx, mode),
            prepare=_prepare,
            validate=_validate,
        )
    )


_ALL_TYPES = {
    _T.TENSOR_FLOAT32: _V.V1_0,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_0,
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}
AVERAGE_POOL_2D = _register(OperationType.AVERAGE_POOL_2D, "average", _ALL_TYPES)
MAX_POOL_2D = _register(OperationType.MAX_POOL_2D, "max", _ALL_TYPES)
L2_POOL_2D = _register(
    OperationType.L2_POOL_2D, "l2", {_T.TENSOR_FLOAT32: _V.V1_0, _T.TENSOR_FLOAT16: _V.V1_2}
)

"""CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D.

Each takes an NHWC (or, with ``layout`` true, NCHW) rank-4 input, a rank-4
filter and a bias, with implicit (padding code) or explicit paddings,
strides, and for CONV_2D / DEPTHWISE_CONV_2D optional dilation factors
(``_conv_util.Signature`` tells the forms apart as the reference does).

Kernels work in NHWC:

- CONV_2D: the windows of the padded input (a strided view) are copied into
  an im2col matrix ``[N*OH*OW, KH*KW*C]`` multiplied by the filter
  ``[KH*KW*C, O]`` with BLAS, one call per slab of output pixels. A 1x1
  unstrided convolution multiplies slabs of the input itself.
- GROUPED_CONV_2D: the same with one batched matmul over the groups; with
  numba, groups of enough channels each go through CONV_2D's compiled paths
  (``_grouped_float_kernel``).
- DEPTHWISE_CONV_2D: one einsum over the taps per slab (a channel never
  mixes with another, so there is no matmul); with a unit width stride each
  tap is a contiguous run of OW*C input values per output row, multiplied by
  the filter tiled along the width. With numba installed (``kernels``), the
  compiled kernels of ``_jit_conv`` run instead: one pass with the bias and
  the clamp fused (float), or the exact accumulators of each slab (quantized).

With numba, CONV_2D's im2col slabs come from the compiled ``im2col`` (which
also centers a quantized input), and a float slab's bias and activation are
one compiled pass (``bias_clamp``); numpy's forms stay the reference. A float
CONV_2D with a 3x3 filter at unit stride and dilation and enough channels goes
by Winograd's F(2x2, 3x3) instead (``_winograd``: 16 GEMMs with 2.25x fewer
multiplications, within NNAPI's float32 tolerance of the direct sum).

On one BLAS thread a slab is about ``OUT_SLAB_ELEMENTS`` output values, so the
bias, the activation or the requantization pass over it while it is in
cache; with several threads slabs are as large as ``SLAB_ELEMENTS`` of im2col
allows (each BLAS call synchronizes the pool).

Float16 computes in float32. Quantized kernels (QUANT8_ASYMM and _SIGNED
inputs, per-tensor filters of the same type or TENSOR_QUANT8_SYMM_PER_CHANNEL
filters) accumulate ``(x - zp_x) * (w - zp_w)`` exactly (float32 or float64
matmul where every partial sum provably fits the mantissa, see ``_qexact``;
else float64 or int32 tap sums for depthwise, which wrap as the
reference's), add the int32 bias and requantize per output channel with the
reference's fixed-point multipliers (``input_scale * filter_scale[c] /
output_scale``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from nnhal.driver.ops import _qexact, _winograd, kernels, quant, threads
from nnhal.driver.ops._conv_util import (
    Params,
    Signature,
    activation_bounds,
    axis_geometry,
    channel_scales,
    check_bias_scale,
    float_clamp,
    last_shape_cache,
    multipliers,
    padded,
    patches,
    read_params,
    requantizer,
)
from nnhal.driver.ops._operand_rules import (
    QUANT8,
    TENSOR_INT32,
    check_rank,
    dtype_of,
    runtime_failure,
)
from nnhal.driver.ops.layout import from_nhwc, layout_dims, nhwc_dims, to_nhwc
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register
from numpy.lib.stride_tricks import as_strided

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32
PER_CHANNEL = _T.TENSOR_QUANT8_SYMM_PER_CHANNEL


def filter_types(primary: int) -> frozenset:
    return frozenset({primary, PER_CHANNEL}) if primary in QUANT8 else frozenset({primary})


def bias_types(primary: int) -> frozenset:
    return TENSOR_INT32 if primary in QUANT8 else frozenset({primary})


BASE_ARGS = (Arg("input"), Arg("filter", filter_types), Arg("bias", bias_types))
TYPES = {
    _T.TENSOR_FLOAT32: _V.V1_0,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_0,
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}
_BASE = ("input", "filter", "bias")
_STRIDES = ("stride_width", "stride_height")


@dataclass(frozen=True)
class Kind:
    name: str  # "conv", "depthwise", "grouped"
    signature: Signature
    channel_dim: int  # the axis of per-channel filter scales
    dilated: bool = True


CONV = Kind("conv", Signature(_BASE, _STRIDES), 0)
DEPTHWISE = Kind("depthwise", Signature(_BASE, (*_STRIDES, "depth_multiplier")), 3)
GROUPED = Kind(
    "grouped",
    Signature(_BASE, (*_STRIDES, "groups"), trailing_counts=(1,), by_type=False),
    0,
    dilated=False,
)


# ---------------------------------------------------------------------------
# Validation and shapes
# ---------------------------------------------------------------------------


def _params(ctx: OpContext, kind: Kind) -> Params:
    return read_params(ctx, kind.signature.resolve(ctx), kind.signature)


def _validate(kind: Kind) -> Callable[[OpContext], HalVersion | None]:
    def validate(ctx: OpContext) -> HalVersion | None:
        where = kind.signature.resolve(ctx)
        check_rank(ctx, 0, exact=4)
        check_rank(ctx, 1, exact=4)
        check_rank(ctx, 2, exact=1)
        scales = channel_scales(ctx, 1, kind.channel_dim)
        primary = ctx.primary_type
        if primary in QUANT8 and scales is None:
            check_bias_scale(ctx)
        params = read_params(ctx, where, kind.signature)
        # the channel rules here too: binding a constant filter at prepare relies on them
        _, _, _, c = nhwc_dims(ctx.inputs[0].dimensions, params.nchw) or (0, 0, 0, 0)
        b_len = (ctx.inputs[2].dimensions or (0,))[0]
        channels(kind, params, c, ctx.inputs[1].dimensions or (0, 0, 0, 0), b_len, ctx.fail)
        version = None
        if scales is not None or "layout" in where or "dilation_width" in where:
            version = _V.V1_2
        if primary == _T.TENSOR_QUANT8_ASYMM and scales is None:
            # Before HAL 1.2, outputScale > inputScale * filterScale was required.
            product = f32(ctx.inputs[0].scale) * f32(ctx.inputs[1].scale)
            if not f32(ctx.outputs[0].scale) > product:
                version = _V.V1_2
        return version

    return validate


def channels(kind: Kind, params: Params, x_c: int, w_shape, b_len: int, fail) -> int:
    """Check input / filter / bias channel counts (0 = unknown); return output channels."""
    o, _, _, w_c = w_shape
    if kind is DEPTHWISE:
        if o and o != 1:
            raise fail(f"input 1 (filter) has {o} on axis 0; a depthwise filter has 1")
        out_c = w_c
        m = params.extra["depth_multiplier"]
        if m <= 0 or w_c % m:
            raise fail(
                f"depth_multiplier is {m}; it must be > 0 and divide the filter's output"
                f" channels ({w_c})"
            )
        if x_c and w_c and x_c * m != w_c:
            raise fail(
                f"input 1 (filter) has {w_c} output channels (axis 3); it must be input channels"
                f" ({x_c}) * depth_multiplier ({m})"
            )
    elif kind is GROUPED:
        out_c = o
        groups = params.extra["groups"]
        if groups <= 0:
            raise fail(f"groups is {groups}; it must be > 0")
        if x_c and w_c and w_c * groups != x_c:
            raise fail(
                f"input 1 (filter) has {w_c} channels per group (axis 3); times groups "
                f"({groups}) it must equal the input channels ({x_c})"
            )
        if o and o % groups:
            raise fail(
                f"input 1 (filter) has {o} output channels; not a multiple of groups ({groups})"
            )
    else:
        out_c = o
        if x_c and w_c and x_c != w_c:
            raise fail(f"input 1 (filter) has {w_c} channels (axis 3); the input has {x_c}")
    if b_len and out_c and b_len != out_c:
        raise fail(f"input 2 (bias) has {b_len} elements; there are {out_c} output channels")
    return out_c


def _prepare(kind: Kind) -> Callable[[OpContext], list[Shape]]:
    def prepare(ctx: OpContext) -> list[Shape]:
        params = _params(ctx, kind)
        n, h, w, c = nhwc_dims(ctx.inputs[0].dimensions, params.nchw) or (0, 0, 0, 0)
        w_shape = ctx.inputs[1].dimensions or (0, 0, 0, 0)
        b_len = (ctx.inputs[2].dimensions or (0,))[0]
        out_c = channels(kind, params, c, w_shape, b_len, ctx.fail)
        _, kh, kw, _ = w_shape
        oh = (
            axis_geometry(params, "height", h, kh, ctx.fail, dilated=kind.dilated)[1]
            if h and kh
            else 0
        )
        ow = (
            axis_geometry(params, "width", w, kw, ctx.fail, dilated=kind.dilated)[1]
            if w and kw
            else 0
        )
        return [layout_dims(n, oh, ow, out_c, params.nchw)]

    return prepare


def _geometry(ctx: OpContext, kind: Kind, params: Params):
    """(x NHWC shape, filter shape, bias shape) -> (top, left, OH, OW), checked at run time."""

    def fail(message: str) -> Exception:
        return runtime_failure(ctx, message)

    def compute(x_shape, w_shape, b_shape) -> tuple[int, int, int, int]:
        _, h, w, c = x_shape
        channels(kind, params, c, w_shape, b_shape[0], fail)
        _, kh, kw, _ = w_shape
        top, oh = axis_geometry(params, "height", h, kh, fail, dilated=kind.dilated)
        left, ow = axis_geometry(params, "width", w, kw, fail, dilated=kind.dilated)
        return top, left, oh, ow

    return last_shape_cache(compute)


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------


def _windows(x: np.ndarray, w_shape, params: Params, top: int, left: int, oh: int, ow: int):
    """The [N, OH, OW, KH, KW, C] windows of NHWC x (zero padding)."""
    _, kh, kw, _ = w_shape
    sw, sh = params.stride
    dw, dh = params.dilation
    return patches(x, (kh, kw), (sh, sw), (dh, dw), (top, left), (oh, ow))


#: im2col elements per matmul (16 MB of float32). Slabs bound the scratch
#: memory of large convolutions; they are large because every BLAS call
#: synchronizes its worker threads, which costs dearly when other processes
#: share the cores (measured: 2 MB slabs were ~10% faster on an idle machine,
#: 2-3x slower at the median on a loaded one than a single call).
SLAB_ELEMENTS = 1 << 22
#: output elements per slab when BLAS runs on one thread (no synchronization to
#: amortize): a slab's accumulators (1 MB of float32) are still in the core's L2
#: cache when the bias, the activation or the requantization passes over them
#: (measured in one process against whole-tensor passes: 0.86x-1.02x the time
#: of a float MobileNet, 0.90x of a quant8 one; 64K-element slabs were 1.10x at
#: low load, better only under heavy load)
OUT_SLAB_ELEMENTS = 1 << 18
#: im2col elements per slab when BLAS runs on one thread (512 KB of float32, half
#: the core's L2): the copy writes the slab and the matmul packs it while it is in
#: cache. With 36-row slabs of the MobileNet-sized 3x3 convolution (4.6 MB of
#: im2col) the loaded machine made the kernel 1.6x-1.9x slower (interleaved in one
#: process, load ~10); slabs of 256 KB to 1 MB were alike.
COLS_SLAB_ELEMENTS = 1 << 17


def _rows_per_slab(row_elements: int, out_row_elements: int, im2col: bool = False) -> int:
    rows = SLAB_ELEMENTS // max(row_elements, 1)
    if threads.single_threaded():
        rows = min(rows, OUT_SLAB_ELEMENTS // max(out_row_elements, 1))
        if im2col:
            rows = min(rows, COLS_SLAB_ELEMENTS // max(row_elements, 1))
    return max(1, rows)


def _slabs(n: int, oh: int, rows: int) -> list[tuple[int, int, int, int]]:
    """(first image, last image, first row, last row) blocks of about ``rows`` output rows.

    Each block is a contiguous run of output pixels (whole images, or rows of one).
    """
    if rows >= oh:
        images = max(1, rows // max(oh, 1))
        return [(i, min(i + images, n), 0, oh) for i in range(0, n, images)]
    return [(i, i + 1, r, min(r + rows, oh)) for i in range(n) for r in range(0, oh, rows)]


class _Target:
    """Where slabs accumulate: into the output itself, or a scratch buffer reused by slabs."""

    def __init__(self, out: np.ndarray | None, channels: int, dtype):
        self.out, self.channels, self.dtype = out, channels, dtype
        self.scratch: np.ndarray | None = None

    def __call__(self, p0: int, p1: int, largest: int) -> np.ndarray:
        if self.out is not None:
            return self.out[p0:p1]
        if self.scratch is None:
            self.scratch = np.empty((largest, self.channels), dtype=self.dtype)
        return self.scratch[: p1 - p0]


def _conv_slabs(x, wm, w_shape, params: Params, geo, target: _Target, fill=None, zp=None):
    """CONV_2D accumulators by slabs of output pixels: (p0, p1, acc [p1 - p0, O]).

    im2col slabs, each one BLAS matmul; a 1x1 unstrided convolution multiplies
    slabs of the input itself. ``fill(cols, i0, i1, r0, r1) -> bool`` is the
    compiled im2col (False: numba failed, numpy copies the slab from a strided
    view). With ``zp`` (a quantized convolution) ``x`` is the raw input, which
    ``fill`` centers; numpy then works on ``x - zp`` in the matmul's type.
    """
    top, left, oh, ow = geo
    o, kh, kw, c = w_shape
    n, h, w, _ = x.shape
    dtype = wm.dtype

    def numpy_input():
        return x if zp is None else np.subtract(x, dtype.type(zp), dtype=dtype)

    # a quantized input goes through the compiled im2col even then: centered slab by
    # slab while the matmul can take it from cache, not in one copy of the whole input
    if _pointwise(x.shape, w_shape, params, geo) and (zp is None or fill is None):
        flat = numpy_input().reshape(n * h * w, c)
        step = _rows_per_slab(c, o)
        for p0 in range(0, n * h * w, step):
            p1 = min(p0 + step, n * h * w)
            acc = target(p0, p1, step)
            np.matmul(flat[p0:p1], wm, out=acc)
            yield p0, p1, acc
        return
    k = kh * kw * c
    slabs = _slabs(n, oh, _rows_per_slab(ow * k, ow * o, im2col=True))
    if not slabs or not oh * ow:  # an empty batch or output
        return
    largest = max((i1 - i0) * (r1 - r0) for i0, i1, r0, r1 in slabs) * ow
    buffer = np.empty(largest * k, dtype=dtype)
    view = None
    for i0, i1, r0, r1 in slabs:
        rows = (i1 - i0) * (r1 - r0) * ow
        cols = buffer[: rows * k].reshape(rows, k)
        if fill is None or not fill(cols, i0, i1, r0, r1):
            if view is None:
                view = _windows(numpy_input(), w_shape, params, top, left, oh, ow)
            np.copyto(cols.reshape(i1 - i0, r1 - r0, ow, kh, kw, c), view[i0:i1, r0:r1])
        p0 = (i0 * oh + r0) * ow
        acc = target(p0, p0 + rows, largest)
        np.matmul(cols, wm, out=acc)
        yield p0, p0 + rows, acc


def _pointwise(x_shape, w_shape, params: Params, geo) -> bool:
    """Whether a CONV_2D multiplies its input as it is: a 1x1 filter, unit strides,
    no padding (its im2col matrix is the input itself)."""
    top, left, oh, ow = geo
    return (
        w_shape[1] == w_shape[2] == 1
        and params.stride == (1, 1)
        and not (top or left)
        and (oh, ow) == tuple(x_shape[1:3])
    )


def _jit_im2col(params: Params, x: np.ndarray, zp, w_shape, geo):
    """fill(cols, i0, i1, r0, r1) -> whether the compiled im2col wrote the slab's windows
    of ``x`` (centered by ``zp``) into ``cols`` (False: numba failed)."""
    module = kernels.jit_module()
    if module is None:
        return None
    sw, sh = params.stride
    dw, dh = params.dilation
    top, left, _, ow = geo
    _, kh, kw, _ = w_shape
    x = np.ascontiguousarray(x)

    def fill(cols, i0, i1, r0, r1) -> bool:
        try:
            module.im2col(x, zp, i0, i1, r0, r1, ow, kh, kw, top, left, sh, sw, dh, dw, cols)
        except Exception as exc:  # noqa: BLE001 (a compile failure: numpy from now on)
            kernels.run_failed(exc)
            return False
        return True

    return fill


def _conv_matrix(w: np.ndarray, dtype) -> np.ndarray:
    """[O, KH, KW, C] filter -> [KH*KW*C, O] matrix, as a transposed view.

    BLAS takes a transposed operand as is (same speed); copying the transpose of a large
    filter, on the other hand, is a cache-hostile strided copy that made preparation of a
    MobileNet several times slower than onnxruntime's session creation.
    """
    return np.ascontiguousarray(w, dtype=dtype).reshape(w.shape[0], -1).T


def _grouped_matrix(w: np.ndarray, groups: int, dtype) -> np.ndarray:
    """[O, KH, KW, Cg] filter -> [G, KH*KW*Cg, O/G] matrices."""
    o = w.shape[0]
    return np.ascontiguousarray(w.reshape(groups, o // groups, -1).transpose(0, 2, 1), dtype=dtype)


def out_channels(kind: Kind, w_shape) -> int:
    return w_shape[3] if kind is DEPTHWISE else w_shape[0]


def _accumulate(kind: Kind, params: Params, dtype) -> Callable[..., object]:
    """slabs(x NHWC, prepared weights, filter shape, geometry, target) -> iterator of
    (p0, p1, acc): the ``dtype`` accumulators [p1 - p0, O] of output pixels p0..p1
    (flat N*OH*OW order), in ``target``'s memory; consume each before the next."""
    if kind is CONV:

        def conv(x, wm, w_shape, geo, target):
            return _conv_slabs(x, wm, w_shape, params, geo, target)

        return conv
    if kind is GROUPED:
        groups = params.extra["groups"]

        def grouped(x, wm, w_shape, geo, target):
            top, left, oh, ow = geo
            n = x.shape[0]
            _, kh, kw, cg = w_shape
            view = _windows(x, w_shape, params, top, left, oh, ow)
            view = view.reshape(n, oh, ow, kh, kw, groups, cg).transpose(5, 0, 1, 2, 3, 4, 6)
            cols = view.reshape(groups, n * oh * ow, kh * kw * cg)
            out = np.matmul(cols, wm)  # [G, P, O/G]
            total = n * oh * ow
            acc = target(0, total, total)
            np.copyto(acc, out.transpose(1, 0, 2).reshape(total, w_shape[0]))
            yield 0, total, acc

        return grouped

    sh, dh, dw = params.stride[1], params.dilation[1], params.dilation[0]

    def depthwise(x, wm, w_shape, geo, target):
        top, left, oh, ow = geo
        n, _, _, c = x.shape
        _, kh, kw, co = w_shape
        m = wm.shape[3]
        slabs = _slabs(n, oh, _rows_per_slab(ow * co * kh * kw, ow * co))
        if not slabs or not oh * ow:
            return
        largest = max((i1 - i0) * (r1 - r0) for i0, i1, r0, r1 in slabs) * ow
        # an explicit dtype sends einsum through its buffered casting loop (~20% slower
        # measured) even when nothing needs casting: given only when something does
        cast = {} if x.dtype == dtype and wm.dtype == dtype else {"dtype": dtype}
        if params.stride[0] != 1:
            view = _windows(x, w_shape, params, top, left, oh, ow)
            for i0, i1, r0, r1 in slabs:
                p0 = (i0 * oh + r0) * ow
                p1 = p0 + (i1 - i0) * (r1 - r0) * ow
                acc = target(p0, p1, largest)
                into = acc.reshape(i1 - i0, r1 - r0, ow, c, m)
                np.einsum("nhwijc,ijcm->nhwcm", view[i0:i1, r0:r1], wm, out=into, **cast)
                yield p0, p1, acc
            return
        # Unit width stride: a window row of the output (all columns and
        # channels) is one contiguous run of the padded input row, so each
        # tap multiplies OW*C contiguous values by the filter tiled along the
        # width: one einsum with long contiguous inner loops.
        need_h = (oh - 1) * sh + (kh - 1) * dh + 1
        need_w = ow + (kw - 1) * dw
        xp = np.ascontiguousarray(padded(x, top, left, need_h, need_w, 0))
        item, row = xp.itemsize, xp.strides[1]
        runs = as_strided(
            xp,
            (n, oh, kh, kw, ow * c),
            (xp.strides[0], sh * row, dh * row, dw * c * item, item),
            writeable=False,
        )
        tiled = np.broadcast_to(wm[:, :, None], (kh, kw, ow, c, m)).reshape(kh, kw, ow * c, m)
        for i0, i1, r0, r1 in slabs:
            p0 = (i0 * oh + r0) * ow
            p1 = p0 + (i1 - i0) * (r1 - r0) * ow
            acc = target(p0, p1, largest)
            part = runs[i0:i1, r0:r1]
            if m == 1:
                into = acc.reshape(i1 - i0, r1 - r0, ow * c)
                np.einsum("nhijk,ijk->nhk", part, tiled[..., 0], out=into, **cast)
            else:
                into = acc.reshape(i1 - i0, r1 - r0, ow * c, m)
                np.einsum("nhijk,ijkm->nhkm", part, tiled, out=into, **cast)
            yield p0, p1, acc

    return depthwise


def _depthwise_matrix(w: np.ndarray, multiplier: int, dtype) -> np.ndarray:
    """[1, KH, KW, C*M] filter -> [KH, KW, C, M]."""
    _, kh, kw, co = w.shape
    return np.ascontiguousarray(w.reshape(kh, kw, co // multiplier, multiplier), dtype=dtype)


def _prepared_weights(kind: Kind, params: Params, dtype, offset: int = 0):
    """The filter as the accumulation takes it (centered by ``offset``)."""

    def prep(w: np.ndarray) -> np.ndarray:
        # centered in one pass (the cast happens inside the subtraction; exact)
        w = np.subtract(w, dtype(offset), dtype=dtype) if offset else w.astype(dtype, copy=False)
        if kind is CONV:
            return _conv_matrix(w, dtype)
        if kind is GROUPED:
            return _grouped_matrix(w, params.extra["groups"], dtype)
        return _depthwise_matrix(w, params.extra["depth_multiplier"], dtype)

    return prep


def _float_kernel(ctx: OpContext, kind: Kind, params: Params) -> Callable[..., np.ndarray]:
    if kind is GROUPED and kernels.jit_wanted() and _by_groups(ctx, params):
        return _grouped_float_kernel(ctx, params, lambda: _plain_float_kernel(ctx, kind, params))
    return _plain_float_kernel(ctx, kind, params)


def _plain_float_kernel(ctx: OpContext, kind: Kind, params: Params) -> Callable[..., np.ndarray]:
    out_dtype = dtype_of(ctx.outputs[0].type)
    geometry = _geometry(ctx, kind, params)
    accumulate = _accumulate(kind, params, f32)
    prep = _prepared_weights(kind, params, f32)
    nchw = params.nchw
    w_const, b_const = ctx.constant(1), ctx.constant(2)
    wm_const = None if w_const is None else prep(w_const)
    b_f32 = None if b_const is None else b_const.astype(f32)
    want_jit = kernels.jit_wanted()
    compiled = _jit_float_depthwise(params) if kind is DEPTHWISE and want_jit else None
    finish = _bias_and_activation(params, want_jit)
    im2col = kind is CONV and want_jit
    winograd = None
    if kind is CONV and want_jit:
        dims = ctx.outputs[0].dimensions
        out_dims = nhwc_dims(dims, params.nchw) if dims is not None and len(dims) == 4 else None
        winograd = _jit_winograd(params, w_const, out_dims)

    def kernel(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        xn = to_nhwc(x, nchw)
        geo = geometry(xn.shape, w.shape, b.shape)
        if xn.dtype != f32:
            xn = xn.astype(f32)
        wm = wm_const if wm_const is not None else prep(w)
        bias = b_f32 if b_f32 is not None else np.ascontiguousarray(b, dtype=f32)
        _, _, oh, ow = geo
        out = np.empty((xn.shape[0], oh, ow, out_channels(kind, w.shape)), dtype=f32)
        if compiled is not None and compiled(xn, wm, bias, out, geo):
            return from_nhwc(out, nchw).astype(out_dtype, copy=False)
        if winograd is not None and winograd(xn, w, bias, out, geo):
            return from_nhwc(out, nchw).astype(out_dtype, copy=False)
        flat = out.reshape(-1, out.shape[3])
        if kind is CONV and _pointwise(xn.shape, w.shape, params, geo):
            # the input's own slabs, without the generator, target and im2col closure
            # of the general path: what a kernel does in Python between two GEMMs runs
            # with its code and data evicted from the caches by them (MobileNet's 1x1
            # convolutions, 13 of its 30 operations)
            a = xn.reshape(-1, xn.shape[3])
            step = _rows_per_slab(a.shape[1], flat.shape[1])
            for p0 in range(0, a.shape[0], step):
                acc = flat[p0 : p0 + step]
                np.matmul(a[p0 : p0 + step], wm, out=acc)
                finish(acc, bias)
            return from_nhwc(out, nchw).astype(out_dtype, copy=False)
        if im2col:
            _im2col_conv(params, xn, wm, w.shape, geo, flat, bias, finish)
        else:
            # bias and activation on each slab while it is in cache
            for _, _, acc in accumulate(xn, wm, w.shape, geo, _Target(flat, flat.shape[1], f32)):
                finish(acc, bias)
        return from_nhwc(out, nchw).astype(out_dtype, copy=False)

    return kernel


def _bias_and_activation(
    params: Params, want_jit: bool
) -> Callable[[np.ndarray, np.ndarray], None]:
    """finish(acc, bias): a float slab's bias and fused activation, in place (with
    numba: one compiled pass, ``_jit_bias_clamp``)."""
    bias_clamp = _jit_bias_clamp(params) if want_jit else None
    clamp = float_clamp(params.activation)

    def finish(acc: np.ndarray, bias: np.ndarray) -> None:
        if bias_clamp is not None and bias_clamp(acc, bias):
            return
        acc += bias
        if clamp is not None:
            clamp(acc)

    return finish


def _im2col_conv(params: Params, x, wm, w_shape, geo, flat: np.ndarray, bias, finish) -> None:
    """A float CONV_2D of NHWC ``x`` into ``flat`` [N*OH*OW, O] by the compiled im2col
    slabs, each slab's bias and activation added while it is in cache."""
    fill = _jit_im2col(params, x, f32(0), w_shape, geo)
    target = _Target(flat, flat.shape[1], f32)
    for _, _, acc in _conv_slabs(x, wm, w_shape, params, geo, target, fill):
        finish(acc, bias)


#: the fewest filter channels times filters per group for which a GROUPED_CONV_2D
#: goes group by group through CONV_2D's compiled paths (below, numpy's batched
#: matmul takes the whole: a Python round per group costs more than it saves)
GROUP_MIN_PRODUCT = 64


def _by_groups(ctx: OpContext, params: Params) -> bool:
    """Whether a GROUPED_CONV_2D may go group by group: its filter's channels times
    filters per group reach ``GROUP_MIN_PRODUCT``, or its shape is not known yet."""
    dims = ctx.inputs[1].dimensions
    if not dims or not all(dims):
        return True
    o, _, _, cg = dims
    return cg * (o // params.extra["groups"]) >= GROUP_MIN_PRODUCT


def _grouped_float_kernel(
    ctx: OpContext, params: Params, make_whole: Callable[[], Callable[..., np.ndarray]]
) -> Callable[..., np.ndarray]:
    """A float GROUPED_CONV_2D with numba: each group a CONV_2D of its channels.

    A group goes by Winograd's F(2x2, 3x3) when it takes it (the group's filter
    transformed here when constant), reading its input channels and writing its
    output channels in place; else its channels are copied out contiguous,
    convolved by the compiled im2col slabs and copied into the output. The bias
    and the activation are fused either way. numpy's batched matmul
    (the reference, ``_accumulate``) copied the whole im2col of every group through a
    strided view first, then the output once more. Groups of few channels (a product
    of filter channels and filters per group below ``GROUP_MIN_PRODUCT``) keep it:
    ``make_whole()`` builds that kernel when a filter given at run time has them.
    """
    out_dtype = dtype_of(ctx.outputs[0].type)
    groups = params.extra["groups"]
    geometry = _geometry(ctx, GROUPED, params)
    nchw = params.nchw
    w_const, b_const = ctx.constant(1), ctx.constant(2)
    b_f32 = None if b_const is None else b_const.astype(f32)
    dims = ctx.outputs[0].dimensions
    out_dims = nhwc_dims(dims, nchw) if dims is not None and len(dims) == 4 else None
    whole: list[Callable[..., np.ndarray]] = []
    parts: list[np.ndarray | None] = [None] * groups
    if w_const is not None:
        w32 = np.ascontiguousarray(w_const, dtype=f32)
        og = w32.shape[0] // groups
        parts = [w32[g * og : (g + 1) * og] for g in range(groups)]
    winograds = [_jit_winograd(params, part, out_dims) for part in parts]
    mats = [None if part is None else _conv_matrix(part, f32) for part in parts]
    finish = _bias_and_activation(params, True)

    def kernel(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        o, _, _, cg = w.shape
        og = o // groups if groups else 0
        if cg * og < GROUP_MIN_PRODUCT:
            if not whole:
                whole.append(make_whole())
            return whole[0](x, w, b)
        xn = to_nhwc(x, nchw)
        geo = geometry(xn.shape, w.shape, b.shape)
        if xn.dtype != f32:
            xn = xn.astype(f32)
        bias = b_f32 if b_f32 is not None else np.ascontiguousarray(b, dtype=f32)
        _, _, oh, ow = geo
        n = xn.shape[0]
        out = np.empty((n, oh, ow, o), dtype=f32)
        xn = np.ascontiguousarray(xn)
        part = None
        for g in range(groups):
            # a constant filter's group was cut (and widened to float32) while preparing
            wg = parts[g] if parts[g] is not None else w[g * og : (g + 1) * og].astype(f32)
            bg = bias[g * og : (g + 1) * og]
            if winograds[g](xn, wg, bg, out, geo, g * cg, g * og):
                continue
            # im2col: the group's channels copied out, its result copied in
            xg = np.ascontiguousarray(xn[..., g * cg : (g + 1) * cg])
            if part is None:
                part = out if groups == 1 else np.empty((n, oh, ow, og), dtype=f32)
            wm = mats[g] if mats[g] is not None else _conv_matrix(wg, f32)
            _im2col_conv(params, xg, wm, wg.shape, geo, part.reshape(-1, og), bg, finish)
            if part is not out:
                out[..., g * og : (g + 1) * og] = part
        return from_nhwc(out, nchw).astype(out_dtype, copy=False)

    return kernel


def _jit_bias_clamp(params: Params) -> Callable[..., bool]:
    """(acc [P, O] float32, bias [O]) -> whether the compiled pass added the bias and
    clamped ``acc`` in place (False: numba failed; numpy's two passes run).

    One pass instead of numpy's two: numpy adds a broadcast bias one row of O values
    per inner loop, so on a 4096x64 slab ``acc += bias`` then ``clip`` took 66 us
    against 16 us compiled (the slab in L2; 49 against 14 us at 512x512).
    """
    lo, hi = activation_bounds(params.activation)

    def run(acc, bias) -> bool:
        module = kernels.jit_module()
        if module is None:
            return False
        try:
            module.bias_clamp(acc, bias, lo, hi)
        except Exception as exc:  # noqa: BLE001 (a compile failure: numpy from now on)
            kernels.run_failed(exc)
            return False
        return True

    return run


def _jit_winograd(params: Params, w_const: np.ndarray | None, out_dims) -> Callable[..., bool]:
    """(x NHWC float32, filter, bias, out, geometry[, c0, o0]) -> whether Winograd's
    F(2x2, 3x3) filled ``out`` (False: the convolution is not one it takes,
    ``_winograd.eligible``, a value was not finite, or numba failed; the im2col path
    runs). ``c0`` / ``o0``: the first input and output channel of a group of a
    GROUPED_CONV_2D, whose filter ``w`` is the group's.

    A constant filter is transformed here, with the model's other weights, when the
    declared output shape (``out_dims``, NHWC, 0 = unknown) shows it will be taken
    (512 to 512 channels: 8.6 ms); with an unknown output size, at the first execution
    that takes it. A filter given at run time is transformed by each execution.
    """
    lo, hi = activation_bounds(params.activation)
    kept: dict[str, np.ndarray | None] = {}
    if w_const is not None and out_dims is not None and all(out_dims):
        _, oh, ow, _ = out_dims
        w_shape = w_const.shape
        if _winograd.eligible(w_shape, params.stride, params.dilation, w_shape[3], oh, ow):
            kept["u"] = _filter_transform(w_const)

    def run(x, w, bias, out, geo, c0=0, o0=0) -> bool:
        _, _, oh, ow = geo
        if not _winograd.eligible(w.shape, params.stride, params.dilation, w.shape[3], oh, ow):
            return False
        module = kernels.jit_module()
        if module is None:
            return False
        if w_const is None:
            u = _filter_transform(w)
        elif "u" in kept:
            u = kept["u"]
        else:
            u = kept["u"] = _filter_transform(w_const)
        if u is None:
            return False
        try:
            return _winograd.convolve(module, x, u, bias, geo, out, lo, hi, c0, o0)
        except Exception as exc:  # noqa: BLE001 (a compile failure: numpy from now on)
            kernels.run_failed(exc)
            return False

    return run


def _filter_transform(w: np.ndarray) -> np.ndarray | None:
    """``_winograd.filter_transform`` compiled, or in numpy when numba is missing or
    fails to compile it (the same values either way)."""
    module = kernels.jit_module()
    if module is not None:
        try:
            return _winograd.filter_transform(w, module)
        except Exception as exc:  # noqa: BLE001 (a compile failure: numpy from now on)
            kernels.run_failed(exc)
    return _winograd.filter_transform(w)


def _jit_float_depthwise(params: Params) -> Callable[..., bool]:
    """(x NHWC, [KH, KW, C, M] filter, bias, out, geometry) -> whether the compiled
    depthwise kernel filled ``out`` (False: numba failed; the numpy path runs)."""
    sw, sh = params.stride
    dw, dh = params.dilation
    m = params.extra["depth_multiplier"]
    lo, hi = activation_bounds(params.activation)

    def run(x, wm, bias, out, geo) -> bool:
        module = kernels.jit_module()
        if module is None:
            return False
        top, left, _, _ = geo
        kh, kw = wm.shape[:2]
        try:
            module.depthwise_float(
                np.ascontiguousarray(x), wm.reshape(kh, kw, -1), np.ascontiguousarray(bias),
                out, top, left, sh, sw, dh, dw, m, lo, hi,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 (a compile failure: numpy from now on)
            kernels.run_failed(exc)
            return False
        return True

    return run


def _jit_depthwise_slabs(module, params: Params, zp: int, fallback):
    """slabs(x NHWC *uncentered*, weights, filter shape, geometry, target) -> iterator of
    (p0, p1, acc) as ``_accumulate``'s, from the compiled kernel (the centering fused);
    ``fallback(x, ...)`` (the numpy slabs) when numba fails to compile."""
    sw, sh = params.stride
    dw, dh = params.dilation
    m = params.extra["depth_multiplier"]

    def slabs(x, wm, w_shape, geo, target):
        top, left, oh, ow = geo
        n = x.shape[0]
        _, kh, kw, co = w_shape
        blocks = _slabs(n, oh, _rows_per_slab(ow * co * kh * kw, ow * co))
        if not blocks or not oh * ow:
            return
        largest = max((i1 - i0) * (r1 - r0) for i0, i1, r0, r1 in blocks) * ow
        x = np.ascontiguousarray(x)
        w3 = wm.reshape(kh, kw, co)
        zp_acc = wm.dtype.type(zp)
        first = True
        for i0, i1, r0, r1 in blocks:
            p0 = (i0 * oh + r0) * ow
            p1 = p0 + (i1 - i0) * (r1 - r0) * ow
            acc = target(p0, p1, largest)
            per_image = acc.reshape(i1 - i0, r1 - r0, ow, co)
            try:
                for i in range(i0, i1):
                    module.depthwise_acc(
                        x, zp_acc, w3, i, r0, per_image[i - i0], top, left, sh, sw, dh, dw, m
                    )
            except Exception as exc:  # a compile failure: numpy from now on
                if not first:
                    raise
                kernels.run_failed(exc)
                yield from fallback(x, wm, w_shape, geo, target)
                return
            first = False
            yield p0, p1, acc

    return slabs


def _jit_requantizer(frequant, mult, exp, zero_point: int, lo: int, hi: int):
    """(bias, bias as float64, float requantization exact?) -> requant(acc, out) ->
    whether the compiled requantization filled ``out`` (False: numba failed; use
    numpy's). The one-floor form of ``frequant`` where numpy would run it, else the
    integer formula (exact everywhere)."""
    one_floor = frequant.one_floor
    if one_floor is not None:
        scale, first_offset = (np.asarray(a, dtype=np.float64) for a in one_floor)
    left, right = np.maximum(exp, 0), np.maximum(-exp, 0)

    def for_bias(b: np.ndarray, b64: np.ndarray, fast: bool):
        module = kernels.jit_module()
        if module is None:
            return None
        n = len(b)

        def channels(a):
            return np.ascontiguousarray(np.broadcast_to(a, (n,)))

        if fast and one_floor is not None:
            # the bias folded in as frequant folds it: the same float64 products and sums
            args = (channels(scale), channels(b64 * scale + first_offset), float(lo), float(hi))
            run = module.requantize
        else:
            args = (b.astype(np.int64), channels(mult), channels(left), channels(right))
            args += (zero_point, lo, hi)
            run = module.requantize_fixed

        def requant(acc: np.ndarray, out: np.ndarray) -> bool:
            try:
                run(acc, *args, out)
            except Exception as exc:  # noqa: BLE001 (a compile failure: numpy from now on)
                kernels.run_failed(exc)
                return False
            return True

        return requant

    return for_bias


def _channel_rows(kind: Kind, a: np.ndarray) -> tuple[np.ndarray, str]:
    """The filter as 2-D with one output channel per row or column, and which."""
    if kind is DEPTHWISE:  # [1, KH, KW, C*M]: channels along the columns
        return a.reshape(-1, a.shape[3]), "ij,ij->j"
    return a.reshape(a.shape[0], -1), "ij,ij->i"  # [O, KH, KW, C(/G)]


def _norm_bound(kind: Kind, centered: np.ndarray) -> np.ndarray:
    """Per output channel, an upper bound of sum |w - zero point| (float64).

    Cauchy-Schwarz: sum |c| <= sqrt(K * sum c**2) over the K taps. The squares are
    exact float32 integers and their float32 sum (one fused einsum pass, several
    times cheaper than the absolute values) is low by at most a factor
    1 - gamma, gamma = (K - 1) u / (1 - (K - 1) u), u = 2**-24, whatever the order;
    the bound divides that out and rounds up.
    """
    rows, spec = _channel_rows(kind, centered)
    taps = rows.shape[0] if kind is DEPTHWISE else rows.shape[1]
    squares = np.einsum(spec, rows, rows).astype(np.float64)
    n_u = max(taps - 1, 0) * 2.0**-24
    gamma = n_u / (1 - n_u)
    return np.sqrt(taps * squares / (1 - gamma)) * (1 + 2.0**-40)


def _abs_sums(kind: Kind, centered: np.ndarray) -> np.ndarray:
    """Per output channel, the sum of |w - zero point| over one output's taps (float64).

    ``centered`` is the float32 filter minus its zero point (exact integers). The sums
    run in float32 when every one stays below 2**24 (then exact in any order), else
    in float64.
    """
    magnitudes = np.abs(centered)
    if kind is DEPTHWISE:  # [1, KH, KW, C*M]
        rows = magnitudes.reshape(-1, centered.shape[3])
        axis = 0
    else:  # [O, KH, KW, C(/G)]
        rows = magnitudes.reshape(centered.shape[0], -1)
        axis = 1
    exact32 = 255.0 * max(rows.shape[axis], 1) < _qexact.F32_EXACT
    return rows.sum(axis=axis, dtype=np.float32 if exact32 else np.float64).astype(np.float64)


def _centered_f32(w: np.ndarray, zero_point: int) -> np.ndarray:
    """w - zero_point as float32 (exact: 8-bit integers).

    A cast then an in-place subtraction: numpy's mixed-type subtraction casts
    through its buffered loop (a 1024x1024 filter 0.16 against 0.12 ms).
    """
    centered = w.astype(f32)
    centered -= f32(zero_point)
    return centered


def _quant_kernel(ctx: OpContext, kind: Kind, params: Params) -> Callable[..., np.ndarray]:
    """Exact integer accumulation in float BLAS where the sums provably fit (``_qexact``).

    Per output channel, max|x - zp_x| * sum|w - zp_w| bounds every partial sum: it
    picks float32 or float64 accumulation (filters centered in that type, exact),
    and the bound with the bias picks the float64 requantization or the integer
    one. A bound past 2**53 (not reachable by NNAPI-sized filters) keeps the
    integer path.
    """
    inp, filt, out = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    dtype = dtype_of(out.type)
    scales = channel_scales(ctx, 1, kind.channel_dim)
    if scales is None:
        scales = np.array([filt.scale], dtype=f32)
    mult, exp = multipliers(inp.scale, scales, out.scale)
    lo, hi = quant.activation_range(params.activation, out.scale, out.zeroPoint, dtype)
    requant = requantizer(mult, exp, out.zeroPoint, lo, hi, dtype)
    frequant = _qexact.float_requantizer(mult, exp, out.zeroPoint, lo, hi, dtype)
    limit = frequant.limit
    geometry = _geometry(ctx, kind, params)
    x_bound = _qexact.centered_bound(inp.zeroPoint, dtype_of(inp.type))
    accumulators = {
        np.float32: _accumulate(kind, params, np.float32),
        np.float64: _accumulate(kind, params, np.float64),
    }
    # beyond 2**53 (unreachable in practice): int32 tap sums for depthwise, as before
    fallback = np.int32 if kind is DEPTHWISE else np.float64
    accumulators[fallback] = _accumulate(kind, params, fallback)
    preps = {
        dt: _prepared_weights(kind, params, dt, filt.zeroPoint)
        for dt in (np.float32, np.float64, fallback)
    }
    zp_in, nchw = inp.zeroPoint, params.nchw
    want_jit = kernels.jit_wanted()
    jit = kind is DEPTHWISE and want_jit
    im2col = kind is CONV and want_jit  # accumulates in float32 or float64 (fallback)
    jit_requant = _jit_requantizer(frequant, mult, exp, out.zeroPoint, lo, hi) if want_jit else None

    def plan(w: np.ndarray, b: np.ndarray):
        """(accumulation dtype, weights in it, bias as float64, float requant exact?)"""
        centered = _centered_f32(w, filt.zeroPoint)
        b64 = b.astype(np.float64)

        def decide(sums):
            bounds = _qexact.channel_bounds(x_bound, sums)
            acc_dtype = _qexact.accumulation_dtype(bounds) or fallback
            exact = acc_dtype is not fallback or fallback is np.float64
            return acc_dtype, exact and bool(np.all(bounds + np.abs(b64) < limit))

        # the cheap bound first (one fused pass); the exact sums only when it does not
        # prove the fast path
        acc_dtype, fast = decide(_norm_bound(kind, centered))
        if acc_dtype is not np.float32 or not fast:
            acc_dtype, fast = decide(_abs_sums(kind, centered))
        if acc_dtype is np.float32:  # the centered filter is the float32 one: no second pass
            wm = _prepared_weights(kind, params, f32)(centered)
        else:
            wm = preps[acc_dtype](w)
        return acc_dtype, wm, b64, fast

    w_const, b_const = ctx.constant(1), ctx.constant(2)
    fixed = None if w_const is None or b_const is None else plan(w_const, b_const)
    # with a constant bias the compiled requantizer's per-channel arguments are made once,
    # at the first execution (numba is imported then, never at preparation)
    fixed_requant: list = []

    def compiled_requant(b: np.ndarray, b64: np.ndarray, fast: bool):
        if jit_requant is None:
            return None
        if fixed is None:
            return jit_requant(b, b64, fast)
        if not fixed_requant:
            fixed_requant.append(jit_requant(b, b64, fast))
        return fixed_requant[0]

    def centered(acc_dtype):
        """The numpy slabs of the input centered in ``acc_dtype`` (one pass: the cast
        happens inside the subtraction); zero padding is then the input zero point.
        A CONV_2D with numba centers in its compiled im2col instead."""

        def slabs(x, wm, w_shape, geo, target):
            if im2col:
                fill = _jit_im2col(params, x, acc_dtype(zp_in), w_shape, geo)
                if fill is not None:
                    return _conv_slabs(x, wm, w_shape, params, geo, target, fill, zp_in)
            xc = np.subtract(x, acc_dtype(zp_in), dtype=acc_dtype)
            return accumulators[acc_dtype](xc, wm, w_shape, geo, target)

        return slabs

    def kernel(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        xn = to_nhwc(x, nchw)
        geo = geometry(xn.shape, w.shape, b.shape)
        acc_dtype, wm, b64, fast = fixed if fixed is not None else plan(w, b)
        module = kernels.jit_module() if jit else None
        target = _Target(None, out_channels(kind, w.shape), acc_dtype)
        if module is not None:  # centers the input itself
            run = _jit_depthwise_slabs(module, params, zp_in, centered(acc_dtype))
        else:
            run = centered(acc_dtype)
        slabs = run(xn, wm, w.shape, geo, target)
        _, _, oh, ow = geo
        out = np.empty((xn.shape[0], oh, ow, out_channels(kind, w.shape)), dtype=dtype)
        flat = out.reshape(-1, out.shape[3])
        b64_int = None if fast else b.astype(np.int64)
        # each slab requantized into the output while its accumulators are in cache
        requant_slab = compiled_requant(b, b64, fast)
        for p0, p1, acc in slabs:
            if requant_slab is not None and requant_slab(acc, flat[p0:p1]):
                continue
            if fast:
                frequant(acc, b64, out=flat[p0:p1])
            else:
                flat[p0:p1] = requant(acc.astype(np.int64) + b64_int)
        return from_nhwc(out, nchw)

    return kernel


def _execute(kind: Kind) -> Callable[[OpContext], Callable[..., np.ndarray]]:
    def execute(ctx: OpContext) -> Callable[..., np.ndarray]:
        params = _params(ctx, kind)
        if ctx.primary_type in QUANT8:
            return _quant_kernel(ctx, kind, params)
        return _float_kernel(ctx, kind, params)

    return execute


def _register(op: OperationType, kind: Kind, types: dict) -> OperationDef:
    return register(
        OperationDef(
            op,
            inputs=kind.signature.args(BASE_ARGS),
            outputs=(Arg("output"),),
            layout=kind.signature.layout_index,
            types=types,
            execute=_execute(kind),
            prepare=_prepare(kind),
            validate=_validate(kind),
        )
    )


CONV_2D = _register(OperationType.CONV_2D, CONV, TYPES)
DEPTHWISE_CONV_2D = _register(OperationType.DEPTHWISE_CONV_2D, DEPTHWISE, TYPES)
GROUPED_CONV_2D = _register(
    OperationType.GROUPED_CONV_2D,
    GROUPED,
    {**TYPES, _T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_QUANT8_ASYMM: _V.V1_2},
)

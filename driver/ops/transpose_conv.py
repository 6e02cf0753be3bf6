"""TRANSPOSE_CONV_2D: the gradient of CONV_2D with respect to its input.

Two forms, as the reference:

- explicit (11 inputs): input, filter, bias, padding left/right/top/bottom,
  stride width/height, activation, layout;
- implicit (9 inputs): input, filter, bias, the output shape (a TENSOR_INT32
  of 4 values, used only to derive the padding), padding code, strides,
  activation, layout.

The output is ``H * stride + KH - stride - top - bottom`` high (and likewise
wide); the bottom/right padding may be negative (the implicit SAME padding
makes it fit the last stride). The filter is ``[O, KH, KW, C]``.

The kernel multiplies the whole input ``[N*H*W, C]`` by the filter as one
``[C, KH*KW*O]`` matrix (one BLAS matmul), then scatters each filter tap's
contribution into the strided output positions it reaches: one vectorized
add per tap (never a loop over pixels), and crops the padding away. With
numba, a float output is gathered instead (``_jit_conv.transpose_conv_float``:
each output pixel sums the taps that land on it, adds the bias and clamps, in
one pass and numpy's order).
Quantized inputs accumulate exactly (float64 matmul of centered values) and
requantize per output channel as CONV_2D.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import kernels, quant
from nnhal.driver.ops._conv_util import (
    PADDING_CODES,
    SAME,
    VALID,
    activation_bounds,
    channel_scales,
    check_bias_scale,
    explicit_padding,
    float_clamp,
    last_shape_cache,
    multipliers,
    requantizer,
)
from nnhal.driver.ops._operand_rules import (
    ACTIVATIONS,
    QUANT8,
    check_rank,
    dtype_of,
    runtime_failure,
)
from nnhal.driver.ops.conv import bias_types, filter_types
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
_I, _B = _T.INT32, _T.BOOL

_EXPLICIT = (
    "padding_left",
    "padding_right",
    "padding_top",
    "padding_bottom",
    "stride_width",
    "stride_height",
    "activation",
    "layout",
)
_IMPLICIT = ("output_shape", "padding", "stride_width", "stride_height", "activation", "layout")


def _where(ctx: OpContext) -> dict[str, int]:
    """Parameter name -> input index for the form in use (checked types)."""
    n = len(ctx.inputs)
    if n not in (9, 11):
        raise ctx.fail(f"expected 9 (implicit padding) or 11 (explicit padding) inputs, got {n}")
    names = _IMPLICIT if n == 9 else _EXPLICIT
    where = {name: 3 + i for i, name in enumerate(names)}
    for name, i in where.items():
        info = ctx.inputs[i]
        want = _T.TENSOR_INT32 if name == "output_shape" else _B if name == "layout" else _I
        if info.omitted:
            raise ctx.fail(f"input {i} ({name}) has no value; it must be {want.name}")
        if info.type != want:
            raise ctx.fail(
                f"input {i} ({name}) has type {type_name(info.type)}; it must be {want.name}"
            )
    return where


class _Params:
    """Scalars of one TRANSPOSE_CONV_2D, checked; padding resolved per shape."""

    def __init__(self, ctx: OpContext, where: dict[str, int]) -> None:
        def get(name: str, default: int = 0) -> int:
            return int(ctx.scalar(where[name])) if name in where else default

        self.explicit = "padding_left" in where
        self.pads = tuple(get(n) for n in _EXPLICIT[:4])
        self.code = get("padding", VALID)
        self.stride = (get("stride_width"), get("stride_height"))
        self.activation = get("activation")
        self.nchw = layout_is_nchw(ctx)
        if self.explicit:
            for name in ("padding_left", "padding_top"):
                value = self.pads[_EXPLICIT.index(name)]
                if value < 0:
                    raise ctx.fail(f"input {where[name]} ({name}) is {value}; it must be >= 0")
        elif self.code not in (SAME, VALID):
            raise ctx.fail(
                f"input {where['padding']} (padding) is {self.code}; supported: {PADDING_CODES}"
            )
        for name, value in zip(("stride_width", "stride_height"), self.stride):
            if value < 1:
                raise ctx.fail(f"input {where[name]} ({name}) is {value}; it must be >= 1")
        if not 0 <= self.activation <= 3:
            raise ctx.fail(
                f"input {where['activation']} (activation) has value {self.activation}; "
                f"supported: {ACTIVATIONS}"
            )

    def geometry(self, h: int, w: int, kh: int, kw: int, shape, fail) -> tuple[int, int, int, int]:
        """(top, left, OH, OW); ``shape`` is the output_shape value (implicit form)."""
        sw, sh = self.stride
        if self.explicit:
            left, right, top, bottom = self.pads
        else:
            values = [int(v) for v in np.asarray(shape).reshape(-1)]
            if len(values) != 4:
                raise fail(f"input 3 (output_shape) has {len(values)} values; it must have 4")
            _, out_h, out_w, _ = nhwc_dims(values, self.nchw)
            left, right = explicit_padding(out_w, sw, 1, kw, self.code, transpose=True)
            top, bottom = explicit_padding(out_h, sh, 1, kh, self.code, transpose=True)
        oh = h * sh + kh - sh - top - bottom
        ow = w * sw + kw - sw - left - right
        if oh < 1 or ow < 1:
            raise fail(
                f"output would be {oh} x {ow}: input {h} x {w}, filter {kh} x {kw}, strides "
                f"{sh} x {sw}, padding top/bottom {top}/{bottom}, left/right {left}/{right}"
            )
        return top, left, oh, ow


def _check_channels(x_c: int, w_shape, b_len: int, fail) -> None:
    o, _, _, w_c = w_shape
    if x_c and w_c and x_c != w_c:
        raise fail(f"input 1 (filter) has {w_c} input channels (axis 3); the input has {x_c}")
    if o and b_len and o != b_len:
        raise fail(f"input 2 (bias) has {b_len} elements; the filter has {o} output channels")


def _validate(ctx: OpContext) -> HalVersion | None:
    where = _where(ctx)
    check_rank(ctx, 0, exact=4)
    check_rank(ctx, 1, exact=4)
    check_rank(ctx, 2, exact=1)
    if "output_shape" in where:
        shape = ctx.inputs[3].dimensions
        if shape is not None and (len(shape) != 1 or shape[0] not in (0, 4)):
            raise ctx.fail(f"input 3 (output_shape) has shape {list(shape)}; it must be [4]")
    scales = channel_scales(ctx, 1, 0)
    if ctx.primary_type in QUANT8 and scales is None:
        check_bias_scale(ctx)
    _Params(ctx, where)
    return None


def _prepare(ctx: OpContext) -> list[Shape]:
    where = _where(ctx)
    params = _Params(ctx, where)
    n, h, w, c = nhwc_dims(ctx.inputs[0].dimensions, params.nchw) or (0, 0, 0, 0)
    w_shape = ctx.inputs[1].dimensions or (0, 0, 0, 0)
    b_len = (ctx.inputs[2].dimensions or (0,))[0]
    _check_channels(c, w_shape, b_len, ctx.fail)
    o, kh, kw, _ = w_shape
    shape = ctx.constant(3) if "output_shape" in where else None
    oh = ow = 0
    if h and w and kh and kw and (params.explicit or shape is not None):
        _, _, oh, ow = params.geometry(h, w, kh, kw, shape, ctx.fail)
    return [layout_dims(n, oh, ow, o, params.nchw)]


def _scatter(cols: np.ndarray, stride, top: int, left: int, oh: int, ow: int) -> np.ndarray:
    """Sum the taps of cols [N, H, W, KH, KW, O] into the cropped [N, OH, OW, O] output."""
    n, h, w, kh, kw, o = cols.shape
    sw, sh = stride
    full_h = max((h - 1) * sh + kh, top + oh)
    full_w = max((w - 1) * sw + kw, left + ow)
    acc = np.zeros((n, full_h, full_w, o), dtype=cols.dtype)
    span_h, span_w = (h - 1) * sh + 1, (w - 1) * sw + 1
    for i in range(kh):
        for j in range(kw):
            acc[:, i : i + span_h : sh, j : j + span_w : sw] += cols[:, :, :, i, j]
    return np.ascontiguousarray(acc[:, top : top + oh, left : left + ow])


def _matrix(w: np.ndarray, dtype, offset: int = 0) -> np.ndarray:
    """[O, KH, KW, C] filter -> [C, KH*KW*O] (centered by ``offset``)."""
    m = w.astype(dtype)
    if offset:
        m -= dtype(offset)
    return np.ascontiguousarray(m.transpose(3, 1, 2, 0).reshape(w.shape[3], -1))


def _execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    where = _where(ctx)
    params = _Params(ctx, where)
    quantized = ctx.primary_type in QUANT8
    acc_dtype = np.float64 if quantized else f32
    w_const, b_const = ctx.constant(1), ctx.constant(2)
    inp, filt, out = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    w_offset = filt.zeroPoint if quantized else 0
    wm_const = None if w_const is None else _matrix(w_const, acc_dtype, w_offset)
    b_const = None if b_const is None else b_const.astype(np.int64 if quantized else f32)
    nchw, stride = params.nchw, params.stride

    def fail(message: str) -> Exception:
        return runtime_failure(ctx, message)

    def compute(x_shape, w_shape, b_shape, shape_key):
        _, h, w, c = x_shape
        _check_channels(c, w_shape, b_shape[0], fail)
        _, kh, kw, _ = w_shape
        return params.geometry(h, w, kh, kw, shape_key, fail)

    geometry = last_shape_cache(compute)

    def products(x: np.ndarray, w: np.ndarray, b: np.ndarray, shape):
        """(cols [N, H, W, KH, KW, O]: each input pixel times the filter, in one matmul;
        the geometry (top, left, OH, OW))."""
        xn = to_nhwc(x, nchw)
        key = None if shape is None else tuple(shape.reshape(-1).tolist())
        geo = geometry(xn.shape, w.shape, b.shape, key)
        n, h, wd, c = xn.shape
        o, kh, kw, _ = w.shape
        if quantized:
            xc = xn.astype(acc_dtype)
            xc -= acc_dtype(inp.zeroPoint)
        else:
            xc = np.ascontiguousarray(xn, dtype=acc_dtype)
        wm = wm_const if wm_const is not None else _matrix(w, acc_dtype, w_offset)
        return (xc.reshape(n * h * wd, c) @ wm).reshape(n, h, wd, kh, kw, o), geo

    def accumulate(x: np.ndarray, w: np.ndarray, b: np.ndarray, shape) -> np.ndarray:
        cols, (top, left, oh, ow) = products(x, w, b, shape)
        return _scatter(cols, stride, top, left, oh, ow)

    if quantized:
        dtype = dtype_of(out.type)
        scales = channel_scales(ctx, 1, 0)
        if scales is None:
            scales = np.array([filt.scale], dtype=f32)
        mult, exp = multipliers(inp.scale, scales, out.scale)
        lo, hi = quant.activation_range(params.activation, out.scale, out.zeroPoint, dtype)
        requant = requantizer(mult, exp, out.zeroPoint, lo, hi, dtype)

        def finish(acc: np.ndarray, b: np.ndarray) -> np.ndarray:
            acc = acc.astype(np.int64)
            acc += b_const if b_const is not None else b.astype(np.int64)
            return requant(acc)

    else:
        out_dtype = dtype_of(out.type)
        clamp = float_clamp(params.activation)

        def finish(acc: np.ndarray, b: np.ndarray) -> np.ndarray:
            acc += b_const if b_const is not None else b.astype(f32)
            if clamp is not None:
                clamp(acc)
            return acc.astype(out_dtype, copy=False)

        if kernels.jit_wanted():
            compiled = _jit_float(params, products, b_const, out_dtype)

            def jit_implicit(x, w, b, shape):
                y = compiled(x, w, b, shape)
                if y is None:  # numba failed: numpy's scatter
                    y = finish(accumulate(x, w, b, shape), b)
                return from_nhwc(y, nchw)

            if "output_shape" in where:
                return jit_implicit
            return lambda x, w, b: jit_implicit(x, w, b, None)

    if "output_shape" in where:

        def implicit(x, w, b, shape):
            return from_nhwc(finish(accumulate(x, w, b, shape), b), nchw)

        return implicit

    def explicit(x, w, b):
        return from_nhwc(finish(accumulate(x, w, b, None), b), nchw)

    return explicit


def _jit_float(params: _Params, products, b_const, out_dtype):
    """(x, w, b, output shape or None) -> the float output NHWC from ``products`` (the
    one matmul) and the compiled ``transpose_conv_float`` (bias and clamp fused), or
    None when numba failed (numpy's scatter then runs, as from then on for every
    kernel)."""
    sw, sh = params.stride
    lo, hi = activation_bounds(params.activation)

    def run(x, w, b, shape) -> np.ndarray | None:
        module = kernels.jit_module()
        if module is None:
            return None
        cols, (top, left, oh, ow) = products(x, w, b, shape)
        bias = b_const if b_const is not None else np.ascontiguousarray(b, dtype=f32)
        y = np.empty((cols.shape[0], oh, ow, cols.shape[5]), dtype=f32)
        try:
            module.transpose_conv_float(cols, sh, sw, top, left, bias, lo, hi, y)
        except Exception as exc:  # noqa: BLE001 (a compile failure: numpy from now on)
            kernels.run_failed(exc)
            return None
        return y.astype(out_dtype, copy=False)

    return run


TRANSPOSE_CONV_2D = register(
    OperationDef(
        OperationType.TRANSPOSE_CONV_2D,
        inputs=(
            Arg("input"),
            Arg("filter", filter_types),
            Arg("bias", bias_types),
            Arg("output_shape|padding_left", frozenset({_T.TENSOR_INT32, _I})),
            Arg("padding|padding_right", frozenset({_I})),
            Arg("stride_width|padding_top", frozenset({_I})),
            Arg("stride_height|padding_bottom", frozenset({_I})),
            Arg("activation|stride_width", frozenset({_I})),
            Arg("layout|stride_height", frozenset({_I, _B})),
            Arg("activation", frozenset({_I}), optional=True),
            Arg("layout", frozenset({_B}), optional=True),
        ),
        outputs=(Arg("output"),),
        layout=lambda ctx: _where(ctx)["layout"],
        types={
            _T.TENSOR_FLOAT32: _V.V1_2,
            _T.TENSOR_FLOAT16: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_execute,
        prepare=_prepare,
        validate=_validate,
    )
)

"""Convolution, pooling, Gemm/MatMul, BatchNormalization, LRN (float; the quantized
forms are in ``ops_quant``).

Layout: ONNX is NCHW. NNAPI's 2-D operations take a layout flag (API 29+)
that makes them read and write NCHW, so the activations are never
transposed; the filters are transposed once, at import, from ONNX's
[O, I, kH, kW] to NNAPI's [O, kH, kW, I] (CONV_2D, GROUPED_CONV_2D) or
[1, kH, kW, O] (DEPTHWISE_CONV_2D). ONNX Runtime's execution provider
instead transposes activations to NHWC; both feed NNAPI the same
arithmetic. Weights must be constants (as the execution provider requires).
"""

from __future__ import annotations

import math

import numpy as np

from nnhal.types import OperandType, OperationType

from . import types_map as tm
from .errors import Unsupported
from .node import Node
from .registry import mapping

T = OperandType
O = OperationType


def explicit_pads(n: Node, in_hw, kernel, strides, dilations) -> list[int]:
    """[left, right, top, bottom] from ONNX pads / auto_pad."""
    auto = n.attr("auto_pad", "NOTSET")
    if auto == "VALID":
        return [0, 0, 0, 0]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for size, k, s, d in zip(in_hw, kernel, strides, dilations):
            o = math.ceil(size / s)
            total = max((o - 1) * s + (k - 1) * d + 1 - size, 0)
            small = total // 2
            out.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
        (top, bottom), (left, right) = out
        return [left, right, top, bottom]
    pads = n.attr("pads") or [0, 0, 0, 0]
    top, left, bottom, right = pads
    return [left, right, top, bottom]


def _spatial(n: Node, k: int = 0) -> tuple[int, int]:
    shape = n.shape(k)
    if len(shape) != 4:
        raise Unsupported(f"{n.op_type} on a rank-{len(shape)} input (NNAPI has 2-D only)")
    return shape[2], shape[3]


def conv_params(n: Node, w_shape):
    kernel = list(n.attr("kernel_shape") or w_shape[2:])
    strides = list(n.attr("strides") or [1, 1])
    dil = list(n.attr("dilations") or [1, 1])
    pads = explicit_pads(n, _spatial(n), kernel, strides, dil)
    return kernel, strides, dil, pads


def emit_conv(n: Node, x: int, w: np.ndarray, bias: int, out: int, *, w_code, w_scale=0.0,
              w_zp=0, channel_quant=None) -> None:  # fmt: skip
    """CONV_2D / DEPTHWISE_CONV_2D / GROUPED_CONV_2D (NCHW flag) of input operand ``x``."""
    if w.ndim != 4:
        raise Unsupported(f"{n.op_type} with a rank-{w.ndim} filter (NNAPI has 2-D only)")
    _, strides, dil, pads = conv_params(n, w.shape)
    group = int(n.attr("group", 1))
    c_in = n.shape(0)[1]
    c_out = w.shape[0]
    sb = n.scope.sb
    pad_ops = [n.scalar_i32(p) for p in pads]
    stride_ops = [n.scalar_i32(strides[1]), n.scalar_i32(strides[0])]
    dil_ops = [n.scalar_i32(dil[1]), n.scalar_i32(dil[0])]
    act, nchw = n.scalar_i32(0), n.bool_scalar(True)
    if group == 1:
        filt = np.ascontiguousarray(w.transpose(0, 2, 3, 1))
        f = sb.constant(w_code, filt, filt.shape, w_scale, w_zp, channel_quant=channel_quant)
        n.op(O.CONV_2D, [x, f, bias, *pad_ops, *stride_ops, act, nchw, *dil_ops], [out])
    elif group == c_in and w.shape[1] == 1:
        filt = np.ascontiguousarray(w.transpose(1, 2, 3, 0))
        if channel_quant is not None:
            channel_quant = (channel_quant[0], 3)
        f = sb.constant(w_code, filt, filt.shape, w_scale, w_zp, channel_quant=channel_quant)
        mult = n.scalar_i32(c_out // c_in)
        n.op(O.DEPTHWISE_CONV_2D,
             [x, f, bias, *pad_ops, *stride_ops, mult, act, nchw, *dil_ops], [out])  # fmt: skip
    else:
        if dil != [1, 1]:
            raise Unsupported("grouped Conv with dilations (GROUPED_CONV_2D has none)")
        filt = np.ascontiguousarray(w.transpose(0, 2, 3, 1))
        f = sb.constant(w_code, filt, filt.shape, w_scale, w_zp, channel_quant=channel_quant)
        n.op(O.GROUPED_CONV_2D,
             [x, f, bias, *pad_ops, *stride_ops, n.scalar_i32(group), act, nchw],
             [out])  # fmt: skip


@mapping("Conv")
def conv(n: Node) -> None:
    x = n.t(0)
    if x.elem not in (tm.FLOAT, tm.FLOAT16):
        raise Unsupported(f"Conv on {tm.elem_name(x.elem)}")
    w = n.const(1, "W").astype(np.float16 if x.elem == tm.FLOAT16 else np.float32)
    code = x.nnapi_type()
    b = n.const(2, "B") if n.has(2) else np.zeros(w.shape[0], w.dtype)
    bias = n.scope.sb.constant(code, b.astype(w.dtype), (w.shape[0],))
    emit_conv(n, n.i(0), w, bias, n.out(0, like=0), w_code=code)


def pool_params(n: Node):
    if any(d != 1 for d in (n.attr("dilations") or [1, 1])):
        raise Unsupported("pooling with dilations")
    kernel = list(n.attr("kernel_shape"))
    if len(kernel) != 2:
        raise Unsupported(f"{len(kernel)}-D pooling (NNAPI has 2-D only)")
    strides = list(n.attr("strides") or [1, 1])
    pads = explicit_pads(n, _spatial(n), kernel, strides, [1, 1])
    if n.attr("ceil_mode", 0):
        pads = _ceil_pads(n, kernel, strides, pads)
    return kernel, strides, pads


def _ceil_pads(n: Node, kernel, strides, pads) -> list[int]:
    """ceil_mode=1: NNAPI pools round down, so the last (partial) window ONNX adds gets
    room as extra padding at the end, which NNAPI's pools leave out of max and average."""
    out_hw = n.out_static(0)[2:]
    (h, w), (left, right, top, bottom) = _spatial(n), pads
    extra = [max(0, (o - 1) * s + k - (size + b + e))
             for o, s, k, size, b, e in zip(out_hw, strides, kernel, (h, w), (top, left),
                                            (bottom, right))]  # fmt: skip
    if any(extra) and n.attr("count_include_pad", 0):
        raise Unsupported("ceil_mode=1 with count_include_pad=1 (the extra cells would count)")
    return [left, right + extra[1], top, bottom + extra[0]]


def emit_pool(n: Node, op, x: int, out: int, kernel, strides, pads) -> None:
    ins = [x, *[n.scalar_i32(p) for p in pads], n.scalar_i32(strides[1]),
           n.scalar_i32(strides[0]), n.scalar_i32(kernel[1]), n.scalar_i32(kernel[0]),
           n.scalar_i32(0), n.bool_scalar(True)]  # fmt: skip
    n.op(op, ins, [out])


@mapping("MaxPool", "AveragePool")
def pool(n: Node) -> None:
    if len(n.proto.output) > 1 and n.proto.output[1]:
        raise Unsupported("MaxPool's Indices output")
    if n.attr("storage_order", 0):
        raise Unsupported("storage_order=1")
    kernel, strides, pads = pool_params(n)
    if n.op_type == "AveragePool" and n.attr("count_include_pad", 0) and any(pads):
        raise Unsupported("count_include_pad=1 with padding (NNAPI averages valid cells only)")
    op = O.MAX_POOL_2D if n.op_type == "MaxPool" else O.AVERAGE_POOL_2D
    emit_pool(n, op, n.i(0), n.out(0, like=0), kernel, strides, pads)


@mapping("GlobalAveragePool", "GlobalMaxPool")
def global_pool(n: Node) -> None:
    h, w = _spatial(n)
    op = O.MAX_POOL_2D if n.op_type == "GlobalMaxPool" else O.AVERAGE_POOL_2D
    emit_pool(n, op, n.i(0), n.out(0, like=0), [h, w], [1, 1], [0, 0, 0, 0])


def fully_connected(n: Node, x: int, x_shape, w: np.ndarray, bias: np.ndarray, code,
                    k_out: int = 0) -> None:  # fmt: skip
    """FULLY_CONNECTED of operand ``x`` with weights ``w`` [units, in] (float)."""
    sb = n.scope.sb
    wt = sb.constant(code, np.ascontiguousarray(w), w.shape)
    bt = sb.constant(code, np.ascontiguousarray(bias), bias.shape)
    out_shape = n.out_shape(k_out)
    if out_shape is not None and len(out_shape) == 2 and x_shape is not None and len(x_shape) == 2:
        n.op(O.FULLY_CONNECTED, [x, wt, bt, n.scalar_i32(0)], [n.out(k_out, like=0)])
        return
    if x_shape is not None and len(x_shape) == 1:
        tmp_in = n.scope.temp(code, (1, x_shape[0]))
        n.op(O.RESHAPE, [x, n.scope.vector([1, x_shape[0]])], [tmp_in])
        x = tmp_in
    tmp = n.scope.temp(code, None)
    n.op(O.FULLY_CONNECTED, [x, wt, bt, n.scalar_i32(0)], [tmp])
    n.reshape_to_output(tmp, k_out)


@mapping("Gemm")
def gemm(n: Node) -> None:
    a = n.t(0)
    if a.elem not in (tm.FLOAT, tm.FLOAT16):
        raise Unsupported(f"Gemm on {tm.elem_name(a.elem)}")
    dtype = np.float16 if a.elem == tm.FLOAT16 else np.float32
    b = n.const(1, "B").astype(np.float64)
    w = b if n.attr("transB", 0) else b.T  # [N, K]
    w = w * float(n.attr("alpha", 1.0))
    units = w.shape[0]
    beta = float(n.attr("beta", 1.0))
    bias = np.zeros(units)
    extra = None
    if n.has(2):
        c = n.t(2)
        if (
            c.const is not None
            and c.const.size in (1, units)
            and (c.const.ndim <= 1 or c.const.shape[0] == 1)
        ):
            bias = np.broadcast_to(c.const.reshape(-1).astype(np.float64) * beta, (units,))
        else:
            extra = c
    x = n.i(0)
    x_shape = a.shape
    if n.attr("transA", 0):
        tshape = None if a.shape is None else tuple(reversed(a.shape))
        tmp = n.scope.temp(a.nnapi_type(), tshape)
        n.op(O.TRANSPOSE, [x, n.scope.vector([1, 0])], [tmp])
        x, x_shape = tmp, tshape
    code = a.nnapi_type()
    if extra is None:
        fully_connected(n, x, x_shape, w.astype(dtype), bias.astype(dtype), code)
        return
    c_op = n.i(2)
    if beta != 1.0:
        scaled = n.scope.temp(code, extra.shape)
        n.op(O.MUL, [c_op, sb_const(n, code, beta), n.scalar_i32(0)], [scaled])
        c_op = scaled
    tmp = n.scope.temp(code, n.out_shape(0))
    sb = n.scope.sb
    wt = sb.constant(code, np.ascontiguousarray(w.astype(dtype)), w.shape)
    bt = sb.constant(code, bias.astype(dtype), (units,))
    n.op(O.FULLY_CONNECTED, [x, wt, bt, n.scalar_i32(0)], [tmp])
    n.op(O.ADD, [tmp, c_op, n.scalar_i32(0)], [n.out(0, like=0)])


def sb_const(n: Node, code: int, value: float) -> int:
    """A one-element tensor constant of type ``code`` (broadcasts in MUL/ADD)."""
    from . import types_map

    return n.scope.sb.constant(code, np.array([value], types_map.NP_DTYPE[code]), (1,))


@mapping("MatMul")
def matmul(n: Node) -> None:
    a = n.t(0)
    if a.elem not in (tm.FLOAT, tm.FLOAT16):
        raise Unsupported(f"MatMul on {tm.elem_name(a.elem)}")
    b = n.t(1)
    dtype = np.float16 if a.elem == tm.FLOAT16 else np.float32
    if b.const is not None and b.const.ndim in (1, 2):
        # a rank-1 B is one output unit whose axis the output drops (reshape_to_output)
        w = b.const.reshape(1, -1) if b.const.ndim == 1 else b.const.T
        w = np.ascontiguousarray(w.astype(dtype))
        fully_connected(n, n.i(0), a.shape, w, np.zeros(w.shape[0], dtype), a.nnapi_type())
        return
    _matmul_by_batch(n, a, b, dtype)


#: batched products are split into at most this many FULLY_CONNECTED operations
MAX_BATCH = 64


def _matmul_by_batch(n: Node, a, b, dtype) -> None:
    """A [..., M, K] x B [..., K, N] with static shapes, B constant or not: NNAPI 1.3 has no
    BATCH_MATMUL, so each (broadcast) batch is one FULLY_CONNECTED of an A slice with that
    batch's B transposed to [N, K] (a constant, or TRANSPOSE at run time), the results
    concatenated and reshaped to the output."""
    sa, sb_ = n.shape(0), n.shape(1)
    a2 = (1, *sa) if len(sa) == 1 else tuple(sa)  # rank 1: one row, dropped in the output
    b2 = (*sb_, 1) if len(sb_) == 1 else tuple(sb_)  # rank 1: one column, dropped
    (m, k), (k2, units) = a2[-2:], b2[-2:]
    if k != k2:
        raise Unsupported(f"MatMul of {list(sa)} and {list(sb_)}: inner dimensions differ")
    batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    count = int(np.prod(batch, dtype=np.int64)) if batch else 1
    if count > MAX_BATCH:
        raise Unsupported(f"MatMul over {count} batches (split into FULLY_CONNECTED up to"
                          f" {MAX_BATCH}; NNAPI 1.3 has no BATCH_MATMUL)")  # fmt: skip
    code = a.nnapi_type()
    scope = n.scope
    a_rows = _as_stack(n, 0, a, a2, m, k)
    b_const = None if b.const is None else np.asarray(b.const, np.float64).reshape(-1, k, units)
    b_rows = None if b_const is not None else _as_stack(n, 1, b, b2, k, units)
    a_batch, b_batch = a2[:-2], b2[:-2]
    bias = scope.sb.constant(code, np.zeros(units, dtype), (units,))
    a_slices: dict[int, int] = {}
    pieces = []
    for idx in np.ndindex(*batch) if batch else [()]:
        fa = _flat(idx, a_batch)
        fb = _flat(idx, b_batch)
        if fa not in a_slices:
            a_slices[fa] = _slice(n, code, a_rows, fa, (m, k))
        if b_const is not None:
            w = np.ascontiguousarray(b_const[fb].T.astype(dtype))
            w_op = scope.sb.constant(code, w, w.shape)
        else:
            col = _slice(n, code, b_rows, fb, (k, units))
            w_op = scope.temp(code, (units, k))
            n.op(O.TRANSPOSE, [col, scope.vector([1, 0])], [w_op])
        piece = scope.temp(code, (m, units))
        n.op(O.FULLY_CONNECTED, [a_slices[fa], w_op, bias, n.scalar_i32(0)], [piece])
        pieces.append(piece)
    if len(pieces) == 1:
        n.reshape_to_output(pieces[0])
        return
    stacked = scope.temp(code, (count * m, units))
    n.op(O.CONCATENATION, [*pieces, n.scalar_i32(0)], [stacked])
    n.reshape_to_output(stacked)


def _as_stack(n: Node, k: int, t, shape2: tuple, rows: int, cols: int) -> int:
    """Input ``k`` as a [batches, rows, cols] operand (a RESHAPE unless it is one already)."""
    stack = (int(np.prod(shape2[:-2], dtype=np.int64)) if len(shape2) > 2 else 1, rows, cols)
    if tuple(t.shape) == stack:
        return n.i(k)
    out = n.scope.temp(t.nnapi_type(), stack, t.scale, t.zero_point)
    n.op(O.RESHAPE, [n.i(k), n.scope.vector(list(stack))], [out])
    return out


def _flat(idx: tuple, dims: tuple) -> int:
    """The flat batch number in ``dims`` of broadcast batch index ``idx`` (axes of 1 repeat)."""
    idx = idx[len(idx) - len(dims) :] if dims else ()
    flat = 0
    for i, d in zip(idx, dims):
        flat = flat * d + (0 if d == 1 else i)
    return flat


def _slice(n: Node, code: int, stack: int, row: int, shape: tuple, scale: float = 0.0,
           zp: int = 0) -> int:  # fmt: skip
    """Batch ``row`` of a [batches, r, c] operand, as an [r, c] operand (SLICE + RESHAPE)."""
    scope = n.scope
    part = scope.temp(code, (1, *shape), scale, zp)
    n.op(O.SLICE, [stack, scope.vector([row, 0, 0]), scope.vector([1, *shape])], [part])
    out = scope.temp(code, shape, scale, zp)
    n.op(O.RESHAPE, [part, scope.vector(list(shape))], [out])
    return out


@mapping("BatchNormalization")
def batch_norm(n: Node) -> None:
    if n.attr("training_mode", 0) or len([o for o in n.proto.output if o]) > 1:
        raise Unsupported("BatchNormalization in training mode")
    x = n.t(0)
    if x.elem not in (tm.FLOAT, tm.FLOAT16):
        raise Unsupported(f"BatchNormalization on {tm.elem_name(x.elem)}")
    scale, bias, mean, var = (n.const(k).astype(np.float64) for k in range(1, 5))
    s = scale / np.sqrt(var + float(n.attr("epsilon", 1e-5)))
    t = bias - mean * s
    rank = n.rank(0)
    shape = (s.size,) + (1,) * (rank - 2)
    dtype = np.float16 if x.elem == tm.FLOAT16 else np.float32
    code = x.nnapi_type()
    sb = n.scope.sb
    mul = n.scope.temp(code, x.shape)
    n.op(O.MUL, [n.i(0), sb.constant(code, s.reshape(shape).astype(dtype), shape),
                 n.scalar_i32(0)], [mul])  # fmt: skip
    n.op(O.ADD, [mul, sb.constant(code, t.reshape(shape).astype(dtype), shape),
                 n.scalar_i32(0)], [n.out(0, like=0)])  # fmt: skip


@mapping("LRN")
def lrn(n: Node) -> None:
    size = int(n.attr("size"))
    if size % 2 == 0:
        raise Unsupported("LRN with an even size (ONNX's window is then asymmetric)")
    x = n.t(0)
    if x.elem != tm.FLOAT:
        raise Unsupported(f"LRN on {tm.elem_name(x.elem)}")
    ins = [n.i(0), n.scalar_i32((size - 1) // 2), n.scalar_f(n.attr("bias", 1.0)),
           n.scalar_f(n.attr("alpha", 1e-4) / size), n.scalar_f(n.attr("beta", 0.75)),
           n.scalar_i32(1)]  # fmt: skip
    n.op(O.LOCAL_RESPONSE_NORMALIZATION, ins, [n.out(0, like=0)])

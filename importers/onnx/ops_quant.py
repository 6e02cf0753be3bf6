"""Quantized operators: QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul, and
ONNX Runtime's com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid, QLinearAveragePool.

8-bit ONNX tensors are NNAPI quantized tensors: their scale and zero point
come from the (constant, per-tensor) parameters of the Q/DQ/QLinear nodes
around them, gathered before conversion (``quant_params``). As in ONNX
Runtime's execution provider: per-tensor parameters; QLinearConv and
QLinearMatMul weights must be constants; int8 weights under a uint8 input
are shifted by 128 (weights and zero point together, exact) because NNAPI
wants the filter of an asymmetric input in the same type, unless they are
symmetric (zero point 0), where QLinearConv uses a per-channel filter.
"""

from __future__ import annotations

import numpy as np

from nnhal.types import OperandType, OperationType

from . import types_map as tm
from .errors import Unsupported
from .node import Node
from .registry import mapping

T = OperandType
O = OperationType


def _scalar(v, what: str) -> float:
    arr = np.asarray(v)
    if arr.size != 1:
        raise Unsupported(f"per-axis {what} (only per-tensor quantization is mapped)")
    return arr.reshape(()).item()


def quant_params(graph, constants: dict[str, np.ndarray]) -> dict[str, tuple[float, int]]:
    """tensor name -> (scale, zero point) from the Q/DQ/QLinear nodes of ``graph`` (recursive)."""
    out: dict[str, tuple[float, int]] = {}

    def get(name: str):
        return constants.get(name) if name else None

    def put(name: str, s_name: str, z_name: str) -> None:
        s, z = get(s_name), get(z_name) if z_name else np.zeros((), np.uint8)
        if name and s is not None and z is not None and np.size(s) == 1 and np.size(z) == 1:
            out.setdefault(name, (float(np.asarray(s).reshape(())), int(np.asarray(z).reshape(()))))

    def walk(g) -> None:
        for node in g.node:
            ins = list(node.input) + [""] * 9
            if node.op_type == "QuantizeLinear":
                put(node.output[0], ins[1], ins[2])
            elif node.op_type == "DequantizeLinear":
                put(ins[0], ins[1], ins[2])
            elif node.op_type == "QLinearConv" or node.op_type == "QLinearMatMul":
                put(ins[0], ins[1], ins[2])
                put(node.output[0], ins[6], ins[7])
            elif node.op_type in ("QLinearAdd", "QLinearMul"):  # com.microsoft
                put(ins[0], ins[1], ins[2])
                put(ins[3], ins[4], ins[5])
                put(node.output[0], ins[6], ins[7])
            elif node.op_type in ("QLinearSigmoid", "QLinearAveragePool"):  # com.microsoft
                put(ins[0], ins[1], ins[2])
                put(node.output[0], ins[3], ins[4])
            for attr in node.attribute:
                if attr.type == 5:
                    walk(attr.g)

    walk(graph)
    return out


def axis_params(graph, constants: dict[str, np.ndarray]) -> dict[str, tuple]:
    """tensor name -> (scales, zero points, axis) of 8-bit tensors QuantizeLinear /
    DequantizeLinear quantize per axis (recursive). NNAPI's only per-channel type is for
    constant filters, so such a run-time tensor holds its raw 8-bit values (scale 1, zero
    point 0) and the Q/DQ nodes do the per-channel arithmetic in float."""
    out: dict[str, tuple] = {}

    def walk(g) -> None:
        for node in g.node:
            ins = list(node.input) + ["", "", ""]
            name = {"QuantizeLinear": node.output[0], "DequantizeLinear": ins[0]}.get(
                node.op_type, ""
            )
            s = constants.get(ins[1]) if name else None
            if s is not None and np.size(s) > 1 and not _attr(node, "block_size", 0):
                z = constants.get(ins[2]) if ins[2] else np.zeros(np.shape(s), np.uint8)
                if z is not None:
                    out.setdefault(name, (np.asarray(s), np.asarray(z), _attr(node, "axis", 1)))
            for attr in node.attribute:
                if attr.type == 5:
                    walk(attr.g)

    walk(graph)
    return out


def _attr(node, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return a.i
    return default


def _axis_vector(n: Node, values: np.ndarray, axis: int, rank: int) -> int:
    """A float32 constant of ``values`` along ``axis`` of a rank-``rank`` tensor (broadcasts)."""
    shape = [1] * rank
    shape[axis] = values.size
    return n.scope.sb.constant(T.TENSOR_FLOAT32, values.astype(np.float32).reshape(shape), shape)


def _per_axis(n: Node, k_scale: int, k_zp: int, rank: int):
    """(scales, zero points, axis) of a per-axis Q/DQ node, or None when per-tensor."""
    scale = np.asarray(n.const(k_scale, "scale"))
    if scale.size == 1 and not n.attr("block_size", 0):
        return None
    if n.attr("block_size", 0):
        raise Unsupported("blocked quantization (block_size) has no NNAPI equivalent")
    zp = np.asarray(n.const(k_zp, "zero point")) if n.has(k_zp) else np.zeros(scale.shape, np.uint8)
    axis = int(n.attr("axis", 1)) % rank
    return scale.reshape(-1), zp.reshape(-1), axis


@mapping("QuantizeLinear")
def quantize(n: Node) -> None:
    if n.t(0).elem != tm.FLOAT:
        raise Unsupported("QuantizeLinear of a non-float32 input")
    per_axis = _per_axis(n, 1, 2, n.rank(0))
    if per_axis is not None:
        _quantize_per_axis(n, *per_axis)
        return
    scale = _scalar(n.const(1, "y_scale"), "y_scale")
    zp = int(_scalar(n.const(2, "y_zero_point"), "y_zero_point")) if n.has(2) else 0
    elem = n.t(2).elem if n.has(2) else tm.UINT8
    if elem not in (tm.UINT8, tm.INT8):
        raise Unsupported(f"QuantizeLinear to {tm.elem_name(elem)}")
    n.op(O.QUANTIZE, [n.i(0)], [n.out(0, elem=elem, scale=scale, zero_point=zp)])


def _quantize_per_axis(n: Node, scale: np.ndarray, zp: np.ndarray, axis: int) -> None:
    """y = QUANTIZE(x / scale[c] + zp[c]) into raw 8-bit values (scale 1, zero point 0)."""
    rank, shape = n.rank(0), n.t(0).shape
    elem = tm.INT8 if zp.dtype == np.int8 else tm.UINT8
    if n.scope.conv.quant.get(n.proto.output[0]) != (1.0, 0):
        raise Unsupported("per-axis output also quantized per tensor elsewhere")
    div, add = n.scope.temp(T.TENSOR_FLOAT32, shape), n.scope.temp(T.TENSOR_FLOAT32, shape)
    n.op(O.DIV, [n.i(0), _axis_vector(n, scale, axis, rank), n.scalar_i32(0)], [div])
    n.op(O.ADD, [div, _axis_vector(n, zp, axis, rank), n.scalar_i32(0)], [add])
    n.op(O.QUANTIZE, [add], [n.out(0, elem=elem, scale=1.0, zero_point=0)])


@mapping("DequantizeLinear")
def dequantize(n: Node) -> None:
    x = n.t(0)
    per_axis = _per_axis(n, 1, 2, n.rank(0))
    if per_axis is not None:
        scale, zp, axis = per_axis
        known = n.scope.conv.axis_quant.get(n.proto.input[0])
        if known is None or not x.quantized or (x.scale, x.zero_point) != (1.0, 0):
            raise Unsupported("per-axis DequantizeLinear of a tensor not held as raw values")
        if not (np.array_equal(known[0].reshape(-1), scale) and
                np.array_equal(known[1].reshape(-1), zp)):  # fmt: skip
            raise Unsupported("per-axis DequantizeLinear with other parameters than its input's")
        rank, shape = n.rank(0), x.shape
        raw, centred = n.scope.temp(T.TENSOR_FLOAT32, shape), n.scope.temp(T.TENSOR_FLOAT32, shape)
        n.op(O.DEQUANTIZE, [n.i(0)], [raw])  # the raw values, exactly (scale 1, zero point 0)
        n.op(O.SUB, [raw, _axis_vector(n, zp, axis, rank), n.scalar_i32(0)], [centred])
        n.op(O.MUL, [centred, _axis_vector(n, scale, axis, rank), n.scalar_i32(0)],
             [n.out(0, elem=tm.FLOAT)])  # fmt: skip
        return
    scale = _scalar(n.const(1, "x_scale"), "x_scale")
    zp = int(_scalar(n.const(2, "x_zero_point"), "x_zero_point")) if n.has(2) else 0
    if not x.quantized or (x.scale, x.zero_point) != (scale, zp):
        raise Unsupported("DequantizeLinear whose input has other quantization parameters")
    n.op(O.DEQUANTIZE, [n.i(0)], [n.out(0, elem=tm.FLOAT)])


def _weights(n: Node, x, w: np.ndarray, w_scale: float, w_zp: int):
    """(values, type, scale, zero point) of weights NNAPI accepts under input ``x``."""
    if x.elem == tm.UINT8 and w.dtype == np.int8:
        return (
            (w.astype(np.int16) + 128).astype(np.uint8),
            T.TENSOR_QUANT8_ASYMM,
            w_scale,
            w_zp + 128,
        )
    if x.elem == tm.INT8 and w.dtype == np.uint8:
        return (
            (w.astype(np.int16) - 128).astype(np.int8),
            T.TENSOR_QUANT8_ASYMM_SIGNED,
            w_scale,
            w_zp - 128,
        )
    code = T.TENSOR_QUANT8_ASYMM if w.dtype == np.uint8 else T.TENSOR_QUANT8_ASYMM_SIGNED
    return w, code, w_scale, w_zp


def _bias(n: Node, k: int, units: int, scale: float) -> int:
    b = n.const(k, "B").astype(np.int32) if n.has(k) else np.zeros(units, np.int32)
    return n.scope.sb.constant(T.TENSOR_INT32, b, (units,), scale, 0)


@mapping("QLinearConv")
def qlinear_conv(n: Node) -> None:
    from .ops_nn import emit_conv

    x = n.t(0)
    x_scale = _scalar(n.const(1, "x_scale"), "x_scale")
    w = n.const(3, "w")
    y_scale = _scalar(n.const(6, "y_scale"), "y_scale")
    y_zp = int(_scalar(n.const(7, "y_zero_point"), "y_zero_point"))
    if np.size(n.const(4, "w_scale")) > 1:
        _qlinear_conv_per_channel(n, x, x_scale, w, y_scale, y_zp)
        return
    w_scale = _scalar(n.const(4, "w_scale"), "w_scale")
    w_zp = int(_scalar(n.const(5, "w_zero_point"), "w_zero_point"))
    vals, code, ws, wz = _weights(n, x, w, w_scale, w_zp)
    bias = _bias(n, 8, w.shape[0], x_scale * ws)
    out = n.out(0, elem=x.elem, scale=y_scale, zero_point=y_zp)
    emit_conv(n, n.i(0), vals, bias, out, w_code=code, w_scale=ws, w_zp=wz)


def _qlinear_conv_per_channel(n: Node, x, x_scale: float, w: np.ndarray, y_scale: float,
                              y_zp: int) -> None:  # fmt: skip
    """Per-output-channel weight scales: NNAPI's TENSOR_QUANT8_SYMM_PER_CHANNEL filter (int8,
    zero points 0) with an INT32 bias of scale 0 (each channel's is x_scale * w_scale[c])."""
    from .ops_nn import emit_conv

    w_scale = np.asarray(n.const(4, "w_scale"), np.float64).reshape(-1)
    w_zp = np.asarray(n.const(5, "w_zero_point")).reshape(-1) if n.has(5) else np.zeros(1)
    if w.dtype != np.int8 or np.any(w_zp != 0):
        raise Unsupported("per-channel QLinearConv needs int8 weights with zero points 0"
                          " (NNAPI's per-channel filter is symmetric int8)")  # fmt: skip
    if w_scale.size != w.shape[0]:
        raise Unsupported(f"{w_scale.size} weight scales for {w.shape[0]} output channels")
    b = n.const(8, "B").astype(np.int32) if n.has(8) else np.zeros(w.shape[0], np.int32)
    bias = n.scope.sb.constant(T.TENSOR_INT32, b, (w.shape[0],), 0.0, 0)
    out = n.out(0, elem=x.elem, scale=y_scale, zero_point=y_zp)
    emit_conv(n, n.i(0), w, bias, out, w_code=T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
              channel_quant=([float(v) for v in w_scale], 0))  # fmt: skip


@mapping("QLinearMatMul")
def qlinear_matmul(n: Node) -> None:
    a = n.t(0)
    a_scale = _scalar(n.const(1, "a_scale"), "a_scale")
    b = n.const(3, "b")
    b_scale = _scalar(n.const(4, "b_scale"), "b_scale")
    b_zp = int(_scalar(n.const(5, "b_zero_point"), "b_zero_point"))
    y_scale = _scalar(n.const(6, "y_scale"), "y_scale")
    y_zp = int(_scalar(n.const(7, "y_zero_point"), "y_zero_point"))
    vals, code, ws, wz = _weights(n, a, b, b_scale, b_zp)
    if b.ndim != 2 or a.rank != 2:
        _qlinear_matmul_by_batch(n, a, vals, code, ws, wz, a_scale, y_scale, y_zp)
        return
    w = np.ascontiguousarray(vals.T)
    sb = n.scope.sb
    wt = sb.constant(code, w, w.shape, ws, wz)
    bt = sb.constant(T.TENSOR_INT32, np.zeros(w.shape[0], np.int32), (w.shape[0],), a_scale * ws)
    out_shape = n.out_shape(0)
    if a.rank == 2 and out_shape is not None and len(out_shape) == 2:
        out = n.out(0, elem=a.elem, scale=y_scale, zero_point=y_zp)
        n.op(O.FULLY_CONNECTED, [n.i(0), wt, bt, n.scalar_i32(0)], [out])
        return
    raise Unsupported("QLinearMatMul on a non-2-D input")


def _qlinear_matmul_by_batch(n: Node, a, b: np.ndarray, code, ws, wz, a_scale, y_scale, y_zp):
    """QLinearMatMul with batch axes (constant b): per broadcast batch, one FULLY_CONNECTED
    of an ``a`` slice with that batch's weights; concatenated, reshaped to the output."""
    from .ops_nn import MAX_BATCH, _as_stack, _flat, _slice

    sa = n.shape(0)
    if len(sa) < 2 or b.ndim < 2:
        raise Unsupported(f"QLinearMatMul of ranks {len(sa)} and {b.ndim} (rank-1 operands)")
    (m, k), (k2, units) = sa[-2:], b.shape[-2:]
    if k != k2:
        raise Unsupported(f"QLinearMatMul of {list(sa)} and {list(b.shape)}: inner dims differ")
    batch = tuple(np.broadcast_shapes(tuple(sa[:-2]), b.shape[:-2]))
    count = int(np.prod(batch, dtype=np.int64)) if batch else 1
    if count > MAX_BATCH:
        raise Unsupported(f"QLinearMatMul over {count} batches (at most {MAX_BATCH})")
    sb = n.scope.sb
    a_code = a.nnapi_type()
    rows = _as_stack(n, 0, a, tuple(sa), m, k)
    stack_b = b.reshape(-1, k, units)
    bias = sb.constant(T.TENSOR_INT32, np.zeros(units, np.int32), (units,), a_scale * ws)
    a_slices: dict[int, int] = {}
    pieces = []
    for idx in np.ndindex(*batch) if batch else [()]:
        fa, fb = _flat(idx, tuple(sa[:-2])), _flat(idx, b.shape[:-2])
        if fa not in a_slices:
            a_slices[fa] = _slice(n, a_code, rows, fa, (m, k), a.scale, a.zero_point)
        w = np.ascontiguousarray(stack_b[fb].T)
        w_op = sb.constant(code, w, w.shape, ws, wz)
        piece = n.scope.temp(a_code, (m, units), y_scale, y_zp)
        n.op(O.FULLY_CONNECTED, [a_slices[fa], w_op, bias, n.scalar_i32(0)], [piece])
        pieces.append(piece)
    if len(pieces) == 1:
        src = pieces[0]
    else:
        src = n.scope.temp(a_code, (count * m, units), y_scale, y_zp)
        n.op(O.CONCATENATION, [*pieces, n.scalar_i32(0)], [src])
    n.out(0, elem=a.elem, scale=y_scale, zero_point=y_zp)
    out_t = n.scope.tensors[n.proto.output[0]]
    n.op(O.RESHAPE, [src, n.scope.vector(list(tm.nnapi_dims(n.out_static(0))))], [out_t.index])


# ---- com.microsoft quantized operators (ONNX Runtime's contrib ops, as its NNAPI EP maps them)


def _same_params(n: Node, k: int, s_k: int, z_k: int) -> None:
    """Input ``k`` must carry the scale / zero point of inputs ``s_k`` / ``z_k``."""
    t = n.t(k)
    scale = _scalar(n.const(s_k, "scale"), "scale")
    zp = int(_scalar(n.const(z_k, "zero point"), "zero point")) if n.has(z_k) else 0
    if not t.quantized or (t.scale, t.zero_point) != (scale, zp):
        raise Unsupported(f"input {n.name(k)!r} has other quantization parameters than the node's")


def _out_params(n: Node, s_k: int, z_k: int) -> tuple[float, int]:
    scale = _scalar(n.const(s_k, "output scale"), "output scale")
    zp = int(_scalar(n.const(z_k, "output zero point"), "output zero point")) if n.has(z_k) else 0
    return scale, zp


@mapping("com.microsoft.QLinearAdd", "com.microsoft.QLinearMul")
def qlinear_binary(n: Node) -> None:
    a, b = n.t(0), n.t(3)
    if a.elem != b.elem or a.elem not in (tm.UINT8, tm.INT8):
        raise Unsupported(f"{n.op_type} of {tm.elem_name(a.elem)} and {tm.elem_name(b.elem)}")
    _same_params(n, 0, 1, 2)
    _same_params(n, 3, 4, 5)
    scale, zp = _out_params(n, 6, 7)
    op = O.ADD if n.op_type == "QLinearAdd" else O.MUL
    # ONNX's shape inference does not know com.microsoft operators: broadcast here
    shape = n.out_shape(0)
    if shape is None and a.static and b.static:
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    out = n.out(0, elem=a.elem, scale=scale, zero_point=zp, shape=shape)
    n.op(op, [n.i(0), n.i(3), n.scalar_i32(0)], [out])


@mapping("com.microsoft.QLinearSigmoid")
def qlinear_sigmoid(n: Node) -> None:
    x = n.t(0)
    if x.elem not in (tm.UINT8, tm.INT8):
        raise Unsupported(f"QLinearSigmoid of {tm.elem_name(x.elem)}")
    _same_params(n, 0, 1, 2)
    scale, zp = _out_params(n, 3, 4)
    # NNAPI's quantized LOGISTIC has a fixed output: scale 1/256, zero point 0 (-128 signed)
    want = 0 if x.elem == tm.UINT8 else -128
    if scale != 1.0 / 256 or zp != want:
        raise Unsupported(f"QLinearSigmoid output scale {scale} / zero point {zp} (NNAPI's"
                          f" LOGISTIC gives 1/256 and {want})")  # fmt: skip
    n.op(O.LOGISTIC, [n.i(0)], [n.out(0, like=0, elem=x.elem, scale=scale, zero_point=zp)])


@mapping("com.microsoft.QLinearAveragePool")
def qlinear_average_pool(n: Node) -> None:
    from .ops_nn import emit_pool, pool_params

    x = n.t(0)
    if x.elem not in (tm.UINT8, tm.INT8):
        raise Unsupported(f"QLinearAveragePool of {tm.elem_name(x.elem)}")
    if n.attr("channels_last", 0):
        raise Unsupported("QLinearAveragePool with channels_last=1")
    _same_params(n, 0, 1, 2)
    scale, zp = _out_params(n, 3, 4)
    if (scale, zp) != (x.scale, x.zero_point):
        raise Unsupported("QLinearAveragePool whose output quantization differs from its"
                          " input's (NNAPI's AVERAGE_POOL_2D keeps them)")  # fmt: skip
    kernel, strides, pads = pool_params(n)
    if n.attr("count_include_pad", 0) and any(pads):
        raise Unsupported("count_include_pad=1 with padding (NNAPI averages valid cells only)")
    shape = n.out_shape(0)
    if shape is None:  # not inferred for com.microsoft operators: NNAPI's own arithmetic
        nb, c, h, w = n.shape(0)
        shape = (nb, c, (h + pads[2] + pads[3] - kernel[0]) // strides[0] + 1,
                 (w + pads[0] + pads[1] - kernel[1]) // strides[1] + 1)  # fmt: skip
    out = n.out(0, elem=x.elem, scale=scale, zero_point=zp, shape=shape)
    emit_pool(n, O.AVERAGE_POOL_2D, n.i(0), out, kernel, strides, pads)

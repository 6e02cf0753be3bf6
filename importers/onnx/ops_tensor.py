"""Shape and data-movement operators, reductions, Softmax, ArgMax/ArgMin.

Reshape, Flatten, Squeeze and Unsqueeze become one RESHAPE to the output
shape shape inference resolved (ONNX Runtime's execution provider also
needs it static); Transpose -> TRANSPOSE, Concat -> CONCATENATION, Gather ->
GATHER (a scalar index drops the axis: RESHAPE after), Slice ->
STRIDED_SLICE with constant starts/ends/axes/steps clamped to the static
shape, Split -> SPLIT (equal parts) or one SLICE per part, Pad -> PAD /
PAD_V2 (constant mode), Tile -> TILE, Expand -> TILE after a RESHAPE,
Softmax -> SOFTMAX (on the last axis for opsets below 13, where ONNX
flattens), ReduceMean/Sum/Max/Min/Prod -> MEAN / REDUCE_* (ReduceMax/Min of
booleans: REDUCE_ANY / REDUCE_ALL), ArgMax/ArgMin -> ARGMAX/ARGMIN (+ RESHAPE
for keepdims; select_last_index over the axis reversed by GATHER), DepthToSpace/SpaceToDepth with
NNAPI's NCHW layout flag (CRD DepthToSpace: channels reordered to DCR by GATHER).
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


@mapping("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def reshape(n: Node) -> None:
    if n.op_type == "Reshape" and n.attr("allowzero", 0) and 0 in n.const(1, "shape"):
        raise Unsupported("Reshape with allowzero=1 and a 0 in the shape")
    n.reshape_to_output(n.i(0), src_tensor=n.t(0))


@mapping("Transpose")
def transpose(n: Node) -> None:
    rank = n.rank(0)
    perm = n.attr("perm") or list(reversed(range(rank)))
    n.op(O.TRANSPOSE, [n.i(0), n.scope.vector(perm)], [n.out(0, like=0)])


def _axis(n: Node, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise Unsupported(f"axis {axis} out of range for rank {rank}")
    return axis % rank


@mapping("Concat")
def concat(n: Node) -> None:
    rank = n.rank(0)
    ins = [n.i(k) for k in range(len(n.proto.input)) if n.has(k)]
    axis = _axis(n, n.attr("axis"), rank)
    n.op(O.CONCATENATION, [*ins, n.scalar_i32(axis)], [n.out(0, like=0)])


@mapping("Gather")
def gather(n: Node) -> None:
    rank = n.rank(0)
    axis = _axis(n, n.attr("axis", 0), rank)
    idx = n.t(1)
    if idx.const is not None and idx.const.size and (idx.const < 0).any():
        dim = n.shape(0)[axis]
        n.scope.bind_const(n.name(1) + "#wrapped", np.where(idx.const < 0, idx.const + dim,
                                                            idx.const))  # fmt: skip
        indices = n.scope.operand(n.name(1) + "#wrapped")
    elif idx.static and n.t(0).static:
        # ONNX counts negative indices from the end, NNAPI's GATHER rejects them
        dim = n.shape(0)[axis]
        shape = idx.shape or (1,)
        code = T.TENSOR_INT32
        neg = n.scope.temp(T.TENSOR_BOOL8, shape)
        n.op(O.LESS, [n.i(1), n.scope.vector([0])], [neg])
        plus = n.scope.temp(code, shape)
        n.op(O.ADD, [n.i(1), n.scope.vector([dim]), n.scalar_i32(0)], [plus])
        indices = n.scope.temp(code, shape)
        n.op(O.SELECT, [neg, plus, n.i(1)], [indices])
    else:
        indices = n.i(1)
    if idx.rank == 0:
        shape = list(n.shape(0)) if n.t(0).static else None
        mid_shape = None if shape is None else tuple(shape[:axis] + [1] + shape[axis + 1 :])
        tmp = n.scope.temp(n.t(0).nnapi_type(), mid_shape, n.t(0).scale, n.t(0).zero_point)
        n.op(O.GATHER, [n.i(0), n.scalar_i32(axis), indices], [tmp])
        x = n.t(0)
        n.reshape_to_output(
            tmp,
            src_tensor=type(x)(x.elem, mid_shape, None, None, x.scale, x.zero_point, x.quantized),
        )
        return
    n.op(O.GATHER, [n.i(0), n.scalar_i32(axis), indices], [n.out(0, like=0)])


@mapping("Slice")
def slice_(n: Node) -> None:
    shape = n.shape(0)
    rank = len(shape)
    if n.opset < 10:
        starts, ends = n.attr("starts"), n.attr("ends")
        axes, steps = n.attr("axes") or list(range(len(starts))), [1] * len(starts)
    elif not (n.t(1).const is not None and n.t(2).const is not None):
        _dynamic_slice(n, shape)
        return
    else:
        starts = [int(v) for v in n.const(1, "starts")]
        ends = [int(v) for v in n.const(2, "ends")]
        axes = [int(v) for v in n.const_or(3, range(len(starts)), "axes")]
        steps = [int(v) for v in n.const_or(4, [1] * len(starts), "steps")]
    begin, end, stride = [0] * rank, list(shape), [1] * rank
    end_mask = 0
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = _axis(n, a, rank)
        dim = shape[a]
        lo, hi = slice(s, e, st).indices(dim)[:2]
        begin[a], end[a], stride[a] = lo, hi, st
        if st < 0 and hi < 0:  # up to and including index 0: NNAPI reads -1 as "last"
            end_mask |= 1 << a
            end[a] = 0
    ins = [n.i(0), n.scope.vector(begin), n.scope.vector(end), n.scope.vector(stride),
           n.scalar_i32(0), n.scalar_i32(end_mask), n.scalar_i32(0)]  # fmt: skip
    n.op(O.STRIDED_SLICE, ins, [n.out(0, like=0)])


def _dynamic_slice(n: Node, shape: tuple) -> None:
    """Slice with run-time starts/ends on one axis, step 1: ONNX's wrap and clamp as
    int32 arithmetic, then SLICE (begin and size vectors from one-hot products)."""
    rank = len(shape)
    count = n.t(1).shape[0] if n.t(1).static and len(n.t(1).shape) == 1 else None
    axes = [int(v) for v in n.const_or(3, range(count or 0), "axes")]
    steps = [int(v) for v in n.const_or(4, [1] * len(axes), "steps")]
    if len(axes) != 1 or steps != [1]:
        k = 1 if n.t(1).const is None else 2
        raise Unsupported(f"input {k} ({'starts' if k == 1 else 'ends'} {n.name(k)!r}) must be a"
                          " constant (run-time starts/ends: one axis, step 1)")  # fmt: skip
    axis = _axis(n, axes[0], rank)
    dim = shape[axis]
    sc = n.scope
    code = T.TENSOR_INT32

    def bound(k: int) -> int:  # wrap a negative index, clamp into [0, dim]
        neg = sc.temp(T.TENSOR_BOOL8, (1,))
        n.op(O.LESS, [n.i(k), sc.vector([0])], [neg])
        plus = sc.temp(code, (1,))
        n.op(O.ADD, [n.i(k), sc.vector([dim]), n.scalar_i32(0)], [plus])
        wrapped = sc.temp(code, (1,))
        n.op(O.SELECT, [neg, plus, n.i(k)], [wrapped])
        low = sc.temp(code, (1,))
        n.op(O.MAXIMUM, [wrapped, sc.vector([0])], [low])
        out = sc.temp(code, (1,))
        n.op(O.MINIMUM, [low, sc.vector([dim])], [out])
        return out

    start, end = bound(1), bound(2)
    length = sc.temp(code, (1,))
    n.op(O.SUB, [end, start, n.scalar_i32(0)], [length])
    onehot = [1 if a == axis else 0 for a in range(rank)]
    begin = sc.temp(code, (rank,))
    n.op(O.MUL, [start, sc.vector(onehot), n.scalar_i32(0)], [begin])
    scaled = sc.temp(code, (rank,))
    n.op(O.MUL, [length, sc.vector(onehot), n.scalar_i32(0)], [scaled])
    size = sc.temp(code, (rank,))
    n.op(O.ADD, [scaled, sc.vector([o - 1 for o in onehot]), n.scalar_i32(0)], [size])
    n.op(O.SLICE, [n.i(0), begin, size], [n.out(0, like=0)])


@mapping("Split")
def split(n: Node) -> None:
    shape = n.shape(0)
    axis = _axis(n, n.attr("axis", 0), len(shape))
    count = len(n.proto.output)
    if n.opset >= 13 and n.has(1):
        sizes = [int(v) for v in n.const(1, "split")]
    elif n.attr("split") is not None:
        sizes = list(n.attr("split"))
    else:
        dim = shape[axis]
        if n.attr("num_outputs") is not None:
            step = -(-dim // count)
            sizes = [min(step, dim - k * step) for k in range(count)]
        else:
            sizes = [dim // count] * count
    if len(set(sizes)) == 1 and sum(sizes) == shape[axis]:
        outs = [n.out(k, like=0) for k in range(count)]
        n.op(O.SPLIT, [n.i(0), n.scalar_i32(axis), n.scalar_i32(count)], outs)
        return
    start = 0
    for k, size in enumerate(sizes):
        begin = [0] * len(shape)
        extent = [-1] * len(shape)
        begin[axis], extent[axis] = start, size
        start += size
        n.op(O.SLICE, [n.i(0), n.scope.vector(begin), n.scope.vector(extent)],
             [n.out(k, like=0)])  # fmt: skip


@mapping("Pad")
def pad(n: Node) -> None:
    mode = n.attr("mode", "constant")
    if mode != "constant":
        raise Unsupported(f"Pad mode {mode!r} (NNAPI pads with a constant only)")
    rank = n.rank(0)
    if n.opset < 11:
        pads, value = n.attr("pads"), n.attr("value", 0.0)
        axes = list(range(rank))
    else:
        pads = [int(v) for v in n.const(1, "pads")]
        value = float(n.const(2, "constant_value")) if n.has(2) else 0.0
        axes = [int(v) for v in n.const_or(3, range(rank), "axes")]
    if any(p < 0 for p in pads):
        raise Unsupported("negative pads (cropping)")
    half = len(pads) // 2
    table = [[0, 0] for _ in range(rank)]
    for k, a in enumerate(axes):
        a = _axis(n, a, rank)
        table[a] = [pads[k], pads[k + half]]
    paddings = n.scope.sb.constant(T.TENSOR_INT32, np.array(table, np.int32), (rank, 2))
    x = n.t(0)
    if value == 0.0 and not x.quantized:
        n.op(O.PAD, [n.i(0), paddings], [n.out(0, like=0)])
        return
    if x.elem == tm.FLOAT:
        pv = n.scalar_f(value)
    elif x.elem == tm.FLOAT16:
        pv = n.scope.scalar(T.FLOAT16, value)
    else:
        pv = n.scalar_i32(int(value))
    n.op(O.PAD_V2, [n.i(0), paddings, pv], [n.out(0, like=0)])


@mapping("Tile")
def tile(n: Node) -> None:
    reps = [int(v) for v in n.const(1, "repeats")]
    n.op(O.TILE, [n.i(0), n.scope.vector(reps)], [n.out(0, like=0)])


@mapping("Expand")
def expand(n: Node) -> None:
    from .ops_elementwise import broadcast, copy

    src = broadcast(n, 0, n.out_static(0))
    if src == n.i(0):  # already the output's shape
        copy(n, src, 0)
    else:
        n.reshape_to_output(src, src_tensor=n.t(0).__class__(n.t(0).elem, n.out_static(0)))


@mapping("Softmax", "LogSoftmax")
def softmax(n: Node) -> None:
    rank = n.rank(0)
    default = -1 if n.opset >= 13 else 1
    axis = _axis(n, n.attr("axis", default), rank)
    if n.opset < 13 and axis != rank - 1:
        raise Unsupported("Softmax before opset 13 flattens from axis on; only the last axis")
    x = n.t(0)
    if x.elem not in (tm.FLOAT, tm.FLOAT16):
        raise Unsupported(f"{n.op_type} on {tm.elem_name(x.elem)}")
    beta = n.scalar_f(1.0, x)
    op = O.SOFTMAX if n.op_type == "Softmax" else O.LOG_SOFTMAX
    n.op(op, [n.i(0), beta, n.scalar_i32(axis)], [n.out(0, like=0)])


_REDUCE = {"ReduceMean": O.MEAN, "ReduceSum": O.REDUCE_SUM, "ReduceMax": O.REDUCE_MAX,
           "ReduceMin": O.REDUCE_MIN, "ReduceProd": O.REDUCE_PROD}  # fmt: skip


@mapping("ReduceSumSquare")
def reduce_sum_square(n: Node) -> None:
    x = n.t(0)
    if x.elem not in (tm.FLOAT, tm.FLOAT16):
        raise Unsupported(f"ReduceSumSquare on {tm.elem_name(x.elem)}")
    sq = n.scope.temp(x.nnapi_type(), x.shape)
    n.op(O.MUL, [n.i(0), n.i(0), n.scalar_i32(0)], [sq])
    reduce(n, O.REDUCE_SUM, sq)


@mapping(*_REDUCE)
def reduce(n: Node, op=None, src: int | None = None) -> None:
    op = _REDUCE[n.op_type] if op is None else op
    src = n.i(0) if src is None else src
    rank = n.rank(0)
    axes_as_input = n.opset >= 18 or (n.op_type == "ReduceSum" and n.opset >= 13)
    if axes_as_input:
        axes = [int(v) for v in n.const(1, "axes")] if n.has(1) else []
    else:
        axes = list(n.attr("axes") or [])
    if not axes:
        if n.attr("noop_with_empty_axes", 0):
            from .ops_elementwise import copy

            copy(n, src, 0)
            return
        axes = list(range(rank))
    axes = sorted({_axis(n, a, rank) for a in axes})
    keep = int(n.attr("keepdims", 1))
    x = n.t(0)
    if x.elem == tm.BOOL and op in (O.REDUCE_MAX, O.REDUCE_MIN):
        op = O.REDUCE_ANY if op == O.REDUCE_MAX else O.REDUCE_ALL  # max = any, min = all
    elif op != O.MEAN and x.elem not in (tm.FLOAT, tm.FLOAT16):
        raise Unsupported(f"{n.op_type} on {tm.elem_name(x.elem)}")
    if op == O.MEAN:
        ins = [src, n.scope.vector(axes), n.scalar_i32(keep)]
    else:
        ins = [src, n.scope.vector(axes), n.bool_scalar(bool(keep))]
    if not keep and len(axes) == rank:  # NNAPI gives [1] for a full reduction
        tmp = n.scope.temp(x.nnapi_type(), (1,), x.scale, x.zero_point)
        n.op(op, ins, [tmp])
        n.reshape_to_output(tmp)
        return
    n.op(op, ins, [n.out(0, like=0)])


@mapping("ArgMax", "ArgMin")
def argmax(n: Node) -> None:
    rank = n.rank(0)
    axis = _axis(n, n.attr("axis", 0), rank)
    op = O.ARGMAX if n.op_type == "ArgMax" else O.ARGMIN
    shape = n.t(0).shape
    mid = None if shape is None else tuple(d for k, d in enumerate(shape) if k != axis)
    src, last = n.i(0), bool(n.attr("select_last_index", 0))
    if last:
        # NNAPI returns the first extreme: take it over the axis reversed (GATHER of the
        # indices n-1..0), then n - 1 - index
        x = n.t(0)
        length = n.shape(0)[axis]
        src = n.scope.temp(x.nnapi_type(), x.shape, x.scale, x.zero_point)
        rev = n.scope.vector(list(range(length - 1, -1, -1)))
        n.op(O.GATHER, [n.i(0), n.scalar_i32(axis), rev], [src])
    plain = not last and not (n.attr("keepdims", 1) or rank == 1)
    if plain:
        n.op(op, [src, n.scalar_i32(axis)], [n.out(0, elem=tm.INT64)])
        return
    tmp = n.scope.temp(T.TENSOR_INT32, mid or (1,))
    n.op(op, [src, n.scalar_i32(axis)], [tmp])
    if last:
        flipped = n.scope.temp(T.TENSOR_INT32, mid or (1,))
        top = n.scope.vector([length - 1])
        n.op(O.SUB, [top, tmp, n.scalar_i32(0)], [flipped])
        tmp = flipped
    from .converter import Tensor

    n.reshape_to_output(tmp, like=None, src_tensor=Tensor(tm.INT64, mid or (1,)))


@mapping("DepthToSpace", "SpaceToDepth")
def depth_space(n: Node) -> None:
    op = O.DEPTH_TO_SPACE if n.op_type == "DepthToSpace" else O.SPACE_TO_DEPTH
    block = int(n.attr("blocksize"))
    src = n.i(0)
    if n.op_type == "DepthToSpace" and n.attr("mode", "DCR") == "CRD":
        # NNAPI has DCR only: CRD reads channel c*b*b + i*b + j where DCR reads
        # (i*b + j)*C' + c, so the channels are put in DCR order first (GATHER on axis 1)
        x = n.t(0)
        channels = n.shape(0)[1]
        c_out = channels // (block * block)
        order = [c * block * block + k for k in range(block * block) for c in range(c_out)]
        src = n.scope.temp(x.nnapi_type(), x.shape, x.scale, x.zero_point)
        n.op(O.GATHER, [n.i(0), n.scalar_i32(1), n.scope.vector(order)], [src])
    n.op(op, [src, n.scalar_i32(block), n.bool_scalar(True)], [n.out(0, like=0)])


@mapping("Shape", "Size")
def shape(n: Node) -> None:
    raise Unsupported(
        f"{n.op_type} of {n.name(0)!r} whose shape {n.t(0).shape} is not static (NNAPI has no"
        " shape operation); give the graph inputs' shapes with --onnx-shape"
    )

"""Control flow: Loop -> WHILE, If -> IF, Scan -> WHILE.

**Loop** (trip count M, condition, N loop-carried values, K scan outputs)
becomes one WHILE whose input-output operands are, in order: the iteration
counter (TENSOR_INT32 [1], from 0), the condition (TENSOR_BOOL8 [1]), the N
loop-carried values and one buffer per scan output; its input-only operands
are M (when given) and the values the body reads from enclosing graphs.
The condition subgraph is ``cond AND counter < M``; the body subgraph is the
ONNX body plus ``counter + 1`` and, per scan output, the iteration's value
written into row ``counter`` of its buffer (EQUAL against a row-index
constant, SELECT). A buffer has ``M`` rows, so scan outputs need a constant
M (their size bound); when the loop can stop early the output is the
buffer's first ``counter`` rows (SLICE). A trip count beyond int32 (exports
write INT64_MAX for "no limit") is treated as absent. HAL 1.3 requires
every WHILE operand to be fully specified: loop-carried values must have
static shapes.

**If** becomes IF; both branches take the values either branch reads from
enclosing graphs, in one order.

**Scan** becomes a WHILE over its sequence axis (0 only): each scan input's
element is a GATHER at the counter (or at ``length - 1 - counter`` for a
reverse direction), scan outputs are buffers of ``length`` rows.
"""

from __future__ import annotations

import numpy as np

from nnhal.types import OperandType, OperationType

from . import types_map as tm
from .converter import Scope, Tensor, copy_operand, fill_outputs, outer_names
from .errors import Unsupported
from .node import Node
from .registry import mapping

T = OperandType
O = OperationType
INT32_MAX = 2**31 - 1


def _captures(n: Node, graphs) -> list[tuple[str, Tensor]]:
    """Non-constant values the subgraphs read from enclosing scopes (first-use order)."""
    seen: list[str] = []
    for g in graphs:
        for name in outer_names(g):
            if name not in seen:
                seen.append(name)
    out = []
    for name in seen:
        t = n.scope.find(name)
        if t is None:
            raise Unsupported(f"the body reads {name!r}, which is not available")
        if t.const is None:
            out.append((name, t))
    return out


def _static(t: Tensor, what: str) -> tuple:
    if not t.static:
        raise Unsupported(
            f"{what} has shape {t.shape}, not static (HAL 1.3 WHILE operands must be fully"
            " specified); give the graph inputs' shapes with --onnx-shape"
        )
    return t.shape


def _input_like(scope: Scope, name: str, t: Tensor) -> int:
    idx = scope.sb.input(t.nnapi_type(), tm.nnapi_dims(t.shape), t.scale, t.zero_point)
    scope.tensors[name] = Tensor(t.elem, t.shape, idx, None, t.scale, t.zero_point, t.quantized)
    return idx


class _Slot:
    """One WHILE operand: how it is typed, its outer operand, its ONNX body names."""

    def __init__(self, elem, shape, outer: int, body_in: str = "", body_out: str = "",
                 scale: float = 0.0, zp: int = 0, quantized: bool = False) -> None:  # fmt: skip
        self.tensor = Tensor(elem, shape, None, None, scale, zp, quantized)
        self.outer, self.body_in, self.body_out = outer, body_in, body_out


def _new_scope(n: Node, label: str) -> Scope:
    conv = n.scope.conv
    return Scope(conv, conv.mb.subgraph(), n.scope, f"{n.scope.name}/{label}")


def _declare_inputs(scope: Scope, slots: list[_Slot], prefix: str) -> list[int]:
    out = []
    for k, s in enumerate(slots):
        name = s.body_in or f"{prefix}#{k}"
        out.append(_input_like(scope, name, s.tensor))
    return out


def _emit_while(n: Node, carried: list[_Slot], only: list[_Slot], cond_fn, body_fn,
                outs: list[int]) -> None:  # fmt: skip
    """Build cond and body subgraphs and the WHILE; ``outs``: one outer operand per carried."""
    cond = _new_scope(n, f"{n.proto.name or n.op_type}.cond")
    c_ins = _declare_inputs(cond, carried + only, "c")
    c_out = cond.sb.output(T.TENSOR_BOOL8, (1,))
    cond_fn(cond, c_ins, c_out)
    body = _new_scope(n, f"{n.proto.name or n.op_type}.body")
    b_ins = _declare_inputs(body, carried + only, "b")
    b_outs = [body.sb.output(s.tensor.nnapi_type(), tm.nnapi_dims(s.tensor.shape),
                             s.tensor.scale, s.tensor.zero_point) for s in carried]  # fmt: skip
    body_fn(body, b_ins, b_outs)
    sb = n.scope.sb
    ins = [sb.subgraph_ref(cond.sb), sb.subgraph_ref(body.sb)]
    ins += [s.outer for s in carried + only]
    n.op(O.WHILE, ins, outs)


def _dims_of(carried: list[_Slot], index: int, outs: list[int]) -> tuple[int, ...]:
    return tm.nnapi_dims(carried[outs.index(index)].tensor.shape)


def _iota(scope: Scope, rows: int, elem_shape: tuple) -> int:
    full = (rows, *elem_shape)
    value = np.broadcast_to(
        np.arange(rows, dtype=np.int32).reshape((rows,) + (1,) * len(elem_shape)), full
    )
    return scope.sb.constant(T.TENSOR_INT32, np.ascontiguousarray(value), full)


def _write_row(scope: Scope, buf_in: int, elem: Tensor, elem_op: int, row: int, rows: int,
               dst: int) -> None:  # fmt: skip
    """dst = buf_in with row ``row`` (an int32 [1] operand) replaced by ``elem``."""
    shape = tuple(elem.shape)
    full = (rows, *shape)
    code = elem.nnapi_type()
    mask = scope.temp(T.TENSOR_BOOL8, full)
    scope.op(O.EQUAL, [_iota(scope, rows, shape), row], [mask])
    if shape:
        one = scope.temp(code, (1, *shape), elem.scale, elem.zero_point)
        scope.op(O.EXPAND_DIMS, [elem_op, scope.scalar(T.INT32, 0)], [one])
    else:
        one = elem_op  # rank 0 is already [1]
    tiled = scope.temp(code, full, elem.scale, elem.zero_point)
    scope.op(O.TILE, [one, scope.vector([rows] + [1] * len(shape))], [tiled])
    scope.op(O.SELECT, [mask, tiled, buf_in], [dst])


def _zeros(scope: Scope, t: Tensor) -> int:
    code = t.nnapi_type()
    value = np.full(t.shape, t.zero_point if t.quantized else 0, tm.NP_DTYPE[code])
    return scope.sb.constant(code, value, value.shape, t.scale, t.zero_point)


def _counter_plus_one(scope: Scope, src: int, dst: int) -> None:
    one = scope.sb.constant(T.TENSOR_INT32, np.array([1], np.int32), (1,))
    scope.op(O.ADD, [src, one, scope.scalar(T.INT32, 0)], [dst])


@mapping("Loop")
def loop(n: Node) -> None:
    body_g = n.attr("body")
    n_carried = len(n.proto.input) - 2
    n_scan = len(body_g.output) - 1 - n_carried
    sb = n.scope.sb
    # trip count
    trip_op, rows = None, None
    if n.has(0):
        m = n.t(0)
        if m.const is not None:
            value = int(np.asarray(m.const).reshape(()))
            if value <= INT32_MAX:
                rows = max(value, 0)
                trip_op = sb.constant(T.TENSOR_INT32, np.array([rows], np.int32), (1,))
        else:
            trip_op = n.i(0)
    # condition
    always = True
    if n.has(1):
        c = n.t(1)
        if c.const is not None:
            always = bool(np.asarray(c.const).reshape(()))
            cond0 = sb.constant(T.TENSOR_BOOL8, np.array([always]), (1,))
        else:
            always = False
            cond0 = n.i(1)
    else:
        cond0 = sb.constant(T.TENSOR_BOOL8, np.array([True]), (1,))
    zero = sb.constant(T.TENSOR_INT32, np.array([0], np.int32), (1,))
    b_in = [vi.name for vi in body_g.input]
    b_out = [vi.name for vi in body_g.output]
    carried = [
        _Slot(tm.INT64, (), zero, b_in[0]),
        _Slot(tm.BOOL, (), cond0, b_in[1], b_out[0]),
    ]
    for k in range(n_carried):
        t = n.t(2 + k)
        shape = _static(t, f"loop-carried value {n.name(2 + k)!r}")
        carried.append(_Slot(t.elem, shape, n.i(2 + k), b_in[2 + k], b_out[1 + k],
                             t.scale, t.zero_point, t.quantized))  # fmt: skip
    conv = n.scope.conv
    scan_elems = []
    bounded_by_shape = False
    body_shapes: dict | None = None
    for k in range(n_scan):
        name = b_out[1 + n_carried + k]
        elem, shape = conv.info.get(name, (0, None))
        if shape is None or any(d is None for d in shape):
            if body_shapes is None:
                body_shapes = _infer_body(n, body_g, carried)
            elem, shape = body_shapes.get(name, (elem, shape))
        if rows is None:
            rows = _declared_rows(n, n_carried + k)
            bounded_by_shape = True
        if not elem or shape is None or any(d is None for d in shape):
            raise Unsupported(f"scan output {name!r} has no static element shape ({shape})")
        if rows == 0:
            raise Unsupported("scan output of a Loop with trip count 0 (empty tensor)")
        buf = Tensor(elem, (rows, *shape), None, None)
        scan_elems.append((name, Tensor(elem, tuple(shape), None, None)))
        carried.append(_Slot(elem, buf.shape, _zeros(n.scope, buf)))
    only = []
    if trip_op is not None:
        only.append(_Slot(tm.INT64, (), trip_op))
    for name, t in _captures(n, [body_g]):
        only.append(_Slot(t.elem, t.shape, n.scope.operand(name), name, "", t.scale,
                          t.zero_point, t.quantized))  # fmt: skip
    n_fixed = 2 + n_carried
    exact = {"value": False}

    def cond_fn(scope: Scope, ins: list[int], out: int) -> None:
        counter, cond = ins[0], ins[1]
        tests = []
        if trip_op is not None:
            tests.append(ins[len(carried)])
        if bounded_by_shape:  # never past the buffers' last row
            tests.append(scope.sb.constant(T.TENSOR_INT32, np.array([rows], np.int32), (1,)))
        for m in tests:
            below = scope.temp(T.TENSOR_BOOL8, (1,))
            scope.op(O.LESS, [counter, m], [below])
            both = scope.temp(T.TENSOR_BOOL8, (1,)) if m is not tests[-1] else out
            scope.op(O.LOGICAL_AND, [below, cond], [both])
            cond = both
        if not tests:
            scope.op(O.LOGICAL_AND, [cond, cond], [out])

    def body_fn(scope: Scope, ins: list[int], outs: list[int]) -> None:
        names = [(b_out[0], outs[1])] + [(b_out[1 + k], outs[2 + k]) for k in range(n_carried)]
        for name, index in names:
            scope.preset(name, index, _dims_of(carried, index, outs))
        scope.convert_nodes(body_g.node)
        _counter_plus_one(scope, ins[0], outs[0])
        fill_outputs(scope, names)
        for k, (name, elem) in enumerate(scan_elems):
            slot = n_fixed + k
            src = scope.get(name)
            t = Tensor(elem.elem, elem.shape, None, None, src.scale, src.zero_point, src.quantized)
            _write_row(scope, ins[slot], t, scope.operand(name), ins[0], rows, outs[slot])
        c = scope.find(b_out[0])
        exact["value"] = c is not None and c.const is not None and bool(c.const.reshape(-1)[0])

    # outer operands for the WHILE outputs
    outs = [n.scope.temp(T.TENSOR_INT32, (1,)), n.scope.temp(T.TENSOR_BOOL8, (1,))]
    for k in range(n_carried):
        s = carried[2 + k].tensor
        outs.append(n.out(k, elem=s.elem, shape=s.shape, scale=s.scale, zero_point=s.zero_point))
    buffers = []
    for k in range(n_scan):
        s = carried[n_fixed + k].tensor
        buffers.append(n.scope.temp(s.nnapi_type(), s.shape, s.scale, s.zero_point))
    outs += buffers
    _emit_while(n, carried, only, cond_fn, body_fn, outs)
    exact_rows = exact["value"] and always and not bounded_by_shape and rows is not None
    for k, buf in enumerate(buffers):
        s = carried[n_fixed + k].tensor
        shape = s.shape if exact_rows else (None, *s.shape[1:])
        dst = n.out(n_carried + k, elem=s.elem, shape=shape, scale=s.scale, zero_point=s.zero_point)
        if exact_rows:
            copy_operand(n.scope, s, buf, dst)
            continue
        if len(s.shape) == 1:
            size = outs[0]  # the rows the loop wrote
        else:
            # [rows, -1, ...] = rows * [1, 0, ...] + [0, -1, ...] (no INT32 CONCATENATION)
            rank = len(s.shape)
            scaled = n.scope.temp(T.TENSOR_INT32, (rank,))
            n.op(O.MUL, [outs[0], n.scope.vector([1] + [0] * (rank - 1)), n.scalar_i32(0)],
                 [scaled])  # fmt: skip
            size = n.scope.temp(T.TENSOR_INT32, (rank,))
            n.op(O.ADD, [scaled, n.scope.vector([0] + [-1] * (rank - 1)), n.scalar_i32(0)],
                 [size])  # fmt: skip
        begin = n.scope.vector([0] * len(s.shape))
        n.op(O.SLICE, [buf, begin, size], [dst])


def _infer_body(n: Node, body_g, carried: list[_Slot]) -> dict:
    """Output types of a body graph inferred with its inputs typed as the WHILE feeds them."""
    import onnx
    from onnx import helper

    from .converter import value_info_type

    g = onnx.GraphProto()
    g.CopyFrom(body_g)
    for vi, slot in zip(g.input, carried):
        tt = vi.type.tensor_type
        tt.elem_type = slot.tensor.elem
        tt.ClearField("shape")
        tt.shape.SetInParent()  # rank 0 is an empty shape, not a missing one
        for d in slot.tensor.shape:
            tt.shape.dim.add().dim_value = int(d)
    for vi in g.output:
        vi.ClearField("type")  # the outer inference left them without shapes
    del g.value_info[:]
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", n.opset)])
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001  (then the shapes stay unknown)
        return {}
    out = {}
    for vi in list(inferred.graph.output) + list(inferred.graph.value_info):
        out[vi.name] = value_info_type(vi)
    return out


def _declared_rows(n: Node, k: int) -> int:
    """The row bound of Loop output ``k`` (a scan output) from its inferred shape."""
    shape = n.out_shape(k)
    if shape is None or not shape or shape[0] is None:
        raise Unsupported(
            f"scan output {n.proto.output[k]!r} of a Loop whose trip count is not a constant"
            f" and whose shape {shape} gives no row bound (HAL 1.3 WHILE operands must be"
            " fully specified)"
        )
    return int(shape[0])


@mapping("If")
def if_(n: Node) -> None:
    then_g, else_g = n.attr("then_branch"), n.attr("else_branch")
    c = n.t(0)
    if c.elem != tm.BOOL:
        raise Unsupported("If condition is not bool")
    caps = _captures(n, [then_g, else_g])
    outs_info = []
    for k, vi in enumerate(then_g.output):
        elem, shape = n.out_info(k)
        if not elem:
            from .converter import value_info_type

            elem, shape = value_info_type(vi)
        outs_info.append((elem, shape))
    refs = []
    for label, g in (("then", then_g), ("else", else_g)):
        scope = _new_scope(n, f"{n.proto.name or 'If'}.{label}")
        for name, t in caps:
            _input_like(scope, name, t)
        names = []
        for k, vi in enumerate(g.output):
            elem, shape = outs_info[k]
            q = n.scope.conv.quant.get(n.proto.output[k])
            t = Tensor(elem, shape, None, None, *(q or (0.0, 0)), q is not None)
            index = scope.sb.output(t.nnapi_type(), tm.nnapi_dims(shape), t.scale, t.zero_point)
            names.append((vi.name, index))
            scope.preset(vi.name, index, tm.nnapi_dims(shape))
        scope.convert_nodes(g.node)
        fill_outputs(scope, names)
        refs.append(scope.sb)
    cond = n.i(0)
    if c.shape not in ((), (1,)):
        raise Unsupported(f"If condition of shape {c.shape} (must hold one value)")
    sb = n.scope.sb
    ins = [cond, sb.subgraph_ref(refs[0]), sb.subgraph_ref(refs[1])]
    ins += [n.scope.operand(name) for name, _ in caps]
    outs = [n.out(k, elem=e, shape=s) for k, (e, s) in enumerate(outs_info)]
    n.op(O.IF, ins, outs)


@mapping("Scan")
def scan(n: Node) -> None:
    if n.opset < 9:
        raise Unsupported("Scan before opset 9 (batch axis and sequence_lens)")
    body_g = n.attr("body")
    n_scan_in = int(n.attr("num_scan_inputs"))
    n_state = len(n.proto.input) - n_scan_in
    n_scan_out = len(body_g.output) - n_state
    in_axes = list(n.attr("scan_input_axes") or [0] * n_scan_in)
    out_axes = list(n.attr("scan_output_axes") or [0] * n_scan_out)
    if any(a != 0 for a in in_axes + out_axes):
        raise Unsupported("Scan over an axis other than 0")
    in_dirs = list(n.attr("scan_input_directions") or [0] * n_scan_in)
    out_dirs = list(n.attr("scan_output_directions") or [0] * n_scan_out)
    b_in = [vi.name for vi in body_g.input]
    b_out = [vi.name for vi in body_g.output]
    sb = n.scope.sb
    lengths = {n.shape(n_state + j)[0] for j in range(n_scan_in)}
    if len(lengths) != 1:
        raise Unsupported(f"Scan inputs of different lengths {sorted(lengths)}")
    length = lengths.pop()
    if length == 0:
        raise Unsupported("Scan over an empty sequence")
    zero = sb.constant(T.TENSOR_INT32, np.array([0], np.int32), (1,))
    carried = [_Slot(tm.INT64, (), zero)]
    for k in range(n_state):
        t = n.t(k)
        shape = _static(t, f"scan state {n.name(k)!r}")
        carried.append(_Slot(t.elem, shape, n.i(k), b_in[k], b_out[k], t.scale, t.zero_point,
                             t.quantized))  # fmt: skip
    conv = n.scope.conv
    out_elems = []
    for j in range(n_scan_out):
        name = b_out[n_state + j]
        elem, shape = conv.info.get(name, (0, None))
        if not elem or shape is None or any(d is None for d in shape):
            raise Unsupported(f"scan output {name!r} has no static element shape ({shape})")
        out_elems.append((name, Tensor(elem, tuple(shape), None, None)))
        buf = Tensor(elem, (length, *shape), None, None)
        carried.append(_Slot(elem, buf.shape, _zeros(n.scope, buf)))
    only = []
    for j in range(n_scan_in):
        t = n.t(n_state + j)
        only.append(_Slot(t.elem, t.shape, n.i(n_state + j), f"#scan_in{j}", "", t.scale,
                          t.zero_point, t.quantized))  # fmt: skip
    for name, t in _captures(n, [body_g]):
        only.append(_Slot(t.elem, t.shape, n.scope.operand(name), name, "", t.scale,
                          t.zero_point, t.quantized))  # fmt: skip
    first_buf = 1 + n_state

    def index(scope: Scope, counter: int, reverse: bool) -> int:
        if not reverse:
            return counter
        last = scope.sb.constant(T.TENSOR_INT32, np.array([length - 1], np.int32), (1,))
        idx = scope.temp(T.TENSOR_INT32, (1,))
        scope.op(O.SUB, [last, counter, scope.scalar(T.INT32, 0)], [idx])
        return idx

    def cond_fn(scope: Scope, ins: list[int], out: int) -> None:
        lim = scope.sb.constant(T.TENSOR_INT32, np.array([length], np.int32), (1,))
        scope.op(O.LESS, [ins[0], lim], [out])

    def body_fn(scope: Scope, ins: list[int], outs: list[int]) -> None:
        for j in range(n_scan_in):
            src = scope.tensors[f"#scan_in{j}"]
            elem_shape = tuple(src.shape[1:])
            row = scope.temp(src.nnapi_type(), (1, *elem_shape), src.scale, src.zero_point)
            at = index(scope, ins[0], bool(in_dirs[j]))
            scope.op(O.GATHER, [src.index, scope.scalar(T.INT32, 0), at], [row])
            name = b_in[n_state + j]
            el = Tensor(src.elem, elem_shape, None, None, src.scale, src.zero_point, src.quantized)
            el.index = scope.temp(el.nnapi_type(), elem_shape, el.scale, el.zero_point)
            dims = list(tm.nnapi_dims(elem_shape))
            scope.op(O.RESHAPE, [row, scope.vector(dims)], [el.index])
            scope.tensors[name] = el
        names = [(b_out[k], outs[1 + k]) for k in range(n_state)]
        for name, idx in names:
            scope.preset(name, idx, _dims_of(carried, idx, outs))
        scope.convert_nodes(body_g.node)
        _counter_plus_one(scope, ins[0], outs[0])
        fill_outputs(scope, names)
        for j, (name, elem) in enumerate(out_elems):
            slot = first_buf + j
            src = scope.get(name)
            t = Tensor(elem.elem, elem.shape, None, None, src.scale, src.zero_point, src.quantized)
            at = index(scope, ins[0], bool(out_dirs[j]))
            _write_row(scope, ins[slot], t, scope.operand(name), at, length, outs[slot])

    outs = [n.scope.temp(T.TENSOR_INT32, (1,))]
    for k in range(n_state):
        s = carried[1 + k].tensor
        outs.append(n.out(k, elem=s.elem, shape=s.shape, scale=s.scale, zero_point=s.zero_point))
    for j in range(n_scan_out):
        s = carried[first_buf + j].tensor
        outs.append(n.out(n_state + j, elem=s.elem, shape=s.shape, scale=s.scale,
                          zero_point=s.zero_point))  # fmt: skip
    _emit_while(n, carried, only, cond_fn, body_fn, outs)

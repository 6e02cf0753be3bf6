"""The graph walk: ONNX graphs to NNAPI subgraphs, node by node.

``Converter`` owns the ``ModelBuilder`` and the tensor facts gathered from
shape inference (element type and shape of every named value, in the main
graph and every nested one). ``Scope`` converts one ONNX graph into one
``SubgraphBuilder``: it knows its tensors (operand index, NNAPI type,
ONNX shape, constant value if any), resolves names captured from enclosing
graphs, and materializes constants only when an operation needs them as
operands (shape vectors and axes used as parameters never become operands).

Per node: constant inputs only -> folded with ONNX's reference
implementation (``onnx.reference``), so exported shape arithmetic (Shape,
Gather, Unsqueeze, Concat, Range...) disappears; else the mapping in
``registry`` emits NNAPI operations through a ``Node`` helper; a mapping
that raises ``Unsupported`` leaves the node listed with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnhal.builder import ModelBuilder, SubgraphBuilder
from nnhal.types import OperandType, OperationType

from . import types_map as tm
from .errors import OnnxImportError, Unsupported

#: operators never folded (their value is not a function of the inputs)
NO_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
           "Multinomial", "Bernoulli", "Loop", "If", "Scan"}  # fmt: skip
#: folded results larger than this (elements) stay operations (memory, file size)
FOLD_LIMIT = 1 << 22


@dataclass
class Tensor:
    elem: int  # ONNX element type
    shape: tuple | None  # ONNX shape: ints or None per axis; None = unknown rank
    index: int | None = None  # operand index in the scope's builder (None: not materialized)
    const: np.ndarray | None = None  # ONNX value of a constant
    scale: float = 0.0
    zero_point: int = 0
    quantized: bool = False

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def static(self) -> bool:
        return self.shape is not None and all(d is not None for d in self.shape)

    def nnapi_type(self) -> int:
        return tm.nnapi_type(self.elem, self.quantized)


@dataclass
class UnsupportedNode:
    """A node with no NNAPI mapping: what a partition would run elsewhere."""

    node: str
    op_type: str
    reason: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    graph: str = "main"  # the (nested) graph holding it

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def node_label(node) -> str:
    return f"node {node.name or '<unnamed>'} ({node.op_type})"


class Converter:
    """Model-wide state of one import."""

    def __init__(
        self, model, opset: int, quant: dict[str, tuple[float, int]], host: bool = False
    ) -> None:
        from .registry import table

        self.onnx_model = model
        self.opset = opset
        self.ops = table()
        self.mb = ModelBuilder()
        self.unsupported: list[UnsupportedNode] = []
        #: unmapped nodes become host operations (ONNX Runtime, through nnhal.runtime)
        self.host = host
        self.host_nodes: list[UnsupportedNode] = []
        self.host_extensions: set[str] = set()
        self.quant = quant  # tensor name -> (scale, zero point)
        #: tensor name -> (scales, zero points, axis): per-axis, held as raw values
        self.axis_quant: dict[str, tuple] = {}
        self.info: dict[str, tuple[int, tuple | None]] = {}
        self._collect(model.graph)

    def _collect(self, graph) -> None:
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            elem, shape = value_info_type(vi)
            if elem:
                self.info.setdefault(vi.name, (elem, shape))
        for init in graph.initializer:
            self.info.setdefault(init.name, (init.data_type, tuple(init.dims)))
        for node in graph.node:
            for attr in node.attribute:
                for g in subgraphs_of(attr):
                    self._collect(g)


def value_info_type(vi) -> tuple[int, tuple | None]:
    t = vi.type
    if not t.HasField("tensor_type"):
        return 0, None
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return tt.elem_type, None
    dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    return tt.elem_type, dims


def subgraphs_of(attr) -> list:
    if attr.type == 5:  # GRAPH
        return [attr.g]
    if attr.type == 10:  # GRAPHS
        return list(attr.graphs)
    return []


def outer_names(graph) -> list[str]:
    """Names a graph (or graphs nested in it) reads but does not define, in first-use order."""
    defined = {vi.name for vi in graph.input} | {i.name for i in graph.initializer}
    found: list[str] = []

    def use(name: str) -> None:
        if name and name not in defined and name not in found:
            found.append(name)

    for node in graph.node:
        for name in node.input:
            use(name)
        for attr in node.attribute:
            for g in subgraphs_of(attr):
                for name in outer_names(g):
                    use(name)
        defined.update(node.output)
    for vi in graph.output:
        use(vi.name)
    return found


class Scope:
    """One ONNX graph converted into one SubgraphBuilder."""

    def __init__(
        self, conv: Converter, sb: SubgraphBuilder, parent: Scope | None, name: str
    ) -> None:
        self.conv, self.sb, self.parent, self.name = conv, sb, parent, name
        self.tensors: dict[str, Tensor] = {}
        self.preset_outputs: dict[str, int] = {}  # name -> SUBGRAPH_OUTPUT operand
        self.preset_dims: dict[str, tuple[int, ...]] = {}
        self.produced: set[str] = set()

    # ---- lookup ---------------------------------------------------------

    def find(self, name: str) -> Tensor | None:
        if name in self.tensors:
            return self.tensors[name]
        if self.parent is not None:
            outer = self.parent.find(name)
            if outer is not None and outer.const is not None:
                # an outer constant: materialized in this subgraph when needed
                local = Tensor(outer.elem, outer.shape, None, outer.const, outer.scale,
                               outer.zero_point, outer.quantized)  # fmt: skip
                self.tensors[name] = local
                return local
            if outer is not None:
                raise OnnxImportError(f"{self.name}: value {name!r} from an outer graph was "
                                      "not passed in (internal error)")  # fmt: skip
        return None

    def get(self, name: str) -> Tensor:
        t = self.find(name)
        if t is None:
            raise Unsupported(f"input {name!r} is not available (produced by an unsupported node)")
        return t

    def is_const(self, name: str) -> bool:
        if not name:
            return True
        t = self.find(name)
        return t is not None and t.const is not None

    def operand(self, name: str) -> int:
        t = self.get(name)
        if t.const is None and t.static and 0 in t.shape:
            raise Unsupported(f"input {name!r} is empty {t.shape} (NNAPI operations reject"
                              " zero-sized tensors)")  # fmt: skip
        if t.index is None:
            assert t.const is not None
            t.index = self.constant_operand(t, name)
        return t.index

    def constant_operand(self, t: Tensor, what: str) -> int:
        code = t.nnapi_type()
        value = tm.to_nnapi_value(t.const, code, f"constant {what!r}")
        if value.size == 0:
            raise Unsupported(f"constant {what!r} is empty (NNAPI has no empty constants)")
        return self.sb.constant(code, value, value.shape, t.scale, t.zero_point)

    def preset(self, name: str, index: int, dims: tuple[int, ...]) -> None:
        """Output operand ``index`` (dimensions ``dims``) is where ``name`` goes."""
        if name not in self.preset_outputs:
            self.preset_outputs[name] = index
            self.preset_dims[name] = tuple(dims)

    # ---- definitions ----------------------------------------------------

    def bind_const(self, name: str, value: np.ndarray) -> None:
        value = np.asarray(value)
        q = self.conv.quant.get(name)
        t = Tensor(_elem_of(value), tuple(value.shape), None, value)
        if q is not None:
            t.scale, t.zero_point, t.quantized = q[0], q[1], True
        self.tensors[name] = t

    def define(
        self,
        name: str,
        elem: int,
        shape: tuple | None,
        *,
        scale: float | None = None,
        zero_point: int | None = None,
    ) -> int:
        """An operand for a node output ``name`` (the preset subgraph output if it is one)."""
        q = self.conv.quant.get(name)
        quantized = elem in (tm.UINT8, tm.INT8)
        if quantized and scale is None:
            if q is None:
                raise Unsupported(f"{tm.elem_name(elem)} output {name!r} has no quantization"
                                  " parameters")  # fmt: skip
            scale, zero_point = q
        t = Tensor(elem, shape, None, None, float(scale or 0.0), int(zero_point or 0), quantized)
        code = t.nnapi_type()
        dims = tm.nnapi_dims(shape)
        preset = self.preset_outputs.get(name)
        if (
            preset is not None
            and name not in self.produced
            and (self.preset_dims[name] == dims or not t.static)
        ):
            t.index = preset
        # a less specific output operand (dynamic dims declared) is filled by a copy later,
        # so WHILE and IF operands keep the static shapes HAL 1.3 requires
        else:
            t.index = self.sb.temporary(code, tm.nnapi_dims(shape), t.scale, t.zero_point)
        self.produced.add(name)
        self.tensors[name] = t
        return t.index

    def temp(self, code: int, shape: tuple | None, scale: float = 0.0, zp: int = 0) -> int:
        return self.sb.temporary(code, tm.nnapi_dims(shape), scale, zp)

    def scalar(self, code: int, value: Any) -> int:
        return self.sb.constant(code, value)

    def vector(self, values, code: int = OperandType.TENSOR_INT32) -> int:
        arr = np.asarray(values, dtype=tm.NP_DTYPE[code]).reshape(-1)
        return self.sb.constant(code, arr, arr.shape)

    def op(self, op: OperationType, ins: list[int], outs: list[int]) -> None:
        self.sb.operation(op, ins, outs)

    # ---- the walk -------------------------------------------------------

    def convert_nodes(self, nodes) -> None:
        for node in nodes:
            self.convert_node(node)

    def convert_node(self, node) -> None:
        conv = self.conv
        mark = self._mark()
        try:
            if self._fold(node):
                return
            fn = conv.ops.get(_op_key(node))
            if fn is None:
                if node.domain not in ("", "ai.onnx"):
                    raise Unsupported(f"operator domain {node.domain!r} has no NNAPI mapping")
                raise Unsupported("no NNAPI mapping for this operator")
            from .node import Node

            fn(Node(self, node))
        except Unsupported as exc:
            reason = str(exc)
            record = UnsupportedNode(node.name or node.output[0], node.op_type, reason,
                                     list(node.input), list(node.output), self.name)  # fmt: skip
            self._rollback(mark)  # what the mapping emitted before it gave up
            if conv.host:
                from .host_nodes import emit_host_node

                try:
                    emit_host_node(self, node, reason)
                    conv.host_nodes.append(record)
                    return
                except Unsupported as host_exc:
                    self._rollback(mark)
                    record.reason = f"{reason}; and not on the host: {host_exc}"
            conv.unsupported.append(record)

    def _mark(self) -> tuple:
        """Where the builders and records stand, to undo a mapping that gave up midway."""
        conv, sb = self.conv, self.sb
        return (len(sb._operands), len(sb._operations), len(conv.mb._referenced),
                len(conv.mb._extensions), set(conv.host_extensions), len(conv.unsupported),
                len(conv.host_nodes), {k: t.index for k, t in self.tensors.items()},
                set(self.produced))  # fmt: skip

    def _rollback(self, mark: tuple) -> None:
        conv, sb = self.conv, self.sb
        n_operands, n_ops, n_refs, n_ext, exts, n_uns, n_host, indexes, produced = mark
        del sb._operands[n_operands:], sb._operations[n_ops:]
        del conv.mb._referenced[n_refs:], conv.mb._extensions[n_ext:]
        conv.host_extensions = exts
        del conv.unsupported[n_uns:], conv.host_nodes[n_host:]
        for name in list(self.tensors):
            if name not in indexes:
                del self.tensors[name]
            else:
                self.tensors[name].index = indexes[name]
        self.produced = produced

    def _fold(self, node) -> bool:
        if node.op_type in NO_FOLD or any(subgraphs_of(a) for a in node.attribute):
            return False
        if node.domain not in ("", "ai.onnx"):  # the reference evaluator knows ai.onnx only
            return False
        if node.op_type in ("Shape", "Size") and node.input:
            t = self.find(node.input[0])
            if t is not None and t.static:
                return self._fold_shape(node, t)
        if not all(self.is_const(n) for n in node.input):
            return False
        values = fold_node(node, [self.find(n).const if n else None for n in node.input],
                           self.conv.opset)  # fmt: skip
        if values is None:
            return False
        for name, value in zip(node.output, values):
            if name:
                self.bind_const(name, value)
        return True

    def _fold_shape(self, node, t: Tensor) -> bool:
        shape = np.array(t.shape, np.int64)
        if node.op_type == "Size":
            self.bind_const(node.output[0], np.array(int(np.prod(shape)), np.int64))
            return True
        start = next((a.i for a in node.attribute if a.name == "start"), 0)
        end = next((a.i for a in node.attribute if a.name == "end"), None)
        self.bind_const(node.output[0], shape[slice(start, end)])
        return True


def _op_key(node) -> str:
    """The operator table's key: ``Add``, or ``com.microsoft.QLinearAdd`` for other domains."""
    if node.domain in ("", "ai.onnx"):
        return node.op_type
    return f"{node.domain}.{node.op_type}"


def _elem_of(value: np.ndarray) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(value.dtype)


def fold_node(node, values: list, opset: int) -> list[np.ndarray] | None:
    """The outputs of ``node`` on constant inputs (ONNX's reference implementation)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [f"in{k}" if n else "" for k, n in enumerate(node.input)]
    copy = helper.make_node(node.op_type, names, [f"out{k}" for k in range(len(node.output))])
    copy.attribute.extend(node.attribute)
    feeds = {n: v for n, v in zip(names, values) if n}
    try:
        ev = ReferenceEvaluator(copy, opsets={"": opset})  # type: ignore[arg-type]
        outs = ev.run(None, feeds)
    except Exception:  # noqa: BLE001  (then the node is converted as an operation)
        return None
    outs = [np.asarray(o) for o in outs]
    if any(o.dtype == object or o.size > FOLD_LIMIT for o in outs):
        return None
    return outs


def copy_operand(scope: Scope, t: Tensor, src: int, dst: int) -> None:
    """An operation writing operand ``src`` (described by ``t``) into ``dst`` unchanged."""
    code = t.nnapi_type()
    if code == OperandType.TENSOR_BOOL8:
        scope.op(OperationType.LOGICAL_AND, [src, src], [dst])
    elif code in (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16, OperandType.TENSOR_INT32):
        # ADD of a zero: RESHAPE has no INT32 form in NNAPI 1.3
        zero = scope.sb.constant(code, np.zeros(1, tm.NP_DTYPE[code]), (1,))
        scope.op(OperationType.ADD, [src, zero, scope.scalar(OperandType.INT32, 0)], [dst])
    elif t.static:
        scope.op(OperationType.RESHAPE, [src, scope.vector(list(tm.nnapi_dims(t.shape)))], [dst])
    else:
        raise Unsupported("copy of a quantized tensor whose shape is not static")


def reshape_operand(scope: Scope, t: Tensor, src: int, shape: tuple, dst: int) -> None:
    """``src`` (described by ``t``) reshaped to the static ``shape`` into ``dst``.

    NNAPI 1.3's RESHAPE takes float and quantized tensors only: INT32 goes
    through EXPAND_DIMS when only unit axes are added, BOOL8 and the other
    INT32 cases are unsupported.
    """
    code = t.nnapi_type()
    dims = tm.nnapi_dims(shape)
    if code not in (OperandType.TENSOR_INT32, OperandType.TENSOR_BOOL8):
        scope.op(OperationType.RESHAPE, [src, scope.vector(list(dims))], [dst])
        return
    src_dims = tm.nnapi_dims(t.shape) if t.static else None
    if src_dims == dims:
        copy_operand(scope, t, src, dst)
        return
    if code == OperandType.TENSOR_INT32 and src_dims is not None:
        plan = _unit_insertions(src_dims, dims)
        if plan is not None:
            cur, cur_dims = src, list(src_dims)
            for k, axis in enumerate(plan):
                cur_dims.insert(axis, 1)
                nxt = dst if k == len(plan) - 1 else scope.sb.temporary(code, tuple(cur_dims))
                scope.op(OperationType.EXPAND_DIMS, [cur, scope.scalar(OperandType.INT32, axis)],
                         [nxt])  # fmt: skip
                cur = nxt
            return
    raise Unsupported(
        f"reshape of a {tm.elem_name(t.elem)} tensor {t.shape} -> {shape}: NNAPI 1.3 RESHAPE"
        " takes float and quantized tensors only"
    )


def _unit_insertions(src: tuple, dst: tuple) -> list[int] | None:
    """Axes at which inserting 1s turns ``src`` into ``dst`` (None if that cannot)."""
    if len(dst) <= len(src):
        return None
    plan, k = [], 0
    for axis, d in enumerate(dst):
        if k < len(src) and src[k] == d:
            k += 1
        elif d == 1:
            plan.append(axis)
        else:
            return None
    return plan if k == len(src) else None


def fill_outputs(scope: Scope, outputs: list[tuple[str, int]]) -> None:
    """Write subgraph outputs that no node produced (inputs, constants, duplicates)."""
    for name, index in outputs:
        t = scope.get(name)
        if t.index == index:
            continue
        src = scope.operand(name)
        if src == index:
            continue
        copy_operand(scope, t, src, index)

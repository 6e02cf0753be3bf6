"""``import_onnx``: an ONNX file to an NNAPI HAL 1.3 model, and the values crossing it.

The result (``OnnxImport``) holds the built ``nnhal.types.Model`` (None when
some node has no mapping), the graph inputs and outputs with their ONNX
types, the unmapped nodes with their reasons (``unsupported``: each names
its node, operator, input and output tensors and the graph holding it, so a
partition can hand exactly those nodes to another device), and converts
values both ways: ``nnapi_inputs`` (ONNX feeds -> one array per NNAPI
input: int64 narrowed to int32 with a range check, rank 0 as [1]) and
``onnx_outputs`` (NNAPI outputs -> ONNX dtypes and ranks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nnhal.types import Model

from . import types_map as tm
from .converter import Converter, Scope, Tensor, UnsupportedNode, fill_outputs, value_info_type
from .errors import OnnxImportError, Unsupported
from .load import default_opset, load


@dataclass
class Port:
    """A graph input or output: ONNX name, element type and shape."""

    name: str
    elem: int
    shape: tuple | None

    @property
    def dtype(self) -> np.dtype:
        from onnx import helper

        return np.dtype(helper.tensor_dtype_to_np_dtype(self.elem))

    def as_dict(self) -> dict:
        return {"name": self.name, "type": tm.elem_name(self.elem),
                "shape": None if self.shape is None else list(self.shape)}  # fmt: skip


@dataclass
class OnnxImport:
    model: Model | None
    inputs: list[Port]
    outputs: list[Port]
    unsupported: list[UnsupportedNode] = field(default_factory=list)
    opset: int = 0
    source: str = ""
    nodes: int = 0
    quant: dict = field(default_factory=dict)
    #: unmapped nodes written as host operations (``host=True``): ONNX Runtime runs them
    host: list[UnsupportedNode] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.model is not None

    def nnapi_inputs(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """One array per NNAPI main input, in order, from ONNX feeds by name."""
        out = []
        for port in self.inputs:
            if port.name not in feeds:
                raise ValueError(f"no value for input {port.name!r}")
            value = np.asarray(feeds[port.name])
            if port.elem in (tm.UINT8, tm.INT8):
                out.append(value.astype(port.dtype).reshape(value.shape or (1,)))
                continue
            code = tm.nnapi_type(port.elem)
            try:
                out.append(tm.to_nnapi_value(value, code, f"input {port.name!r}"))
            except Unsupported as exc:
                raise ValueError(str(exc)) from None
        return out

    def onnx_outputs(self, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
        """NNAPI main outputs as ONNX values (dtype and rank restored), by name."""
        out = {}
        for port, arr in zip(self.outputs, arrays):
            value = np.asarray(arr).astype(port.dtype)
            if port.shape == () and value.size == 1:
                value = value.reshape(())
            out[port.name] = value
        return out

    def summary(self) -> dict:
        return {
            "source": self.source,
            "opset": self.opset,
            "nodes": self.nodes,
            "ok": self.ok,
            "inputs": [p.as_dict() for p in self.inputs],
            "outputs": [p.as_dict() for p in self.outputs],
            "unsupported": [u.as_dict() for u in self.unsupported],
            "host": [u.as_dict() for u in self.host],
            "operations": None if self.model is None else _op_counts(self.model),
        }


def _op_counts(model: Model) -> dict[str, int]:
    from nnhal.types import operation_name

    counts: dict[str, int] = {}
    for sg in (model.main, *model.referenced):
        for op in sg.operations:
            key = operation_name(op.type)
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def _constants(model) -> dict[str, np.ndarray]:
    """Initializers and Constant node values of every graph (for quantization parameters)."""
    from onnx import numpy_helper

    out: dict[str, np.ndarray] = {}

    def walk(g) -> None:
        for init in g.initializer:
            out[init.name] = numpy_helper.to_array(init)
        for node in g.node:
            if node.op_type == "Constant" and node.attribute:
                a = node.attribute[0]
                if a.name == "value":
                    out[node.output[0]] = numpy_helper.to_array(a.t)
            for attr in node.attribute:
                if attr.type == 5:
                    walk(attr.g)

    walk(model.graph)
    return out


def import_onnx(
    source: Any,
    shapes: dict[str, list[int]] | None = None,
    constants: dict[str, np.ndarray] | None = None,
    host: bool = False,
) -> OnnxImport:
    """Import ``source`` (a path, bytes or ModelProto); OnnxImportError for a bad file.

    ``shapes`` fixes graph input dimensions; ``constants`` fixes graph inputs to
    values (they become initializers: folded, and usable where NNAPI needs a
    constant, such as Slice starts or Reduce axes). ``host=True``: nodes without
    a mapping become host operations ONNX Runtime runs through ``nnhal.runtime``
    (listed in ``host``; the model then needs the runtime, not a bare driver).
    """
    model = load(source, shapes, constants)
    where = str(source) if isinstance(source, (str, Path)) else "model"
    first = _convert(model, where, {}, host)
    # graph outputs exporters declare dynamic often have a static shape once converted:
    # convert again with it, so the model file's outputs are fully specified
    learned = {
        name: t.shape
        for name, t in first[1].items()
        if t is not None and t.static and t.shape != first[0].get(name)
    }
    result = _convert(model, where, learned, host) if learned and first[2].ok else first[2]
    return result if isinstance(result, OnnxImport) else result[2]


def _convert(model, where: str, out_shapes: dict[str, tuple], host: bool = False):
    """(declared output shapes, output tensors, OnnxImport) of one conversion."""
    from onnx import numpy_helper

    from .ops_quant import axis_params, quant_params

    opset = default_opset(model) or 0
    consts = _constants(model)
    quant = quant_params(model.graph, consts)
    axis_quant = axis_params(model.graph, consts)
    for name in axis_quant:  # held as raw 8-bit values (ops_quant.axis_params)
        quant.setdefault(name, (1.0, 0))
    conv = Converter(model, opset, quant, host)
    conv.axis_quant = axis_quant
    g = model.graph
    scope = Scope(conv, conv.mb.main, None, "main")
    init_names = {i.name for i in g.initializer}
    for init in g.initializer:
        scope.bind_const(init.name, numpy_helper.to_array(init))
    inputs = []
    for vi in g.input:
        if vi.name in init_names:
            continue  # an initializer listed as an input (IR < 4): a constant
        _kind_check(vi, "graph input", where)
        elem, shape = value_info_type(vi)
        q = conv.quant.get(vi.name)
        t = Tensor(elem, shape, None, None, *(q or (0.0, 0)), q is not None)
        try:
            code = t.nnapi_type()
        except Unsupported as exc:
            raise OnnxImportError(f"{where}: graph input {vi.name!r}: {exc}") from None
        t.index = conv.mb.main.input(code, tm.nnapi_dims(shape), t.scale, t.zero_point)
        scope.tensors[vi.name] = t
        inputs.append(Port(vi.name, elem, shape))
    outputs, presets, declared = [], [], {}
    for vi in g.output:
        _kind_check(vi, "graph output", where)
        elem, shape = conv.info.get(vi.name) or value_info_type(vi)
        declared[vi.name] = shape
        shape = out_shapes.get(vi.name, shape)
        q = conv.quant.get(vi.name)
        t = Tensor(elem, shape, None, None, *(q or (0.0, 0)), q is not None)
        try:
            code = t.nnapi_type()
        except Unsupported as exc:
            raise OnnxImportError(f"{where}: graph output {vi.name!r}: {exc}") from None
        index = conv.mb.main.output(code, tm.nnapi_dims(shape), t.scale, t.zero_point)
        outputs.append(Port(vi.name, elem, declared[vi.name]))
        presets.append((vi.name, index))
        if vi.name not in scope.tensors:  # outputs that are inputs get copied below
            scope.preset(vi.name, index, tm.nnapi_dims(shape))
    scope.convert_nodes(g.node)
    built = None
    if not conv.unsupported:
        try:
            fill_outputs(scope, presets)
        except Unsupported as exc:
            conv.unsupported.append(UnsupportedNode("<graph outputs>", "", str(exc)))
    if not conv.unsupported:
        built = conv.mb.build()
    result = OnnxImport(built, inputs, outputs, conv.unsupported, opset, where,
                        _count_nodes(g), conv.quant, conv.host_nodes)  # fmt: skip
    produced = {vi.name: scope.find(vi.name) for vi in g.output}
    return declared, produced, result


def _kind_check(vi, what: str, where: str) -> None:
    kind = vi.type.WhichOneof("value")
    if kind != "tensor_type":
        raise OnnxImportError(
            f"{where}: {what} {vi.name!r} is a {kind or 'untyped'} value; NNAPI has tensors only"
        )


def _count_nodes(g) -> int:
    from .converter import subgraphs_of

    total = 0
    for node in g.node:
        total += 1
        for attr in node.attribute:
            for sub in subgraphs_of(attr):
                total += _count_nodes(sub)
    return total

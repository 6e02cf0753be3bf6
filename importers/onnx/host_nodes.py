"""Nodes without an NNAPI mapping as host operations run by ONNX Runtime.

With ``import_onnx(..., host=True)`` (``nnhal import`` does this), a node
whose mapping raised ``Unsupported`` becomes one operation of the host
extension ``org.nnhal.host.onnxruntime`` (``nnhal.runtime.host_onnx``): its
input 0 is a constant blob, a single-node ONNX model made here, and its
other inputs and its outputs are the node's values as NNAPI operands. The
runtime (``nnhal.runtime``) runs it on the host between the NNAPI steps;
plans show it with the reason the node has no mapping.

The single-node model holds the node as is (subgraph attributes included),
its constant inputs as initializers, its other inputs (and the values its
subgraphs read from enclosing graphs) as graph inputs in operand order, the
default-domain and other opset imports of the source model, and the reason
as ``doc_string``. Values crossing it must have an NNAPI type (a double or
int16 between two nodes cannot: such a node stays unsupported).
"""

from __future__ import annotations

import numpy as np

from . import types_map as tm
from .converter import Scope, outer_names, subgraphs_of
from .errors import Unsupported

EXTENSION = "org.nnhal.host.onnxruntime"
#: the prefix the importer gives the host extension in extensionNameToPrefix
PREFIX = 1
OPERATION = (PREFIX << 16) | 0  # HOST_OPERATION of nnhal.runtime.host
BLOB_TYPE = (PREFIX << 16) | 0  # HOST_BLOB_TYPE of nnhal.runtime.host


def _inputs_read(node) -> list[str]:
    """The node's inputs, then the outer values its subgraphs read, without repeats."""
    names: list[str] = []
    for name in node.input:
        if name and name not in names:
            names.append(name)
    for attr in node.attribute:
        for g in subgraphs_of(attr):
            for name in outer_names(g):
                if name not in names:
                    names.append(name)
    return names


def emit_host_node(scope: Scope, node, reason: str) -> None:
    """``node`` as a host operation of ``scope`` (Unsupported when values cannot cross)."""
    from onnx import helper, numpy_helper

    conv = scope.conv
    src = conv.onnx_model
    graph_inputs, initializers, operands = [], [], []
    for name in _inputs_read(node):
        t = scope.find(name)
        if t is None:
            raise Unsupported(f"input {name!r} is not available")
        if t.const is not None:
            initializers.append(numpy_helper.from_array(np.asarray(t.const), name))
            continue
        t.nnapi_type()  # raises Unsupported for a type NNAPI cannot hold
        operands.append(scope.operand(name))
        graph_inputs.append(helper.make_tensor_value_info(name, t.elem, t.shape))
    graph_outputs, outputs = [], []
    for name in node.output:
        if not name:
            continue
        elem, shape = conv.info.get(name, (0, None))
        if not elem:
            raise Unsupported(f"element type of output {name!r} is unknown")
        tm.nnapi_type(elem, name in conv.quant)
        graph_outputs.append(helper.make_tensor_value_info(name, elem, None))
        outputs.append((name, elem, shape))
    graph = helper.make_graph([node], "host_node", graph_inputs, graph_outputs, initializers)
    model = helper.make_model(graph, opset_imports=list(src.opset_import),
                              ir_version=src.ir_version, doc_string=reason)  # fmt: skip
    model.functions.extend(src.functions)  # a model-local function the node may call
    blob = model.SerializeToString()
    sb = scope.sb
    if EXTENSION not in conv.host_extensions:
        conv.mb.extension(EXTENSION, PREFIX)
        conv.host_extensions.add(EXTENSION)
    blob_operand = sb.constant(BLOB_TYPE, blob, (len(blob),))
    outs = [scope.define(name, elem, shape) for name, elem, shape in outputs]
    sb.operation(OPERATION, [blob_operand, *operands], outs)

"""ONNX models to NNAPI HAL 1.3 models: ``nnhal import MODEL.onnx -o MODEL.json``.

Needs the ``onnx`` package (``pip install 'nnhal[onnx]'``). Where things live:

- ``load``: read, opset check, ``onnx.checker``, shape inference;
- ``converter`` / ``node``: the graph walk, constant folding, tensors and
  operands; ``registry``: the operator table;
- ``ops_elementwise``, ``ops_tensor``, ``ops_nn``, ``ops_quant``,
  ``ops_resize``, ``ops_control``: the mappings (control flow: Loop/Scan ->
  WHILE, If -> IF);
- ``host_nodes``: nodes without a mapping as host operations ONNX Runtime
  runs through ``nnhal.runtime`` (``import_onnx(..., host=True)``);
- ``api``: ``import_onnx`` and the result (``OnnxImport``);
- ``vectors_out``: the result as a model file (the test-vector JSON format);
- ``node_tests``: ONNX's backend node tests through the importer;
- ``cli``: the ``nnhal import`` hooks.

Usage::

    from nnhal.importers.onnx import import_onnx
    result = import_onnx("model.onnx", shapes={"x": [1, 3, 32, 32]})
    result.unsupported        # [] when every node mapped
    result.model              # nnhal.types.Model
    import_onnx("model.onnx", host=True).host   # nodes left to ONNX Runtime
"""

from .api import OnnxImport, Port, import_onnx
from .converter import UnsupportedNode
from .errors import OnnxImportError

__all__ = ["OnnxImport", "OnnxImportError", "Port", "UnsupportedNode", "import_onnx"]

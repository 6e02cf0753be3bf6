"""The importer's two kinds of failure.

``OnnxImportError``: the file cannot be imported at all (not ONNX, opset too
new, fails the checker, a dynamic shape that cannot be resolved). Its message
is one line and names the node or tensor.

``Unsupported``: one node has no NNAPI mapping; the converter records it
(node, operator, reason) and carries on, so every such node is listed.
"""

from __future__ import annotations


class OnnxImportError(ValueError):
    """A file that cannot be imported; ``str()`` is one line naming the node or tensor."""


class Unsupported(Exception):
    """Raised by an operator mapping: this node (as configured) has no NNAPI equivalent."""

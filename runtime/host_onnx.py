"""ONNX Runtime as a host backend: single-node ONNX models run in this process.

The host extension ``org.nnhal.host.onnxruntime`` (see ``nnhal.runtime.host``):
its operation's blob is a serialized ONNX model holding one node, its
constant inputs as initializers, its other inputs as graph inputs in the
operation's operand order and its outputs as graph outputs; the model's
``doc_string`` says why the node has no NNAPI mapping. The ONNX importer
(``nnhal.importers.onnx``, ``host=True``) writes these.

Values cross as NNAPI holds them: a 64-bit integer input arrives as int32
and is widened, a rank-0 input arrives as [1]; outputs go back as int32
(values outside int32 are an error, never a wrap) and rank 0 as [1].
Sessions use the CPU provider with one intra-op and one inter-op thread.
Needs the ``onnx`` extra (``onnx``, ``onnxruntime``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.runtime.host import HostBackend, HostError

EXTENSION = "org.nnhal.host.onnxruntime"


def _model(blob: bytes):
    try:
        import onnx
    except ImportError:
        raise HostError("running ONNX nodes on the host needs pip install 'nnhal[onnx]'") from None
    model = onnx.ModelProto()
    try:
        model.ParseFromString(blob)
    except Exception as exc:  # noqa: BLE001  (protobuf's DecodeError and friends)
        raise HostError(f"the blob is not an ONNX model ({exc})") from None
    if len(model.graph.node) != 1:
        raise HostError(f"the blob holds {len(model.graph.node)} nodes, not one")
    return model


class OnnxRuntimeBackend(HostBackend):
    extension = EXTENSION
    label = "ONNX Runtime"

    def describe(self, blob: bytes) -> str:
        model = _model(blob)
        node = model.graph.node[0]
        where = f" node {node.name!r}" if node.name else ""
        return f"{node.op_type}{where}: {model.doc_string or 'no NNAPI mapping'}"

    def kernel(self, blob: bytes) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
        model = _model(blob)
        try:
            import onnxruntime as ort
        except ImportError:
            raise HostError("running ONNX nodes on the host needs onnxruntime: "
                            "pip install 'nnhal[onnx]'") from None  # fmt: skip
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            sess = ort.InferenceSession(blob, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001  (ORT raises its own exception types)
            node = model.graph.node[0]
            raise HostError(f"{node.op_type}: ONNX Runtime cannot load it: "
                            f"{str(exc).splitlines()[0][:300]}") from None  # fmt: skip
        ins = [(i.name, _np_type(i.type), _rank(i.shape)) for i in sess.get_inputs()]
        outs = [o.name for o in sess.get_outputs()]

        def run(args: list[np.ndarray]) -> list[np.ndarray]:
            if len(args) != len(ins):
                raise HostError(f"{len(args)} inputs given, the node takes {len(ins)}")
            feeds = {}
            for (name, dtype, rank), value in zip(ins, args):
                value = np.asarray(value)
                if dtype is not None:
                    value = value.astype(dtype, copy=False)
                if rank == 0 and value.size == 1:
                    value = value.reshape(())
                feeds[name] = value
            return [_to_nnapi(name, v) for name, v in zip(outs, sess.run(outs, feeds))]

        return run


def _np_type(ort_type: str):
    # ONNX Runtime names input types "tensor(int64)" and so on
    names = {"float": np.float32, "float16": np.float16, "double": np.float64,
             "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8,
             "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
             "bool": np.bool_}  # fmt: skip
    inner = ort_type[len("tensor(") : -1] if ort_type.startswith("tensor(") else ""
    return names.get(inner)


def _rank(shape) -> int | None:
    return None if shape is None else len(shape)


def _to_nnapi(name: str, value) -> np.ndarray:
    value = np.asarray(value)
    if value.dtype in (np.int64, np.uint64, np.uint32, np.int16, np.uint16):
        info = np.iinfo(np.int32)
        if value.size and (value.min() < info.min or value.max() > info.max):
            raise HostError(f"output {name!r} holds values outside int32 (NNAPI has no int64)")
        value = value.astype(np.int32)
    return value.reshape(value.shape or (1,))


BACKEND = OnnxRuntimeBackend()

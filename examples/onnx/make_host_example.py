"""Make ``host_node.onnx``: a model with one operator NNAPI has no mapping for.

    python examples/onnx/make_host_example.py     # needs only the onnx package

``y = GatherElements(Relu(x), idx, axis=1) * w``: Relu and Mul map to NNAPI,
GatherElements does not, so ``nnhal import`` writes it as a host operation
that ONNX Runtime runs between the two NNAPI steps (docs/onnx.md). The input
values for the committed ``host_node.npz`` are made here too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent


def main() -> None:
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.uniform(0.5, 2.0, (4, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("GatherElements", ["r", "idx"], ["g"], axis=1, name="pick"),
        helper.make_node("Mul", ["g", "w"], ["y"], name="scale"),
    ]
    graph = helper.make_graph(
        nodes,
        "host_node",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
            helper.make_tensor_value_info("idx", TensorProto.INT64, [4, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, HERE / "host_node.onnx")
    x = rng.standard_normal((4, 6)).astype(np.float32)
    idx = rng.integers(0, 6, (4, 3)).astype(np.int64)
    np.savez(HERE / "host_node.npz", x=x, idx=idx)


if __name__ == "__main__":
    main()

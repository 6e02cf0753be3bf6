"""Vision operations through the executor, side by side with onnxruntime.

Three float32 models, each a single operation (the issue's benchmark):

- CONV_2D: input 1x112x112x32 (NHWC), 64 filters 3x3, SAME padding, stride 1;
- DEPTHWISE_CONV_2D: input 1x112x112x64, 3x3 filter, depth multiplier 1, SAME;
- MAX_POOL_2D: input 1x112x112x64, 2x2 window, stride 2, VALID.

Filters and biases are constants. Each model is compiled once
(``nnhal.driver.executor.compile_model``) and timed with ``CompiledModel.run``.
When onnxruntime (and onnx) are installed, the equivalent ONNX node (Conv,
Conv with group = channels, MaxPool; NCHW, ONNX's layout) runs in the same
process on the same data, transposed to NCHW beforehand (not timed), with
onnxruntime's default session options (all cores, all graph optimizations);
the outputs are checked to agree. Rounds alternate between the two runtimes,
with a pause at each switch (so that one runtime's spinning worker threads
are idle when the other runs);
the report gives, per runtime, the median and the best (minimum) time of a
run in milliseconds, and the ratios executor / onnxruntime of both (target:
CONV_2D within 3x, the others within 5x). The best times are the stable
figure on a busy machine (other processes inflate medians, and multi-threaded
BLAS calls suffer most from sharing the cores); the verdict uses them.

Without onnxruntime the script still times the executor and says the peer is
absent (``pip install onnxruntime onnx`` to compare).

Usage: python bench/vision_ops.py [--rounds N] [--seed S] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from nnhal.driver.executor import compile_model

from nnhal.builder import ModelBuilder
from nnhal.types import Model, OperandType, OperationType

T = OperandType
O = OperationType
SAME, VALID = 1, 2
TARGETS = {"CONV_2D": 3.0, "DEPTHWISE_CONV_2D": 5.0, "MAX_POOL_2D": 5.0}
#: pause between the two runtimes' blocks: both keep worker threads spinning
#: for a while after a parallel call (OpenBLAS up to ~0.1 s), and on a small
#: machine a spinning thread of one runtime takes a core from the other.
PAUSE_S = 0.25


@dataclass
class Case:
    name: str
    what: str
    model: Model
    x: np.ndarray  # NHWC input
    onnx: Callable[[], object] | None  # builds the ONNX model (lazily: onnx may be absent)


def _conv_case(rng: np.random.Generator) -> Case:
    x = rng.standard_normal((1, 112, 112, 32), dtype=np.float32)
    w = rng.standard_normal((64, 3, 3, 32), dtype=np.float32) * 0.1
    b = rng.standard_normal(64, dtype=np.float32)
    mb = ModelBuilder()
    g = mb.main
    inp = g.input(T.TENSOR_FLOAT32, [1, 112, 112, 32])
    out = g.output(T.TENSOR_FLOAT32, [1, 112, 112, 64])
    scalars = [g.constant(T.INT32, v) for v in (SAME, 1, 1, 0)]
    weights = g.constant(T.TENSOR_FLOAT32, w)
    bias = g.constant(T.TENSOR_FLOAT32, b)
    g.operation(O.CONV_2D, [inp, weights, bias, *scalars], [out])

    def onnx_model():
        return _onnx_node(
            "Conv",
            (1, 32, 112, 112),
            (1, 64, 112, 112),
            {"W": w.transpose(0, 3, 1, 2), "B": b},
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
        )

    return Case("CONV_2D", "1x112x112x32 * 64x3x3, SAME", mb.build(), x, onnx_model)


def _depthwise_case(rng: np.random.Generator) -> Case:
    x = rng.standard_normal((1, 112, 112, 64), dtype=np.float32)
    w = rng.standard_normal((1, 3, 3, 64), dtype=np.float32) * 0.3
    b = rng.standard_normal(64, dtype=np.float32)
    mb = ModelBuilder()
    g = mb.main
    inp = g.input(T.TENSOR_FLOAT32, [1, 112, 112, 64])
    out = g.output(T.TENSOR_FLOAT32, [1, 112, 112, 64])
    scalars = [g.constant(T.INT32, v) for v in (SAME, 1, 1, 1, 0)]
    weights = g.constant(T.TENSOR_FLOAT32, w)
    bias = g.constant(T.TENSOR_FLOAT32, b)
    g.operation(O.DEPTHWISE_CONV_2D, [inp, weights, bias, *scalars], [out])

    def onnx_model():
        return _onnx_node(
            "Conv",
            (1, 64, 112, 112),
            (1, 64, 112, 112),
            {"W": w.transpose(3, 0, 1, 2), "B": b},
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            group=64,
        )

    return Case("DEPTHWISE_CONV_2D", "1x112x112x64, 3x3, SAME", mb.build(), x, onnx_model)


def _max_pool_case(rng: np.random.Generator) -> Case:
    x = rng.standard_normal((1, 112, 112, 64), dtype=np.float32)
    mb = ModelBuilder()
    g = mb.main
    inp = g.input(T.TENSOR_FLOAT32, [1, 112, 112, 64])
    out = g.output(T.TENSOR_FLOAT32, [1, 56, 56, 64])
    scalars = [g.constant(T.INT32, v) for v in (VALID, 2, 2, 2, 2, 0)]
    g.operation(O.MAX_POOL_2D, [inp, *scalars], [out])

    def onnx_model():
        return _onnx_node(
            "MaxPool", (1, 64, 112, 112), (1, 64, 56, 56), {}, kernel_shape=[2, 2], strides=[2, 2]
        )

    return Case("MAX_POOL_2D", "1x112x112x64, 2x2 stride 2", mb.build(), x, onnx_model)


def _onnx_node(op: str, in_shape, out_shape, initializers: dict, **attributes):
    from onnx import TensorProto, helper, numpy_helper

    inits = [
        numpy_helper.from_array(np.ascontiguousarray(v), name) for name, v in initializers.items()
    ]
    node = helper.make_node(op, ["x", *initializers], ["y"], **attributes)
    graph = helper.make_graph(
        [node],
        op.lower(),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7  # opset 13; older onnxruntime builds reject newer IR versions
    return model


def _onnxruntime():
    """The onnxruntime module, or the reason it cannot be used."""
    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError as exc:
        return None, f"onnxruntime/onnx not installed ({exc.name}); pip install onnxruntime onnx"
    return onnxruntime, ""


def _times(fn: Callable[[], object], reps: int) -> list[float]:
    """Milliseconds of each of ``reps`` calls."""
    result = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        result.append((time.perf_counter() - t0) * 1e3)
    return result


def measure(case: Case, ort, rounds: int) -> dict:
    compiled = compile_model(case.model)

    def ours():
        return compiled.run([case.x])[0]

    expected = ours()
    peer = None
    if ort is not None:
        session = ort.InferenceSession(
            case.onnx().SerializeToString(), providers=["CPUExecutionProvider"]
        )
        x_nchw = np.ascontiguousarray(case.x.transpose(0, 3, 1, 2))

        def peer():
            return session.run(None, {"x": x_nchw})[0]

        theirs = peer().transpose(0, 2, 3, 1)
        np.testing.assert_allclose(expected, theirs, rtol=1e-4, atol=1e-4)
    ours()  # warm-up
    reps = 10
    t_ours: list[float] = []
    t_peer: list[float] = []
    for _ in range(rounds):
        t_ours += _times(ours, reps)
        if peer is not None:
            time.sleep(PAUSE_S)
            t_peer += _times(peer, reps)
            time.sleep(PAUSE_S)
    result = {
        "op": case.name,
        "shape": case.what,
        "executor_ms": statistics.median(t_ours),
        "executor_best_ms": min(t_ours),
    }
    if peer is not None:
        result["onnxruntime_ms"] = statistics.median(t_peer)
        result["onnxruntime_best_ms"] = min(t_peer)
        result["ratio"] = result["executor_ms"] / result["onnxruntime_ms"]
        result["ratio_best"] = result["executor_best_ms"] / result["onnxruntime_best_ms"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results as JSON to this file")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    ort, why = _onnxruntime()
    print(f"cpus: {os.cpu_count()}, numpy {np.__version__}", end="")
    print(f", onnxruntime {ort.__version__}" if ort is not None else f"\npeer absent: {why}")
    cases = [_conv_case(rng), _depthwise_case(rng), _max_pool_case(rng)]
    header = f"{'operation':<18} {'shape':<28} {'executor ms (best)':>19}"
    if ort is not None:
        header += f" {'onnxruntime ms (best)':>22} {'ratio (best)':>13} {'target':>6}"
    print(header)
    results = []
    for case in cases:
        r = measure(case, ort, args.rounds)
        results.append(r)
        ours = f"{r['executor_ms']:.3f} ({r['executor_best_ms']:.3f})"
        line = f"{r['op']:<18} {r['shape']:<28} {ours:>19}"
        if "ratio" in r:
            target = TARGETS[r["op"]]
            verdict = "ok" if r["ratio_best"] <= target else "MISSED"
            peer = f"{r['onnxruntime_ms']:.3f} ({r['onnxruntime_best_ms']:.3f})"
            ratio = f"{r['ratio']:.2f} ({r['ratio_best']:.2f})"
            line += f" {peer:>22} {ratio:>13} {f'{target:g}x':>6} {verdict}"
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()

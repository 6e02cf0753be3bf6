"""Single-operation kernels through the executor against onnxruntime, one process.

Cases (constants for filters and biases; nnhal in NHWC, onnxruntime in NCHW,
each runtime's native layout, the input transposed once beforehand):

- conv: CONV_2D 1x112x112x32, 64 filters 3x3, SAME, stride 1 (ONNX Conv);
- dw: DEPTHWISE_CONV_2D 1x112x112x64, 3x3, SAME (Conv with group = 64);
- fc: FULLY_CONNECTED 1x1024 -> 1000 (Gemm with transB);
- conv_q8 / dw_q8: the same convolutions in TENSOR_QUANT8_ASYMM (QLinearConv);
- maxpool / avgpool: 1x112x112x64, 2x2 stride 2 (MaxPool / AveragePool);
- tconv: TRANSPOSE_CONV_2D 1x56x56x64 -> 1x112x112x32, 3x3, stride 2 (ConvTranspose);
- gconv: GROUPED_CONV_2D 1x56x56x128, 4 groups, 128 filters 3x3, SAME (Conv, group = 4).

Rounds interleave the runtimes (a block of calls of each per round); the
report gives the median per call in ms and the ratio nnhal / onnxruntime of
the medians, with the range of per-round ratios. ``--threads N`` fixes both
runtimes' pools (nnhal: BLAS via threadpoolctl; onnxruntime: intra-op).

Usage: python bench/kernels_vs_ort.py [--threads N|auto] [--rounds N] [--case NAME ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from nnhal.driver.executor import compile_model
from nnhal.tools import bench_threads

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType, OperationType

T = OperandType
O = OperationType
SAME, VALID = 1, 2


def _onnx(nodes, inputs, outputs, inits):
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, e, s) for n, e, s in inputs],
        [helper.make_tensor_value_info(n, e, s) for n, e, s in outputs],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model.SerializeToString()


def conv_case(rng, depthwise: bool, quant: bool):
    from onnx import TensorProto, helper

    c = 64 if depthwise else 32
    o = 64
    mb = ModelBuilder()
    g = mb.main
    if quant:
        xs, xz, ws, wz, ys, yz = 0.05, 128, 0.01, 120, 0.2, 100
        x = rng.integers(0, 256, (1, 112, 112, c), dtype=np.uint8)
        wshape = (1, 3, 3, o) if depthwise else (o, 3, 3, c)
        w = rng.integers(0, 256, wshape, dtype=np.uint8)
        b = rng.integers(-2000, 2000, o, dtype=np.int32)
        inp = g.input(T.TENSOR_QUANT8_ASYMM, [1, 112, 112, c], xs, xz)
        out = g.output(T.TENSOR_QUANT8_ASYMM, [1, 112, 112, o], ys, yz)
        wc = g.constant(T.TENSOR_QUANT8_ASYMM, w, scale=ws, zero_point=wz)
        bc = g.constant(T.TENSOR_INT32, b, scale=xs * ws)
    else:
        x = rng.standard_normal((1, 112, 112, c), dtype=np.float32)
        wshape = (1, 3, 3, o) if depthwise else (o, 3, 3, c)
        w = (rng.standard_normal(wshape) * 0.1).astype(np.float32)
        b = rng.standard_normal(o).astype(np.float32)
        inp = g.input(T.TENSOR_FLOAT32, [1, 112, 112, c])
        out = g.output(T.TENSOR_FLOAT32, [1, 112, 112, o])
        wc = g.constant(T.TENSOR_FLOAT32, w)
        bc = g.constant(T.TENSOR_FLOAT32, b)
    scalars = (SAME, 1, 1, 1, 0) if depthwise else (SAME, 1, 1, 0)
    op = O.DEPTHWISE_CONV_2D if depthwise else O.CONV_2D
    g.operation(op, [inp, wc, bc, *[g.constant(T.INT32, v) for v in scalars]], [out])
    w_onnx = w.transpose(3, 0, 1, 2) if depthwise else w.transpose(0, 3, 1, 2)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": o if depthwise else 1}
    shape_in, shape_out = [1, c, 112, 112], [1, o, 112, 112]
    if quant:
        elem = TensorProto.UINT8
        node = helper.make_node(
            "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], **attrs
        )
        inits = {
            "xs": np.float32(xs),
            "xz": np.uint8(xz),
            "w": w_onnx,
            "ws": np.float32(ws),
            "wz": np.uint8(wz),
            "ys": np.float32(ys),
            "yz": np.uint8(yz),
            "b": b,
        }
    else:
        elem = TensorProto.FLOAT
        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
        inits = {"w": w_onnx, "b": b}
    onnx = _onnx([node], [("x", elem, shape_in)], [("y", elem, shape_out)], inits)
    return mb.build(), x, onnx, np.ascontiguousarray(x.transpose(0, 3, 1, 2)), (0, 2, 3, 1), quant


def fc_case(rng):
    from onnx import TensorProto, helper

    x = rng.standard_normal((1, 1024), dtype=np.float32)
    w = (rng.standard_normal((1000, 1024)) * 0.05).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    mb = ModelBuilder()
    g = mb.main
    inp = g.input(T.TENSOR_FLOAT32, [1, 1024])
    out = g.output(T.TENSOR_FLOAT32, [1, 1000])
    wc, bc = g.constant(T.TENSOR_FLOAT32, w), g.constant(T.TENSOR_FLOAT32, b)
    g.operation(O.FULLY_CONNECTED, [inp, wc, bc, g.constant(T.INT32, 0)], [out])
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
    f = TensorProto.FLOAT
    onnx = _onnx([node], [("x", f, [1, 1024])], [("y", f, [1, 1000])], {"w": w, "b": b})
    return mb.build(), x, onnx, x, None, False


def pool_case(rng, kind: str):
    from onnx import TensorProto, helper

    x = rng.standard_normal((1, 112, 112, 64), dtype=np.float32)
    mb = ModelBuilder()
    g = mb.main
    inp = g.input(T.TENSOR_FLOAT32, [1, 112, 112, 64])
    out = g.output(T.TENSOR_FLOAT32, [1, 56, 56, 64])
    op = O.MAX_POOL_2D if kind == "max" else O.AVERAGE_POOL_2D
    g.operation(op, [inp, *[g.constant(T.INT32, v) for v in (VALID, 2, 2, 2, 2, 0)]], [out])
    node = helper.make_node(
        "MaxPool" if kind == "max" else "AveragePool",
        ["x"],
        ["y"],
        kernel_shape=[2, 2],
        strides=[2, 2],
    )
    f = TensorProto.FLOAT
    onnx = _onnx([node], [("x", f, [1, 64, 112, 112])], [("y", f, [1, 64, 56, 56])], {})
    return mb.build(), x, onnx, np.ascontiguousarray(x.transpose(0, 3, 1, 2)), (0, 2, 3, 1), False


def transpose_conv_case(rng):
    """TRANSPOSE_CONV_2D 1x56x56x64 -> 1x112x112x32, 3x3 filter, stride 2, explicit
    padding (0, 1) on each axis (ONNX ConvTranspose with pads [0, 0, 1, 1])."""
    from onnx import TensorProto, helper

    c, o = 64, 32
    x = rng.standard_normal((1, 56, 56, c), dtype=np.float32)
    w = (rng.standard_normal((o, 3, 3, c)) * 0.05).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    mb = ModelBuilder()
    g = mb.main
    inp = g.input(T.TENSOR_FLOAT32, [1, 56, 56, c])
    out = g.output(T.TENSOR_FLOAT32, [1, 112, 112, o])
    wc, bc = g.constant(T.TENSOR_FLOAT32, w), g.constant(T.TENSOR_FLOAT32, b)
    scalars = [g.constant(T.INT32, v) for v in (0, 1, 0, 1, 2, 2, 0)]
    g.operation(O.TRANSPOSE_CONV_2D, [inp, wc, bc, *scalars, g.constant(T.BOOL, False)], [out])
    node = helper.make_node(
        "ConvTranspose",
        ["x", "w", "b"],
        ["y"],
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[0, 0, 1, 1],
    )
    f = TensorProto.FLOAT
    onnx = _onnx(
        [node],
        [("x", f, [1, c, 56, 56])],
        [("y", f, [1, o, 112, 112])],
        {"w": np.ascontiguousarray(w.transpose(3, 0, 1, 2)), "b": b},
    )
    return mb.build(), x, onnx, np.ascontiguousarray(x.transpose(0, 3, 1, 2)), (0, 2, 3, 1), False


def grouped_conv_case(rng):
    """GROUPED_CONV_2D 1x56x56x128, 4 groups of 32 channels, 128 filters 3x3, SAME
    (ONNX Conv with group = 4)."""
    from onnx import TensorProto, helper

    c, o, groups = 128, 128, 4
    x = rng.standard_normal((1, 56, 56, c), dtype=np.float32)
    w = (rng.standard_normal((o, 3, 3, c // groups)) * 0.05).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    mb = ModelBuilder()
    g = mb.main
    inp = g.input(T.TENSOR_FLOAT32, [1, 56, 56, c])
    out = g.output(T.TENSOR_FLOAT32, [1, 56, 56, o])
    wc, bc = g.constant(T.TENSOR_FLOAT32, w), g.constant(T.TENSOR_FLOAT32, b)
    scalars = [g.constant(T.INT32, v) for v in (SAME, 1, 1, groups, 0)]
    g.operation(O.GROUPED_CONV_2D, [inp, wc, bc, *scalars, g.constant(T.BOOL, False)], [out])
    node = helper.make_node(
        "Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=groups
    )
    f = TensorProto.FLOAT
    onnx = _onnx(
        [node],
        [("x", f, [1, c, 56, 56])],
        [("y", f, [1, o, 56, 56])],
        {"w": np.ascontiguousarray(w.transpose(0, 3, 1, 2)), "b": b},
    )
    return mb.build(), x, onnx, np.ascontiguousarray(x.transpose(0, 3, 1, 2)), (0, 2, 3, 1), False


CASES = {
    "conv": lambda r: conv_case(r, False, False),
    "dw": lambda r: conv_case(r, True, False),
    "fc": fc_case,
    "conv_q8": lambda r: conv_case(r, False, True),
    "dw_q8": lambda r: conv_case(r, True, True),
    "maxpool": lambda r: pool_case(r, "max"),
    "avgpool": lambda r: pool_case(r, "avg"),
    "tconv": transpose_conv_case,
    "gconv": grouped_conv_case,
}


def _block(fn, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_threads.add_threads_option(parser)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    args = parser.parse_args()
    bench_threads.apply(args.threads)
    import onnxruntime as ort

    print(bench_threads.threads_line())
    rng = np.random.default_rng(0)
    runs = []
    for name in args.case or list(CASES):
        model, x, onnx, x_peer, back, quant = CASES[name](rng)
        compiled = compile_model(model)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = bench_threads.ort_threads()
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(onnx, opts, providers=["CPUExecutionProvider"])
        ours = compiled.run([x])[0]
        theirs = sess.run(None, {"x": x_peer})[0]
        if back is not None:
            theirs = theirs.transpose(back)
        if quant:
            diff = int(np.abs(ours.astype(np.int32) - theirs.astype(np.int32)).max())
            agree = f"max |diff| {diff} (rounding modes differ by at most 1)"
        else:
            agree = f"max |diff| {float(np.abs(ours - theirs).max()):.2e}"
        t_one = _block(lambda c=compiled, x=x: c.run([x]), 1)
        reps = max(1, min(200, int(50 / max(t_one, 0.01))))
        runs.append(
            (
                name,
                lambda c=compiled, x=x: c.run([x]),
                lambda s=sess, x=x_peer: s.run(None, {"x": x}),
                reps,
                agree,
                [],
                [],
            )
        )
    for _ in range(args.rounds):
        for name, ours, theirs, reps, _, a, b in runs:
            a.append(_block(ours, reps))
            b.append(_block(theirs, reps))
    print(f"median of {args.rounds} interleaved rounds, ms per call")
    print(f"{'case':<9} {'nnhal':>9} {'ort':>9} {'ratio':>7} {'range':>13}  agreement")
    for name, _, _, _, agree, a, b in runs:
        ratios = sorted(x / y for x, y in zip(a, b))
        ma, mb = statistics.median(a), statistics.median(b)
        print(
            f"{name:<9} {ma:>9.3f} {mb:>9.3f} {ma / mb:>6.2f}x "
            f"{f'{ratios[0]:.2f}-{ratios[-1]:.2f}x':>13}  {agree}"
        )


if __name__ == "__main__":
    main()

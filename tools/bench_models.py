"""The models suite of ``nnhal bench --suite models``: whole networks against onnxruntime.

Each model is built twice, as an NNAPI model (``nnhal.builder``) and as the same
network in ONNX (each runtime in its own layout: NHWC for NNAPI, NCHW for ONNX;
the input is transposed once, untimed), with the same weights:

=================  ===============================================================
mobilenet-f32      MobileNet-v1-like, 224x224x3, float32: a 3x3 stride-2 CONV_2D,
                   13 DEPTHWISE_CONV_2D + 1x1 CONV_2D blocks (RELU6 fused), a 7x7
                   AVERAGE_POOL_2D and a FULLY_CONNECTED to 1000 (ONNX: Conv, Clip,
                   AveragePool, Gemm)
mobilenet-q8       the 27 convolutions of the same network in TENSOR_QUANT8_ASYMM,
                   every activation quantized on [0, 6] (scale 6/255, zero point 0,
                   so RELU6 is the saturation both runtimes apply); ONNX: QLinearConv
lstm-100           UNIDIRECTIONAL_SEQUENCE_LSTM, 100 steps, input 128, 256 units
                   (ONNX: LSTM)
resnet18-f32       ResNet-18-like, 224x224x3, float32: a 7x7 stride-2 CONV_2D, a
                   3x3 MAX_POOL_2D, 8 residual blocks of two 3x3 CONV_2D (RELU
                   fused in the first and in the ADD; 1x1 stride-2 projections
                   where the stage changes), a 7x7 AVERAGE_POOL_2D and a
                   FULLY_CONNECTED to 1000 (ONNX: Conv, Relu, MaxPool, Add,
                   AveragePool, Gemm)
=================  ===============================================================

The greedy decoder WHILE is the control-flow suite's ``greedy`` workload
(``nnhal bench --suite control-flow --workload greedy``); ``--suite models``
runs it after these, per iteration, at the same thread setting.

nnhal runs ``CompiledModel.run`` of the prepared model (in process, no gRPC);
onnxruntime an ``InferenceSession`` (all graph optimizations, intra-op threads
from ``--threads``). Rounds interleave the two (a block of calls each); the
table gives medians, the ratio of the medians and the range of the per-round
ratios, plus preparation (``Device.prepareModel_1_3``) against session creation.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nnhal.builder import ModelBuilder
from nnhal.types import Model, OperandType, OperationType

T = OperandType
O = OperationType
F32, U8 = T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM
SAME, VALID, RELU6 = 1, 2, 3
#: (output channels, stride) of the 13 depthwise-separable blocks of MobileNet v1
BLOCKS = (
    (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
    (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1),
)  # fmt: skip
ACT_SCALE = 6.0 / 255.0


@dataclass
class ModelCase:
    name: str
    title: str
    model: Model
    inputs: list[np.ndarray]  # NNAPI inputs
    onnx: bytes
    feed: dict  # onnxruntime feed
    back: Callable[[list], list[np.ndarray]]  # onnxruntime outputs -> NNAPI layout
    exact: bool  # quantized: compare as integers (max |diff| reported)


# ---------------------------------------------------------------------------
# ONNX helpers
# ---------------------------------------------------------------------------


def _onnx_model(nodes, inputs, outputs, inits: dict) -> bytes:
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        nodes,
        "model",
        [helper.make_tensor_value_info(n, e, s) for n, e, s in inputs],
        [helper.make_tensor_value_info(n, e, s) for n, e, s in outputs],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model.SerializeToString()


def _layers(rng: np.random.Generator):
    """(kind, in channels, out channels, stride) of the 27 convolutions."""
    layers = [("conv3", 3, 32, 2)]
    c = 32
    for out, stride in BLOCKS:
        layers.append(("dw", c, c, stride))
        layers.append(("pw", c, out, 1))
        c = out
    return layers


def _explicit_same(size: int, k: int, stride: int) -> tuple[int, int, int]:
    """(out size, pad before, pad after) of NNAPI's SAME padding."""
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def _classified(mb, cur, name, size, channels, rng, nodes, inits, case, title) -> ModelCase:
    """A float network's head in both formats (a global average pool, then a
    FULLY_CONNECTED to 1000 logits) and its ModelCase, with a 224x224x3 input.
    ``cur`` / ``name``: the last feature map ([1, size, size, channels]) as NNAPI
    operand and ONNX value; the weights drawn from ``rng`` after the body's."""
    from onnx import TensorProto, helper

    g = mb.main
    pooled = g.temporary(F32, [1, 1, 1, channels])
    g.operation(
        O.AVERAGE_POOL_2D,
        [cur, *(g.constant(T.INT32, v) for v in (VALID, 1, 1, size, size, 0))],
        [pooled],
    )
    flat = g.temporary(F32, [1, channels])
    g.operation(O.RESHAPE, [pooled, g.constant(T.TENSOR_INT32, [1, channels])], [flat])
    fc_w = (rng.standard_normal((1000, channels)) * np.sqrt(1 / channels)).astype(np.float32)
    fc_b = (rng.standard_normal(1000) * 0.1).astype(np.float32)
    logits = g.output(F32, [1, 1000])
    g.operation(
        O.FULLY_CONNECTED,
        [flat, g.constant(F32, fc_w), g.constant(F32, fc_b), g.constant(T.INT32, 0)],
        [logits],
    )
    nodes = [
        *nodes,
        helper.make_node("AveragePool", [name], ["pool"], kernel_shape=[size, size]),
        helper.make_node("Flatten", ["pool"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    onnx = _onnx_model(
        nodes,
        [("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [("y", TensorProto.FLOAT, [1, 1000])],
        {**inits, "fc_w": fc_w, "fc_b": fc_b},
    )
    x = rng.uniform(-1, 1, (1, 224, 224, 3)).astype(np.float32)
    return ModelCase(
        case,
        title,
        mb.build(),
        [x],
        onnx,
        {"x": np.ascontiguousarray(x.transpose(0, 3, 1, 2))},
        lambda outs: [outs[0]],
        False,
    )


# ---------------------------------------------------------------------------
# MobileNet-v1-like, float32
# ---------------------------------------------------------------------------


def mobilenet_f32(seed: int = 0) -> ModelCase:
    from onnx import helper

    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    g = mb.main
    x_in = g.input(F32, [1, 224, 224, 3])
    cur, size = x_in, 224
    nodes, inits, name = [], {}, "x"
    for k, (kind, cin, cout, stride) in enumerate(_layers(rng)):
        ksize = 1 if kind == "pw" else 3
        fan_in = ksize * ksize * (1 if kind == "dw" else cin)
        std = np.sqrt(2.0 / fan_in)
        if kind == "dw":
            w = (rng.standard_normal((1, 3, 3, cout)) * std).astype(np.float32)
            w_onnx = w.transpose(3, 0, 1, 2)
        else:
            w = (rng.standard_normal((cout, ksize, ksize, cin)) * std).astype(np.float32)
            w_onnx = w.transpose(0, 3, 1, 2)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        out_size, before, after = _explicit_same(size, ksize, stride)
        nxt = g.temporary(F32, [1, out_size, out_size, cout])
        scalars = [SAME, stride, stride] + ([1] if kind == "dw" else []) + [RELU6]
        op = O.DEPTHWISE_CONV_2D if kind == "dw" else O.CONV_2D
        ints = (g.constant(T.INT32, v) for v in scalars)
        consts = [g.constant(F32, w), g.constant(F32, b), *ints]
        g.operation(op, [cur, *consts], [nxt])
        inits[f"w{k}"], inits[f"b{k}"] = w_onnx, b
        nodes.append(
            helper.make_node(
                "Conv",
                [name, f"w{k}", f"b{k}"],
                [f"c{k}"],
                kernel_shape=[ksize, ksize],
                strides=[stride, stride],
                pads=[before, before, after, after],
                group=cout if kind == "dw" else 1,
            )
        )
        nodes.append(helper.make_node("Clip", [f"c{k}", "zero", "six"], [f"a{k}"]))
        cur, size, name = nxt, out_size, f"a{k}"
    inits.update(zero=np.float32(0), six=np.float32(6))
    return _classified(
        mb, cur, name, size, 1024, rng, nodes, inits, "mobilenet-f32",
        "MobileNet-v1-like 224x224 float32 (27 convolutions, pool, FC 1000)",
    )  # fmt: skip


# ---------------------------------------------------------------------------
# MobileNet-v1-like, quant8
# ---------------------------------------------------------------------------


def mobilenet_q8(seed: int = 1) -> ModelCase:
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    g = mb.main
    x_in = g.input(U8, [1, 224, 224, 3], ACT_SCALE, 0)
    cur, size = x_in, 224
    nodes, name = [], "x"
    inits: dict = {"s_act": np.float32(ACT_SCALE), "z_act": np.uint8(0)}
    layers = _layers(rng)
    for k, (kind, cin, cout, stride) in enumerate(layers):
        ksize = 1 if kind == "pw" else 3
        fan_in = ksize * ksize * (1 if kind == "dw" else cin)
        # centered weights uniform on +-24 (std ~14); real std ~ sqrt(2 / fan_in) / 2
        w_scale = float(np.sqrt(2.0 / fan_in) / 2 / 14.0)
        shape = (1, 3, 3, cout) if kind == "dw" else (cout, ksize, ksize, cin)
        w = rng.integers(128 - 24, 128 + 25, shape).astype(np.uint8)
        b_scale = float(np.float32(ACT_SCALE) * np.float32(w_scale))
        b = np.round(rng.uniform(0.0, 0.5, cout) / b_scale).astype(np.int32)
        out_size, before, after = _explicit_same(size, ksize, stride)
        make = g.output if k == len(layers) - 1 else g.temporary  # the last map is the output
        nxt = make(U8, [1, out_size, out_size, cout], ACT_SCALE, 0)
        scalars = [SAME, stride, stride] + ([1] if kind == "dw" else []) + [RELU6]
        op = O.DEPTHWISE_CONV_2D if kind == "dw" else O.CONV_2D
        g.operation(
            op,
            [
                cur,
                g.constant(U8, w, scale=w_scale, zero_point=128),
                g.constant(T.TENSOR_INT32, b, scale=b_scale),
                *[g.constant(T.INT32, v) for v in scalars],
            ],
            [nxt],
        )
        w_onnx = w.transpose(3, 0, 1, 2) if kind == "dw" else w.transpose(0, 3, 1, 2)
        inits.update({f"w{k}": w_onnx, f"ws{k}": np.float32(w_scale), f"b{k}": b})
        inits[f"wz{k}"] = np.uint8(128)
        nodes.append(
            helper.make_node(
                "QLinearConv",
                [name, "s_act", "z_act", f"w{k}", f"ws{k}", f"wz{k}", "s_act", "z_act", f"b{k}"],
                [f"a{k}"],
                kernel_shape=[ksize, ksize],
                strides=[stride, stride],
                pads=[before, before, after, after],
                group=cout if kind == "dw" else 1,
            )
        )
        cur, size, name = nxt, out_size, f"a{k}"
    model = mb.build()
    onnx = _onnx_model(
        nodes,
        [("x", TensorProto.UINT8, [1, 3, 224, 224])],
        [(name, TensorProto.UINT8, [1, 1024, 7, 7])],
        inits,
    )
    x = rng.integers(0, 256, (1, 224, 224, 3), dtype=np.uint8)
    return ModelCase(
        "mobilenet-q8",
        "the 27 convolutions of MobileNet-v1-like in TENSOR_QUANT8_ASYMM (QLinearConv)",
        model,
        [x],
        onnx,
        {"x": np.ascontiguousarray(x.transpose(0, 3, 1, 2))},
        lambda outs: [outs[0].transpose(0, 2, 3, 1)],
        True,
    )


# ---------------------------------------------------------------------------
# LSTM, 100 steps
# ---------------------------------------------------------------------------


def lstm_100(seed: int = 5, steps: int = 100, inp: int = 128, units: int = 256) -> ModelCase:
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    s = 1 / np.sqrt(units)
    gates = ("input", "forget", "cell", "output")
    w = {q: rng.uniform(-s, s, (units, inp)).astype(np.float32) for q in gates}
    r = {q: rng.uniform(-s, s, (units, units)).astype(np.float32) for q in gates}
    b = {q: rng.uniform(-0.1, 0.1, units).astype(np.float32) for q in gates}
    mb = ModelBuilder()
    g = mb.main
    xs = g.input(F32, [steps, 1, inp])
    h0 = g.input(F32, [1, units])
    c0 = g.input(F32, [1, units])
    seq = g.output(F32, [steps, 1, units])
    cell = [g.constant(F32, w[q]) for q in gates] + [g.constant(F32, r[q]) for q in gates]
    cell += [g.no_value(F32) for _ in range(3)]  # no peephole
    cell += [g.constant(F32, b[q]) for q in gates]
    cell += [g.no_value(F32), g.no_value(F32)]  # no projection
    scalars = [g.constant(T.INT32, 4), g.constant(T.FLOAT32, 0.0), g.constant(T.FLOAT32, 0.0)]
    scalars.append(g.constant(T.BOOL, True))  # time major
    g.operation(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM,
        [xs, *cell, h0, c0, *scalars, *(g.no_value(F32) for _ in range(4))],
        [seq],
    )
    order = ("input", "output", "forget", "cell")  # ONNX's i, o, f, c
    w_onnx = np.concatenate([w[q] for q in order])[None]
    r_onnx = np.concatenate([r[q] for q in order])[None]
    b_onnx = np.concatenate([*(b[q] for q in order), np.zeros(4 * units, np.float32)])[None]
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["y"], hidden_size=units)
    f = TensorProto.FLOAT
    onnx = _onnx_model(
        [node],
        [("x", f, [steps, 1, inp]), ("h0", f, [1, 1, units]), ("c0", f, [1, 1, units])],
        [("y", f, [steps, 1, 1, units])],
        {"W": w_onnx, "R": r_onnx, "B": b_onnx},
    )
    x = rng.uniform(-1, 1, (steps, 1, inp)).astype(np.float32)
    zeros = np.zeros((1, units), np.float32)
    return ModelCase(
        "lstm-100",
        f"UNIDIRECTIONAL_SEQUENCE_LSTM, {steps} steps, input {inp}, {units} units",
        mb.build(),
        [x, zeros, zeros],
        onnx,
        {"x": x, "h0": zeros[None], "c0": zeros[None]},
        lambda outs: [outs[0][:, 0]],
        False,
    )


# ---------------------------------------------------------------------------
# ResNet-18-like, float32
# ---------------------------------------------------------------------------

#: (output channels, first block's stride) of ResNet-18's four stages of two blocks
STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))
RELU = 1


def resnet18_f32(seed: int = 2) -> ModelCase:
    """ResNet-18's layout with random weights (batch norm folded into the biases)."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    g = mb.main
    nodes, inits = [], {}
    count = [0]

    def conv(cur, name, size, cin, cout, k, stride, relu):
        """CONV_2D (SAME padding) in both formats: (operand, ONNX name, size)."""
        n = count[0]
        count[0] += 1
        w = (rng.standard_normal((cout, k, k, cin)) * np.sqrt(2.0 / (k * k * cin))).astype(
            np.float32
        )
        b = (rng.standard_normal(cout) * 0.05).astype(np.float32)
        out_size, before, after = _explicit_same(size, k, stride)
        nxt = g.temporary(F32, [1, out_size, out_size, cout])
        scalars = (SAME, stride, stride, RELU if relu else 0)
        ints = [g.constant(T.INT32, v) for v in scalars]
        g.operation(O.CONV_2D, [cur, g.constant(F32, w), g.constant(F32, b), *ints], [nxt])
        inits[f"w{n}"], inits[f"b{n}"] = w.transpose(0, 3, 1, 2), b
        pads = [before, before, after, after]
        attrs = {"kernel_shape": [k, k], "strides": [stride, stride], "pads": pads}
        nodes.append(helper.make_node("Conv", [name, f"w{n}", f"b{n}"], [f"c{n}"], **attrs))
        if not relu:
            return nxt, f"c{n}", out_size
        nodes.append(helper.make_node("Relu", [f"c{n}"], [f"r{n}"]))
        return nxt, f"r{n}", out_size

    x_in = g.input(F32, [1, 224, 224, 3])
    cur, name, size = conv(x_in, "x", 224, 3, 64, 7, 2, True)
    out_size, before, after = _explicit_same(size, 3, 2)
    pooled = g.temporary(F32, [1, out_size, out_size, 64])
    g.operation(
        O.MAX_POOL_2D, [cur, *(g.constant(T.INT32, v) for v in (SAME, 2, 2, 3, 3, 0))], [pooled]
    )
    pads = [before, before, after, after]
    nodes.append(
        helper.make_node("MaxPool", [name], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=pads)
    )
    cur, name, size, c = pooled, "p", out_size, 64
    for block, (cout, first_stride) in enumerate(b for s in STAGES for b in (s, (s[0], 1))):
        stride = first_stride
        mid, mid_name, out_size = conv(cur, name, size, c, cout, 3, stride, True)
        res, res_name, _ = conv(mid, mid_name, out_size, cout, cout, 3, 1, False)
        if stride != 1 or c != cout:  # a 1x1 projection of the block's input
            cur, name, _ = conv(cur, name, size, c, cout, 1, stride, False)
        added = g.temporary(F32, [1, out_size, out_size, cout])
        g.operation(O.ADD, [res, cur, g.constant(T.INT32, RELU)], [added])
        nodes.append(helper.make_node("Add", [res_name, name], [f"s{block}"]))
        nodes.append(helper.make_node("Relu", [f"s{block}"], [f"a{block}"]))
        cur, name, size, c = added, f"a{block}", out_size, cout
    return _classified(
        mb, cur, name, size, c, rng, nodes, inits, "resnet18-f32",
        "ResNet-18-like 224x224 float32 (20 convolutions, 16 of them 3x3, 8 residual ADDs)",
    )  # fmt: skip


CASES = {
    "mobilenet-f32": mobilenet_f32,
    "mobilenet-q8": mobilenet_q8,
    "lstm-100": lstm_100,
    "resnet18-f32": resnet18_f32,
}


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


def _block(fn: Callable[[], object], reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e3


def _agreement(case: ModelCase, ours: np.ndarray, theirs: np.ndarray) -> str:
    if case.exact:
        diff = np.abs(ours.astype(np.int32) - theirs.astype(np.int32))
        return f"max |diff| {int(diff.max())} ({float((diff > 1).mean()) * 100:.2f}% > 1)"
    return f"max |diff| {float(np.abs(ours - theirs).max()):.2e}"


def run_models(names: list[str] | None, rounds: int, ort_threads: int) -> list[dict]:
    """Prepare, check and time every case; one result dict per case."""
    import onnxruntime as ort
    from nnhal.driver.device import Device
    from nnhal.tools.bench_measure import forget_preparations

    device = Device()
    results = []
    for name in names or list(CASES):
        case = CASES[name]()
        options = ort.SessionOptions()
        options.intra_op_num_threads = ort_threads
        options.inter_op_num_threads = 1
        # preparation and session creation: medians of 3 alternating, after one of each
        # (one-time imports, allocator warm-up); a model's first preparation with the
        # device's kept check results and the compiled code emptied before each
        first_ms, prepare_ms, session_ms = [], [], []
        device.prepareModel_1_3(case.model)
        ort.InferenceSession(case.onnx, options, providers=["CPUExecutionProvider"])
        for _ in range(3):
            forget_preparations(device)
            t0 = time.perf_counter()
            device.prepareModel_1_3(case.model)
            first_ms.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            prepared = device.prepareModel_1_3(case.model)
            prepare_ms.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            session = ort.InferenceSession(case.onnx, options, providers=["CPUExecutionProvider"])
            session_ms.append((time.perf_counter() - t0) * 1e3)
        compiled = prepared.compiled

        def ours(c=compiled, xs=case.inputs):
            return c.run(xs)

        def theirs(s=session, feed=case.feed):
            return s.run(None, feed)

        agree = _agreement(case, ours()[0], case.back(theirs())[0])
        once = _block(ours, 1)
        reps = max(1, min(50, int(200 / max(once, 0.1))))
        a, b = [], []
        for _ in range(rounds):
            a.append(_block(ours, reps))
            b.append(_block(theirs, reps))
        ratios = sorted(x / y for x, y in zip(a, b))
        results.append(
            {
                "name": case.name,
                "title": case.title,
                "nnhal_ms": statistics.median(a),
                "onnxruntime_ms": statistics.median(b),
                "ratio": statistics.median(a) / statistics.median(b),
                "ratio_range": [ratios[0], ratios[-1]],
                "prepare_first_ms": statistics.median(first_ms),
                "prepare_ms": statistics.median(prepare_ms),
                "session_ms": statistics.median(session_ms),
                "agreement": agree,
                "rounds": rounds,
                "reps": reps,
            }
        )
    return results


def print_models(results: list[dict], threads: str, out) -> None:
    print(f"models suite: median of interleaved rounds, ms per inference; {threads}", file=out)
    print(
        f"  {'model':<14} {'nnhal':>9} {'ort':>9} {'ratio':>7} {'round ratios':>13} "
        f"{'prepare ms: first':>18} {'again':>6} {'session ms':>11}  agreement",
        file=out,
    )
    for r in results:
        lo, hi = r["ratio_range"]
        print(
            f"  {r['name']:<14} {r['nnhal_ms']:>9.2f} {r['onnxruntime_ms']:>9.2f} "
            f"{r['ratio']:>6.2f}x {f'{lo:.2f}-{hi:.2f}x':>13} {r['prepare_first_ms']:>18.1f} "
            f"{r['prepare_ms']:>6.1f} {r['session_ms']:>11.1f}  {r['agreement']}",
            file=out,
        )

"""Mappings beyond the first cut: ONNX Runtime's com.microsoft QLinear operators, per-axis
and per-channel quantization, batched MatMul, MatMul with a run-time B, and Resize.

Oracles: ONNX Runtime for com.microsoft operators and per-channel QLinearConv (the
reference implementation has no contrib operators), onnx.reference for the rest. Quantized
results may differ by one step (rounding of ties), floats by float32 reassociation.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from nnhal.importers.onnx import import_onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_exec_helper import execute

F, U8, I8 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8
RNG = np.random.default_rng(11)


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _c(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _model(nodes, inputs, outputs, inits=(), opsets=(("", 17),)):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _run(m, feeds):
    result = import_onnx(m)
    assert result.ok, result.unsupported
    return result, result.onnx_outputs(execute(result.model, result.nnapi_inputs(feeds)))


def _ort(m, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


# ---- com.microsoft QLinear operators ------------------------------------------------------


def _contrib_model():
    inits = [_c("s1", np.float32(0.02)), _c("z1", np.uint8(128)), _c("s2", np.float32(0.03)),
             _c("z2", np.uint8(100)), _c("so", np.float32(0.05)), _c("zo", np.uint8(120)),
             _c("sg", np.float32(1 / 256)), _c("zg", np.uint8(0))]  # fmt: skip
    ms = "com.microsoft"
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["xq"]),
        helper.make_node("QuantizeLinear", ["y", "s2", "z2"], ["yq"]),
        helper.make_node(
            "QLinearAdd", ["xq", "s1", "z1", "yq", "s2", "z2", "so", "zo"], ["aq"], domain=ms
        ),
        helper.make_node(
            "QLinearMul", ["xq", "s1", "z1", "yq", "s2", "z2", "so", "zo"], ["mq"], domain=ms
        ),
        helper.make_node("QLinearSigmoid", ["aq", "so", "zo", "sg", "zg"], ["gq"], domain=ms),
        helper.make_node(
            "QLinearAveragePool",
            ["mq", "so", "zo", "so", "zo"],
            ["pq"],
            domain=ms,
            kernel_shape=[2, 2],
            strides=[1, 2],
        ),
    ]
    outs = [_vi("aq", U8, [1, 2, 4, 4]), _vi("mq", U8, [1, 2, 4, 4]), _vi("gq", U8, [1, 2, 4, 4]),
            _vi("pq", U8, [1, 2, 3, 2])]  # fmt: skip
    ins = [_vi("x", F, [1, 2, 4, 4]), _vi("y", F, [1, 2, 4, 4])]
    return _model(nodes, ins, outs, inits, (("", 17), (ms, 1)))


def test_contrib_qlinear_operators_agree_with_onnxruntime():
    m = _contrib_model()
    feeds = {"x": RNG.uniform(-2, 2, (1, 2, 4, 4)).astype(np.float32),
             "y": RNG.uniform(-2, 2, (1, 2, 4, 4)).astype(np.float32)}  # fmt: skip
    result, got = _run(m, feeds)
    ops = result.summary()["operations"]
    assert ops["ADD"] == 1 and ops["MUL"] == 1 and ops["LOGISTIC"] == 1
    assert ops["AVERAGE_POOL_2D"] == 1
    want = _ort(m, feeds)
    for name, w in want.items():
        assert got[name].shape == w.shape, name
        diff = np.abs(got[name].astype(int) - w.astype(int)).max()
        assert diff <= 1, (name, diff)


def test_qlinear_sigmoid_with_another_output_scale_is_refused():
    ms = "com.microsoft"
    inits = [_c("s", np.float32(0.1)), _c("z", np.uint8(0)), _c("so", np.float32(0.01))]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
        helper.make_node("QLinearSigmoid", ["xq", "s", "z", "so", "z"], ["y"], domain=ms),
    ]
    m = _model(nodes, [_vi("x", F, [4])], [_vi("y", U8, [4])], inits, (("", 17), (ms, 1)))
    result = import_onnx(m)
    assert not result.ok
    assert "LOGISTIC gives 1/256" in result.unsupported[0].reason


# ---- per-axis quantization -----------------------------------------------------------------


def test_per_axis_quantize_and_dequantize():
    scales = np.array([0.02, 0.05, 0.1], np.float32)
    zps = np.array([10, 128, 250], np.uint8)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1),
    ]
    m = _model(nodes, [_vi("x", F, [2, 3, 4])], [_vi("q", U8, [2, 3, 4]), _vi("y", F, [2, 3, 4])],
               [_c("s", scales), _c("z", zps)], (("", 19),))  # fmt: skip
    feeds = {"x": RNG.uniform(-3, 3, (2, 3, 4)).astype(np.float32)}
    _, got = _run(m, feeds)
    want = dict(zip(["q", "y"], ReferenceEvaluator(m).run(None, feeds)))
    assert np.abs(got["q"].astype(int) - want["q"].astype(int)).max() <= 1
    step = scales.reshape(1, 3, 1)
    assert (np.abs(got["y"] - want["y"]) <= step * 1.001).all()
    # exact where the quantized values agree (the dequantization itself is exact)
    same = got["q"] == want["q"]
    np.testing.assert_array_equal(got["y"][same], want["y"][same])


def test_blocked_quantization_is_refused():
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=2),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=2),
    ]
    m = _model(nodes, [_vi("x", F, [2, 4])], [_vi("y", F, [2, 4])],
               [_c("s", np.ones((2, 2), np.float32)), _c("z", np.zeros((2, 2), np.uint8))],
               (("", 21),))  # fmt: skip
    result = import_onnx(m)
    assert not result.ok
    assert "blocked quantization" in result.unsupported[0].reason


def test_per_channel_qlinear_conv_agrees_with_onnxruntime():
    w = RNG.integers(-60, 60, (4, 3, 3, 3)).astype(np.int8)
    inits = [_c("xs", np.float32(0.05)), _c("xz", np.uint8(128)), _c("w", w),
             _c("ws", np.array([0.01, 0.02, 0.005, 0.03], np.float32)),
             _c("wz", np.zeros(4, np.int8)), _c("ys", np.float32(0.2)), _c("yz", np.uint8(100)),
             _c("b", RNG.integers(-500, 500, 4).astype(np.int32))]  # fmt: skip
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node(
            "QLinearConv",
            ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
            ["y"],
            pads=[1, 1, 1, 1],
        ),
    ]
    m = _model(nodes, [_vi("x", F, [1, 3, 5, 5])], [_vi("y", U8, [1, 4, 5, 5])], inits)
    feeds = {"x": RNG.uniform(-3, 3, (1, 3, 5, 5)).astype(np.float32)}
    result, got = _run(m, feeds)
    assert result.summary()["operations"].get("CONV_2D") == 1
    want = _ort(m, feeds)["y"]
    assert np.abs(got["y"].astype(int) - want.astype(int)).max() <= 1


# ---- MatMul --------------------------------------------------------------------------------


@pytest.mark.parametrize(("sa", "sb", "const_b"), [
    ((3, 4), (4, 5), False),            # run-time B: TRANSPOSE + FULLY_CONNECTED
    ((2, 3, 4), (2, 4, 5), True),       # batched, constant B
    ((3, 1, 2, 4), (1, 2, 4, 3), True),  # broadcast batches
    ((2, 3, 4), (4,), False),           # rank-1 run-time B
])  # fmt: skip
def test_matmul_shapes(sa, sb, const_b):
    a = RNG.standard_normal(sa).astype(np.float32)
    b = RNG.standard_normal(sb).astype(np.float32)
    out = np.matmul(a, b).shape
    ins = [_vi("a", F, list(sa))] + ([] if const_b else [_vi("b", F, list(sb))])
    m = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], ins, [_vi("y", F, list(out))],
               [_c("b", b)] if const_b else [])  # fmt: skip
    feeds = {"a": a} if const_b else {"a": a, "b": b}
    _, got = _run(m, feeds)
    np.testing.assert_allclose(got["y"], np.matmul(a, b), rtol=1e-5, atol=1e-5)


def test_matmul_with_too_many_batches_is_refused():
    m = _model(
        [helper.make_node("MatMul", ["a", "b"], ["y"])],
        [_vi("a", F, [65, 2, 2]), _vi("b", F, [65, 2, 2])],
        [_vi("y", F, [65, 2, 2])],
    )
    result = import_onnx(m)
    assert not result.ok and "65 batches" in result.unsupported[0].reason


# ---- Resize ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "transform", "nearest", "out_hw"), [
    ("nearest", "half_pixel", "round_prefer_floor", (8, 6)),  # no ties when upsampling x2
    ("nearest", "asymmetric", "floor", (8, 9)),
    ("nearest", "align_corners", "round_prefer_ceil", (7, 5)),
    ("linear", "half_pixel", None, (8, 6)),
    ("linear", "align_corners", None, (7, 5)),
    ("linear", "asymmetric", None, (2, 3)),
])  # fmt: skip
def test_resize(mode, transform, nearest, out_hw):
    attrs = {"mode": mode, "coordinate_transformation_mode": transform}
    if nearest:
        attrs["nearest_mode"] = nearest
    sizes = np.array([1, 2, *out_hw], np.int64)
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    m = _model([node], [_vi("x", F, [1, 2, 4, 3])], [_vi("y", F, [1, 2, *out_hw])],
               [_c("sizes", sizes)])  # fmt: skip
    feeds = {"x": RNG.standard_normal((1, 2, 4, 3)).astype(np.float32)}
    _, got = _run(m, feeds)
    np.testing.assert_allclose(got["y"], ReferenceEvaluator(m).run(None, feeds)[0],
                               rtol=1e-5, atol=1e-5)  # fmt: skip


def test_resize_nearest_without_an_nnapi_equivalent_is_refused():
    # asymmetric upsampling by 2 puts every other sample half-way; round_prefer_ceil then
    # picks indices no NNAPI flag setting gives
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest",
                            coordinate_transformation_mode="asymmetric",
                            nearest_mode="round_prefer_ceil")  # fmt: skip
    m = _model([node], [_vi("x", F, [1, 1, 2, 2])], [_vi("y", F, [1, 1, 4, 4])],
               [_c("sizes", np.array([1, 1, 4, 4], np.int64))])  # fmt: skip
    result = import_onnx(m)
    assert not result.ok
    assert "for the sizes [2, 2] -> [4, 4]" in result.unsupported[0].reason

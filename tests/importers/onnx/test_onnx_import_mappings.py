"""Mappings the node tests cover thinly: folded shape arithmetic, NCHW convolutions and
pools (depthwise, grouped, SAME padding), a quantized pipeline, Loop scan outputs, nested
control flow. The oracle is ONNX's reference implementation (onnx.reference)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from nnhal.importers.onnx import import_onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_exec_helper import execute

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(3)


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _check(m, feeds, rtol=1e-4, atol=1e-5):
    result = import_onnx(m)
    assert result.ok, result.unsupported
    got = result.onnx_outputs(execute(result.model, result.nnapi_inputs(feeds)))
    want = ReferenceEvaluator(m).run(None, feeds)
    for port, w in zip(result.outputs, want):
        np.testing.assert_allclose(got[port.name], w, rtol=rtol, atol=atol, err_msg=port.name)
        assert got[port.name].dtype == w.dtype
    return result


def _c(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def test_exported_shape_arithmetic_folds_away():
    # y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) + Range(0, 4, 1)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["d0"], axis=0),
        helper.make_node("Unsqueeze", ["d0", "ax0"], ["d0v"]),
        helper.make_node("Concat", ["d0v", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("Range", ["r0", "r4", "r1"], ["ramp"]),
        helper.make_node("Cast", ["ramp"], ["rampf"], to=F),
        helper.make_node("Add", ["flat", "rampf"], ["y"]),
    ]
    inits = [_c("zero", np.array(0, np.int64)), _c("ax0", np.array([0], np.int64)),
             _c("minus1", np.array([-1], np.int64)), _c("r0", np.array(0, np.int64)),
             _c("r4", np.array(4, np.int64)), _c("r1", np.array(1, np.int64))]  # fmt: skip
    m = _model(nodes, [_vi("x", F, [3, 2, 2])], [_vi("y", F, [3, 4])], inits)
    result = _check(m, {"x": RNG.standard_normal((3, 2, 2)).astype(np.float32)})
    # Shape, Gather, Unsqueeze, Concat, Range and Cast left no operation behind
    assert result.summary()["operations"] == {"ADD": 1, "RESHAPE": 1}


@pytest.mark.parametrize(
    ("group", "w_shape", "attrs"),
    [
        (1, (4, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 1]}),
        (1, (4, 3, 3, 2), {"auto_pad": "SAME_UPPER", "dilations": [2, 1]}),
        (3, (6, 1, 3, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),  # depthwise x2
        (3, (3, 1, 2, 2), {}),  # depthwise
    ],
)
def test_conv_nchw(group, w_shape, attrs):
    x = RNG.standard_normal((1, 3, 7, 6)).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    b = RNG.standard_normal(w_shape[0]).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, **attrs)
    y = _vi("y", F, ["n", "c", "h", "w"])  # the importer's shape inference resolves it
    m = _model([node], [_vi("x", F, x.shape)], [y], [_c("w", w), _c("b", b)])
    _check(m, {"x": x})


def test_grouped_conv_and_pools():
    x = RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)
    w = RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], group=2, pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["p"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["a"], ["y"]),
    ]
    m = _model(nodes, [_vi("x", F, x.shape)], [_vi("y", F, [1, 6, 1, 1])], [_c("w", w)])
    result = _check(m, {"x": x})
    assert result.summary()["operations"]["GROUPED_CONV_2D"] == 1


def test_quantized_pipeline():
    x = RNG.uniform(-1, 1, (1, 2, 5, 5)).astype(np.float32)
    w = RNG.integers(-20, 20, (3, 2, 3, 3)).astype(np.uint8) + 128
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    inits = [_c("xs", np.float32(2 / 255)), _c("xz", np.uint8(128)), _c("w", w),
             _c("ws", np.float32(0.01)), _c("wz", np.uint8(128)), _c("ys", np.float32(0.02)),
             _c("yz", np.uint8(120))]  # fmt: skip
    m = _model(nodes, [_vi("x", F, x.shape)], [_vi("y", F, [1, 3, 3, 3])], inits, opset=21)
    result = import_onnx(m)
    ops = result.summary()["operations"]
    assert ops == {"CONV_2D": 1, "DEQUANTIZE": 1, "QUANTIZE": 1}
    # one output step (0.02) of difference at most: rounding of ties may differ
    _check(m, {"x": x}, rtol=0, atol=0.0201)


def test_loop_scan_output_with_constant_trip_count_and_nested_if():
    # for i in range(5): acc = acc * 2 if acc.sum() > 3 else acc + 1; emit acc
    then_g = helper.make_graph([helper.make_node("Mul", ["acc", "two"], ["t"])], "then", [],
                               [_vi("t", F, [2])])  # fmt: skip
    else_g = helper.make_graph([helper.make_node("Add", ["acc", "one"], ["e"])], "else", [],
                               [_vi("e", F, [2])])  # fmt: skip
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["acc"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "three"], ["big"]),
         helper.make_node("If", ["big"], ["acc_out"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Identity", ["acc_out"], ["emit"])],
        "body",
        [_vi("i", I64, []), _vi("c", B, []), _vi("acc", F, [2])],
        [_vi("c_out", B, []), _vi("acc_out", F, [2]), _vi("emit", F, [2])],
    )  # fmt: skip
    loop = helper.make_node("Loop", ["m", "", "x"], ["final", "trace"], body=body)
    inits = [_c("m", np.array(5, np.int64)), _c("two", np.float32(2)), _c("one", np.float32(1)),
             _c("three", np.float32(3))]  # fmt: skip
    m = _model([loop], [_vi("x", F, [2])], [_vi("final", F, [2]), _vi("trace", F, [5, 2])],
               inits)  # fmt: skip
    result = import_onnx(m)
    assert result.ok, result.unsupported
    for x in (np.array([0.0, 0.5], np.float32), np.array([3.0, 1.0], np.float32)):
        got = result.onnx_outputs(execute(result.model, result.nnapi_inputs({"x": x})))
        acc, trace = x.copy(), []  # the loop in Python (onnx.reference fails on this model)
        for _ in range(5):
            acc = acc * 2 if acc.sum() > 3 else acc + 1
            trace.append(acc)
        np.testing.assert_allclose(got["final"], acc)
        np.testing.assert_allclose(got["trace"], np.array(trace))
    ops = result.summary()["operations"]
    assert ops["WHILE"] == 1 and ops["IF"] == 1


def test_loop_with_data_dependent_condition_and_scan_output():
    # for 8 steps at most: acc += 1; emit acc; stop once acc >= limit
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "one"], ["acc_out"]),
         helper.make_node("Less", ["acc_out", "limit"], ["c_vec"]),
         helper.make_node("Squeeze", ["c_vec"], ["c_out"]),
         helper.make_node("Identity", ["acc_out"], ["emit"])],
        "body",
        [_vi("i", I64, []), _vi("c", B, []), _vi("acc", F, [1])],
        [_vi("c_out", B, []), _vi("acc_out", F, [1]), _vi("emit", F, [1])],
    )  # fmt: skip
    loop = helper.make_node("Loop", ["m", "", "x"], ["final", "trace"], body=body)
    m = _model([loop], [_vi("x", F, [1]), _vi("limit", F, [1])],
               [_vi("final", F, [1]), _vi("trace", F, ["k", 1])],
               [_c("one", np.float32(1)), _c("m", np.array(8, np.int64))])  # fmt: skip
    result = import_onnx(m)
    assert result.ok, result.unsupported
    for x, limit in ((0.0, 3.0), (0.0, 20.0), (0.5, 3.0), (5.0, 3.0)):
        trip = 8
        feeds = {"x": np.array([x], np.float32), "limit": np.array([limit], np.float32)}
        got = result.onnx_outputs(execute(result.model, result.nnapi_inputs(feeds)))
        acc, trace = x, []  # the loop in Python (onnx.reference mishandles this one)
        for _ in range(trip):
            acc += 1
            trace.append([acc])
            if not acc < limit:
                break
        np.testing.assert_allclose(got["final"], [acc])
        np.testing.assert_allclose(got["trace"], np.array(trace, np.float32))

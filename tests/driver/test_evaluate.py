"""evaluate(): one operation from a REPL; the verbose trace of an execution."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.evaluate import Tensor, evaluate
from nnhal.driver.executor import compile_model

from nnhal.builder import ModelBuilder
from nnhal.errors import InvalidArgument
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32 = np.float32


def test_add_by_name_with_a_named_parameter():
    a, b = np.array([1.5, -2.0, 3.0], F32), np.array([0.5, 0.5, 0.5], F32)
    (out,) = evaluate("ADD", [a, b], {"activation": 0})
    np.testing.assert_array_equal(out, a + b)
    (relu,) = evaluate(Op.ADD, [a, b, 1])  # the fused RELU, positionally
    np.testing.assert_array_equal(relu, np.maximum(a + b, 0))


def test_output_type_from_the_registration():
    (idx,) = evaluate("ARGMAX", [np.array([[1, 5, 2], [7, 0, 1]], F32), 1])
    assert idx.dtype == np.int32 and idx.tolist() == [1, 0]
    (less,) = evaluate("LESS", [np.array([1, 2], F32), np.array([2, 2], F32)])
    assert less.tolist() == [True, False]


def test_conv_implicit_and_explicit_padding_by_name():
    x = np.arange(9, dtype=F32).reshape(1, 3, 3, 1)
    w = np.ones((1, 2, 2, 1), F32)
    bias = np.zeros(1, F32)
    (valid,) = evaluate("CONV_2D", [x, w, bias], {
        "padding": 2, "stride_width": 1, "stride_height": 1, "activation": 0})  # fmt: skip
    (explicit,) = evaluate("CONV_2D", [x, w, bias], {
        "padding_left": 0, "padding_right": 0, "padding_top": 0, "padding_bottom": 0,
        "stride_width": 1, "stride_height": 1, "activation": 0})  # fmt: skip
    want = np.array([[0 + 1 + 3 + 4, 1 + 2 + 4 + 5], [3 + 4 + 6 + 7, 4 + 5 + 7 + 8]], F32)
    np.testing.assert_array_equal(valid[0, :, :, 0], want)
    np.testing.assert_array_equal(explicit, valid)


def test_quantized_output_spec():
    (q,) = evaluate(
        "QUANTIZE",
        [np.array([0.5, 1.0, -100.0], F32)],
        outputs=[Tensor(type=T.TENSOR_QUANT8_ASYMM, scale=0.5, zero_point=10)],
    )
    assert q.dtype == np.uint8 and q.tolist() == [11, 12, 0]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: evaluate("NOPE"), "unknown operation 'NOPE'"),
        (lambda: evaluate("ADD", [np.ones(2, F32)], {"bogus": 1}), "ADD has no input 'bogus'"),
        (lambda: evaluate("ADD", [np.ones(3, F32), np.ones(2, F32), 0]), "cannot be broadcast"),
        (
            lambda: evaluate("ADD", [np.ones(2, F32), np.ones(2, F32), 0], {"activation": 0}),
            "given twice",
        ),
        (
            lambda: evaluate("ADD", [np.ones(2, np.float64), np.ones(2, np.float64), 0]),
            "no NNAPI tensor type for numpy dtype float64",
        ),
    ],
)
def test_bad_arguments_are_invalid_argument(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def _while_counter():
    """WHILE i < n: i = i + 1; x = x * 2."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    ci, cx, cn = cond.input(T.TENSOR_INT32, [1]), cond.input(T.TENSOR_FLOAT32, [2]), \
        cond.input(T.TENSOR_INT32, [1])  # fmt: skip
    del cx
    cond.operation(Op.LESS, [ci, cn], [cond.output(T.TENSOR_BOOL8, [1])])
    bi, bx, _ = body.input(T.TENSOR_INT32, [1]), body.input(T.TENSOR_FLOAT32, [2]), \
        body.input(T.TENSOR_INT32, [1])  # fmt: skip
    act = body.constant(T.INT32, 0)
    oi, ox = body.output(T.TENSOR_INT32, [1]), body.output(T.TENSOR_FLOAT32, [2])
    body.operation(Op.ADD, [bi, body.constant(T.TENSOR_INT32, [1]), act], [oi])
    body.operation(Op.MUL, [bx, body.constant(T.TENSOR_FLOAT32, [2.0, 2.0]), act], [ox])
    g = mb.main
    i0, x0, n = g.input(T.TENSOR_INT32, [1]), g.input(T.TENSOR_FLOAT32, [2]), \
        g.input(T.TENSOR_INT32, [1])  # fmt: skip
    out_i, out_x = g.output(T.TENSOR_INT32, [1]), g.output(T.TENSOR_FLOAT32, [2])
    g.operation(Op.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), i0, x0, n],
                [out_i, out_x])  # fmt: skip
    return mb.build()


def test_trace_reports_every_operation_in_order_with_values():
    compiled = compile_model(_while_counter())
    args = [np.array([0], np.int32), np.array([1.0, -3.0], F32), np.array([2], np.int32)]
    lines: list[str] = []
    traced = compiled.run(args, trace=lines.append)
    plain = compiled.run(args)
    for a, b in zip(traced, plain):
        np.testing.assert_array_equal(a, b)
    assert lines[:3] == [
        "main input 0: int32[1] [0]",
        "main input 1: float32[2] [1.0, -3.0]",
        "main input 2: int32[1] [2]",
    ]
    ops = [line.split(":")[0] for line in lines[3:]]
    # cond, body (ADD, MUL) twice, then the cond that stops the loop
    assert ops == [
        "LESS (subgraph 1, operation 0)",
        "ADD (subgraph 2, operation 0)", "MUL (subgraph 2, operation 1)",
        "LESS (subgraph 1, operation 0)",
        "ADD (subgraph 2, operation 0)", "MUL (subgraph 2, operation 1)",
        "LESS (subgraph 1, operation 0)",
    ]  # fmt: skip
    assert lines[5].endswith(
        "(float32[2] [1.0, -3.0], float32[2] [2.0, 2.0]) -> (float32[2] [2.0, -6.0])"
    )
    assert lines[-1].endswith("-> (bool[1] [False])")


def test_trace_summarises_large_tensors():
    from nnhal.driver.executor.verbose import describe

    assert describe(np.arange(100, dtype=F32).reshape(10, 10)) == (
        "float32[10,10] min=0 max=99 mean=49.5"
    )
    assert describe(np.zeros(20, bool)) == "bool[20] true=0 of 20"

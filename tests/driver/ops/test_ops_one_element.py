"""Broadcasting binary operations given a [1] operand as a 0-d view (_operand_rules)."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops._operand_rules import one_element_as_scalar
from ops_harness import act, context, f32, i32, out

from nnhal.types import FusedActivationFunc as Act
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

ONE = (1,)
BINARY = [Op.ADD, Op.SUB, Op.MUL, Op.DIV]
COMPARE = [Op.EQUAL, Op.NOT_EQUAL, Op.LESS, Op.GREATER_EQUAL]
PLAIN = {
    Op.ADD: np.add,
    Op.SUB: np.subtract,
    Op.MUL: np.multiply,
    Op.EQUAL: np.equal,
    Op.NOT_EQUAL: np.not_equal,
    Op.LESS: np.less,
    Op.GREATER_EQUAL: np.greater_equal,
}


def _kernel(op, a, b, activation=Act.NONE):
    ins = [a, b, act(activation)] if op in BINARY else [a, b]
    result = T.TENSOR_BOOL8 if op in COMPARE else a.type
    ctx = context(op, ins, [out(result)])
    return ctx.op.kernel(ctx)


@pytest.mark.parametrize("op", [Op.ADD, Op.SUB, Op.MUL, *COMPARE])
@pytest.mark.parametrize("make", [f32, i32])
@pytest.mark.parametrize("dims", [((1, 1024), ONE), (ONE, (3, 4)), ((0, 5), ONE), ((7,), ONE)])
def test_a_one_element_side_gives_what_numpy_broadcasting_gives(op, make, dims):
    a, b = make(dims[0] if 0 not in dims[0] else (2, 5), dims=dims[0]), make(dims[1])
    kernel = _kernel(op, a, b)
    got = kernel(a.data, b.data)
    want = PLAIN[op](a.data, b.data)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert kernel is not PLAIN[op]  # wrapped: one side is [1], the other has more


def test_other_declarations_keep_the_plain_function():
    for a, b in [(f32(ONE), f32(ONE)), (f32((1, 1)), f32(ONE)), (f32((2, 3)), f32((2, 3)))]:
        assert _kernel(Op.ADD, a, b) is np.add
    assert _kernel(Op.ADD, f32(ONE, dims=None), f32((2, 3))) is np.add  # unknown rank


def test_other_runtime_shapes_are_handed_over_as_they_are():
    kernel = _kernel(Op.ADD, f32((0, 3), data=np.ones((2, 3), np.float32)), f32(ONE))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for y in (np.ones((1, 1), np.float32), np.ones(3, np.float32)):
        np.testing.assert_array_equal(kernel(x, y), x + y)
        assert kernel(x, y).shape == np.broadcast_shapes(x.shape, y.shape)


def test_a_fused_activation_applies_to_the_broadcast_result():
    a, b = f32((2, 3), data=np.linspace(-8, 8, 6, dtype=np.float32).reshape(2, 3)), f32(ONE)
    kernel = _kernel(Op.ADD, a, b, Act.RELU6)
    np.testing.assert_array_equal(kernel(a.data, b.data), np.clip(a.data + b.data, 0, 6))


def test_the_wrapper_itself_needs_declared_shapes():
    ctx = context(
        Op.ADD, [f32((2, 3)), f32(ONE, dims=None), act(Act.NONE)], [out(T.TENSOR_FLOAT32)]
    )
    assert one_element_as_scalar(ctx, np.add) is np.add

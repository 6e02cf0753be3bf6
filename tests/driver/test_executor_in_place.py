"""A unary numpy function over a fresh array nobody else reads writes in place
(driver/executor/in_place.py).

Each model runs specialised and generic (``specialize=False``: every kernel makes
its own array); outputs must be identical, and the in-place form must appear
exactly where its rules hold.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from same_outcome import assert_same_outcome

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32, F16, I32, BOOL8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_BOOL8
DIMS = [1, 5]


def chain_model(unary=O.TANH, activation=0, also_out=False, read_twice=False, dtype=F32):
    """main: y = unary(ADD(a, b, activation)); ``also_out``: the sum is an output too;
    ``read_twice``: z = ADD(sum, a) is an output too."""
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(dtype, DIMS), g.input(dtype, DIMS)
    total = g.output(dtype, DIMS) if also_out else g.temporary(dtype, DIMS)
    g.operation(O.ADD, [a, b, g.constant(T.INT32, activation)], [total])
    g.operation(unary, [total], [g.output(dtype, DIMS)])
    if read_twice:
        g.operation(O.ADD, [total, a, g.constant(T.INT32, 0)], [g.output(dtype, DIMS)])
    return mb.build()


def ab(dtype=np.float32):
    rng = np.random.default_rng(5)
    return [rng.uniform(-2, 2, DIMS).astype(dtype) for _ in range(2)]


def in_place(model) -> bool:
    """Whether the unary step (operation 1) writes over its input."""
    return re.search(r"k0_1\((v\d+), \1\)", compile_model(model).source(0)) is not None


@pytest.mark.parametrize("dtype", [F32, F16])
def test_activation_of_a_sum_writes_the_sum(dtype):
    model = chain_model(O.TANH, dtype=dtype)
    assert in_place(model)
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    got = assert_same_outcome(fast, generic, ab(np.float16 if dtype == F16 else np.float32))
    assert got is not None and got[0].flags.owndata and got[0].flags.writeable


@pytest.mark.parametrize(
    "kwargs",
    [
        {"also_out": True},  # the sum is handed out
        {"read_twice": True},  # another step reads the sum
        {"activation": 1},  # ADD with RELU: its kernel is no ufunc
        {"unary": O.LOGISTIC},  # a kernel of its own (no ufunc)
    ],
)
def test_not_in_place_where_a_rule_fails(kwargs):
    model = chain_model(**kwargs)
    assert not in_place(model)
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    assert_same_outcome(fast, generic, ab())


def loop_model():
    """WHILE(h, t, x (input only), n): h' = h + tanh(x + x): the sum and its tanh are
    loop-invariant, computed in the first iteration only."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    state = [(F32, DIMS), (I32, [1]), (F32, DIMS), (I32, [1])]
    ins = [cond.input(*s) for s in state]
    cond.operation(O.LESS, [ins[1], ins[3]], [cond.output(BOOL8, [1])])
    h, t, x, _n = (body.input(*s) for s in state)
    act = body.constant(T.INT32, 0)
    h_out, t_out = body.output(F32, DIMS), body.output(I32, [1])
    doubled, squashed = body.temporary(F32, DIMS), body.temporary(F32, DIMS)
    body.operation(O.ADD, [x, x, act], [doubled])
    body.operation(O.TANH, [doubled], [squashed])
    body.operation(O.ADD, [h, squashed, act], [h_out])
    body.operation(O.ADD, [t, body.constant(I32, [1]), act], [t_out])
    g = mb.main
    h0, x0, n = g.input(F32, DIMS), g.input(F32, DIMS), g.input(I32, [1])
    outs = [g.output(F32, DIMS), g.output(I32, [1])]
    start = g.constant(I32, [0])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), h0, start, x0, n], outs)
    return mb.build()


def test_not_over_a_value_kept_for_later_iterations():
    """A result computed in the first iteration only is never written over (it is what
    later iterations read); the loop gives what the generic one gives."""
    model = loop_model()
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    source = fast.source(0)
    assert "is _UNSET" in source and re.search(r"k2_1\((w1b\d+), \1\)", source) is None
    a, b = ab()
    got = assert_same_outcome(fast, generic, [a, b, np.array([4], np.int32)])
    assert got is not None
    np.testing.assert_allclose(got[0], a + 4 * np.tanh(b + b), rtol=1e-5)


def test_not_over_a_value_of_unknown_rank():
    """With no rank declared the sum may be 0-d, which numpy gives as a scalar: no array
    to write into; the kernels run as generic."""
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, []), g.input(F32, [])
    total = g.temporary(F32, [])
    g.operation(O.ADD, [a, b, g.constant(T.INT32, 0)], [total])
    g.operation(O.TANH, [total], [g.output(F32, [])])
    model = mb.build()
    assert not in_place(model)
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    x = np.array(0.25, np.float32)
    got = assert_same_outcome(fast, generic, [x, x])
    assert got is not None and got[0].shape == ()

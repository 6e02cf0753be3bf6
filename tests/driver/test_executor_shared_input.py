"""FULLY_CONNECTED steps that read one input, as one product (driver/executor/shared_input.py).

Each model runs specialised and generic (``specialize=False``: one kernel per
layer). The joint product sums in another BLAS call, so floats are compared
within float32's tolerance (the order of summation may differ in the last bits);
where the joint product is not taken, the outcome must be the generic one
element for element.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from nnhal.driver.executor import codegen, compile_model, shared_input
from same_outcome import assert_same_outcome

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32, I32, BOOL8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_BOOL8
SIZE = 8


def layers_model(units=(5, 7), biases=None, activations=None, batch=1, size=SIZE):
    """main: x [batch, size] -> one FULLY_CONNECTED per ``units``, each a main output."""
    rng = np.random.default_rng(len(units))
    biases = biases or [True] * len(units)
    activations = activations or [0] * len(units)
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [batch, size])
    for n, with_bias, act in zip(units, biases, activations):
        w = rng.uniform(-1, 1, (n, size)).astype(np.float32)
        b = rng.uniform(-1, 1, n) if with_bias else np.zeros(n)
        g.operation(
            O.FULLY_CONNECTED,
            [
                x,
                g.constant(F32, w),
                g.constant(F32, b.astype(np.float32)),
                g.constant(T.INT32, act),
            ],
            [g.output(F32, [batch, n])],
        )
    return mb.build()


def x_input(batch=1, size=SIZE, seed=0):
    return [np.random.default_rng(seed).uniform(-1, 1, (batch, size)).astype(np.float32)]


def assert_close_to_generic(fast, generic, inputs):
    got, want = fast.run(inputs), generic.run(inputs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    return got


@pytest.mark.parametrize("units", [(5, 7), (1, 1), (10, 16, 3)])
def test_layers_on_one_input_are_one_product(units):
    model = layers_model(units)
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    source = fast.source(0)
    assert source.count("_dot(") == 1 and "jw0_" in source and "jb0_" in source
    for seed in range(5):
        got = assert_close_to_generic(fast, generic, x_input(seed=seed))
        for out in got:  # columns of the product come back as arrays of their own
            assert out.flags.owndata and out.flags.writeable


def test_layers_without_bias_add_none():
    model = layers_model((4, 6), biases=[False, False])
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    source = fast.source(0)
    assert source.count("_dot(") == 1 and "jb0_" not in source and "_addto" not in source
    assert_close_to_generic(fast, generic, x_input())


def test_only_layers_alike_share_a_product():
    """A layer without bias, and one with RELU (no fast layer), keep their own calls."""
    model = layers_model((3, 4, 5, 6), biases=[True, False, True, True], activations=[0, 0, 0, 1])
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    source = fast.source(0)
    assert source.count("jw0_") == 1  # one joint product ...
    assert "[jk0_0]" in source and "[jk0_2]" in source  # ... of layers 0 and 2
    assert source.count("_dot(") == 2  # the joint one and the bias-free layer's
    assert_close_to_generic(fast, generic, x_input())


@pytest.mark.parametrize(
    ("units", "batch", "size"),
    [
        ((5, 7), 2, SIZE),  # batch 2: columns of the product would be strided views
        ((1,), 1, SIZE),  # one layer
        ((200, 200), 1, 256),  # weights beyond MAX_BYTES together
    ],
)
def test_not_taken_is_the_generic_outcome(units, batch, size):
    assert 2 * 200 * 256 * 4 > shared_input.MAX_BYTES
    model = layers_model(units, batch=batch, size=size)
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    assert "jw0_" not in fast.source(0)
    assert_same_outcome(fast, generic, x_input(batch, size))


def test_not_in_a_plan_split_into_chunks(monkeypatch):
    """Chunks hand each other operands only: the product stays with one layer each."""
    monkeypatch.setattr(codegen, "CHUNK_STEPS", 1)
    model = layers_model((5, 7))
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    assert "jw0_" not in fast.source(0)
    assert_same_outcome(fast, generic, x_input())


def loop_model(n_units=(6, 8)):
    """WHILE(h [1, SIZE], x [1, SIZE] (input only), t, n): h' = tanh(FC1(x) + FC2(h)[:, ...])
    with two layers on the invariant x (computed in the first iteration only) and two on h."""
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    state = [(F32, [1, SIZE]), (I32, [1]), (F32, [1, SIZE]), (I32, [1])]
    ins = [cond.input(*s) for s in state]
    cond.operation(O.LESS, [ins[1], ins[3]], [cond.output(BOOL8, [1])])
    h, t, x, _n = (body.input(*s) for s in state)
    act = body.constant(T.INT32, 0)
    h_out, t_out = body.output(F32, [1, SIZE]), body.output(I32, [1])
    parts = []
    for source in (x, x, h, h):
        w = rng.uniform(-0.5, 0.5, (SIZE, SIZE)).astype(np.float32)
        b = rng.uniform(-0.1, 0.1, SIZE).astype(np.float32)
        part = body.temporary(F32, [1, SIZE])
        body.operation(
            O.FULLY_CONNECTED, [source, body.constant(F32, w), body.constant(F32, b), act], [part]
        )
        parts.append(part)
    total = parts[0]
    for part in parts[1:]:
        summed = body.temporary(F32, [1, SIZE])
        body.operation(O.ADD, [total, part, act], [summed])
        total = summed
    body.operation(O.TANH, [total], [h_out])
    body.operation(O.ADD, [t, body.constant(I32, [1]), act], [t_out])
    g = mb.main
    h0, x0, n = g.input(F32, [1, SIZE]), g.input(F32, [1, SIZE]), g.input(I32, [1])
    outs = [g.output(F32, [1, SIZE]), g.output(I32, [1])]
    g.operation(
        O.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), h0, g.constant(I32, [0]), x0, n],
        outs,
    )
    return mb.build()


@pytest.mark.parametrize("n", [0, 1, 4])
def test_in_a_loop_body_with_invariant_layers(n):
    model = loop_model()
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    source = fast.source(0)
    # two joint products, on x (in the first iteration only) and on h; in the counter
    # loop and in the generic loop it falls back to
    assert source.count("= _dot(") == 4 and "t2_" not in source
    assert re.search(r"if w1b7 is _UNSET:\n\s+w1b7j = _dot\(", source)
    ins = x_input(seed=1) + x_input(seed=2) + [np.array([n], np.int32)]
    got = assert_close_to_generic(fast, generic, ins)
    assert got[1][0] == n


def test_greedy_decoder_tokens_as_generic():
    """The bench's greedy decoder: the joint product feeds ARGMAX (row_index); its tokens
    are the generic ones (no near ties in these logits), its state within tolerance."""
    from nnhal.tools.bench_decode import greedy

    w = greedy()
    fast, generic = compile_model(w.model), compile_model(w.model, specialize=False)
    assert "jw2_" in fast.source(0) and ".argmax())" in fast.source(0)
    for n in (0, 1, 50):
        ins = w.inputs(n)
        got, want = fast.run(ins), generic.run(ins)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[2], want[2])

"""SELECT under a one-hot mask of the loop counter (driver/executor/one_hot.py).

Each model runs specialised and generic (``specialize=False``: EQUAL, MUL and
SELECT kernels over the whole buffer) and the results must be identical; the
caller's buffer must come back untouched when the loop writes in place.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.executor import compile_model, one_hot
from same_outcome import assert_same_outcome, count_rebuilds

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32, I32, BOOL8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_BOOL8
SIZE = 8


def write_model(
    positions=None,
    spread=O.MUL,
    factors=None,
    element_first=False,
    counter_first=False,
    dtype=I32,
    also_read=False,
    spread_counter=False,
):
    """WHILE(buf [1, SIZE], t, x [1], n): buf' = SELECT(EQUAL(positions, t + 1), value, buf).

    value = spread(factors, x) (``spread=None``: value is the input-only state ``x`` of
    shape [1, SIZE]); ``also_read``: a second carried state takes ADD(buf, buf), so the
    buffer is read twice (no writing in place).
    """
    positions = np.arange(SIZE) if positions is None else np.asarray(positions)
    factors = np.ones(SIZE) if factors is None else np.asarray(factors)
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    x_dims = [1] if spread is not None else [1, SIZE]
    x_type = I32 if spread is not None else dtype
    state = [(dtype, [1, SIZE]), (I32, [1])]
    state += [(dtype, [1, SIZE])] if also_read else []
    state += [(x_type, x_dims), (I32, [1])]
    ins = [cond.input(*s) for s in state]
    cond.operation(O.LESS, [ins[1], ins[-1]], [cond.output(BOOL8, [1])])
    buf, t, *_, x, _n = (body.input(*s) for s in state)
    act = body.constant(T.INT32, 0)
    buf_out, t_out = body.output(dtype, [1, SIZE]), body.output(I32, [1])
    if also_read:
        twice = body.output(dtype, [1, SIZE])
    at = body.temporary(I32, [1])
    body.operation(O.ADD, [t, body.constant(I32, [1]), act], [at])
    iota = body.constant(I32, positions.astype(np.int32).reshape(1, SIZE))
    mask = body.temporary(BOOL8, [1, SIZE])
    body.operation(O.EQUAL, [at, iota] if counter_first else [iota, at], [mask])
    if spread is None:
        value = x
    else:
        value = body.temporary(I32, [1, SIZE])
        k = body.constant(I32, factors.astype(np.int32).reshape(1, SIZE))
        element = at if spread_counter else x  # at: a Python int in the counter loop
        body.operation(spread, [element, k, act] if element_first else [k, element, act], [value])
    body.operation(O.SELECT, [mask, value, buf], [buf_out])
    body.operation(O.ADD, [t, body.constant(I32, [1]), act], [t_out])
    if also_read:
        body.operation(O.ADD, [buf, buf, act], [twice])
    g = mb.main
    first, *rest = (g.input(*s) for s in state[:1] + state[2:])
    outs = [g.output(*s) for s in state[: 3 if also_read else 2]]
    g.operation(
        O.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), first, g.constant(I32, [0]), *rest],
        outs,
    )
    return mb.build()


def inputs(n, x=3, dtype=np.int32, spread=True, also_read=False):
    buf = np.full((1, SIZE), -1, dtype)
    value = np.array([x], np.int32) if spread else np.arange(SIZE, dtype=dtype).reshape(1, -1) * 2
    extra = [np.zeros((1, SIZE), dtype)] if also_read else []
    return [buf, *extra, value, np.array([n], np.int32)]


def check(model, ins, in_place=True):
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    source = fast.source(0)
    assert "_q" in source and "_q" not in generic.source(0)
    assert (" is w1o" in source) == in_place
    kept = [a.copy() for a in ins]
    got, want = fast.run(ins), generic.run(ins)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype and a.shape == b.shape
    for a, b in zip(ins, kept):
        np.testing.assert_array_equal(a, b)  # the caller's buffer is not written
    np.testing.assert_array_equal(fast.run(ins)[0], got[0])  # a second run alike
    return got


@pytest.mark.parametrize("n", [0, 1, 3, SIZE - 1, SIZE + 2])
def test_token_buffer_like_the_decoder(n):
    got = check(write_model(), inputs(n))
    expect = np.full((1, SIZE), -1, np.int32)
    expect[0, 1 : min(n, SIZE - 1) + 1] = 3
    np.testing.assert_array_equal(got[0], expect)


@pytest.mark.parametrize(
    ("spread", "factors", "first", "counter_first"),
    [
        (O.MUL, np.arange(SIZE) - 3, False, True),
        (O.MUL, np.arange(SIZE) - 3, True, False),
        (O.ADD, np.arange(SIZE) * 10, True, False),
        (O.SUB, np.arange(SIZE), False, False),  # factors - x
        (O.SUB, np.arange(SIZE), True, True),  # x - factors
        (O.MUL, np.full(SIZE, 2**30), False, False),  # wraps like numpy's int32
    ],
)
def test_spread_variants(spread, factors, first, counter_first):
    model = write_model(
        spread=spread, factors=factors, element_first=first, counter_first=counter_first
    )
    check(model, inputs(SIZE, x=5))


def test_spread_of_a_counter_derived_value():
    """The element spread is t + 1 itself (a Python int in the loop, never an array)."""
    got = check(write_model(spread_counter=True, factors=np.arange(SIZE) * 3), inputs(SIZE))
    assert got[0][0, 2] == 2 * 6


def test_positions_with_repeats_and_gaps():
    positions = [0, 2, 2, 5, 9, 9, 9, -1]  # value 2 at two places, 1, 3, 4 nowhere
    model = write_model(positions=positions)
    assert "for _q in" in compile_model(model).source(0)  # a table, not an offset
    check(model, inputs(SIZE + 1))


def test_positions_holding_a_value_too_often_stay_with_the_kernels():
    positions = [0, 1, 1, 1, 1, 1, 2, 3]  # 1 at five places: five Python lines a write
    assert one_hot.MAX_WRITES < 5
    source = compile_model(write_model(positions=positions)).source(0)
    assert "_q" not in source and "_counter_ok" in source


def test_positions_counting_up_from_an_offset_need_no_table():
    model = write_model(positions=np.arange(SIZE) + 3, factors=np.arange(SIZE) * 7 - 20)
    source = compile_model(model).source(0)
    assert "_q = w1j" in source and " - 3" in source and "for _q in" not in source
    check(model, inputs(SIZE + 3, x=-4))


@pytest.mark.parametrize("dims", [(1, 8), (2, 3, 4), (5,), (3, 1, 2), (1, 1, 6, 1)])
def test_flat_index_expression(dims):
    expression = one_hot._index(dims, "q")
    for q in range(int(np.prod(dims))):
        assert eval(f"({expression},)") == np.unravel_index(q, dims)


def test_value_read_whole_float32():
    model = write_model(spread=None, dtype=F32)
    got = check(model, inputs(4, dtype=np.float32, spread=False))
    assert got[0].dtype == np.float32


def test_buffer_read_elsewhere_is_copied_each_time():
    check(write_model(also_read=True), inputs(4, also_read=True), in_place=False)


def test_other_shapes_run_the_steps_themselves():
    """A buffer whose run-time shape is not the declared one: what the kernels do."""
    model = write_model()
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    ins = inputs(3)
    ins[0] = np.full((2, SIZE), -1, np.int32)
    assert_same_outcome(fast, generic, ins)


@pytest.mark.usefixtures("generated_executor")
def test_function_rebuilt_from_its_recipe_gets_the_table(monkeypatch):
    """A second model compiled alike reuses the generated text; its positions table
    (closure ``h<subgraph>_<operation>``) is made from its own plans."""
    rebuilt = count_rebuilds(monkeypatch)
    model = write_model(positions=[0, 2, 2, 5, 9, 9, 9, -1], factors=np.arange(SIZE) - 3)
    recipes: dict = {}
    first = compile_model(model, recipes=recipes)
    second = compile_model(model, recipes=recipes)
    assert 0 in rebuilt and "h2_" in second.source(0)
    ins = inputs(SIZE + 1, x=7)
    for a, b in zip(first.run(ins), second.run(ins)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("spread", "factor", "first"),
    [(O.MUL, 1, False), (O.ADD, 0, True), (O.SUB, 0, True)],  # 1 * t, t + 0, t - 0
)
def test_spread_that_leaves_an_int_as_it_is(spread, factor, first):
    """The element is a Python int (t + 1) and the spread keeps it: it is written as is."""
    model = write_model(
        spread=spread, factors=np.full(SIZE, factor), element_first=first, spread_counter=True
    )
    got = check(model, inputs(SIZE))
    assert "_v = " not in compile_model(model).source(0)
    assert got[0][0, 3] == 3


def test_write_position_is_the_next_counter_value():
    """at = t + 1 is the counter's next value too: the loop takes it, not a second sum."""
    source = compile_model(write_model()).source(0)
    assert "w1i = w1j" in source and source.count("w1i + 1") == 1 and "w1i += 1" not in source
    check(write_model(), inputs(SIZE + 2))

"""Index vectors from a loop counter and the SLICE they feed (driver/executor/counter_index.py).

Every model runs specialised and generic (``specialize=False``: the MUL and
SLICE kernels) and against numpy; a begin out of range must fail with the
SLICE kernel's own message either way.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from same_outcome import assert_same_outcome

from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32, I32, BOOL8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_BOOL8
ROWS, COLS = 6, 4


def row_sum_model(op=O.MUL, vector=(1, 0), vector_first=False, size=(1, COLS), begin_out=False):
    """WHILE(acc [size], t, (begin,) xs [ROWS, COLS], n): acc += SLICE(xs, op(t, vector), size).

    ``begin_out``: the begin vector is also carried out of the loop (so it must be an
    array too).
    """
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    state = [(F32, list(size)), (I32, [1])]
    state += [(I32, [2])] if begin_out else []
    state += [(F32, [ROWS, COLS]), (I32, [1])]
    ins = [cond.input(*s) for s in state]
    cond.operation(O.LESS, [ins[1], ins[-1]], [cond.output(BOOL8, [1])])
    acc, t, *_, xs, _n = (body.input(*s) for s in state)
    act = body.constant(T.INT32, 0)
    acc_out, t_out = body.output(F32, list(size)), body.output(I32, [1])
    begin = body.output(I32, [2]) if begin_out else body.temporary(I32, [2])
    constant = body.constant(I32, list(vector))
    body.operation(op, [constant, t, act] if vector_first else [t, constant, act], [begin])
    row = body.temporary(F32, list(size))
    body.operation(O.SLICE, [xs, begin, body.constant(I32, list(size))], [row])
    body.operation(O.ADD, [acc, row, act], [acc_out])
    body.operation(O.ADD, [t, body.constant(I32, [1]), act], [t_out])
    g = mb.main
    first, *rest = (g.input(*s) for s in state[:1] + state[2:])
    outs = [g.output(*s) for s in state[: 3 if begin_out else 2]]
    initial = [g.subgraph_ref(cond), g.subgraph_ref(body), first, g.constant(I32, [0]), *rest]
    g.operation(O.WHILE, initial, outs)
    return mb.build()


def inputs(n, begin_out=False, size=(1, COLS)):
    xs = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) / 7
    begin = [np.zeros(2, np.int32)] if begin_out else []
    return [np.zeros(size, np.float32), *begin, xs, np.array([n], np.int32)]


def both(model, ins):
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    return fast, fast.run(ins), generic.run(ins)


@pytest.mark.parametrize("n", [0, 1, ROWS])
def test_row_loop_matches_generic_and_numpy(n):
    fast, got, want = both(row_sum_model(), inputs(n))
    source = fast.source(0)
    assert "].copy()" in source and "_i32(" not in source.split("_loop_timeout(")[1].split("else:")[0]
    xs = inputs(n)[1]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[0], xs[:n].sum(axis=0, keepdims=True) if n else 0 * xs[:1])
    assert got[1].tolist() == want[1].tolist() == [n]


@pytest.mark.parametrize(
    ("op", "vector", "first", "size"),
    [
        (O.ADD, (0, 0), False, (1, COLS)),
        (O.ADD, (0, 1), True, (1, 2)),  # [t, t + 1]: columns 1..2 of row t
        (O.SUB, (0, -1), False, (1, 2)),  # [t, t + 1] as t - [0, -1]
        (O.SUB, (ROWS - 1, 0), True, (1, 3)),  # [5 - t, -t]: out of range after t = 0
        (O.MUL, (1, 2), False, (1, 1)),  # [t, 2t]
        (O.MUL, (0, 0), True, (2, COLS)),  # always rows 0..1
    ],
)
def test_vector_variants(op, vector, first, size):
    model = row_sum_model(op=op, vector=vector, vector_first=first, size=size)
    for n in (1, 2):
        ins = inputs(n, size=size)
        fast, generic = compile_model(model), compile_model(model, specialize=False)
        assert "].copy()" in fast.source(0) and "].copy()" not in generic.source(0)
        assert_same_outcome(fast, generic, ins)


def test_begin_out_of_range_fails_as_the_kernel():
    model = row_sum_model()
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    ins = inputs(ROWS + 1)  # t reaches ROWS: row ROWS does not exist
    with pytest.raises(GeneralFailure) as expected:
        generic.run(ins)
    assert "SLICE" in expected.value.message
    with pytest.raises(GeneralFailure, match=re.escape(expected.value.message)):
        fast.run(ins)


def test_begin_that_is_also_an_output_is_an_array():
    model = row_sum_model(begin_out=True)
    fast, got, want = both(model, inputs(3, begin_out=True))
    assert "_i32v(" in fast.source(0)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    assert got[2].tolist() == [2, 0]


def test_wraps_like_int32():
    """MUL of the counter by a large constant wraps as numpy's int32 MUL does (then the
    begin is out of range, and both paths fail alike)."""
    model = row_sum_model(vector=(2**30, 0))
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    assert "_wrap32(" in fast.source(0).split("else:")[0]
    for n in (1, 4, 5):
        ins = inputs(n)
        assert_same_outcome(fast, generic, ins)


def test_slice_of_the_counter_itself():
    """SLICE(t, t * 0, [1]): the input is a value held as a Python int, so the SLICE
    kernel runs on its array (acc ends as the sum of the counter's values)."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    state = [(I32, [1]), (I32, [1]), (I32, [1])]
    ins = [cond.input(*s) for s in state]
    cond.operation(O.LESS, [ins[1], ins[2]], [cond.output(BOOL8, [1])])
    acc, t, _n = (body.input(*s) for s in state)
    act = body.constant(T.INT32, 0)
    acc_out, t_out = body.output(I32, [1]), body.output(I32, [1])
    begin, part = body.temporary(I32, [1]), body.temporary(I32, [1])
    body.operation(O.MUL, [t, body.constant(I32, [0]), act], [begin])
    body.operation(O.SLICE, [t, begin, body.constant(I32, [1])], [part])
    body.operation(O.ADD, [acc, part, act], [acc_out])
    body.operation(O.ADD, [t, body.constant(I32, [1]), act], [t_out])
    g = mb.main
    a0, n = g.input(I32, [1]), g.input(I32, [1])
    outs = [g.output(I32, [1]), g.output(I32, [1])]
    refs = [g.subgraph_ref(cond), g.subgraph_ref(body)]
    g.operation(O.WHILE, [*refs, a0, g.constant(I32, [0]), n], outs)
    model = mb.build()
    ins = [np.array([0], np.int32), np.array([5], np.int32)]
    fast, got, want = both(model, ins)
    assert "_counter_ok" in fast.source(0) and "].copy()" not in fast.source(0)
    assert got[0].tolist() == want[0].tolist() == [0 + 1 + 2 + 3 + 4]

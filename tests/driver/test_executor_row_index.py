"""ARGMAX of one row as a Python int, and the constant table row it picks
(driver/executor/row_index.py).

Every model runs specialised and generic (``specialize=False``: the ARGMAX and
GATHER kernels); the outputs must be identical, ties and NaN included, and an
index out of the table's range must fail with the GATHER kernel's own message
either way.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from same_outcome import assert_same_outcome

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32, I32, BOOL8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_BOOL8
VOCAB = 6


def table(rows=VOCAB):
    rng = np.random.default_rng(7)
    return rng.uniform(-1, 1, (rows, VOCAB)).astype(np.float32)


def decoder_model(
    pick=O.ARGMAX,
    dims=(1, VOCAB),
    axis=1,
    rows=VOCAB,
    constant_table=True,
    index_from_counter=False,
    shift=0,
    h0_dims=None,
):
    """WHILE(h [dims], tok [1], t, (E,) n): tok' = pick(h, axis) + shift,
    h' = 0.5 * h + GATHER(E, 0, tok') (E [rows, VOCAB]).

    ``constant_table``: E is a body constant, else an input-only state;
    ``index_from_counter``: the GATHER reads t instead of tok'; ``h0_dims``: the main
    input's declared dimensions (default ``dims``).
    """
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    state = [(F32, list(dims)), (I32, [1]), (I32, [1])]
    state += [] if constant_table else [(F32, [rows, VOCAB])]
    state += [(I32, [1])]
    ins = [cond.input(*s) for s in state]
    cond.operation(O.LESS, [ins[2], ins[-1]], [cond.output(BOOL8, [1])])
    h, _tok, t, *rest = (body.input(*s) for s in state)
    act = body.constant(T.INT32, 0)
    h_out, tok_out, t_out = (body.output(*s) for s in state[:3])
    picked = body.temporary(I32, [1]) if shift else tok_out
    body.operation(pick, [h, body.constant(T.INT32, axis)], [picked])
    if shift:
        body.operation(O.ADD, [picked, body.constant(I32, [shift]), act], [tok_out])
    e = body.constant(F32, table(rows)) if constant_table else rest[0]
    emb = body.temporary(F32, [1, VOCAB])
    index = t if index_from_counter else tok_out
    body.operation(O.GATHER, [e, body.constant(T.INT32, 0), index], [emb])
    half = body.temporary(F32, list(dims))
    body.operation(O.MUL, [h, body.constant(F32, [0.5]), act], [half])
    body.operation(O.ADD, [half, emb, act], [h_out])
    body.operation(O.ADD, [t, body.constant(I32, [1]), act], [t_out])
    g = mb.main
    h0 = g.input(F32, list(h0_dims or dims))
    more = [g.input(*s) for s in state[3:]]
    outs = [g.output(*s) for s in state[:3]]
    start = [g.constant(I32, [-1]), g.constant(I32, [0])]
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), h0, *start, *more], outs)
    return mb.build()


def inputs(n, h=None, dims=(1, VOCAB), constant_table=True, rows=VOCAB):
    if h is None:
        h = np.random.default_rng(n).uniform(-1, 1, dims)
    e = [] if constant_table else [table(rows)]
    return [np.asarray(h, np.float32).reshape(dims), *e, np.array([n], np.int32)]


def compiled(model):
    return compile_model(model), compile_model(model, specialize=False)


def taken(fast) -> tuple[bool, bool]:
    """(the index is a Python int, the GATHER is a row made ahead) in ``fast``."""
    source = fast.source(0)
    return "argmax())" in source or "argmin())" in source, " = r2_" in source


@pytest.mark.parametrize("n", [0, 1, 2, 9])
def test_decoder_loop_matches_generic(n):
    fast, generic = compiled(decoder_model())
    assert taken(fast) == (True, True)
    got = assert_same_outcome(fast, generic, inputs(n))
    assert got is not None and got[2][0] == n


@pytest.mark.parametrize(
    ("pick", "dims", "axis"),
    [
        (O.ARGMIN, (1, VOCAB), 1),
        (O.ARGMAX, (1, VOCAB), -1),
        (O.ARGMAX, (VOCAB,), 0),
        (O.ARGMAX, (VOCAB, 1), 0),
    ],
)
def test_one_row_variants(pick, dims, axis):
    fast, generic = compiled(decoder_model(pick, dims, axis))
    assert taken(fast) == (True, True)
    for n in (1, 7):
        assert_same_outcome(fast, generic, inputs(n, dims=dims))


@pytest.mark.parametrize(
    "h",
    [
        [0.5, 0.9, 0.9, -1, 0.9, 0],  # ties: the first index
        [0.1, np.nan, 0.3, np.nan, 0, 0],  # NaN: numpy's first NaN, as the kernel
        [-np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf],
    ],
)
def test_ties_and_nan_pick_as_the_kernel(h):
    fast, generic = compiled(decoder_model())
    got = assert_same_outcome(fast, generic, inputs(1, h=h))
    assert got is not None and got[1][0] == int(np.argmax(np.asarray(h, np.float32)))


@pytest.mark.parametrize(
    ("dims", "axis"),
    [
        ((2, VOCAB), 1),  # two rows: two indexes
        ((1, VOCAB, 1), 1),  # the kernel's [1, 1] conflicts with the declared [1]
    ],
)
def test_not_one_row_stays_the_kernel(dims, axis):
    """No Python int and no row: the kernels, and their failures, as generic."""
    fast, generic = compiled(decoder_model(dims=dims, axis=axis))
    assert taken(fast) == (False, False)
    assert_same_outcome(fast, generic, inputs(3, dims=dims))


def test_table_that_is_no_constant_stays_the_kernel():
    fast, generic = compiled(decoder_model(constant_table=False))
    assert taken(fast) == (True, False)
    assert_same_outcome(fast, generic, inputs(4, constant_table=False))


def test_index_read_by_counter_arithmetic():
    """tok' = ARGMAX + 1 runs on Python ints too; the carried tok is an array at the end."""
    fast, generic = compiled(decoder_model(shift=1, rows=VOCAB + 1))
    assert taken(fast) == (True, True)
    for n in (1, 6):
        assert_same_outcome(fast, generic, inputs(n))


def test_index_out_of_the_table_fails_as_the_kernel():
    """The row index is t: past the table's last row the GATHER kernel's error, either way."""
    fast, generic = compiled(decoder_model(index_from_counter=True, rows=3))
    assert taken(fast) == (True, True)
    assert assert_same_outcome(fast, generic, inputs(3)) is not None
    assert assert_same_outcome(fast, generic, inputs(5)) is None  # fails at t = 3


def test_row_is_not_the_callers():
    """The rows are shared read-only arrays: outputs still come back fresh and writable."""
    fast, _ = compiled(decoder_model())
    for out in fast.run(inputs(2)):
        assert out.flags.writeable and out.flags.owndata


def test_other_run_time_shape_runs_the_kernel():
    """The main input is declared [0, VOCAB] and given [2, VOCAB]: the body's ARGMAX sees a
    shape other than its declared [1, VOCAB], runs its kernel and fails as generic."""
    fast, generic = compiled(decoder_model(h0_dims=(0, VOCAB)))
    assert taken(fast) == (True, True)
    assert "w1b" in fast.source(0)
    assert assert_same_outcome(fast, generic, inputs(2)) is not None
    assert assert_same_outcome(fast, generic, inputs(2, dims=(2, VOCAB))) is None

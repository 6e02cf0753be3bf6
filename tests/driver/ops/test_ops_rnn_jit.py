"""The compiled recurrent cells (``_jit_rnn``) against the numpy reference.

Each case binds its kernel twice, with ``kernels.set_kernels("numpy")`` and
with ``"auto"`` (the compiled cells, numba being installed in CI through the
``test`` extra), runs both on the same arrays and compares every output; a
counting wrapper around the compiled kernel proves that the second run took
it. The float64 cells of ``test_ops_lstm`` / ``test_ops_rnn`` check the math
itself on whichever path runs; the NNAPI vectors of LSTM and RNN pass on
both paths. Without numba this module is skipped.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading

import numpy as np
import pytest
from lstm_reference import Cell, Omit, fscalar, rand
from lstm_reference import run as run_lstm
from lstm_reference import tensor as lstm_tensor
from nnhal.driver.ops import _rnn_util, kernels
from nnhal.driver.ops.lstm import LSTM_DEF
from nnhal.driver.ops.sequence_lstm import BIDIRECTIONAL_DEF, UNIDIRECTIONAL_DEF
from ops_harness import context as rnn_context
from ops_harness import out, scalar
from test_ops_rnn import bidi_inputs, rnn_inputs
from test_ops_rnn import run as run_rnn
from test_ops_rnn import uni_inputs as rnn_uni_inputs

from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="numba is not installed"
)
F32 = T.TENSOR_FLOAT32
#: float32 sums in another order and the rational tanh (< 4e-7 off) against numpy's
TOL = 3e-6


@pytest.fixture(scope="module")
def cells():
    module = _rnn_util.jit_cells(wait=600)  # compiling on a cold numba cache takes seconds
    assert module is not None, "the compiled cells failed to load"
    return module


@pytest.fixture
def counted(cells, monkeypatch):
    """calls[name]: how often the compiled kernel ``name`` ran."""
    calls = {}
    for name in ("rnn_step", "rnn_sequence", "lstm_step", "lstm_sequence"):
        kernel = getattr(cells, name)

        def wrapper(*args, _kernel=kernel, _name=name):
            calls[_name] = calls.get(_name, 0) + 1
            return _kernel(*args)

        monkeypatch.setattr(cells, name, wrapper)
    return calls


@pytest.fixture(autouse=True)
def _restore_choice():
    yield
    kernels.set_kernels(None)


def both(run, definition, ins, outs):
    """(numpy results, compiled-path results) of one call."""
    kernels.set_kernels(kernels.NUMPY)
    ref = run(definition, ins, outs)[2]
    kernels.set_kernels(kernels.AUTO)  # over NNHAL_KERNELS
    return ref, run(definition, ins, outs)[2]


def assert_agree(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=TOL, atol=TOL)


# ---------------------------------------------------------------------------
# tanh
# ---------------------------------------------------------------------------


def test_tanh_approximation(cells):
    grid = np.linspace(-12, 12, 200_001, dtype=np.float32)
    tiny = np.float32(10) ** np.linspace(-30, 0, 3_001, dtype=np.float32)
    x = np.concatenate([grid, tiny, -tiny, [0, np.inf, -np.inf]]).astype(np.float32)
    got = x.copy()
    cells.tanh_inplace(got)
    want = np.tanh(x.astype(np.float64))
    assert np.abs(got - want).max() < 4e-7
    assert np.abs(got).max() <= 1
    # relative accuracy near zero, where tanh(x) ~ x
    small = np.abs(x) < 1e-3
    assert np.abs(got[small] - want[small]).max() <= 2e-7 * np.abs(want[small]).max()
    nan = np.array([np.nan], np.float32)
    cells.tanh_inplace(nan)
    assert np.isnan(nan[0])


# ---------------------------------------------------------------------------
# RNN
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("act", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("shape", [(1, 3, 4), (3, 12, 19), (2, 128, 64)], ids=str)
def test_rnn_agrees(counted, act, shape):
    batch, size, units = shape
    ins = rnn_inputs(F32, batch=batch, size=size, units=units, act=act, const=True)
    ref, jit = both(run_rnn, Op.RNN, ins, [out(F32), out(F32)])
    assert counted.get("rnn_step") == 1
    assert_agree(jit, ref)


def test_rnn_read_only_and_strided_inputs(counted):
    """Constants reach kernels as read-only arrays, views as strided ones."""
    ins = rnn_inputs(F32, batch=2, size=5, units=7, act=4, const=True)
    wide = np.zeros((2, 10), np.float32)
    wide[:, ::2] = ins[0].data
    ins[0] = type(ins[0])(F32, wide[:, ::2], ins[0].dims, const=False)
    ins[4].data.flags.writeable = False
    ref, jit = both(run_rnn, Op.RNN, ins, [out(F32), out(F32)])
    assert counted.get("rnn_step") == 1
    assert_agree(jit, ref)


@pytest.mark.parametrize("time_major", [True, False], ids=["time-major", "batch-major"])
@pytest.mark.parametrize("const", [True, False], ids=["const", "inputs"])
@pytest.mark.parametrize("act", [0, 1, 2, 3, 4])
def test_unidirectional_rnn_agrees(counted, time_major, const, act):
    ins = rnn_uni_inputs(F32, time_major, act, steps=6, batch=3, size=5, units=9, const=const)
    ref, jit = both(run_rnn, Op.UNIDIRECTIONAL_SEQUENCE_RNN, ins, [out(F32), out(F32)])
    assert counted.get("rnn_sequence") == 1
    assert_agree(jit, ref)


@pytest.mark.parametrize("time_major", [True, False], ids=["time-major", "batch-major"])
@pytest.mark.parametrize("merge", [True, False], ids=["merged", "separate"])
@pytest.mark.parametrize("mode", ["none", "parallel", "cross"])
def test_bidirectional_rnn_agrees(counted, time_major, merge, mode):
    """The forward loop and the reversed backward one, into separate outputs or
    the halves of the merged one (strided: the loop writes a copy)."""
    ins = bidi_inputs(F32, time_major, merge, mode)
    outs = [out(F32) for _ in range(3 if merge else 4)]
    ref, jit = both(run_rnn, Op.BIDIRECTIONAL_SEQUENCE_RNN, ins, outs)
    assert counted.get("rnn_sequence") == 2
    assert_agree(jit, ref)


# ---------------------------------------------------------------------------
# LSTM (one step) and the sequence operations
# ---------------------------------------------------------------------------


def lstm_inputs(cell: Cell, x, h, c, clip=0.0):
    ins = [lstm_tensor(F32, x), *cell.operands(F32, const=True)]
    return (
        ins
        + [lstm_tensor(F32, h), lstm_tensor(F32, c), scalar(4), fscalar(clip, F32)]
        + [fscalar(0.0, F32)]
    )


@pytest.mark.parametrize("cifg", [False, True], ids=["gates", "cifg"])
@pytest.mark.parametrize("clip", [0.0, 0.4])
@pytest.mark.parametrize("sizes", [(1, 3, 4), (3, 9, 17), (1, 32, 32)], ids=str)
def test_lstm_step_agrees(counted, cifg, clip, sizes):
    batch, n_in, n_cell = sizes
    cell = Cell.random(n_in, n_cell, cifg=cifg)
    x, h, c = rand((batch, n_in), 2), rand((batch, n_cell)), rand((batch, n_cell), 2)
    ins = lstm_inputs(cell, x, h, c, clip)
    ref, jit = both(run_lstm, LSTM_DEF, ins, [out(F32) for _ in range(4)])
    assert counted.get("lstm_step") == 1
    assert_agree(jit, ref)  # the scratch buffer too


def test_lstm_step_input_is_state(counted):
    """A decoder feeds the hidden state as the input: the same array twice."""
    cell = Cell.random(6, 6)
    h = rand((1, 6))
    ins = lstm_inputs(cell, h, h, rand((1, 6)))
    ins[18] = ins[0]
    ref, jit = both(run_lstm, LSTM_DEF, ins, [out(F32) for _ in range(4)])
    assert counted.get("lstm_step") == 1
    assert_agree(jit, ref)


def uni_inputs(cell: Cell, xs, h, c, time_major: bool, clip=0.0):
    ins = [lstm_tensor(F32, xs), *cell.operands(F32, const=True)]
    ins += [lstm_tensor(F32, h), lstm_tensor(F32, c), scalar(4)]
    ins += [fscalar(clip, F32), fscalar(0.0, F32), scalar(time_major, T.BOOL)]
    return ins + cell.ln_operands(F32, const=True)


@pytest.mark.parametrize("time_major", [True, False], ids=["time-major", "batch-major"])
@pytest.mark.parametrize("cifg", [False, True], ids=["gates", "cifg"])
@pytest.mark.parametrize("clip", [0.0, 0.5])
def test_unidirectional_agrees(counted, time_major, cifg, clip):
    steps, batch, n_in, n_cell = 7, 2, 5, 12
    cell = Cell.random(n_in, n_cell, cifg=cifg)
    xs = rand((steps, batch, n_in), 2)
    xs = xs if time_major else xs.swapaxes(0, 1)
    ins = uni_inputs(cell, xs, rand((batch, n_cell)), rand((batch, n_cell), 2), time_major, clip)
    ref, jit = both(run_lstm, UNIDIRECTIONAL_DEF, ins, [out(F32) for _ in range(3)])
    assert counted.get("lstm_sequence") == 1
    assert_agree(jit, ref)


def test_bidirectional_runs_the_backward_cell_in_reverse(counted):
    steps, batch, n_in, n_cell = 5, 1, 4, 8
    fw, bw = Cell.random(n_in, n_cell), Cell.random(n_in, n_cell, cifg=True)
    xs = rand((steps, batch, n_in), 2)
    ins = [lstm_tensor(F32, xs), *fw.operands(F32, const=True), *bw.operands(F32, const=True)]
    ins += [lstm_tensor(F32, rand((batch, n_cell))) for _ in range(4)]
    ins += [Omit(F32) for _ in range(9)]  # no aux input, no aux weights
    ins += [scalar(4), fscalar(0.0, F32), fscalar(0.0, F32), scalar(False, T.BOOL)]
    ins += [scalar(True, T.BOOL), *fw.ln_operands(F32, const=True)]
    ins += bw.ln_operands(F32, const=True)
    ref, jit = both(run_lstm, BIDIRECTIONAL_DEF, ins, [out(F32) for _ in range(6)])
    assert counted.get("lstm_sequence") == 2
    assert_agree(jit, ref)


# ---------------------------------------------------------------------------
# Falling back to numpy
# ---------------------------------------------------------------------------


def test_a_failing_kernel_falls_back_to_numpy(cells, monkeypatch, caplog):
    """A compiled cell that fails logs one warning; numpy runs that call and the
    following ones, and kernels bound afterwards do not try numba."""

    def broken(*args):
        raise RuntimeError("simulated numba failure")

    monkeypatch.setattr(cells, "rnn_step", broken)
    monkeypatch.setattr(kernels, "_broken", False)
    monkeypatch.setattr(_rnn_util, "_cells", cells)
    ins = rnn_inputs(F32, batch=2, size=9, units=5, act=4, const=True)
    ref, got = both(run_rnn, Op.RNN, ins, [out(F32), out(F32)])
    assert_agree(got, ref)
    assert "simulated numba failure" in caplog.text
    assert _rnn_util.jit_cells() is None and not kernels.jit_wanted()
    monkeypatch.setattr(kernels, "_broken", False)  # the other tests keep numba


def test_running_out_of_memory_in_a_cell_is_not_a_numba_failure(cells, monkeypatch):
    """A MemoryError from a compiled cell reaches the execution (which answers
    RESOURCE_EXHAUSTED); the compiled cells stay in use."""

    def no_memory(*args):
        raise MemoryError("simulated")

    monkeypatch.setattr(cells, "rnn_step", no_memory)
    monkeypatch.setattr(_rnn_util, "_cells", cells)
    ins = rnn_inputs(F32, batch=2, size=9, units=5, act=4, const=True)
    kernels.set_kernels(kernels.AUTO)
    with pytest.raises(MemoryError):
        run_rnn(Op.RNN, ins, [out(F32), out(F32)])
    assert _rnn_util.jit_cells() is cells and kernels.jit_wanted()


def test_a_failing_import_falls_back_to_numpy(cells, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "nnhal.driver.ops._jit_rnn", None)  # import -> ImportError
    for name, value in (("_cells", None), ("_started", False), ("_waited", False)):
        monkeypatch.setattr(_rnn_util, name, value)
    monkeypatch.setattr(_rnn_util, "_ready", threading.Event())
    monkeypatch.setattr(kernels, "_broken", False)
    cell = Cell.random(4, 6)
    ins = lstm_inputs(cell, rand((2, 4)), rand((2, 6)), rand((2, 6)))
    ref, got = both(run_lstm, LSTM_DEF, ins, [out(F32) for _ in range(4)])
    assert_agree(got, ref)
    assert _rnn_util.jit_cells() is None and "_jit_rnn" in caplog.text
    monkeypatch.setattr(kernels, "_broken", False)


def test_argument_types_it_was_not_compiled_for_run_numpy(counted):
    """A float64 hidden state handed to a float32 RNN (a caller's mistake numpy
    tolerates) meets no compiled signature: numpy runs the call."""
    ins = rnn_inputs(F32, batch=2, size=3, units=5, act=4, const=True)
    kernels.set_kernels(kernels.NUMPY)
    ref = run_rnn(Op.RNN, ins, [out(F32), out(F32)])[2]
    kernels.set_kernels(kernels.AUTO)
    ctx = rnn_context(Op.RNN, ins, [out(F32), out(F32)])
    ctx.op.prepare(ctx)
    tensors = [x.data for x in ins if x.is_tensor]
    tensors[-1] = tensors[-1].astype(np.float64)  # hidden_state_in
    got = ctx.op.kernel(ctx)(*tensors)
    assert counted.get("rnn_step") == 1  # tried, refused by its signature
    assert_agree(got, ref)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_fork_while_loading_starts_over_in_the_child(cells, monkeypatch):
    """A child forked while the cells load has no loading thread: it loads again."""
    for name, value in (("_cells", None), ("_started", True), ("_waited", True)):
        monkeypatch.setattr(_rnn_util, name, value)
    monkeypatch.setattr(_rnn_util, "_ready", threading.Event())  # never set in the parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether the cells load, then leave at once
        try:
            loaded = _rnn_util.jit_cells(wait=120) is not None
            os.write(write, b"1" if loaded else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert _rnn_util.jit_cells() is None  # the parent's state is untouched

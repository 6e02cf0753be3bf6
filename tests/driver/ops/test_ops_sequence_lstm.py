"""UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM against the float64
reference cell run over time (tests/lstm_reference.py), negative rows, and the
final states carried by a WHILE loop.
"""

from __future__ import annotations

import numpy as np
import pytest
from lstm_reference import F16, F32, Bad, Cell, Omit, assert_close, fscalar, rand, run, tensor
from nnhal.driver.ops.registry import lookup
from nnhal.driver.ops.sequence_lstm import BIDIRECTIONAL_DEF, UNIDIRECTIONAL_DEF
from ops_harness import out, scalar

from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op


def _rounded(a):
    return a.astype(np.float16).astype(np.float64)


def _layout(xs_tm: np.ndarray, time_major: bool) -> np.ndarray:
    return xs_tm if time_major else np.swapaxes(xs_tm, 0, 1)


# ---------------------------------------------------------------------------
# UNIDIRECTIONAL_SEQUENCE_LSTM
# ---------------------------------------------------------------------------


def uni_inputs(cell: Cell, xs, h, c, type_=F32, *, const=True, time_major=True, clips=(0, 0)):
    ins = [tensor(type_, xs), *cell.operands(type_, const=const)]
    ins += [tensor(type_, h), tensor(type_, c), scalar(4)]
    ins += [fscalar(clips[0], type_), fscalar(clips[1], type_), scalar(time_major, T.BOOL)]
    return ins + cell.ln_operands(type_, const=const)


UNI_CASES = {
    "basic": {},
    "cifg-peephole": {"cifg": True, "peephole": True},
    "layer-norm-peephole-projection": {"layer_norm": True, "peephole": True, "projection": True},
    "layer-norm-cifg": {"layer_norm": True, "cifg": True},
    "projection-bias": {"projection": True, "proj_bias": True},
}


@pytest.mark.parametrize("states", [3, 1])
@pytest.mark.parametrize("type_", [F32, F16], ids=["f32", "f16"])
@pytest.mark.parametrize("const", [True, False], ids=["const", "inputs"])
@pytest.mark.parametrize("time_major", [True, False], ids=["time-major", "batch-major"])
@pytest.mark.parametrize("case", list(UNI_CASES))
def test_unidirectional(case, time_major, const, type_, states):
    kw = UNI_CASES[case]
    steps, batch, n_in, n_cell = 4, 2, 3, 5
    n_out = 3 if kw.get("projection") else n_cell
    cell = Cell.random(n_in, n_cell, n_out, **kw)
    xs, h, c = rand((steps, batch, n_in), 2), rand((batch, n_out)), rand((batch, n_cell))
    clips = (0.8, 0.3) if case == "projection-bias" else (0, 0)
    if type_ == F16:
        xs, h, c = _rounded(xs), _rounded(h), _rounded(c)
        cell = _rounded_cell(cell)
    ins = uni_inputs(
        cell, _layout(xs, time_major), h, c, type_, const=const, time_major=time_major, clips=clips
    )
    outs = [out(type_) for _ in range(states)]
    version, shapes, result = run(UNIDIRECTIONAL_DEF, ins, outs)
    assert version == (V.V1_3 if states == 3 else V.V1_2)
    want, want_h, want_c = cell.sequence(xs, h, c, cell_clip=clips[0], proj_clip=clips[1])
    assert_close(result[0], _layout(want, time_major), type_)
    seq_shape = (steps, batch, n_out) if time_major else (batch, steps, n_out)
    assert shapes[0] == seq_shape
    if states == 3:
        assert_close(result[1], want_h, type_)
        assert_close(result[2], want_c, type_)
        assert shapes[1:] == [(batch, n_out), (batch, n_cell)]


def _rounded_cell(cell: Cell) -> Cell:
    def r(v):
        if v is None:
            return None
        return {k: _rounded(a) for k, a in v.items()} if isinstance(v, dict) else _rounded(v)

    return Cell(*(r(getattr(cell, f)) for f in cell.__dataclass_fields__))


def test_unidirectional_one_step_and_runtime_omitted_inputs():
    """max_time 1, optional weights given as model inputs left without a value."""
    cell = Cell.random(3, 4, cifg=True, peephole=True)
    xs, h, c = rand((1, 2, 3)), rand((2, 4)), rand((2, 4))
    ins = [tensor(F32, xs), *cell.operands(F32, const=False, omit_declared=True)]
    ins += [tensor(F32, h), tensor(F32, c), scalar(4), fscalar(0, F32), fscalar(0, F32)]
    ins += [scalar(True, T.BOOL), *(Omit(F32, (4,), declared=True) for _ in range(4))]
    _, _, (seq, h_out, c_out) = run(UNIDIRECTIONAL_DEF, ins, [out(F32) for _ in range(3)])
    want, want_h, want_c = cell.sequence(xs, h, c)
    assert_close(seq, want, F32)
    assert_close(h_out, want_h, F32)
    assert_close(c_out, want_c, F32)


# ---------------------------------------------------------------------------
# BIDIRECTIONAL_SEQUENCE_LSTM
# ---------------------------------------------------------------------------


def bidi_inputs(fw: Cell, bw: Cell, xs, states, type_=F32, *, aux=None, const=True, merge=False,
                time_major=True):  # fmt: skip
    fh, fc, bh, bc = states
    ins = [tensor(type_, xs), *fw.operands(type_, const=const), *bw.operands(type_, const=const)]
    ins += [tensor(type_, a) for a in (fh, fc, bh, bc)]
    ins.append(Omit(type_) if aux is None else tensor(type_, aux))
    for cell in (fw, bw):
        if cell.waux is None:
            ins += [Omit(type_) for _ in range(4)]
        else:
            ins += [
                tensor(type_, cell.waux[g], const=const) if g in cell.waux else Omit(type_)
                for g in ("input", "forget", "cell", "output")
            ]
    ins += [scalar(4), fscalar(0, type_), fscalar(0, type_)]
    ins += [scalar(merge, T.BOOL), scalar(time_major, T.BOOL)]
    return ins + fw.ln_operands(type_, const=const) + bw.ln_operands(type_, const=const)


BIDI_CASES = {
    # id: (cell kwargs, linking)
    "no-linking": ({}, None),
    "cifg-peephole": ({"cifg": True, "peephole": True}, None),
    "layer-norm-projection": ({"layer_norm": True, "projection": True}, None),
    "parallel-linking": ({"peephole": True}, "parallel"),
    "cross-linking": ({}, "cross"),
    "cross-linking-cifg": ({"cifg": True}, "cross"),
}


@pytest.mark.parametrize("outputs", [6, 2, 1, 5])
@pytest.mark.parametrize("type_", [F32, F16], ids=["f32", "f16"])
@pytest.mark.parametrize("const", [True, False], ids=["const", "inputs"])
@pytest.mark.parametrize("time_major", [True, False], ids=["time-major", "batch-major"])
@pytest.mark.parametrize("case", list(BIDI_CASES))
def test_bidirectional(case, time_major, const, type_, outputs):
    kw, linking = BIDI_CASES[case]
    steps, batch, n_in, n_aux = 3, 2, 3, 2
    fw_cell, bw_cell = (6, 4) if kw.get("projection") else (4, 5)
    fw_out, bw_out = (3, 2) if kw.get("projection") else (fw_cell, bw_cell)
    cross = n_in if linking == "cross" else None
    fw = Cell.random(n_in, fw_cell, fw_out, n_aux=cross, **kw)
    bw_in = n_aux if linking == "parallel" else n_in
    bw = Cell.random(bw_in, bw_cell, bw_out, n_aux=cross, **kw)
    xs = rand((steps, batch, n_in), 2)
    aux = rand((steps, batch, cross or n_aux), 2) if linking else None
    states = (rand((batch, fw_out)), rand((batch, fw_cell)), rand((batch, bw_out)))
    states += (rand((batch, bw_cell)),)
    if type_ == F16:
        xs, aux = _rounded(xs), None if aux is None else _rounded(aux)
        states = tuple(_rounded(s) for s in states)
        fw, bw = _rounded_cell(fw), _rounded_cell(bw)
    merge = outputs in (1, 5)
    aux_op = None if aux is None else _layout(aux, time_major)
    ins = bidi_inputs(
        fw, bw, _layout(xs, time_major), states, type_, aux=aux_op, const=const, merge=merge,
        time_major=time_major,
    )  # fmt: skip
    version, shapes, result = run(BIDIRECTIONAL_DEF, ins, [out(type_) for _ in range(outputs)])
    assert version == (V.V1_3 if outputs in (5, 6) else V.V1_2)
    cross_aux = aux if linking == "cross" else None
    want_fw, fh, fc = fw.sequence(xs, states[0], states[1], aux=cross_aux)
    bw_xs = aux if linking == "parallel" else xs
    want_bw, bh, bc = bw.sequence(bw_xs, states[2], states[3], reverse=True, aux=cross_aux)
    if merge:
        want = [np.concatenate([want_fw, want_bw], axis=2)]
    else:
        want = [want_fw, want_bw]
    want = [_layout(w, time_major) for w in want]
    if outputs in (5, 6):
        want += [fh, fc, bh, bc]
    for got, w in zip(result, want):
        assert_close(got, w, type_)
    assert [tuple(s) for s in shapes] == [w.shape for w in want]


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------


def _uni(**kw):
    cell = Cell.random(3, 4, **kw)
    return uni_inputs(cell, rand((2, 1, 3)), rand((1, 4)), rand((1, 4)))


def _uni_with(index, value, **kw):
    ins = _uni(**kw)
    ins[index] = value
    return ins


def _bidi(linking=None, **kw):
    cross = 3 if linking == "cross" else None
    fw, bw = Cell.random(3, 4, n_aux=cross, **kw), Cell.random(3, 4, n_aux=cross, **kw)
    states = tuple(rand((1, 4)) for _ in range(4))
    aux = rand((2, 1, 3)) if linking else None
    return bidi_inputs(fw, bw, rand((2, 1, 3)), states, aux=aux)


def _bidi_with(index, value, linking=None, **kw):
    ins = _bidi(linking, **kw)
    ins[index] = value
    return ins


UNI_OUTS = [out(F32) for _ in range(3)]
BIDI_OUTS = [out(F32) for _ in range(6)]

BAD = [
    Bad("uni-27-inputs", UNIDIRECTIONAL_DEF, _uni()[:27], UNI_OUTS, r"expected 28 inputs, got 27"),
    Bad(
        "uni-2-outputs",
        UNIDIRECTIONAL_DEF,
        _uni(),
        UNI_OUTS[:2],
        r"expected 1 output, or 3 with the output and cell states \(HAL 1.3\), got 2",
    ),
    Bad(
        "uni-quant-input",
        UNIDIRECTIONAL_DEF,
        _uni_with(0, tensor(T.TENSOR_QUANT8_ASYMM, [[[1, 2, 3]]], scale=0.5)),
        UNI_OUTS,
        r"input 0 \(input\) has type TENSOR_QUANT8_ASYMM; supported: TENSOR_FLOAT32 \(1.2\)",
    ),
    Bad(
        "uni-time-major-int",
        UNIDIRECTIONAL_DEF,
        _uni_with(23, scalar(1)),
        UNI_OUTS,
        r"input 23 \(time_major\) has type INT32; with TENSOR_FLOAT32 supported: BOOL",
    ),
    Bad(
        "uni-input-rank-2",
        UNIDIRECTIONAL_DEF,
        _uni_with(0, tensor(F32, rand((1, 3)))),
        UNI_OUTS,
        r"input 0 \(input\) has rank 2; it must be \[max_time, batch, input_size\]",
    ),
    Bad(
        "uni-batch-major-state",
        UNIDIRECTIONAL_DEF,
        _uni_with(23, scalar(False, T.BOOL)),
        UNI_OUTS,
        r"input 18 \(output_state_in\) has dimension 1 on axis 0; it must be batch = 2",
    ),
    Bad(
        "uni-activation",
        UNIDIRECTIONAL_DEF,
        _uni_with(20, scalar(5)),
        UNI_OUTS,
        r"input 20 \(activation\) has value 5",
    ),
    Bad(
        "uni-half-layer-norm",
        UNIDIRECTIONAL_DEF,
        _uni(layer_norm=True)[:25] + [Omit(F32)] + _uni(layer_norm=True)[26:],
        UNI_OUTS,
        r"layer normalization weights must be given all or none",
    ),
    Bad(
        "uni-negative-clip",
        UNIDIRECTIONAL_DEF,
        _uni_with(22, fscalar(-2.0, F32)),
        UNI_OUTS,
        r"input 22 \(proj_clip\) is -2.0; it must be >= 0",
    ),
    Bad(
        "bidi-7-outputs",
        BIDIRECTIONAL_DEF,
        _bidi(),
        [*BIDI_OUTS, out(F32)],
        r"expected 1 to 6 outputs, got 7",
    ),
    Bad("bidi-60-inputs", BIDIRECTIONAL_DEF, _bidi()[:60], BIDI_OUTS, r"expected 61 inputs"),
    Bad(
        "bidi-3-outputs",
        BIDIRECTIONAL_DEF,
        _bidi(),
        BIDI_OUTS[:3],
        r"expected 1 or 2 outputs .*got 3",
    ),
    Bad(
        "bidi-merge-with-6-outputs",
        BIDIRECTIONAL_DEF,
        _bidi_with(51, scalar(True, T.BOOL)),
        BIDI_OUTS,
        r"input 51 \(merge_outputs\) is True but the operation has 6 outputs",
    ),
    Bad(
        "bidi-aux-weights-without-aux-input",
        BIDIRECTIONAL_DEF,
        _bidi_with(39, Omit(F32), "cross"),
        BIDI_OUTS,
        r"auxiliary weights are given without input 39 \(aux_input\)",
    ),
    Bad(
        "bidi-fw-aux-weights-only",
        BIDIRECTIONAL_DEF,
        _bidi("cross")[:44] + [Omit(F32)] * 4 + _bidi("cross")[48:],
        BIDI_OUTS,
        r"forward and backward auxiliary weights must both be given or both omitted",
    ),
    Bad(
        "bidi-half-aux-weights",
        BIDIRECTIONAL_DEF,
        _bidi_with(42, Omit(F32), "cross"),
        BIDI_OUTS,
        r"the auxiliary weights .* must be given all or none",
    ),
    Bad(
        "bidi-aux-batch",
        BIDIRECTIONAL_DEF,
        _bidi_with(39, tensor(F32, rand((2, 3, 3)), const=True), "parallel"),
        BIDI_OUTS,
        r"input 39 \(aux_input\) has dimension 3 on axis 1 but input 0 has 1",
    ),
    Bad(
        "bidi-cifg-aux-input-weights",
        BIDIRECTIONAL_DEF,
        _bidi_with(40, tensor(F32, rand((4, 3)), const=True), "cross", cifg=True),
        BIDI_OUTS,
        r"input 40 \(fw_aux_input_to_input_weights\) is given, but there is no input gate",
    ),
    Bad(
        "bidi-bw-weights",
        BIDIRECTIONAL_DEF,
        _bidi_with(20, tensor(F32, rand((4, 2)), const=True)),
        BIDI_OUTS,
        r"input 20 \(bw_input_to_cell_weights\) has dimension 2 on axis 1; it must be "
        r"input_size = 3",
    ),
    Bad(
        "bidi-clip-type",
        BIDIRECTIONAL_DEF,
        _bidi_with(49, scalar(0, T.INT32)),
        BIDI_OUTS,
        r"input 49 \(cell_clip\) has type INT32; with TENSOR_FLOAT32 supported: FLOAT32",
    ),
]


@pytest.mark.parametrize("row", BAD, ids=[b.id for b in BAD])
def test_sequence_lstm_rejects(row):
    row.check()


# ---------------------------------------------------------------------------
# Final states carried by a WHILE loop
# ---------------------------------------------------------------------------


@pytest.mark.skipif(
    lookup(Op.UNIDIRECTIONAL_SEQUENCE_LSTM) is None,
    reason="UNIDIRECTIONAL_SEQUENCE_LSTM not registered yet (see _lstm_util)",
)
def test_unidirectional_states_through_while():
    """Each iteration runs the sequence again from the carried (h, c)."""
    from nnhal.driver.executor import compile_model

    from nnhal.builder import ModelBuilder

    steps, n_in, n_cell, rounds = 3, 2, 4, 5
    cell = Cell.random(n_in, n_cell, peephole=True)
    mb = ModelBuilder()
    cond = mb.subgraph()
    cond.input(F32, [1, n_cell])
    cond.input(F32, [1, n_cell])
    i_c = cond.input(T.TENSOR_INT32, [1])
    cond.input(F32, [steps, 1, n_in])
    n_c = cond.input(T.TENSOR_INT32, [1])
    done = cond.output(T.TENSOR_BOOL8, [1])
    cond.operation(Op.LESS, [i_c, n_c], [done])
    body = mb.subgraph()
    h, c = body.input(F32, [1, n_cell]), body.input(F32, [1, n_cell])
    i = body.input(T.TENSOR_INT32, [1])
    xs = body.input(F32, [steps, 1, n_in])
    body.input(T.TENSOR_INT32, [1])
    h_out, c_out = body.output(F32, [1, n_cell]), body.output(F32, [1, n_cell])
    i_out = body.output(T.TENSOR_INT32, [1])
    params = [
        body.no_value(F32) if isinstance(p, Omit) else body.constant(F32, p.data)
        for p in cell.operands(F32, const=True)
    ]
    seq = body.temporary(F32, [steps, 1, n_cell])
    scalars = [body.constant(T.INT32, 4), body.constant(T.FLOAT32, 0.0)]
    scalars += [body.constant(T.FLOAT32, 0.0), body.constant(T.BOOL, True)]
    body.operation(
        Op.UNIDIRECTIONAL_SEQUENCE_LSTM,
        [xs, *params, h, c, *scalars, *(body.no_value(F32) for _ in range(4))],
        [seq, h_out, c_out],
    )
    zero = body.constant(T.INT32, 0)
    body.operation(Op.ADD, [i, body.constant(T.TENSOR_INT32, [1]), zero], [i_out])
    g = mb.main
    xs_m, h0, c0 = (
        g.input(F32, [steps, 1, n_in]),
        g.input(F32, [1, n_cell]),
        g.input(F32, [1, n_cell]),
    )
    n = g.input(T.TENSOR_INT32, [1])
    h_f, c_f = g.output(F32, [1, n_cell]), g.output(F32, [1, n_cell])
    g.operation(
        Op.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), h0, c0, g.constant(T.TENSOR_INT32, [0]),
         xs_m, n],
        [h_f, c_f],
    )  # fmt: skip
    compiled = compile_model(mb.build())
    x = rand((steps, 1, n_in), 2).astype(np.float32)
    hv, cv = rand((1, n_cell)).astype(np.float32), rand((1, n_cell)).astype(np.float32)
    got_h, got_c = compiled.run([x, hv, cv, np.array([rounds], np.int32)])
    want_h, want_c = hv.astype(np.float64), cv.astype(np.float64)
    for _ in range(rounds):
        _, want_h, want_c = cell.sequence(x, want_h, want_c)
    assert_close(got_h, want_h, F32)
    assert_close(got_c, want_c, F32)

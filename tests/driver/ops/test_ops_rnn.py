"""RNN, UNIDIRECTIONAL_SEQUENCE_RNN and BIDIRECTIONAL_SEQUENCE_RNN.

Positive rows compare with a float64 numpy reference written here (a plain
loop over time steps); negative rows check the INVALID_ARGUMENT message
(operation, operand, rule); the WHILE tests run real models through the
executor with the recurrent state carried by the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from nnhal.driver.ops.registry import OperandInfo, validate_operation
from ops_harness import RNG, Bad, X, context, out, scalar

from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16

ACTIVATIONS = {
    0: lambda z: z,
    1: lambda z: np.maximum(z, 0),
    2: lambda z: np.clip(z, -1, 1),
    3: lambda z: np.clip(z, 0, 6),
    4: np.tanh,
    6: lambda z: 1 / (1 + np.exp(-z)),
}


# ---------------------------------------------------------------------------
# Operands and the harness
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NoValue(X):
    """An optional tensor: omitted in the model (NO_VALUE), or only at run time."""

    runtime: bool = False  # a model input given no value at execution time

    def info(self) -> OperandInfo:
        if self.runtime:  # declared with a placeholder shape, as the vectors do
            return OperandInfo(self.type, (0,))
        return OperandInfo(self.type, (), omitted=True)


def none(type_=F32, runtime=False) -> NoValue:
    return NoValue(type_, None, (), runtime=runtime)


def tensor(type_, shape, *, const=False, dims="data", scale=1.0) -> X:
    data = RNG.uniform(-scale, scale, shape).astype(np.float16 if type_ == F16 else np.float32)
    return X(type_, data, dims, const=const)


def run(op: Op, ins: list[X], outs: list[X]):
    """validate + prepare + execute; returns (version, shapes, results as a tuple)."""
    ctx = context(op, ins, outs)
    version = validate_operation(ctx)
    shapes = ctx.op.prepare(ctx)
    kernel = ctx.op.kernel(ctx)
    arrays = [x.data for x in ins if x.is_tensor]
    result = kernel(*arrays)
    results = result if isinstance(result, tuple) else (result,)
    for k, r in enumerate(results):
        assert r.flags.c_contiguous
        for a in arrays:
            assert a is None or not np.shares_memory(r, a), f"output {k} is a view of an input"
        for other in results[k + 1 :]:
            assert not np.shares_memory(r, other)
    return version, shapes, results


def check(got: np.ndarray, want: np.ndarray, type_: T, shape=None) -> None:
    dtype = np.float16 if type_ == F16 else np.float32
    assert got.dtype == dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    tol = 1e-2 if type_ == F16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
    if shape is not None:
        assert len(shape) == got.ndim
        assert all(p in (0, s) for p, s in zip(shape, got.shape)), (shape, got.shape)


def real(x: X) -> np.ndarray:
    return x.data.astype(np.float64)


def cell(x, w, r, b, h, act, aux=None, aux_w=None):
    z = x @ w.T + h @ r.T + b
    if aux is not None:
        z = z + aux @ aux_w.T
    return ACTIVATIONS[act](z)


def sequence(x, w, r, b, h, act, reverse=False, aux=None, aux_w=None):
    """[T, B, I] time-major reference; returns ([T, B, U], last state)."""
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outs = np.zeros((x.shape[0], h.shape[0], w.shape[0]))
    for t in steps:
        h = cell(x[t], w, r, b, h, act, None if aux is None else aux[t], aux_w)
        outs[t] = h
    return outs, h


# ---------------------------------------------------------------------------
# RNN
# ---------------------------------------------------------------------------


def rnn_inputs(type_, batch=2, size=3, units=4, act=0, const=False, dims="data"):
    return [
        tensor(type_, (batch, size), dims=dims),
        tensor(type_, (units, size), const=const, scale=0.5, dims=dims),
        tensor(type_, (units, units), const=const, scale=0.5, dims=dims),
        tensor(type_, (units,), const=const, dims=dims),
        tensor(type_, (batch, units), dims=dims),
        scalar(act),
    ]


@pytest.mark.parametrize("type_", [F32, F16])
@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
@pytest.mark.parametrize("const", [False, True])
def test_rnn(type_, act, const):
    ins = rnn_inputs(type_, act=act, const=const)
    version, shapes, (state, output) = run(Op.RNN, ins, [out(type_), out(type_)])
    assert version == (V.V1_0 if type_ == F32 else V.V1_2)
    want = cell(*(real(x) for x in ins[:5]), act)
    assert shapes == [(2, 4), (2, 4)]
    check(state, want, type_)
    check(output, want, type_)


def test_rnn_unknown_shapes_are_checked_at_run_time():
    ins = rnn_inputs(F32, batch=3, size=2, units=5, act=4, dims=None)
    _, shapes, (state, _) = run(Op.RNN, ins, [out(F32), out(F32)])
    assert shapes == [(0, 0), (0, 0)]
    check(state, cell(*(real(x) for x in ins[:5]), 4), F32)

    bad = list(ins)
    bad[3] = tensor(F32, (1,), dims=None)  # would broadcast silently
    ctx = context(Op.RNN, bad, [out(F32), out(F32)])
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(GeneralFailure, match=r"RNN \(subgraph 0, operation 3\).*bias"):
        kernel(*(x.data for x in bad[:5]))


# ---------------------------------------------------------------------------
# UNIDIRECTIONAL_SEQUENCE_RNN
# ---------------------------------------------------------------------------


def uni_inputs(type_, time_major, act=4, steps=5, batch=2, size=3, units=4, const=False):
    shape = (steps, batch, size) if time_major else (batch, steps, size)
    return [
        tensor(type_, shape),
        tensor(type_, (units, size), const=const, scale=0.5),
        tensor(type_, (units, units), const=const, scale=0.5),
        tensor(type_, (units,), const=const),
        tensor(type_, (batch, units)),
        scalar(act),
        scalar(int(time_major)),
    ]


def uni_reference(ins, time_major):
    x = real(ins[0]) if time_major else real(ins[0]).swapaxes(0, 1)
    outs, last = sequence(x, *(real(v) for v in ins[1:5]), int(ins[5].data))
    return (outs if time_major else outs.swapaxes(0, 1)), last


@pytest.mark.parametrize("type_", [F32, F16])
@pytest.mark.parametrize("time_major", [True, False])
@pytest.mark.parametrize("state", [False, True])
@pytest.mark.parametrize("act", [0, 1, 4])
def test_unidirectional(type_, time_major, state, act):
    ins = uni_inputs(type_, time_major, act=act, const=act == 1)
    outs = [out(type_)] * (2 if state else 1)
    version, shapes, results = run(Op.UNIDIRECTIONAL_SEQUENCE_RNN, ins, outs)
    assert version == (V.V1_3 if state else V.V1_2)
    want, last = uni_reference(ins, time_major)
    lead = (5, 2) if time_major else (2, 5)
    assert shapes == [(*lead, 4)] + ([(2, 4)] if state else [])
    check(results[0], want, type_)
    if state:
        check(results[1], last, type_)


def test_unidirectional_no_steps_keeps_the_state():
    ins = uni_inputs(F32, True, steps=0)
    _, _, (output, state) = run(Op.UNIDIRECTIONAL_SEQUENCE_RNN, ins, [out(F32), out(F32)])
    assert output.shape == (0, 2, 4)
    np.testing.assert_array_equal(state, ins[4].data)


# ---------------------------------------------------------------------------
# BIDIRECTIONAL_SEQUENCE_RNN
# ---------------------------------------------------------------------------


def bidi_inputs(type_, time_major, merge, mode, runtime=False, act=4, fw=4, bw=3, aux_size=2):
    steps, batch, size = 4, 2, 3
    lead = (steps, batch) if time_major else (batch, steps)
    bw_size = aux_size if mode == "parallel" else size
    ins = [tensor(type_, (*lead, size))]
    for units, in_size in ((fw, size), (bw, bw_size)):
        ins += [
            tensor(type_, (units, in_size), scale=0.5),
            tensor(type_, (units, units), scale=0.5),
            tensor(type_, (units,)),
            tensor(type_, (batch, units)),
        ]
    aux = tensor(type_, (*lead, aux_size)) if mode != "none" else none(type_, runtime)
    if mode == "cross":
        ins += [aux, tensor(type_, (fw, aux_size)), tensor(type_, (bw, aux_size))]
    else:
        ins += [aux, none(type_, runtime), none(type_, runtime)]
    return ins + [scalar(act), scalar(time_major, T.BOOL), scalar(merge, T.BOOL)]


def bidi_reference(ins, time_major, mode):
    def tm(v):
        return real(v) if time_major else real(v).swapaxes(0, 1)

    x, act = tm(ins[0]), int(ins[12].data)
    aux = tm(ins[9]) if mode != "none" else None
    fw_cell, bw_cell = [real(v) for v in ins[1:5]], [real(v) for v in ins[5:9]]
    fw_aux = (aux, real(ins[10])) if mode == "cross" else (None, None)
    bw_aux = (aux, real(ins[11])) if mode == "cross" else (None, None)
    fw_out, fw_last = sequence(x, *fw_cell, act, False, *fw_aux)
    bw_x = aux if mode == "parallel" else x
    bw_out, bw_last = sequence(bw_x, *bw_cell, act, True, *bw_aux)
    if not time_major:
        fw_out, bw_out = fw_out.swapaxes(0, 1), bw_out.swapaxes(0, 1)
    return fw_out, bw_out, fw_last, bw_last


@pytest.mark.parametrize("type_", [F32, F16])
@pytest.mark.parametrize("time_major", [True, False])
@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("state", [False, True])
@pytest.mark.parametrize(
    "mode,runtime", [("none", False), ("none", True), ("parallel", False), ("cross", False)]
)
def test_bidirectional(type_, time_major, merge, state, mode, runtime):
    ins = bidi_inputs(type_, time_major, merge, mode, runtime)
    n_out = (1 if merge else 2) + (2 if state else 0)
    version, shapes, results = run(Op.BIDIRECTIONAL_SEQUENCE_RNN, ins, [out(type_)] * n_out)
    assert version == (V.V1_3 if state else V.V1_2)
    fw_out, bw_out, fw_last, bw_last = bidi_reference(ins, time_major, mode)
    want = [np.concatenate([fw_out, bw_out], axis=2)] if merge else [fw_out, bw_out]
    if state:
        want += [fw_last, bw_last]
    assert len(results) == len(want) == len(shapes)
    for got, exp, shape in zip(results, want, shapes):
        assert shape == exp.shape
        check(got, exp, type_)


# ---------------------------------------------------------------------------
# State outputs carried by WHILE
# ---------------------------------------------------------------------------


def _while_model(carried_dims, extra_dims, body_op):
    """WHILE over values (i, *carried, n, *extra) while i < n; the body adds 1 to i
    and sets the carried values from ``body_op(body, carried, extra)`` (a list of
    outputs it writes). Main: inputs (i, *carried, n, *extra), outputs (i, *carried).
    """
    mb = ModelBuilder()
    i32 = T.TENSOR_INT32
    dims = [[1], *carried_dims, [1], *extra_dims]
    types = [i32, *[F32] * len(carried_dims), i32, *[F32] * len(extra_dims)]
    cond = mb.subgraph()
    c_in = [cond.input(t, d) for t, d in zip(types, dims)]
    c_out = cond.output(T.TENSOR_BOOL8, [1])
    cond.operation(Op.LESS, [c_in[0], c_in[len(carried_dims) + 1]], [c_out])
    body = mb.subgraph()
    b_in = [body.input(t, d) for t, d in zip(types, dims)]
    b_out = [body.output(i32, [1]), *[body.output(F32, d) for d in carried_dims]]
    one, no_act = body.constant(i32, [1]), body.constant(T.INT32, 0)
    body.operation(Op.ADD, [b_in[0], one, no_act], [b_out[0]])
    k = len(carried_dims)
    body_op(body, b_in[1 : k + 1], b_in[k + 2 :], b_out[1:])
    g = mb.main
    m_in = [g.input(t, d) for t, d in zip(types, dims)]
    m_out = [g.output(t, d) for t, d in zip(types[: k + 1], dims[: k + 1])]
    g.operation(Op.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), *m_in], m_out)
    return compile_model(mb.build())


def _weights(size, units):
    return (
        RNG.uniform(-0.5, 0.5, (units, size)).astype(np.float32),
        RNG.uniform(-0.5, 0.5, (units, units)).astype(np.float32),
        RNG.uniform(-1, 1, units).astype(np.float32),
    )


def test_rnn_state_through_while():
    """h_{k+1} = RNN(x, h_k) for n iterations: the hidden state is the loop state."""
    batch, size, units, n = 2, 3, 4, 6
    w, r, b = _weights(size, units)

    def body_op(body, carried, extra, outs):
        scratch = body.temporary(F32, [batch, units])
        consts = [body.constant(F32, v) for v in (w, r, b)]
        act = body.constant(T.INT32, 4)
        body.operation(Op.RNN, [extra[0], *consts, carried[0], act], [outs[0], scratch])

    compiled = _while_model([[batch, units]], [[batch, size]], body_op)
    x = RNG.uniform(-1, 1, (batch, size)).astype(np.float32)
    h0 = RNG.uniform(-1, 1, (batch, units)).astype(np.float32)
    count, h_final = compiled.run([np.array([0], np.int32), h0, np.array([n], np.int32), x])
    assert count.tolist() == [n]
    want = h0.astype(np.float64)
    for _ in range(n):
        want = cell(x.astype(np.float64), w, r, b, want, 4)
    np.testing.assert_allclose(h_final, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("time_major", [True, False])
def test_unidirectional_state_output_through_while(time_major):
    """A sequence in n chunks: the state output of one chunk is the next chunk's state."""
    steps, batch, size, units, n = 3, 2, 3, 4, 4
    w, r, b = _weights(size, units)
    chunk_dims = [steps, batch, size] if time_major else [batch, steps, size]
    out_dims = [steps, batch, units] if time_major else [batch, steps, units]

    def body_op(body, carried, extra, outs):
        seq = body.temporary(F32, out_dims)
        consts = [body.constant(F32, v) for v in (w, r, b)]
        scalars = [body.constant(T.INT32, 1), body.constant(T.INT32, int(time_major))]
        body.operation(
            Op.UNIDIRECTIONAL_SEQUENCE_RNN,
            [extra[0], *consts, carried[0], *scalars],
            [seq, outs[0]],
        )

    compiled = _while_model([[batch, units]], [chunk_dims], body_op)
    x = RNG.uniform(-1, 1, chunk_dims).astype(np.float32)
    h0 = RNG.uniform(-1, 1, (batch, units)).astype(np.float32)
    _, h_final = compiled.run([np.array([0], np.int32), h0, np.array([n], np.int32), x])
    x_tm = x if time_major else x.swapaxes(0, 1)
    whole = np.concatenate([x_tm] * n).astype(np.float64)
    _, want = sequence(whole, w, r, b, h0.astype(np.float64), 1)
    np.testing.assert_allclose(h_final, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------


def _replace(ins: list, **at) -> list:
    ins = list(ins)
    for key, value in at.items():
        ins[int(key[1:])] = value
    return ins


def _rows(op: Op, base: list, outs: list):
    """A row maker: ``row(id, match, **{"i<k>": operand})`` replaces inputs of ``base``."""

    def row(id_, match, *, ins=None, outputs=None, **at):
        return Bad(id_, op, ins or _replace(base, **at), outputs or outs, match)

    return row


_RNN = rnn_inputs(F32)
_R = _rows(Op.RNN, _RNN, [out(F32), out(F32)])
RNN_BAD = [
    _R("five-inputs", r"expected 6 inputs, got 5", ins=_RNN[:5]),
    _R("one-output", r"expected 2 outputs, got 1", outputs=[out(F32)]),
    _R(
        "int32-input",
        r"input 0 \(input\) has type TENSOR_INT32; supported: TENSOR_FLOAT32 \(1\.0\), "
        r"TENSOR_FLOAT16 \(1\.2\)",
        i0=X(T.TENSOR_INT32, np.zeros((2, 3), np.int32)),
    ),
    _R(
        "f16-weights",
        r"input 1 \(weights\) has type TENSOR_FLOAT16; with TENSOR_FLOAT32 supported: "
        r"TENSOR_FLOAT32",
        i1=tensor(F16, (4, 3)),
    ),
    _R(
        "float-activation",
        r"input 5 \(activation\) has type FLOAT32; .*supported: INT32",
        i5=scalar(1.0, T.FLOAT32),
    ),
    _R(
        "activation-5",
        r"input 5 \(activation\) has value 5; supported: NONE \(0\), RELU \(1\), RELU1 \(2\), "
        r"RELU6 \(3\), TANH \(4\), SIGMOID \(6\)",
        i5=scalar(5),
    ),
    _R("activation-neg", r"value -1", i5=scalar(-1)),
    _R("input-rank-3", r"input 0 has rank 3; it must have rank 2", i0=tensor(F32, (2, 3, 1))),
    _R("bias-rank-2", r"input 3 has rank 2; it must have rank 1", i3=tensor(F32, (4, 1))),
    _R(
        "input-size",
        r"input 1 axis 1 is 5 but input 0 axis 1 is 3; both are the input_size",
        i1=tensor(F32, (4, 5)),
    ),
    _R(
        "recurrent-not-square",
        r"input 2 axis 1 is 5 but input 1 axis 0 is 4; both are the num_units",
        i2=tensor(F32, (4, 5)),
    ),
    _R(
        "state-batch",
        r"input 4 axis 0 is 3 but input 0 axis 0 is 2; both are the batch_size",
        i4=tensor(F32, (3, 4)),
    ),
    _R(
        "output-type",
        r"output 0 \(hidden_state_out\) has type TENSOR_FLOAT16",
        outputs=[out(F16), out(F32)],
    ),
]

UNI = Op.UNIDIRECTIONAL_SEQUENCE_RNN
_U = _rows(UNI, uni_inputs(F32, False), [out(F32), out(F32)])
UNI_BAD = [
    _U("time-major-2", r"input 6 \(time_major\) has value 2", i6=scalar(2)),
    _U(
        "time-major-bool",
        r"input 6 \(time_major\) has type BOOL; .*supported: INT32",
        i6=scalar(True, T.BOOL),
    ),
    _U(
        "three-outputs",
        r"expected 1 output, or 2 with the state output \(HAL 1\.3\); got 3",
        outputs=[out(F32)] * 3,
    ),
    _U("input-rank-2", r"input 0 has rank 2; it must have rank 3", i0=tensor(F32, (2, 3))),
    _U(
        "state-batch",
        r"input 4 axis 0 is 5 but input 0 axis 0 is 2; both are the batch_size",
        i4=tensor(F32, (5, 4)),
    ),
    _U(
        "state-output-type",
        r"output 1 \(output\) has type TENSOR_FLOAT16",
        outputs=[out(F32), out(F16)],
    ),
]

BIDI = Op.BIDIRECTIONAL_SEQUENCE_RNN
_TWO = [out(F32), out(F32)]
_BIDI = bidi_inputs(F32, True, False, "none")
_B = _rows(BIDI, _BIDI, _TWO)
_BC = _rows(BIDI, bidi_inputs(F32, True, False, "cross"), _TWO)
_BP = _rows(BIDI, bidi_inputs(F32, True, False, "parallel"), _TWO)
BIDI_BAD = [
    _B("fourteen-inputs", r"expected 15 inputs, got 14", ins=_BIDI[:14]),
    _B(
        "five-outputs",
        r"merge_outputs\) false the operation has 2 outputs, or 4 with the state outputs; got 5",
        outputs=[out(F32)] * 5,
    ),
    _B(
        "aux-weights-without-aux-input",
        r"input 9 has no value, input 10 has a value, input 11 has no value: the auxiliary "
        r"inputs 9 \(aux_input\), 10 \(fw_aux_weights\) and 11 \(bw_aux_weights\) must all",
        i10=tensor(F32, (4, 2), const=True),
    ),
    _B(
        "merged-with-two-outputs",
        r"with input 14 \(merge_outputs\) true the operation has 1 outputs, or 3 with the "
        r"state outputs; got 2",
        i14=scalar(True, T.BOOL),
    ),
    _B(
        "separate-with-three-outputs",
        r"merge_outputs\) false the operation has 2 outputs, or 4 .*; got 3",
        outputs=[out(F32)] * 3,
    ),
    _B(
        "time-major-int",
        r"input 13 \(time_major\) has type INT32; .*supported: BOOL",
        i13=scalar(1),
    ),
    _BC("aux-type", r"input 9 \(aux_input\) has type TENSOR_FLOAT16", i9=tensor(F16, (4, 2, 2))),
    _BC(
        "cross-fw-aux-units",
        r"input 10 axis 0 is 5 but input 1 axis 0 is 4; both are the fw_num_units",
        i10=tensor(F32, (5, 2), const=True),
    ),
    _BP(
        "parallel-bw-size",
        r"input 5 axis 1 is 2 but input 9 axis 2 is 6; both are the aux_input_size",
        i9=tensor(F32, (4, 2, 6), const=True),
    ),
    _BP(
        "aux-batch",
        r"input 9 axis 1 is 3 but input 0 axis 1 is 2; both are the batch_size",
        i9=tensor(F32, (4, 3, 2), const=True),
    ),
    _B("activation-7", r"input 12 \(activation\) has value 7", i12=scalar(7)),
]


@pytest.mark.parametrize("row", RNN_BAD, ids=lambda r: r.id)
def test_rnn_invalid(row):
    row.check()


@pytest.mark.parametrize("row", UNI_BAD + BIDI_BAD, ids=lambda r: f"{r.op.name}-{r.id}")
def test_sequence_invalid(row):
    row.check()


def test_bidirectional_aux_pattern_checked_at_run_time():
    """Model inputs may get no value at execution: the linking mode is decided then."""
    ins = bidi_inputs(F32, True, False, "none", runtime=True)
    ins[10] = tensor(F32, (4, 2))  # fw aux weights with a value, the aux input without
    ctx = context(BIDI, ins, _TWO)
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(GeneralFailure, match=r"BIDIRECTIONAL_SEQUENCE_RNN.*auxiliary inputs"):
        kernel(*(x.data for x in ins[:12]))


def test_bidirectional_cross_linking_aux_weights_checked_at_run_time():
    """Found by the fuzz target `validation`: aux weights given at execution with the wrong
    shape reached a matmul (ValueError) instead of a GENERAL_FAILURE naming them."""
    ins = bidi_inputs(F32, True, False, "cross")
    ctx = context(BIDI, ins, _TWO)
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    arrays = [x.data for x in ins[:12]]
    arrays[10] = np.zeros((4, 5), np.float32)  # aux_input_size is 2
    with pytest.raises(GeneralFailure, match=r"input 10 \(fw_aux_weights\) has shape \[4, 5\]"):
        kernel(*arrays)


def test_bidirectional_state_outputs_through_while():
    """Merged output plus both state outputs; the states are the loop state."""
    steps, batch, size, fw, bw, n = 3, 2, 3, 4, 3, 3
    fw_w, fw_r, fw_b = _weights(size, fw)
    bw_w, bw_r, bw_b = _weights(size, bw)

    def body_op(body, carried, extra, outs):
        merged = body.temporary(F32, [steps, batch, fw + bw])
        fw_cell = [body.constant(F32, v) for v in (fw_w, fw_r, fw_b)]
        bw_cell = [body.constant(F32, v) for v in (bw_w, bw_r, bw_b)]
        aux = [body.no_value(F32, [0]) for _ in range(3)]
        flags = [body.constant(T.BOOL, True), body.constant(T.BOOL, True)]
        body.operation(
            BIDI,
            [
                extra[0],
                *fw_cell,
                carried[0],
                *bw_cell,
                carried[1],
                *aux,
                body.constant(T.INT32, 4),
                *flags,
            ],
            [merged, outs[0], outs[1]],
        )

    compiled = _while_model([[batch, fw], [batch, bw]], [[steps, batch, size]], body_op)
    x = RNG.uniform(-1, 1, (steps, batch, size)).astype(np.float32)
    h_fw = RNG.uniform(-1, 1, (batch, fw)).astype(np.float32)
    h_bw = RNG.uniform(-1, 1, (batch, bw)).astype(np.float32)
    _, got_fw, got_bw = compiled.run(
        [np.array([0], np.int32), h_fw, h_bw, np.array([n], np.int32), x]
    )
    want_fw, want_bw = h_fw.astype(np.float64), h_bw.astype(np.float64)
    for _ in range(n):
        _, want_fw = sequence(x.astype(np.float64), fw_w, fw_r, fw_b, want_fw, 4)
        _, want_bw = sequence(x.astype(np.float64), bw_w, bw_r, bw_b, want_bw, 4, reverse=True)
    np.testing.assert_allclose(got_fw, want_fw, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_bw, want_bw, rtol=1e-5, atol=1e-5)

"""SVDF: one step against a float64 loop reference, the state through WHILE, negative rows."""

from __future__ import annotations

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
    1: lambda z: max(z, 0.0),
    2: lambda z: min(max(z, -1.0), 1.0),
    3: lambda z: min(max(z, 0.0), 6.0),
    4: np.tanh,
    5: lambda z: float(np.signbit(z)),
    6: lambda z: 1 / (1 + np.exp(-z)),
}


def reference(x, wf, wt, bias, state, rank, act):
    """The documented step with explicit loops; returns (state_out, output)."""
    batch, filters, memory = x.shape[0], wf.shape[0], wt.shape[1]
    units = filters // rank
    new_state = np.zeros((batch, filters * memory))
    output = np.zeros((batch, units))
    for b in range(batch):
        scratch = []
        for f in range(filters):
            mem = list(state[b, f * memory : (f + 1) * memory])
            mem[-1] = float(np.dot(x[b], wf[f]))  # the newest slot
            scratch.append(float(np.dot(mem, wt[f])))
            new_state[b, f * memory : (f + 1) * memory] = mem[1:] + [0.0]
        for u in range(units):
            total = (0.0 if bias is None else bias[u]) + sum(scratch[u * rank : (u + 1) * rank])
            output[b, u] = ACTIVATIONS[act](total)
    return new_state, output


class NoValue(X):
    def info(self) -> OperandInfo:
        return OperandInfo(self.type, (), omitted=True)


def tensor(type_, shape, const=False, dims="data"):
    data = RNG.uniform(-1, 1, shape).astype(np.float16 if type_ == F16 else np.float32)
    return X(type_, data, dims, const=const)


def svdf_inputs(type_, *, batch=2, size=3, units=2, rank=2, memory=4, bias="yes", act=0, **kw):
    filters = units * rank
    if bias == "yes":
        b = tensor(type_, (units,), **kw)
    elif bias == "runtime":  # a model input given no value at execution
        b = X(type_, None, (units,))
    else:
        b = NoValue(type_)
    return [
        tensor(type_, (batch, size), dims=kw.get("dims", "data")),
        tensor(type_, (filters, size), **kw),
        tensor(type_, (filters, memory), **kw),
        b,
        tensor(type_, (batch, memory * filters), dims=kw.get("dims", "data")),
        scalar(rank),
        scalar(act),
    ]


def run(ins):
    type_ = ins[0].type
    ctx = context(Op.SVDF, ins, [out(type_), out(type_)])
    version = validate_operation(ctx)
    shapes = ctx.op.prepare(ctx)
    state, output = ctx.op.kernel(ctx)(*(x.data for x in ins[:5]))
    return version, shapes, state, output


def expected(ins):
    real = [None if x.data is None else x.data.astype(np.float64) for x in ins[:5]]
    return reference(*real, int(ins[5].data), int(ins[6].data))


@pytest.mark.parametrize("type_", [F32, F16])
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("bias", ["yes", "omitted", "runtime"])
@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_svdf(type_, rank, bias, act):
    ins = svdf_inputs(type_, rank=rank, bias=bias, act=act, const=act % 2 == 0)
    version, shapes, state, output = run(ins)
    assert version == (V.V1_0 if type_ == F32 else V.V1_2)
    want_state, want_out = expected(ins)
    dtype = np.float16 if type_ == F16 else np.float32
    assert state.dtype == output.dtype == dtype
    assert shapes == [want_state.shape, want_out.shape]
    tol = 1e-2 if type_ == F16 else 1e-5
    np.testing.assert_allclose(state, want_state, rtol=tol, atol=tol)
    np.testing.assert_allclose(output, want_out, rtol=tol, atol=tol)
    for arr in (state, output):
        assert not any(np.shares_memory(arr, x.data) for x in ins[:5] if x.data is not None)


def test_unknown_shapes_and_run_time_checks():
    ins = svdf_inputs(F32, dims=None)
    _, shapes, state, output = run(ins)
    assert shapes == [(0, 0), (0, 0)]
    want_state, want_out = expected(ins)
    np.testing.assert_allclose(state, want_state, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(output, want_out, rtol=1e-5, atol=1e-5)
    ctx = context(Op.SVDF, ins, [out(F32), out(F32)])
    kernel = ctx.op.kernel(ctx)
    short_state = np.zeros((2, 3), np.float32)
    with pytest.raises(GeneralFailure, match=r"SVDF \(subgraph 0, operation 3\).*state \(2, 3\)"):
        kernel(*(x.data for x in ins[:4]), short_state)


def test_state_through_while():
    """A stream of n frames: the SVDF state is the WHILE loop state."""
    batch, size, units, rank, memory, n = 1, 3, 2, 2, 3, 5
    filters = units * rank
    wf = RNG.uniform(-1, 1, (filters, size)).astype(np.float32)
    wt = RNG.uniform(-1, 1, (filters, memory)).astype(np.float32)
    bias = RNG.uniform(-1, 1, units).astype(np.float32)
    i32, state_dims = T.TENSOR_INT32, [batch, memory * filters]
    mb = ModelBuilder()
    types = [i32, F32, F32, i32, F32]
    dims = [[1], state_dims, [batch, units], [1], [batch, size]]
    cond = mb.subgraph()
    c = [cond.input(ty, d) for ty, d in zip(types, dims)]
    c_out = cond.output(T.TENSOR_BOOL8, [1])
    cond.operation(Op.LESS, [c[0], c[3]], [c_out])
    body = mb.subgraph()
    b = [body.input(ty, d) for ty, d in zip(types, dims)]
    b_out = [body.output(ty, d) for ty, d in zip(types[:3], dims[:3])]
    body.operation(Op.ADD, [b[0], body.constant(i32, [1]), body.constant(T.INT32, 0)], [b_out[0]])
    consts = [body.constant(F32, v) for v in (wf, wt, bias)]
    body.operation(
        Op.SVDF,
        [
            b[4],
            consts[0],
            consts[1],
            consts[2],
            b[1],
            body.constant(T.INT32, rank),
            body.constant(T.INT32, 1),
        ],
        [b_out[1], b_out[2]],
    )
    g = mb.main
    m_in = [g.input(ty, d) for ty, d in zip(types, dims)]
    m_out = [g.output(ty, d) for ty, d in zip(types[:3], dims[:3])]
    g.operation(Op.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), *m_in], m_out)
    compiled = compile_model(mb.build())
    x = RNG.uniform(-1, 1, (batch, size)).astype(np.float32)
    s0 = RNG.uniform(-1, 1, state_dims).astype(np.float32)
    _, state, output = compiled.run(
        [
            np.array([0], np.int32),
            s0,
            np.zeros((batch, units), np.float32),
            np.array([n], np.int32),
            x,
        ]
    )
    want_state = s0.astype(np.float64)
    for _ in range(n):
        want_state, want_out = reference(x, wf, wt, bias, want_state, rank, 1)
    np.testing.assert_allclose(state, want_state, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(output, want_out, rtol=1e-5, atol=1e-5)


_GOOD = svdf_inputs(F32)
_OUTS = [out(F32), out(F32)]


def _with(**at):
    ins = list(_GOOD)
    for key, value in at.items():
        ins[int(key[1:])] = value
    return ins


BAD_ROWS = [
    Bad("six-inputs", Op.SVDF, _GOOD[:6], _OUTS, r"expected 7 inputs, got 6"),
    Bad("one-output", Op.SVDF, _GOOD, _OUTS[:1], r"expected 2 outputs, got 1"),
    Bad(
        "int32-input",
        Op.SVDF,
        _with(i0=X(T.TENSOR_INT32, np.zeros((2, 3), np.int32))),
        _OUTS,
        r"input 0 \(input\) has type TENSOR_INT32; supported: TENSOR_FLOAT32 \(1\.0\), "
        r"TENSOR_FLOAT16 \(1\.2\)",
    ),
    Bad("f16-bias", Op.SVDF, _with(i3=tensor(F16, (2,))), _OUTS, r"input 3 \(bias\) has type"),
    Bad(
        "state-missing", Op.SVDF, _with(i4=NoValue(F32)), _OUTS, r"input 4 \(state_in\) is required"
    ),
    Bad("rank-0", Op.SVDF, _with(i5=scalar(0)), _OUTS, r"input 5 \(rank\) has value 0; it must"),
    Bad(
        "rank-3",
        Op.SVDF,
        _with(i5=scalar(3)),
        _OUTS,
        r"input 1 \(weights_feature\) has 4 filters \(axis 0\), not a multiple of input 5 "
        r"\(rank\) 3",
    ),
    Bad(
        "activation-7",
        Op.SVDF,
        _with(i6=scalar(7)),
        _OUTS,
        r"input 6 \(activation\) has value 7; supported: NONE \(0\), .*SIGN_BIT \(5\), "
        r"SIGMOID \(6\)",
    ),
    Bad("input-rank", Op.SVDF, _with(i0=tensor(F32, (2, 3, 1))), _OUTS, r"input 0 has rank 3"),
    Bad(
        "input-size",
        Op.SVDF,
        _with(i1=tensor(F32, (4, 5))),
        _OUTS,
        r"input 1 axis 1 is 5 but input 0 axis 1 is 3; both are the input_size",
    ),
    Bad(
        "time-filters",
        Op.SVDF,
        _with(i2=tensor(F32, (6, 4))),
        _OUTS,
        r"input 2 axis 0 is 6 but input 1 axis 0 is 4; both are the num_filters",
    ),
    Bad(
        "bias-units",
        Op.SVDF,
        _with(i3=tensor(F32, (3,))),
        _OUTS,
        r"input 3 axis 0 is 3 but num_filters / rank is 2; both are the num_units",
    ),
    Bad(
        "state-size",
        Op.SVDF,
        _with(i4=tensor(F32, (2, 15))),
        _OUTS,
        r"input 4 axis 1 is 15 but memory_size \* num_filters is 16; both are the state_size",
    ),
    Bad("output-type", Op.SVDF, _GOOD, [out(F32), out(F16)], r"output 1 \(output\) has type"),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid(row):
    row.check()

"""QUANTIZED_16BIT_LSTM and QUANTIZED_LSTM against real-valued references
(dequantize, float64 LSTM math, quantize), negative rows, and the fixed-point
helpers (gemmlowp logistic/tanh, inverse square root) against float math.

The integer kernels reproduce the reference's fixed-point steps; a float
reference agrees within a few units of the output scale, which is what the
rows check (the shared vectors check the exact integers)."""

from __future__ import annotations

import numpy as np
import pytest
from lstm_reference import GATES, Bad, Omit, context, run, tensor
from nnhal.driver.ops import _lstm_fixedpoint as fx
from nnhal.driver.ops.quantized_lstm import QUANTIZED_16BIT_DEF, QUANTIZED_LSTM_DEF
from nnhal.driver.ops.registry import lookup
from ops_harness import RNG, out, scalar

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

Q8A, Q8S, Q8, Q16, I32 = (
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT16_SYMM,
    T.TENSOR_INT32,
)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# ---------------------------------------------------------------------------
# fixed-point helpers
# ---------------------------------------------------------------------------


def test_fixed_point_logistic_and_tanh_tables():
    raw = np.arange(-(1 << 15), 1 << 15)
    logistic = fx.lookup(fx.logistic_table(3), raw) / 2**15
    assert np.abs(logistic - sigmoid(raw / 2**12)).max() < 3e-4
    for bits in range(7):
        tanh = fx.lookup(fx.tanh_table(bits), raw) / 2**15
        assert np.abs(tanh - np.tanh(raw / 2 ** (15 - bits))).max() < 5e-4, bits
    assert fx.lookup(fx.logistic_table(3), np.array([0]))[0] == 1 << 14  # one half
    assert fx.lookup(fx.tanh_table(3), np.array([0]))[0] == 0


def test_inverse_square_root_multiplier():
    values = np.array([2, 3, 100, 12345, 1 << 20, (1 << 31) - 1])
    m, shift = fx.inv_sqrt_multiplier(values)
    got = m * 2.0**shift / 2**31
    np.testing.assert_allclose(got, 1 / np.sqrt(values), rtol=3e-6)
    m, shift = fx.inv_sqrt_multiplier(np.array([0, 1]))
    assert m.tolist() == [(1 << 31) - 1] * 2 and shift.tolist() == [0, 0]


# ---------------------------------------------------------------------------
# QUANTIZED_16BIT_LSTM
# ---------------------------------------------------------------------------

W_SCALE, W_ZP = 0.00408021, 100


def q16_case(batch=2, n_in=2, n_out=4, const=True):
    x = RNG.integers(0, 256, (batch, n_in))
    h = RNG.integers(96, 160, (batch, n_out))
    c = RNG.integers(-3000, 3000, (batch, n_out))
    w_in = {g: RNG.integers(0, 256, (n_out, n_in)) for g in GATES}
    w_rec = {g: RNG.integers(0, 256, (n_out, n_out)) for g in GATES}
    bias = {g: RNG.integers(-60000, 60000, (n_out,)) for g in GATES}
    ins = [tensor(Q8A, x, scale=1 / 128, zp=128)]
    ins += [tensor(Q8A, w_in[g], scale=W_SCALE, zp=W_ZP, const=const) for g in GATES]
    ins += [tensor(Q8A, w_rec[g], scale=W_SCALE, zp=W_ZP, const=const) for g in GATES]
    ins += [tensor(I32, bias[g], scale=W_SCALE / 128, const=const) for g in GATES]
    ins += [tensor(Q16, c, scale=2**-11), tensor(Q8A, h, scale=1 / 128, zp=128)]
    return ins, (x, h, c, w_in, w_rec, bias)


def q16_reference(x, h, c, w_in, w_rec, bias):
    """Real-valued: gates from [input, prev_output] times each gate's weights laid
    out as the reference assembles them (recurrent columns, then input columns)."""
    v = np.concatenate([(x - 128) / 128, (h - 128) / 128], axis=1)
    pre = {}
    for g in GATES:
        w = (np.concatenate([w_rec[g], w_in[g]], axis=1) - W_ZP) * W_SCALE
        pre[g] = np.clip(v @ w.T + bias[g] * W_SCALE / 128, -8, 8 - 2**-12)  # int16, 3 int bits
    cell = c * 2**-11
    new = sigmoid(pre["forget"]) * cell + sigmoid(pre["input"]) * np.tanh(pre["cell"])
    new = np.clip(new, -16, 16 - 2**-11)
    output = sigmoid(pre["output"]) * np.tanh(np.clip(new, -8, 8))
    return new * 2**11, output * 128 + 128


@pytest.mark.parametrize("const", [True, False], ids=["const", "inputs"])
@pytest.mark.parametrize("sizes", [(2, 2, 4), (1, 4, 4), (3, 5, 2)])
def test_quantized_16bit_lstm(sizes, const):
    batch, n_in, n_out = sizes
    ins, args = q16_case(batch, n_in, n_out, const)
    outs = [out(Q16, None, 2**-11), out(Q8A, None, 1 / 128, 128)]
    version, shapes, (cell, output) = run(QUANTIZED_16BIT_DEF, ins, outs)
    assert version == V.V1_2
    assert shapes == [(batch, n_out), (batch, n_out)]
    want_cell, want_out = q16_reference(*args)
    assert np.abs(cell - want_cell).max() <= 3, np.abs(cell - want_cell).max()
    assert np.abs(output.astype(np.int64) - want_out).max() <= 1


def _q16_with(index, value):
    ins, _ = q16_case()
    ins[index] = value
    return ins


Q16_OUTS = [out(Q16, None, 2**-11), out(Q8A, None, 1 / 128, 128)]

BAD_Q16 = [
    Bad(
        "input-scale",
        QUANTIZED_16BIT_DEF,
        _q16_with(0, tensor(Q8A, [[1, 2]], scale=0.01, zp=128)),
        Q16_OUTS,
        r"input 0 \(input\) has scale 0.01 and zero point 128; it must have scale 1/128",
    ),
    Bad(
        "prev-output-zero-point",
        QUANTIZED_16BIT_DEF,
        _q16_with(14, tensor(Q8A, np.zeros((2, 4)), scale=1 / 128, zp=0)),
        Q16_OUTS,
        r"input 14 \(prev_output\) .* zero point 0",
    ),
    Bad(
        "weights-zero-point",
        QUANTIZED_16BIT_DEF,
        _q16_with(6, tensor(Q8A, np.zeros((4, 4)), scale=W_SCALE, zp=3)),
        Q16_OUTS,
        r"input 6 \(recurrent_to_forget_weights\) .* all weights must share input 1's scale",
    ),
    Bad(
        "bias-scale",
        QUANTIZED_16BIT_DEF,
        _q16_with(10, tensor(I32, np.zeros(4), scale=0.5)),
        Q16_OUTS,
        r"input 10 \(forget_gate_bias\) has scale 0.5 .* weights_scale / 128",
    ),
    Bad(
        "cell-scale",
        QUANTIZED_16BIT_DEF,
        _q16_with(13, tensor(Q16, np.zeros((2, 4)), scale=2**-10)),
        Q16_OUTS,
        r"input 13 \(prev_cell_state\) has scale .* must have scale 2\^-11",
    ),
    Bad(
        "bias-type",
        QUANTIZED_16BIT_DEF,
        _q16_with(9, tensor(Q8A, np.zeros(4), scale=W_SCALE / 128)),
        Q16_OUTS,
        r"input 9 \(input_gate_bias\) has type TENSOR_QUANT8_ASYMM; .*supported: TENSOR_INT32",
    ),
    Bad(
        "float-input",
        QUANTIZED_16BIT_DEF,
        _q16_with(0, tensor(T.TENSOR_FLOAT32, [[1.0, 2.0]])),
        Q16_OUTS,
        r"input 0 \(input\) has type TENSOR_FLOAT32; supported: TENSOR_QUANT8_ASYMM \(1.2\)",
    ),
    Bad(
        "weights-shape",
        QUANTIZED_16BIT_DEF,
        _q16_with(2, tensor(Q8A, np.zeros((4, 3)), scale=W_SCALE, zp=W_ZP)),
        Q16_OUTS,
        r"input 2 \(input_to_forget_weights\) has dimension 3 on axis 1",
    ),
    Bad(
        "cell-state-output-type",
        QUANTIZED_16BIT_DEF,
        q16_case()[0],
        [out(Q8A, None, 1 / 128, 128), Q16_OUTS[1]],
        r"output 0 \(cell_state_out\) has type TENSOR_QUANT8_ASYMM",
    ),
    Bad("one-output", QUANTIZED_16BIT_DEF, q16_case()[0], Q16_OUTS[:1], r"expected 2 outputs"),
]


# ---------------------------------------------------------------------------
# QUANTIZED_LSTM
# ---------------------------------------------------------------------------

S_IN, ZP_IN, S_W, S_H, ZP_H, S_LN, S_P, S_OUT = (
    1 / 128,
    3,
    1 / 64,
    1 / 128,
    -2,
    2**-14,
    1 / 64,
    1 / 16,
)


class QCase:
    """A QUANTIZED_LSTM row: random quantized parameters and the real-valued reference."""

    def __init__(self, *, batch=2, n_in=5, n_cell=8, n_out=None, cifg=False, peephole=False,
                 layer_norm=True, projection=False, cell_shift=-11, clips=(0.0, 0.0),
                 hidden_zp=0):  # fmt: skip
        n_out = n_cell if n_out is None else n_out
        self.cifg, self.layer_norm, self.cell_shift, self.clips = (
            cifg,
            layer_norm,
            cell_shift,
            clips,
        )
        self.hidden_zp = hidden_zp
        gates = GATES[1:] if cifg else GATES
        self.w = {g: RNG.integers(-64, 65, (n_cell, n_in)) for g in gates}
        self.r = {g: RNG.integers(-64, 65, (n_cell, n_out)) for g in gates}
        self.peep = {g: RNG.integers(-200, 200, (n_cell,)) for g in gates if g != "cell"}
        self.peep = self.peep if peephole else None
        self.ln = {g: RNG.integers(8000, 24000, (n_cell,)) for g in gates} if layer_norm else None
        # with layer norm a bias of q has the real value q * S_LN / 1024
        self.b = {g: RNG.integers(-(1 << 23), 1 << 23, (n_cell,)) for g in gates}
        self.p = RNG.integers(-64, 65, (n_out, n_cell)) if projection else None
        self.pb = RNG.integers(-300, 300, (n_out,)) if projection else None
        self.x = RNG.integers(-128, 128, (batch, n_in))
        self.h = RNG.integers(-60, 60, (batch, n_out))
        self.c = RNG.integers(-(2 ** (-cell_shift)), 2 ** (-cell_shift), (batch, n_cell))
        # intermediate scales: any with layer norm; 2^-12 (the gates' Q3.12) without
        self.mid = 0.0007 if layer_norm else 2**-12
        self.out_scale = S_OUT if projection else S_H

    def inputs(self, const=True) -> list:
        n_cell, n_in = self.w["forget"].shape
        n_out = self.r["forget"].shape[1]

        def t(type_, a, scale=0.0):
            return tensor(type_, a, scale=scale, const=const)

        ins = [tensor(Q8S, self.x, scale=S_IN, zp=ZP_IN)]
        ins += [t(Q8, self.w[g], S_W) if g in self.w else Omit(Q8) for g in GATES]
        ins += [t(Q8, self.r[g], S_W) if g in self.r else Omit(Q8) for g in GATES]
        for g in ("input", "forget", "output"):
            has = self.peep is not None and g in self.peep
            ins.append(t(Q16, self.peep[g], 2**-12) if has else Omit(Q16))
        ins += [t(I32, self.b[g]) if g in self.b else Omit(I32) for g in GATES]
        ins.append(Omit(Q8) if self.p is None else t(Q8, self.p, S_P))
        ins.append(Omit(I32) if self.pb is None else t(I32, self.pb))
        ins.append(tensor(Q8S, self.h, scale=self.out_scale, zp=ZP_H))
        ins.append(tensor(Q16, self.c, scale=2.0**self.cell_shift))
        for g in GATES:
            has = self.ln is not None and g in self.ln
            ins.append(t(Q16, self.ln[g], S_LN) if has else Omit(Q16))
        ins += [scalar(self.clips[0], T.FLOAT32), scalar(self.clips[1], T.FLOAT32)]
        ins += [scalar(self.mid, T.FLOAT32) for _ in GATES]
        ins += [scalar(self.hidden_zp), scalar(S_H, T.FLOAT32)]
        del n_cell, n_in, n_out
        return ins

    def outputs(self) -> list:
        return [
            out(Q8S, None, self.out_scale, ZP_H),
            out(Q16, None, 2.0**self.cell_shift),
            out(Q8S, None, self.out_scale, ZP_H),
        ]

    def requantized(self, v):
        """Gate accumulators are int16 in the intermediate scale before layer norm."""
        return np.clip(np.round(v / self.mid), -32768, 32767) * self.mid

    def reference(self):
        x = (self.x - ZP_IN) * S_IN
        h = (self.h - ZP_H) * self.out_scale
        c = self.c * 2.0**self.cell_shift
        pre = {}
        for g in self.w:
            # each contribution is requantized to the intermediate scale on its own
            v = self.requantized(x @ (self.w[g] * S_W).T)
            v = v + self.requantized(h @ (self.r[g] * S_W).T)
            if self.peep is not None and g in self.peep and g != "output":
                v = v + self.requantized(c * self.peep[g] * 2**-12)
            pre[g] = v

        def finish(g, v):
            if self.ln is None:  # the reference adds no bias without layer norm
                return np.clip(v / self.mid * 2**-12, -8, 8)
            norm = (v - v.mean(axis=1, keepdims=True)) / v.std(axis=1, keepdims=True)
            return np.clip(norm * self.ln[g] * S_LN + self.b[g] * S_LN / 1024, -8, 8)

        f = sigmoid(finish("forget", pre["forget"]))
        z = np.tanh(finish("cell", pre["cell"]))
        i = 1 - f if self.cifg else sigmoid(finish("input", pre["input"]))
        cell = np.clip(
            f * c + i * z, -(2.0 ** (15 + self.cell_shift)), 2.0 ** (15 + self.cell_shift)
        )
        if self.clips[0] > 0:
            cell = np.clip(cell, -self.clips[0], self.clips[0])
        o_pre = pre["output"]
        if self.peep is not None:
            o_pre = o_pre + self.requantized(cell * self.peep["output"] * 2**-12)
        o = sigmoid(finish("output", o_pre))
        hidden = np.clip(np.round(o * np.tanh(cell) / S_H) - self.hidden_zp, -128, 127)
        if self.p is None:
            output = hidden
        else:
            real = (hidden + self.hidden_zp) * S_H @ (self.p * S_P).T + self.pb * S_P * S_H
            output = np.clip(np.round(real / S_OUT) + ZP_H, -128, 127)
            if self.clips[1] > 0:
                limit = int(self.clips[1] / S_P)
                output = np.clip(output, -limit, limit)
        return output, cell / 2.0**self.cell_shift


QL_CASES = {
    "layer-norm": {},
    "layer-norm-cifg": {"cifg": True},
    "layer-norm-peephole": {"peephole": True},
    "projection": {"projection": True, "n_out": 3},
    "projection-cifg-peephole": {"projection": True, "n_out": 3, "cifg": True, "peephole": True},
    "no-layer-norm": {"layer_norm": False},
    "cell-shift-15": {"cell_shift": -15, "batch": 1},
    "cell-shift-9-clip": {"cell_shift": -9, "clips": (0.25, 0.0)},
    "projection-clip": {"projection": True, "clips": (0.0, 0.5)},
    "hidden-zero-point": {"hidden_zp": 5},
}


@pytest.mark.parametrize("const", [True, False], ids=["const", "inputs"])
@pytest.mark.parametrize("case", list(QL_CASES))
def test_quantized_lstm(case, const):
    q = QCase(**QL_CASES[case])
    version, shapes, (state, cell, output) = run(QUANTIZED_LSTM_DEF, q.inputs(const), q.outputs())
    assert version == V.V1_3
    want_out, want_cell = q.reference()
    batch, n_cell = q.c.shape
    assert shapes == [(batch, q.h.shape[1]), (batch, n_cell), (batch, q.h.shape[1])]
    np.testing.assert_array_equal(state, output)
    err = np.abs(output.astype(np.int64) - want_out).max()
    assert err <= 2, err
    cell_err = np.abs(cell.astype(np.float64) - want_cell).max() * 2.0**q.cell_shift
    assert cell_err <= 5e-3, cell_err


def test_quantized_lstm_runtime_presence():
    """Optional inputs that are model inputs left without a value decide CIFG per call."""
    q = QCase(cifg=True)
    ins = q.inputs(const=False)
    for i in (1, 5, 12, 20):
        ins[i] = Omit(ins[i].type, (8, 5) if i == 1 else (8, 8) if i == 5 else (8,), declared=True)
    _, shapes, (_, cell, output) = run(QUANTIZED_LSTM_DEF, ins, q.outputs())
    assert shapes[1] == (2, 8)
    want_out, want_cell = q.reference()
    assert np.abs(output.astype(np.int64) - want_out).max() <= 2
    assert np.abs(cell - want_cell).max() * 2.0**q.cell_shift <= 5e-3
    ins[1] = tensor(Q8, np.zeros((8, 5)), scale=S_W)  # input weights without recurrent ones
    kernel = QUANTIZED_LSTM_DEF.execute(context(QUANTIZED_LSTM_DEF, ins, q.outputs()))
    with pytest.raises(GeneralFailure, match="input gate weights must be given all or none"):
        kernel(*[x.data for x in ins if x.is_tensor])


def _ql_with(index, value, **kw):
    q = QCase(**kw)
    ins = q.inputs()
    ins[index] = value
    return ins, q.outputs()


BAD_QL = [
    Bad(
        "cell-scale-not-power-of-two",
        QUANTIZED_LSTM_DEF,
        *_ql_with(19, tensor(Q16, np.zeros((2, 4)), scale=0.001)),
        r"input 19 \(cell_state_in\) has scale 0.001; it must be a power of two between "
        r"2\^-15 and 2\^-9",
    ),
    Bad(
        "cell-scale-too-large",
        QUANTIZED_LSTM_DEF,
        *_ql_with(19, tensor(Q16, np.zeros((2, 4)), scale=2**-8)),
        r"input 19 \(cell_state_in\) has scale 0.00390625",
    ),
    Bad(
        "31-inputs",
        QUANTIZED_LSTM_DEF,
        QCase().inputs()[:31],
        QCase().outputs(),
        r"expected 32 inputs, got 31",
    ),
    Bad(
        "asymm-weights",
        QUANTIZED_LSTM_DEF,
        *_ql_with(2, tensor(Q8A, np.zeros((4, 5)), scale=S_W)),
        r"input 2 \(input_to_forget_weights\) has type TENSOR_QUANT8_ASYMM; .*"
        r"supported: TENSOR_QUANT8_SYMM",
    ),
    Bad(
        "unsigned-input",
        QUANTIZED_LSTM_DEF,
        *_ql_with(0, tensor(Q8A, np.zeros((2, 5)), scale=S_IN)),
        r"input 0 \(input\) has type TENSOR_QUANT8_ASYMM; supported: "
        r"TENSOR_QUANT8_ASYMM_SIGNED \(1.3\)",
    ),
    Bad(
        "negative-cell-clip",
        QUANTIZED_LSTM_DEF,
        *_ql_with(24, scalar(-1.0, T.FLOAT32)),
        r"input 24 \(cell_clip\) is -1.0; it must be >= 0",
    ),
    Bad(
        "negative-intermediate-scale",
        QUANTIZED_LSTM_DEF,
        *_ql_with(27, scalar(-0.5, T.FLOAT32)),
        r"input 27 \(forget_intermediate_scale\) is -0.5",
    ),
    Bad(
        "half-layer-norm",
        QUANTIZED_LSTM_DEF,
        *_ql_with(21, Omit(Q16)),
        r"layer normalization weights must be given all or none",
    ),
    Bad(
        "qlstm-weights-shape",
        QUANTIZED_LSTM_DEF,
        *_ql_with(7, tensor(Q8, np.zeros((8, 3)), scale=S_W, const=True)),
        r"input 7 \(recurrent_to_cell_weights\) has dimension 3 on axis 1; it must be "
        r"output_size = 8",
    ),
    Bad(
        "cifg-with-input-bias",
        QUANTIZED_LSTM_DEF,
        *_ql_with(12, tensor(I32, np.zeros(8), const=True), cifg=True, layer_norm=False),
        r"input 12 \(input_gate_bias\) is given, but there is no input gate",
    ),
]


@pytest.mark.parametrize("row", BAD_Q16 + BAD_QL, ids=[b.id for b in BAD_Q16 + BAD_QL])
def test_quantized_lstm_rejects(row):
    row.check()


# ---------------------------------------------------------------------------
# Integer states carried by a WHILE loop
# ---------------------------------------------------------------------------


@pytest.mark.skipif(lookup(Op.QUANTIZED_16BIT_LSTM) is None, reason="not registered")
def test_quantized_16bit_states_through_while():
    """(cell int16, output uint8) fed back: equals repeated direct kernel calls."""
    from nnhal.driver.executor import compile_model

    from nnhal.builder import ModelBuilder

    ins, _ = q16_case(batch=1, n_in=2, n_out=4)
    rounds = 4
    mb = ModelBuilder()
    cond = mb.subgraph()
    cond.input(Q16, [1, 4], 2**-11)
    cond.input(Q8A, [1, 4], 1 / 128, 128)
    i_c = cond.input(T.TENSOR_INT32, [1])
    cond.input(Q8A, [1, 2], 1 / 128, 128)
    n_c = cond.input(T.TENSOR_INT32, [1])
    cond.operation(Op.LESS, [i_c, n_c], [cond.output(T.TENSOR_BOOL8, [1])])
    body = mb.subgraph()
    c = body.input(Q16, [1, 4], 2**-11)
    h = body.input(Q8A, [1, 4], 1 / 128, 128)
    i = body.input(T.TENSOR_INT32, [1])
    x = body.input(Q8A, [1, 2], 1 / 128, 128)
    body.input(T.TENSOR_INT32, [1])
    c_out = body.output(Q16, [1, 4], 2**-11)
    h_out = body.output(Q8A, [1, 4], 1 / 128, 128)
    i_out = body.output(T.TENSOR_INT32, [1])
    params = [body.constant(p.type, p.data, scale=p.scale, zero_point=p.zp) for p in ins[1:13]]
    body.operation(Op.QUANTIZED_16BIT_LSTM, [x, *params, c, h], [c_out, h_out])
    zero = body.constant(T.INT32, 0)
    body.operation(Op.ADD, [i, body.constant(T.TENSOR_INT32, [1]), zero], [i_out])
    g = mb.main
    c0, h0 = g.input(Q16, [1, 4], 2**-11), g.input(Q8A, [1, 4], 1 / 128, 128)
    x0, n = g.input(Q8A, [1, 2], 1 / 128, 128), g.input(T.TENSOR_INT32, [1])
    c_f, h_f = g.output(Q16, [1, 4], 2**-11), g.output(Q8A, [1, 4], 1 / 128, 128)
    g.operation(
        Op.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), c0, h0, g.constant(T.TENSOR_INT32, [0]),
         x0, n],
        [c_f, h_f],
    )  # fmt: skip
    compiled = compile_model(mb.build())
    xv, cv, hv = ins[0].data, ins[13].data, ins[14].data
    got_c, got_h = compiled.run([cv, hv, xv, np.array([rounds], np.int32)])
    kernel = QUANTIZED_16BIT_DEF.execute(context(QUANTIZED_16BIT_DEF, ins, Q16_OUTS))
    for _ in range(rounds):
        cv, hv = kernel(xv, *(p.data for p in ins[1:13]), cv, hv)
    np.testing.assert_array_equal(got_c, cv)
    np.testing.assert_array_equal(got_h, hv)


def test_quantized_lstm_zero_hidden_state_scale_is_a_clean_failure():
    # found by the fuzz target `validation`: validation allows a hidden state scale of 0
    # (">= 0"), and the kernel divided by it (ZeroDivisionError inside the kernel)
    ins, outs = _ql_with(31, scalar(0.0, T.FLOAT32))
    with pytest.raises(GeneralFailure, match=r"input 31 \(hidden state scale\) is 0.0"):
        run(QUANTIZED_LSTM_DEF, ins, outs)

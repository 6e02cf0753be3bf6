"""LSTM: positive rows against the float64 reference cell (tests/lstm_reference.py),
negative rows, run-time presence of optional inputs, and LSTM state carried
through a WHILE loop by the executor."""

from __future__ import annotations

import numpy as np
import pytest
from lstm_reference import (
    F16,
    F32,
    Bad,
    Cell,
    Omit,
    assert_close,
    fscalar,
    rand,
    run,
    tensor,
)
from nnhal.driver.ops.lstm import LSTM_DEF
from nnhal.driver.ops.registry import lookup
from ops_harness import out, scalar

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op


def lstm_inputs(cell: Cell, x, h, c, type_=F32, *, const=True, act=4, clips=(0.0, 0.0), ln=None):
    """The 23 (or 27 with ``ln``) inputs of an LSTM for ``cell``."""
    ins = [tensor(type_, x), *cell.operands(type_, const=const)]
    ins += [tensor(type_, h), tensor(type_, c), scalar(act)]
    ins += [fscalar(clips[0], type_), fscalar(clips[1], type_)]
    if ln or cell.ln is not None:
        ins += cell.ln_operands(type_, const=const)
    return ins


def outputs(type_=F32):
    return [out(type_, None) for _ in range(4)]


CASES = {
    # id: (cell kwargs, batch, n_in, n_cell, n_out, act, clips, 27 inputs)
    "basic": ({}, 2, 3, 4, 4, 4, (0.0, 0.0), False),
    "peephole": ({"peephole": True}, 1, 2, 4, 4, 4, (0.0, 0.0), False),
    "cifg-peephole": ({"cifg": True, "peephole": True}, 2, 3, 4, 4, 4, (0.0, 0.0), False),
    "projection": ({"projection": True}, 2, 3, 5, 3, 4, (0.0, 0.0), False),
    "projection-bias-clips": (
        {"projection": True, "proj_bias": True, "peephole": True},
        2,
        3,
        5,
        3,
        4,
        (0.3, 0.2),
        False,
    ),
    "layer-norm": (
        {"layer_norm": True, "peephole": True, "projection": True},
        2,
        5,
        4,
        3,
        4,
        (0.0, 0.0),
        True,
    ),
    "layer-norm-cifg": ({"layer_norm": True, "cifg": True}, 3, 2, 4, 4, 4, (0.0, 0.0), True),
    "v1_2-list-no-layer-norm": ({}, 1, 2, 3, 3, 4, (0.0, 0.0), True),
    "relu": ({}, 2, 3, 4, 4, 1, (0.0, 0.0), False),
    "relu6": ({"peephole": True}, 2, 3, 4, 4, 3, (0.0, 0.0), False),
    "sigmoid": ({}, 2, 3, 4, 4, 6, (0.0, 0.0), False),
    "none": ({"cifg": True}, 2, 3, 4, 4, 0, (0.5, 0.0), False),
}


@pytest.mark.parametrize("type_", [F32, F16], ids=["f32", "f16"])
@pytest.mark.parametrize("const", [True, False], ids=["const", "inputs"])
@pytest.mark.parametrize("case", list(CASES))
def test_lstm_step(case, const, type_):
    kw, batch, n_in, n_cell, n_out, act, clips, v12 = CASES[case]
    cell = Cell.random(n_in, n_cell, n_out, **kw)
    x, h, c = rand((batch, n_in), 2), rand((batch, n_out)), rand((batch, n_cell))
    if type_ == F16:  # the reference starts from the same (rounded) values
        x, h, c = (a.astype(np.float16).astype(np.float64) for a in (x, h, c))
        cell = _rounded(cell)
    ins = lstm_inputs(cell, x, h, c, type_, const=const, act=act, clips=clips, ln=v12)
    version, shapes, (scratch, h_out, c_out, output) = run(LSTM_DEF, ins, outputs(type_))
    assert version == (V.V1_2 if v12 or type_ == F16 else V.V1_0)
    want_out, want_c, gates = cell.step(x, h, c, act=act, cell_clip=clips[0], proj_clip=clips[1])
    assert_close(output, want_out, type_)
    assert_close(h_out, want_out, type_)
    assert_close(c_out, want_c, type_)
    blocks = ("act_c", "i", "hc") if cell.cifg else ("i", "act_c", "f", "hc")
    want_scratch = np.stack([gates[b] for b in blocks]).reshape(batch, -1)
    assert_close(scratch, want_scratch, type_)
    # a model input may be omitted per execution: with weights as inputs, whether the
    # input gate exists (the scratch width) is only known at run time
    scratch_width = len(blocks) * n_cell if const or cell.cifg else 0
    assert shapes == [
        (batch, scratch_width),
        (batch, n_out),
        (batch, n_cell),
        (batch, n_out),
    ]


def _rounded(cell: Cell) -> Cell:
    def r(v):
        if v is None:
            return None
        if isinstance(v, dict):
            return {k: a.astype(np.float16).astype(np.float64) for k, a in v.items()}
        return v.astype(np.float16).astype(np.float64)

    return Cell(*(r(getattr(cell, f)) for f in cell.__dataclass_fields__))


@pytest.mark.parametrize("cifg", [True, False])
def test_optional_inputs_decided_at_run_time(cifg):
    """Optional inputs that are model inputs may be omitted per execution (hasNoValue):
    the scratch width is then unknown at compile time and CIFG is settled per call."""
    cell = Cell.random(3, 4, cifg=cifg, peephole=True)
    x, h, c = rand((2, 3)), rand((2, 4)), rand((2, 4))
    ins = [tensor(F32, x), *cell.operands(F32, const=False, omit_declared=True)]
    ins += [tensor(F32, h), tensor(F32, c), scalar(4), fscalar(0, F32), fscalar(0, F32)]
    _, shapes, (scratch, h_out, c_out, _) = run(LSTM_DEF, ins, outputs())
    assert shapes[0] == (2, 0)
    assert scratch.shape == (2, (3 if cifg else 4) * 4)
    want_out, want_c, _ = cell.step(x, h, c)
    assert_close(h_out, want_out, F32)
    assert_close(c_out, want_c, F32)


def test_run_time_presence_rules_are_checked():
    cell = Cell.random(3, 4)
    ins = lstm_inputs(cell, rand((1, 3)), rand((1, 4)), rand((1, 4)), const=False)
    ins[5] = Omit(F32, (4, 4), declared=True)  # recurrent_to_input omitted, input_to_input given
    from lstm_reference import context

    ctx = context(LSTM_DEF, ins, outputs())
    kernel = LSTM_DEF.kernel(ctx)
    with pytest.raises(GeneralFailure, match=r"input gate weights must be given all or none"):
        kernel(*[x.data for x in ins if x.is_tensor])


def test_run_time_shapes_are_checked():
    """Weights whose shape is only known at run time are checked against the input."""
    cell = Cell.random(3, 4)
    ins = lstm_inputs(cell, rand((1, 3)), rand((1, 4)), rand((1, 4)), const=False)
    ins[2] = tensor(F32, rand((4, 5)), dims=(0, 0))
    from lstm_reference import context

    kernel = LSTM_DEF.execute(context(LSTM_DEF, ins, outputs()))
    with pytest.raises(GeneralFailure, match=r"input 2 \(input_to_forget_weights\).*axis 1"):
        kernel(*[x.data for x in ins if x.is_tensor])


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------


def _base(**kw):
    cell = Cell.random(3, 4, **kw)
    return cell, lstm_inputs(cell, rand((2, 3)), rand((2, 4)), rand((2, 4)))


def _with(index, value, **kw):
    _, ins = _base(**kw)
    ins[index] = value
    return ins


def _bad(id_, ins, match, outs=None):
    return Bad(id_, LSTM_DEF, ins, outs or outputs(), match)


BAD = [
    _bad("24-inputs", _base()[1] + [Omit(F32)], r"expected 23 inputs .* or 27 .*got 24"),
    _bad("22-inputs", _base()[1][:22], r"expected 23 to 27 inputs, got 22"),
    _bad("3-outputs", _base()[1], r"expected 4 outputs, got 3", outs=outputs()[:3]),
    _bad(
        "int32-input",
        _with(0, tensor(T.TENSOR_INT32, [[1, 2, 3]])),
        r"input 0 \(input\) has type TENSOR_INT32; supported: TENSOR_FLOAT32 \(1.0\), "
        r"TENSOR_FLOAT16 \(1.2\)",
    ),
    _bad(
        "f16-weights",
        _with(2, tensor(F16, rand((4, 3)))),
        r"input 2 \(input_to_forget_weights\) has type TENSOR_FLOAT16; with TENSOR_FLOAT32 "
        r"supported: TENSOR_FLOAT32",
    ),
    _bad(
        "f16-clip-with-f32",
        _with(21, scalar(0.0, T.FLOAT16)),
        r"input 21 \(cell_clip\) has type FLOAT16; with TENSOR_FLOAT32 supported: FLOAT32",
    ),
    _bad(
        "output-type",
        _base()[1],
        r"output 3 \(output\) has type TENSOR_FLOAT16",
        outs=[*outputs()[:3], out(F16)],
    ),
    _bad("activation-2", _with(20, scalar(2)), r"input 20 \(activation\) has value 2; supported"),
    _bad("activation-7", _with(20, scalar(7)), r"input 20 \(activation\) has value 7"),
    _bad(
        "negative-cell-clip",
        _with(21, fscalar(-1.0, F32)),
        r"input 21 \(cell_clip\) is -1.0; it must be >= 0",
    ),
    _bad(
        "negative-proj-clip",
        _with(22, fscalar(-0.5, F32)),
        r"input 22 \(proj_clip\) is -0.5; it must be >= 0",
    ),
    _bad(
        "input-rank-3",
        _with(0, tensor(F32, rand((1, 2, 3)))),
        r"input 0 \(input\) has rank 3; it must be \[batch, input_size\]",
    ),
    _bad(
        "weights-input-size",
        _with(2, tensor(F32, rand((4, 5)), const=True)),
        r"input 2 \(input_to_forget_weights\) has dimension 5 on axis 1; it must be "
        r"input_size = 3",
    ),
    _bad(
        "recurrent-rank",
        _with(7, tensor(F32, rand((4,)), const=True)),
        r"input 7 \(recurrent_to_cell_weights\) has rank 1; it must have rank 2",
    ),
    _bad(
        "bias-size",
        _with(14, tensor(F32, rand((5,)), const=True)),
        r"input 14 \(cell_gate_bias\) has dimension 5 on axis 0; it must be n_cell = 4",
    ),
    _bad(
        "state-batch",
        _with(18, tensor(F32, rand((3, 4)))),
        r"input 18 \(output_state_in\) has dimension 3 on axis 0; it must be batch = 2",
    ),
    _bad(
        "cell-state-size",
        _with(19, tensor(F32, rand((2, 5)))),
        r"input 19 \(cell_state_in\) has dimension 5 on axis 1; it must be n_cell = 4",
    ),
    _bad(
        "half-cifg",
        _with(5, Omit(F32)),
        r"input gate weights must be given all or none: input 1 \(input_to_input_weights\) "
        r"given but input 5 \(recurrent_to_input_weights\) omitted",
    ),
    _bad(
        "half-peephole",
        _with(10, Omit(F32), peephole=True),
        r"peephole weights must be given all or none.*input 10 \(cell_to_forget_weights\) "
        r"omitted",
    ),
    _bad(
        "cifg-with-input-bias",
        _with(12, tensor(F32, rand((4,)), const=True), cifg=True),
        r"input 12 \(input_gate_bias\) is given, but there is no input gate \(CIFG\)",
    ),
    _bad(
        "missing-input-bias",
        _with(12, Omit(F32)),
        r"input 12 \(input_gate_bias\) is required when the input gate weights are given",
    ),
    _bad(
        "projection-bias-without-weights",
        _with(17, tensor(F32, rand((4,)), const=True)),
        r"input 17 \(projection_bias\) is given without input 16 \(projection_weights\)",
    ),
    _bad(
        "output-size-without-projection",
        _base()[1][:5]
        + [tensor(F32, rand((4, 3)), const=True) for _ in range(4)]
        + _base()[1][9:18]
        + [tensor(F32, rand((2, 3))), *_base()[1][19:]],
        r"without projection weights the output size \(3.*must equal n_cell \(4\)",
    ),
    _bad(
        "required-omitted",
        _with(3, Omit(F32)),
        r"input 3 \(input_to_cell_weights\) is required but has no value",
    ),
    _bad(
        "half-layer-norm",
        _base(layer_norm=True)[1][:24] + [Omit(F32), *_base(layer_norm=True)[1][25:]],
        r"layer normalization weights must be given all or none",
    ),
    _bad(
        "cifg-input-layer-norm",
        _base(layer_norm=True, cifg=True)[1][:23]
        + [tensor(F32, rand((4,)), const=True), *_base(layer_norm=True, cifg=True)[1][24:]],
        r"input 23 \(input_layer_norm_weights\) is given, but there is no input gate",
    ),
]


@pytest.mark.parametrize("row", BAD, ids=[b.id for b in BAD])
def test_lstm_rejects(row):
    row.check()


# ---------------------------------------------------------------------------
# LSTM state carried by a WHILE loop (the executor end to end)
# ---------------------------------------------------------------------------

registered = pytest.mark.skipif(
    lookup(Op.LSTM) is None, reason="LSTM not registered yet (see _lstm_util)"
)


def while_lstm_model(cell: Cell, steps: int, n_in: int):
    """main(xs [steps, n_in], h0, c0) -> WHILE over t: (h, c) = LSTM(SLICE(xs, [t, 0]), h, c)."""
    from nnhal.builder import ModelBuilder

    n_cell, n_out = cell.wh["forget"].shape
    mb = ModelBuilder()
    cond = mb.subgraph()
    cond.input(F32, [1, n_out])
    cond.input(F32, [1, n_cell])
    t_c = cond.input(T.TENSOR_INT32, [1])
    cond.input(F32, [steps, n_in])
    n_c = cond.input(T.TENSOR_INT32, [1])
    done = cond.output(T.TENSOR_BOOL8, [1])
    cond.operation(Op.LESS, [t_c, n_c], [done])

    body = mb.subgraph()
    h = body.input(F32, [1, n_out])
    c = body.input(F32, [1, n_cell])
    t = body.input(T.TENSOR_INT32, [1])
    xs = body.input(F32, [steps, n_in])
    body.input(T.TENSOR_INT32, [1])
    h_out = body.output(F32, [1, n_out])
    c_out = body.output(F32, [1, n_cell])
    t_out = body.output(T.TENSOR_INT32, [1])
    zero = body.constant(T.INT32, 0)
    begin = body.temporary(T.TENSOR_INT32, [2])
    body.operation(Op.MUL, [t, body.constant(T.TENSOR_INT32, [1, 0]), zero], [begin])
    x_t = body.temporary(F32, [1, n_in])
    body.operation(Op.SLICE, [xs, begin, body.constant(T.TENSOR_INT32, [1, n_in])], [x_t])
    weights = []
    for spec in cell.operands(F32, const=True):
        if isinstance(spec, Omit):
            weights.append(body.no_value(F32))
        else:
            weights.append(body.constant(F32, spec.data.astype(np.float32)))
    scratch = body.temporary(F32, [1, (3 if cell.cifg else 4) * n_cell])
    out_t = body.temporary(F32, [1, n_out])
    clips = [body.constant(T.FLOAT32, 0.0), body.constant(T.FLOAT32, 0.0)]
    body.operation(
        Op.LSTM,
        [x_t, *weights, h, c, body.constant(T.INT32, 4), *clips],
        [scratch, h_out, c_out, out_t],
    )
    body.operation(Op.ADD, [t, body.constant(T.TENSOR_INT32, [1]), zero], [t_out])

    g = mb.main
    xs_m = g.input(F32, [steps, n_in])
    h0 = g.input(F32, [1, n_out])
    c0 = g.input(F32, [1, n_cell])
    n = g.input(T.TENSOR_INT32, [1])
    h_final = g.output(F32, [1, n_out])
    c_final = g.output(F32, [1, n_cell])
    t0 = g.constant(T.TENSOR_INT32, [0])
    g.operation(
        Op.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), h0, c0, t0, xs_m, n],
        [h_final, c_final],
    )
    return mb.build()


@registered
@pytest.mark.parametrize("kw", [{}, {"cifg": True, "peephole": True, "projection": True}])
def test_lstm_state_through_while(kw):
    from nnhal.driver.executor import compile_model

    n_in, n_cell = 3, 5
    cell = Cell.random(n_in, n_cell, 4 if kw.get("projection") else None, **kw)
    n_out = cell.wh["forget"].shape[1]
    steps = 6
    xs = rand((steps, n_in), 2).astype(np.float32)
    h0 = rand((1, n_out)).astype(np.float32)
    c0 = rand((1, n_cell)).astype(np.float32)
    compiled = compile_model(while_lstm_model(cell, steps, n_in))
    h, c = compiled.run([xs, h0, c0, np.array([steps], np.int32)])
    _, want_h, want_c = cell.sequence(xs[:, None, :], h0, c0)
    assert_close(h, want_h, F32)
    assert_close(c, want_c, F32)


@registered
def test_activation_and_clip_given_at_execution():
    """Scalars that are model inputs are bound when the execution gives them."""
    from nnhal.driver.executor import compile_model

    from nnhal.builder import ModelBuilder

    cell = Cell.random(3, 4, peephole=True)
    mb = ModelBuilder()
    g = mb.main
    x, h, c = g.input(F32, [2, 3]), g.input(F32, [2, 4]), g.input(F32, [2, 4])
    act, clip = g.input(T.INT32, []), g.input(T.FLOAT32, [])
    params = [
        g.no_value(F32) if isinstance(p, Omit) else g.constant(F32, p.data)
        for p in cell.operands(F32, const=True)
    ]
    outs = [g.output(F32, [2, 16]), g.output(F32, [2, 4]), g.output(F32, [2, 4])]
    outs.append(g.output(F32, [2, 4]))
    g.operation(Op.LSTM, [x, *params, h, c, act, clip, g.constant(T.FLOAT32, 0.0)], outs)
    compiled = compile_model(mb.build())
    xv, hv, cv = (rand(shape).astype(np.float32) for shape in ((2, 3), (2, 4), (2, 4)))
    for code, clip_value in ((4, 0.0), (1, 0.2), (6, 0.0)):
        args = [xv, hv, cv, np.int32(code), np.float32(clip_value)]
        _, h_out, c_out, _ = compiled.run(args)
        want_h, want_c, _ = cell.step(xv, hv, cv, act=code, cell_clip=clip_value)
        assert_close(h_out, want_h, F32)
        assert_close(c_out, want_c, F32)
    with pytest.raises(GeneralFailure, match=r"input 20 \(activation\) has value 2"):
        compiled.run([xv, hv, cv, np.int32(2), np.float32(0)])

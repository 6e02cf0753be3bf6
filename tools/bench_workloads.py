"""The control-flow workload suite of ``nnhal bench --suite control-flow``.

Every workload is an NNAPI model (built with ``nnhal.builder``), a function
making its main inputs for a trip-count parameter, a hand-written numpy
equivalent that computes the same outputs (used to check every run), and how
many WHILE iterations a run made (read from the outputs, so a loop with an
early exit is counted right):

==============  ==========================================================
fibonacci       WHILE(i < n) { state = FC(state, W/phi); i += 1 } (nnhal.tools.bench)
nested          sum of powers: WHILE(i < n) { pw = 1; WHILE(j < p) { pw *= i }; total += pw }
parity          WHILE(i < n) { IF(i % 2 == 0) s = s + 1 ELSE s = s * 0.5 }
rnn             WHILE(t < T) { x = SLICE(X, t); h = RNN(x, h) } state 256, input 128,
                X padded to 1000 steps (WHILE operands must be fully specified)
lstm-decode     WHILE(t < n AND max(h) < thr) { (h, c) = LSTM(h, h, c) } (early exit)
greedy          WHILE(t < n) { tok = ARGMAX(FC(h)); h = tanh(FC(h) + E[tok]);
                tokens = CONCAT(tokens, tok) }  (tokens [1, ?] grows: unknown shape)
==============  ==========================================================

``user_workload`` wraps any model file (the vector format) with its stored
inputs; it has no numpy equivalent and counts one iteration per run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from nnhal.tools import bench as fib

from nnhal.builder import ModelBuilder
from nnhal.types import Model, OperandType, OperationType

T = OperandType
O = OperationType
F32, I32, BOOL8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_BOOL8

Arrays = list[np.ndarray]


@dataclass
class Workload:
    """One benchmark model with its inputs and numpy equivalent."""

    name: str
    title: str
    model: Model
    inputs: Callable[[int], Arrays]  # trip-count parameter -> main inputs
    numpy: Callable[[Arrays], Arrays] | None  # main inputs -> expected outputs
    iterations: Callable[[Arrays, Arrays], int]  # (inputs, outputs) -> WHILE iterations
    trips: tuple[int, ...]  # default parameters (two or more: the fit)
    rtol: float = 1e-5
    atol: float = 1e-6
    extra: dict = field(default_factory=dict)  # what the ONNX builders need
    #: the numpy equivalent is a way to time (False: it only gives the expected outputs)
    timed_reference: bool = True

    def check(self, inputs: Arrays, outputs: Arrays, expected: Arrays | None = None) -> str | None:
        """None when ``outputs`` agree with the numpy equivalent, else why not."""
        if self.numpy is None:
            return None
        expected = self.numpy(inputs) if expected is None else expected
        for k, (want, got) in enumerate(zip(expected, outputs)):
            if want is None or got is None:  # not in the file / not given by a peer
                continue
            got = np.asarray(got)
            if got.shape != want.shape:
                return f"output {k}: shape {list(got.shape)} != {list(want.shape)}"
            if want.dtype.kind in "iub":
                if not np.array_equal(got, want):
                    return f"output {k}: {got.ravel()[:4].tolist()} != {want.ravel()[:4].tolist()}"
            elif not np.allclose(got, want, rtol=self.rtol, atol=self.atol):
                worst = float(np.max(np.abs(got.astype(np.float64) - want)))
                return f"output {k}: differs by up to {worst:.3g}"
        return None


def _counter(outputs: Arrays, position: int) -> int:
    return int(np.asarray(outputs[position]).reshape(-1)[0])


# ---------------------------------------------------------------------------
# fibonacci (the model of `nnhal bench control-flow`)
# ---------------------------------------------------------------------------


def fibonacci() -> Workload:
    return Workload(
        "fibonacci",
        "Fibonacci WHILE: FC [1,2]x[2,2], ADD counter, LESS(i, n)",
        fib.fibonacci_while_model(),
        lambda n: [fib.STATE0.copy(), np.array([n], np.int32)],
        lambda ins: list(fib.numpy_loop(int(ins[1][0]))),
        lambda ins, outs: _counter(outs, 1),
        (10, 1000),
        extra={"W": fib.W, "B": fib.B},
    )


# ---------------------------------------------------------------------------
# nested: sum of powers
# ---------------------------------------------------------------------------

POWER = 3


def _nested_model() -> Model:
    mb = ModelBuilder()
    icond, ibody, ocond, obody = (mb.subgraph() for _ in range(4))
    # inner: (pw [1] f32, j [1] i32, f [1] f32, p [1] i32) -> (pw, j)
    icond.input(F32, [1])
    j, _f, p = icond.input(I32, [1]), icond.input(F32, [1]), icond.input(I32, [1])
    icond.operation(O.LESS, [j, p], [icond.output(BOOL8, [1])])
    pw, j, f = ibody.input(F32, [1]), ibody.input(I32, [1]), ibody.input(F32, [1])
    ibody.input(I32, [1])
    none = ibody.constant(T.INT32, 0)
    ibody.operation(O.MUL, [pw, f, none], [ibody.output(F32, [1])])
    ibody.operation(O.ADD, [j, ibody.constant(I32, [1]), none], [ibody.output(I32, [1])])
    # outer: (total [1] f32, i [1] i32, n [1] i32, p [1] i32) -> (total, i)
    ocond.input(F32, [1])
    i, n = ocond.input(I32, [1]), ocond.input(I32, [1])
    ocond.input(I32, [1])
    ocond.operation(O.LESS, [i, n], [ocond.output(BOOL8, [1])])
    total, i = obody.input(F32, [1]), obody.input(I32, [1])
    obody.input(I32, [1])
    p = obody.input(I32, [1])
    total_out, i_out = obody.output(F32, [1]), obody.output(I32, [1])
    none = obody.constant(T.INT32, 0)
    f = obody.temporary(F32, [1])
    obody.operation(O.CAST, [i], [f])
    power, j_end = obody.temporary(F32, [1]), obody.temporary(I32, [1])
    obody.operation(
        O.WHILE,
        [obody.subgraph_ref(icond), obody.subgraph_ref(ibody), obody.constant(F32, [1.0]),
         obody.constant(I32, [0]), f, p],
        [power, j_end],
    )  # fmt: skip
    obody.operation(O.ADD, [total, power, none], [total_out])
    obody.operation(O.ADD, [i, obody.constant(I32, [1]), none], [i_out])
    g = mb.main
    n, p = g.input(I32, [1]), g.input(I32, [1])
    g.operation(
        O.WHILE,
        [g.subgraph_ref(ocond), g.subgraph_ref(obody), g.constant(F32, [0.0]),
         g.constant(I32, [0]), n, p],
        [g.output(F32, [1]), g.output(I32, [1])],
    )  # fmt: skip
    return mb.build()


def _nested_numpy(ins: Arrays) -> Arrays:
    n, p = int(ins[0][0]), int(ins[1][0])
    total = np.array([0.0], np.float32)
    for i in range(n):
        f = np.array([i], np.float32)
        pw = np.array([1.0], np.float32)
        for _ in range(p):
            pw = pw * f
        total = total + pw
    return [total, np.array([n], np.int32)]


def nested() -> Workload:
    return Workload(
        "nested",
        f"nested WHILE: sum of i**{POWER} for i < n (inner WHILE multiplies {POWER} times)",
        _nested_model(),
        lambda n: [np.array([n], np.int32), np.array([POWER], np.int32)],
        _nested_numpy,
        lambda ins, outs: _counter(outs, 1),
        (10, 200),
        rtol=1e-6,
    )


# ---------------------------------------------------------------------------
# parity: IF on the counter's parity inside the body
# ---------------------------------------------------------------------------


def _parity_model() -> Model:
    mb = ModelBuilder()
    cond, body, even, odd = (mb.subgraph() for _ in range(4))
    cond.input(F32, [1, 2])
    i, n = cond.input(I32, [1]), cond.input(I32, [1])
    cond.operation(O.LESS, [i, n], [cond.output(BOOL8, [1])])
    for branch, op, value in ((even, O.ADD, [1.0, 1.0]), (odd, O.MUL, [0.5, 0.5])):
        s = branch.input(F32, [1, 2])
        none = branch.constant(T.INT32, 0)
        branch.operation(op, [s, branch.constant(F32, value), none], [branch.output(F32, [1, 2])])
    s, i = body.input(F32, [1, 2]), body.input(I32, [1])
    body.input(I32, [1])
    s_out, i_out = body.output(F32, [1, 2]), body.output(I32, [1])
    none = body.constant(T.INT32, 0)
    two = body.constant(I32, [2])
    half, twice, rest = (body.temporary(I32, [1]) for _ in range(3))
    body.operation(O.DIV, [i, two, none], [half])
    body.operation(O.MUL, [half, two, none], [twice])
    body.operation(O.SUB, [i, twice, none], [rest])
    is_even = body.temporary(BOOL8, [1])
    body.operation(O.EQUAL, [rest, body.constant(I32, [0])], [is_even])
    body.operation(O.IF, [is_even, body.subgraph_ref(even), body.subgraph_ref(odd), s], [s_out])
    body.operation(O.ADD, [i, body.constant(I32, [1]), none], [i_out])
    g = mb.main
    s0, n = g.input(F32, [1, 2]), g.input(I32, [1])
    g.operation(
        O.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), s0, g.constant(I32, [0]), n],
        [g.output(F32, [1, 2]), g.output(I32, [1])],
    )
    return mb.build()


def _parity_numpy(ins: Arrays) -> Arrays:
    s, n = ins[0], int(ins[1][0])
    one, half = np.float32(1.0), np.float32(0.5)
    for i in range(n):
        s = s + one if i % 2 == 0 else s * half
    return [s, np.array([n], np.int32)]


def parity() -> Workload:
    return Workload(
        "parity",
        "WHILE whose body branches with IF on the counter's parity (ADD / MUL)",
        _parity_model(),
        lambda n: [np.array([[3.0, -1.0]], np.float32), np.array([n], np.int32)],
        _parity_numpy,
        lambda ins, outs: _counter(outs, 1),
        (10, 1000),
    )


# ---------------------------------------------------------------------------
# rnn: a dynamic RNN step loop over an input sequence of run-time length
# ---------------------------------------------------------------------------

RNN_STATE, RNN_INPUT = 256, 128
#: HAL 1.3 WHILE operands are fully specified: the sequence is padded to this length
RNN_MAX_STEPS = 1000


def _rnn_weights(seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "W": rng.uniform(-0.1, 0.1, (RNN_STATE, RNN_INPUT)).astype(np.float32),
        "R": rng.uniform(-0.06, 0.06, (RNN_STATE, RNN_STATE)).astype(np.float32),
        "b": rng.uniform(-0.1, 0.1, RNN_STATE).astype(np.float32),
    }


def _rnn_model(wts: dict) -> Model:
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    cond.input(F32, [1, RNN_STATE])
    t = cond.input(I32, [1])
    cond.input(F32, [RNN_MAX_STEPS, RNN_INPUT])
    n = cond.input(I32, [1])
    cond.operation(O.LESS, [t, n], [cond.output(BOOL8, [1])])
    h, t, xs = (
        body.input(F32, [1, RNN_STATE]),
        body.input(I32, [1]),
        body.input(F32, [RNN_MAX_STEPS, RNN_INPUT]),
    )
    body.input(I32, [1])
    h_out, t_out = body.output(F32, [1, RNN_STATE]), body.output(I32, [1])
    none = body.constant(T.INT32, 0)
    begin = body.temporary(I32, [2])
    body.operation(O.MUL, [t, body.constant(I32, [1, 0]), none], [begin])
    x = body.temporary(F32, [1, RNN_INPUT])
    body.operation(O.SLICE, [xs, begin, body.constant(I32, [1, RNN_INPUT])], [x])
    out = body.temporary(F32, [1, RNN_STATE])
    consts = [body.constant(F32, wts[k]) for k in ("W", "R", "b")]
    body.operation(O.RNN, [x, *consts, h, body.constant(T.INT32, 4)], [h_out, out])
    body.operation(O.ADD, [t, body.constant(I32, [1]), none], [t_out])
    g = mb.main
    h0, xs, n = (
        g.input(F32, [1, RNN_STATE]),
        g.input(F32, [RNN_MAX_STEPS, RNN_INPUT]),
        g.input(I32, [1]),
    )
    g.operation(
        O.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), h0, g.constant(I32, [0]), xs, n],
        [g.output(F32, [1, RNN_STATE]), g.output(I32, [1])],
    )
    return mb.build()


def rnn() -> Workload:
    wts = _rnn_weights()
    wt, rt = np.ascontiguousarray(wts["W"].T), np.ascontiguousarray(wts["R"].T)

    def inputs(steps: int) -> Arrays:
        if not 0 <= steps <= RNN_MAX_STEPS:
            raise ValueError(f"rnn: T must be 0..{RNN_MAX_STEPS}, not {steps}")
        rng = np.random.default_rng(steps)
        xs = rng.uniform(-1, 1, (RNN_MAX_STEPS, RNN_INPUT)).astype(np.float32)
        return [np.zeros((1, RNN_STATE), np.float32), xs, np.array([steps], np.int32)]

    def reference(ins: Arrays) -> Arrays:
        h, xs, n = ins[0], ins[1], int(ins[2][0])
        for t in range(n):
            h = np.tanh(xs[t : t + 1] @ wt + h @ rt + wts["b"])
        return [h, np.array([n], np.int32)]

    return Workload(
        "rnn",
        f"dynamic RNN: SLICE x_t, RNN (state {RNN_STATE}, input {RNN_INPUT}), T of {RNN_MAX_STEPS}",
        _rnn_model(wts),
        inputs,
        reference,
        lambda ins, outs: _counter(outs, 1),
        (100, 1000),
        rtol=1e-4,
        atol=1e-5,
        extra=wts,
    )


# ---------------------------------------------------------------------------
# lstm-decode, greedy: in bench_workloads_decode (kept small)
# ---------------------------------------------------------------------------


class UnknownWorkload(ValueError):
    """A workload name the suite does not have (a usage error of ``nnhal bench``)."""


def suite(names: list[str] | None = None) -> list[Workload]:
    """The built-in workloads (all, or those named)."""
    from nnhal.tools.bench_decode import greedy, lstm_decode

    from nnhal.suggest import unknown_names

    makers = {
        "fibonacci": fibonacci,
        "nested": nested,
        "parity": parity,
        "rnn": rnn,
        "lstm-decode": lstm_decode,
        "greedy": greedy,
    }
    if names:
        unknown = [n for n in names if n not in makers]
        if unknown:
            raise UnknownWorkload(unknown_names("workload", unknown, makers))
        return [makers[n]() for n in names]
    return [make() for make in makers.values()]


def user_workload(path: str, name: str | None = None) -> Workload:
    """A model file (vector format) with its stored inputs; outputs checked when stored."""
    from nnhal.vectors import load_vectors

    tests = load_vectors(path)
    if name is not None:
        tests = [t for t in tests if t.name == name]
    if not tests:
        raise ValueError(f"{path}: no model{f' named {name!r}' if name else ''} in the file")
    test = tests[0]
    stored = [None if a is None else np.asarray(a) for a in test.inputs]
    expected = [None if e is None else np.asarray(e) for e in test.expected]

    def reference(_ins: Arrays) -> Arrays:
        return expected

    return Workload(
        f"file:{test.name}",
        f"user model {path}",
        test.model,
        lambda _n: [None if a is None else a.copy() for a in stored],
        reference if any(e is not None for e in expected) else None,
        lambda ins, outs: 1,
        (1,),
        rtol=1e-4,
        atol=1e-5,
        timed_reference=False,
    )

"""LSTM layer benchmark: UNIDIRECTIONAL_SEQUENCE_LSTM and a WHILE loop of LSTM
steps, against a hand-written numpy LSTM.

The layer: batch 1, 100 time steps, input size 128, 256 units, no
peephole/projection, tanh, float32, constant weights. Three ways, run in this
process and timed in interleaved rounds (median per full sequence):

- ``sequence``: one UNIDIRECTIONAL_SEQUENCE_LSTM (time-major input
  [100, 1, 128]; outputs the sequence and the final states).
- ``while``: WHILE(t < 100) { x_t = SLICE(xs, begin = t * [1, 0], size
  [1, 128]); (h, c) = LSTM(x_t, h, c); t += 1 } over xs [100, 128], the
  counter making SLICE's begin at run time.
- ``numpy``: the same recurrence written directly: stacked gate weights,
  one ``x_t @ W + h @ R + b`` per step, sigmoid/tanh, in float32.

The two models run through ``nnhal.driver.executor.compile_model`` and
``CompiledModel.run``, each prepared twice: with the default kernels (the
compiled cells of ``driver/ops/_jit_rnn.py`` when numba is installed; the
benchmark waits for them to load before timing) and with
``kernels.set_kernels("numpy")`` (rows ``sequence-np`` and ``while-np``). All
final hidden states are checked to agree.

Usage: python bench/lstm_bench.py [--rounds N] [--steps T] [--threads K]

The ratio columns divide by the numpy run (median by median, min by min).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if "--threads" in sys.argv:  # BLAS threads must be fixed before numpy loads
    _threads = sys.argv[sys.argv.index("--threads") + 1]
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = _threads

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from nnhal.driver.executor import compile_model
from nnhal.driver.ops import _rnn_util, kernels

from nnhal.builder import ModelBuilder
from nnhal.types import Model, OperandType, OperationType

T = OperandType
O = OperationType
F32 = T.TENSOR_FLOAT32
BATCH, INPUT, UNITS = 1, 128, 256
GATES = ("input", "forget", "cell", "output")


def random_layer(seed: int = 5) -> dict:
    rng = np.random.default_rng(seed)
    scale = 1 / np.sqrt(UNITS)
    layer = {}
    for g in GATES:
        layer[f"w_{g}"] = rng.uniform(-scale, scale, (UNITS, INPUT)).astype(np.float32)
        layer[f"r_{g}"] = rng.uniform(-scale, scale, (UNITS, UNITS)).astype(np.float32)
        layer[f"b_{g}"] = rng.uniform(-0.1, 0.1, UNITS).astype(np.float32)
    return layer


def _cell_operands(sub, layer: dict) -> list:
    """The 17 per-cell inputs of LSTM / UNIDIRECTIONAL_SEQUENCE_LSTM (no peephole/projection)."""
    ops = [sub.constant(F32, layer[f"w_{g}"]) for g in GATES]
    ops += [sub.constant(F32, layer[f"r_{g}"]) for g in GATES]
    ops += [sub.no_value(F32) for _ in range(3)]  # peephole
    ops += [sub.constant(F32, layer[f"b_{g}"]) for g in GATES]
    ops += [sub.no_value(F32), sub.no_value(F32)]  # projection
    return ops


def sequence_model(layer: dict, steps: int) -> Model:
    mb = ModelBuilder()
    g = mb.main
    xs = g.input(F32, [steps, BATCH, INPUT])
    h0 = g.input(F32, [BATCH, UNITS])
    c0 = g.input(F32, [BATCH, UNITS])
    seq = g.output(F32, [steps, BATCH, UNITS])
    h = g.output(F32, [BATCH, UNITS])
    c = g.output(F32, [BATCH, UNITS])
    scalars = [g.constant(T.INT32, 4), g.constant(T.FLOAT32, 0.0), g.constant(T.FLOAT32, 0.0)]
    scalars.append(g.constant(T.BOOL, True))  # time major
    g.operation(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM,
        [xs, *_cell_operands(g, layer), h0, c0, *scalars, *(g.no_value(F32) for _ in range(4))],
        [seq, h, c],
    )
    return mb.build()


def while_model(layer: dict, steps: int) -> Model:
    mb = ModelBuilder()
    cond = mb.subgraph()
    cond.input(F32, [BATCH, UNITS])
    cond.input(F32, [BATCH, UNITS])
    t_c = cond.input(T.TENSOR_INT32, [1])
    cond.input(F32, [steps, INPUT])
    n_c = cond.input(T.TENSOR_INT32, [1])
    cond.operation(O.LESS, [t_c, n_c], [cond.output(T.TENSOR_BOOL8, [1])])

    body = mb.subgraph()
    h = body.input(F32, [BATCH, UNITS])
    c = body.input(F32, [BATCH, UNITS])
    t = body.input(T.TENSOR_INT32, [1])
    xs = body.input(F32, [steps, INPUT])
    body.input(T.TENSOR_INT32, [1])
    h_out = body.output(F32, [BATCH, UNITS])
    c_out = body.output(F32, [BATCH, UNITS])
    t_out = body.output(T.TENSOR_INT32, [1])
    none = body.constant(T.INT32, 0)
    begin = body.temporary(T.TENSOR_INT32, [2])
    body.operation(O.MUL, [t, body.constant(T.TENSOR_INT32, [1, 0]), none], [begin])
    x_t = body.temporary(F32, [BATCH, INPUT])
    body.operation(O.SLICE, [xs, begin, body.constant(T.TENSOR_INT32, [1, INPUT])], [x_t])
    scratch = body.temporary(F32, [BATCH, 4 * UNITS])
    output = body.temporary(F32, [BATCH, UNITS])
    scalars = [body.constant(T.INT32, 4), body.constant(T.FLOAT32, 0.0)]
    scalars.append(body.constant(T.FLOAT32, 0.0))
    body.operation(
        O.LSTM, [x_t, *_cell_operands(body, layer), h, c, *scalars], [scratch, h_out, c_out, output]
    )
    body.operation(O.ADD, [t, body.constant(T.TENSOR_INT32, [1]), none], [t_out])

    g = mb.main
    xs_m = g.input(F32, [steps, INPUT])
    h0 = g.input(F32, [BATCH, UNITS])
    c0 = g.input(F32, [BATCH, UNITS])
    n = g.input(T.TENSOR_INT32, [1])
    h_f = g.output(F32, [BATCH, UNITS])
    c_f = g.output(F32, [BATCH, UNITS])
    g.operation(
        O.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), h0, c0, g.constant(T.TENSOR_INT32, [0]),
         xs_m, n],
        [h_f, c_f],
    )  # fmt: skip
    return mb.build()


def numpy_lstm(layer: dict):
    """A hand-written float32 LSTM: returns run(xs [T, in], h, c) -> (outputs, h, c)."""
    w = np.ascontiguousarray(np.concatenate([layer[f"w_{g}"] for g in GATES]).T)
    r = np.ascontiguousarray(np.concatenate([layer[f"r_{g}"] for g in GATES]).T)
    b = np.concatenate([layer[f"b_{g}"] for g in GATES])
    n = UNITS

    def sigmoid(v):
        return 1 / (1 + np.exp(-v))

    def run(xs, h, c):
        outputs = np.empty((len(xs), h.shape[0], n), np.float32)
        for t in range(len(xs)):
            gates = xs[t : t + 1] @ w + h @ r + b
            i = sigmoid(gates[:, :n])
            f = sigmoid(gates[:, n : 2 * n])
            z = np.tanh(gates[:, 2 * n : 3 * n])
            o = sigmoid(gates[:, 3 * n :])
            c = f * c + i * z
            h = o * np.tanh(c)
            outputs[t] = h
        return outputs, h, c

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--threads", help="BLAS threads (default: the library's own choice)")
    args = parser.parse_args()
    steps = args.steps
    layer = random_layer()
    rng = np.random.default_rng(7)
    xs = rng.uniform(-1, 1, (steps, INPUT)).astype(np.float32)
    h0 = rng.uniform(-0.5, 0.5, (BATCH, UNITS)).astype(np.float32)
    c0 = rng.uniform(-0.5, 0.5, (BATCH, UNITS)).astype(np.float32)
    n = np.array([steps], np.int32)

    models = {}
    for suffix, choice in (("", None), ("-np", kernels.NUMPY)):
        kernels.set_kernels(choice)
        models["sequence" + suffix] = compile_model(sequence_model(layer, steps))
        models["while" + suffix] = compile_model(while_model(layer, steps))
    kernels.set_kernels(None)
    compiled = kernels.jit_wanted() and _rnn_util.jit_cells(wait=600) is not None
    reference = numpy_lstm(layer)
    runs = {"numpy": lambda: reference(xs, h0, c0)[1]}
    for name, model in models.items():
        if name.startswith("sequence"):
            runs[name] = lambda m=model: m.run([xs[:, None, :], h0, c0])[1]
        else:
            runs[name] = lambda m=model: m.run([xs, h0, c0, n])[0]
    want = runs["numpy"]()
    for name in models:
        got = runs[name]()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)

    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e6)
    ref = statistics.median(times["numpy"])
    ref_min = min(times["numpy"])
    threads = args.threads or "default"
    print(
        f"LSTM layer: batch {BATCH}, {steps} steps, input {INPUT}, {UNITS} units (float32), "
        f"BLAS threads: {threads}, {args.rounds} rounds, compiled cells: "
        f"{'yes' if compiled else 'no'}"
    )
    print(f"{'':>10} {'median us':>10} {'us/step':>8} {'ratio':>6} {'min us':>8} {'ratio':>6}")
    for name in runs:
        med, low = statistics.median(times[name]), min(times[name])
        print(
            f"{name:>10} {med:>10.0f} {med / steps:>8.1f} {med / ref:>6.2f} "
            f"{low:>8.0f} {low / ref_min:>6.2f}"
        )


if __name__ == "__main__":
    main()

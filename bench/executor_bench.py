"""Executor benchmark: a WHILE computing Fibonacci numbers vs a hand-written numpy loop.

The model (the issue's bench): state ``[1, 2]`` TENSOR_FLOAT32 multiplied by a
constant 2x2 matrix with FULLY_CONNECTED (weights [2, 2], bias [2], activation
NONE), an int32 counter ``[1]`` incremented with ADD, condition
``LESS(counter, n)`` -> TENSOR_BOOL8 [1]. The reference is the same arithmetic
written directly with numpy arrays::

    while i < n:
        state = state @ W.T + b
        i = i + 1

Both run in this process (``CompiledModel.run`` called directly), in
interleaved rounds; we report the median microseconds per iteration and the
ratio executor / numpy. Float32 overflows to inf/nan after ~180 iterations;
both sides run under the same ``np.errstate(all="ignore")``.

Usage: python bench/executor_bench.py [--rounds N] [--n 10 1000 100000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from nnhal.driver.executor import compile_model

from nnhal.builder import ModelBuilder
from nnhal.types import Model, OperandType, OperationType

T = OperandType
O = OperationType

W = np.array([[1.0, 1.0], [1.0, 0.0]], dtype=np.float32)
B = np.zeros(2, dtype=np.float32)


def fibonacci_model() -> Model:
    """main(state [1,2], i [1], n [1]) -> WHILE(LESS(i, n)) { state = FC(state), i += 1 }."""
    mb = ModelBuilder()
    cond = mb.subgraph()
    c_state = cond.input(T.TENSOR_FLOAT32, [1, 2])
    c_i = cond.input(T.TENSOR_INT32, [1])
    c_n = cond.input(T.TENSOR_INT32, [1])
    c_out = cond.output(T.TENSOR_BOOL8, [1])
    cond.operation(O.LESS, [c_i, c_n], [c_out])
    del c_state

    body = mb.subgraph()
    b_state = body.input(T.TENSOR_FLOAT32, [1, 2])
    b_i = body.input(T.TENSOR_INT32, [1])
    body.input(T.TENSOR_INT32, [1])  # n: input-only
    b_state_out = body.output(T.TENSOR_FLOAT32, [1, 2])
    b_i_out = body.output(T.TENSOR_INT32, [1])
    weights = body.constant(T.TENSOR_FLOAT32, W)
    bias = body.constant(T.TENSOR_FLOAT32, B)
    act = body.constant(T.INT32, 0)
    one = body.constant(T.TENSOR_INT32, [1])
    body.operation(O.FULLY_CONNECTED, [b_state, weights, bias, act], [b_state_out])
    body.operation(O.ADD, [b_i, one, act], [b_i_out])

    g = mb.main
    state = g.input(T.TENSOR_FLOAT32, [1, 2])
    i = g.input(T.TENSOR_INT32, [1])
    n = g.input(T.TENSOR_INT32, [1])
    out = g.output(T.TENSOR_FLOAT32, [1, 2])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), state, i, n], [out])
    return mb.build()


def numpy_loop(state: np.ndarray, i: np.ndarray, n: np.ndarray) -> np.ndarray:
    one = np.array([1], dtype=np.int32)
    while i < n:
        state = state @ W.T + B
        i = i + one
    return state


def measure(n: int, rounds: int, compiled) -> tuple[float, float]:
    state = np.array([[1.0, 1.0]], dtype=np.float32)
    start = np.array([0], dtype=np.int32)
    limit = np.array([n], dtype=np.int32)
    reps = max(1, 20_000 // n)  # enough work per sample for small n
    ex, ref = [], []
    with np.errstate(all="ignore"):
        expected = numpy_loop(state, start, limit)
        got = compiled.run([state, start, limit])[0]
        np.testing.assert_array_equal(got, expected)
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(reps):
                compiled.run([state, start, limit])
            t1 = time.perf_counter()
            for _ in range(reps):
                numpy_loop(state, start, limit)
            t2 = time.perf_counter()
            ex.append((t1 - t0) / (reps * n) * 1e6)
            ref.append((t2 - t1) / (reps * n) * 1e6)
    return statistics.median(ex), statistics.median(ref)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--n", type=int, nargs="+", default=[10, 1000, 100_000])
    args = parser.parse_args()
    compiled = compile_model(fibonacci_model())
    print(f"{'n':>8} {'executor us/it':>15} {'numpy us/it':>12} {'ratio':>6}")
    for n in args.n:
        rounds = args.rounds if n < 100_000 else max(3, args.rounds // 3)
        ex, ref = measure(n, rounds, compiled)
        print(f"{n:>8} {ex:>15.3f} {ref:>12.3f} {ex / ref:>6.2f}")


if __name__ == "__main__":
    main()

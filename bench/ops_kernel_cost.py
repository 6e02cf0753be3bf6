"""Per-operation cost: a one-operation model through the executor vs the bare numpy expression.

Three 1000-element float32 operations (the "kernel cost stays low"):

- ADD of two ``[1000]`` tensors (activation NONE) vs ``np.add(a, b)``;
- SOFTMAX of ``[1, 1000]`` with beta 1.0 vs
  ``e = np.exp(x - x.max(-1, keepdims=True)); e / e.sum(-1, keepdims=True)``;
- TRANSPOSE of ``[25, 40]`` with a constant perm ``[1, 0]`` vs
  ``np.ascontiguousarray(x.T)`` (the operation must materialise its result;
  ``x.T`` alone is a free view).

Each model is compiled once with ``nnhal.driver.executor.compile_model`` and timed
through ``CompiledModel.run`` (which includes the generated subgraph function,
the floating-point state switch and the output list), and the bound kernel
alone (the step's ``kernel``, called directly). Rounds are interleaved
(run, kernel, numpy, per operation, per round) in one process; we print the
median microseconds per call of each, the difference run - numpy (the
executor's whole overhead) and the ratio. An operation that is not registered yet is skipped
with a line saying so.

Usage: python bench/ops_kernel_cost.py [--rounds N] [--reps N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from nnhal.driver.executor import compile_model
from nnhal.driver.ops.registry import lookup

from nnhal.builder import ModelBuilder
from nnhal.types import Model, OperandType, OperationType

T = OperandType
O = OperationType
N = 1000


def add_model() -> Model:
    mb = ModelBuilder()
    g = mb.main
    a = g.input(T.TENSOR_FLOAT32, [N])
    b = g.input(T.TENSOR_FLOAT32, [N])
    y = g.output(T.TENSOR_FLOAT32, [N])
    g.operation(O.ADD, [a, b, g.constant(T.INT32, 0)], [y])
    return mb.build()


def softmax_model() -> Model:
    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [1, N])
    y = g.output(T.TENSOR_FLOAT32, [1, N])
    g.operation(O.SOFTMAX, [x, g.constant(T.FLOAT32, 1.0)], [y])
    return mb.build()


def transpose_model() -> Model:
    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [25, 40])
    y = g.output(T.TENSOR_FLOAT32, [40, 25])
    g.operation(O.TRANSPOSE, [x, g.constant(T.TENSOR_INT32, [1, 0])], [y])
    return mb.build()


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def cases(rng: np.random.Generator) -> list[tuple[str, OperationType, Callable, list, Callable]]:
    a = rng.standard_normal(N).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    x = rng.standard_normal((1, N)).astype(np.float32)
    m = rng.standard_normal((25, 40)).astype(np.float32)
    return [
        ("ADD", O.ADD, add_model, [a, b], lambda: np.add(a, b)),
        ("SOFTMAX", O.SOFTMAX, softmax_model, [x], lambda: np_softmax(x)),
        ("TRANSPOSE", O.TRANSPOSE, transpose_model, [m], lambda: np.ascontiguousarray(m.T)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="interleaved rounds (median)")
    parser.add_argument("--reps", type=int, default=2000, help="calls per timed sample")
    args = parser.parse_args()

    runnable = []
    for name, op, build, inputs, bare in cases(np.random.default_rng(3)):
        if lookup(op) is None:
            print(f"{name}: skipped: {name} is not registered in this tree yet")
            continue
        compiled = compile_model(build())
        got = compiled.run(inputs)[0]
        np.testing.assert_allclose(got, bare(), rtol=1e-5, atol=1e-6)
        # The bound kernel, called directly with its tensor operands (constants as bound).
        plan = compiled.plans[0]
        step = plan.steps[0]
        by_operand = dict(zip(compiled.model.main.inputIndexes, inputs))
        kernel_args = [plan.constants.get(i, by_operand.get(i)) for i in step.kernel_inputs]
        kernel = step.kernel
        runnable.append((name, compiled, inputs, bare, kernel, kernel_args))

    samples = {name: ([], [], []) for name, *_ in runnable}
    reps = args.reps
    for _ in range(args.rounds):
        for name, compiled, inputs, bare, kernel, kernel_args in runnable:
            run = compiled.run
            t0 = time.perf_counter()
            for _ in range(reps):
                run(inputs)
            t1 = time.perf_counter()
            for _ in range(reps):
                kernel(*kernel_args)
            t2 = time.perf_counter()
            for _ in range(reps):
                bare()
            t3 = time.perf_counter()
            for i, (lo, hi) in enumerate(((t0, t1), (t1, t2), (t2, t3))):
                samples[name][i].append((hi - lo) / reps * 1e6)

    print(f"1000-element float32, median of {args.rounds} interleaved rounds x {reps} calls")
    print(
        f"{'operation':<10} {'run() us':>9} {'kernel us':>10} {'numpy us':>9} "
        f"{'run - numpy':>12} {'run / numpy':>12}"
    )
    for name, (ex, kern, ref) in samples.items():
        e, k, r = (statistics.median(v) for v in (ex, kern, ref))
        print(f"{name:<10} {e:>9.2f} {k:>10.2f} {r:>9.2f} {e - r:>12.2f} {e / r:>12.2f}")


if __name__ == "__main__":
    main()

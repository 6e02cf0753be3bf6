"""Preparation cost of a chain of N ADD operations: per-operation time and peak memory.

Builds ``x + 1 + 1 + ... + 1`` (N ADDs on [4] float32) with ``nnhal.builder``,
prepares it with ``Device.prepareModel_1_3`` (validation, support, compilation,
code generation; the device's operation and operand limits raised to fit), runs
it once to check the result, and prints microseconds per operation for the
builder calls, ``build()`` and the preparation, and the process's peak RSS.
Run each N in its own process (peak RSS is per process).

Usage: python bench/prepare_chain.py N [--threads N|auto]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from nnhal.driver.device import Device
from nnhal.driver.limits import with_limits
from nnhal.driver.profile import load_profile
from nnhal.tools import bench_threads

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType, OperationType

F32 = OperandType.TENSOR_FLOAT32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, help="ADD operations in the chain")
    bench_threads.add_threads_option(parser)
    args = parser.parse_args()
    bench_threads.apply(args.threads)
    n = args.n
    t0 = time.perf_counter()
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [4])
    one = g.constant(F32, np.ones(4, np.float32))
    none = g.constant(OperandType.INT32, 0)
    cur = x
    for i in range(n):
        nxt = g.output(F32, [4]) if i == n - 1 else g.temporary(F32, [4])
        g.operation(OperationType.ADD, [cur, one, none], [nxt])
        cur = nxt
    t1 = time.perf_counter()
    model = mb.build()
    t2 = time.perf_counter()
    room = max(3 * n, 65536)
    device = Device(
        with_limits(load_profile(None), {"max_operations": room, "max_operands": room})
    )
    t3 = time.perf_counter()
    prepared = device.prepareModel_1_3(model)
    t4 = time.perf_counter()
    out = prepared.compiled.run([np.zeros(4, np.float32)])[0]
    assert out.tolist() == [float(n)] * 4, out
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(bench_threads.threads_line())
    print(
        f"{n} ADDs, µs per operation: builder {(t1 - t0) / n * 1e6:.1f}, "
        f"build {(t2 - t1) / n * 1e6:.1f}, prepare {(t4 - t3) / n * 1e6:.1f}; "
        f"peak RSS {rss:.0f} MB"
    )


if __name__ == "__main__":
    main()

"""Runtime overhead on a model that runs entirely on one device (a benchmark, not a test).

    python -m nnhal.tools.bench_runtime [--rounds 15] [--iters 20] [--size 256]

Two pairs, each measured in this process: the direct and the runtime execution
alternate call by call (which goes first alternating every round), every call
timed on its own; the median per-execution time of each reported with the
ratio runtime / direct:

- in-process: the reference driver's prepared model executed directly vs an
  Execution of a compilation whose only device is ``nnapi-reference``;
- over gRPC: ``nnhal.client.PreparedModel.execute`` on a served driver vs an
  Execution of a compilation over that device (a simple plan: one step).

The model: FULLY_CONNECTED (size x size weights) then ADD and RELU, float32.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from nnhal.runtime.api import Compilation, Execution
from nnhal.runtime.devices import connect_target
from nnhal.runtime.reference import ReferenceStep, reference_device

from nnhal.builder import ModelBuilder
from nnhal.types import Model, OperandType, OperationType


def bench_model(size: int) -> Model:
    rng = np.random.default_rng(0)
    mb = ModelBuilder()
    g = mb.main
    f32 = OperandType.TENSOR_FLOAT32
    x = g.input(f32, [size, size])
    w = g.constant(f32, rng.standard_normal((size, size)).astype(np.float32))
    b = g.constant(f32, np.zeros(size, np.float32))
    act = g.constant(OperandType.INT32, 0)
    t = g.temporary(f32, [size, size])
    u = g.temporary(f32, [size, size])
    y = g.output(f32, [size, size])
    g.operation(OperationType.FULLY_CONNECTED, [x, w, b, act], [t])
    g.operation(OperationType.ADD, [t, x, act], [u])
    g.operation(OperationType.RELU, [u], [y])
    return mb.build()


def _pair(direct, runtime, rounds: int, iters: int) -> tuple[float, float]:
    """Median µs per execution of each; every call is timed on its own, the two alternate
    call by call (which goes first alternating each round), so load spikes on a shared
    machine hit both alike and the medians ignore them."""
    direct(), runtime()  # warm up
    d, r = [], []
    clock = time.perf_counter_ns
    for k in range(rounds):
        first, second, a, b = (direct, runtime, d, r) if k % 2 == 0 else (runtime, direct, r, d)
        for _ in range(iters):
            t0 = clock()
            first()
            t1 = clock()
            second()
            t2 = clock()
            a.append(t1 - t0)
            b.append(t2 - t1)
    return statistics.median(d) / 1000.0, statistics.median(r) / 1000.0


def _runtime_exec(compilation: Compilation, x: np.ndarray) -> Callable[[], object]:
    def run() -> object:
        e = Execution(compilation)
        e.set_input(0, x)
        e.set_output(0)
        return e.compute()

    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--size", type=int, default=256)
    args = p.parse_args(argv)
    model = bench_model(args.size)
    x = np.random.default_rng(1).standard_normal((args.size, args.size)).astype(np.float32)

    ref = reference_device()
    direct_step = ReferenceStep(ref.driver.prepareModel_1_3(model))
    compilation = Compilation(model).finish()
    d, r = _pair(lambda: direct_step.run([x], None), _runtime_exec(compilation, x),
                 args.rounds, args.iters)  # fmt: skip
    compilation.release()
    print(f"in-process: direct {d:9.1f} us  runtime {r:9.1f} us  ratio {r / d:.3f}")

    from nnhal.driver.device import Device
    from nnhal.driver.profile import parse_profile
    from nnhal.driver.service import create_server

    profile = {"name": "npu", "type": "ACCELERATOR",
               "capabilities": {"default": {"execTime": 0.5, "powerUsage": 0.5}}}  # fmt: skip
    server, address = create_server(Device(parse_profile(profile)))
    try:
        device = connect_target(f"{address}/npu")
        prepared = device.device.prepareModel_1_3(model)
        compilation = Compilation(model, [device]).finish()
        assert compilation.plan.simple and compilation.plan.devices[0] is device
        d, r = _pair(lambda: prepared.execute([x]), _runtime_exec(compilation, x),
                     args.rounds, args.iters)  # fmt: skip
        compilation.release()
        prepared.release()
        device.device.close()
    finally:
        server.stop(None)
    print(f"over gRPC:  direct {d:9.1f} us  runtime {r:9.1f} us  ratio {r / d:.3f}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

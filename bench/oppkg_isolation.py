"""What process isolation costs an op-package kernel call: ``op_package_isolation`` process vs inline.

The model is one custom operation, ScaleShift (``examples/snpe_json``:
``y = x * scale + shift``, a float32 tensor in, one out), for three tensor
sizes: ``[1, 4]`` (16 bytes: the fixed cost of a call), ``[256, 256]``
(256 KiB) and ``[1024, 1024]`` (4 MiB: the cost of moving the data through
the worker's pipes). Two devices load the same package, one per isolation
mode; each prepares the model once.

Timed per size, per mode, in interleaved rounds (median of the rounds, each
round the mean of ``--reps`` calls):

- ``run``: ``CompiledModel.run`` in this process (the executor alone);
- ``grpc``: ``execute`` from a client of an in-process gRPC server.

Prints µs per call and the ratio process / inline (no pass or fail: machines
are noisy, the numbers are for the report). Checks both modes give the same
outputs first.

Usage: python bench/oppkg_isolation.py [--rounds N] [--reps N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from nnhal.driver.device import Device
from nnhal.driver.op_packages.discovery import load_path
from nnhal.driver.profile import parse_profile
from nnhal.driver.service import create_server

from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.types import OperandType as T

CONFIG = ROOT / "examples" / "snpe_json" / "scale_shift.json"
SHAPES = ([1, 4], [256, 256], [1024, 1024])


def scale_shift_model(shape: list[int]):
    mb = ModelBuilder()
    mb.extension("udo.scale_shift_package", 3)
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, shape)
    ins = [x, g.constant(T.FLOAT32, 0.5), g.constant(T.FLOAT32, 1.0)]
    g.operation(3 << 16, ins, [g.output(T.TENSOR_FLOAT32, shape)])
    return mb.build()


def timed(fn, reps: int) -> float:
    """Mean µs per call over ``reps`` calls."""
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    packages = load_path(CONFIG)
    devices = {
        mode: Device(
            parse_profile({"name": mode, "op_package_isolation": mode}), op_packages=packages
        )
        for mode in ("inline", "process")
    }
    servers = {mode: create_server(d, "127.0.0.1:0") for mode, d in devices.items()}
    clients = {mode: connect(address) for mode, (_, address) in servers.items()}
    try:
        print(f"op_package_isolation: process vs inline, ScaleShift, median of {args.rounds} "
              f"rounds x {args.reps} calls")  # fmt: skip
        print(
            f"{'shape':>12} {'way':>5} {'inline µs':>11} {'process µs':>11} {'process/inline':>15}"
        )
        for shape in SHAPES:
            model = scale_shift_model(shape)
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            compiled = {m: d.prepareModel_1_3(model).compiled for m, d in devices.items()}
            remote = {m: c.prepareModel_1_3(model) for m, c in clients.items()}
            expected = x * np.float32(0.5) + np.float32(1.0)
            for m in devices:  # same results, and every worker warm before timing
                np.testing.assert_array_equal(compiled[m].run([x])[0], expected)
                np.testing.assert_array_equal(remote[m].execute([x]).outputs[0], expected)
            reps = max(3, args.reps // (1 + int(np.prod(shape)) // 65536))
            ways = {
                "run": {m: (lambda c=compiled[m], x=x: c.run([x])) for m in devices},
                "grpc": {m: (lambda p=remote[m], x=x: p.execute([x])) for m in devices},
            }
            for way, fns in ways.items():
                samples: dict[str, list[float]] = {m: [] for m in fns}
                for _ in range(args.rounds):
                    for m, fn in fns.items():
                        samples[m].append(timed(fn, reps))
                inline = statistics.median(samples["inline"])
                process = statistics.median(samples["process"])
                label = "x".join(map(str, shape))
                print(f"{label:>12} {way:>5} {inline:>11.1f} {process:>11.1f} "
                      f"{process / inline:>14.2f}x")  # fmt: skip
    finally:
        for c in clients.values():
            c.close()
        for srv, _ in servers.values():
            srv.stop(None)
        for d in devices.values():
            d.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: prepareModelFromCache_1_3 vs prepareModel_1_3 for a large model.

``python3 -m nnhal.driver.cache_bench [--ops N] [--width W] [--repeat R]`` builds a
chain of N FULLY_CONNECTED + ADD pairs (W x W float32 weights, ~N*W*W*4 bytes of
constants), prepares it from the model and from the cache it wrote, through an
in-process gRPC server (the path a client takes), and prints the median times
and their ratio, measured in the same run. The outputs of both prepared models
are checked to be identical.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType, OperationType

F32 = OperandType.TENSOR_FLOAT32


def chain_model(ops: int, width: int):
    rng = np.random.default_rng(0)
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [1, width])
    none = g.constant(OperandType.INT32, 0)
    for k in range(ops):
        w = rng.standard_normal((width, width)).astype(np.float32) * (0.01 / np.sqrt(width))
        b = rng.standard_normal(width).astype(np.float32)
        h = g.temporary(F32, [1, width])
        g.operation(
            OperationType.FULLY_CONNECTED, [x, g.constant(F32, w), g.constant(F32, b), none], [h]
        )
        y = g.output(F32, [1, width]) if k == ops - 1 else g.temporary(F32, [1, width])
        g.operation(OperationType.ADD, [h, x, none], [y])
        x = y
    return mb.build()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    from nnhal.driver.device import Device
    from nnhal.driver.service import create_server

    from nnhal.client import connect

    model = chain_model(args.ops, args.width)
    server, address = create_server(Device(), "127.0.0.1:0")
    device = connect(address)
    token = bytes(range(32))
    x = np.linspace(-1, 1, args.width, dtype=np.float32).reshape(1, args.width)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            mc, dc = Path(tmp, "model"), Path(tmp, "data")
            mc.touch()
            dc.touch()
            handles = ([[str(mc)]], [[str(dc)]])
            p = device.prepareModel_1_3(
                model, modelCache=handles[0], dataCache=handles[1], token=token
            )
            expected = p.execute([x]).outputs[0]
            p.release()
            from_model, from_cache = [], []
            for _ in range(args.repeat):
                t = time.perf_counter()
                p = device.prepareModel_1_3(model)
                from_model.append(time.perf_counter() - t)
                p.release()
                t = time.perf_counter()
                p = device.prepareModelFromCache_1_3(*handles, token, model=model)
                from_cache.append(time.perf_counter() - t)
                assert np.array_equal(p.execute([x]).outputs[0], expected)
                p.release()
            size = mc.stat().st_size + dc.stat().st_size
    finally:
        device.close()
        server.stop(None)
    m, c = statistics.median(from_model), statistics.median(from_cache)
    print(f"model: {2 * args.ops} operations, cache {size / 1e6:.1f} MB")
    print(f"prepareModel_1_3 (from the model): {m * 1e3:.1f} ms (median of {args.repeat})")
    print(f"prepareModelFromCache_1_3:         {c * 1e3:.1f} ms")
    print(f"ratio model/cache: {m / c:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

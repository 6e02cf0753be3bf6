"""Throughput of one server under several client processes, and getStatus latency meanwhile.

    python -m nnhal.tools.bench_serving [--workers N] [--seconds S] [--model add|mobilenet]
                                        [--clients 1,2,8]

A ``nnhal serve --workers N`` runs in a subprocess (``tools/stress.OwnServer``).
For each client count, that many client processes (``spawn``) connect, prepare
the model and execute it once, then, all started together, execute it in a
loop for ``--seconds``; the executions they finished give the throughput. A
thread of this process calls ``getStatus`` every 20 ms during each run; its
p50/p99 latency is printed beside. Throughputs are given as ratios to the
first client count's (one client), measured on the same server in the same
run. The load of the machine (``os.getloadavg``) is printed with every figure:
the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import threading
import time
from typing import Any

import numpy as np


def _model(name: str) -> tuple[Any, list[np.ndarray]]:
    if name == "mobilenet":
        from nnhal.tools.bench_models import mobilenet_f32

        case = mobilenet_f32()
        return case.model, list(case.inputs)
    from nnhal.tools.stress_client import add_model

    model = add_model((2,))
    x = np.ones(2, np.float32)
    return model, [x, x]


def _client(
    address: str, model_name: str, ready: Any, start: Any, seconds: float, out: Any
) -> None:
    from nnhal.client import connect

    model, inputs = _model(model_name)
    device = connect(address, timeout=600.0)
    try:
        prepared = device.prepareModel_1_3(model)
        prepared.execute(inputs)  # warm: compiled in the worker that ran it
        ready.put(1)
        start.wait()
        done, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            prepared.execute(inputs)
            done += 1
        out.put(done)
    finally:
        device.close()


def _probe(address: str, stop: threading.Event, samples: list[float]) -> None:
    from nnhal.client import connect

    device = connect(address, timeout=60.0, session=False)
    try:
        while not stop.is_set():
            t0 = time.perf_counter()
            device.getStatus()
            samples.append((time.perf_counter() - t0) * 1000)
            stop.wait(0.02)
    finally:
        device.close()


def run(address: str, model: str, clients: int, seconds: float) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    ready, start, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_client, args=(address, model, ready, start, seconds, out))
        for _ in range(clients)
    ]
    for p in procs:
        p.start()
    for _ in procs:  # every client prepared and warm (its first execution compiles)
        ready.get(timeout=900)
    samples: list[float] = []
    stop = threading.Event()
    probe = threading.Thread(target=_probe, args=(address, stop, samples))
    probe.start()
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    start.set()
    counts = [out.get(timeout=seconds + 600) for _ in procs]
    elapsed = time.monotonic() - t0
    stop.set()
    probe.join()
    for p in procs:
        p.join(timeout=60)
    return {
        "clients": clients,
        "executions": sum(counts),
        "per_second": sum(counts) / elapsed,
        "status_p50_ms": float(np.percentile(samples, 50)) if samples else None,
        "status_p99_ms": float(np.percentile(samples, 99)) if samples else None,
        "status_calls": len(samples),
        "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnhal.tools.bench_serving")
    parser.add_argument("--workers", default="0", help="nnhal serve --workers (default 0)")
    parser.add_argument("--seconds", type=float, default=20.0, help="per run (default 20)")
    parser.add_argument("--model", choices=("add", "mobilenet"), default="add")
    parser.add_argument("--clients", default="1,8", help="client counts (default 1,8)")
    parser.add_argument("--warmup", type=float, default=5.0, help="s before the first run")
    args = parser.parse_args(argv)
    from nnhal.tools.stress import OwnServer

    server = OwnServer(None, ("--workers", str(args.workers)))
    try:
        time.sleep(args.warmup)
        results = []
        for count in (int(c) for c in args.clients.split(",")):
            results.append(run(server.address, args.model, count, args.seconds))
            base = results[0]["per_second"]
            entry = dict(results[-1], ratio=round(results[-1]["per_second"] / base, 3))
            print(json.dumps(dict(entry, model=args.model, workers=args.workers)), flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

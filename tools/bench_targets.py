"""``nnhal bench --suite control-flow --targets``: the issue's targets as ratios from one run.

Each figure is a ratio of two medians measured in the same process in
interleaved rounds (``nnhal.tools.bench_measure.run_rounds``):

- ``fixed_cost``: one in-process execution (``CompiledModel.run``) of the
  Fibonacci WHILE with n = 0, in µs (target < 5 µs), from batches of 100
  calls; beside it ``np_add_us``, one ``np.add`` of two float32 pairs, to
  show how fast the machine was;
- ``per_iteration_vs_onnxruntime``: the executor's per-iteration cost on
  Fibonacci (two-point fit, n = 100 and 10 000) over onnxruntime's Loop
  (target <= 1);
- ``grpc_vs_echo``: an execution over gRPC (Fibonacci n = 0, inline request)
  over a bare grpcio unary echo of the same serialized request bytes, on a
  server in this process (target <= 1.5);
- ``burst_vs_pingpong``: a burst execution over a bare bidirectional-stream
  ping-pong of the same bytes (target <= 1.5); these two alone:
  ``transport_targets`` (``python -m nnhal.tools.bench_targets``), in at least
  ``TRANSPORT_ROUNDS`` rounds whatever ``--rounds`` says: a call is a few
  hundred µs and a thread hand-over's wake-up moves single samples by tens of
  µs, so twenty samples left the 1.5x line to chance, while a thousand take
  about two seconds;
- ``inline_vs_shared_64mib``: 64 MiB of input (a [16M] float32 operand, the
  model reads one element with SLICE) sent inline over gRPC, over the same
  input in a shared-memory segment the client filled once (target >= 15);
- ``prepare_vs_onnxruntime``: prepareModel_1_3 in-process over onnxruntime
  session creation, per workload (target <= 1): a model's first preparation
  (``first_ratios``: the device's kept check results and the compiled code
  emptied before each) and the same model prepared again (``ratios``).
"""

from __future__ import annotations

import queue
from multiprocessing import shared_memory
from typing import Any

import numpy as np
from nnhal.tools.bench_measure import run_rounds, time_call, two_point_fit

BIG = 16 * 1024 * 1024  # float32 elements: 64 MiB
TRANSPORT_ROUNDS = 1000  # the fewest interleaved rounds of the four transport cases


def _p50(samples: list[float]) -> float:
    return float(np.median(samples))


def _echo_server():
    import grpc
    from nnhal.driver.service import GRPC_OPTIONS

    ident = lambda b: b  # bytes in, bytes out

    def unary(request, context):
        return request

    def stream(requests, context):
        yield from requests

    handler = grpc.method_handlers_generic_handler(
        "bench.Echo",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident),
            "Stream": grpc.stream_stream_rpc_method_handler(stream, ident, ident),
        },
    )
    from concurrent.futures import ThreadPoolExecutor

    server = grpc.server(ThreadPoolExecutor(max_workers=4), options=GRPC_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
    unary_call = channel.unary_unary("/bench.Echo/Unary", ident, ident)
    stream_call = channel.stream_stream("/bench.Echo/Stream", ident, ident)
    return server, channel, unary_call, stream_call


class _PingPong:
    def __init__(self, stream_call) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._replies = stream_call(iter(self._q.get, None))

    def __call__(self, payload: bytes) -> bytes:
        self._q.put(payload)
        return next(self._replies)

    def close(self) -> None:
        self._q.put(None)


def _big_model(elements: int):
    from nnhal.builder import ModelBuilder
    from nnhal.types import OperandType as T
    from nnhal.types import OperationType as O

    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [elements])
    y = g.output(T.TENSOR_FLOAT32, [1])
    g.operation(O.SLICE, [x, g.constant(T.TENSOR_INT32, [0]), g.constant(T.TENSOR_INT32, [1])], [y])
    return mb.build()


def run_targets(
    rounds: int = 7,
    prepare: dict[str, dict] | None = None,
    big_elements: int = BIG,
    transport_rounds: int = TRANSPORT_ROUNDS,
) -> dict[str, Any]:
    """The target figures (see the module docstring); ``prepare``: the suite's prepare times.

    ``big_elements``: float32 elements of the shared-vs-inline input (64 MiB by default);
    ``transport_rounds``: the fewest rounds of the transport cases (tests give fewer).
    """
    from nnhal.driver.device import Device
    from nnhal.driver.executor import compile_model
    from nnhal.driver.service import create_server
    from nnhal.tools import bench as fib
    from nnhal.tools import bench_onnx

    from nnhal._client_io import unlink_segment
    from nnhal.client import connect
    from nnhal.types import DataLocation, InlineMemory, Request, RequestArgument, SharedMemory

    out: dict[str, Any] = {}
    model = fib.fibonacci_while_model()
    compiled = compile_model(model)
    zero = [fib.STATE0, np.array([0], np.int32)]

    # fixed cost and per-iteration cost against onnxruntime
    def fixed_batch() -> None:  # 100 calls in a row: a tiny cost needs a batch to be seen
        for _ in range(100):
            compiled.run([zero[0].copy(), zero[1]])

    cases = {"fixed": fixed_batch}
    for n in (100, 10_000):
        n_in = np.array([n], np.int32)
        cases[f"exec{n}"] = lambda n_in=n_in: compiled.run([fib.STATE0.copy(), n_in])
    skip = bench_onnx.available()
    if skip is None:
        from nnhal.tools.bench_workloads import fibonacci

        w = fibonacci()
        peer = bench_onnx.fibonacci(w.extra)
        sess = bench_onnx.session(peer)
        for n in (100, 10_000):
            cases[f"ort{n}"] = bench_onnx.runner(peer, sess, w.inputs(n))
    samples, _ = run_rounds(cases, rounds=rounds, warmup=2)
    out["fixed_cost_us"] = {"value": _p50(samples["fixed"]) / 100, "target": "< 5 µs"}
    calibrate = np.ones(2, np.float32)
    out["fixed_cost_us"]["np_add_us"] = (
        min(
            time_call(lambda: [np.add(calibrate, calibrate) for _ in range(100)])[0]
            for _ in range(5)
        )
        / 100
    )  # fmt: skip  (the machine's speed: np.add of 2 float32, ~0.25 µs on a quiet core)
    ex = two_point_fit([(n, _p50(samples[f"exec{n}"])) for n in (100, 10_000)])
    entry: dict[str, Any] = {"executor_us": ex.per_iteration_us if ex else None, "target": "<= 1"}
    if skip is None:
        ort = two_point_fit([(n, _p50(samples[f"ort{n}"])) for n in (100, 10_000)])
        entry["onnxruntime_us"] = ort.per_iteration_us if ort else None
        if ex and ort and ort.per_iteration_us > 0:
            entry["ratio"] = ex.per_iteration_us / ort.per_iteration_us
    else:
        entry["skipped"] = skip
    out["per_iteration_vs_onnxruntime"] = entry

    # transport: nnhal over gRPC against bare grpcio
    device = Device()
    server, address = create_server(device, "127.0.0.1:0")
    client = connect(address)
    segment = None
    try:
        out.update(
            transport_targets(rounds, client=client, model=model, min_rounds=transport_rounds)
        )

        # 64 MiB through shared memory vs inline
        big = client.prepareModel_1_3(_big_model(big_elements))
        data = np.arange(big_elements, dtype=np.float32)
        raw = data.tobytes()
        segment = shared_memory.SharedMemory(create=True, size=len(raw) + 64)
        segment.buf[: len(raw)] = raw  # the app's data lives in the segment already
        shm_pool = SharedMemory(name=segment.name, size=segment.size)
        out_arg = (RequestArgument(location=DataLocation(1, 0, 4)),)
        inline_req = Request(
            inputs=(RequestArgument(location=DataLocation(0, 0, len(raw))),),
            outputs=out_arg,
            pools=(InlineMemory(raw), InlineMemory(bytes(4))),
        )
        shm_req = Request(
            inputs=(RequestArgument(location=DataLocation(0, 0, len(raw))),),
            outputs=(RequestArgument(location=DataLocation(0, len(raw), 4)),),
            pools=(shm_pool,),
        )
        cases = {
            "inline": lambda: big.execute_request(inline_req),
            "shared": lambda: big.execute_request(shm_req),
        }
        samples, _ = run_rounds(cases, rounds=max(3, rounds // 2), warmup=2)
        med = {k: _p50(v) for k, v in samples.items()}
        out["inline_vs_shared_64mib"] = {
            "bytes": len(raw),
            "inline_us": med["inline"],
            "shared_us": med["shared"],
            "ratio": med["inline"] / med["shared"],
            "target": ">= 15",
        }
        big.release()
    finally:
        if segment is not None:
            unlink_segment(segment)  # keeps the resource tracker balanced
        client.close()
        server.stop(None)

    if prepare:
        timed = {name: p for name, p in prepare.items() if p.get("onnxruntime_session_us")}
        ratios = {
            name: p["in_process_us"] / p["onnxruntime_session_us"] for name, p in timed.items()
        }
        first = {
            name: p["in_process_first_us"] / p["onnxruntime_session_us"]
            for name, p in timed.items()
            if "in_process_first_us" in p
        }
        # "ratios": the model prepared again; "first_ratios": its first preparation
        out["prepare_vs_onnxruntime"] = {"ratios": ratios, "first_ratios": first, "target": "<= 1"}
    return out


def transport_targets(
    rounds: int = TRANSPORT_ROUNDS,
    *,
    client: Any = None,
    model: Any = None,
    min_rounds: int = TRANSPORT_ROUNDS,
) -> dict[str, Any]:
    """``grpc_vs_echo`` and ``burst_vs_pingpong`` (see the module docstring), in interleaved
    rounds (at least ``min_rounds``). ``client``: a connected ``nnhal.client`` device
    (default: a server of the default device in this process); ``model``: the Fibonacci
    WHILE by default."""
    from nnhal.driver.device import Device
    from nnhal.driver.service import create_server
    from nnhal.tools import bench as fib

    from nnhal import convert as cv
    from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
    from nnhal.client import connect

    out: dict[str, Any] = {}
    model = model if model is not None else fib.fibonacci_while_model()
    server = None
    if client is None:
        server, address = create_server(Device(), "127.0.0.1:0")
        client = connect(address)
    echo_server, channel, unary, stream = _echo_server()
    pingpong = _PingPong(stream)
    try:
        remote = client.prepareModel_1_3(model)
        burst = remote.burst()
        request = fib.fibonacci_request(0)
        payload = ppb.ExecuteRequest_1_3(
            preparedModel=remote.id, request=cv.request_to_pb(request)
        ).SerializeToString()
        cases = {
            "grpc": lambda: remote.execute_request(request),
            "echo": lambda: unary(payload),
            "burst": lambda: burst.execute_request(request),
            "pingpong": lambda: pingpong(payload),
        }
        done = max(rounds, min_rounds, 1)
        samples, _ = run_rounds(cases, rounds=done, warmup=3)
        med = {k: _p50(v) for k, v in samples.items()}
        out["grpc_vs_echo"] = {
            "rounds": done,
            "grpc_us": med["grpc"],
            "echo_us": med["echo"],
            "bytes": len(payload),
            "ratio": med["grpc"] / med["echo"],
            "target": "<= 1.5",
        }
        out["burst_vs_pingpong"] = {
            "rounds": done,
            "burst_us": med["burst"],
            "pingpong_us": med["pingpong"],
            "ratio": med["burst"] / med["pingpong"],
            "target": "<= 1.5",
        }
        burst.close()
        remote.release()
    finally:
        pingpong.close()
        channel.close()
        echo_server.stop(None)
        if server is not None:
            client.close()
            server.stop(None)
    return out


def print_targets(targets: dict[str, Any], out) -> None:
    print("\ntargets (ratios of medians from this run):", file=out)
    for key, value in targets.items():
        if key == "fixed_cost_us":
            ok = value["value"] < 5
            print(f"  fixed cost per in-process execution: {value['value']:.2f} µs "
                  f"(target < 5 µs: {'met' if ok else 'MISSED'}; np.add of 2 floats took "
                  f"{value['np_add_us']:.2f} µs)", file=out)  # fmt: skip
        elif key == "prepare_vs_onnxruntime":
            firsts = value.get("first_ratios", {})
            for name, r in value["ratios"].items():
                line = f"again {r:.2f}x ({'met' if r <= 1 else 'MISSED'})"
                if name in firsts:
                    f = firsts[name]
                    line = f"first {f:.2f}x ({'met' if f <= 1 else 'MISSED'}), {line}"
                print(f"  prepareModel / onnxruntime session ({name}, target <= 1): {line}",
                      file=out)  # fmt: skip
        elif "ratio" in value:
            r, target = value["ratio"], value["target"]
            ok = r >= 15 if target.startswith(">=") else r <= float(target.split()[-1])
            how = f"; medians of {value['rounds']} rounds" if "rounds" in value else ""
            print(f"  {key}: {r:.2f}x (target {target}: {'met' if ok else 'MISSED'}{how})",
                  file=out)  # fmt: skip
        else:
            print(f"  {key}: {value}", file=out)


if __name__ == "__main__":  # the transport ratios alone
    import json
    import sys

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else TRANSPORT_ROUNDS
    print(json.dumps(transport_targets(rounds, min_rounds=rounds), indent=2))

"""The runtime's overhead: a model run through the emulated NNAPI runtime vs the same model
executed directly on one device (a benchmark, not a test).

    nnhal bench --runtime [--target ADDR[/DEVICE]]... [--model FILE [--name N]] [--rounds R]
    python -m nnhal.tools.bench_runtime [--rounds 15] [--iters 20] [--size 4 --size 256]
        [--threads N|auto]

Each case is measured in this process: the direct and the runtime execution alternate
call by call (which goes first alternating every round), every call timed on its own;
the median per-execution time of each is printed with the ratio runtime / direct.

- The runtime side: a compilation over the targets plus ``nnapi-reference`` (Android's
  ANeuralNetworksCompilation_create), one ``Execution`` per call (create, set the inputs
  and outputs, compute), as an app does.
- The direct side: the whole model prepared once on one device and executed the way a
  client of that device executes it: over gRPC ``nnhal.client.PreparedModel.execute``; in
  process the reference driver's ``PreparedModel.execute`` with a request laid out by
  ``nnhal._client_io.IoPlan`` (what the runtime's CPU device does for each step). The
  device is the simple plan's; when the plan spans several devices, ``nnapi-reference``
  (the ratio then is that of the partitioned run to the whole model on the CPU).

Without ``--target`` two cases per model: in-process (``nnapi-reference`` alone) and over
gRPC (a driver served on a loopback port of this process, with figures below the CPU's
so the whole model goes to it: a simple plan, one step). Built-in models: FULLY_CONNECTED
(size x size weights), ADD, RELU in float32, at each ``--size`` (small sizes show the
fixed per-execution cost, large ones the kernels).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnhal.builder import ModelBuilder
from nnhal.types import Model, OperandType, OperationType

DEFAULT_SIZES = (4, 256)
ITERS = 20  # calls of each side per round


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


@dataclass
class Case:
    name: str
    model: Model
    inputs: list[Any]
    #: the output dimensions to ask for (a file's expected shapes), None: the model's
    output_shapes: list[Any] | None = None


def builtin_cases(sizes: Sequence[int]) -> list[Case]:
    rng = np.random.default_rng(1)
    return [
        Case(f"fc-add-relu-{s}", bench_model(s), [rng.standard_normal((s, s)).astype(np.float32)])
        for s in sizes
    ]


def file_case(path: str, name: str | None) -> Case:
    from nnhal.runtime.api import load_test_model

    test = load_test_model(path, name)
    shapes = [tuple(s) if s and all(s) else None for s in test.expected_shapes]
    return Case(test.name, test.model, [None if a is None else np.asarray(a) for a in test.inputs],
                shapes if any(s is not None for s in shapes) else None)  # fmt: skip


def interleave(
    calls: Sequence[Callable[[], object]], rounds: int, iters: int = ITERS
) -> list[float]:
    """Median µs per call of each; every call is timed on its own, the calls alternate one
    by one (the order rotating each round), so load spikes on a shared machine hit all
    alike and the medians ignore them."""
    for call in calls:  # warm up
        call()
    times: list[list[int]] = [[] for _ in calls]
    clock = time.perf_counter_ns
    n = len(calls)
    for k in range(rounds):
        order = [(k + j) % n for j in range(n)]
        for _ in range(iters):
            for j in order:
                t0 = clock()
                calls[j]()
                times[j].append(clock() - t0)
    return [statistics.median(t) / 1000.0 for t in times]


def runtime_call(compilation: Any, inputs: list[Any], output_shapes=None) -> Callable[[], object]:
    """One app-style execution per call: create, set every input and output, compute."""
    from nnhal.runtime.api import Execution

    shapes = output_shapes or [None] * len(compilation.model.main.outputIndexes)

    def run() -> object:
        e = Execution(compilation)
        for k, value in enumerate(inputs):
            e.set_input(k, value)
        for k, shape in enumerate(shapes):
            e.set_output(k, None, shape)
        return e.compute()

    return run


def in_process_call(model: Model, inputs: list[Any],
                    output_shapes=None) -> tuple[Callable[[], object], Any]:  # fmt: skip
    """The reference driver's prepared model executed directly, as a client lays out a request
    (the call the runtime's CPU device makes); and the prepared model (to release)."""
    from nnhal.runtime.reference import reference_device

    from nnhal._client_io import IoPlan

    prepared = reference_device().driver.prepareModel_1_3(model)

    def run() -> object:
        plan = IoPlan(prepared.model, inputs, output_shapes, "inline")
        views = [memoryview(bytearray(p.data)) for p in plan.request.pools]
        shapes, _ = prepared.execute(plan.request, views)
        return plan.read_outputs(shapes, {1: bytes(views[1])})

    return run, None


def grpc_call(device: Any, model: Model, inputs: list[Any],
              output_shapes=None) -> tuple[Callable[[], object], Any]:  # fmt: skip
    """``nnhal.client.PreparedModel.execute`` on a served device; and the prepared model."""
    prepared = device.device.prepareModel_1_3(model)
    return (lambda: prepared.execute(inputs, output_shapes=output_shapes)), prepared


def measure_case(case: Case, devices: list[Any], rounds: int, iters: int = ITERS) -> dict:
    """One case: the runtime over ``devices`` (+ nnapi-reference) vs the direct run."""
    from nnhal.runtime.api import Compilation
    from nnhal.runtime.partition import DeviceStep
    from nnhal.runtime.reference import ReferenceStep, reference_device

    compilation = Compilation(case.model, devices).finish()
    try:
        plan = compilation.plan
        used = sorted(
            {plan.devices[s.device].name for s in plan.steps if isinstance(s, DeviceStep)}
        )
        target = plan.devices[plan.steps[0].device] if plan.simple else compilation.reference
        shapes = case.output_shapes
        calls = [runtime_call(compilation, case.inputs, shapes)]
        reuse = None
        if target.is_reference:
            direct, prepared = in_process_call(case.model, case.inputs, shapes)
            how = "in-process"
            # the runtime's CPU device reuses its request layout; so does this baseline
            reused = ReferenceStep(reference_device().driver.prepareModel_1_3(case.model))
            calls += [direct, lambda: reused.run(case.inputs, shapes)]
        else:
            direct, prepared = grpc_call(target, case.model, case.inputs, shapes)
            how = "over gRPC"
            calls.append(direct)
        try:
            r, d, *rest = interleave(calls, rounds, iters)
            reuse = rest[0] if rest else None
        finally:
            if prepared is not None:
                prepared.release()
    finally:
        compilation.release()
    steps = "simple plan" if plan.simple else f"{len(plan.steps)} steps"
    return {
        "case": case.name,
        "devices": [d.name for d in compilation.devices],
        "plan": f"{steps} on {', '.join(used) or 'the runtime interpreter'}",
        "direct_device": target.name,
        "direct_path": how,
        "direct_us": d,
        "runtime_us": r,
        "ratio": r / d,
        "direct_layout_reused_us": reuse,
        "ratio_layout_reused": None if reuse is None else r / reuse,
        "rounds": rounds,
        "iters": iters,
    }


def served_npu() -> tuple[Any, Any]:
    """A driver served on a loopback port of this process, faster than the CPU for every
    type (so a model it supports goes to it whole); its runtime device and the server."""
    from nnhal.driver.device import Device
    from nnhal.driver.profile import parse_profile
    from nnhal.driver.server import create_server
    from nnhal.runtime.devices import connect_target

    profile = {"name": "bench-npu", "type": "ACCELERATOR",
               "capabilities": {"default": {"execTime": 0.5, "powerUsage": 0.5}}}  # fmt: skip
    server, address = create_server(Device(parse_profile(profile)), "127.0.0.1:0")
    return connect_target(f"{address}/bench-npu"), server


def run_bench(cases: list[Case], targets: Sequence[str], rounds: int, iters: int = ITERS,
              connect_timeout: float = 10.0) -> list[dict]:  # fmt: skip
    """Every case through the runtime vs direct: with ``targets`` over those devices;
    without, in-process and over gRPC (a driver served in this process)."""
    from nnhal.runtime.devices import connect_target

    rows: list[dict] = []
    if targets:
        devices = [connect_target(t, timeout=connect_timeout) for t in targets]
        try:
            for case in cases:
                rows.append(measure_case(case, devices, rounds, iters))
        finally:
            for dev in devices:
                dev.device.close()
        return rows
    for case in cases:
        rows.append(measure_case(case, [], rounds, iters))
    npu, server = served_npu()
    try:
        for case in cases:
            rows.append(measure_case(case, [npu], rounds, iters))
    finally:
        npu.device.close()
        server.stop(None)
    return rows


def print_rows(rows: list[dict], out: Any = None) -> None:
    out = out or sys.stdout  # looked up now (the one in force, not the one at import)
    if not rows:
        return
    r0 = rows[0]
    print(f"runtime vs direct: median us per execution, {r0['rounds']} interleaved rounds x "
          f"{r0['iters']} calls of each", file=out)  # fmt: skip
    for r in rows:
        print(f"{r['case']:<20} runtime {r['runtime_us']:9.1f} us ({r['plan']})  direct "
              f"{r['direct_us']:9.1f} us ({r['direct_path']}, {r['direct_device']})  "
              f"ratio {r['ratio']:.3f}", file=out)  # fmt: skip
        if r["direct_layout_reused_us"] is not None:
            print(f"{'':<20} direct reusing its request layout {r['direct_layout_reused_us']:9.1f}"
                  f" us  ratio {r['ratio_layout_reused']:.3f}", file=out)  # fmt: skip


def cmd_bench_runtime(args: argparse.Namespace) -> int:
    """``nnhal bench --runtime``: usage errors exit 2, a bad model file 1 (one line each)."""
    import json

    from nnhal.tools.bench_threads import apply, threads_line
    from nnhal.tools.cli import CliError
    from nnhal.tools.cli_bench import _usage as usage

    from nnhal.errors import HalError

    if args.suite:
        usage("--runtime measures the runtime's overhead; it does not run a --suite")
    if args.rounds < 1:
        usage("--rounds must be >= 1")
    if args.profile or getattr(args, "op_package", None):
        usage("--profile and --op-package configure an in-process driver; with --runtime give "
              "served devices with --target (nnapi-reference, the default profile, is always "
              "there)")  # fmt: skip
    apply(args.threads)
    try:
        cases = [file_case(args.model, args.name)] if args.model else builtin_cases(DEFAULT_SIZES)
    except (ValueError, OSError) as exc:  # the model file's fault: a data error
        raise CliError(str(exc)) from None
    print(threads_line())
    try:
        rows = run_bench(cases, args.runtime_targets or [], args.rounds)
    except HalError as exc:
        print(f"nnhal bench --runtime: {exc.status.name}: {exc.message}", file=sys.stderr)
        return 1
    except ValueError as exc:  # inputs the model cannot take
        print(f"nnhal bench --runtime: {exc}", file=sys.stderr)
        return 1
    print_rows(rows)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"runtime": rows}, fh, indent=1)
    return 0


def main(argv: list[str] | None = None) -> int:
    from nnhal.tools.bench_threads import add_threads_option, apply, threads_line

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--iters", type=int, default=ITERS)
    p.add_argument("--size", type=int, action="append", help=f"default {DEFAULT_SIZES}")
    p.add_argument("--target", action="append", default=[], metavar="ADDR[/DEVICE]")
    add_threads_option(p)
    args = p.parse_args(argv)
    apply(args.threads)  # as nnhal bench --runtime: figures always come with their setting
    print(threads_line())
    rows = run_bench(builtin_cases(args.size or DEFAULT_SIZES), args.target, args.rounds,
                     args.iters)  # fmt: skip
    print_rows(rows)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

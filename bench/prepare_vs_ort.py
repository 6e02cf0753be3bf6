"""Preparation against onnxruntime session creation, in thread CPU time, per bench workload.

For each workload of ``nnhal bench`` (the control-flow suite's and the models
suite's), alternates ``Device.prepareModel_1_3`` with onnxruntime's
``InferenceSession`` of the same model (one intra-op thread, as ``--threads 1``)
and prints the median and the lowest of each, in thread CPU time and in wall
time. CPU time shows the work done even on a loaded machine, where wall times
mostly measure how often the process was descheduled. ``--cold`` empties the
code cache (``nnhal.driver.executor.code_cache``) before every preparation: the
cost of a graph's first preparation in a process; it also empties the device's
kept check results (``Device.analyses``, ``nnhal.driver.analysis_cache``), so
every preparation checks the model afresh.

``--first-run`` times each side's preparation followed by one execution (the
session creation followed by one run): what a model run once costs. The first
execution of a model is interpreted (``driver/executor/interpreter.py``), its
code generated at the second.

``--isolated`` measures each workload in a process of its own (this script run
again with that one workload). Both sides' figures depend on what the process
allocated before: in one run of the whole list, onnxruntime's session for the
ResNet-18 read 20.9 ms of thread CPU after the other models (the allocator
served it memory already touched) and 69-80 ms in the others, fresh pages
being the larger part of its cost and of ours (67 MB of transformed filters).

``--separate`` goes further: each side in a process of its own (this script run
with ``--side prepare`` and ``--side session``), so neither side's allocations
warm or cool the other's memory: in one process, onnxruntime's ResNet-18
session read 39-42 ms of thread CPU against one version of the preparation and
23-25 ms against another that freed its memory differently.

Usage: python bench/prepare_vs_ort.py [WORKLOAD ...] [--runs N] [--cold] [--isolated]
    [--separate] [--first-run]
(needs the bench extra: pip install -e '.[bench]')
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from nnhal.driver.device import Device
from nnhal.driver.executor import code_cache
from nnhal.driver.ops.threads import set_threads
from nnhal.tools import bench_models, bench_onnx
from nnhal.tools.bench_workloads import suite

LOOPS = ["fibonacci", "nested", "parity", "rnn", "lstm-decode", "greedy"]


def _cases(name: str):
    """(NNAPI model, a function creating the onnxruntime session, the NNAPI inputs of
    one execution, a function running a session once on the same inputs)."""
    if name in bench_models.CASES:
        import onnxruntime as ort

        case = bench_models.CASES[name]()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        return (
            case.model,
            lambda: ort.InferenceSession(case.onnx, options, providers=["CPUExecutionProvider"]),
            case.inputs,
            lambda session: session.run(None, case.feed),
        )
    workload = suite([name])[0]
    peer = bench_onnx.BUILDERS[workload.name](workload.extra)
    inputs = workload.inputs(workload.trips[0])
    return (
        workload.model,
        lambda: bench_onnx.session(peer),
        inputs,
        lambda session: bench_onnx.runner(peer, session, inputs)(),
    )


def _timed(fn) -> tuple[float, float]:
    """(CPU ms, wall ms) of one call."""
    wall, cpu = time.perf_counter(), time.thread_time()
    fn()
    return (time.thread_time() - cpu) * 1e3, (time.perf_counter() - wall) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", default=[*LOOPS, *bench_models.CASES])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--cold", action="store_true", help="empty the code and analysis caches each time"
    )
    parser.add_argument(
        "--isolated", action="store_true", help="each workload in a process of its own"
    )
    parser.add_argument(
        "--first-run",
        action="store_true",
        help="time preparation and the first execution (session creation and its first run)",
    )
    parser.add_argument(
        "--separate", action="store_true", help="each side of each workload in its own process"
    )
    parser.add_argument("--side", choices=["prepare", "session"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.separate:
        _separate(args)
        return
    if args.isolated:
        _isolated(args)
        return
    set_threads(1)
    device = Device()
    print(f"ms, median (lowest) of {args.runs}; load average {os.getloadavg()[0]:.1f}")
    for name in args.workloads:
        model, session, inputs, run_session = _cases(name)
        ways = {"prepare": lambda m=model: device.prepareModel_1_3(m), "session": session}
        if args.first_run:
            ways = {
                "prepare": lambda m=model, xs=inputs: device.prepareModel_1_3(m).compiled.run(xs),
                "session": lambda make=session, run=run_session: run(make()),
            }
        if args.side is not None:
            ways = {args.side: ways[args.side]}
        for fn in ways.values():  # imports and first-use costs out of the way
            fn()
        samples: dict[str, list[float]] = {what: [] for what in ways}
        walls: dict[str, list[float]] = {what: [] for what in ways}
        for _ in range(args.runs):
            if args.cold:
                code_cache.clear()
                if device.analyses is not None:
                    device.analyses.clear()
            for what, fn in ways.items():
                cpu, wall = _timed(fn)
                samples[what].append(cpu)
                walls[what].append(wall)
        cells = [
            f"{what} cpu {statistics.median(v):.2f} ({min(v):.2f}) "
            f"wall {statistics.median(walls[what]):.2f}"
            for what, v in samples.items()
        ]
        if args.side is not None:
            print(f"{name:14s} {cells[0]}", flush=True)
            continue
        ratio = statistics.median(samples["prepare"]) / statistics.median(samples["session"])
        print(f"{name:14s} {'  '.join(cells)}  cpu ratio {ratio:.2f}", flush=True)


def _rerun(args, name: str, *extra: str) -> tuple[str | None, str]:
    """This script run again for workload ``name`` with ``args``' settings and ``extra``:
    (its last output line, "") or (None, why it failed)."""
    command = [sys.executable, __file__, name, "--runs", str(args.runs), *extra]
    if args.cold:
        command.append("--cold")
    if args.first_run:
        command.append("--first-run")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None, (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return done.stdout.strip().splitlines()[-1], ""


def _separate(args) -> None:
    """Each side of each workload by a fresh run of this script; one line per workload."""
    print(f"ms, median (lowest) of {args.runs}, each side in a process of its own; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    for name in args.workloads:
        cells, medians = [], []
        for side in ("prepare", "session"):
            line, why = _rerun(args, name, "--side", side)
            if line is None:
                cells.append(f"{side} failed: {why}")
                continue
            cell = line[len(name) :].strip()
            cells.append(cell)
            medians.append(float(cell.split()[2]))  # "<side> cpu <median> (...)"
        ratio = f"  cpu ratio {medians[0] / medians[1]:.2f}" if len(medians) == 2 else ""
        print(f"{name:14s} {'  '.join(cells)}{ratio}", flush=True)


def _isolated(args) -> None:
    """Each workload by a fresh run of this script; their result lines in order."""
    print(f"ms, median (lowest) of {args.runs}, each workload in a process of its own; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    for name in args.workloads:
        line, why = _rerun(args, name)
        print(line if line is not None else f"{name:14s} failed: {why}", flush=True)


if __name__ == "__main__":
    main()

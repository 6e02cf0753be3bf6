"""Where the float MobileNet of ``nnhal bench --suite models`` spends its time, per layer.

For each operation of ``tools/bench_models.mobilenet_f32`` (run through the
executor as in the models suite, each kernel wrapped in a timer), the table
gives, as medians of interleaved rounds in one process:

- ``nnhal``: the kernel's time inside the whole model's run;
- ``gemm``: the pure BLAS work of that layer on the same input, one
  ``np.matmul`` of the whole tensor (a 1x1 convolution: input [P, C] times the
  [C, O] filter; the 3x3 one: its im2col matrix, built beforehand, times
  [27, O]; FULLY_CONNECTED: [1, 1024] x [1024, 1000]), nothing else;
- ``ort``: onnxruntime's time for the same node (its profiler's per-node
  durations of the ONNX form of the model; Conv and Clip fused by its graph
  optimizations).

The totals line adds the executor's time outside the kernels (``control``)
and the whole runs' medians. Timers cost ~0.1 us per call.

Usage: python bench/mobilenet_layers.py [--rounds N] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from nnhal.driver.executor import compile_model
from nnhal.driver.executor.model import CompiledModel
from nnhal.tools import bench_threads
from nnhal.tools.bench_models import mobilenet_f32

from nnhal.types import OperationType


def _timed_model(compiled, samples: dict, inputs_seen: dict):
    """The model again with every kernel timed into ``samples[location]`` (a list per run)."""
    plans = {}
    for number, plan in compiled.plans.items():
        steps = []
        for step in plan.steps:
            if step.kind.value != "operation" or step.late is not None:
                steps.append(step)
                continue
            key = step.location
            samples[key] = []

            def timed(*args, _k=step.kernel, _s=samples[key], _key=key):
                inputs_seen.setdefault(_key, args)
                t0 = time.perf_counter_ns()
                out = _k(*args)
                _s.append(time.perf_counter_ns() - t0)
                return out

            steps.append(replace(step, kernel=timed))
        plans[number] = replace(plan, steps=steps)
    return CompiledModel(compiled.model, plans, specialize=False)


def _gemm_for(args, kind: str):
    """A closure doing the layer's pure GEMM on its recorded input, or None."""
    if kind == "conv":
        x, w = args[0], args[1]
        o, kh, kw, c = w.shape
        if kh == kw == 1:
            a = np.ascontiguousarray(x.reshape(-1, c))
        else:  # the stem: its im2col, built once here
            from numpy.lib.stride_tricks import sliding_window_view

            xp = np.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0)))  # SAME, stride 2 on 224
            v = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::2, ::2]
            a = np.ascontiguousarray(v.transpose(0, 1, 2, 4, 5, 3).reshape(-1, kh * kw * c))
        b = w.reshape(o, -1).T
    elif kind == "fc":
        a, b = np.ascontiguousarray(args[0]), args[1].T
    else:
        return None
    out = np.empty((a.shape[0], b.shape[1]), np.float32)
    return lambda: np.matmul(a, b, out=out)


def _ort_profile(case, threads: int, runs: int) -> tuple[dict, float]:
    """Per-node median microseconds of onnxruntime (by node order) and the run median (ms)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess = ort.InferenceSession(case.onnx, opts, providers=["CPUExecutionProvider"])
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, case.feed)
        walls.append((time.perf_counter() - t0) * 1e3)
    path = sess.end_profiling()
    events = json.loads(Path(path).read_text())
    per: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per.setdefault(e["name"][: -len("_kernel_time")], []).append(e["dur"])
    return {k: statistics.median(v) for k, v in per.items()}, statistics.median(walls)


def _short(location: str) -> str:
    """``CONV_2D (subgraph 0, operation 12)`` -> ``12 CONV_2D``."""
    name, _, rest = location.partition(" (")
    return f"{rest.rsplit(' ', 1)[-1].rstrip(')'):>2} {name}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    bench_threads.apply(args.threads)
    threads = args.threads
    case = mobilenet_f32()
    compiled = compile_model(case.model)
    samples: dict[str, list[int]] = {}
    seen: dict[str, tuple] = {}
    timed = _timed_model(compiled, samples, seen)
    timed.run(case.inputs)
    ops = [op for op in case.model.main.operations]
    keys = list(samples)
    kinds = {}
    for key, op in zip(keys, ops):
        name = OperationType(op.type).name
        kinds[key] = "conv" if name == "CONV_2D" else "fc" if name == "FULLY_CONNECTED" else name
    gemms = {k: _gemm_for(seen[k], kinds[k]) for k in keys}
    gemm_samples: dict[str, list[int]] = {k: [] for k in keys}
    whole = []
    for _ in range(args.rounds):
        t0 = time.perf_counter_ns()
        compiled.run(case.inputs)
        whole.append(time.perf_counter_ns() - t0)
        timed.run(case.inputs)
        for k, g in gemms.items():
            if g is not None:
                t0 = time.perf_counter_ns()
                g()
                gemm_samples[k].append(time.perf_counter_ns() - t0)
    ort_nodes, ort_ms = _ort_profile(case, max(threads, 1), args.rounds)
    # onnxruntime's node of each operation: the fused convolution a<k>, then pool, Gemm
    names = [f"a{i}_nchwc" for i in range(27)] + ["pool_nchwc", None, "Gemm_56"]
    ort_of = {k: ort_nodes.pop(n, 0.0) if n else 0.0 for k, n in zip(keys, names)}
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds; threads {args.threads}")
    print(
        f"{'operation':<34} {'nnhal us':>9} {'gemm us':>8} {'over':>7} {'ort us':>8} {'ratio':>6}"
    )
    tot = {"nnhal": 0.0, "gemm": 0.0, "ort": 0.0}
    for k in keys:
        ours = statistics.median(samples[k][1:]) / 1e3
        g = statistics.median(gemm_samples[k]) / 1e3 if gemm_samples[k] else 0.0
        theirs = ort_of[k]
        tot["nnhal"] += ours
        tot["gemm"] += g
        tot["ort"] += theirs
        ratio = f"{ours / theirs:5.2f}x" if theirs else ""
        print(f"{_short(k):<34} {ours:9.1f} {g:8.1f} {ours - g:7.1f} {theirs:8.1f} {ratio:>6}")
    print(
        f"{'sum of operations':<34} {tot['nnhal']:9.1f} {tot['gemm']:8.1f} "
        f"{tot['nnhal'] - tot['gemm']:7.1f} {tot['ort']:8.1f} {tot['nnhal'] / tot['ort']:5.2f}x"
    )
    other = sum(ort_nodes.values())
    print(f"onnxruntime's other nodes (layout reorders, flatten) {other:.1f} us")
    run_ms = statistics.median(whole) / 1e6
    print(f"whole run (untimed) nnhal {run_ms:.2f} ms, onnxruntime {ort_ms:.2f} ms "
          f"(profiling on), ratio {run_ms / ort_ms:.2f}x; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

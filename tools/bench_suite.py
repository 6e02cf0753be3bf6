"""``nnhal bench --suite control-flow``: every workload, every mode, peers side by side.

For each workload (``nnhal.tools.bench_workloads``) and each trip-count parameter,
every way -- the execution modes of ``nnhal.tools.bench_modes``, the numpy
equivalent, and onnxruntime when installed (``nnhal.tools.bench_onnx``) -- runs
``warmup`` times first (default 2: a model's first execution is interpreted, its
second generates the code the rounds run), its outputs checked against the numpy
equivalent, then in interleaved rounds (``nnhal.tools.bench_measure``). Per way: latency statistics
per parameter, and the per-iteration cost and fixed cost per call from the
two-point fit over the iterations actually run. Per workload: prepare times
(in-process, over gRPC, from the compilation cache when the device asks for
cache files; onnxruntime session creation), the driver's Timing of one
measured execution, and the per-operation profile (``nnhal.tools.bench_profile``).
Transport per call is ``grpc - prepared`` (medians at the largest parameter).
"""

from __future__ import annotations

import csv
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from nnhal.tools.bench_measure import Stats, forget_preparations, run_rounds, two_point_fit
from nnhal.tools.bench_modes import MODES, Harness
from nnhal.tools.bench_threads import threads_line
from nnhal.tools.bench_workloads import Workload

from nnhal._client_io import extension_output_dtypes
from nnhal.errors import HalError


def _median_time(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(times)


def _prepare_times(harness: Harness, w: Workload, peer_session) -> dict:
    out: dict[str, Any] = {}
    device = harness.device

    def first() -> None:  # a model's first preparation: nothing kept from earlier ones
        forget_preparations(device)
        t0 = time.perf_counter_ns()
        device.prepareModel_1_3(w.model)
        return (time.perf_counter_ns() - t0) / 1e3

    out["in_process_first_us"] = statistics.median(first() for _ in range(3))
    device.prepareModel_1_3(w.model)  # "again": the same model prepared once before
    out["in_process_us"] = _median_time(lambda: device.prepareModel_1_3(w.model))
    if harness.client is not None:
        client = harness.client

        def remote():
            client.prepareModel_1_3(w.model).release()

        out["grpc_us"] = _median_time(remote)
        needed = tuple(client.getNumberOfCacheFilesNeeded())
        if needed == (0, 0):
            out["from_cache"] = "skipped: the device needs no cache files (0, 0)"
        else:
            with tempfile.TemporaryDirectory(prefix="nnhal-bench-cache-") as tmp:
                mc = [[os.path.join(tmp, f"m{k}")] for k in range(needed[0])]
                dc = [[os.path.join(tmp, f"d{k}")] for k in range(needed[1])]
                for handle in mc + dc:  # the HAL hands the driver open files
                    Path(handle[0]).touch()
                token = bytes(range(32))
                try:
                    client.prepareModel_1_3(
                        w.model, modelCache=mc, dataCache=dc, token=token
                    ).release()

                    def cached():
                        client.prepareModelFromCache_1_3(mc, dc, token, model=w.model).release()

                    out["from_cache_us"] = _median_time(cached)
                except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                    out["from_cache"] = f"failed: {exc}"
    else:
        out["from_cache"] = "skipped: needs a gRPC mode (grpc, grpc-shm or burst)"
    if peer_session is not None:
        out["onnxruntime_session_us"] = _median_time(peer_session)
    return out


def run_suite(
    workloads: list[Workload],
    *,
    modes: tuple[str, ...] = MODES,
    trips: list[int] | None = None,
    rounds: int = 5,
    min_time: float | None = None,
    warmup: int = 2,
    loop_timeout_ms: float | None = None,
    deadline_ms: float | None = None,
    peers: bool = True,
    profile_ops: bool = True,
    progress: bool = True,
    device_profile: str | None = None,
    device_options: dict[str, Any] | None = None,
) -> dict:
    """Run the suite; the JSON document (``ok`` false when any output disagreed).
    ``device_options``: ``Device(...)`` keywords (op packages, ``cli_oppkg.local_options``)."""
    from nnhal.tools import bench_onnx
    from nnhal.tools.bench_profile import profile_operations

    ort_skip = bench_onnx.available() if peers else "peers off (--no-peers)"
    lt_ns = None if loop_timeout_ms is None else int(loop_timeout_ms * 1e6)
    doc: dict[str, Any] = {
        "suite": "control-flow",
        "modes": list(modes),
        "rounds": rounds,
        "min_time_s": min_time,
        "warmup": warmup,
        "loop_timeout_ms": loop_timeout_ms,
        "deadline_ms": deadline_ms,
        "environment": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
        },
        "onnxruntime": ort_skip or "used",
        "threads": threads_line(),
        "workloads": [],
        "ok": True,
    }
    bar = None
    if progress:
        from tqdm import tqdm

        total = sum(len(trips or w.trips) for w in workloads)
        bar = tqdm(total=total, desc="bench", unit="case", file=sys.stderr, leave=False)
    with Harness(
        modes,
        loop_timeout_ns=lt_ns,
        deadline_ms=deadline_ms,
        profile=device_profile,
        device_options=device_options,
    ) as h:
        for w in workloads:
            entry = _run_workload(h, w, trips or list(w.trips), rounds, min_time, warmup, ort_skip)
            entry["timing"] = None
            params = trips or list(w.trips)
            inputs = w.inputs(params[-1])
            expected = w.numpy(inputs) if w.numpy is not None else None
            shapes = _output_shapes(w, inputs, expected)
            try:
                dtypes = None if expected is None else extension_output_dtypes(w.model, expected)
                entry["timing"] = h.timing(w.model, inputs, shapes, dtypes)
            except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                entry["timing"] = f"failed: {exc}"
            if profile_ops:
                entry["profile"] = profile_operations(
                    w.model,
                    w.inputs(params[0]),
                    loop_timeout_ns=h.loop_timeout_ns,
                    compile=lambda m: h.compile(m, specialize=False),
                )
            doc["workloads"].append(entry)
            doc["ok"] = doc["ok"] and entry["ok"]
            if bar is not None:
                bar.update(len(params))
    if bar is not None:
        bar.close()
    return doc


def _output_shapes(w: Workload, inputs, expected) -> list | None:
    if expected is None:
        return None
    return [None if e is None else tuple(np.shape(e)) for e in expected]


def _run_workload(h, w: Workload, params, rounds, min_time, warmup, ort_skip) -> dict:
    from nnhal.tools import bench_onnx

    peer = session = None
    entry: dict[str, Any] = {
        "name": w.name,
        "title": w.title,
        "cases": [],
        "errors": [],
        "ok": True,
    }
    if ort_skip is None:
        builder = bench_onnx.BUILDERS.get(w.name)
        if "onnx_peer" in w.extra:  # a user's ONNX file (--model MODEL.onnx) is its own peer
            builder = lambda extra: extra["onnx_peer"]
        if builder is None:
            entry["onnxruntime"] = f"no ONNX model for {w.name} yet"
        else:
            peer = builder(w.extra)
            session = bench_onnx.session(peer)
    entry["prepare"] = _prepare_times(
        h, w, None if peer is None else (lambda: bench_onnx.session(peer))
    )
    points: dict[str, list[tuple[int, float]]] = {}
    noise: dict[str, dict[int, float]] = {}  # way -> iterations -> p90 - p10 (µs)
    medians: dict[str, float] = {}
    for param in params:
        inputs = w.inputs(param)
        expected = w.numpy(inputs) if w.numpy is not None else None
        dtypes = None if expected is None else extension_output_dtypes(w.model, expected)
        ways = h.runners(w.model, inputs, _output_shapes(w, inputs, expected), dtypes)
        if w.numpy is not None and w.timed_reference:
            ways["numpy"] = lambda inputs=inputs: w.numpy(inputs)
        if session is not None:
            ways["onnxruntime"] = bench_onnx.runner(peer, session, inputs)
        for way, fn in list(ways.items()):  # a way that fails (a deadline...) is reported
            try:
                fn()
            except HalError as exc:
                del ways[way]
                entry["errors"].append({"way": way, "param": param, "error": str(exc)})
                entry["ok"] = False
        samples, first = run_rounds(ways, rounds=rounds, warmup=warmup, min_time=min_time)
        for way, values in samples.items():
            outs = first[way]
            problem = w.check(inputs, outs, expected)
            try:
                iterations = w.iterations(inputs, outs)
            except Exception:  # noqa: BLE001  (a peer without the counter output)
                iterations = w.iterations(inputs, expected) if expected is not None else 0
            stats = Stats.of(values)
            entry["cases"].append(
                {
                    "way": way,
                    "param": param,
                    "iterations": iterations,
                    "stats": stats.as_dict(),
                    "agree": problem is None,
                    "problem": problem,
                }
            )
            entry["ok"] = entry["ok"] and problem is None
            points.setdefault(way, []).append((iterations or 0, stats.p50))
            noise.setdefault(way, {})[iterations or 0] = stats.p90 - stats.p10
            medians[way] = stats.p50
    entry["fit"] = {}
    for way, pts in points.items():
        fit = two_point_fit(pts, noise.get(way))
        entry["fit"][way] = None if fit is None else fit.as_dict()
    if "grpc" in medians and "prepared" in medians:
        entry["transport_us"] = medians["grpc"] - medians["prepared"]
    return entry


# ---------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------


def print_table(doc: dict, compare: bool, out=None) -> None:
    out = out or sys.stdout
    print(
        f"control-flow suite: median of {doc['rounds']} interleaved rounds"
        + (f" (at least {doc['min_time_s']} s)" if doc["min_time_s"] else "")
        + "; per-iteration cost from the two-point fit over trip counts",
        file=out,
    )
    print(f"  {doc.get('threads') or threads_line()}", file=out)
    if isinstance(doc["onnxruntime"], str) and doc["onnxruntime"] != "used":
        print(f"  ({doc['onnxruntime']})", file=out)
    for w in doc["workloads"]:
        print(f"\n{w['name']}: {w['title']}", file=out)
        head = f"  {'way':<12} {'µs/iter':>9} {'fixed µs':>9} {'p50 µs':>10} {'p99 µs':>10}"
        if compare:
            head += f" {'vs ort':>7} {'vs numpy':>8}"
        print(head + "  outputs", file=out)
        last = {c["way"]: c for c in w["cases"] if c["param"] == w["cases"][-1]["param"]}
        noisy: list[str] = []
        fits = w["fit"]
        ref_ort = _measured(fits.get("onnxruntime"))
        ref_np = _measured(fits.get("numpy"))
        for way, case in last.items():
            fit = fits.get(way) or {}
            per = _measured(fit)
            if fit.get("noisy"):  # the two points differ by less than their scatter
                costs = f"{'noisy':>9} {'-':>9}"
                noisy.append(way)
            else:
                costs = f"{_f(per):>9} {_f(fit.get('fixed_us')):>9}"
            row = (
                f"  {way:<12} {costs} "
                f"{case['stats']['p50']:>10.1f} {case['stats']['p99']:>10.1f}"
            )
            if compare:
                row += f" {_ratio(per, ref_ort):>7} {_ratio(per, ref_np):>8}"
            agree = all(c["agree"] for c in w["cases"] if c["way"] == way)
            bad = [c["problem"] for c in w["cases"] if c["way"] == way and not c["agree"]]
            print(row + ("  agree" if agree else f"  DISAGREE: {bad[0]}"), file=out)
        if noisy:
            print(
                f"  noisy: {', '.join(noisy)}: the rise between the two trip counts is within "
                "the samples' scatter (p90 - p10): no per-iteration cost or ratio (more "
                "--rounds, or larger --trips)",
                file=out,
            )
        for err in w.get("errors", []):
            print(f"  {err['way']:<12} (n = {err['param']}) ERROR: {err['error']}", file=out)
        p = w["prepare"]
        if "in_process_first_us" in p:
            first, again = p["in_process_first_us"] / 1e3, p["in_process_us"] / 1e3
            parts = [f"in-process first {first:.2f} ms, again {again:.2f} ms"]
        else:
            parts = [f"in-process {p['in_process_us'] / 1e3:.2f} ms"]
        if "grpc_us" in p:
            parts.append(f"gRPC {p['grpc_us'] / 1e3:.2f} ms")
        if "from_cache_us" in p:
            parts.append(f"from cache {p['from_cache_us'] / 1e3:.2f} ms")
        elif "from_cache" in p:
            parts.append(p["from_cache"])
        if "onnxruntime_session_us" in p:
            session = p["onnxruntime_session_us"]
            ratio = f"again {p['in_process_us'] / session:.2f}x"
            if "in_process_first_us" in p:
                ratio = f"first {p['in_process_first_us'] / session:.2f}x, {ratio}"
            parts.append(f"onnxruntime session {session / 1e3:.2f} ms "
                         f"(prepare/session: {ratio})")  # fmt: skip
        print("  prepare: " + ", ".join(parts), file=out)
        if isinstance(w.get("timing"), dict):
            t = w["timing"]
            print(
                f"  driver Timing: timeOnDevice {t['timeOnDevice']} µs, "
                f"timeInDriver {t['timeInDriver']} µs",
                file=out,
            )
        if "transport_us" in w:
            print(f"  transport (grpc - prepared, per call): {w['transport_us']:.1f} µs", file=out)
        prof = w.get("profile")
        if prof:
            roles = ", ".join(f"{k} {v:.1f}" for k, v in sorted(prof["roles_us"].items()))
            tops = "; ".join(
                f"{o['operation'].split(' (')[0]} {o['per_call_us']:.2f} µs x{o['calls']}"
                for o in prof["operations"][:3]
            )
            print(f"  profile (generic, µs): {roles}; top: {tops}", file=out)
    out.flush()


def _measured(fit: dict | None) -> float | None:
    """A fit's per-iteration cost, None when there is none or it is noise."""
    if not fit or fit.get("noisy"):
        return None
    return fit.get("per_iteration_us")


def _f(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ratio(value, ref) -> str:
    if value is None or not ref or ref <= 0:
        return "-"
    return f"{value / ref:.2f}x"


def write_json(doc: dict, path: str) -> None:
    Path(path).write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")


CSV_FIELDS = ["workload", "way", "param", "iterations", "agree"] + [
    "n", "p10", "p50", "p90", "p95", "p99", "min", "max", "mean", "stdev", "spread",
    "per_iteration_us", "fixed_us", "fit_noisy",
]  # fmt: skip


def write_csv(doc: dict, path: str) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for w in doc["workloads"]:
            for c in w["cases"]:
                fit = w["fit"].get(c["way"]) or {}
                writer.writerow(
                    {
                        "workload": w["name"],
                        "way": c["way"],
                        "param": c["param"],
                        "iterations": c["iterations"],
                        "agree": c["agree"],
                        **c["stats"],
                        "per_iteration_us": fit.get("per_iteration_us"),
                        "fixed_us": fit.get("fixed_us"),
                        "fit_noisy": fit.get("noisy"),
                    }
                )

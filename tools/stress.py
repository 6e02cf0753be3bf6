"""The engine of ``nnhal stress``: many client processes against one server, then a leak check.

``run_stress(StressOptions(...))`` does, in order:

1. without an address, starts its own ``nnhal serve`` subprocess on an ephemeral
   loopback port (stopped at the end);
2. a warm-up: as many concurrent slow executions as the run can ever have calls in
   flight (so that the server's gRPC worker pool has grown to its final size), then a
   round in which every client does every kind of action ``warmup`` times (lazy
   allocations: compiled kernels, caches, the call trace ring);
3. ``before`` = the server's ``getResourceUsage`` once it is idle;
4. the measured round: ``clients`` spawned processes (``nnhal.tools.stress_client``), each
   with its own channel, each doing ``executions`` actions or until ``duration``
   seconds have passed, whichever comes first;
5. ``after`` = ``getResourceUsage`` once the figures have settled (polled for up to
   ``settle`` seconds: closed connections and finished fenced executions are
   released asynchronously).

The verdict (``report["ok"]``) fails when any action ended with an outcome its kind
does not allow (``nnhal.tools.stress_client.KINDS``), when a client could not run, or when
``after`` holds more than ``before`` of threads (beside the server's call pool, which
grows with the calls that overlap up to its maximum and never shrinks), open files, shared-memory mappings or
segments, live objects of any device, fenced executions still active or executions
in flight (fewer is no leak: something that existed before the run may be gone). Resident memory is reported with its delta and fails the run only when it
grew by more than ``max_rss_growth_mb`` (default 64 MiB): freed Python memory is not
always given back to the system, so a small growth is no leak, while a leak of even
one small tensor per call would pass the limit in a long run.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from nnhal.tools.stress_client import DEFAULT_WEIGHTS, KINDS, client_main, init_worker

MIB = 1024 * 1024


@dataclass
class StressOptions:
    address: str | None = None  # None: start an own `nnhal serve`
    clients: int = 4
    executions: int = 200  # per client; 0 = until the duration ends
    duration: float | None = None  # seconds; None = no time bound
    seed: int = 0
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    warmup: int = 2  # actions of each kind per client in the warm-up round
    settle: float = 20.0  # seconds to wait for the server's figures to come back
    max_rss_growth_mb: float = 64.0
    profile: str | None = None  # profile of the own server
    device: str = ""  # the device the clients use (default: the server's first)
    call_timeout: float = 60.0  # gRPC deadline of every client call (a burst: its stream)
    serve_args: tuple[str, ...] = ()  # more `nnhal serve` options for the own server


class StressError(Exception):
    """The run could not be made (no server, bad options); not a finding about the server."""


# ---------------------------------------------------------------------------
# The own server
# ---------------------------------------------------------------------------

_SERVING = re.compile(r"serving device .* on (\S+)\s*$")


class OwnServer:
    """``nnhal serve`` in a subprocess on 127.0.0.1:0; ``address`` once it listens."""

    def __init__(self, profile: str | None, extra: tuple[str, ...] = ()) -> None:
        cmd = [sys.executable, "-m", "nnhal.tools.cli", "serve", "--address", "127.0.0.1:0"]
        if profile:
            cmd += ["--profile", profile]
        cmd += list(extra)
        env = dict(os.environ, GRPC_VERBOSITY=os.environ.get("GRPC_VERBOSITY", "ERROR"))
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        match = _SERVING.search(line)
        if match is None:
            self.stop()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise StressError(f"`nnhal serve` did not start: {(line + err).strip()[-2000:]}")
        self.address = match.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


# ---------------------------------------------------------------------------
# Resources
# ---------------------------------------------------------------------------


#: the server's call pool (``driver/server.py``): it grows with the calls that overlap,
#: up to its fixed maximum, and never shrinks, so its threads are no leak; a loaded
#: machine makes calls overlap that did not on an idle one
_CALL_POOL = "nnhal-rpc_*"


def _threads_beside_the_call_pool(usage: dict[str, Any]) -> int | None:
    threads = usage.get("threads")
    if threads is None:
        return None
    return threads - (usage.get("python_threads") or {}).get(_CALL_POOL, 0)


def checked_figures(usage: dict[str, Any]) -> dict[str, Any]:
    """The figures that must be the same before and after (None = unknown on this OS)."""
    figures = {
        "threads": _threads_beside_the_call_pool(usage),
        "open_files": usage.get("open_files"),
        "shm_mappings": usage.get("shm_mappings"),
        "shm_segments": usage.get("shm_segments"),
    }
    sessions = usage.get("sessions")
    if sessions is not None:
        # a lease that expired during the run: a live client was taken for dead
        for key in ("open", "running", "expired"):
            figures[f"sessions.{key}"] = sessions.get(key)
    for name, dev in sorted(usage.get("devices", {}).items()):
        for kind, count in sorted(dev.get("objects", {}).items()):
            figures[f"{name}.{kind}"] = count
        figures[f"{name}.fenced_active"] = dev.get("fenced_active")
        figures[f"{name}.executions_in_flight"] = dev.get("executions_in_flight")
    return figures


def compare(before: dict[str, Any], after: dict[str, Any], max_rss_growth_mb: float) -> list[str]:
    """What differs between two getResourceUsage answers (empty: no leak found)."""
    problems = []
    b, a = checked_figures(before), checked_figures(after)
    for key in sorted(set(b) | set(a)):
        # only a growth is a leak: a descriptor or thread that existed before the run
        # (another client's connection, a pool thread) may well be gone after it
        was, now = b.get(key), a.get(key)
        if was is not None and now is not None and now > was:
            problems.append(f"{key}: {was} before, {now} after")
    rss_b, rss_a = before.get("rss_bytes"), after.get("rss_bytes")
    if rss_b is not None and rss_a is not None and rss_a - rss_b > max_rss_growth_mb * MIB:
        problems.append(
            f"resident memory grew by {(rss_a - rss_b) / MIB:.1f} MiB "
            f"(limit {max_rss_growth_mb:g} MiB)"
        )
    return problems


def _idle(usage: dict[str, Any]) -> bool:
    """No execution running, no client session open (its reaper thread gone too)."""
    sessions = usage.get("sessions") or {}
    if sessions.get("open") or sessions.get("running") or sessions.get("reaper"):
        return False
    return all(
        not d.get("executions_in_flight") and not d.get("fenced_active")
        for d in usage.get("devices", {}).values()
    )


def settled_usage(control: Any, settle: float, like: dict[str, Any] | None = None) -> dict:
    """getResourceUsage once the server is idle and, given ``like``, its checked figures
    equal those of ``like`` -- or the last answer when ``settle`` seconds have passed."""
    end = time.monotonic() + settle
    while True:
        usage = control.resource_usage()
        done = _idle(usage) and (like is None or checked_figures(usage) == checked_figures(like))
        if done or time.monotonic() >= end:
            return usage
        time.sleep(0.2)


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------


def _saturate(address: str, concurrency: int) -> None:
    """``concurrency`` calls in flight at once, so that the server's worker pool reaches
    the size the run can need (it grows on demand and never shrinks): waitFence calls on
    one unsignalled client fence, which hold a worker each without using the CPU, so
    that they all arrive while the others still wait."""
    from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
    from nnhal.client import _rpc, connect
    from nnhal.control import create_fence, wait_fence

    with connect(address, timeout=30.0) as device:
        fence = create_fence(device)
        try:
            with ThreadPoolExecutor(concurrency) as pool:
                waits = [pool.submit(wait_fence, device, fence, 1.5) for _ in range(concurrency)]
                for future in waits:
                    future.result()
        finally:
            _rpc(device.fence_stub.release, ppb.ReleaseRequest(id=fence))


def _tasks(options: StressOptions, address: str, warmup: bool) -> list[dict[str, Any]]:
    weights = {k: w for k, w in options.weights.items() if w > 0}
    per_client = len(weights) * options.warmup if warmup else options.executions
    return [
        {
            "address": address,
            "index": i,
            "seed": options.seed + (10_000 if warmup else 0),
            "weights": weights,
            "executions": per_client,
            "duration": None if warmup else options.duration,
            "cover": warmup,
            "device": options.device,
            "call_timeout": options.call_timeout,
        }
        for i in range(options.clients)
    ]


def _round(
    pool: ProcessPoolExecutor,
    tasks: list[dict[str, Any]],
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Run one task per client process; a process that died is reported, not waited for.

    ``progress(clients done)`` is called about once a second while the round runs.
    """
    futures = [pool.submit(client_main, task) for task in tasks]
    if progress is not None:
        pending = set(futures)
        while pending:
            progress(len(futures) - len(pending))
            _done, pending = wait(pending, timeout=1.0)
        progress(len(futures))
    results = []
    for task, future in zip(tasks, futures):
        try:
            results.append(future.result())
        except Exception as exc:  # noqa: BLE001 - BrokenProcessPool, or a bug in the client
            error = f"client {task['index']}: its process failed: {type(exc).__name__}: {exc}"
            results.append({"index": task["index"], "kinds": {}, "error": error, "died": True})
    return results


def _merge(results: list[dict[str, Any]]) -> tuple[dict[str, dict], list[str]]:
    kinds: dict[str, dict[str, Any]] = {}
    errors = [r["error"] for r in results if r.get("error")]
    for r in results:
        for kind, entry in r["kinds"].items():
            into = kinds.setdefault(kind, {"latencies": [], "outcomes": {}, "unexpected": []})
            into["latencies"].extend(entry["latencies"])
            for got, n in entry["outcomes"].items():
                into["outcomes"][got] = into["outcomes"].get(got, 0) + n
            into["unexpected"].extend(entry["unexpected"])
    return kinds, errors


def _kind_report(kind: str, entry: dict[str, Any], wall: float) -> dict[str, Any]:
    lat = np.array(entry["latencies"]) * 1000
    unexpected = sum(n for got, n in entry["outcomes"].items() if got not in KINDS[kind])
    return {
        "calls": int(lat.size),
        "calls_per_s": lat.size / wall if wall > 0 else 0.0,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "outcomes": dict(sorted(entry["outcomes"].items())),
        "expected": sorted(KINDS[kind]),
        "unexpected": unexpected,
        "unexpected_samples": entry["unexpected"][:5],
    }


def check_options(options: StressOptions) -> None:
    if options.clients < 1:
        raise StressError("--clients must be at least 1")
    if options.executions < 0:
        raise StressError("--executions must be >= 0")
    if options.duration is not None and options.duration <= 0:
        raise StressError("--duration must be > 0")
    if options.call_timeout <= 0:
        raise StressError("--call-timeout must be > 0")
    if not options.executions and options.duration is None:
        raise StressError("give --executions or --duration (or both): the run needs an end")
    unknown = sorted(set(options.weights) - set(KINDS))
    if unknown:
        raise StressError(f"unknown kinds {unknown}; the kinds are {sorted(KINDS)}")
    if any(w < 0 for w in options.weights.values()) or not any(options.weights.values()):
        raise StressError("kind weights must be >= 0, and one at least > 0")


def run_stress(
    options: StressOptions, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run it all; the report (see ``format_report``); ``report["ok"]`` is the verdict.

    ``progress(text)``: told what the run is doing (the phase; in the measured round,
    the seconds gone and the clients done), often -- it throttles itself.
    """
    from nnhal.control import Control

    say = progress or (lambda text: None)
    check_options(options)
    if options.address is None:
        say("starting its own server")
    own = OwnServer(options.profile, options.serve_args) if options.address is None else None
    address = own.address if own is not None else options.address
    ctx = multiprocessing.get_context("spawn")
    try:  # from here on, the own server is stopped whatever happens
        with Control(address) as control:
            try:
                devices = control.list_devices()
            except Exception as exc:  # noqa: BLE001 - e.g. nothing listens there
                raise StressError(f"no nnhal server answers at {address}: {exc}") from None
            names = [d["name"] for d in devices]
            if options.device and options.device not in names:
                raise StressError(f"no device {options.device!r} at {address} (it has {names})")
            barrier = ctx.Barrier(options.clients)
            with ProcessPoolExecutor(
                options.clients, mp_context=ctx, initializer=init_worker, initargs=(barrier,)
            ) as pool:
                say("warm-up")
                _saturate(address, 2 * options.clients + 2)
                warm = _round(pool, _tasks(options, address, True))
                warm_kinds, warm_errors = _merge(warm)
                if any(r.get("died") for r in warm):
                    raise StressError(f"a client process died in the warm-up: {warm_errors}")
                say("resources before")
                before = settled_usage(control, options.settle)
                t0 = time.monotonic()
                bound = f" of {options.duration:g}" if options.duration else ""

                def measured(done: int) -> None:
                    say(
                        f"measured round: {time.monotonic() - t0:.0f} s{bound}, "
                        f"{done}/{options.clients} clients done"
                    )

                results = _round(pool, _tasks(options, address, False), measured)
                wall = time.monotonic() - t0
                say("resources after (waiting for them to settle)")
                t1 = time.monotonic()
                after = settled_usage(control, options.settle, like=before)
                settle_s = time.monotonic() - t1
    finally:
        if own is not None:
            own.stop()
    kinds, errors = _merge(results)
    per_kind = {k: _kind_report(k, kinds[k], wall) for k in KINDS if k in kinds}
    calls = sum(r["calls"] for r in per_kind.values())
    unexpected = sum(r["unexpected"] for r in per_kind.values())
    warm_unexpected = sum(
        n for k, e in warm_kinds.items() for got, n in e["outcomes"].items() if got not in KINDS[k]
    )
    leaks = compare(before, after, options.max_rss_growth_mb)
    rss_b, rss_a = before.get("rss_bytes"), after.get("rss_bytes")
    return {
        "ok": not (unexpected or warm_unexpected or errors or warm_errors or leaks),
        "address": address,
        "own_server": own is not None,
        "devices": [d["name"] for d in devices],
        "options": {
            "clients": options.clients,
            "executions": options.executions,
            "duration": options.duration,
            "seed": options.seed,
            "weights": {k: w for k, w in options.weights.items() if w > 0},
            "max_rss_growth_mb": options.max_rss_growth_mb,
        },
        "wall_s": wall,
        "calls": calls,
        "calls_per_s": calls / wall if wall > 0 else 0.0,
        "unexpected": unexpected,
        "warmup_unexpected": warm_unexpected,
        "client_errors": errors + warm_errors,
        "kinds": per_kind,
        "resources": {
            "before": before,
            "after": after,
            "rss_delta_bytes": None if rss_b is None or rss_a is None else rss_a - rss_b,
            "settled_after_s": settle_s,
            "problems": leaks,
        },
    }


# ---------------------------------------------------------------------------
# Human-readable report
# ---------------------------------------------------------------------------


def format_report(report: dict[str, Any]) -> str:
    o = report["options"]
    bound = f"{o['executions']} executions" if o["executions"] else "no count bound"
    if o["duration"]:
        bound += f", at most {o['duration']:g} s"
    server = "own `nnhal serve`" if report["own_server"] else "given server"
    lines = [
        (
            f"nnhal stress: {o['clients']} clients x {bound} (seed {o['seed']}) against "
            f"{report['address']} ({server}; devices {', '.join(report['devices'])})"
        ),
        "",
        f"{'kind':<17}{'calls':>7}{'calls/s':>9}{'p50 ms':>9}{'p99 ms':>9}  outcomes",
    ]
    for kind, r in report["kinds"].items():
        outcomes = ", ".join(f"{k} {n}" for k, n in r["outcomes"].items())
        flag = "" if not r["unexpected"] else f"  <- {r['unexpected']} UNEXPECTED"
        lines.append(
            f"{kind:<17}{r['calls']:>7}{r['calls_per_s']:>9.1f}{r['p50_ms']:>9.2f}"
            f"{r['p99_ms']:>9.2f}  {outcomes}{flag}"
        )
    lines.append(
        f"{'total':<17}{report['calls']:>7}{report['calls_per_s']:>9.1f}"
        f"   in {report['wall_s']:.1f} s"
    )
    for kind, r in report["kinds"].items():
        for sample in r["unexpected_samples"]:
            lines.append(f"  unexpected {kind}: {sample}")
    for error in report["client_errors"]:
        lines.append(f"  client error: {error}")
    if report["warmup_unexpected"]:
        lines.append(f"  {report['warmup_unexpected']} unexpected outcomes in the warm-up")
    res = report["resources"]
    b, a = checked_figures(res["before"]), checked_figures(res["after"])
    lines += [
        "",
        (
            f"{'server resources':<34}{'before':>12}{'after':>12}"
            f"   (after: {res['settled_after_s']:.1f} s after the run)"
        ),
    ]
    rss_b, rss_a = res["before"].get("rss_bytes"), res["after"].get("rss_bytes")
    if rss_b is not None and rss_a is not None:
        lines.append(
            f"{'resident memory (MiB)':<34}{rss_b / MIB:>12.1f}{rss_a / MIB:>12.1f}"
            f"   {(rss_a - rss_b) / MIB:+.1f} (limit +{o['max_rss_growth_mb']:g})"
        )
    for key in b:
        mark = "" if b[key] == a.get(key) else "   <- differs"
        lines.append(f"{key:<34}{_cell(b[key]):>12}{_cell(a.get(key)):>12}{mark}")
    if b["threads"] != a["threads"]:
        lines.append(f"  Python threads before: {res['before'].get('python_threads')}")
        lines.append(f"  Python threads after:  {res['after'].get('python_threads')}")
    lines.append("")
    if report["ok"]:
        lines.append("OK: every outcome as expected, the server's resources as before")
    else:
        why = [f"{report['unexpected']} unexpected outcomes"] if report["unexpected"] else []
        why += res["problems"]
        why += ["client errors"] if report["client_errors"] else []
        why += ["unexpected outcomes in the warm-up"] if report["warmup_unexpected"] else []
        lines.append("FAILED: " + "; ".join(why))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "unknown" if value is None else str(value)

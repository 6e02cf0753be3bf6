"""What the server process holds: memory, threads, files, shared memory, live objects.

``resource_usage(states)`` answers ``INnhalControl.getResourceUsage`` (as a dict the
control servicer turns into JSON). Leak checks such as ``nnhal stress`` compare two
answers taken when the server is idle:

- ``rss_bytes``: resident memory (``/proc/self/statm`` on Linux; elsewhere the peak
  from ``getrusage``, flagged by ``rss_kind``);
- ``threads``: OS threads of the process (``/proc/self/task``; elsewhere the Python
  threads) and ``python_threads`` by name prefix (``nnhal-rpc_*`` = gRPC workers, ...);
- ``open_files``: open file descriptors (``/proc/self/fd`` or ``/dev/fd``);
- ``shm_mappings`` / ``shm_segments``: mappings of ``/dev/shm`` files in
  ``/proc/self/maps`` and how many distinct segments they are (None = unknown, e.g.
  macOS, where POSIX shared memory has no file system view);
- ``sessions``: client sessions open, their executions running, leases expired so
  far, and whether the session reaper thread is alive;
- ``devices``: per device, the size of every object registry of its
  ``ServiceState`` (prepared models, buffers, sync fences, fenced-execution
  callbacks, and any registry added later), ``fenced_active`` (fenced executions whose
  fence has not signalled yet) and ``executions_in_flight`` (the device's running
  executions, as ``nnhal.driver.occupancy`` counts them for ``max_concurrent_executions``)
  and ``op_package_workers`` (its op-package worker processes, or None: each holds
  two pipe descriptors of this process).

Everything here is cheap (a few small /proc reads, one pass over the registries), so
the call can be made at any time, also under load.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from nnhal.driver._service_support import Registry
from nnhal.driver.fences import ACTIVE

REAPER_THREAD = "nnhal-session-reaper"  # nnhal.driver.sessions.SessionTable's thread

__all__ = ["device_usage", "process_usage", "resource_usage", "session_usage"]


def _rss() -> tuple[int | None, str]:
    try:
        with open("/proc/self/statm") as f:
            resident_pages = int(f.read().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE"), "current"
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # ru_maxrss is in bytes on macOS, in KiB elsewhere
        return (peak if sys.platform == "darwin" else peak * 1024), "peak"
    except (ImportError, OSError):
        return None, "unknown"


def _count_dir(path: str) -> int | None:
    try:
        return len(os.listdir(path))
    except OSError:
        return None


def _open_files() -> int | None:
    n = _count_dir("/proc/self/fd")
    if n is None:
        n = _count_dir("/dev/fd")
    # listing the directory opened one descriptor of its own
    return None if n is None else n - 1


_SHM_LINE = re.compile(r"\s(/dev/shm/\S+)")


def _shm() -> tuple[int | None, int | None]:
    try:
        with open("/proc/self/maps") as f:
            paths = [m.group(1) for m in map(_SHM_LINE.search, f) if m]
    except OSError:
        return None, None
    return len(paths), len(set(paths))


def _thread_names() -> dict[str, int]:
    """Python threads by name, numbers replaced by * (nnhal-rpc_3 -> nnhal-rpc_*)."""
    names = Counter(re.sub(r"\d+", "*", t.name) for t in threading.enumerate())
    return dict(sorted(names.items()))


def process_usage() -> dict[str, Any]:
    """The process-wide figures (see the module docstring)."""
    rss, rss_kind = _rss()
    os_threads = _count_dir("/proc/self/task")
    mappings, segments = _shm()
    return {
        "pid": os.getpid(),
        "rss_bytes": rss,
        "rss_kind": rss_kind,
        "threads": os_threads if os_threads is not None else threading.active_count(),
        "python_threads": _thread_names(),
        "open_files": _open_files(),
        "shm_mappings": mappings,
        "shm_segments": segments,
    }


def _running(state: Any) -> int | None:
    """Executions running on the device now (its ``nnhal.driver.occupancy.ExecutionSlots``: a
    fenced execution counts from its call until it ends)."""
    slots = getattr(state, "executions", None)
    return None if slots is None else slots.running


def device_usage(state: Any) -> dict[str, Any]:
    """Live objects of one device: every Registry of its ServiceState, by attribute name."""
    objects = {
        name: len(value) for name, value in vars(state).items() if isinstance(value, Registry)
    }
    return {
        "objects": dict(sorted(objects.items())),
        "fenced_active": sum(
            1 for r in state.fenced_executions.values() if r.fence.state == ACTIVE
        ),
        "executions_in_flight": _running(state),
        "op_package_workers": _workers(state),
    }


def _workers(state: Any) -> dict[str, int] | None:
    """The device's op-package worker pool (``nnhal.driver.op_packages.supervisor``): processes
    alive or starting, idle, busy, starting, restarting; None without one."""
    extensions = getattr(state.device, "extensions", None)
    runner = getattr(extensions, "runner", None)
    return None if runner is None else runner.stats()


def session_usage(states: Mapping[str, Any]) -> dict[str, Any] | None:
    """The server's client sessions (one table shared by its devices; ``nnhal.driver.sessions``):
    open, executions they run, leases expired so far, and whether the reaper thread (which
    ends some time after the last session) is still there."""
    table = next((getattr(s, "sessions", None) for s in states.values()), None)
    if table is None:
        return None
    return {
        "open": len(table),
        "running": table.running_count(),
        "expired": table.expired,
        "reaper": any(t.name == REAPER_THREAD for t in threading.enumerate()),
    }


def resource_usage(states: Mapping[str, Any]) -> dict[str, Any]:
    """The answer of getResourceUsage for a server whose devices are ``states``."""
    usage = process_usage()
    usage["sessions"] = session_usage(states)
    usage["devices"] = {name: device_usage(state) for name, state in states.items()}
    return usage

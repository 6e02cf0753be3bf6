"""The server's side of op-package worker processes (``nnhal.driver.op_packages.worker``).

- ``spawn``: start one (a fresh interpreter with two pipes) and wait for it;
- ``Worker``: its process, its pipe ends and the kernels it holds; ``kill``,
  ``stop``, ``reap_dead``;
- ``Processes``: every process of one pool (what a finalizer kills);
- ``ResultUnpickler``: what the server accepts back from a worker (numpy
  arrays, numpy scalars, plain containers: nothing that runs code here);
- ``kernel_ref``: how a worker finds a kernel function again.

The pool policy (which worker runs a call, timeouts, replacement) is
``nnhal.driver.op_packages.supervisor``.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from typing import Any

from nnhal.driver.op_packages.worker import (
    CACHE_SIZE,
    WireTimeout,
    command,
    read_message,
    send_message,
)

log = logging.getLogger("nnhal.op_packages")


_SAFE = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    *(
        (f"numpy.{core}.{mod}", name)
        for core in ("core", "_core")
        for mod, name in (
            ("numeric", "_frombuffer"),
            ("multiarray", "_reconstruct"),
            ("multiarray", "scalar"),
        )
    ),
    *(("builtins", n) for n in ("complex", "set", "frozenset", "bytearray", "slice", "range")),
}


class ResultUnpickler(pickle.Unpickler):
    """Unpickles what a kernel may return, and nothing that could run code here."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"the result holds a {module}.{name}; a kernel returns numpy arrays or numbers "
            "(one, or a tuple with one per output)"
        )


def kernel_ref(fn: Any) -> tuple | None:
    """How a worker finds ``fn``: ("file", path, module, qualname), ("module", module,
    qualname), or None when another process cannot name it."""
    module_name = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module_name or not qualname or "<" in qualname or module_name == "__main__":
        return None
    module = sys.modules.get(module_name)
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if module is None or obj is not fn:
        return None
    path = getattr(module, "__nnhal_kernel_file__", None)
    if path is not None:
        return ("file", path, module_name, qualname)
    return ("module", module_name, qualname)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class Worker:
    """One worker process and the two pipe ends the server holds."""

    def __init__(self, proc: subprocess.Popen, to_child: int, from_child: int) -> None:
        self.proc = proc
        self.pid = proc.pid
        # file objects own the descriptors (closed when dropped); I/O uses the numbers
        self._to = open(to_child, "wb", buffering=0)  # noqa: SIM115
        self._from = open(from_child, "rb", buffering=0)  # noqa: SIM115
        self.to_child = to_child
        self.from_child = from_child
        #: kernel ids this worker holds (as the worker's own cache: last CACHE_SIZE)
        self.known: OrderedDict[int, None] = OrderedDict()

    def remember(self, kid: int) -> None:
        self.known[kid] = None
        self.known.move_to_end(kid)
        while len(self.known) > CACHE_SIZE:
            self.known.popitem(last=False)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close_pipes(self) -> None:
        for f in (self._to, self._from):
            try:
                f.close()
            except OSError:
                pass

    def kill(self) -> int | None:
        """SIGKILL its process group (the worker and whatever its kernels started), reap,
        close the pipes; the exit status."""
        kill_group(self.proc)
        code = _reap(self.proc)
        self.close_pipes()
        return code

    def stop(self) -> None:
        """Close the request pipe (the worker exits on EOF); SIGKILL if it does not."""
        self.close_pipes()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
            _reap(self.proc)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the worker's process group (it leads one: ``spawn``), so processes a kernel
    forked go with it; the worker alone when the group cannot be signalled."""
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            return
        except (OSError, AttributeError):
            pass
    try:
        proc.kill()
    except OSError:
        pass


def _reap(proc: subprocess.Popen) -> int | None:
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # stuck in the kernel (uninterruptible I/O)
        log.error("op-package worker %d does not exit after SIGKILL", proc.pid)
        return None


class Processes:
    """Every worker process of one supervisor (what the finalizer and close() kill)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.procs: dict[int, subprocess.Popen] = {}
        self.closed = False
        self.owner = os.getpid()

    def add(self, proc: subprocess.Popen) -> bool:
        with self.lock:
            if self.closed:
                return False
            self.procs[proc.pid] = proc
            return True

    def remove(self, proc: subprocess.Popen) -> None:
        with self.lock:
            self.procs.pop(proc.pid, None)

    def kill_all(self) -> None:
        if os.getpid() != self.owner:
            return  # a forked copy of the server exiting: the workers are not its own
        with self.lock:
            self.closed = True
            procs = list(self.procs.values())
        for proc in procs:
            kill_group(proc)
        for proc in procs:
            _reap(proc)


#: (kind, length) of the replies a worker may send to a call
REPLIES = frozenset({("ok", 2), ("error", 3), ("unsendable", 2)})


class NotSent(Exception):
    """Arguments that pickle cannot carry (raised before anything was written)."""


def send_call(worker: Worker, message: tuple) -> None:
    try:
        send_message(worker.to_child, message)
    except OSError:
        raise
    except Exception as exc:  # pickling happens before the first write
        raise NotSent(f"{type(exc).__name__}: {exc}") from exc


def reap_dead(worker: Worker) -> int | None:
    """The exit status of a worker whose pipe closed (SIGKILL if it lingers)."""
    try:
        code = worker.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return worker.kill()
    worker.close_pipes()
    return code


def _widen(fd: int) -> None:
    """A 1 MiB pipe buffer (Linux; the default fs/pipe-max-size) instead of 64 KiB: a
    large tensor crosses in 16 times fewer wake-ups of the reader. Best effort."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass


def spawn(processes: Processes, start_timeout_s: float, memory_bytes: int = 0) -> Worker:
    """Start one worker and wait for its ``ready`` (raises RuntimeError saying why not).

    The worker leads a process group of its own (killed as a group) and limits its
    data memory to ``memory_bytes`` (0: no limit)."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    for fd in (req_w, rep_w):
        _widen(fd)
    try:
        proc = subprocess.Popen(
            command(sys.path, req_r, rep_w, memory_bytes),
            pass_fds=(req_r, rep_w),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except BaseException:
        for fd in (req_r, req_w, rep_r, rep_w):
            os.close(fd)
        raise
    os.close(req_r)
    os.close(rep_w)
    worker = Worker(proc, req_w, rep_r)
    if not processes.add(proc):
        worker.kill()
        raise RuntimeError("the pool was closed")
    try:
        hello = read_message(
            rep_r, time.monotonic_ns() + int(start_timeout_s * 1e9), ResultUnpickler
        )
        if hello != ("ready", proc.pid):
            raise RuntimeError(f"unexpected first message {hello!r}")
    except BaseException as exc:
        code = worker.kill()
        processes.remove(proc)
        if isinstance(exc, WireTimeout):
            raise RuntimeError(f"not ready within {start_timeout_s:.0f} s") from None
        if isinstance(exc, EOFError):
            raise RuntimeError(f"the worker exited at start ({describe_exit(code)})") from None
        raise
    return worker

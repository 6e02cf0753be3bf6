"""Op-package kernels in supervised worker processes (profile ``op_package_isolation``).

A custom kernel is user code: it may raise, never return, or kill its
process (``os._exit``, a segfault in an extension module). With
``op_package_isolation = "process"`` (the default) a device's op-package
kernels run in child processes (``nnhal.driver.op_packages.worker``) so none of
that can take the server down or hold a client past its deadline:

- each call waits at most ``min(execution deadline,
  op_package_kernel_timeout_ms)``; a kernel still running then has its
  worker killed (SIGKILL) and replaced by a fresh one, started in the
  background; the execution fails with MISSED_DEADLINE_TRANSIENT when its
  deadline passed, else GENERAL_FAILURE naming the operation and the limit;
- a kernel that raises gives GENERAL_FAILURE for that execution only, with
  the exception's type and message (no traceback crosses to the client);
  its worker stays;
- a worker that dies gives GENERAL_FAILURE and is replaced;
- a cancelled execution (its client went away: ``nnhal.driver.executor.model.Cancel``)
  stops waiting within ``_SLICE_S`` and its worker is replaced;
- while a replacement starts, ``status()`` (the device's getStatus) is
  BUSY; AVAILABLE once it is ready.

Concurrency: a pool of up to ``op_package_workers`` processes (default 2),
one kernel call at a time each; a call takes an idle worker, starts one when
the pool is not full, else waits for one (the wait counts against the
execution's deadline; without one it is bounded by the kernel limit plus a
worker start). Workers start on demand; the first when a model with
op-package kernels is prepared, so the first execution finds it warm.

A kernel is named to a worker by its module file and qualified name
(``runtime.import_file`` marks the modules it loads), the worker imports it
once and keeps the call's fixed keyword arguments (parameters, constant
scalars, ``operands``) so a call carries only its tensors. A kernel that
cannot be named that way (a lambda, a closure, a function of ``__main__``)
runs inline, with a warning in the log. Results may hold numpy arrays,
numbers, strings and containers only (a restricted unpickler: nothing a
worker sends can run code in the server).

Module-level code of kernel files still runs in the server when a package is
loaded (registration needs it); isolation covers the calls.

Here: the pool policy. Starting, killing and reaping one process, and what
may come back from it: ``processes``; the child and the wire: ``worker``.
"""

from __future__ import annotations

import itertools
import logging
import pickle
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from nnhal.driver.op_packages.processes import (
    REPLIES,
    NotSent,
    Processes,
    ResultUnpickler,
    Worker,
    describe_exit,
    kernel_ref,
    reap_dead,
    send_call,
    spawn,
)
from nnhal.driver.op_packages.worker import WireTimeout, read_message, wait_readable

from nnhal.errors import GeneralFailure, HalError, MissedDeadline
from nnhal.types import DeviceStatus

log = logging.getLogger("nnhal.op_packages")

DEFAULT_KERNEL_TIMEOUT_MS = 10_000
DEFAULT_WORKERS = 2
#: how long a worker may take to start (a fresh interpreter importing numpy, on a busy host)
START_TIMEOUT_S = 60.0
#: how often a waiting call reads its execution's deadline again (a cancel changes it)
_SLICE_S = 0.1


class KernelFault(Exception):
    """A kernel call that failed in (or with) its worker.

    The executor's generated code turns any exception with ``hal_error`` into
    that HAL error, prefixed with the step's location (``codegen._wrap``).
    """

    def __init__(self, text: str, *, deadline: bool = False) -> None:
        super().__init__(text)
        self.text = text
        self.deadline = deadline

    def hal_error(self, where: str) -> HalError:
        if self.deadline:
            return MissedDeadline(f"{where}: {self.text}", transient=True)
        return GeneralFailure(f"{where}: {self.text}")


# -- the pieces --------------------------------------------------------------


class RemoteKernel:
    """A bound kernel as the executor calls it: ``kernel(*tensors, **tensor_params)``."""

    __slots__ = ("__weakref__", "definition", "kid", "label", "supervisor")

    def __init__(self, supervisor: KernelSupervisor, kid: int, label: str, definition: tuple):
        self.supervisor = supervisor
        self.kid = kid
        self.label = label
        self.definition = definition

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.supervisor.call(self, args, kwargs)


# -- the supervisor ----------------------------------------------------------


class KernelSupervisor:
    """The worker pool of one device (thread-safe)."""

    def __init__(
        self,
        *,
        workers: int = DEFAULT_WORKERS,
        kernel_timeout_ms: int = DEFAULT_KERNEL_TIMEOUT_MS,
        name: str = "",
        memory_bytes: int = 0,
    ) -> None:
        if workers < 1 or kernel_timeout_ms <= 0:
            raise ValueError("workers must be >= 1 and kernel_timeout_ms > 0")
        self.max_workers = workers
        self.kernel_timeout_ms = kernel_timeout_ms
        self.memory_bytes = memory_bytes  # each worker's data-memory limit (0: none)
        self.name = name
        self._cond = threading.Condition()
        self._idle: list[Worker] = []
        self._slots = 0  # workers alive or starting
        self._starting = 0
        self._restarting = 0  # replacements of killed or dead workers under way
        self._failures = 0
        self._last_error = ""
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._ids = itertools.count(1)
        self._procs = Processes()
        self._warned: set[int] = set()
        # a device dropped without close() still leaves no process behind
        self._finalizer = weakref.finalize(self, self._procs.kill_all)

    # -- what the device asks ---------------------------------------------

    def status(self) -> DeviceStatus:
        """BUSY while a killed or dead worker is being replaced, else AVAILABLE."""
        with self._cond:
            return DeviceStatus.BUSY if self._restarting else DeviceStatus.AVAILABLE

    def stats(self) -> dict[str, int]:
        """Worker counts: ``slots`` (alive or starting), ``idle``, ``busy`` (running a
        kernel), ``starting`` and ``restarting`` (replacements among the starting)."""
        with self._cond:
            idle = len(self._idle)
            return {
                "slots": self._slots,
                "idle": idle,
                "busy": self._slots - self._starting - idle,
                "starting": self._starting,
                "restarting": self._restarting,
            }

    def pids(self) -> list[int]:
        """The worker processes alive now (starting ones included)."""
        with self._procs.lock:
            return sorted(pid for pid, p in self._procs.procs.items() if p.poll() is None)

    def prewarm(self) -> None:
        """Start a first worker in the background when there is none."""
        with self._cond:
            if self._slots == 0 and not self._closed:
                self._start_async(replacement=False)

    def close(self) -> None:
        """Stop every worker (running kernels are killed); later calls fail."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            threads = list(self._threads)
            self._cond.notify_all()
        for worker in idle:
            worker.stop()
            self._procs.remove(worker.proc)
        self._procs.kill_all()  # busy and starting ones: their threads see EOF
        for t in threads:
            t.join(timeout=15)

    # -- binding -------------------------------------------------------------

    def bind(self, fn: Callable, label: str, static_kwargs: dict[str, Any]) -> RemoteKernel | None:
        """A callable running ``fn`` in a worker with ``static_kwargs``; None when ``fn``
        cannot be named in another process (the caller runs it inline)."""
        ref = kernel_ref(fn)
        if ref is None:
            if id(fn) not in self._warned:
                self._warned.add(id(fn))
                log.warning(
                    "%s: kernel %r is not a module-level function of a file; it runs inline "
                    "in the server process (op_package_isolation cannot isolate it)",
                    label,
                    getattr(fn, "__qualname__", fn),
                )
            return None
        self.prewarm()
        self._wait_for_a_start()
        return RemoteKernel(self, next(self._ids), label, (ref, static_kwargs))

    def _wait_for_a_start(self) -> None:
        """Wait (at prepare time) until a worker is up or its start ended.

        Starting a worker imports numpy and the kernel's package: seconds on a
        loaded host. Paid here, it is not counted against an execution's
        deadline or a WHILE's loop timeout. A start that fails or outlasts the
        start timeout leaves the answer to the first call, as before.
        """
        limit = time.monotonic() + START_TIMEOUT_S
        with self._cond:
            while not self._idle and self._starting and not self._closed:
                remaining = limit - time.monotonic()
                if remaining <= 0:
                    return
                self._cond.wait(min(remaining, _SLICE_S))

    # -- one call ------------------------------------------------------------

    def call(self, kernel: RemoteKernel, args: tuple, kwargs: dict[str, Any]) -> Any:
        worker = self._acquire()
        kernel_end = time.monotonic_ns() + self.kernel_timeout_ms * 1_000_000
        deadline = current_deadline()
        if deadline is not None and time.monotonic_ns() >= deadline:
            self._release(worker)  # passed (or cancelled) while waiting: keep the worker
            raise KernelFault(
                "the execution deadline passed before the kernel started", deadline=True
            )
        try:
            reply = self._exchange(worker, kernel, args, kwargs, kernel_end)
        except _Expired as expired:
            self._discard(worker, kill=True)
            if expired.by_deadline:
                raise KernelFault(
                    "the execution deadline passed while the kernel was running; its worker "
                    "process was killed and is being replaced",
                    deadline=True,
                ) from None
            raise KernelFault(
                f"the kernel did not return within {self.kernel_timeout_ms} ms "
                "(op_package_kernel_timeout_ms); its worker process was killed and is being "
                "replaced"
            ) from None
        except (EOFError, OSError):
            code = self._discard(worker, kill=False)
            if self._closed:
                raise KernelFault("the device shut down while the kernel was running") from None
            raise KernelFault(
                f"the kernel's worker process died ({describe_exit(code)}); it is being replaced"
            ) from None
        except pickle.UnpicklingError as exc:  # the whole reply was read: the worker is fine
            self._release(worker)
            raise KernelFault(f"the kernel's result cannot be received: {exc}") from None
        except NotSent as exc:
            self._release(worker)
            raise KernelFault(
                f"the kernel's arguments cannot be sent to its worker: {exc}"
            ) from None
        except BaseException:
            self._discard(worker, kill=True)  # mid-message: the stream is out of step
            raise
        kind = reply[0] if isinstance(reply, tuple) and reply else None
        if kind is None or (kind, len(reply)) not in REPLIES:  # breaks the protocol: goes
            self._discard(worker, kill=True)
            raise KernelFault(f"the kernel's worker sent a malformed reply ({kind!r})")
        self._release(worker)
        if kind == "ok":
            return reply[1]
        if kind == "unsendable":
            raise KernelFault(f"the kernel's result cannot be sent back: {reply[1]}")
        _, type_name, message = reply
        raise KernelFault(f"kernel failed: {type_name}: {message}")

    def _exchange(
        self, worker: Worker, kernel: RemoteKernel, args: tuple, kwargs: dict, kernel_end: int
    ) -> tuple:
        definition = None if kernel.kid in worker.known else kernel.definition
        for _ in range(2):
            send_call(worker, ("call", kernel.kid, definition, args, kwargs))
            worker.remember(kernel.kid)
            end = _await_reply(worker.from_child, kernel_end)
            try:
                reply = read_message(worker.from_child, end, ResultUnpickler)
            except WireTimeout:  # a reply begun but not finished in time
                raise _Expired(end != kernel_end) from None
            if not (isinstance(reply, tuple) and reply and reply[0] == "unknown"):
                return reply
            definition = kernel.definition  # the worker dropped it from its cache
        raise EOFError("the worker keeps forgetting the kernel")

    # -- the pool --------------------------------------------------------------

    def _acquire(self) -> Worker:
        wait_s = START_TIMEOUT_S + self.kernel_timeout_ms / 1000
        limit = time.monotonic_ns() + int(wait_s * 1e9)
        with self._cond:
            failures = self._failures
            while True:
                if self._closed:
                    raise KernelFault("the device is shut down; its op-package workers stopped")
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive():
                        return worker
                    code = worker.kill()  # died while idle: reap it, free the slot
                    log.warning("op-package worker %d died while idle (%s)", worker.pid,
                                describe_exit(code))  # fmt: skip
                    self._procs.remove(worker.proc)
                    self._slots -= 1
                if self._failures != failures and not self._starting:
                    # a start failed while we waited (no endless retries within one call)
                    raise KernelFault(f"cannot start an op-package worker: {self._last_error}")
                if self._slots < self.max_workers and not self._starting:
                    # one start at a time: a worker being started serves the next waiter
                    self._start_async(replacement=False)
                deadline = current_deadline()  # read again: a cancel sets it to -1
                by_deadline = deadline is not None and deadline < limit
                remaining = ((deadline if by_deadline else limit) - time.monotonic_ns()) / 1e9
                if remaining <= 0:
                    if by_deadline:
                        raise KernelFault(
                            "the execution deadline passed while waiting for an op-package worker",
                            deadline=True,
                        )
                    raise KernelFault(f"no op-package worker became free within {wait_s:.0f} s")
                self._cond.wait(min(remaining, _SLICE_S))

    def _release(self, worker: Worker) -> None:
        with self._cond:
            if self._closed:
                closed = True
            else:
                closed = False
                self._idle.append(worker)
                self._cond.notify_all()
        if closed:
            worker.kill()
            self._procs.remove(worker.proc)

    def _discard(self, worker: Worker, *, kill: bool) -> int | None:
        """Drop a worker (killed, or found dead) and start its replacement."""
        code = worker.kill() if kill else reap_dead(worker)
        self._procs.remove(worker.proc)
        log.warning(
            "%s: op-package worker %d %s; replacing it",
            self.name or "device",
            worker.pid,
            "killed" if kill else f"died ({describe_exit(code)})",
        )
        with self._cond:
            self._slots -= 1
            if not self._closed:
                self._start_async(replacement=True)
            self._cond.notify_all()
        return code

    def _start_async(self, *, replacement: bool) -> None:
        """Start one worker in a background thread (the caller holds the lock)."""
        self._slots += 1
        self._starting += 1
        if replacement:
            self._restarting += 1
        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(
            target=self._start_one, args=(replacement,), name="nnhal-oppkg-start", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _start_one(self, replacement: bool) -> None:
        worker = None
        error = ""
        try:
            worker = self._spawn()
        except Exception as exc:  # noqa: BLE001 - reported to the waiting calls
            error = f"{type(exc).__name__}: {exc}"
            if not self._closed:
                log.error("%s: cannot start an op-package worker: %s", self.name or "device", error)
        leftover = None
        with self._cond:
            self._starting -= 1
            if replacement:
                self._restarting -= 1
            if worker is None:
                self._slots -= 1
                self._failures += 1
                self._last_error = error
            elif self._closed:  # started, but the supervisor closed meanwhile
                self._slots -= 1
                leftover = worker
            else:
                self._idle.append(worker)
            self._cond.notify_all()
        if leftover is not None:
            leftover.kill()
            self._procs.remove(leftover.proc)

    def _spawn(self) -> Worker:  # (tests delay it to watch getStatus during a replacement)
        return spawn(self._procs, START_TIMEOUT_S, self.memory_bytes)


def current_deadline() -> int | None:
    from nnhal.driver.executor.model import current_deadline as now

    return now()


class _Expired(Exception):
    """A call's time ran out (``by_deadline``: its execution's deadline, else the kernel
    limit)."""

    def __init__(self, by_deadline: bool) -> None:
        super().__init__()
        self.by_deadline = by_deadline


def _await_reply(fd: int, kernel_end: int) -> int:
    """Wait for a reply to begin until the kernel limit or the execution's deadline, read
    again every ``_SLICE_S`` (a cancelled execution stops waiting within a slice); the
    end that applies for the rest of the reply. Raises _Expired."""
    while True:
        deadline = current_deadline()
        by_deadline = deadline is not None and deadline < kernel_end
        end = deadline if by_deadline else kernel_end
        if time.monotonic_ns() >= end:
            raise _Expired(by_deadline)
        try:
            wait_readable(fd, min(end, time.monotonic_ns() + int(_SLICE_S * 1e9)))
            return end  # type: ignore[return-value]
        except WireTimeout:
            continue

"""Sync fences and fenced executions (IPreparedModel::executeFenced, IFencedExecutionCallback).

- ``Fence``: the HAL's sync fence (a file descriptor there, an id here):
  ACTIVE until signalled, then SIGNALED or ERROR. Fences come from
  executeFenced, or from ``ISyncFence.createFence`` (nnhal extension) and are
  then signalled by the client (``signalFence``), so tests can hold an
  execution back. Releasing an unsignalled client fence puts it in error.
- ``FencedExecution``: what getExecutionInfo reports once the execution's
  fence has left ACTIVE (before that: GENERAL_FAILURE, as the HAL says).
- ``launch``: executeFenced after validation. When every waitFor fence has
  already signalled, the execution runs within the call (as the AOSP sample
  driver does) and an error is the call's own status (null fence and
  callback). Otherwise a background thread waits for the fences, runs the
  execution, and signals the result fence (ERROR on any failure, including a
  waitFor fence that turned to error, or a deadline / ``duration`` counted
  from the moment the fences signalled).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from nnhal.driver.deadlines import deadline_or_none

from nnhal import convert as cv
from nnhal.errors import GeneralFailure, HalError, MissedDeadline
from nnhal.types import NO_TIMING, ErrorStatus, Timing

ACTIVE, SIGNALED, ERROR = 0, 1, 2  # FenceState numbers


class Fence:
    """A sync fence: ACTIVE, then SIGNALED or ERROR (once)."""

    def __init__(self, client_created: bool = False) -> None:
        self.client_created = client_created
        self._event = threading.Event()
        self.state = ACTIVE

    def signal(self, ok: bool) -> bool:
        """Leave ACTIVE; False if it already had."""
        if self._event.is_set():
            return False
        self.state = SIGNALED if ok else ERROR
        self._event.set()
        return True

    def wait(self, timeout_s: float | None = None) -> int:
        self._event.wait(timeout_s)
        return self.state


class FencedExecution:
    """One executeFenced: its result fence and, once that has signalled, its outcome."""

    def __init__(self, fence_id: int, fence: Fence) -> None:
        self.fence_id = fence_id
        self.fence = fence
        self.status = ErrorStatus.GENERAL_FAILURE
        self.message = ""
        self.timingLaunched: Timing = NO_TIMING
        self.timingFenced: Timing = NO_TIMING
        self.outputPools: list[Any] = []

    def info(self) -> tuple[ErrorStatus, str, Timing, Timing, list[Any]]:
        if self.fence.state == ACTIVE:
            raise GeneralFailure(
                "getExecutionInfo: the execution's sync fence has not signalled yet"
            )
        return self.status, self.message, self.timingLaunched, self.timingFenced, self.outputPools


def _deadline(deadline_ns: int | None, duration_ns: int | None, start_ns: int) -> int | None:
    deadline_ns = deadline_or_none(deadline_ns)
    if duration_ns is not None:  # counted from the moment every waitFor fence has signalled
        limit = start_ns + duration_ns
        deadline_ns = limit if deadline_ns is None else min(deadline_ns, limit)
    return deadline_ns


def _timings(
    measure: bool, run: Timing, called: int, fenced: int, done: int
) -> tuple[Timing, Timing]:
    if not measure or run.timeOnDevice == NO_TIMING.timeOnDevice:
        return NO_TIMING, NO_TIMING
    on_device = run.timeOnDevice
    launched = Timing(on_device, max(on_device, (done - called) // 1000))
    after_fence = Timing(on_device, max(on_device, (done - fenced) // 1000))
    return launched, after_fence


def launch(
    run: Callable[[int | None], Any],
    waits: Sequence[Fence],
    *,
    measure: bool,
    deadline_ns: int | None,
    duration_ns: int | None,
    new_fence: Callable[[Fence], int],
    on_done: Callable[[], None] | None = None,
) -> tuple[FencedExecution, Any]:
    """Start a validated fenced execution; ``run(deadline_ns)`` executes and returns the
    ExecuteReply. Returns the FencedExecution and the reply (None when started in the
    background). ``on_done`` is called once when the execution has ended, however it
    ended (before its fence signals; it releases the device's execution slot)."""
    finished = on_done or (lambda: None)
    called = time.monotonic_ns()
    if all(f.state == SIGNALED for f in waits):
        try:
            reply = run(_deadline(deadline_ns, duration_ns, called))  # HalErrors: the status
        finally:
            finished()
        done = time.monotonic_ns()
        fence = Fence()
        fence.signal(True)
        record = FencedExecution(new_fence(fence), fence)
        record.status = ErrorStatus.NONE
        record.timingLaunched, record.timingFenced = _timings(
            measure, cv.timing_from_pb(reply.timing), called, called, done
        )
        record.outputPools = list(reply.outputPools)
        return record, reply

    fence = Fence()
    record = FencedExecution(new_fence(fence), fence)

    def background() -> None:
        ok = False
        try:
            limit = _deadline(deadline_ns, None, called)
            for f in waits:
                timeout = None if limit is None else max(0.0, (limit - time.monotonic_ns()) / 1e9)
                state = f.wait(timeout)
                if state == ACTIVE:
                    raise MissedDeadline(
                        "executeFenced: the deadline passed while waiting for the waitFor fences",
                        transient=True,
                    )
                if state == ERROR:
                    raise GeneralFailure("executeFenced: a waitFor fence signalled an error")
            fenced = time.monotonic_ns()
            reply = run(_deadline(deadline_ns, duration_ns, fenced))
            done = time.monotonic_ns()
            record.timingLaunched, record.timingFenced = _timings(
                measure, cv.timing_from_pb(reply.timing), called, fenced, done
            )
            record.outputPools = list(reply.outputPools)
            record.status, record.message = ErrorStatus.NONE, ""
            ok = True
        except HalError as exc:
            record.status, record.message = ErrorStatus(exc.status), exc.message or str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug: the fence must still leave ACTIVE
            record.status = ErrorStatus.GENERAL_FAILURE
            record.message = f"executeFenced: internal error: {type(exc).__name__}: {exc}"
        finally:
            finished()
            fence.signal(ok)

    try:
        threading.Thread(target=background, name="nnhal-fenced", daemon=True).start()
    except BaseException:
        finished()  # no thread: nothing will run
        raise
    return record, None

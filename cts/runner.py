"""Running test cases: parallel, each with a time limit, surviving a hung target.

Every test runs in its own daemon thread; the runner waits for it at most
its time limit (``TestCase.timeout`` or the run's default). A test that
does not finish in time is recorded as TIMEOUT and abandoned (its thread is
left blocked in its call; it ends when the channel closes), and the runner
asks the target ``getStatus`` with a short deadline: if that gets no answer
either, the target is *down* (hung or crashed) and every test not yet
started is recorded as ERROR "not run" with the reason, so a run always
completes. A transport fault inside a test (DEVICE_UNAVAILABLE from the
channel) triggers the same check. ``max_timeouts`` bounds how many tests
may time out before the rest are not run.

``-j N`` runs N tests at a time (tests marked ``slow`` start first, so a
15 s loop-timeout test overlaps the rest). Results come back in the order
of the given tests, after the expectations file turned known failures into
xfail and unexpected passes into xpass.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nnhal.cts.core import Failure, Outcome, Result, Skip, TestCase
from nnhal.cts.expectations import Expectations

from nnhal.errors import DeviceUnavailable, HalError

__all__ = ["Runner"]


def _harness_error(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return f"harness error: {type(e).__name__}: {e}{where}"


@dataclass
class _Running:
    index: int
    case: TestCase
    started: float
    deadline: float
    thread: threading.Thread


class Runner:
    def __init__(
        self,
        target,
        *,
        jobs: int = 1,
        timeout: float = 60.0,
        expectations: Expectations | None = None,
        progress: bool = True,
        max_timeouts: int = 10,
        on_result: Callable[[Result], None] | None = None,
        probe_timeout: float = 3.0,
    ) -> None:
        self.target = target
        self.jobs = max(1, int(jobs))
        self.timeout = float(timeout)
        self.expectations = expectations or Expectations()
        self.progress = progress
        self.max_timeouts = max_timeouts
        self.on_result = on_result
        self.probe_timeout = probe_timeout
        self.down: str | None = None  # why the remaining tests are not run
        self.timeouts = 0
        self._cond = threading.Condition()
        self._done: dict[int, Result] = {}

    # ---- one test ----

    def _execute(self, case: TestCase) -> tuple[Result, bool]:
        """Run ``case``; returns the result and whether a transport fault happened."""
        start = time.monotonic()
        transport = False
        try:
            note = case.run(self.target)
            outcome, message = Outcome.PASSED, note or ""
        except Skip as e:
            outcome, message = Outcome.SKIPPED, str(e)
        except Failure as e:
            outcome, message = Outcome.FAILED, str(e)
        except DeviceUnavailable as e:
            outcome, message, transport = Outcome.ERROR, f"transport fault: {e}", True
        except HalError as e:  # a call the test did not expect to fail
            outcome, message = Outcome.FAILED, f"unexpected {e}"
        except Exception as e:  # noqa: BLE001 - a bug in the test or the suite
            outcome, message = Outcome.ERROR, _harness_error(e)
        result = Result(
            case.id, case.family, outcome, message, time.monotonic() - start, case.coverage
        )
        return result, transport

    def _thread_main(self, index: int, case: TestCase) -> None:
        result, transport = self._execute(case)
        with self._cond:
            if index not in self._done:  # not already recorded as a timeout
                self._done[index] = result
                if transport:
                    self._done[index].extra["transport"] = True
            self._cond.notify_all()

    # ---- the run ----

    def _not_run(self, case: TestCase) -> Result:
        return Result(
            case.id, case.family, Outcome.ERROR, f"not run: {self.down}", 0.0, case.coverage
        )

    def _check_target(self, after: str) -> None:
        if self.down is None and not self.target.alive(self.probe_timeout):
            self.down = (
                f"the target stopped answering (getStatus got no reply within "
                f"{self.probe_timeout:g} s) after {after}"
            )

    def run(self, tests: Sequence[TestCase]) -> list[Result]:
        from tqdm import tqdm

        order = list(range(len(tests)))
        if self.jobs > 1:
            order.sort(key=lambda i: not tests[i].slow)  # stable: slow ones first
        pending = deque(order)
        running: dict[int, _Running] = {}
        results: list[Result | None] = [None] * len(tests)
        bar = tqdm(
            total=len(tests),
            file=sys.stderr,
            disable=not self.progress,
            unit="test",
            dynamic_ncols=True,
        )
        problems = 0

        def record(index: int, result: Result) -> None:
            nonlocal problems
            result = self.expectations.apply(result)
            results[index] = result
            if result.outcome.is_problem:
                problems += 1
                bar.set_postfix_str(f"problems: {problems}")
            bar.update(1)
            if self.on_result is not None:
                self.on_result(result)

        try:
            while pending or running:
                with self._cond:
                    while pending and len(running) < self.jobs and self.down is None:
                        i = pending.popleft()
                        case = tests[i]
                        limit = case.timeout if case.timeout is not None else self.timeout
                        t = threading.Thread(
                            target=self._thread_main,
                            args=(i, case),
                            name=f"cts-{case.id}",
                            daemon=True,
                        )
                        now = time.monotonic()
                        running[i] = _Running(i, case, now, now + limit, t)
                        t.start()
                    if self.down is not None:
                        while pending:
                            i = pending.popleft()
                            record(i, self._not_run(tests[i]))
                    finished = [i for i in running if i in self._done]
                    if not finished and running:
                        wait = min(r.deadline for r in running.values()) - time.monotonic()
                        if wait > 0:
                            self._cond.wait(min(wait, 1.0))
                        finished = [i for i in running if i in self._done]
                    now = time.monotonic()
                    expired = [
                        i for i, r in running.items() if i not in finished and r.deadline <= now
                    ]
                    for i in expired:
                        r = running[i]
                        self._done[i] = Result(
                            r.case.id,
                            r.case.family,
                            Outcome.TIMEOUT,
                            f"no result within {r.deadline - r.started:g} s: the target hung "
                            "(or the test is too slow for its time limit)",
                            now - r.started,
                            r.case.coverage,
                        )
                    done_now = [(i, self._done[i]) for i in finished + expired]
                    for i, _ in done_now:
                        running.pop(i, None)
                for i, result in done_now:
                    record(i, result)
                    if result.outcome == Outcome.TIMEOUT:
                        self.timeouts += 1
                        self._check_target(f"{result.id} timed out")
                        if self.down is None and self.timeouts >= self.max_timeouts:
                            self.down = f"{self.timeouts} tests timed out (the limit)"
                    elif result.extra.get("transport"):
                        self._check_target(f"a transport fault in {result.id}")
        finally:
            bar.close()
        return [r for r in results if r is not None]

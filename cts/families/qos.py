"""Family "qos": priorities and deadlines (VTS QualityOfServiceTests, hal13.md §5.8).

For the base model of every spec (first example, not expected failures):

- ``prepare``: priorities LOW, MEDIUM and HIGH without a deadline must
  prepare; a deadline PAST (1 s ago), NOW or SHORT (now + 5 ms) may prepare
  or answer MISSED_DEADLINE_*, and for PAST only MISSED_DEADLINE_PERSISTENT
  (a deadline already passed cannot be met by retrying: TRANSIENT would say
  it can); UNLIMITED must prepare. With ``--require-deadlines`` a PAST
  deadline must be missed (a target ignoring deadlines fails). Every prepared model must then
  compute the golden values (NONE <=> a prepared model);
- ``execute``: executeSynchronously_1_3 and execute_1_3 with deadlines PAST,
  NOW, SHORT (NONE or MISSED_DEADLINE_*, no shapes and no timing on a miss;
  the PAST rules as above) and UNLIMITED (NONE and the golden values);
  MeasureTiming NO.

Deadlines are steady-clock points of the client; PAST, NOW and SHORT are only
meaningful for a target on this host, so they are left out (with a note)
for other targets. Over this wire the launch status and the callback status
arrive as one reply: a deadline already past is answered in the reply.
"""

from __future__ import annotations

import time

from nnhal.cts.core import Problems, TestCase, check, coverage_of
from nnhal.cts.paths import MISSED_DEADLINE, check_error, check_success, execute, layout

from nnhal.errors import HalError
from nnhal.types import TIME_POINT_MAX_NS, ErrorStatus, Priority

FAMILY = "qos"
_DEADLINES = ("past", "now", "short", "unlimited")
_LATE = ("past", "now", "short")


def _deadline(kind: str) -> int:
    now = time.monotonic_ns()
    return {
        "past": now - 1_000_000_000,
        "now": now,
        "short": now + 5_000_000,
        "unlimited": TIME_POINT_MAX_NS,
    }[kind]


def _kinds(target) -> tuple[str, ...]:
    return _DEADLINES if target.is_local else ("unlimited",)


def _check_late(target, kind: str, status: ErrorStatus, what: str) -> bool:
    """The rules for a deadline that has passed (or nearly): True when the call missed it.

    A deadline already passed when the call arrives can never be met by trying again:
    MISSED_DEADLINE_PERSISTENT (TRANSIENT says a retry may succeed). NONE means the target
    ignored the deadline, which the HAL allows unless ``--require-deadlines``.
    """
    if status == ErrorStatus.NONE:
        check(
            not (target.options.require_deadlines and kind == "past"),
            f"{what}, deadline 1 s in the past: NONE (the deadline was ignored; "
            "--require-deadlines)",
        )
        return False
    check(status in MISSED_DEADLINE, f"{what}, deadline {kind}: {status.name}, expected NONE "
          "or MISSED_DEADLINE_*")  # fmt: skip
    check(
        kind != "past" or status == ErrorStatus.MISSED_DEADLINE_PERSISTENT,
        f"{what}, deadline 1 s in the past: {status.name}; a deadline already passed cannot be "
        "met by retrying: expected MISSED_DEADLINE_PERSISTENT",
    )
    return True


def _works(target, test, prepared) -> None:
    plan = layout(test)
    try:
        check_success(test, plan, execute(target, prepared, plan.request, "sync"), measure=False)
    finally:
        plan.close()


def _prepare_case(test):
    def run(target) -> str:
        target.require_supported(test.model)
        problems = Problems()
        variants = [(f"priority {p.name}", {"priority": p}) for p in Priority]
        variants += [(f"deadline {k}", {"deadline_ns": _deadline(k)}) for k in _kinds(target)]
        for label, kwargs in variants:

            def one(kwargs=kwargs, label=label) -> None:
                kind = label.removeprefix("deadline ")
                try:
                    prepared = target.device.prepareModel_1_3(test.model, **kwargs)
                except HalError as e:
                    check(kind in _LATE, f"prepareModel_1_3 returned {e}")
                    _check_late(target, kind, e.status, "prepareModel_1_3")
                    return
                if kind in _LATE:
                    _check_late(target, kind, ErrorStatus.NONE, "prepareModel_1_3")
                try:
                    _works(target, test, prepared)
                finally:
                    prepared.release()

            problems.run(label, one)
        problems.raise_if_any("preparations")
        note = "" if target.is_local else " (deadlines NOW/SHORT left out: target not on this host)"
        return f"{problems.checked} preparations{note}"

    return run


def _execute_case(test):
    def run(target) -> str:
        target.require_supported(test.model)
        prepared = target.device.prepareModel_1_3(test.model)
        problems = Problems()
        try:
            for path in ("sync", "async"):
                for kind in _kinds(target):

                    def one(path=path, kind=kind) -> None:
                        plan = layout(test)
                        try:
                            result = execute(
                                target, prepared, plan.request, path, deadline_ns=_deadline(kind)
                            )
                            if kind != "unlimited":
                                if result.status != ErrorStatus.NONE:
                                    check_error(result, MISSED_DEADLINE, f"deadline {kind}")
                                if _check_late(target, kind, result.status, path):
                                    return
                            check_success(test, plan, result, measure=False)
                        finally:
                            plan.close()

                    problems.run(f"{path}, deadline {kind}", one)
        finally:
            prepared.release()
        problems.raise_if_any("executions")
        return f"{problems.checked} executions"

    return run


def collect(library, options) -> list[TestCase]:
    cases: list[TestCase] = []
    for key, m in library.spec_bases():
        cov = coverage_of([m.test.model])
        cases.append(
            TestCase(f"{FAMILY}/{key}/prepare", FAMILY, _prepare_case(m.test), coverage=cov)
        )
        cases.append(
            TestCase(f"{FAMILY}/{key}/execute", FAMILY, _execute_case(m.test), coverage=cov)
        )
    return cases

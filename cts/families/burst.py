"""Family "burst": executions through configureExecutionBurst (hal13.md §1.6).

Runs when the target offers bursts (probed once: a burst execution of a
small valid model); otherwise every test is skipped with the probe's reason.
For every generated test model that is not an expected failure: one burst
stream, two executions in it (MeasureTiming NO, then YES), each NONE with the
golden values and the timing rules. ``burst/memory-slots``: pools from
registered memory slots, freeMemory then re-registering a slot id with new
contents (the new values must come back), freeMemory of unknown and freed
slots harmless. ``burst/insufficient/<model>``: output 0 of unknown dimensions one
byte short is OUTPUT_INSUFFICIENT_SIZE with the needed shapes (spec-library
models with unknown output dimensions). Invalid requests through bursts are in
the request-validation family; a loop in a burst (default loop timeout) is in
the control-flow family.
"""

from __future__ import annotations

import numpy as np
from nnhal.cts.core import Problems, TestCase, check, coverage_of, skip
from nnhal.cts.paths import check_insufficient, execute, has_unknown_outputs, layout, run_test_model

from nnhal._client_io import IoPlan
from nnhal.errors import HalError
from nnhal.types import InlineMemory

FAMILY = "burst"


def _case(model):
    def run(target) -> str:
        target.require("burst")
        test = model.test
        target.require_supported(test.model)
        prepared = target.device.prepareModel_1_3(test.model)
        try:
            with prepared.burst() as burst:
                for measure in (False, True):
                    run_test_model(
                        target, test, path="burst", measure=measure, prepared=prepared, burst=burst
                    )
        finally:
            try:
                prepared.release()
            except HalError:
                pass
        return "2 executions in one burst"

    return run


def _slot_run(burst, plan: IoPlan, slot: int, dtype) -> np.ndarray:
    """Execute with input pool 0 taken from memory ``slot``; output pool 1 inline."""
    result = burst.execute_request(plan.request, slots=[slot, -1])
    (out,) = plan.read_outputs(result.outputShapes, result.pools)
    return np.asarray(out, dtype)


def _memory_slots(target) -> str:
    """register, execute, freeMemory, re-register the same slot id with other contents,
    execute again (the new contents, never the stale ones), and freeMemory of unknown and
    already freed slots is harmless (hal13.md §1.6)."""
    target.require("burst")
    probe = target.require_probe()
    prepared = target.device.prepareModel_1_3(probe.model)
    x, y = probe.x(), probe.y()
    x2 = np.array([5, 1], probe.dtype)
    plan = IoPlan(probe.model, [x, y], None, "inline")
    plan2 = IoPlan(probe.model, [x2, y], None, "inline")
    problems = Problems()
    try:
        with prepared.burst() as burst:
            slot = burst.register(InlineMemory(bytes(plan.request.pools[0].data)))

            def first() -> None:
                out = _slot_run(burst, plan, slot, probe.dtype)
                want = probe.expected()
                check(np.array_equal(out, want), f"output {out.tolist()}, expected {want.tolist()}")

            problems.run("input pool from a registered slot", first)

            def again() -> None:
                burst.freeMemory(slot)
                burst.register(InlineMemory(bytes(plan2.request.pools[0].data)), slot)
                out = _slot_run(burst, plan2, slot, probe.dtype)
                want = (x2 + y).astype(probe.dtype)
                check(np.array_equal(out, want), f"output {out.tolist()} after slot {slot} was "
                      f"freed and re-registered with new inputs, expected {want.tolist()} "
                      "(stale memory reused?)")  # fmt: skip

            problems.run("slot freed and re-registered", again)

            def harmless() -> None:
                burst.freeMemory(987_654)
                burst.freeMemory(slot)
                burst.freeMemory(slot)
                result = burst.execute_request(plan.request)
                (out,) = plan.read_outputs(result.outputShapes, result.pools)
                check(np.array_equal(out, probe.expected()), f"output {out.tolist()} after "
                      "freeing unknown and freed slots")  # fmt: skip

            problems.run("freeMemory of unknown and freed slots, then an inline execution",
                         harmless)  # fmt: skip

            def reuse() -> None:
                new = burst.register(InlineMemory(bytes(plan2.request.pools[0].data)))
                for _ in range(3):
                    out = _slot_run(burst, plan2, new, probe.dtype)
                    check(np.array_equal(out, (x2 + y).astype(probe.dtype)),
                          f"reusing slot {new}: output {out.tolist()}")  # fmt: skip

            problems.run("one slot reused by three executions", reuse)
    finally:
        plan.close()
        plan2.close()
        try:
            prepared.release()
        except HalError:
            pass
    problems.raise_if_any("slot cases")
    return f"{problems.checked} slot cases"


def _insufficient(model):
    """OUTPUT_INSUFFICIENT_SIZE through a burst: output 0 (of unknown dimensions) one byte
    short, as the execution family checks it on sync and async."""

    def run(target) -> str:
        target.require("burst")
        test = model.test
        target.require_supported(test.model)
        plan = layout(test, outputs="insufficient")
        if plan is None:
            skip("output 0 has at most one byte: it cannot be made one byte short")
        prepared = target.device.prepareModel_1_3(test.model)
        try:
            check_insufficient(test, execute(target, prepared, plan.request, "burst"))
        finally:
            plan.close()
            prepared.release()
        return "OUTPUT_INSUFFICIENT_SIZE with the needed shapes"

    return run


def collect(library, options) -> list[TestCase]:
    cases = [
        TestCase(f"{FAMILY}/{m.test_id}", FAMILY, _case(m), coverage=coverage_of([m.test.model]))
        for m in library.path_models()
        if not m.test.expectFailure
    ]
    cases.append(TestCase(f"{FAMILY}/memory-slots", FAMILY, _memory_slots))
    cases += [
        TestCase(f"{FAMILY}/insufficient/{m.test_id}", FAMILY, _insufficient(m),
                 coverage=coverage_of([m.test.model]))
        for m in library.models
        if not m.test.expectFailure and has_unknown_outputs(m.test)
    ]  # fmt: skip
    return cases

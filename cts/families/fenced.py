"""Family "fenced": executeFenced (hal13.md §1.3 and §5.7 FENCED).

Runs when the target offers executeFenced (probed once); otherwise every
test is skipped with the probe's reason. For every generated test model that
is not an expected failure:

- models with fully specified outputs: executeFenced (MeasureTiming YES)
  must return NONE with the golden values; getExecutionInfo must answer NONE
  with timingLaunched and timingFenced each obeying timeOnDevice <=
  timeInDriver; a second executeFenced waiting for the first one's sync fence
  must succeed too;
- models whose output dimensions are unknown: INVALID_ARGUMENT (fenced
  executions have no dynamic output shapes), no fence, no callback.

``fenced/null-fence``: a waitFor list holding the null handle (0) is
INVALID_ARGUMENT with no fence and no callback. ``fenced/waits-for-client-fence``:
an execution waiting on a client-made fence (nnhal ISyncFence extension) has
not run before the fence signals, and runs correctly after.
``fenced/waits-for-every-fence``: with three waitFor fences, two signalled
are not enough.
"""

from __future__ import annotations

import numpy as np
from nnhal.cts.core import TestCase, check, coverage_of, skip
from nnhal.cts.paths import check_success, check_timing, execute, has_unknown_outputs, layout

from nnhal._client_io import IoPlan
from nnhal.errors import HalError
from nnhal.types import ErrorStatus, OutputShape

FAMILY = "fenced"


def _case(model):
    def run(target) -> str:
        target.require("fenced")
        test = model.test
        target.require_supported(test.model)
        prepared = target.device.prepareModel_1_3(test.model)
        plan = layout(test)
        try:
            first = execute(target, prepared, plan.request, "fenced", measure=True)
            if has_unknown_outputs(test):
                check(
                    first.status == ErrorStatus.INVALID_ARGUMENT,
                    f"outputs of unknown "
                    f"dimensions: expected INVALID_ARGUMENT, got {first.describe()}",
                )
                check(
                    first.fenced is None or first.fenced[:2] == (0, 0),
                    "INVALID_ARGUMENT came with a sync fence or a callback",
                )
                return "unknown output dimensions rejected"
            check_success(test, plan, first, measure=True)
            fence, callback, info = first.fenced or (0, 0, None)
            check(callback != 0, "executeFenced returned NONE without a callback")
            check(
                info is not None and info[0] == ErrorStatus.NONE,
                f"getExecutionInfo after NONE: {info}",
            )
            for timing in info[1:]:
                first.timing = timing
                check_timing(first, measure=True)
            second = execute(
                target,
                prepared,
                plan.request,
                "fenced",
                measure=False,
                wait_for=[fence] if fence else [],
            )
            check_success(test, plan, second, measure=False)
            return "fenced twice (the second waiting for the first's fence)"
        finally:
            plan.close()
            try:
                prepared.release()
            except HalError:
                pass

    return run


def _null_fence(target) -> None:
    target.require("fenced")
    probe = target.require_probe()
    model = probe.model
    prepared = target.device.prepareModel_1_3(model)
    plan = IoPlan(model, [probe.x(), probe.y()], None, "inline")
    try:
        result = execute(target, prepared, plan.request, "fenced", wait_for=[0])
        check(
            result.status == ErrorStatus.INVALID_ARGUMENT,
            f"waitFor = [null handle]: expected INVALID_ARGUMENT, got {result.describe()}",
        )
        check(
            result.fenced is None or result.fenced[:2] == (0, 0),
            "INVALID_ARGUMENT came with a sync fence or a callback",
        )
    finally:
        plan.close()
        prepared.release()


def _waits_for_client_fence(target) -> str:
    """executeFenced must not begin before its waitFor fences signal (hal13 1.3).

    Client-made fences are the nnhal ``ISyncFence`` extension; a target without
    it skips this test.
    """
    from nnhal.control import create_fence, signal_fence, wait_fence

    target.require("fenced")
    try:
        fence = create_fence(target.device)
    except Exception as exc:  # noqa: BLE001  (no ISyncFence: a foreign target)
        skip(f"the target cannot create client fences (nnhal ISyncFence): {exc}")
    probe = target.require_probe()
    model = probe.model
    prepared = target.device.prepareModel_1_3(model)
    x = probe.x()
    plan = IoPlan(model, [x, probe.y()], None, "inline")
    try:
        result = prepared.executeFenced(plan.request, waitFor=[fence])
        status, _, _ = result.callback.getExecutionInfo()
        check(
            status != ErrorStatus.NONE and wait_fence(target.device, result.syncFence) == "ACTIVE",
            f"the execution finished (getExecutionInfo {status.name}) before its waitFor "
            "fence was signalled",
        )
        signal_fence(target.device, fence)
        state = wait_fence(target.device, result.syncFence, 10.0)
        check(state == "SIGNALED", f"after the waitFor fence signalled: sync fence {state}")
        status, _, _ = result.callback.getExecutionInfo()
        check(status == ErrorStatus.NONE, f"getExecutionInfo after the fence: {status.name}")
        shapes = [OutputShape(tuple(x.shape), True)]
        (y,) = plan.read_outputs(shapes, result.callback.pools)
        want = probe.expected()
        check(np.array_equal(y, want), f"output {y.tolist()}, expected {want.tolist()}")
        return "waited for the client fence"
    finally:
        plan.close()
        prepared.release()


def _waits_for_every_fence(target) -> str:
    """executeFenced with three waitFor fences: still waiting after two of them signal."""
    from nnhal.control import create_fence, signal_fence, wait_fence

    target.require("fenced")
    try:
        fences = [create_fence(target.device) for _ in range(3)]
    except Exception as exc:  # noqa: BLE001  (no ISyncFence: a foreign target)
        skip(f"the target cannot create client fences (nnhal ISyncFence): {exc}")
    probe = target.require_probe()
    prepared = target.device.prepareModel_1_3(probe.model)
    plan = IoPlan(probe.model, [probe.x(), probe.y()], None, "inline")
    try:
        result = prepared.executeFenced(plan.request, waitFor=fences)
        # signal all but the last one (the middle one first: order must not matter)
        for k in (1, 0):
            signal_fence(target.device, fences[k])
        state = wait_fence(target.device, result.syncFence, 0.5)
        status, _, _ = result.callback.getExecutionInfo()
        check(
            state == "ACTIVE" and status != ErrorStatus.NONE,
            f"the execution finished (sync fence {state}, getExecutionInfo {status.name}) with "
            "one of its three waitFor fences not yet signalled",
        )
        signal_fence(target.device, fences[2])
        state = wait_fence(target.device, result.syncFence, 10.0)
        check(state == "SIGNALED", f"after every waitFor fence signalled: sync fence {state}")
        status, _, _ = result.callback.getExecutionInfo()
        check(status == ErrorStatus.NONE, f"getExecutionInfo after the fences: {status.name}")
        shapes = [OutputShape((2,), True)]
        (y,) = plan.read_outputs(shapes, result.callback.pools)
        want = probe.expected()
        check(np.array_equal(y, want), f"output {y.tolist()}, expected {want.tolist()}")
        return "waited for all three fences"
    finally:
        plan.close()
        prepared.release()


def collect(library, options) -> list[TestCase]:
    cases = [
        TestCase(f"{FAMILY}/{m.test_id}", FAMILY, _case(m), coverage=coverage_of([m.test.model]))
        for m in library.path_models()
        if not m.test.expectFailure
    ]
    cases.append(TestCase(f"{FAMILY}/null-fence", FAMILY, _null_fence))
    cases.append(TestCase(f"{FAMILY}/waits-for-client-fence", FAMILY, _waits_for_client_fence))
    cases.append(TestCase(f"{FAMILY}/waits-for-every-fence", FAMILY, _waits_for_every_fence))
    return cases

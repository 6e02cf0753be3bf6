"""Family "execution": execution modes and output shapes on the spec library.

For every generated test model that is not an expected failure:

- ``async``: execute_1_3 with MeasureTiming NO and the request giving the
  output dimensions: NONE, timing both UINT64_MAX, golden values;
- ``timing``: executeSynchronously_1_3 with MeasureTiming NO (timing both
  UINT64_MAX) and execute_1_3 with YES (timeOnDevice <= timeInDriver when
  both are given), golden values;
- ``shared-memory``: the request pools in one shared-memory segment (local
  targets only; a shared segment is a name on this host): golden values;
- ``insufficient`` (models whose output dimensions are unknown): output 0
  one byte short through sync and async: OUTPUT_INSUFFICIENT_SIZE with one
  shape per output, only output 0 insufficient, ranks and known axes equal to
  the expected shapes (hal13.md §5.7);

and ``execution/concurrent``: eight executions at once on one prepared model
(the HAL allows any number), all correct.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from nnhal.cts.core import Failure, TestCase, check, coverage_of, skip
from nnhal.cts.paths import (
    check_insufficient,
    check_success,
    execute,
    has_unknown_outputs,
    layout,
    run_test_model,
)

from nnhal.errors import HalError

FAMILY = "execution"


def _async(model):
    def run(target) -> None:
        run_test_model(target, model.test, path="async", measure=False, outputs="specified")

    return run


def _timing(model):
    """The timing combinations the other families leave out: sync without measuring and
    async with measuring (burst and fenced run both in their families)."""

    def run(target) -> None:
        run_test_model(target, model.test, path="sync", measure=False)
        run_test_model(target, model.test, path="async", measure=True)

    return run


def _shared(model):
    def run(target) -> None:
        if not target.is_local:
            skip(f"shared memory needs the target on this host; {target.address} is not loopback")
        run_test_model(target, model.test, path="sync", memory="shared", measure=False)

    return run


def _insufficient(model):
    def run(target) -> None:
        test = model.test
        target.require_supported(test.model)
        prepared = target.device.prepareModel_1_3(test.model)
        try:
            for path in ("sync", "async"):
                plan = layout(test, outputs="insufficient")
                if plan is None:
                    skip("output 0 has at most one byte: it cannot be made one byte short")
                try:
                    check_insufficient(test, execute(target, prepared, plan.request, path))
                finally:
                    plan.close()
        finally:
            prepared.release()

    return run


def _concurrent(model):
    def run(target) -> None:
        test = model.test
        target.require_supported(test.model)
        prepared = target.device.prepareModel_1_3(test.model)
        try:

            def one(_: int) -> str:
                plan = layout(test)
                try:
                    result = execute(target, prepared, plan.request, "async")
                    check_success(test, plan, result, measure=False)
                    return ""
                except Failure as e:
                    return str(e)
                finally:
                    plan.close()

            with ThreadPoolExecutor(8) as pool:
                errors = [e for e in pool.map(one, range(8)) if e]
            check(not errors, lambda: f"{len(errors)} of 8 concurrent executions: {errors[0]}")
        finally:
            try:
                prepared.release()
            except HalError:
                pass

    return run


def collect(library, options) -> list[TestCase]:
    cases = []
    for m in library.models:
        if m.test.expectFailure:
            continue
        cov = coverage_of([m.test.model])
        base = f"{FAMILY}/{m.name}"
        cases.append(TestCase(f"{base}/async", FAMILY, _async(m), coverage=cov))
        cases.append(TestCase(f"{base}/timing", FAMILY, _timing(m), coverage=cov))
        cases.append(TestCase(f"{base}/shared-memory", FAMILY, _shared(m), coverage=cov))
        if has_unknown_outputs(m.test):
            cases.append(TestCase(f"{base}/insufficient", FAMILY, _insufficient(m), coverage=cov))
    heavy = [m for m in library.models if m.variation == "base" and not m.test.expectFailure]
    if heavy:
        chosen = max(heavy, key=lambda m: len(m.test.model.referenced))
        cases.append(
            TestCase(
                f"{FAMILY}/concurrent/{chosen.name}",
                FAMILY,
                _concurrent(chosen),
                coverage=coverage_of([chosen.test.model]),
            )
        )
    return cases

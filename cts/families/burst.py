"""Family "burst": executions through configureExecutionBurst (hal13.md §1.6).

Runs when the target offers bursts (probed once: a burst execution of a
small valid model); otherwise every test is skipped with the probe's reason.
For every generated test model that is not an expected failure: one burst
stream, two executions in it (MeasureTiming NO, then YES), each NONE with the
golden values and the timing rules. Invalid requests through bursts are in
the request-validation family; a loop in a burst (default loop timeout) is in
the control-flow family.
"""

from __future__ import annotations

from nnhal.cts.core import TestCase, coverage_of
from nnhal.cts.paths import run_test_model

from nnhal.errors import HalError

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


def collect(library, options) -> list[TestCase]:
    return [
        TestCase(f"{FAMILY}/{m.test_id}", FAMILY, _case(m), coverage=coverage_of([m.test.model]))
        for m in library.all_models()
        if not m.test.expectFailure
    ]

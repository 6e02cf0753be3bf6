"""Family "generated": every test model of the spec library, golden values.

One test per spec, variation and example (``generated/<spec>/<variation>``):
skipped when the target reports an operation unsupported; otherwise
prepareModel_1_3 must succeed and executeSynchronously_1_3 (measure YES,
request output dimensions empty as VTS sends them) must return NONE, output
shapes empty or one per output (one per output for dynamic output shapes)
equal to the expected shapes, timeOnDevice <= timeInDriver when both are
reported, and values within the tolerance table. An expectFailure spec
passes when preparing or executing fails. A spec file that fails to load is
one ERROR test naming it.
"""

from __future__ import annotations

from nnhal.cts.core import TestCase, coverage_of, fail
from nnhal.cts.paths import run_test_model

FAMILY = "generated"


def _case(model):
    def run(target) -> None:
        run_test_model(target, model.test, path="sync", measure=True)

    return run


def _load_error(source: str, message: str):
    def run(target) -> None:
        fail(f"spec {source} could not be built: {message}")

    return run


def collect(library, options) -> list[TestCase]:
    cases = [
        TestCase(f"{FAMILY}/{m.test_id}", FAMILY, _case(m), coverage=coverage_of([m.test.model]))
        for m in library.all_models()
    ]
    cases += [
        TestCase(f"{FAMILY}/load-error/{source}", FAMILY, _load_error(source, message))
        for source, message in library.errors
    ]
    return cases

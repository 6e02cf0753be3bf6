"""Family "vectors": external test models in the vector format (``--vectors PATH``).

Every test model in the given files or folders (``nnhal.vectors``) runs the
way ``nnhal vectors`` runs it (``nnhal.vector_runner.run_test_model``):
skipped when the target reports an operation unsupported, passed or failed
by the tolerance table, expectFailure models pass on any error status. A
file that cannot be read is one failing test naming it.
"""

from __future__ import annotations

from nnhal.cts.core import TestCase, coverage_of, fail, skip

from nnhal.vector_runner import FAILED, SKIPPED
from nnhal.vector_runner import run_test_model as run_vector
from nnhal.vectors import find_vector_files, load_vectors

FAMILY = "vectors"


def _case(test):
    def run(target) -> str | None:
        result = run_vector(target.device, test)
        if result.result == SKIPPED:
            skip(result.error or "not supported")
        if result.result == FAILED:
            fail(result.error or "failed")
        return result.error

    return run


def _unreadable(message: str):
    def run(target) -> None:
        fail(message)

    return run


def collect(library, options) -> list[TestCase]:
    cases: list[TestCase] = []
    try:
        files = find_vector_files(options.vectors)
    except ValueError as e:
        return [TestCase(f"{FAMILY}/unreadable", FAMILY, _unreadable(str(e)))]
    for f in files:
        try:
            tests = load_vectors(f)
        except ValueError as e:
            cases.append(TestCase(f"{FAMILY}/unreadable/{f.name}", FAMILY, _unreadable(str(e))))
            continue
        for t in tests:
            cases.append(
                TestCase(f"{FAMILY}/{t.name}", FAMILY, _case(t), coverage=coverage_of([t.model]))
            )
    return cases

"""Test models (nnhal.vectors) run through the runtime, judged as a direct run is.

``run_test_model`` mirrors ``nnhal.vector_runner.run_test_model`` with a
compilation over ``devices`` (plus ``nnapi-reference``) in place of one
prepared model: expectFailure passes when compiling or executing fails;
outputs are compared with the corpus's tolerances. The result also carries
the execution's report (steps, fallbacks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from nnhal.runtime.api import Compilation, Execution
from nnhal.runtime.devices import RuntimeDevice

from nnhal.errors import HalError
from nnhal.vector_runner import FAILED, PASSED, VectorResult, compare_outputs
from nnhal.vectors import TestModel


@dataclass
class RuntimeVectorResult:
    result: VectorResult
    outputs: list[np.ndarray] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    devices_used: list[str] = field(default_factory=list)


def run_test_model(
    devices: Sequence[RuntimeDevice],
    test: TestModel,
    *,
    preference: int | None = None,
    mode: str = "sync",
    loop_timeout_ns: int | None = None,
) -> RuntimeVectorResult:
    def result(kind: str, error: str | None = None, worst: float | None = None, **kw):
        return RuntimeVectorResult(VectorResult(test.name, kind, error, worst, test.source), **kw)

    try:
        compilation = Compilation(test.model, devices)
        if preference is not None:
            compilation.set_preference(preference)
        compilation.finish()
    except HalError as e:
        if test.expectFailure:
            return result(PASSED, f"expected failure: compilation: {e}")
        return result(FAILED, f"compilation: {e}")
    try:
        execution = Execution(compilation)
        for k, value in enumerate(test.inputs):
            execution.set_input(k, value)
        for k, shape in enumerate(test.expected_shapes):
            execution.set_output(k, None, shape)
        execution.set_loop_timeout(loop_timeout_ns)
        try:
            outputs = execution.compute(mode)
        except HalError as e:
            report = execution.report.to_json()
            if test.expectFailure:
                return result(PASSED, f"expected failure: execute: {e}", report=report)
            return result(FAILED, f"execute: {e}", report=report)
    finally:
        compilation.release()
    report = execution.report.to_json()
    if compilation.fallback:  # a device failed to prepare: the whole model on the CPU
        report["fallbacks"].insert(0, {"kind": "compilation", **compilation.fallback})
    used = sorted({s["device"] for s in report["steps"]})
    if test.expectFailure:
        return result(FAILED, "expected a failure, but compile and execute succeeded")
    problems, worst = compare_outputs(test, outputs)
    kind, error = (FAILED, "; ".join(problems)) if problems else (PASSED, None)
    return result(kind, error, worst, outputs=outputs, report=report, devices_used=used)

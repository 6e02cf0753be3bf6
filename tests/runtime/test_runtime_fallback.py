"""Faults injected on a served device make the runtime fall back to nnapi-reference, with
the right outputs and every fallback in the report and the call trace."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.runtime.api import Compilation, Execution
from runtime_helpers import served
from test_runtime_partition import EXPECTED, X, Y, chain_model, profile

from nnhal.control import Control
from nnhal.errors import HalError


def _run(compilation):
    execution = Execution(compilation)
    execution.set_input(0, X)
    execution.set_input(1, Y)
    execution.set_output(0)
    return execution.compute(), execution


@pytest.mark.parametrize("status", ["DEVICE_UNAVAILABLE", "GENERAL_FAILURE"])
@pytest.mark.parametrize("exclude", [["MUL"], []], ids=["partitioned", "simple"])
def test_nth_execution_fault_falls_back_to_the_cpu(status, exclude):
    with served(profile("npu", exclude=exclude)) as (address, (npu,)):
        with Control(address) as control:
            control.set_faults(
                [{"method": "executeSynchronously_1_3", "status": status, "when": "nth", "n": 2}],
                device="npu",
            )
            compilation = Compilation(chain_model(), [npu]).finish()
            try:
                runs = [_run(compilation) for _ in range(3)]
            finally:
                compilation.release()
            trace = control.trace(device="npu")
        for outs, _ in runs:
            np.testing.assert_array_equal(outs[0], EXPECTED)
        fallbacks = [e.report.fallbacks for _, e in runs]
        # the second npu execution is the one failing: it is in the first run when the model
        # has two npu steps, in the second when the npu runs the whole model once per run
        failing_run = 0 if exclude else 1
        for k, f in enumerate(fallbacks):
            if k != failing_run:
                assert f == []
                continue
            assert [(x.kind, x.device, x.status) for x in f] == [("partial", "npu", status)]
            execution = runs[k][1]
            retried = [s for s in execution.report.steps if s.fallback == "partial"]
            assert [s.device for s in retried] == ["nnapi-reference"]
            calls = [t["call"] for t in execution.report.trace]
            assert "partial-fallback" in calls
        # the device's own call trace shows the injected failure
        assert any(status in str(entry) for entry in trace)


def test_full_fallback_when_the_cpu_retry_fails_too(monkeypatch):
    from nnhal.runtime import reference as devices

    with served(profile("npu", exclude=["MUL"])) as (address, (npu,)), Control(address) as control:
        control.set_faults([{"method": "execute*", "status": "GENERAL_FAILURE",
                             "when": "always"}], device="npu")  # fmt: skip
        compilation = Compilation(chain_model(), [npu]).finish()
        try:
            real = devices.ReferenceStep.run
            failed = []

            def flaky(self, inputs, shapes, **kw):
                # the partial retry of the npu's first step fails once on the CPU too
                if not failed and len(self.prepared.model.main.operations) == 1:
                    failed.append(1)
                    from nnhal.errors import GeneralFailure

                    raise GeneralFailure("injected on the CPU retry")
                return real(self, inputs, shapes, **kw)

            monkeypatch.setattr(devices.ReferenceStep, "run", flaky)
            outs, execution = _run(compilation)
        finally:
            compilation.release()
    np.testing.assert_array_equal(outs[0], EXPECTED)
    kinds = [f.kind for f in execution.report.fallbacks]
    assert kinds == ["partial", "full"]
    assert execution.report.steps[-1].device == "nnapi-reference"


def test_no_fallback_without_the_cpu_device():
    with served(profile("npu")) as (address, (npu,)), Control(address) as control:
        control.set_faults([{"method": "execute*", "status": "DEVICE_UNAVAILABLE"}],
                           device="npu")  # fmt: skip
        compilation = Compilation(chain_model(), [npu], use_reference=False).finish()
        try:
            with pytest.raises(HalError) as info:
                _run(compilation)
        finally:
            compilation.release()
    assert info.value.status.name == "DEVICE_UNAVAILABLE"


def test_fault_inside_an_interpreted_loop_body_falls_back_for_that_iteration():
    from test_runtime_control_flow import doubling_loop, expected_doubled, npu_profile, values

    from nnhal.types import OperandType

    model = doubling_loop(OperandType.TENSOR_FLOAT32, 0.0, 0, None)
    x = values(np.float32)
    with (
        served(npu_profile(exclude=["LESS"])) as (address, (npu,)),
        Control(address) as control,
    ):
        control.set_faults(
            [{"method": "executeSynchronously_1_3", "status": "GENERAL_FAILURE",
              "when": "nth", "n": 2}],
            device="npu",
        )  # fmt: skip
        compilation = Compilation(model, [npu]).finish()
        try:
            execution = Execution(compilation)
            for k, v in enumerate([x, np.array([0], np.int32), np.array([3], np.int32)]):
                execution.set_input(k, v)
            execution.set_output(0)
            execution.set_output(1)
            outs = execution.compute()
        finally:
            compilation.release()
    np.testing.assert_array_equal(outs[0], expected_doubled(x, 3))
    assert [(f.kind, f.status) for f in execution.report.fallbacks] == [
        ("partial", "GENERAL_FAILURE")
    ]
    assert list(execution.report.loop_iterations.values()) == [3]


@pytest.mark.parametrize("mode, method", [("async", "execute_1_3"), ("fenced", "executeFenced")])
@pytest.mark.parametrize("status", ["DEVICE_UNAVAILABLE", "GENERAL_FAILURE"])
def test_nth_execution_fault_in_other_modes_falls_back(mode, method, status):
    with served(profile("npu")) as (address, (npu,)), Control(address) as control:
        control.set_faults(
            [{"method": method, "status": status, "when": "nth", "n": 2}], device="npu"
        )
        compilation = Compilation(chain_model(), [npu]).finish()  # simple plan on npu
        try:
            runs = []
            for _ in range(3):
                execution = Execution(compilation)
                execution.set_input(0, X)
                execution.set_input(1, Y)
                execution.set_output(0)
                runs.append((execution.compute(mode), execution))
        finally:
            compilation.release()
    for outs, _ in runs:
        np.testing.assert_array_equal(outs[0], EXPECTED)
    kinds = [[(f.kind, f.device, f.status) for f in e.report.fallbacks] for _, e in runs]
    assert kinds == [[], [("partial", "npu", status)], []]
    assert [s.device for s in runs[1][1].report.steps] == ["npu", "nnapi-reference"]
    assert [t["call"] for t in runs[1][1].report.trace] == ["execute", "partial-fallback",
                                                            "execute"]  # fmt: skip

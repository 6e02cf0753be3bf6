"""The partitioner's and the compilation's rules checked against AOSP's ExecutionPlan.cpp,
Manager.cpp and CompilationBuilder.cpp: first-in-first-out device queues, the CPU device's
figures, float32 figures, a bad getSupportedOperations answer, and the compilation's CPU
fallback when a device fails to prepare."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.runtime.api import Compilation, Execution
from nnhal.runtime.partition import FLT_MAX, _Figures, partition
from nnhal.runtime.reference import reference_device
from runtime_helpers import served
from test_runtime_partition import EXPECTED, X, Y, chain_model, profile

from nnhal.builder import ModelBuilder
from nnhal.control import Control
from nnhal.errors import InvalidArgument
from nnhal.types import ExecutionPreference
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32 = T.TENSOR_FLOAT32
FAST = ExecutionPreference.FAST_SINGLE_ANSWER


def fan_model():
    """op 0 ADD(x, x), op 1 MUL(y, y) -> t, op 2 ADD(t, x), op 3 ADD(x, y): with MUL only on the
    CPU, ops 0 and 3 are ready at once and op 2 only after the CPU step."""
    mb = ModelBuilder()
    g = mb.main
    x, y = g.input(F32, [3]), g.input(F32, [3])
    act = g.constant(T.INT32, 0)
    out0, t = g.output(F32, [3]), g.temporary(F32, [3])
    out2, out3 = g.output(F32, [3]), g.output(F32, [3])
    g.operation(O.ADD, [x, x, act], [out0])
    g.operation(O.MUL, [y, y, act], [t])
    g.operation(O.ADD, [t, x, act], [out2])
    g.operation(O.ADD, [x, y, act], [out3])
    return mb.build()


def test_device_queues_are_first_in_first_out():
    with served(profile("npu", exclude=["MUL"])) as (_, (npu,)):
        plan = partition(fan_model(), [npu, reference_device()], FAST)
        # the CPU's queue goes first (the highest device index); then the npu's queue holds
        # 0 and 3 (ready from the start) and 2 (ready after the CPU step), in that order
        assert [(s.device, s.operations) for s in plan.steps] == [(1, [1]), (0, [0, 3, 2])]
        compilation = Compilation(fan_model(), [npu]).finish()
        try:
            execution = Execution(compilation)
            execution.set_input(0, X)
            execution.set_input(1, Y)
            for k in range(3):
                execution.set_output(k)
            outs = execution.compute()
        finally:
            compilation.release()
    np.testing.assert_array_equal(outs[0], X + X)
    np.testing.assert_array_equal(outs[1], Y * Y + X)
    np.testing.assert_array_equal(outs[2], X + Y)


def test_cpu_figures_are_one_for_every_type_and_a_missing_type_is_flt_max():
    cpu = _Figures(reference_device())
    for code in (int(F32), int(T.TENSOR_QUANT8_ASYMM), 0x10001):  # 0x10001: an extension type
        assert cpu.of_type(code, FAST) == 1.0
        assert cpu.of_type(code, ExecutionPreference.LOW_POWER) == 1.0
    assert cpu.named("whilePerformance", FAST) == 1.0
    with served(profile("npu", exec_time=0.1)) as (_, (npu,)):
        figures = _Figures(npu)
        assert figures.of_type(0x10001, FAST) == FLT_MAX
        assert figures.of_type(int(F32), FAST) == float(np.float32(0.1))  # float32, as Android


def test_a_wrong_length_support_answer_means_no_support(monkeypatch):
    with served(profile("npu")) as (_, (npu,)):
        monkeypatch.setattr(
            npu.device, "explainSupportedOperations", lambda model: ([True], {})
        )  # one answer for three operations
        supported, reasons = npu.explain(chain_model())
        assert supported == [False, False, False]
        assert "returned 1 answers for 3 operations" in reasons[0]
        plan = partition(chain_model(), [npu, reference_device()], FAST)
        assert plan.simple and plan.devices[plan.steps[0].device].is_reference


@pytest.mark.parametrize("status", ["GENERAL_FAILURE", "DEVICE_UNAVAILABLE"])
def test_a_failed_preparation_sends_the_whole_model_to_the_cpu(status):
    with (
        served(profile("npu", exclude=["MUL"])) as (address, (npu,)),
        Control(address) as control,
    ):
        control.set_faults(
            [{"method": "prepareModel_1_3", "status": status, "when": "nth", "n": 2}],
            device="npu",
        )
        compilation = Compilation(chain_model(), [npu]).finish()  # npu's 2nd step fails
        try:
            assert compilation.fallback["status"] == status
            assert compilation.plan.simple
            assert compilation.plan.devices[compilation.plan.steps[0].device].is_reference
            execution = Execution(compilation)
            execution.set_input(0, X)
            execution.set_input(1, Y)
            execution.set_output(0)
            outs = execution.compute()
        finally:
            compilation.release()
    np.testing.assert_array_equal(outs[0], EXPECTED)
    assert [s.device for s in execution.report.steps] == ["nnapi-reference"]


def test_no_compile_fallback_for_invalid_argument_or_without_the_cpu():
    with served(profile("npu")) as (address, (npu,)), Control(address) as control:
        control.set_faults(
            [{"method": "prepareModel_1_3", "status": "INVALID_ARGUMENT", "when": "always"}],
            device="npu",
        )
        with pytest.raises(InvalidArgument):  # the app's error (BAD_DATA): no fallback
            Compilation(chain_model(), [npu]).finish()
        control.set_faults(
            [{"method": "prepareModel_1_3", "status": "GENERAL_FAILURE", "when": "always"}],
            device="npu",
        )
        compilation = Compilation(chain_model(), [npu], use_reference=False)
        with pytest.raises(Exception, match="GENERAL_FAILURE|injected") as err:
            compilation.finish()  # createForDevices: no fallback
        assert type(err.value).__name__ == "GeneralFailure"
        assert compilation.plan is None and compilation.fallback is None

"""Partitioning as Android's runtime does it: best device per operation, CPU wins ties,
contiguous steps, temporaries crossing steps, the simple plan, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.runtime.api import BadState, Compilation, Execution, result_code, run_model
from nnhal.runtime.partition import DeviceStep, partition
from nnhal.runtime.reference import reference_device
from runtime_helpers import served

from nnhal.builder import ModelBuilder
from nnhal.errors import InvalidArgument
from nnhal.types import ExecutionPreference
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32 = T.TENSOR_FLOAT32


def chain_model():
    """x -> ADD(x, y) -> MUL(t, y) -> SUB(u, y) -> out: three operations in a row."""
    mb = ModelBuilder()
    g = mb.main
    x, y = g.input(F32, [3]), g.input(F32, [3])
    act = g.constant(T.INT32, 0)
    t, u = g.temporary(F32, [3]), g.temporary(F32, [3])
    out = g.output(F32, [3])
    g.operation(O.ADD, [x, y, act], [t])
    g.operation(O.MUL, [t, y, act], [u])
    g.operation(O.SUB, [u, y, act], [out])
    return mb.build()


X = np.array([1, 2, 3], np.float32)
Y = np.array([4, 5, 6], np.float32)
EXPECTED = (X + Y) * Y - Y


def profile(name, exclude=(), exec_time=0.5, power=0.5):
    return {
        "name": name,
        "type": "ACCELERATOR",
        "exclude_operations": list(exclude),
        "capabilities": {"default": {"execTime": exec_time, "powerUsage": power}},
    }


def test_unsupported_middle_operation_splits_into_three_steps():
    with served(profile("npu", exclude=["MUL"])) as (_, (npu,)):
        plan = partition(
            chain_model(), [npu, reference_device()], ExecutionPreference.FAST_SINGLE_ANSWER
        )
        steps = [(s.device, s.operations) for s in plan.steps]
        assert steps == [(0, [0]), (1, [1]), (0, [2])]
        # the temporaries crossing steps became step inputs and outputs
        assert plan.steps[0].io.outputs == (3,) and plan.steps[1].io.inputs == (3, 1)
        outs, execution = run_model(chain_model(), [X, Y], [npu])
        np.testing.assert_array_equal(outs[0], EXPECTED)
        assert [s.device for s in execution.report.steps] == ["npu", "nnapi-reference", "npu"]
        assert not execution.report.fallbacks


def test_cpu_wins_ties():
    with served(profile("npu", exec_time=1.0, power=1.0)) as (_, (npu,)):
        plan = partition(
            chain_model(), [npu, reference_device()], ExecutionPreference.FAST_SINGLE_ANSWER
        )
        assert plan.simple and plan.steps[0].device == 1  # the CPU (index 1) won every tie


def test_preference_picks_the_figure_compared():
    # npu: faster but hungrier than the CPU (1.0 / 1.0)
    with served(profile("npu", exec_time=0.5, power=2.0)) as (_, (npu,)):
        devices = [npu, reference_device()]
        fast = partition(chain_model(), devices, ExecutionPreference.FAST_SINGLE_ANSWER)
        low = partition(chain_model(), devices, ExecutionPreference.LOW_POWER)
        assert fast.simple and fast.steps[0].device == 0
        assert low.simple and low.steps[0].device == 1
        assert fast.choices[0].perf == {0: 0.5, 1: 1.0}


def test_simple_plan_uses_the_whole_model():
    with served(profile("npu")) as (_, (npu,)):
        model = chain_model()
        plan = partition(model, [npu, reference_device()], ExecutionPreference.SUSTAINED_SPEED)
        assert plan.simple and isinstance(plan.steps[0], DeviceStep)
        assert plan.steps[0].io.model is model


def test_two_devices_each_take_what_they_support():
    with served(
        profile("a", exclude=["MUL", "SUB"]), profile("b", exclude=["ADD"], exec_time=0.7)
    ) as (
        _,
        (a, b),
    ):
        outs, execution = run_model(chain_model(), [X, Y], [a, b], use_reference=False)
        np.testing.assert_array_equal(outs[0], EXPECTED)
        assert [s.device for s in execution.report.steps] == ["a", "b"]


def test_no_device_supports_an_operation_is_invalid_argument_naming_it():
    with (
        served(profile("npu", exclude=["MUL"])) as (_, (npu,)),
        pytest.raises(InvalidArgument, match=r"operation 1 \(MUL\).*npu: .*excluded"),
    ):
        run_model(chain_model(), [X, Y], [npu], use_reference=False)


def test_bad_inputs_and_states():
    compilation = Compilation(chain_model())
    with pytest.raises(BadState):
        Execution(compilation)  # not finished
    compilation.finish()
    with pytest.raises(BadState):
        compilation.set_preference(ExecutionPreference.LOW_POWER)
    execution = Execution(compilation)
    with pytest.raises(InvalidArgument, match="input 5 does not exist"):
        execution.set_input(5, X)
    execution.set_input(0, X)
    with pytest.raises(BadState, match="not all inputs"):
        execution.compute()
    execution.set_input(1, Y)
    execution.set_output(0, np.zeros(1, np.float32))  # too small
    with pytest.raises(Exception) as info:
        execution.compute()
    assert result_code(info.value) == 8  # ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE
    assert execution.output_shapes[0].dimensions == (3,)
    assert not execution.output_shapes[0].isSufficient
    with pytest.raises(BadState):
        execution.compute()  # an execution runs once
    with pytest.raises(InvalidArgument, match="token"):
        Compilation(chain_model()).set_caching("/tmp", b"short")
    compilation.release()


def test_output_buffer_is_filled_and_modes_agree():
    compilation = Compilation(chain_model()).finish()
    try:
        for mode in ("sync", "async", "burst", "fenced"):
            execution = Execution(compilation)
            execution.set_input(0, X)
            execution.set_input(1, Y)
            buffer = np.zeros(3, np.float32)
            execution.set_output(0, buffer)
            if mode == "async":
                execution.start_compute().result(timeout=60)
            else:
                execution.compute(mode)
            np.testing.assert_array_equal(buffer, EXPECTED)
            assert execution.get_output_operand_dimensions(0) == (3,)
    finally:
        compilation.release()


def test_timeouts_and_timing_need_a_single_device_compilation():
    with served(profile("npu", exclude=["MUL"])) as (_, (npu,)):
        two = Compilation(chain_model(), [npu])
        with pytest.raises(InvalidArgument, match="exactly one device"):
            two.set_timeout(10**9)
        one = Compilation(chain_model(), [npu], use_reference=False)
        with pytest.raises(InvalidArgument, match="no device can run operation 1"):
            one.finish()
    alone = Compilation(chain_model())  # nnapi-reference alone
    alone.set_timeout(10**10)
    alone.finish()
    try:
        execution = Execution(alone)
        execution.set_measure_timing(True)
        execution.set_timeout(10**10)
        execution.set_input(0, X)
        execution.set_input(1, Y)
        execution.set_output(0)
        np.testing.assert_array_equal(execution.compute()[0], EXPECTED)
        duration = execution.get_duration()
        assert 0 <= duration["ON_HARDWARE"] <= duration["IN_DRIVER"] < 2**64 - 1
    finally:
        alone.release()


def test_supported_operations_for_devices():
    from nnhal.runtime.api import get_supported_operations_for_devices

    with served(profile("npu", exclude=["MUL"])) as (_, (npu,)):
        assert get_supported_operations_for_devices(chain_model(), [npu]) == [True, False, True]
        both = [npu, reference_device()]
        assert get_supported_operations_for_devices(chain_model(), both) == [True, True, True]


def test_compilation_caching_writes_the_device_cache(tmp_path):
    with served(profile("npu", exclude=["MUL"]), cache_root=tmp_path) as (_, (npu,)):
        for _ in range(2):  # the second compilation finds the files the first wrote
            compilation = Compilation(chain_model(), [npu])
            compilation.set_caching(tmp_path, b"t" * 32)
            compilation.finish()
            outs, _ = run_compiled(compilation)
            compilation.release()
            np.testing.assert_array_equal(outs[0], EXPECTED)
        assert npu.cache_hits == 2  # both npu steps of the second compilation
    assert any(p.stat().st_size > 0 for p in tmp_path.iterdir())


def run_compiled(compilation, execution=None):
    execution = execution or Execution(compilation)
    execution.set_input(0, X)
    execution.set_input(1, Y)
    execution.set_output(0)
    return execution.compute(), execution


def test_dynamic_shapes_flow_between_steps():
    """A temporary of unknown dimensions crossing from the npu to the CPU: the npu step is
    re-run with the buffer its first run reported as needed."""
    mb = ModelBuilder()
    g = mb.main
    x, y = g.input(F32, [3]), g.input(F32, [3])
    act = g.constant(T.INT32, 0)
    t = g.temporary(F32, [0])  # unknown size
    out = g.output(F32, [0])
    g.operation(O.ADD, [x, y, act], [t])
    g.operation(O.MUL, [t, y, act], [out])
    with served(profile("npu", exclude=["MUL"])) as (_, (npu,)):
        outs, execution = run_model(mb.build(), [X, Y], [npu])
    np.testing.assert_array_equal(outs[0], (X + Y) * Y)
    assert [s.reruns for s in execution.report.steps] == [1, 1]
    assert execution.output_shapes[0].dimensions == (3,)


def test_deadline_already_passed_is_a_missed_deadline():
    from nnhal.errors import MissedDeadline

    compilation = Compilation(chain_model()).finish()
    try:
        execution = Execution(compilation)
        execution.set_timeout(0)
        execution.set_input(0, X)
        execution.set_input(1, Y)
        execution.set_output(0)
        with pytest.raises(MissedDeadline):
            execution.compute()
        assert result_code(MissedDeadline("", transient=True)) == 10
    finally:
        compilation.release()


def test_per_step_timing_and_the_earlier_device_keeps_a_tie():
    with served(profile("a", exclude=["MUL"]), profile("b")) as (_, (a, b)):
        plan = partition(
            chain_model(), [a, b, reference_device()], ExecutionPreference.FAST_SINGLE_ANSWER
        )
        assert [c.device for c in plan.choices] == [0, 1, 0]  # a and b tie at 0.5: a keeps it
        compilation = Compilation(chain_model(), [a, b]).finish()
        try:
            execution = Execution(compilation)
            with pytest.raises(InvalidArgument):
                execution.set_measure_timing(True)  # Android: one-device compilations only
            execution.set_measure_step_timing(True)
            outs, execution = run_compiled(compilation, execution)
        finally:
            compilation.release()
    np.testing.assert_array_equal(outs[0], EXPECTED)
    timings = execution.step_timings()
    assert [(s, d) for s, d, _ in timings] == [(0, "a"), (1, "b"), (2, "a")]
    for _, _, t in timings:
        assert 0 <= t.timeOnDevice <= t.timeInDriver < 2**64 - 1

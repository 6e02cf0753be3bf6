"""The one-step fast path gives what the general path gives: outputs, report, errors,
re-runs with larger buffers; the CPU device's reused request layout follows the inputs."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.runtime.api import Compilation, Execution
from nnhal.runtime.executor import PlanRun
from runtime_helpers import served
from test_runtime_partition import EXPECTED, X, Y, chain_model, profile

from nnhal.builder import ModelBuilder
from nnhal.errors import InvalidArgument
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O


def _execute(compilation, inputs, mode="sync"):
    execution = Execution(compilation)
    for k, value in enumerate(inputs):
        execution.set_input(k, value)
    for k in range(len(compilation.model.main.outputIndexes)):
        execution.set_output(k)
    return execution.compute(mode), execution


@pytest.mark.parametrize("on", ["cpu", "npu"])
@pytest.mark.parametrize("mode", ["sync", "burst"])
def test_fast_path_report_is_the_general_paths(on, mode):
    with served(profile("npu", exec_time=0.5)) as (_, (npu,)):
        compilation = Compilation(chain_model(), [npu] if on == "npu" else []).finish()
        try:
            assert compilation.single is not None
            outs, execution = _execute(compilation, [X, Y], mode)
            general = PlanRun(compilation, mode=mode)
            general_outs = general.run([X, Y])
        finally:
            compilation.release()
    np.testing.assert_array_equal(outs[0], EXPECTED)
    np.testing.assert_array_equal(general_outs[0], EXPECTED)
    assert execution.report.to_json() == general.report.to_json()
    assert execution.report.steps[0].device == ("npu" if on == "npu" else "nnapi-reference")
    assert execution.output_shapes[0].dimensions == (3,)


def test_report_is_empty_before_compute_and_a_bad_state_after():
    compilation = Compilation(chain_model()).finish()
    execution = Execution(compilation)
    assert execution.report.to_json()["steps"] == []
    execution.set_input(0, X)
    with pytest.raises(Exception, match="not all inputs and outputs are set"):
        execution.compute()
    execution.set_input(1, Y)
    execution.set_output(0)
    execution.compute()
    assert [s["device"] for s in execution.report.to_json()["steps"]] == ["nnapi-reference"]
    with pytest.raises(Exception, match="has started"):
        execution.set_input(0, X)
    with pytest.raises(Exception, match="has started"):
        execution.compute()
    compilation.release()


def _unknown_size_model():
    """out = x + x, with x and out of unknown length: a simple plan whose output buffer the
    first run cannot size (the device answers OUTPUT_INSUFFICIENT_SIZE; the runtime re-runs)."""
    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [0])
    out = g.output(T.TENSOR_FLOAT32, [0])
    g.operation(O.ADD, [x, x, g.constant(T.INT32, 0)], [out])
    return mb.build()


def test_fast_path_rerun_with_larger_buffers_and_layout_following_the_inputs():
    compilation = Compilation(_unknown_size_model()).finish()
    try:
        for value in ([1.0, 2.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [5.0]):
            x = np.array(value, np.float32)
            outs, execution = _execute(compilation, [x])
            np.testing.assert_array_equal(outs[0], x + x)
            assert execution.report.steps[0].reruns == 1
        # an input of another dtype is converted as before (not the cached layout's bytes)
        outs, _ = _execute(compilation, [np.array([1, 2], np.int8)])
        np.testing.assert_array_equal(outs[0], np.array([2, 4], np.float32))
        # a bad input after a cached layout is still refused, naming the input
        with pytest.raises(InvalidArgument, match="input 0"):
            _execute(compilation, [np.array(["a", "b"])])
    finally:
        compilation.release()


def test_layout_reuse_keeps_each_execution_its_own_outputs():
    compilation = Compilation(chain_model()).finish()
    try:
        first, _ = _execute(compilation, [X, Y])
        second, _ = _execute(compilation, [Y, X])
        third, _ = _execute(compilation, [X.astype(np.float64), Y])  # converted: IoPlan path
    finally:
        compilation.release()
    np.testing.assert_array_equal(first[0], EXPECTED)
    np.testing.assert_array_equal(second[0], (Y + X) * X - X)
    np.testing.assert_array_equal(third[0], EXPECTED)
    assert not np.shares_memory(first[0], second[0]) and first[0].flags.writeable


def test_fast_path_with_the_callers_dimensions_and_buffer():
    compilation = Compilation(_unknown_size_model()).finish()
    x = np.array([1.0, 2.0], np.float32)
    try:
        execution = Execution(compilation)
        execution.set_input(0, x)
        execution.set_output(0, None, (2,))  # the size known: no re-run
        np.testing.assert_array_equal(execution.compute()[0], x + x)
        general = PlanRun(compilation, output_shapes=[(2,)])
        general.run([x])
        assert execution.report.to_json() == general.report.to_json()
        assert execution.report.steps[0].reruns == 0
        buffer = np.zeros(2, np.float32)
        execution = Execution(compilation)
        execution.set_input(0, x)
        execution.set_output(0, buffer)
        execution.compute()
        np.testing.assert_array_equal(buffer, x + x)
        small = np.zeros(1, np.float32)
        execution = Execution(compilation)
        execution.set_input(0, x)
        execution.set_output(0, small)
        with pytest.raises(Exception, match="smaller than the results") as err:
            execution.compute()
        assert type(err.value).__name__ == "OutputInsufficientSize"
        assert execution.output_shapes[0].dimensions == (2,)
        assert not execution.output_shapes[0].isSufficient
    finally:
        compilation.release()

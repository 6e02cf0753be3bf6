"""The NDK-shaped API's less used calls: inputs and outputs in shared memory
(setInputFromMemory / setOutputFromMemory), the compilation's priority reaching the prepared
model, a model loaded from a vector file."""

from __future__ import annotations

from multiprocessing import shared_memory

import numpy as np
import pytest
from nnhal.runtime.api import BadState, Compilation, Execution, Model, result_code
from runtime_helpers import served
from test_runtime_partition import EXPECTED, X, Y, chain_model, profile

from nnhal.errors import OutputInsufficientSize
from nnhal.types import Priority
from nnhal.vectors import model_to_json, save_vectors

SENTINEL = -7.0  # what the shared memory holds around the output's bytes


@pytest.fixture()
def shm():
    segment = shared_memory.SharedMemory(create=True, size=16 * 4)
    try:
        yield segment
    finally:
        segment.close()
        segment.unlink()


def _through_memory(compilation, segment, out_length=12):
    floats = np.ndarray((16,), np.float32, buffer=segment.buf)
    floats[:] = SENTINEL
    floats[0:3], floats[3:6] = X, Y
    execution = Execution(compilation)
    execution.set_input_from_memory(0, segment, 0, 12, np.float32, [3])
    execution.set_input_from_memory(1, segment, 12, 12, np.float32, [3])
    execution.set_output_from_memory(0, segment, 32, out_length, np.float32, [3])
    return floats, execution


@pytest.mark.parametrize("where", ["cpu", "partitioned"])
def test_inputs_and_outputs_in_shared_memory(shm, where):
    # cpu: a simple plan (the fast path); partitioned: three steps over two devices
    with served(profile("npu", exclude=["MUL"])) as (_, (npu,)):
        compilation = Compilation(chain_model(), [npu] if where == "partitioned" else [])
        compilation.finish()
        try:
            floats, execution = _through_memory(compilation, shm)
            outputs = execution.compute()
            steps = [s.device for s in execution.report.steps]
            result = floats.copy()
            del floats, execution  # the segment cannot close while a view of it lives
        finally:
            compilation.release()
    np.testing.assert_array_equal(outputs[0], EXPECTED)
    np.testing.assert_array_equal(result[8:11], EXPECTED)  # written where it was asked
    np.testing.assert_array_equal(result[11:], SENTINEL)  # and nothing beyond it
    np.testing.assert_array_equal(result[0:6], np.concatenate([X, Y]))
    expected_steps = ["npu", "nnapi-reference", "npu"] if where == "partitioned" else None
    assert steps == (expected_steps or ["nnapi-reference"])


def test_output_memory_too_small_is_output_insufficient_size(shm):
    compilation = Compilation(chain_model()).finish()
    try:
        floats, execution = _through_memory(compilation, shm, out_length=8)
        with pytest.raises(OutputInsufficientSize) as info:
            execution.compute()
        untouched = floats[8:].copy()
        dimensions = execution.get_output_operand_dimensions(0)
        code, shapes = result_code(info.value), info.value.shapes
        # the segment cannot close while a view of it lives (the traceback's frames hold one)
        del floats, execution, info
    finally:
        compilation.release()
    assert code == 8  # ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE
    assert [(s.dimensions, s.isSufficient) for s in shapes] == [((3,), False)]
    assert dimensions == (3,)  # what the output needs, as getOutputOperandDimensions tells
    np.testing.assert_array_equal(untouched, SENTINEL)  # nothing written


def test_priority_reaches_the_prepared_model_and_is_fixed_at_finish(tmp_path):
    path = tmp_path / "chain.json"
    doc = model_to_json(chain_model(), name="chain/base", inputs=[X, Y], expected=[EXPECTED])
    save_vectors(path, [doc])
    compilation = Compilation(Model.from_file(path, "chain/base"))
    compilation.set_priority(Priority.HIGH)
    compilation.finish()
    try:
        assert compilation.single[2].prepared.priority == Priority.HIGH
        with pytest.raises(BadState):
            compilation.set_priority(Priority.LOW)
        execution = Execution(compilation)
        execution.set_input(0, X)
        execution.set_input(1, Y)
        execution.set_output(0)
        np.testing.assert_array_equal(execution.compute()[0], EXPECTED)
    finally:
        compilation.release()
    with pytest.raises(ValueError, match="no test model named nothing"):
        Model.from_file(path, "nothing")

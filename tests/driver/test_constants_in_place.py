"""Constants of Model.operandValues read in place (driver/executor/operands.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
from nnhal.driver.executor import compile_model

from nnhal.builder import ModelBuilder
from nnhal.types import DataLocation, InlineMemory, OperandLifeTime
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32 = T.TENSOR_FLOAT32


def _add_model():
    mb = ModelBuilder()
    g = mb.main
    x, y = g.input(F32, [2]), g.output(F32, [2])
    g.operation(O.ADD, [x, g.constant(F32, [1.5, -2.0]), g.constant(T.INT32, 0)], [y])
    return mb.build()


def _shifted(model, by: int):
    """The same model with operandValues starting ``by`` bytes later."""
    operands = []
    for operand in model.main.operands:
        if operand.lifetime == OperandLifeTime.CONSTANT_COPY:
            loc = operand.location
            operand = dataclasses.replace(
                operand, location=dataclasses.replace(loc, offset=loc.offset + by)
            )
        operands.append(operand)
    main = dataclasses.replace(model.main, operands=tuple(operands))
    return dataclasses.replace(model, main=main, operandValues=b"\0" * by + model.operandValues)


def _inside(value: np.ndarray, data: bytes) -> bool:
    start = np.frombuffer(data, np.uint8).ctypes.data
    return start <= value.ctypes.data < start + len(data)


def _constants(compiled):
    return [v for plan in compiled.plans.values() for v in plan.constants.values()]


def test_aligned_constants_are_views_of_the_model_bytes():
    model = _add_model()
    compiled = compile_model(model)
    values = _constants(compiled)
    assert values and all(_inside(v, model.operandValues) for v in values)
    assert all(not v.flags.writeable for v in values)
    x = np.array([1.0, 1.0], np.float32)
    np.testing.assert_array_equal(compiled.run([x])[0], [2.5, -1.0])


def test_misaligned_constants_are_copied():
    model = _shifted(_add_model(), 1)
    compiled = compile_model(model)
    values = _constants(compiled)
    assert values and not any(_inside(v, model.operandValues) for v in values)
    assert all(v.flags.aligned and not v.flags.writeable for v in values)
    x = np.array([1.0, 1.0], np.float32)
    np.testing.assert_array_equal(compiled.run([x])[0], [2.5, -1.0])


def test_constants_in_pools_are_copied():
    model = _add_model()
    operands = [
        dataclasses.replace(
            o,
            lifetime=OperandLifeTime.CONSTANT_REFERENCE,
            location=DataLocation(0, o.location.offset, o.location.length),
        )
        if o.lifetime == OperandLifeTime.CONSTANT_COPY
        else o
        for o in model.main.operands
    ]
    pooled = dataclasses.replace(
        model,
        main=dataclasses.replace(model.main, operands=tuple(operands)),
        operandValues=b"",
        pools=(InlineMemory(model.operandValues),),
    )
    compiled = compile_model(pooled)
    values = _constants(compiled)
    assert values and not any(_inside(v, model.operandValues) for v in values)
    x = np.array([1.0, 1.0], np.float32)
    np.testing.assert_array_equal(compiled.run([x])[0], [2.5, -1.0])

"""Constants of Model.operandValues read in place, and what the device hands the compiler
(driver/executor/operands.py, compiler.Checked)."""

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


def _prepared_constants(device, model):
    compiled = device.prepareModel_1_3(model).compiled
    return compiled, _constants(compiled)


def test_device_hands_its_views_to_the_compiler():
    # the analysis read the weights in place already: the compiler keeps those arrays
    # and the descriptions holding them, instead of decoding and describing again
    from nnhal.driver.device import Device

    model = _add_model()
    compiled, values = _prepared_constants(Device(), model)
    assert values and all(_inside(v, model.operandValues) for v in values)
    assert all(not v.flags.writeable for v in values)
    plan = compiled.plans[0]
    step = plan.steps[0]
    for position, index in enumerate(step.inputs):
        if index in plan.constants and step.context.inputs[position].value is not None:
            assert step.context.inputs[position].value is plan.constants[index]
    x = np.array([1.0, 1.0], np.float32)
    np.testing.assert_array_equal(compiled.run([x])[0], [2.5, -1.0])


def test_device_copies_misaligned_constants_still():
    from nnhal.driver.device import Device

    model = _shifted(_add_model(), 1)
    _, values = _prepared_constants(Device(), model)
    assert values and not any(_inside(v, model.operandValues) for v in values)
    assert all(v.flags.aligned and not v.flags.writeable for v in values)


def test_kept_descriptions_never_lend_another_model_its_constants():
    # an identical model decoded anew: the kept descriptions read the first model's
    # bytes, so the second model's constants are decoded from its own
    from nnhal.driver.device import Device

    device = Device()
    first = _add_model()
    second = dataclasses.replace(first, operandValues=bytes(bytearray(first.operandValues)))
    assert second.operandValues is not first.operandValues
    _prepared_constants(device, first)
    compiled, values = _prepared_constants(device, second)
    assert values and all(_inside(v, second.operandValues) for v in values)
    assert not any(_inside(v, first.operandValues) for v in values)
    x = np.array([1.0, 1.0], np.float32)
    np.testing.assert_array_equal(compiled.run([x])[0], [2.5, -1.0])


def test_the_kernel_is_bound_on_the_checked_context():
    # the descriptions are the device's very objects, so the context the checks ran on
    # serves the binding (and what the checks worked out on it); a context checked for
    # an earlier identical model never does
    from nnhal.driver.device import Device

    device = Device()
    first = _add_model()
    analysis = device.analyze(first)
    checked = analysis.checked()
    compiled = compile_model(first, pool_views=analysis.pool_views(), checked=checked)
    assert compiled.plans[0].steps[0].context is checked.contexts[(0, 0)]

    second = dataclasses.replace(first, operandValues=bytes(bytearray(first.operandValues)))
    revived = device.analyze(second)
    assert revived.kept is not None and not revived.checked().contexts
    compiled = compile_model(second, pool_views=revived.pool_views(), checked=revived.checked())
    assert compiled.plans[0].steps[0].context is not checked.contexts[(0, 0)]
    x = np.array([1.0, 1.0], np.float32)
    np.testing.assert_array_equal(compiled.run([x])[0], [2.5, -1.0])

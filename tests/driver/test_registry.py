"""The operation registry: coverage of HAL 1.3 and the generic validation.

Every HAL 1.3 OperationType is registered, or is one of IF/WHILE (owned by the
executor) and OEM_OPERATION (never run), and never both.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops import registry
from nnhal.driver.ops.registry import (
    OpContext,
    OperandInfo,
    lookup,
    registered,
    scalar_input_indexes,
    validate_operation,
)

from nnhal.errors import InvalidArgument
from nnhal.types import OPERAND_TYPE_INFO, HalVersion, OperandType, OperationType

NOT_IN_REGISTRY = {OperationType.IF, OperationType.WHILE, OperationType.OEM_OPERATION}
#: the first operations the executor ran (arithmetic, comparison, logic, SELECT, CAST,
#: FULLY_CONNECTED and the basic shaping ones): each registration checked in detail below
FOUNDATION_OPERATIONS = {
    OperationType[name]
    for name in [
        "ADD",
        "SUB",
        "MUL",
        "DIV",
        "LESS",
        "LESS_EQUAL",
        "GREATER",
        "GREATER_EQUAL",
        "EQUAL",
        "NOT_EQUAL",
        "LOGICAL_AND",
        "LOGICAL_OR",
        "LOGICAL_NOT",
        "SELECT",
        "CAST",
        "FULLY_CONNECTED",
        "RESHAPE",
        "CONCATENATION",
        "SLICE",
    ]
}


def test_every_hal13_operation_is_registered():
    implemented = set(registered())
    assert not implemented & NOT_IN_REGISTRY
    missing = set(OperationType) - implemented - NOT_IN_REGISTRY
    assert not missing, f"not registered: {sorted(m.name for m in missing)}"
    assert len(implemented) == 100  # 102 fundamental operations minus IF and WHILE


def test_foundation_operations_are_registered():
    assert FOUNDATION_OPERATIONS <= set(registered())


@pytest.mark.parametrize("op", sorted(FOUNDATION_OPERATIONS), ids=lambda o: o.name)
def test_registration_is_well_formed(op: OperationType):
    definition = lookup(op)
    assert definition.type == op
    assert definition.types, "no operand types"
    for type_code, version in definition.types.items():
        assert not OPERAND_TYPE_INFO[type_code].is_scalar
        assert isinstance(version, HalVersion)
        # an operand type cannot be used before the HAL that introduced it
        assert version >= OPERAND_TYPE_INFO[type_code].version
    assert 0 <= definition.primary < len(definition.inputs)
    assert len(definition.outputs) == 1
    assert callable(definition.execute) and callable(definition.prepare)


def test_lookup_of_unregistered_codes():
    assert lookup(OperationType.IF) is None
    assert lookup(OperationType.WHILE) is None
    assert lookup(OperationType.OEM_OPERATION) is None
    assert lookup(102) is None
    assert lookup(0x10001) is None


def _info(type_: OperandType, dims=(2,), value=None, omitted=False) -> OperandInfo:
    if OPERAND_TYPE_INFO[type_].is_scalar:
        dims = ()
    return OperandInfo(type_, dims, value=value, omitted=omitted)


def _ctx(op: OperationType, inputs, outputs) -> OpContext:
    return OpContext(lookup(op), list(inputs), list(outputs), where="subgraph 1, operation 0")


F32 = OperandType.TENSOR_FLOAT32
ACT = _info(OperandType.INT32, value=np.array(0, np.int32))


def test_generic_validation_gives_the_version_of_the_primary_type():
    assert validate_operation(_ctx(OperationType.ADD, [_info(F32)] * 2 + [ACT], [_info(F32)])) == (
        HalVersion.V1_0
    )
    assert validate_operation(_ctx(OperationType.SUB, [_info(F32)] * 2 + [ACT], [_info(F32)])) == (
        HalVersion.V1_1
    )


def test_generic_validation_messages_name_subgraph_operation_and_operand():
    ctx = _ctx(OperationType.ADD, [_info(F32), _info(F32, omitted=True), ACT], [_info(F32)])
    with pytest.raises(InvalidArgument) as err:
        validate_operation(ctx)
    assert err.value.message == (
        "ADD (subgraph 1, operation 0): input 1 (input1) is required but has no value"
    )


def test_variadic_operation_counts_its_repeated_input():
    axis = _info(OperandType.INT32, value=np.array(0, np.int32))
    ok = _ctx(OperationType.CONCATENATION, [_info(F32)] * 4 + [axis], [_info(F32, (8,))])
    assert validate_operation(ok) == HalVersion.V1_0
    with pytest.raises(InvalidArgument, match=r"CONCATENATION .*at least 2 inputs, got 1"):
        validate_operation(_ctx(OperationType.CONCATENATION, [axis], [_info(F32)]))


def test_scalar_input_indexes_are_the_ones_kernels_do_not_receive():
    ctx = _ctx(OperationType.FULLY_CONNECTED, [_info(F32)] * 3 + [ACT], [_info(F32)])
    assert scalar_input_indexes(ctx) == [3]


def test_register_refuses_a_second_registration():
    with pytest.raises(ValueError, match="ADD registered twice"):
        registry.register(lookup(OperationType.ADD))


def _state_op():
    """A test-only definition: one output plus an optional trailing state output."""
    return registry.OperationDef(
        OperationType.UNIDIRECTIONAL_SEQUENCE_RNN,
        inputs=(registry.Arg("input"),),
        outputs=(registry.Arg("output"), registry.Arg("state", optional=True)),
        types={F32: HalVersion.V1_2},
        execute=lambda ctx: None,
    )


@pytest.mark.parametrize("count, ok", [(0, False), (1, True), (2, True), (3, False)])
def test_trailing_optional_outputs_may_be_left_off(count, ok):
    ctx = OpContext(_state_op(), [_info(F32)], [_info(F32)] * count, where="subgraph 0")
    if ok:
        assert validate_operation(ctx) == HalVersion.V1_2
    else:
        with pytest.raises(InvalidArgument, match=f"expected 1 to 2 outputs, got {count}"):
            validate_operation(ctx)


def test_optional_output_type_is_still_checked():
    ctx = OpContext(
        _state_op(), [_info(F32)], [_info(F32), _info(OperandType.TENSOR_INT32)], where="s"
    )
    with pytest.raises(InvalidArgument, match=r"output 1 \(state\) has type TENSOR_INT32"):
        validate_operation(ctx)

"""Tests for nnhal.validation.validate_model: the whole-model, operand, operation,
input/output and graph rules (hal13.md §4.1-§4.5), plus the structural side of
the VTS mutations of nnhal.cts.mutations.

Every invalid case asserts InvalidArgument and that the message names the
subgraph / operation / operand concerned and the rule. IF/WHILE and cycles are
in test_validation_control_flow.py, requests in test_validation_request.py;
test_validation_service.py runs every mutation through the device's
registry-based validator and the gRPC service.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from nnhal.cts.mutations import MUTATION_FAMILIES, model_mutations
from validation_models import (  # tests/validation_models.py
    F32,
    L,
    O,
    T,
    add_model,
    expect_invalid,
    extension_model,
    if_model,
    while_model,
    with_operand,
    with_operation,
    with_subgraph,
)

from nnhal.builder import ModelBuilder
from nnhal.errors import InvalidArgument
from nnhal.types import (
    DataLocation,
    ExtensionNameAndPrefix,
    InlineMemory,
    Model,
    Operand,
    Operation,
    SharedMemory,
    SymmPerChannelQuantParams,
    TokenMemory,
)
from nnhal.validation import (
    subgraph_of,
    validate_model,
)

# ---------------------------------------------------------------------------
# Valid models and whole-model rules
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("make", [add_model, while_model, if_model])
def test_valid_models_pass(make):
    validate_model(make())


def test_main_must_have_operations_and_operands():
    m = add_model()
    expect_invalid(with_subgraph(m, 0, operations=()), "subgraph 0 (main)", "0 operations")
    empty = Model(
        main=replace(m.main, operands=(), operations=(), inputIndexes=(), outputIndexes=())
    )
    expect_invalid(empty, "subgraph 0 (main)", "0 operands")


def test_referenced_subgraph_may_be_empty_when_unused():
    m = add_model()
    validate_model(
        replace(
            m,
            referenced=(
                m.main,
                replace(m.main, operations=(), operands=(), inputIndexes=(), outputIndexes=()),
            ),
        )
    )


def test_model_pool_token_is_invalid():
    m = replace(add_model(), pools=(TokenMemory(3),))
    expect_invalid(m, "Model.pools[0]", "token")


def test_model_pool_of_unknown_kind_is_invalid():
    expect_invalid(replace(add_model(), pools=(b"raw",)), "Model.pools[0]", "not a memory pool")


def test_model_pool_shared_memory_needs_a_name():
    expect_invalid(replace(add_model(), pools=(SharedMemory("", 8),)), "Model.pools[0]")


@pytest.mark.parametrize(
    "entries, fragment",
    [
        ((ExtensionNameAndPrefix("com.a.x", 0),), "prefixes are 1..0xFFFF"),
        ((ExtensionNameAndPrefix("com.a.x", 1), ExtensionNameAndPrefix("com.b.y", 1)), "reuses"),
        ((ExtensionNameAndPrefix("com.a.x", 1), ExtensionNameAndPrefix("com.a.x", 2)), "twice"),
    ],
)
def test_extension_prefix_table(entries, fragment):
    expect_invalid(
        replace(add_model(), extensionNameToPrefix=entries), "extensionNameToPrefix", fragment
    )


def test_subgraph_of():
    m = if_model()
    assert subgraph_of(m, 0) is m.main
    assert subgraph_of(m, 2) is m.referenced[1]
    for bad in (3, -1):
        with pytest.raises(InvalidArgument, match=f"subgraph {bad} does not exist"):
            subgraph_of(m, bad)


# ---------------------------------------------------------------------------
# Operand types, dimensions, scale, zeroPoint, extraParams
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [16, 102, 9999, 10002, 0xFFFF, 2**33])
def test_unknown_operand_type(bad):
    expect_invalid(
        with_operand(add_model(), 0, 1, type=bad),
        "subgraph 0, operand 1",
        f"type {bad} is not an operand type",
    )


@pytest.mark.parametrize("bad", [-1, 0xFFFFFFFF, 0x00070001])
def test_extension_operand_type_with_undeclared_prefix(bad):
    prefix = (bad & 0xFFFFFFFF) >> 16
    expect_invalid(
        with_operand(add_model(), 0, 0, type=bad),
        "subgraph 0, operand 0",
        f"prefix 0x{prefix:04x}",
        "extensionNameToPrefix",
    )


def test_declared_extension_types_and_operations_are_structurally_valid():
    validate_model(extension_model())
    validate_model(extension_model(extraParams=b"\x01\x02"))
    validate_model(extension_model(dimensions=()))


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"scale": 0.5}, "scale is 0.5; must be 0 for extension types"),
        ({"zeroPoint": 3}, "zeroPoint is 3; must be 0 for extension types"),
        ({"extraParams": SymmPerChannelQuantParams((1.0,), 0)}, "extraParams"),
    ],
)
def test_extension_operand_parameters(changes, fragment):
    expect_invalid(extension_model(**changes), "subgraph 0, operand 0", fragment)


def test_extension_operation_with_undeclared_prefix():
    m = with_operation(extension_model(), 0, 0, type=(8 << 16) | 0)
    expect_invalid(m, "subgraph 0, operation 0", "prefix 0x0008")


@pytest.mark.parametrize("scalar", [T.INT32, T.FLOAT32, T.UINT32, T.BOOL, T.FLOAT16])
def test_scalar_with_dimensions(scalar):
    m = with_operand(add_model(), 0, 2, type=scalar, dimensions=(1,))
    expect_invalid(m, "subgraph 0, operand 2", "scalar types must have no dimensions")


def test_negative_dimension():
    expect_invalid(with_operand(add_model(), 0, 0, dimensions=(-1,)), "operand 0", "uint32")


def test_tensor_of_unknown_rank_is_allowed_for_non_constants():
    validate_model(with_operand(add_model(), 0, 3, dimensions=()))
    validate_model(with_operand(add_model(), 0, 0, dimensions=(0,)))


def constant_tensor_model(dims=(2,), reference=False) -> Model:
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, [2])
    b = g.constant(F32, [1.0, 2.0], dims=dims, reference=reference)
    act = g.constant(T.INT32, 0)
    y = g.output(F32, [2])
    g.operation(O.ADD, [a, b, act], [y])
    return mb.build()


def test_constant_tensor_needs_rank_and_known_dimensions():
    m = constant_tensor_model()
    expect_invalid(with_operand(m, 0, 1, dimensions=()), "operand 1", "rank >= 1")
    expect_invalid(with_operand(m, 0, 1, dimensions=(0,)), "operand 1", "fully specified")


@pytest.mark.parametrize(
    "type_, scale, rule",
    [
        (T.INT32, 1.0, "must be 0"),
        (T.TENSOR_FLOAT32, 1.0, "must be 0"),
        (T.TENSOR_BOOL8, 0.5, "must be 0"),
        (T.TENSOR_INT32, -1.0, "must be >= 0"),
        (T.TENSOR_INT32, math.nan, "must be >= 0"),
        (T.TENSOR_QUANT8_ASYMM, 0.0, "must be > 0"),
        (T.TENSOR_QUANT8_ASYMM, math.nan, "must be > 0"),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, 0.0, "must be > 0"),
        (T.TENSOR_QUANT8_SYMM, -1.0, "must be > 0"),
        (T.TENSOR_QUANT16_ASYMM, 0.0, "must be > 0"),
        (T.TENSOR_QUANT16_SYMM, 0.0, "must be > 0"),
    ],
)
def test_scale_rules(type_, scale, rule):
    dims = () if type_ == T.INT32 else (2,)
    m = with_operand(add_model(), 0, 0, type=type_, dimensions=dims, scale=scale)
    expect_invalid(m, "subgraph 0, operand 0", f"scale is {scale}", rule, type_.name)


@pytest.mark.parametrize(
    "type_, scale, zero_point",
    [
        (T.TENSOR_INT32, 0.25, 0),
        (T.TENSOR_QUANT8_ASYMM, 0.5, 255),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, 0.5, -128),
        (T.TENSOR_QUANT16_ASYMM, 0.5, 65535),
        (T.TENSOR_QUANT16_SYMM, 0.5, 0),
        (T.TENSOR_OEM_BYTE, -3.0, 77),  # OEM types: parameters not checked
    ],
)
def test_valid_quantization_parameters(type_, scale, zero_point):
    validate_model(with_operand(add_model(), 0, 0, type=type_, scale=scale, zeroPoint=zero_point))


@pytest.mark.parametrize(
    "type_, zero_point, rule",
    [
        (T.TENSOR_QUANT8_ASYMM, -1, "[0, 255]"),
        (T.TENSOR_QUANT8_ASYMM, 256, "[0, 255]"),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, -129, "[-128, 127]"),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, 128, "[-128, 127]"),
        (T.TENSOR_QUANT16_ASYMM, 65536, "[0, 65535]"),
        (T.TENSOR_QUANT8_SYMM, 1, "must be 0"),
        (T.TENSOR_QUANT16_SYMM, -1, "must be 0"),
        (T.TENSOR_FLOAT32, 1, "must be 0"),
    ],
)
def test_zero_point_rules(type_, zero_point, rule):
    scale = 0.0 if type_ == F32 else 0.5
    m = with_operand(add_model(), 0, 1, type=type_, scale=scale, zeroPoint=zero_point)
    expect_invalid(m, "subgraph 0, operand 1", f"zeroPoint is {zero_point}", rule)


PER_CHANNEL = T.TENSOR_QUANT8_SYMM_PER_CHANNEL


def per_channel(dims=(2, 3), scales=(0.5, 0.25), channel_dim=0, **changes) -> Model:
    params = SymmPerChannelQuantParams(scales, channel_dim)
    return with_operand(
        add_model(), 0, 0, type=PER_CHANNEL, dimensions=dims, extraParams=params, **changes
    )


def test_channel_quant_valid():
    validate_model(per_channel())
    validate_model(per_channel(dims=(4, 3), scales=(1.0, 2.0, 3.0), channel_dim=1))


@pytest.mark.parametrize(
    "model, fragment",
    [
        (lambda: per_channel(channel_dim=2), "channelDim is 2 but the rank is 2"),
        (lambda: per_channel(dims=()), "channelDim is 0 but the rank is 0"),
        (lambda: per_channel(scales=(0.5,)), "1 scales but dimension 0 is 2"),
        (lambda: per_channel(scales=(0.5, 0.0)), "scales[1] is 0.0"),
        (lambda: per_channel(dims=(0, 3), scales=()), "channel dimension) is unknown"),
        (lambda: per_channel(scale=0.5), "scale is 0.5; must be 0"),
        (lambda: with_operand(add_model(), 0, 0, type=PER_CHANNEL), "requires channelQuant"),
    ],
)
def test_channel_quant_rules(model, fragment):
    expect_invalid(model(), "subgraph 0, operand 0 (TENSOR_QUANT8_SYMM_PER_CHANNEL)", fragment)


@pytest.mark.parametrize("extra", [SymmPerChannelQuantParams((1.0,), 0), b"\x00"])
def test_extra_params_must_be_none_for_other_fundamental_types(extra):
    m = with_operand(add_model(), 0, 1, extraParams=extra)
    expect_invalid(m, "subgraph 0, operand 1", "must be none for TENSOR_FLOAT32")


# ---------------------------------------------------------------------------
# Lifetimes and locations
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("operand", [0, 3])  # a SUBGRAPH_INPUT and a SUBGRAPH_OUTPUT
def test_non_constant_location_must_be_zero(operand):
    m = with_operand(add_model(), 0, operand, location=DataLocation(0, 4, 0))
    expect_invalid(m, f"operand {operand}", "must be all zero")


def test_constant_copy_location_rules():
    m = add_model()  # operand 2: INT32 constant, 4 bytes at offset 0
    assert len(m.operandValues) == 4
    expect_invalid(
        with_operand(m, 0, 2, location=DataLocation(1, 0, 4)), "operand 2", "poolIndex 1"
    )
    expect_invalid(
        with_operand(m, 0, 2, location=DataLocation(0, 4, 4)),
        "operand 2",
        "outside Model.operandValues (4 bytes)",
    )
    expect_invalid(with_operand(m, 0, 2, location=DataLocation(0, -4, 4)), "operand 2")
    expect_invalid(
        with_operand(m, 0, 2, location=DataLocation(0, 0, 2)),
        "operand 2",
        "location.length is 2",
        "exactly 4 bytes",
    )


def test_constant_reference_location_rules():
    m = constant_tensor_model(reference=True)  # operand 1: 8 bytes in pool 0
    assert isinstance(m.pools[0], InlineMemory)
    validate_model(m)
    size = m.pools[0].size
    expect_invalid(
        with_operand(m, 0, 1, location=DataLocation(1, 0, 8)),
        "operand 1",
        "poolIndex 1 is out of range",
        "1 pools",
    )
    expect_invalid(
        with_operand(m, 0, 1, location=DataLocation(0, size - 4, 8)),
        "operand 1",
        f"outside Model.pools[0] ({size} bytes)",
    )
    expect_invalid(
        with_operand(m, 0, 1, location=DataLocation(0, 0, 4)),
        "operand 1",
        "length is 4",
        "exactly 8 bytes",
    )


def test_constant_reference_into_shared_memory_uses_its_size():
    m = constant_tensor_model(reference=True)
    validate_model(replace(m, pools=(SharedMemory("nnhal-test", 8),)))
    expect_invalid(
        replace(m, pools=(SharedMemory("nnhal-test", 4),)),
        "operand 1",
        "outside Model.pools[0] (4 bytes)",
    )


def test_unknown_lifetime():
    expect_invalid(with_operand(add_model(), 0, 0, lifetime=7), "operand 0", "unknown lifetime 7")


def test_subgraph_type_and_lifetime_go_together():
    m = if_model()  # main operand 2: the then branch
    expect_invalid(
        with_operand(m, 0, 2, type=T.INT32),
        "operand 2 (INT32)",
        "SUBGRAPH must have lifetime SUBGRAPH",
    )
    expect_invalid(
        with_operand(m, 0, 0, type=T.SUBGRAPH, dimensions=()),
        "operand 0 (SUBGRAPH)",
        "lifetime SUBGRAPH_INPUT",
    )


@pytest.mark.parametrize(
    "location", [DataLocation(0, 2, 0), DataLocation(1, 0, 0), DataLocation(0, 0, 4)]
)
def test_subgraph_location_rules(location):
    expect_invalid(
        with_operand(if_model(), 0, 2, location=location),
        "operand 2 (SUBGRAPH)",
        "SUBGRAPH location",
        "offset < 2",
    )


# ---------------------------------------------------------------------------
# Operations
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [102, 9999, 10001, 2**33])
def test_unknown_operation_code(bad):
    expect_invalid(
        with_operation(add_model(), 0, 0, type=bad),
        "subgraph 0, operation 0",
        f"operation type {bad} is not a HAL 1.3 operation",
    )


def test_operation_index_out_of_range():
    m = add_model()
    expect_invalid(
        with_operation(m, 0, 0, inputs=(0, 4, 2)),
        "ADD (subgraph 0, operation 0)",
        "input 1 is operand 4",
        "4 operands",
    )
    expect_invalid(
        with_operation(m, 0, 0, outputs=(9,)),
        "ADD (subgraph 0, operation 0)",
        "output 0 is operand 9",
    )


def test_operation_output_lifetime():
    m = add_model()
    expect_invalid(
        with_operation(m, 0, 0, outputs=(2,)),
        "ADD (subgraph 0, operation 0)",
        "lifetime CONSTANT_COPY",
        "TEMPORARY_VARIABLE or SUBGRAPH_OUTPUT",
    )


def test_operation_validator_calls():
    calls = []
    m = while_model()
    validate_model(m, operation_validator=lambda model, s, k: calls.append((s, k)))
    # LESS in the condition, two ADDs in the body; never the WHILE itself
    assert sorted(calls) == [(1, 0), (2, 0), (2, 1)]
    calls.clear()
    oem = with_operation(add_model(), 0, 0, type=O.OEM_OPERATION)
    validate_model(oem, operation_validator=lambda model, s, k: calls.append((s, k)))
    validate_model(extension_model(), operation_validator=lambda model, s, k: calls.append((s, k)))
    assert calls == [(0, 0), (0, 0)]


def test_operation_validator_runs_after_every_structural_check():
    calls = []
    bad = with_operand(while_model(), 2, 0, numberOfConsumers=5)  # error in subgraph 2
    expect_invalid(bad, "subgraph 2, operand 0", operation_validator=lambda *a: calls.append(a))
    assert calls == []


def test_operation_validator_error_propagates():
    def reject(model, s, k):
        raise InvalidArgument(f"nope (subgraph {s}, operation {k})")

    expect_invalid(add_model(), "nope (subgraph 0, operation 0)", operation_validator=reject)


# ---------------------------------------------------------------------------
# Subgraph inputs / outputs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"inputIndexes": (0, 7)}, "inputIndexes[1] is 7"),
        ({"inputIndexes": (0, 2)}, "inputIndexes[1] is operand 2 with lifetime CONSTANT_COPY"),
        ({"inputIndexes": (0, 1, 0)}, "operand 0 appears twice in inputIndexes"),
        ({"inputIndexes": (0,)}, "operand 1 (TENSOR_FLOAT32): lifetime SUBGRAPH_INPUT but it is"),
        ({"outputIndexes": (3, 3)}, "operand 3 appears twice in outputIndexes"),
        ({"outputIndexes": (0,)}, "outputIndexes[0] is operand 0 with lifetime SUBGRAPH_INPUT"),
        ({"outputIndexes": ()}, "operand 3 (TENSOR_FLOAT32): lifetime SUBGRAPH_OUTPUT but"),
    ],
)
def test_input_output_lists(changes, fragment):
    expect_invalid(with_subgraph(add_model(), 0, **changes), "subgraph 0", fragment)


# ---------------------------------------------------------------------------
# Graph walk
# ---------------------------------------------------------------------------


def cycle_model() -> Model:
    """VTS CycleTest: 3 = ADD(0, 4, 2); 4 = ADD(1, 3, 2); 5 = ADD(4, 0, 2)."""

    def opnd(type_, dims, consumers, lifetime):
        return Operand(type_, dims, consumers, lifetime=lifetime)

    operands = (
        opnd(F32, (1,), 2, L.SUBGRAPH_INPUT),
        opnd(F32, (1,), 1, L.SUBGRAPH_INPUT),
        opnd(T.INT32, (), 3, L.SUBGRAPH_INPUT),
        opnd(F32, (1,), 1, L.TEMPORARY_VARIABLE),
        opnd(F32, (1,), 2, L.TEMPORARY_VARIABLE),
        opnd(F32, (1,), 0, L.SUBGRAPH_OUTPUT),
    )
    ops = (
        Operation(O.ADD, (0, 4, 2), (3,)),
        Operation(O.ADD, (1, 3, 2), (4,)),
        Operation(O.ADD, (4, 0, 2), (5,)),
    )
    return Model(
        main=replace(
            add_model().main,
            operands=operands,
            operations=ops,
            inputIndexes=(0, 1, 2),
            outputIndexes=(5,),
        )
    )


def test_read_before_write_cycle():
    expect_invalid(
        cycle_model(),
        "ADD (subgraph 0, operation 0)",
        "input 1 reads operand 4",
        "before any operation writes it",
    )


def test_written_twice():
    m = add_model()
    twice = with_subgraph(m, 0, operations=m.main.operations * 2)
    twice = with_operand(twice, 0, 0, numberOfConsumers=2)
    expect_invalid(twice, "ADD (subgraph 0, operation 1)", "writes operand 3", "already written")


@pytest.mark.parametrize("count", [0, 2])
def test_number_of_consumers_must_be_exact(count):
    expect_invalid(
        with_operand(add_model(), 0, 1, numberOfConsumers=count),
        "subgraph 0, operand 1",
        f"numberOfConsumers is {count} but 1 operation",
    )


def test_output_never_written():
    m = while_model()  # body output 1 (operand 6) written by operation 1
    m = with_subgraph(m, 2, operations=m.referenced[1].operations[:1])
    m = with_operand(m, 2, 0, numberOfConsumers=1)
    m = with_operand(m, 2, 4, numberOfConsumers=0)
    m = with_operand(m, 2, 3, numberOfConsumers=1)
    expect_invalid(m, "subgraph 2, operand 6", "no operation writes it")


def test_large_model_validates():
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [4])
    act = g.constant(T.INT32, 0)
    for _ in range(999):
        t = g.temporary(F32, [4])
        g.operation(O.ADD, [x, x, act], [t])
        x = t
    y = g.output(F32, [4])
    g.operation(O.ADD, [x, x, act], [y])
    calls = []
    validate_model(mb.build(), operation_validator=lambda m, s, k: calls.append(k))
    assert calls == list(range(1000))


# ---------------------------------------------------------------------------
# VTS model mutations (structural part)
# ---------------------------------------------------------------------------

#: families whose mutants can be structurally valid: only the per-operation
#: signature table rejects them (see test_validation_service.py).
SIGNATURE_FAMILIES = {
    "mutateOperationOperandTypeTest",
    "removeOperandTest",
    "removeOperationInputTest",
    "addOperationInputTest",
}


@pytest.mark.parametrize("make", [add_model, while_model, if_model])
def test_mutations_are_structurally_invalid_or_need_the_signature_table(make):
    model = make()
    seen_families = set()
    for description, mutated in model_mutations(model):
        family = description.split(":")[0]
        seen_families.add(family.replace("mutateOperandLifetimeTest", "mutateOperandLifeTimeTest"))
        try:
            validate_model(mutated)
        except InvalidArgument:
            continue
        assert family in SIGNATURE_FAMILIES, f"{description}: structurally valid"
    # every family that applies to these models produced something
    assert {
        "mutateOperandTypeTest",
        "mutateOperandNumberOfConsumersTest",
        "mutateOperationTypeTest",
        "removeOperationTest",
    } <= seen_families
    validate_model(model)  # the input model is untouched


def test_control_flow_mutations_are_all_structural():
    for make in (while_model, if_model):
        for description, mutated in model_mutations(make()):
            with pytest.raises(InvalidArgument):
                validate_model(mutated)


def test_mutation_descriptions_are_unique():
    descriptions = [d for d, _ in model_mutations(while_model())]
    assert len(descriptions) == len(set(descriptions)) > 100


def test_mutation_families_are_in_vts_order():
    names = list(MUTATION_FAMILIES)
    assert names[0] == "mutateExecutionOrderTest" and names[-1] == "addOperationOutputTest"
    assert len(names) == 20  # items 1-19, item 12 being two VTS tests

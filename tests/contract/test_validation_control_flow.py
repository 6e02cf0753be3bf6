"""Tests for the IF/WHILE rules (hal13.md §3.2) and reference cycles of validate_model."""

from __future__ import annotations

from dataclasses import replace

import pytest
from validation_models import (  # tests/validation_models.py
    F32,
    L,
    O,
    T,
    add_model,
    expect_invalid,
    if_model,
    while_model,
    with_operand,
    with_operation,
    with_subgraph,
)

from nnhal.builder import ModelBuilder
from nnhal.types import (
    DataLocation,
    Model,
    Operand,
    Operation,
)
from nnhal.validation import (
    subgraph_of,
    validate_model,
)

# ---------------------------------------------------------------------------
# IF
# ---------------------------------------------------------------------------

IF_WHERE = "IF (subgraph 0, operation 0)"


def test_if_arity():
    m = if_model()
    expect_invalid(
        with_operation(m, 0, 0, inputs=(0, 2)), IF_WHERE, "has 2 inputs", "at least 3 inputs"
    )
    expect_invalid(with_operation(m, 0, 0, outputs=()), IF_WHERE, "0 outputs")


def test_if_branch_arity():
    m = if_model()
    # pass x twice: the branches take one value
    more = with_operation(with_operand(m, 0, 1, numberOfConsumers=2), 0, 0, inputs=(0, 2, 3, 1, 1))
    expect_invalid(more, IF_WHERE, "then branch (subgraph 1) has 1 inputs but the IF passes 2")
    fewer = with_operation(with_operand(m, 0, 1, numberOfConsumers=0), 0, 0, inputs=(0, 2, 3))
    # operand 1 is then an unused input, which is legal; the branch arity is not
    expect_invalid(fewer, IF_WHERE, "has 1 inputs but the IF passes 0")
    then = m.referenced[0]  # operands: 0 x, 1 act, 2 y
    operands = list(then.operands)
    operands[0] = replace(operands[0], numberOfConsumers=4)
    operands[1] = replace(operands[1], numberOfConsumers=2)
    operands.append(Operand(F32, (2,), 0, lifetime=L.SUBGRAPH_OUTPUT))
    two_out = with_subgraph(
        m,
        1,
        operands=tuple(operands),
        outputIndexes=(2, 3),
        operations=(*then.operations, Operation(O.ADD, (0, 0, 1), (3,))),
    )
    expect_invalid(two_out, IF_WHERE, "then branch (subgraph 1) has 2 outputs but the IF has 1")


@pytest.mark.parametrize(
    "changes, found",
    [
        ({"type": F32, "dimensions": (1,)}, "TENSOR_FLOAT32 [1]"),
        ({"dimensions": (2,)}, "TENSOR_BOOL8 [2]"),
        ({"dimensions": ()}, "TENSOR_BOOL8 []"),
        ({"dimensions": (1, 1)}, "TENSOR_BOOL8 [1, 1]"),
    ],
)
def test_if_condition_must_be_bool8_of_shape_1(changes, found):
    m = with_operand(if_model(), 0, 0, **changes)
    expect_invalid(
        m, IF_WHERE, f"input 0 (condition, operand 0) is {found}", "TENSOR_BOOL8 of dimensions [1]"
    )


def test_if_branch_must_be_a_subgraph_operand():
    m = with_operation(if_model(), 0, 0, inputs=(0, 1, 3, 1))
    m = with_operand(with_operand(m, 0, 1, numberOfConsumers=2), 0, 2, numberOfConsumers=0)
    expect_invalid(
        m,
        IF_WHERE,
        "input 1 (then branch) is operand 1 of type TENSOR_FLOAT32",
        "must be a SUBGRAPH operand",
    )


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({"type": T.TENSOR_INT32}, "types differ (TENSOR_INT32 vs TENSOR_FLOAT32)"),
        ({"dimensions": (3,)}, "dimensions differ ([3] vs [2])"),
        ({"dimensions": (2, 1)}, "ranks differ"),
        ({"type": T.TENSOR_QUANT8_ASYMM, "scale": 0.5}, "types differ"),
    ],
)
def test_if_branch_input_must_be_compatible(changes, reason):
    m = with_operand(if_model(), 2, 0, **changes)  # else branch input
    expect_invalid(
        m,
        IF_WHERE,
        "else branch (subgraph 2) input 0 (operand 0)",
        "IF input 3 (operand 1)",
        reason,
    )


def test_if_branch_output_must_be_compatible():
    m = with_operand(if_model(), 1, 2, dimensions=(5,))
    expect_invalid(
        m,
        IF_WHERE,
        "then branch (subgraph 1) output 0 (operand 2)",
        "IF output 0 (operand 4)",
        "dimensions differ",
    )


def test_if_compatibility_checks_quantization_parameters():
    m = if_model()
    for s, i in ((0, 1), (1, 0), (2, 0)):
        m = with_operand(m, s, i, type=T.TENSOR_QUANT8_ASYMM, scale=0.5, zeroPoint=3)
    validate_model(m)  # types/params match everywhere: only the op validator could object
    expect_invalid(with_operand(m, 2, 0, scale=0.25), "scales differ (0.25 vs 0.5)")
    expect_invalid(with_operand(m, 2, 0, zeroPoint=4), "zeroPoints differ (4 vs 3)")


def test_if_branches_may_have_unknown_dimensions():
    # Documented choice: IF requires only the condition to be fully specified.
    validate_model(if_model(branch_in=(0,), branch_out=()))


def test_same_branch_subgraph_twice_is_fine():
    m = if_model()
    validate_model(with_operand(m, 0, 3, location=DataLocation(0, 0, 0)))


# ---------------------------------------------------------------------------
# WHILE
# ---------------------------------------------------------------------------

WHILE_WHERE = "WHILE (subgraph 0, operation 0)"


def test_while_arity():
    m = while_model()
    expect_invalid(with_operation(m, 0, 0, inputs=(3, 4)), WHILE_WHERE, "at least 3 inputs")
    expect_invalid(with_operation(m, 0, 0, outputs=()), WHILE_WHERE, "at least 1 output")


def test_while_condition_and_body_must_be_subgraphs():
    m = with_operation(while_model(), 0, 0, inputs=(0, 4, 3, 1, 2))
    expect_invalid(m, WHILE_WHERE, "input 0 (condition) is operand 0 of type TENSOR_FLOAT32")


def test_while_condition_counts_and_output():
    m = while_model()
    two = with_subgraph(m, 1, outputIndexes=(3, 0))
    expect_invalid(two, "subgraph 1", "outputIndexes[1] is operand 0")
    expect_invalid(
        with_operand(m, 1, 3, type=F32),
        WHILE_WHERE,
        "condition (subgraph 1) output 0 (operand 3) is TENSOR_FLOAT32 [1]",
        "TENSOR_BOOL8 of dimensions [1]",
    )
    expect_invalid(with_operand(m, 1, 3, dimensions=(2,)), WHILE_WHERE, "TENSOR_BOOL8 [2]")


def with_extra_input(model: Model, s: int) -> Model:
    """Subgraph ``s`` gets one more (unused) TENSOR_FLOAT32 [1] input."""
    sg = subgraph_of(model, s)
    extra = Operand(F32, (1,), 0, lifetime=L.SUBGRAPH_INPUT)
    return with_subgraph(
        model, s, operands=(*sg.operands, extra), inputIndexes=(*sg.inputIndexes, len(sg.operands))
    )


def test_while_input_counts():
    m = while_model()
    expect_invalid(
        with_extra_input(m, 1),
        WHILE_WHERE,
        "condition (subgraph 1) has 4 inputs but the WHILE passes 3",
    )
    expect_invalid(
        with_extra_input(m, 2), WHILE_WHERE, "body (subgraph 2) has 4 inputs but the WHILE passes 3"
    )


def test_while_body_must_output_every_input_output_value():
    m = while_model()
    body = m.referenced[1]
    # body outputs become temporaries: 0 body outputs for 1 WHILE output
    operands = tuple(
        replace(o, lifetime=L.TEMPORARY_VARIABLE) if o.lifetime == L.SUBGRAPH_OUTPUT else o
        for o in body.operands
    )
    m = with_subgraph(m, 2, operands=operands, outputIndexes=())
    expect_invalid(m, WHILE_WHERE, "body (subgraph 2) has 0 outputs but the WHILE has 1")


def test_while_body_inputs_fewer_than_outputs():
    m = while_model()
    body = m.referenced[1]  # operands: 0-2 inputs, 3 act, 4 zero, 5-6 outputs
    n = len(body.operands)
    operands = list(body.operands)
    for i in (0, 3, 4):  # read by the two extra ADDs
        operands[i] = replace(operands[i], numberOfConsumers=operands[i].numberOfConsumers + 2)
    operands += [Operand(F32, (1,), 0, lifetime=L.SUBGRAPH_OUTPUT)] * 2
    operations = (
        *body.operations,
        Operation(O.ADD, (0, 4, 3), (n,)),
        Operation(O.ADD, (0, 4, 3), (n + 1,)),
    )
    m = with_subgraph(
        m,
        2,
        operands=tuple(operands),
        operations=operations,
        outputIndexes=(*body.outputIndexes, n, n + 1),
    )
    expect_invalid(m, WHILE_WHERE, "body (subgraph 2) has 4 outputs but only 3 inputs")


@pytest.mark.parametrize(
    "s, i, changes, fragment",
    [
        (1, 0, {"type": T.TENSOR_INT32}, "condition (subgraph 1) input 0 (operand 0)"),
        (2, 1, {"dimensions": (2,)}, "body (subgraph 2) input 1 (operand 1)"),
        (
            2,
            5,
            {"dimensions": (2,)},
            "body (subgraph 2) output 0 (operand 5) is not compatible with WHILE output 0",
        ),
        (
            2,
            6,
            {"dimensions": (2,)},
            "body (subgraph 2) input 1 (operand 1) is not compatible with body (subgraph 2)",
        ),
    ],
)
def test_while_compatibility(s, i, changes, fragment):
    expect_invalid(with_operand(while_model(), s, i, **changes), WHILE_WHERE, fragment)


@pytest.mark.parametrize(
    "model, fragment",
    [
        (lambda: while_model(inner_dims=(0,)), "condition (subgraph 1) input 0 (operand 0)"),
        (lambda: while_model(inner_dims=()), "condition (subgraph 1) input 0 (operand 0)"),
        (lambda: while_model(outer_dims=(0,)), "WHILE input 2 (operand 0)"),
        (lambda: with_operand(while_model(), 2, 6, dimensions=(0,)), "body (subgraph 2) output 1"),
        (lambda: with_operand(while_model(), 0, 5, dimensions=()), "WHILE output 0 (operand 5)"),
    ],
)
def test_while_operands_must_have_known_size(model, fragment):
    expect_invalid(model(), WHILE_WHERE, fragment, "unknown size", "fully specified")


# ---------------------------------------------------------------------------
# Reference cycles
# ---------------------------------------------------------------------------


def chain_model(depth: int, back_to: int | None = None) -> Model:
    """Subgraph k (k < depth) runs IF(c, k+1, k+1, x, c); subgraph ``depth`` runs ADD.

    With ``back_to`` the last subgraph runs an IF referencing subgraph ``back_to``.
    """
    mb = ModelBuilder()
    subs = [mb.main] + [mb.subgraph() for _ in range(depth)]
    for k, sg in enumerate(subs):
        x = sg.input(F32, [1])
        c = sg.input(T.TENSOR_BOOL8, [1])
        y = sg.output(F32, [1])
        target = k + 1 if k < depth else back_to
        if target is None:
            sg.operation(O.ADD, [x, x, sg.constant(T.INT32, 0)], [y])
        else:
            r = sg.subgraph_ref(subs[target])
            sg.operation(O.IF, [c, r, r, x, c], [y])
    return mb.build()


def test_reference_chain_10000_deep_validates():
    validate_model(chain_model(10_000))


def test_reference_cycle_between_two_subgraphs():
    expect_invalid(
        chain_model(2, back_to=1), "reference cycle", "subgraph 1 -> subgraph 2 -> subgraph 1"
    )


def test_self_reference():
    expect_invalid(chain_model(1, back_to=1), "reference cycle", "subgraph 1 -> subgraph 1")


def test_deep_cycle_found_without_recursion():
    expect_invalid(chain_model(5_000, back_to=1), "subgraph 5000 -> subgraph 1")


def test_unreachable_cycle_is_rejected_too():
    m = chain_model(2, back_to=1)
    add = add_model()
    unreachable = replace(m, main=add.main, operandValues=add.operandValues)
    expect_invalid(unreachable, "subgraph 1 -> subgraph 2 -> subgraph 1")

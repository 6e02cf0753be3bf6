"""The support rule: IF/WHILE inherit the support of every operation below them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from nnhal.driver.backends import OpQuery
from nnhal.driver.device import Device
from nnhal.driver.ops import registry
from nnhal.driver.profile import parse_profile
from nnhal.driver.support import SupportChecker

from nnhal.builder import ModelBuilder
from nnhal.errors import InvalidArgument
from nnhal.types import OperandType, OperationType

F32 = OperandType.TENSOR_FLOAT32
F16 = OperandType.TENSOR_FLOAT16
BOOL8 = OperandType.TENSOR_BOOL8
INT32 = OperandType.INT32
Op = OperationType


def _device(name: str = "test", **settings) -> Device:
    return Device(parse_profile({"name": name, **settings}, source=f"<{name}>"))


class CountingSupport:
    """Wraps a device's support pipeline and records every question it is asked."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.asked: list[str] = []

    def supports(self, query: OpQuery) -> tuple[bool, str]:
        self.asked.append(query.where)
        return self.inner.supports(query)

    def operation_name(self, code, ext=None) -> str:
        return self.inner.operation_name(code, ext)


def _counting(device: Device) -> CountingSupport:
    device.support = CountingSupport(device.support)
    return device.support


class YesBackend:
    name = "yes"

    def supports(self, query: OpQuery) -> tuple[bool, str]:
        return True, ""


def _add(g, a, b, out):
    act = g.constant(INT32, 0)
    return g.operation(Op.ADD, [a, b, act], [out])


def nested_model():
    """main: WHILE(cond 1, body 2) then ADD; body: GREATER, IF(then 3, else 4), ADD;
    then 3: FULLY_CONNECTED; else 4: ADD."""
    mb = ModelBuilder()
    main = mb.main
    cond, body, then, other = mb.subgraph(), mb.subgraph(), mb.subgraph(), mb.subgraph()

    tx = then.input(F32, [1, 2])
    weights = then.constant(F32, np.eye(2, dtype=np.float32))
    bias = then.constant(F32, np.zeros(2, dtype=np.float32))
    act = then.constant(INT32, 0)
    ty = then.output(F32, [1, 2])
    then.operation(Op.FULLY_CONNECTED, [tx, weights, bias, act], [ty])

    ex = other.input(F32, [1, 2])
    ey = other.output(F32, [1, 2])
    _add(other, ex, ex, ey)

    cond.input(F32, [1, 2])
    ci = cond.input(F32, [1])
    limit = cond.constant(F32, [3.0])
    flag = cond.output(BOOL8, [1])
    cond.operation(Op.LESS, [ci, limit], [flag])

    bx = body.input(F32, [1, 2])
    bi = body.input(F32, [1])
    zero = body.constant(F32, [0.0])
    positive = body.temporary(BOOL8, [1])
    body.operation(Op.GREATER, [bi, zero], [positive])
    then_ref, else_ref = body.subgraph_ref(then), body.subgraph_ref(other)
    bx2 = body.output(F32, [1, 2])
    body.operation(Op.IF, [positive, then_ref, else_ref, bx], [bx2])
    one = body.constant(F32, [1.0])
    bi2 = body.output(F32, [1])
    _add(body, bi, one, bi2)

    x = main.input(F32, [1, 2])
    i0 = main.input(F32, [1])
    cond_ref, body_ref = main.subgraph_ref(cond), main.subgraph_ref(body)
    xo = main.temporary(F32, [1, 2])
    io = main.output(F32, [1])
    main.operation(Op.WHILE, [cond_ref, body_ref, x, i0], [xo, io])
    y = main.output(F32, [1, 2])
    _add(main, xo, x, y)
    return mb.build()


def shared_branch_model(branch_op: OperationType = Op.ADD):
    """main: two IFs whose four branch references all name subgraph 1, then an ADD.

    The branch computes ``branch_op(x, x)`` (a binary operation with a fused activation).
    """
    mb = ModelBuilder()
    main = mb.main
    branch = mb.subgraph()
    bx = branch.input(F32, [1, 2])
    by = branch.output(F32, [1, 2])
    branch.operation(branch_op, [bx, bx, branch.constant(INT32, 0)], [by])
    c = main.input(BOOL8, [1])
    x = main.input(F32, [1, 2])
    outs = []
    for _ in range(2):
        out = main.temporary(F32, [1, 2])
        main.operation(Op.IF, [c, main.subgraph_ref(branch), main.subgraph_ref(branch), x], [out])
        outs.append(out)
    y = main.output(F32, [1, 2])
    _add(main, outs[0], outs[1], y)
    return mb.build()


def cyclic_model():
    """Subgraph 1 and subgraph 2 reference each other through IF."""
    mb = ModelBuilder()
    main = mb.main
    s1, s2 = mb.subgraph(), mb.subgraph()
    for g, target in ((s1, s2), (s2, s1)):
        c = g.input(BOOL8, [1])
        x = g.input(F32, [1, 2])
        y = g.output(F32, [1, 2])
        g.operation(Op.IF, [c, g.subgraph_ref(target), g.subgraph_ref(target), c, x], [y])
    c = main.input(BOOL8, [1])
    x = main.input(F32, [1, 2])
    y = main.output(F32, [1, 2])
    main.operation(Op.IF, [c, main.subgraph_ref(s1), main.subgraph_ref(s1), c, x], [y])
    return mb.build()


# ---------------------------------------------------------------------------


def test_default_device_supports_the_nested_model():
    supported, reasons = _device().explainSupportedOperations(nested_model())
    assert supported == [True, True], reasons
    assert reasons == {}


def test_excluded_op_deep_inside_makes_only_the_while_unsupported():
    device = _device("no-fc", exclude_operations=["FULLY_CONNECTED"])
    model = nested_model()
    supported, reasons = device.explainSupportedOperations(model)
    assert len(supported) == len(model.main.operations)  # only main is reported
    assert supported == [False, True]
    assert reasons == {
        0: "operation 0 (WHILE) -> body subgraph 2, operation 1 (IF) -> then subgraph 3, "
        "operation 0 (FULLY_CONNECTED): excluded by profile 'no-fc'"
    }
    assert device.getSupportedOperations_1_3(model) == supported


def test_excluded_op_in_a_while_condition():
    device = _device("no-less", exclude_operations=["LESS"])
    supported, reasons = device.explainSupportedOperations(nested_model())
    assert supported == [False, True]
    assert reasons[0] == (
        "operation 0 (WHILE) -> cond subgraph 1, operation 0 (LESS): excluded by profile 'no-less'"
    )


def test_excluding_control_flow_itself():
    device = _device("no-while", exclude_operations=["WHILE"])
    supported, reasons = device.explainSupportedOperations(nested_model())
    assert supported == [False, True]
    assert reasons[0] == "operation 0 (WHILE): excluded by profile 'no-while'"


def test_prepare_with_an_unsupported_operation_names_it():
    device = _device("no-fc", exclude_operations=["FULLY_CONNECTED"])
    with pytest.raises(InvalidArgument, match="then subgraph 3") as info:
        device.prepareModel_1_3(nested_model())
    assert "excluded by profile 'no-fc'" in str(info.value)


def test_a_subgraph_referenced_four_times_is_checked_once():
    device = Device(parse_profile({"name": "count"}))
    backend = _counting(device)
    supported, _ = device.explainSupportedOperations(shared_branch_model())
    assert supported == [True, True, True]
    assert backend.asked.count("subgraph 1, operation 0") == 1
    assert sorted(w for w in backend.asked if w.startswith("subgraph 0,")) == [
        "subgraph 0, operation 0",
        "subgraph 0, operation 1",
        "subgraph 0, operation 2",
    ]


def test_a_shared_unsupported_subgraph_fails_every_reference():
    device = Device(parse_profile({"name": "no-mul", "exclude_operations": ["MUL"]}))
    backend = _counting(device)
    supported, reasons = device.explainSupportedOperations(shared_branch_model(Op.MUL))
    assert supported == [False, False, True]
    for index in (0, 1):
        assert reasons[index] == (
            f"operation {index} (IF) -> then subgraph 1, operation 0 (MUL): "
            "excluded by profile 'no-mul'"
        )
    assert backend.asked.count("subgraph 1, operation 0") == 1


def test_operand_type_allow_list():
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, [2])
    h = g.input(F16, [2])
    y32 = g.output(F32, [2])
    y16 = g.output(F16, [2])
    _add(g, a, a, y32)
    _add(g, h, h, y16)
    model = mb.build()
    device = _device("f32", operand_types=["TENSOR_FLOAT32", "INT32"])
    supported, reasons = device.explainSupportedOperations(model)
    assert supported == [True, False]
    assert "operation 1 (ADD): input 0 has operand type TENSOR_FLOAT16" in reasons[1]
    assert "'f32'" in reasons[1] and "operand_types" in reasons[1]
    # the same model is fully supported by the default device
    assert _device().getSupportedOperations_1_3(model) == [True, True]


def test_operand_type_allow_list_applies_to_control_flow_operands():
    # IF's condition is TENSOR_BOOL8; SUBGRAPH operands are always allowed.
    device = _device("no-bool", operand_types=["TENSOR_FLOAT32", "INT32"])
    supported, reasons = device.explainSupportedOperations(shared_branch_model())
    assert supported == [False, False, True]
    assert "input 0 has operand type TENSOR_BOOL8" in reasons[0]


def test_unimplemented_operation_reason(monkeypatch: pytest.MonkeyPatch):
    registry.lookup(Op.ABS)  # load the registry before patching it
    monkeypatch.delitem(registry._REGISTRY, Op.ABS, raising=False)
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    t = g.temporary(F32, [2])
    y = g.output(F32, [2])
    g.operation(Op.ABS, [x], [t])
    _add(g, t, t, y)
    supported, reasons = _device().explainSupportedOperations(mb.build())
    assert supported == [False, True]
    assert reasons[0] == "operation 0 (ABS): not implemented by the reference backend"


def test_oem_operation_is_valid_but_unsupported():
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    g.operation(Op.OEM_OPERATION, [x], [y])
    supported, reasons = _device().explainSupportedOperations(mb.build())
    assert supported == [False]
    assert "OEM_OPERATION" in reasons[0]


def test_reference_cycle_is_invalid_not_a_hang():
    model = cyclic_model()
    with pytest.raises(InvalidArgument, match="cycle"):
        _device().getSupportedOperations_1_3(model)
    with pytest.raises(InvalidArgument, match="cycle"):
        _device().prepareModel_1_3(model)


def test_checker_alone_survives_a_reference_cycle():
    # Bypasses validation on purpose: the checker itself must never loop.
    supported, reasons = SupportChecker(cyclic_model(), YesBackend()).check()
    assert supported == [False]
    assert "subgraph reference cycle" in reasons[0]
    assert reasons[0].startswith("operation 0 (IF) -> then subgraph 1, operation 0 (IF)")


def test_deep_nesting_does_not_recurse():
    # 1500 nested IFs: more than Python's default recursion limit.
    depth = 1500
    mb = ModelBuilder()
    subs = [mb.subgraph() for _ in range(depth)]
    for level, g in enumerate(subs):
        c = g.input(BOOL8, [1])
        x = g.input(F32, [2])
        y = g.output(F32, [2])
        if level + 1 < depth:
            nxt = subs[level + 1]
            g.operation(Op.IF, [c, g.subgraph_ref(nxt), g.subgraph_ref(nxt), c, x], [y])
        else:
            g.operation(Op.MUL, [x, x, g.constant(INT32, 0)], [y])
    main = mb.main
    c = main.input(BOOL8, [1])
    x = main.input(F32, [2])
    y = main.output(F32, [2])
    main.operation(Op.IF, [c, main.subgraph_ref(subs[0]), main.subgraph_ref(subs[0]), c, x], [y])
    model = mb.build()
    supported, reasons = SupportChecker(model, YesBackend()).check()
    assert supported == [True]
    device = _device("no-mul", exclude_operations=["MUL"])
    supported, reasons = device.explainSupportedOperations(model)
    assert supported == [False]
    assert reasons[0].endswith(f"subgraph {depth}, operation 0 (MUL): excluded by profile 'no-mul'")


def test_rules_that_could_refuse_nothing_are_left_out():
    from nnhal.driver.profile import load_profile
    from nnhal.driver.support_rules import device_rules, profile_lists

    profile = load_profile(None)
    assert not profile.exclude_operations and profile.operand_types is None
    assert profile_lists(profile) is None
    listing = dataclasses.replace(profile, exclude_operations=frozenset({OperationType.ADD}))
    rule = profile_lists(listing)
    assert rule is not None
    assert len(device_rules(listing, listing.limits)) == 2  # the size rule, the lists
    assert len(device_rules(listing, listing.limits, sizes_checked=True)) == 1


def test_a_replaced_support_pipeline_is_asked_by_preparation_too():
    device = Device()
    counting = _counting(device)
    device.prepareModel_1_3(nested_model())
    assert counting.asked and counting.asked[-1].startswith("subgraph 0")


def test_preparation_on_the_default_device_asks_no_question_of_a_checked_model(monkeypatch):
    # Every operation passed its checks, and the pipeline (no rules once the sizes are
    # checked, the reference backend, no packages) would answer yes to each: preparation
    # takes that answer without the walk, and it is the walk's answer.
    from nnhal.driver import device as device_module
    from nnhal.tools.bench_workloads import suite

    walked = []
    real = device_module.explain_support

    def walking(model, *args, **kwargs):
        walked.append(model)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(device_module, "explain_support", walking)
    models = [nested_model(), shared_branch_model(), *(w.model for w in suite(None))]
    for model in models:
        device = Device()
        device.prepareModel_1_3(model)
        assert walked == []
        # the walk over the same pipeline agrees (asked through a replaced pipeline)
        asking = Device()
        counting = _counting(asking)
        answer = asking.explainSupportedOperations(model)
        assert answer == ([True] * len(model.main.operations), {})
        assert counting.asked and walked == [model]
        walked.clear()


def test_the_walk_still_answers_when_an_operation_was_not_checked_or_rules_apply():
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    t = g.temporary(F32, [2])
    y = g.output(F32, [2])
    g.operation(Op.OEM_OPERATION, [x], [t])
    _add(g, t, t, y)
    with pytest.raises(InvalidArgument, match=r"operation 0 \(OEM_OPERATION\)"):
        Device().prepareModel_1_3(mb.build())
    with pytest.raises(InvalidArgument, match="excluded by profile 'no-add'"):
        _device("no-add", exclude_operations=["ADD"]).prepareModel_1_3(nested_model())

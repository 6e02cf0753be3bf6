"""The CPU executor outside control flow: compilation, binding, failures, outputs.

Most tests patch small test-only operation definitions into the executor's
registry lookup (``fake`` fixture) so that a kernel can fail, lie about its
shape or count its bindings on purpose. ``test_real_*`` tests use the real
registry.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import nnhal.driver.executor.compiler as compiler_module
import nnhal.driver.executor.operands as operands_module
import numpy as np
import pytest
from nnhal.driver.executor import CompiledModel, compile_model
from nnhal.driver.executor.operands import decode_constant, map_model_pools, operand_info
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, lookup

from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure, InvalidArgument, MissedDeadline
from nnhal.types import (
    DataLocation,
    HalVersion,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    OperationType,
)

T = OperandType
O = OperationType

#: every test twice: the model's code generated, and interpreted
pytestmark = pytest.mark.usefixtures("each_executor")
F32, I32, BOOL8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_BOOL8
ANY = {t: HalVersion.V1_0 for t in (F32, I32, BOOL8, T.TENSOR_FLOAT16)}

# ---------------------------------------------------------------------------
# Test-only operations
# ---------------------------------------------------------------------------

BINDINGS: list[OpContext] = []  # every ADD context a kernel was bound for


def _add_validate(ctx: OpContext) -> None:
    act = ctx.constant(2)
    if act is not None and not 0 <= int(act) <= 3:
        raise ctx.fail(f"input 2 (activation) has value {int(act)}; supported: 0..3")


def _add_execute(ctx: OpContext):
    BINDINGS.append(ctx)
    act = int(ctx.scalar(2, 0))
    if act == 1:
        return lambda a, b: np.maximum(a + b, 0)
    return np.add


def _unary(op: OperationType, kernel, prepare=None) -> OperationDef:
    return OperationDef(
        op,
        inputs=(Arg("x"),),
        outputs=(Arg("y"),),
        types=ANY,
        execute=lambda ctx: kernel,
        prepare=prepare,
    )


def _same_shape(ctx: OpContext):
    a, b = ctx.inputs[0].dimensions, ctx.inputs[1].dimensions
    if a is not None and b is not None and a != b:
        raise ctx.fail(f"inputs have shapes {list(a)} and {list(b)}")
    return a if a is not None else b


def _boom(x):
    raise ValueError("boom")


def _bad_data(x):
    raise InvalidArgument("index 9 out of range")


FAKE_OPS = {
    O.ADD: OperationDef(
        O.ADD,
        inputs=(Arg("a"), Arg("b"), Arg("activation", frozenset({T.INT32}))),
        outputs=(Arg("out"),),
        types=ANY,
        execute=_add_execute,
        validate=_add_validate,
        prepare=lambda ctx: [ctx.inputs[0].dimensions],
    ),
    O.ABS: _unary(O.ABS, _boom),
    O.NEG: _unary(O.NEG, _bad_data),
    O.FLOOR: _unary(O.FLOOR, lambda x: np.zeros((3,), x.dtype)),  # ignores the input shape
    O.EXP: _unary(O.EXP, lambda x: np.exp(x.astype(np.float64))),  # wrong dtype
    O.RESHAPE: _unary(O.RESHAPE, lambda x: x.reshape(-1)),  # a view of its input
    # claims "same shape as the input" but returns three elements
    O.SQRT: _unary(
        O.SQRT, lambda x: np.zeros((3,), x.dtype), lambda ctx: [ctx.inputs[0].dimensions]
    ),
    O.SUB: OperationDef(
        O.SUB,
        inputs=(Arg("a"), Arg("b")),
        outputs=(Arg("out"),),
        types=ANY,
        execute=lambda ctx: np.subtract,
        prepare=lambda ctx: [_same_shape(ctx)],
    ),
    O.RANK: OperationDef(
        O.RANK,
        inputs=(Arg("x"),),
        outputs=(Arg("rank", frozenset({T.INT32})),),
        types=ANY,
        execute=lambda ctx: lambda x: np.array(x.ndim, np.int32),
    ),
}


@pytest.fixture
def fake(monkeypatch):
    BINDINGS.clear()
    monkeypatch.setattr(compiler_module, "lookup", FAKE_OPS.get)


def f32(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def unary_model(op: OperationType, in_dims=(2,), out_dims=(2,)) -> Model:
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, in_dims)
    y = g.output(F32, out_dims)
    g.operation(op, [x], [y])
    return mb.build()


def add_model(activation=0, *, relaxed=False, reference=False) -> Model:
    mb = ModelBuilder(relaxed=relaxed)
    g = mb.main
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    bias = g.constant(F32, [1.0, -5.0], reference=reference)
    g.operation(O.ADD, [x, bias, g.constant(T.INT32, activation)], [y])
    return mb.build()


# ---------------------------------------------------------------------------
# Compilation
# ---------------------------------------------------------------------------


def test_add_runs(fake):
    (out,) = compile_model(add_model()).run([f32(1, 2)])
    np.testing.assert_array_equal(out, f32(2, -3))


def test_subgraph_used_twice_is_compiled_once(fake, monkeypatch):
    calls: list[int] = []
    original = compiler_module.compile_subgraph

    def counting(model, number, views, checked=None):
        calls.append(number)
        return original(model, number, views, checked)

    monkeypatch.setattr(compiler_module, "compile_subgraph", counting)
    mb = ModelBuilder()
    branch = mb.subgraph()
    bx = branch.input(F32, [2])
    by = branch.output(F32, [2])
    branch.operation(
        O.ADD, [bx, branch.constant(F32, [1.0, 1.0]), branch.constant(T.INT32, 0)], [by]
    )
    g = mb.main
    c, x = g.input(BOOL8, [1]), g.input(F32, [2])
    y = g.output(F32, [2])
    t = g.temporary(F32, [2])
    g.operation(O.IF, [c, g.subgraph_ref(branch), g.subgraph_ref(branch), x], [t])
    g.operation(O.IF, [c, g.subgraph_ref(branch), g.subgraph_ref(branch), t], [y])
    compiled = compile_model(mb.build())
    assert sorted(calls) == [0, 1]
    assert len(BINDINGS) == 1  # the branch's ADD kernel was bound once
    for flag in (True, False):
        out = compiled.run([np.array([flag]), f32(0, 1)], deadline_ns=time.monotonic_ns() + 10**11)
        np.testing.assert_array_equal(out[0], f32(2, 3))
    assert len(BINDINGS) == 1


def test_constants_decoded_once(fake, monkeypatch):
    decoded: list[Operand] = []
    original = operands_module.decode_constant

    def counting(model, operand, views):
        decoded.append(operand)
        return original(model, operand, views)

    monkeypatch.setattr(compiler_module, "decode_constant", counting)
    monkeypatch.setattr(operands_module, "decode_constant", counting)
    model = add_model(reference=True)
    compiled = compile_model(model)
    constants = [o for o in model.main.operands if o.lifetime in (3, 4)]
    assert len(decoded) == len(constants) == 2
    for _ in range(3):
        compiled.run([f32(0, 0)])
    compiled.run([f32(0, 0)], deadline_ns=time.monotonic_ns() + 10**11)
    assert len(decoded) == 2


def test_unsupported_operation_is_invalid_argument(fake):
    with pytest.raises(InvalidArgument, match=r"TANH \(subgraph 0, operation 0\).*not supported"):
        compile_model(unary_model(O.TANH))


def test_operation_check_failure_is_invalid_argument(fake):
    with pytest.raises(InvalidArgument, match=r"ADD \(subgraph 0, operation 0\).*activation"):
        compile_model(add_model(activation=9))


def test_wrong_type_is_invalid_argument(fake):
    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_QUANT8_ASYMM, [2], scale=1.0)
    y = g.output(T.TENSOR_QUANT8_ASYMM, [2], scale=1.0)
    g.operation(O.ADD, [x, x, g.constant(T.INT32, 0)], [y])
    with pytest.raises(InvalidArgument, match="TENSOR_QUANT8_ASYMM"):
        compile_model(mb.build())


def test_prepare_rejecting_certain_shapes_is_invalid_argument(fake):
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, [2]), g.input(F32, [3])
    y = g.output(F32, [0])
    g.operation(O.SUB, [a, b], [y])
    with pytest.raises(InvalidArgument, match=r"SUB \(subgraph 0, operation 0\).*\[2\] and \[3\]"):
        compile_model(mb.build())


def test_prepare_with_unknown_shapes_decides_at_run_time(fake):
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, [2]), g.input(F32, [0])
    y = g.output(F32, [0])
    g.operation(O.SUB, [a, b], [y])
    compiled = compile_model(mb.build())
    np.testing.assert_array_equal(compiled.run([f32(3, 4), f32(1, 1)])[0], f32(2, 3))
    with pytest.raises(GeneralFailure, match="SUB"):
        compiled.run([f32(3, 4), f32(1, 1, 1)])


def test_relaxed_flag_reaches_the_context(fake):
    compile_model(add_model(relaxed=True))
    compile_model(add_model(relaxed=False))
    assert [ctx.relaxed for ctx in BINDINGS] == [True, False]
    assert BINDINGS[0].where == "subgraph 0, operation 0"


def test_no_deadline_code_has_no_checks(fake):
    compiled = compile_model(add_model())
    assert "_dl" not in compiled.source(0) and "_mono" not in compiled.source(0)
    assert "_mono() > _dl" in compiled.source(0, checked=True)


# ---------------------------------------------------------------------------
# Late-bound scalars
# ---------------------------------------------------------------------------


def late_add_model() -> Model:
    """ADD whose activation is a model input."""
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    act = g.input(T.INT32)
    y = g.output(F32, [2])
    g.operation(O.ADD, [x, g.constant(F32, [1.0, -5.0]), act], [y])
    return mb.build()


def test_scalar_model_input_binds_at_run_time(fake):
    compiled = compile_model(late_add_model())
    assert BINDINGS == []  # nothing to bind before the activation is known
    none = compiled.run([f32(1, 2), np.array(0, np.int32)])[0]
    relu = compiled.run([f32(1, 2), np.array(1, np.int32)])[0]
    np.testing.assert_array_equal(none, f32(2, -3))
    np.testing.assert_array_equal(relu, f32(2, 0))
    compiled.run([f32(1, 2), np.array(1, np.int32)])
    assert len(BINDINGS) == 2  # one binding per distinct value
    assert int(BINDINGS[1].inputs[2].value) == 1


def test_bad_late_scalar_is_general_failure(fake):
    compiled = compile_model(late_add_model())
    with pytest.raises(GeneralFailure, match=r"ADD \(subgraph 0, operation 0\).*activation"):
        compiled.run([f32(1, 2), np.array(7, np.int32)])


def test_scalar_computed_by_another_operation(fake):
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    rank = g.temporary(T.INT32)
    y = g.output(F32, [2])
    g.operation(O.RANK, [x], [rank])  # rank 1 == RELU
    g.operation(O.ADD, [x, g.constant(F32, [1.0, -5.0]), rank], [y])
    (out,) = compile_model(mb.build()).run([f32(1, 2)])
    np.testing.assert_array_equal(out, f32(2, 0))


# ---------------------------------------------------------------------------
# Failures at run time
# ---------------------------------------------------------------------------


def test_kernel_exception_is_general_failure_naming_the_operation(fake):
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    t = g.temporary(F32, [2])
    y = g.output(F32, [2])
    g.operation(O.ADD, [x, x, g.constant(T.INT32, 0)], [t])
    g.operation(O.ABS, [t], [y])
    compiled = compile_model(mb.build())
    for deadline in (None, time.monotonic_ns() + 10**11):
        with pytest.raises(GeneralFailure, match=r"ABS \(subgraph 0, operation 1\).*boom"):
            compiled.run([f32(1, 2)], deadline_ns=deadline)


def test_kernel_invalid_argument_becomes_general_failure(fake):
    compiled = compile_model(unary_model(O.NEG))
    with pytest.raises(GeneralFailure, match=r"NEG \(subgraph 0, operation 0\): index 9"):
        compiled.run([f32(1, 2)])


def test_kernel_failure_inside_loop_body_names_the_body(fake, monkeypatch):
    ops = dict(FAKE_OPS)
    ops[O.LESS] = OperationDef(
        O.LESS,
        inputs=(Arg("a"), Arg("b")),
        outputs=(Arg("out", frozenset({BOOL8})),),
        types=ANY,
        execute=lambda ctx: np.less,
    )
    monkeypatch.setattr(compiler_module, "lookup", ops.get)
    mb = ModelBuilder()
    cond = mb.subgraph()
    cx = cond.input(F32, [2])
    cout = cond.output(BOOL8, [1])
    cond.operation(O.LESS, [cond.constant(F32, [0.0]), cond.constant(F32, [1.0])], [cout])
    del cx
    body = mb.subgraph()
    bx = body.input(F32, [2])
    bout = body.output(F32, [2])
    body.operation(O.ABS, [bx], [bout])
    g = mb.main
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), x], [y])
    with pytest.raises(GeneralFailure, match=r"ABS \(subgraph 2, operation 0\)"):
        compile_model(mb.build()).run([f32(1, 2)])


def test_wrong_input_count(fake):
    with pytest.raises(InvalidArgument, match="1 inputs"):
        compile_model(add_model()).run([f32(1, 2), f32(1, 2)])


def test_bad_input_value_never_escapes_raw(fake):
    compiled = compile_model(add_model())
    with pytest.raises(GeneralFailure, match="ADD"):
        compiled.run([np.array(["a", "b"])])


# ---------------------------------------------------------------------------
# Shapes and dtypes of results
# ---------------------------------------------------------------------------


def test_result_conflicting_with_declared_shape_fails(fake):
    compiled = compile_model(unary_model(O.FLOOR, out_dims=(2,)))
    with pytest.raises(GeneralFailure, match=r"FLOOR.*shape \[3\].*declared dimensions \[2\]"):
        compiled.run([f32(1, 2)])


@pytest.mark.parametrize(
    ("out_dims", "ok"), [((0,), True), ((), True), ((3,), True), ((4,), False), ((0, 3), False)]
)
def test_partially_known_output_dims(fake, out_dims, ok):
    compiled = compile_model(unary_model(O.FLOOR, out_dims=out_dims))
    if ok:
        assert compiled.run([f32(1, 2)])[0].shape == (3,)
    else:
        with pytest.raises(GeneralFailure, match="conflicts"):
            compiled.run([f32(1, 2)])


def test_proven_shapes_skip_checks_and_strict_mode_keeps_them(fake, monkeypatch):
    # SQRT's prepare says [2]; the kernel returns [3]: only a runtime check sees it
    model = unary_model(O.SQRT)
    compiled = compile_model(model)
    assert ".shape" not in compiled.source(0)
    monkeypatch.setenv("NNHAL_STRICT_SHAPES", "1")
    strict = compile_model(model)
    with pytest.raises(GeneralFailure, match=r"SQRT.*shape \[3\]"):
        strict.run([f32(1, 2)])


def _shared_branch_model() -> Model:
    """One branch y[2] = x + x called with a [2] operand and with a [0] (unknown) one."""
    mb = ModelBuilder()
    branch = mb.subgraph()
    bx = branch.input(F32, [2])
    by = branch.output(F32, [2])
    branch.operation(O.ADD, [bx, bx, branch.constant(T.INT32, 0)], [by])
    g = mb.main
    c, a, b = g.input(BOOL8, [1]), g.input(F32, [2]), g.input(F32, [0])
    out_a, out_b = g.output(F32, [2]), g.output(F32, [0])
    ref = g.subgraph_ref(branch)
    g.operation(O.IF, [c, ref, ref, a], [out_a])
    g.operation(O.IF, [c, ref, ref, b], [out_b])
    return mb.build()


def test_shape_proofs_need_every_call_site(fake):
    compiled = compile_model(_shared_branch_model())
    # the branch cannot assume its input is [2]: one caller passes unknown dims
    (add_step,) = compiled.plans[1].steps
    assert add_step.proven == frozenset()
    first_if = compiled.plans[0].steps[0]
    assert first_if.proven == frozenset({0})  # [2] either way: the branch output is checked
    cond = np.array([True])
    a, b = compiled.run([cond, f32(1, 2), f32(3, 4)])
    np.testing.assert_array_equal(a, f32(2, 4))
    np.testing.assert_array_equal(b, f32(6, 8))
    with pytest.raises(GeneralFailure, match=r"ADD \(subgraph 1, operation 0\).*\[3\].*\[2\]"):
        compiled.run([cond, f32(1, 2), f32(1, 2, 3)])


def test_main_outputs_have_the_operand_dtype(fake):
    (out,) = compile_model(unary_model(O.EXP)).run([f32(0, 1)])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.exp(f32(0, 1)), rtol=1e-6)


def test_outputs_are_fresh_arrays(fake):
    compiled = compile_model(unary_model(O.RESHAPE))
    x = f32(1, 2)
    (out,) = compiled.run([x])
    assert not np.shares_memory(out, x) and out.flags.writeable
    out[0] = 99
    assert x.tolist() == [1, 2]


def test_concurrent_runs(fake):
    compiled = compile_model(add_model())
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for _ in range(200):
                deadline = time.monotonic_ns() + 10**11 if k % 2 else None
                out = compiled.run([f32(k, k)], deadline_ns=deadline)[0]
                assert out.tolist() == [k + 1, k - 5]
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_deadline_passed_before_first_operation(fake):
    with pytest.raises(MissedDeadline, match=r"ADD \(subgraph 0, operation 0\)") as info:
        compile_model(add_model()).run([f32(1, 2)], deadline_ns=time.monotonic_ns() - 10)
    assert info.value.transient


# ---------------------------------------------------------------------------
# Operand helpers
# ---------------------------------------------------------------------------


def test_decode_constants_and_operand_info():
    mb = ModelBuilder()
    g = mb.main
    copy = g.constant(F32, [[1.0, 2.0], [3.0, 4.0]])
    ref = g.constant(I32, [7, 8, 9], reference=True)
    scalar = g.constant(T.FLOAT32, 2.5)
    flags = g.constant(BOOL8, [True, False, True])
    flag = g.constant(T.BOOL, True)
    missing = g.no_value(F32, [2])
    unknown = g.temporary(F32)
    x = g.input(F32, [2])
    g.output(F32, [2])
    model = mb.build()
    views = map_model_pools(model)
    assert len(views) == 1 and isinstance(views[0], memoryview)
    ops = model.main.operands
    a = decode_constant(model, ops[copy], views)
    assert a.dtype == np.float32 and a.tolist() == [[1, 2], [3, 4]]
    assert not a.flags.writeable
    b = decode_constant(model, ops[ref], views)
    assert b.dtype == np.int32 and b.tolist() == [7, 8, 9]
    s = decode_constant(model, ops[scalar], views)
    assert s.shape == () and s.dtype == np.float32 and float(s) == 2.5
    assert decode_constant(model, ops[flags], views).tolist() == [True, False, True]
    f = decode_constant(model, ops[flag], views)
    assert f.dtype == np.bool_ and f.shape == () and bool(f)

    info = operand_info(model, model.main, copy, views)
    assert info.is_constant and info.dimensions == (2, 2)
    assert operand_info(model, model.main, scalar, views).dimensions == ()
    assert operand_info(model, model.main, missing, views).omitted
    assert operand_info(model, model.main, unknown, views).dimensions is None
    x_info = operand_info(model, model.main, x, views)
    assert x_info.value is None and not x_info.omitted and x_info.rank == 1


def test_decode_constant_rejects_bad_locations():
    model = add_model()
    operand = next(o for o in model.main.operands if o.lifetime == OperandLifeTime.CONSTANT_COPY)
    outside = replace(operand, location=DataLocation(0, 10_000, 8))
    with pytest.raises(InvalidArgument, match="outside"):
        decode_constant(model, outside, [])
    short = replace(operand, location=DataLocation(0, 0, 4))
    with pytest.raises(InvalidArgument, match="needs 8 bytes"):
        decode_constant(model, short, [])
    missing_pool = replace(operand, lifetime=OperandLifeTime.CONSTANT_REFERENCE)
    with pytest.raises(InvalidArgument, match="pool 0"):
        decode_constant(model, missing_pool, [])


def test_compile_reports_bad_constant_location(fake):
    model = add_model()
    operands = list(model.main.operands)
    k = next(i for i, o in enumerate(operands) if o.type == F32 and o.lifetime == 3)
    operands[k] = replace(operands[k], location=DataLocation(0, 10_000, 8))
    bad = replace(model, main=replace(model.main, operands=tuple(operands)))
    with pytest.raises(InvalidArgument, match=f"subgraph 0, operand {k}"):
        compile_model(bad)


# ---------------------------------------------------------------------------
# With the real operation registry
# ---------------------------------------------------------------------------


def test_real_fibonacci_while():
    needed = (O.FULLY_CONNECTED, O.ADD, O.LESS)
    if any(lookup(op) is None for op in needed):
        pytest.skip("FULLY_CONNECTED / ADD / LESS not registered yet")
    mb = ModelBuilder()
    w = np.array([[1.0, 1.0], [1.0, 0.0]], np.float32)
    cond = mb.subgraph()
    cond.input(F32, [1, 2])
    ci, cn = cond.input(I32, [1]), cond.input(I32, [1])
    cout = cond.output(BOOL8, [1])
    cond.operation(O.LESS, [ci, cn], [cout])
    body = mb.subgraph()
    bs, bi = body.input(F32, [1, 2]), body.input(I32, [1])
    body.input(I32, [1])
    bs_out, bi_out = body.output(F32, [1, 2]), body.output(I32, [1])
    act = body.constant(T.INT32, 0)
    body.operation(
        O.FULLY_CONNECTED,
        [bs, body.constant(F32, w), body.constant(F32, [0.0, 0.0]), act],
        [bs_out],
    )
    body.operation(O.ADD, [bi, body.constant(I32, [1]), act], [bi_out])
    g = mb.main
    s, i, n = g.input(F32, [1, 2]), g.input(I32, [1]), g.input(I32, [1])
    out = g.output(F32, [1, 2])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), s, i, n], [out])
    compiled: CompiledModel = compile_model(mb.build())
    for steps in (0, 1, 20):
        state = np.array([[1.0, 1.0]], np.float32)
        expected = state.copy()
        for _ in range(steps):
            expected = expected @ w.T
        got = compiled.run([state, np.array([0], np.int32), np.array([steps], np.int32)])[0]
        np.testing.assert_array_equal(got, expected)
    assert ".shape" not in compiled.source(0)  # every shape proven via prepare


def test_run_time_shape_rule_is_remembered_per_shapes_not_skipped():
    """The run-time shape rule of a step with unknown input shapes remembers the shapes
    it last accepted; other shapes are checked again, every time."""
    mb = ModelBuilder()
    a, b = mb.main.input(F32, [0]), mb.main.input(F32, [0])
    out = mb.main.output(F32, [0])
    mb.main.operation(O.ADD, [a, b, mb.main.constant(T.INT32, 0)], [out])
    compiled = compile_model(mb.build())
    three, four = np.ones(3, np.float32), np.ones(4, np.float32)
    for _ in range(2):
        assert compiled.run([three, three])[0].tolist() == [2.0, 2.0, 2.0]
        with pytest.raises((GeneralFailure, InvalidArgument), match=r"ADD"):
            compiled.run([three, four])
        assert compiled.run([four, four])[0].tolist() == [2.0] * 4
        with pytest.raises((GeneralFailure, InvalidArgument), match=r"ADD"):
            compiled.run([four, three])


def _lstm_step_model(x_dims: list[int]) -> tuple:
    """One LSTM step (2 units, no peepholes, projection or layer norm: those inputs are
    NO_VALUE) on an input declared ``x_dims``; (model, cell weights)."""
    rng = np.random.default_rng(4)
    w = [rng.uniform(-0.5, 0.5, (2, 2)).astype(np.float32) for _ in range(8)]
    bias = [rng.uniform(0, 0.3, 2).astype(np.float32) for _ in range(4)]
    mb = ModelBuilder()
    g = mb.main
    x, h, c = g.input(F32, x_dims), g.input(F32, [1, 2]), g.input(F32, [1, 2])
    cell = [g.constant(F32, v) for v in w] + [g.no_value(F32) for _ in range(3)]
    cell += [g.constant(F32, v) for v in bias] + [g.no_value(F32), g.no_value(F32)]
    scalars = [g.constant(T.INT32, 4), g.constant(T.FLOAT32, 0.0), g.constant(T.FLOAT32, 0.0)]
    outs = [g.output(F32, [1, 8]), g.output(F32, [1, 2]), g.output(F32, [1, 2])]
    outs.append(g.output(F32, [1, 2]))
    g.operation(O.LSTM, [x, *cell, h, c, *scalars], outs)
    return mb.build(), w, bias


def test_no_value_inputs_need_no_run_time_shape_rule():
    """Omitted optional inputs are None at every run, as at compile time: an LSTM step
    whose other inputs are fully declared runs no shape rule per call; an input of
    unknown shape still gets one."""
    known, w, bias = _lstm_step_model([1, 2])
    unknown, _, _ = _lstm_step_model([0, 0])
    x, h, c = (np.array([[0.5, -0.25]], np.float32) * k for k in (1, 2, 3))

    def sigmoid(v):
        return 1 / (1 + np.exp(-v))

    gate = [x @ w[k].T + h @ w[4 + k].T + bias[k] for k in range(4)]
    c_want = sigmoid(gate[1]) * c + sigmoid(gate[0]) * np.tanh(gate[2])
    h_want = sigmoid(gate[3]) * np.tanh(c_want)
    for model, rule in ((known, False), (unknown, True)):
        compiled = compile_model(model)
        assert ("shape_check" in compiled.source()) is rule
        _, h_out, c_out, out = compiled.run([x, h, c])
        np.testing.assert_allclose(h_out, h_want, rtol=1e-5)
        np.testing.assert_allclose(c_out, c_want, rtol=1e-5)
        np.testing.assert_array_equal(out, h_out)
    with pytest.raises(GeneralFailure, match=r"LSTM"):
        compile_model(unknown).run([np.ones((1, 3), np.float32), h, c])


def test_a_run_time_shape_rule_failure_names_its_operation_once():
    """Shapes known only at run time that the operation's rule refuses: GENERAL_FAILURE
    naming the operation and its place once, then the rule."""
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(T.TENSOR_FLOAT32, [0]), g.input(T.TENSOR_FLOAT32, [0])
    g.operation(O.ADD, [a, b, g.constant(T.INT32, 0)], [g.output(T.TENSOR_FLOAT32, [0])])
    compiled = compile_model(mb.build())
    with pytest.raises(GeneralFailure) as info:
        compiled.run([np.ones(3, np.float32), np.ones(2, np.float32)])
    message = info.value.message
    assert message.startswith("ADD (subgraph 0, operation 0): inputs 0 and 1 cannot be broadcast")
    assert message.count("ADD (subgraph 0, operation 0)") == 1

"""IF and WHILE in the CPU executor: branches, loops, shapes, timeouts, deadlines.

The operations inside the subgraphs are small test-only definitions (patched
into the executor's registry lookup), so these tests exercise the executor's
control flow and nothing of the real kernels. Expected values are computed
here with plain Python/numpy.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from nnhal.driver.ops.registry import Arg, OperationDef

from nnhal.builder import ModelBuilder, SubgraphBuilder
from nnhal.errors import GeneralFailure, MissedDeadline
from nnhal.types import HalVersion, OperandType, OperationType

T = OperandType
O = OperationType

#: every test twice: the model's code generated, and interpreted
pytestmark = pytest.mark.usefixtures("each_executor")
F32, I32, BOOL8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_BOOL8
ANY = {t: HalVersion.V1_0 for t in (F32, I32, BOOL8, T.TENSOR_FLOAT16)}

# ---------------------------------------------------------------------------
# Test-only operations
# ---------------------------------------------------------------------------


def _binary(fn):
    return lambda ctx: fn


def _compare(op, fn):
    return OperationDef(
        op,
        inputs=(Arg("a"), Arg("b")),
        outputs=(Arg("out", frozenset({BOOL8})),),
        types=ANY,
        execute=_binary(fn),
    )


FAKE_OPS = {
    O.ADD: OperationDef(
        O.ADD,
        inputs=(Arg("a"), Arg("b"), Arg("activation", frozenset({T.INT32}))),
        outputs=(Arg("out"),),
        types=ANY,
        execute=_binary(np.add),
    ),
    O.LESS: _compare(O.LESS, np.less),
    O.GREATER_EQUAL: _compare(O.GREATER_EQUAL, np.greater_equal),
    O.CONCATENATION: OperationDef(
        O.CONCATENATION,
        inputs=(Arg("values"), Arg("axis", frozenset({T.INT32}))),
        outputs=(Arg("out"),),
        types=ANY,
        variadic=True,
        execute=lambda ctx: lambda *xs: np.concatenate(xs, axis=ctx.scalar(len(ctx.inputs) - 1)),
    ),
}


@pytest.fixture(autouse=True)
def fake_ops(monkeypatch):
    monkeypatch.setattr("nnhal.driver.executor.compiler.lookup", FAKE_OPS.get)


def f32(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def i32(*values) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def add(g: SubgraphBuilder, a: int, b: int, out: int) -> None:
    g.operation(O.ADD, [a, b, g.constant(T.INT32, 0)], [out])


# ---------------------------------------------------------------------------
# IF
# ---------------------------------------------------------------------------


def _adder(mb: ModelBuilder, amount: float) -> SubgraphBuilder:
    """A branch: x [2] -> x + amount."""
    sg = mb.subgraph()
    x = sg.input(F32, [2])
    y = sg.output(F32, [2])
    add(sg, x, sg.constant(F32, [amount, amount]), y)
    return sg


@pytest.mark.parametrize("condition", [True, False])
def test_if_constant_condition(condition):
    mb = ModelBuilder()
    then, other = _adder(mb, 1.0), _adder(mb, 10.0)
    g = mb.main
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    cond = g.constant(BOOL8, [condition])
    g.operation(O.IF, [cond, g.subgraph_ref(then), g.subgraph_ref(other), x], [y])
    (out,) = compile_model(mb.build()).run([f32(1, 2)])
    np.testing.assert_array_equal(out, f32(1, 2) + (1.0 if condition else 10.0))
    assert out.dtype == np.float32


def test_if_computed_condition():
    mb = ModelBuilder()
    then, other = _adder(mb, 1.0), _adder(mb, 10.0)
    g = mb.main
    a, b = g.input(I32, [1]), g.input(I32, [1])
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    cond = g.temporary(BOOL8, [1])
    g.operation(O.LESS, [a, b], [cond])
    g.operation(O.IF, [cond, g.subgraph_ref(then), g.subgraph_ref(other), x], [y])
    compiled = compile_model(mb.build())
    np.testing.assert_array_equal(compiled.run([i32(1), i32(2), f32(0, 0)])[0], f32(1, 1))
    np.testing.assert_array_equal(compiled.run([i32(3), i32(2), f32(0, 0)])[0], f32(10, 10))


def test_if_condition_as_model_input():
    mb = ModelBuilder()
    then, other = _adder(mb, 1.0), _adder(mb, 10.0)
    g = mb.main
    cond = g.input(BOOL8, [1])
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    g.operation(O.IF, [cond, g.subgraph_ref(then), g.subgraph_ref(other), x], [y])
    compiled = compile_model(mb.build())
    np.testing.assert_array_equal(compiled.run([np.array([True]), f32(0, 0)])[0], f32(1, 1))
    np.testing.assert_array_equal(compiled.run([np.array([False]), f32(0, 0)])[0], f32(10, 10))
    with pytest.raises(GeneralFailure, match=r"IF \(subgraph 0, operation 0\).*no value"):
        compiled.run([None, f32(0, 0)])


def test_if_both_branches_same_subgraph():
    mb = ModelBuilder()
    branch = _adder(mb, 5.0)
    g = mb.main
    cond = g.input(BOOL8, [1])
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    ref = g.subgraph_ref(branch)
    g.operation(O.IF, [cond, ref, ref, x], [y])
    compiled = compile_model(mb.build())
    assert sorted(compiled.plans) == [0, 1]
    for value in (True, False):
        np.testing.assert_array_equal(compiled.run([np.array([value]), f32(1, 1)])[0], f32(6, 6))


def _failing_branch_model(passes: int):
    """IF (input condition) whose then-branch adds a [3] constant to x [2] after ``passes``
    additions that work: the kernel fails (numpy cannot broadcast) in a branch step."""
    mb = ModelBuilder()
    then = mb.subgraph()
    value = then.input(F32, [2])
    for _ in range(passes):
        step = then.temporary(F32, [2])
        add(then, value, then.constant(F32, [1.0, 1.0]), step)
        value = step
    add(then, value, then.constant(F32, [1.0, 2.0, 3.0]), then.output(F32, [2]))
    other = _adder(mb, 10.0)
    g = mb.main
    cond, x = g.input(BOOL8, [1]), g.input(F32, [2])
    g.operation(O.IF, [cond, g.subgraph_ref(then), g.subgraph_ref(other), x], [g.output(F32, [2])])
    return compile_model(mb.build())


@pytest.mark.parametrize("passes", [0, 5])  # a branch inlined, and one too long for that
def test_a_failing_branch_step_is_named_inlined_or_called(passes):
    compiled = _failing_branch_model(passes)
    inlined = passes == 0
    assert ("f1(" not in compiled.source()) is inlined
    np.testing.assert_array_equal(compiled.run([np.array([False]), f32(1, 2)])[0], f32(11, 12))
    with pytest.raises(GeneralFailure) as info:
        compiled.run([np.array([True]), f32(1, 2)])
    assert info.value.message.startswith(
        f"ADD (subgraph 1, operation {passes}): kernel failed: ValueError"
    )


def test_if_condition_no_value_fails_at_execution():
    mb = ModelBuilder()
    then, other = _adder(mb, 1.0), _adder(mb, 10.0)
    g = mb.main
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    cond = g.no_value(BOOL8, [1])
    g.operation(O.IF, [cond, g.subgraph_ref(then), g.subgraph_ref(other), x], [y])
    compiled = compile_model(mb.build())  # preparation succeeds
    with pytest.raises(GeneralFailure, match=r"IF \(subgraph 0, operation 0\).*operand 2"):
        compiled.run([f32(1, 2)])
    with pytest.raises(GeneralFailure, match="IF"):
        compiled.run([f32(1, 2)], deadline_ns=time.monotonic_ns() + 10**12)


# ---------------------------------------------------------------------------
# WHILE
# ---------------------------------------------------------------------------


def _counting_loop(mb: ModelBuilder) -> tuple[SubgraphBuilder, SubgraphBuilder]:
    """cond(i, acc, n) = i < n; body(i, acc, n) = (i + 1, acc + i)."""
    cond = mb.subgraph()
    ci, _, cn = cond.input(I32, [1]), cond.input(I32, [1]), cond.input(I32, [1])
    cout = cond.output(BOOL8, [1])
    cond.operation(O.LESS, [ci, cn], [cout])

    body = mb.subgraph()
    bi, bacc, _ = body.input(I32, [1]), body.input(I32, [1]), body.input(I32, [1])
    bi_out, bacc_out = body.output(I32, [1]), body.output(I32, [1])
    add(body, bi, body.constant(I32, [1]), bi_out)
    add(body, bacc, bi, bacc_out)
    return cond, body


def _sum_model(outputs: int = 2):
    mb = ModelBuilder()
    cond, body = _counting_loop(mb)
    g = mb.main
    i, acc, n = g.input(I32, [1]), g.input(I32, [1]), g.input(I32, [1])
    outs = [g.output(I32, [1]) for _ in range(outputs)]
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), i, acc, n], outs)
    return mb.build()


@pytest.mark.parametrize("n", [0, 1, 5, 100])
def test_while_sum(n):
    i_out, acc_out = compile_model(_sum_model()).run([i32(0), i32(0), i32(n)])
    assert i_out.tolist() == [n]
    assert acc_out.tolist() == [sum(range(n))]


def test_while_state_only_value():
    # one WHILE output (m = 1): acc is state-only (k = 1), n input-only
    compiled = compile_model(_sum_model(outputs=1))
    (i_out,) = compiled.run([i32(2), i32(0), i32(7)])
    assert i_out.tolist() == [7]


def test_while_zero_iterations_returns_copies():
    compiled = compile_model(_sum_model())
    i, acc, n = i32(9), i32(4), i32(3)
    i_out, acc_out = compiled.run([i, acc, n])
    assert i_out.tolist() == [9] and acc_out.tolist() == [4]
    assert not np.shares_memory(i_out, i) and not np.shares_memory(acc_out, acc)
    i_out[0] = 100  # the caller owns the result
    assert i.tolist() == [9]


def test_while_zero_iterations_of_constant_initial_value():
    mb = ModelBuilder()
    cond, body = _counting_loop(mb)
    g = mb.main
    n = g.input(I32, [1])
    i_out, acc_out = g.output(I32, [1]), g.output(I32, [1])
    start, zero = g.constant(I32, [5]), g.constant(I32, [0])
    g.operation(
        O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), start, zero, n], [i_out, acc_out]
    )
    compiled = compile_model(mb.build())
    first = compiled.run([i32(0)])
    assert [a.tolist() for a in first] == [[5], [0]]
    first[0][0] = 77  # writable, and not the constant itself
    assert compiled.run([i32(0)])[0].tolist() == [5]
    assert [a.tolist() for a in compiled.run([i32(7)])] == [[7], [5 + 6]]


def test_nested_while():
    """acc = sum over i < n of (number of inner iterations j < i) = n(n-1)/2."""
    mb = ModelBuilder()
    # inner: cond(acc, j, i) = j < i; body(acc, j, i) = (acc + 1, j + 1)
    icond = mb.subgraph()
    _, cj, ci = icond.input(I32, [1]), icond.input(I32, [1]), icond.input(I32, [1])
    icout = icond.output(BOOL8, [1])
    icond.operation(O.LESS, [cj, ci], [icout])
    ibody = mb.subgraph()
    bacc, bj, _ = ibody.input(I32, [1]), ibody.input(I32, [1]), ibody.input(I32, [1])
    bacc_out, bj_out = ibody.output(I32, [1]), ibody.output(I32, [1])
    one = ibody.constant(I32, [1])
    add(ibody, bacc, one, bacc_out)
    add(ibody, bj, one, bj_out)
    # outer: cond(i, acc, n) = i < n; body: (acc, _) = inner(acc, 0, i); i += 1
    ocond = mb.subgraph()
    oi, _, on = ocond.input(I32, [1]), ocond.input(I32, [1]), ocond.input(I32, [1])
    ocout = ocond.output(BOOL8, [1])
    ocond.operation(O.LESS, [oi, on], [ocout])
    obody = mb.subgraph()
    xi, xacc, _ = obody.input(I32, [1]), obody.input(I32, [1]), obody.input(I32, [1])
    xi_out, xacc_out = obody.output(I32, [1]), obody.output(I32, [1])
    jfinal = obody.temporary(I32, [1])
    obody.operation(
        O.WHILE,
        [obody.subgraph_ref(icond), obody.subgraph_ref(ibody), xacc, obody.constant(I32, [0]), xi],
        [xacc_out, jfinal],
    )
    add(obody, xi, obody.constant(I32, [1]), xi_out)
    g = mb.main
    n = g.input(I32, [1])
    acc = g.output(I32, [1])
    i_final = g.temporary(I32, [1])
    zero = g.constant(I32, [0])
    g.operation(
        O.WHILE, [g.subgraph_ref(ocond), g.subgraph_ref(obody), zero, zero, n], [i_final, acc]
    )
    compiled = compile_model(mb.build())
    for value in (0, 1, 2, 10):
        assert compiled.run([i32(value)])[0].tolist() == [value * (value - 1) // 2]
    # the same with a deadline (the checked variant of every function)
    far = time.monotonic_ns() + 60 * 10**9
    assert compiled.run([i32(10)], deadline_ns=far)[0].tolist() == [45]


def test_if_inside_while_inside_if():
    """main: IF(c) then WHILE(i < n){ acc += (i < 3 ? 1 : 10); i += 1 } else acc + 1000."""
    mb = ModelBuilder()
    small, big = mb.subgraph(), mb.subgraph()
    for sg, amount in ((small, 1), (big, 10)):
        a = sg.input(I32, [1])
        r = sg.output(I32, [1])
        add(sg, a, sg.constant(I32, [amount]), r)
    cond = mb.subgraph()
    ci, _, cn = cond.input(I32, [1]), cond.input(I32, [1]), cond.input(I32, [1])
    cout = cond.output(BOOL8, [1])
    cond.operation(O.LESS, [ci, cn], [cout])
    body = mb.subgraph()
    bi, bacc, _ = body.input(I32, [1]), body.input(I32, [1]), body.input(I32, [1])
    bi_out, bacc_out = body.output(I32, [1]), body.output(I32, [1])
    early = body.temporary(BOOL8, [1])
    body.operation(O.LESS, [bi, body.constant(I32, [3])], [early])
    body.operation(
        O.IF, [early, body.subgraph_ref(small), body.subgraph_ref(big), bacc], [bacc_out]
    )
    add(body, bi, body.constant(I32, [1]), bi_out)
    looping = mb.subgraph()
    lacc, ln = looping.input(I32, [1]), looping.input(I32, [1])
    lout = looping.output(I32, [1])
    li = looping.temporary(I32, [1])
    looping.operation(
        O.WHILE,
        [
            looping.subgraph_ref(cond),
            looping.subgraph_ref(body),
            looping.constant(I32, [0]),
            lacc,
            ln,
        ],
        [li, lout],
    )
    other = mb.subgraph()
    oacc, _ = other.input(I32, [1]), other.input(I32, [1])
    oout = other.output(I32, [1])
    add(other, oacc, other.constant(I32, [1000]), oout)
    g = mb.main
    c, acc, n = g.input(BOOL8, [1]), g.input(I32, [1]), g.input(I32, [1])
    out = g.output(I32, [1])
    g.operation(O.IF, [c, g.subgraph_ref(looping), g.subgraph_ref(other), acc, n], [out])
    compiled = compile_model(mb.build())

    def expected(n: int) -> int:
        return sum(1 if i < 3 else 10 for i in range(n))

    for n_value in (0, 2, 3, 8):
        got = compiled.run([np.array([True]), i32(0), i32(n_value)])[0]
        assert got.tolist() == [expected(n_value)]
    assert compiled.run([np.array([False]), i32(5), i32(8)])[0].tolist() == [1005]


def test_while_condition_with_its_own_loop():
    """A condition that itself holds a WHILE is called, not inlined."""
    mb = ModelBuilder()
    ccond, cbody = _counting_loop(mb)  # runs zero times inside the condition
    cond = mb.subgraph()
    ci, _, cn = cond.input(I32, [1]), cond.input(I32, [1]), cond.input(I32, [1])
    cout = cond.output(BOOL8, [1])
    copy_i, copy_acc = cond.temporary(I32, [1]), cond.temporary(I32, [1])
    cond.operation(
        O.WHILE,
        [cond.subgraph_ref(ccond), cond.subgraph_ref(cbody), ci, ci, ci],
        [copy_i, copy_acc],
    )
    cond.operation(O.LESS, [copy_i, cn], [cout])
    _, body = _counting_loop(mb)
    g = mb.main
    i, acc, n = g.input(I32, [1]), g.input(I32, [1]), g.input(I32, [1])
    outs = [g.output(I32, [1]), g.output(I32, [1])]
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), i, acc, n], outs)
    compiled = compile_model(mb.build())
    assert [a.tolist() for a in compiled.run([i32(0), i32(0), i32(6)])] == [[6], [15]]


def test_while_output_grows():
    """Body outputs of unknown length grow through CONCATENATION each iteration."""
    mb = ModelBuilder()
    cond = mb.subgraph()
    ci, _, cn = cond.input(I32, [1]), cond.input(F32, [0]), cond.input(I32, [1])
    cout = cond.output(BOOL8, [1])
    cond.operation(O.LESS, [ci, cn], [cout])
    body = mb.subgraph()
    bi, bv, _ = body.input(I32, [1]), body.input(F32, [0]), body.input(I32, [1])
    bi_out, bv_out = body.output(I32, [1]), body.output(F32, [0])
    body.operation(
        O.CONCATENATION, [bv, body.constant(F32, [7.0]), body.constant(T.INT32, 0)], [bv_out]
    )
    add(body, bi, body.constant(I32, [1]), bi_out)
    g = mb.main
    i, v, n = g.input(I32, [1]), g.input(F32, [0]), g.input(I32, [1])
    i_out, v_out = g.output(I32, [1]), g.output(F32, [0])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), i, v, n], [i_out, v_out])
    compiled = compile_model(mb.build())
    for count in (0, 1, 4):
        _, grown = compiled.run([i32(0), f32(1.0, 2.0), i32(count)])
        np.testing.assert_array_equal(grown, np.concatenate([f32(1, 2), np.full(count, 7, "f4")]))


# ---------------------------------------------------------------------------
# Loop timeout and execution deadline
# ---------------------------------------------------------------------------


def _infinite_loop_model():
    """while_infinite_loop: cond = i >= n, body = i + 1.0, i = 1.0, n = 0.0."""
    mb = ModelBuilder()
    cond = mb.subgraph()
    ci, cn = cond.input(F32, [1]), cond.input(F32, [1])
    cout = cond.output(BOOL8, [1])
    cond.operation(O.GREATER_EQUAL, [ci, cn], [cout])
    body = mb.subgraph()
    bi, _ = body.input(F32, [1]), body.input(F32, [1])
    bout = body.output(F32, [1])
    add(body, bi, body.constant(F32, [1.0]), bout)
    g = mb.main
    i, n = g.input(F32, [1]), g.input(F32, [1])
    out = g.output(F32, [1])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), i, n], [out])
    return compile_model(mb.build())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("timeout_ns", [1_000_000, None])
def test_infinite_loop_times_out(timeout_ns):
    compiled = _infinite_loop_model()
    kwargs = {} if timeout_ns is None else {"loop_timeout_ns": timeout_ns}
    with pytest.raises(MissedDeadline) as info:
        compiled.run([f32(1.0), f32(0.0)], **kwargs)
    assert info.value.transient
    assert "WHILE (subgraph 0, operation 0)" in info.value.message


@pytest.mark.timeout(60)
def test_loop_timeout_applies_with_a_deadline_too():
    compiled = _infinite_loop_model()
    with pytest.raises(MissedDeadline, match="loopTimeoutDuration") as info:
        compiled.run(
            [f32(1.0), f32(0.0)],
            deadline_ns=time.monotonic_ns() + 60 * 10**9,
            loop_timeout_ns=1_000_000,
        )
    assert info.value.transient


def test_deadline_already_passed():
    compiled = _infinite_loop_model()
    with pytest.raises(MissedDeadline, match="deadline") as info:
        compiled.run([f32(1.0), f32(0.0)], deadline_ns=time.monotonic_ns() - 1)
    assert info.value.transient


@pytest.mark.timeout(60)
def test_deadline_expires_inside_loop():
    compiled = _infinite_loop_model()
    with pytest.raises(MissedDeadline, match=r"deadline passed before .*subgraph [12]") as info:
        compiled.run(
            [f32(1.0), f32(0.0)],
            deadline_ns=time.monotonic_ns() + 1_000_000_000,  # reached inside the loop, even when slow
            loop_timeout_ns=30 * 10**9,
        )
    assert info.value.transient


def test_deadline_far_away_does_not_fire():
    compiled = compile_model(_sum_model())
    far = time.monotonic_ns() + 60 * 10**9
    assert compiled.run([i32(0), i32(0), i32(10)], deadline_ns=far)[1].tolist() == [45]


# ---------------------------------------------------------------------------
# Deep nesting
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [50])
def test_deeply_nested_if(levels):
    """Level k: t = IF(c, level k+1, level k+1, c, x); y = t + 1. The leaf adds 1."""
    mb = ModelBuilder()
    subgraphs = [mb.subgraph() for _ in range(levels)]
    for depth, sg in enumerate(subgraphs):
        c, x = sg.input(BOOL8, [1]), sg.input(F32, [2])
        y = sg.output(F32, [2])
        one = sg.constant(F32, [1.0, 1.0])
        if depth + 1 < levels:
            inner = sg.subgraph_ref(subgraphs[depth + 1])
            t = sg.temporary(F32, [2])
            sg.operation(O.IF, [c, inner, inner, c, x], [t])
            add(sg, t, one, y)
        else:
            add(sg, x, one, y)
    g = mb.main
    c, x = g.input(BOOL8, [1]), g.input(F32, [2])
    y = g.output(F32, [2])
    top = g.subgraph_ref(subgraphs[0])
    g.operation(O.IF, [c, top, top, c, x], [y])
    compiled = compile_model(mb.build())
    np.testing.assert_array_equal(
        compiled.run([np.array([True]), f32(0, 1)])[0], f32(levels, levels + 1)
    )
    far = time.monotonic_ns() + 60 * 10**9
    out = compiled.run([np.array([False]), f32(0, 1)], deadline_ns=far)[0]
    np.testing.assert_array_equal(out, f32(levels, levels + 1))

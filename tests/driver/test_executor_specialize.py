"""The executor's specialisations (driver/executor/specialize.py) and their fallbacks.

Each specialised model is also run with its specialisation defeated (a counter
of another dtype, a body that reads the counter) and must give the same
outputs as the generic loop and as numpy.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from nnhal.driver.executor.specialize import _wrap32, find_counter
from same_outcome import assert_same_outcome, count_rebuilds

from nnhal.builder import ModelBuilder
from nnhal.errors import MissedDeadline
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32, I32, BOOL8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_BOOL8
W = np.array([[0.5, 1.0], [1.0, -0.25]], np.float32)


def counter_model(
    compare=O.LESS,
    step_op=O.ADD,
    delta=1,
    counter_first=True,
    bound_constant=None,
    body_reads_counter=False,
    bias=(0.0, 0.0),
):
    """WHILE(state [1,2] f32, i [1] i32, n [1] i32): state' = FC(state), i' = step_op(i, delta)."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    cond.input(F32, [1, 2])
    ci, cn = cond.input(I32, [1]), cond.input(I32, [1])
    bound = cn if bound_constant is None else cond.constant(I32, [bound_constant])
    verdict = cond.output(BOOL8, [1])
    cond.operation(compare, [ci, bound] if counter_first else [bound, ci], [verdict])
    bs, bi, _bn = body.input(F32, [1, 2]), body.input(I32, [1]), body.input(I32, [1])
    bs_out, bi_out = body.output(F32, [1, 2]), body.output(I32, [1])
    act = body.constant(T.INT32, 0)
    fc_out = body.temporary(F32, [1, 2]) if body_reads_counter else bs_out
    body.operation(
        O.FULLY_CONNECTED,
        [bs, body.constant(F32, W), body.constant(F32, list(bias)), act],
        [fc_out],
    )
    if body_reads_counter:  # state' = FC(state) * float(i): the counter is read twice
        as_float = body.temporary(F32, [1])
        body.operation(O.CAST, [bi], [as_float])
        body.operation(O.MUL, [fc_out, as_float, act], [bs_out])
    body.operation(step_op, [bi, body.constant(I32, [delta]), act], [bi_out])
    g = mb.main
    s, i, n = g.input(F32, [1, 2]), g.input(I32, [1]), g.input(I32, [1])
    out_s, out_i = g.output(F32, [1, 2]), g.output(I32, [1])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), s, i, n], [out_s, out_i])
    return mb.build()


def reference(state, i, n, *, compare="<", delta=1, counter_first=True, reads=False, bias=0.0):
    """The loop in numpy int32/float32 arithmetic."""
    i = np.array([i], np.int32)
    n = np.array([n], np.int32)
    ops = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
    with np.errstate(over="ignore"):
        while (ops[compare](i, n) if counter_first else ops[compare](n, i))[0]:
            state = state @ W.T + np.float32(bias)
            if reads:
                state = state * i.astype(np.float32)
            i = (i.astype(np.int64) + delta).astype(np.int32)
    return state, i


def run(model, state, i, n, **kw):
    compiled = compile_model(model)
    return compiled, compiled.run([state, np.array([i], np.int32), np.array([n], np.int32)], **kw)


@pytest.mark.parametrize("trips", [0, 1, 7])
def test_counter_loop_matches_numpy(trips):
    state = np.array([[1.0, 2.0]], np.float32)
    compiled, (s, i) = run(counter_model(), state, 0, trips)
    ref_s, ref_i = reference(state, 0, trips)
    assert "_counter_ok" in compiled.source(0)
    np.testing.assert_array_equal(s, ref_s)
    assert i.dtype == np.int32 and i.shape == (1,) and i.tolist() == ref_i.tolist()
    assert s is not state and i.flags.writeable


@pytest.mark.parametrize(
    ("compare", "sym", "step_op", "delta", "first", "i0", "n"),
    [
        (O.LESS_EQUAL, "<=", O.ADD, 2, True, 0, 5),
        (O.GREATER, ">", O.SUB, 3, True, 10, 0),
        (O.GREATER, ">", O.ADD, 1, False, 0, 4),  # GREATER(n, i)
        (O.GREATER_EQUAL, ">=", O.SUB, -1, False, 0, 3),  # GREATER_EQUAL(n, i), i -= -1
    ],
)
def test_counter_loop_variants(compare, sym, step_op, delta, first, i0, n):
    model = counter_model(compare=compare, step_op=step_op, delta=delta, counter_first=first)
    state = np.array([[1.0, -1.0]], np.float32)
    compiled, (s, i) = run(model, state, i0, n)
    signed = delta if step_op == O.ADD else -delta
    ref_s, ref_i = reference(state, i0, n, compare=sym, delta=signed, counter_first=first)
    assert "_counter_ok" in compiled.source(0)
    np.testing.assert_array_equal(s, ref_s)
    assert i.tolist() == ref_i.tolist()


def test_counter_constant_bound():
    model = counter_model(bound_constant=4)
    state = np.array([[1.0, 0.0]], np.float32)
    compiled, (s, i) = run(model, state, 0, 999)  # the input bound is ignored
    assert "_counter_ok" in compiled.source(0) and i.tolist() == [4]
    np.testing.assert_array_equal(s, reference(state, 0, 4)[0])


def test_counter_wraps_like_int32():
    imax = 2**31 - 1
    model = counter_model(compare=O.GREATER_EQUAL)
    state = np.array([[0.0, 1.0]], np.float32)
    _, (s, i) = run(model, state, imax - 1, imax - 1)  # i: MAX-1 -> MAX -> MIN (stops)
    assert i.tolist() == [-(2**31)]
    ref_s, ref_i = reference(state, imax - 1, imax - 1, compare=">=")
    assert ref_i.tolist() == i.tolist()
    np.testing.assert_array_equal(s, ref_s)
    assert _wrap32(imax + 1) == -(2**31) and _wrap32(-(2**31) - 1) == imax


def test_fallback_when_counter_is_not_int32_1():
    """A counter of another dtype or shape at run time takes the generic loop."""
    compiled = compile_model(counter_model())
    state = np.array([[1.0, 2.0]], np.float32)
    fast = compiled.run([state, np.array([0], np.int32), np.array([3], np.int32)])
    slow = compiled.run([state, np.array([0], np.int64), np.array([3], np.int32)])
    np.testing.assert_array_equal(fast[0], slow[0])
    assert fast[1].tolist() == slow[1].tolist() == [3]
    # a [1, 1] counter: whatever the generic loop does (NNHAL_STRICT_SHAPES=1 fails it)
    generic = compile_model(counter_model(), specialize=False)
    args = [state, np.array([[0]], np.int32), np.array([3], np.int32)]
    assert_same_outcome(compiled, generic, args)


@pytest.mark.usefixtures("generated_executor")
def test_generic_loop_generated_when_first_taken(monkeypatch):
    """Preparing and running with int32 [1] counters never generates the generic loop;
    the first run taking it does, once, and it gives the generic model's outcome."""
    from nnhal.driver.executor import fallback_loop

    made = []
    original = fallback_loop._generate

    def counting(gen, plan, step):
        made.append((plan.index, step.index, gen.checked))
        return original(gen, plan, step)

    monkeypatch.setattr(fallback_loop, "_generate", counting)
    compiled = compile_model(counter_model())
    generic = compile_model(counter_model(), specialize=False)
    state = np.array([[1.0, 2.0]], np.float32)
    compiled.run([state, np.array([0], np.int32), np.array([3], np.int32)])
    assert made == []
    for _ in range(2):
        assert_same_outcome(compiled, generic, [state, np.array([0], np.int64), np.array([3])])
    assert made == [(0, 0, False)]
    # a failure inside it names the step that failed, as the loop written inline did
    assert_same_outcome(compiled, generic, [state, None, np.array([3], np.int32)])
    late = [state, np.array([0], np.int64), np.array([3], np.int32)]
    got = compiled.run(late, deadline_ns=time.monotonic_ns() + 10**12)  # the checked variant
    np.testing.assert_array_equal(got[0], generic.run(late)[0])
    assert made == [(0, 0, False), (0, 0, True)]
    assert "def while_0_0_generic(" in compiled.source(0)


@pytest.mark.usefixtures("generated_executor")
def test_generic_loop_of_a_function_rebuilt_from_its_recipe(monkeypatch):
    """A model compiled again from the kept text gets its own generic loop (closure
    ``x<subgraph>_<operation>``), made from its own plans."""
    rebuilt = count_rebuilds(monkeypatch)
    recipes: dict = {}
    compile_model(counter_model(), recipes=recipes)
    second = compile_model(counter_model(bias=(0.5, -2.0)), recipes=recipes)
    assert rebuilt == [0]
    state = np.array([[1.0, 2.0]], np.float32)
    args = [state, np.array([0], np.int64), np.array([3], np.int32)]
    generic = compile_model(counter_model(bias=(0.5, -2.0)), specialize=False)
    assert_same_outcome(second, generic, args)


def test_a_released_model_is_freed_without_the_cyclic_collector():
    """Generated functions, their namespaces and the generic loop hold no reference
    cycle: a released model's kernels and weights go at once, not at the next collection."""
    import gc
    import weakref

    state = np.array([[1.0, 2.0]], np.float32)
    gc.disable()
    try:
        compiled = compile_model(counter_model())
        compiled.run([state, np.array([0], np.int64), np.array([3], np.int32)])  # generic loop
        compiled.run([state, np.array([0], np.int32), np.array([3])], deadline_ns=2**62)
        plan = weakref.ref(compiled.plans[2])
        del compiled
        assert plan() is None
    finally:
        gc.enable()


def test_counter_materialized_when_body_reads_it():
    model = counter_model(body_reads_counter=True)
    compiled = compile_model(model)
    source = compiled.source(0)
    assert "_counter_ok" in source and source.count("_i32(") == 2  # per iteration + at the end
    state = np.array([[1.0, 2.0]], np.float32)
    s, i = compiled.run([state, np.array([1], np.int32), np.array([4], np.int32)])
    ref_s, ref_i = reference(state, 1, 4, reads=True)
    np.testing.assert_array_equal(s, ref_s)
    assert i.tolist() == ref_i.tolist()
    generic = compile_model(model, specialize=False)
    assert "_counter_ok" not in generic.source(0) and "_dot(" not in generic.source(0)
    g_s, g_i = generic.run([state, np.array([1], np.int32), np.array([4], np.int32)])
    np.testing.assert_array_equal(s, g_s)
    assert g_i.tolist() == i.tolist()


def test_find_counter_rejects_non_patterns():
    compiled = compile_model(counter_model(compare=O.EQUAL))
    plans = compiled.plans
    assert find_counter(plans[1], plans[2], 2) is None  # EQUAL is not a counter test
    compiled = compile_model(counter_model())
    assert find_counter(compiled.plans[1], compiled.plans[2], 2) is not None
    assert find_counter(compiled.plans[1], compiled.plans[2], 1) is None  # counter not carried


def test_counter_loop_keeps_loop_timeout_and_deadline():
    compiled = compile_model(counter_model())
    args = [np.zeros((1, 2), np.float32), np.array([0], np.int32), np.array([2**31 - 1], np.int32)]
    with pytest.raises(MissedDeadline, match="loopTimeoutDuration"):
        compiled.run(args, loop_timeout_ns=2_000_000)
    with pytest.raises(MissedDeadline, match="deadline"):
        compiled.run(args, deadline_ns=time.monotonic_ns() + 2_000_000)
    assert "_counter_ok" in compiled.source(0, checked=True)


def test_fast_fully_connected_with_bias_matches_generic():
    model = counter_model(bias=(0.5, -2.0))
    state = np.array([[1.0, 2.0]], np.float32)
    compiled, (s, _i) = run(model, state, 0, 3)
    assert "_dot(" in compiled.source(0) and "_addto(" in compiled.source(0)
    ref_s, _ = reference(state, 0, 3, bias=np.array([0.5, -2.0], np.float32))
    np.testing.assert_array_equal(s, ref_s)


def scalar_model(op, constant, compare=None):
    """WHILE(s [1] f32, i, n): v = op(i, constant); s' = s + CAST(v) (or SELECT on compare(v))."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    cond.input(F32, [1])
    ci, cn = cond.input(I32, [1]), cond.input(I32, [1])
    cond.operation(O.LESS, [ci, cn], [cond.output(BOOL8, [1])])
    s, i, _n = body.input(F32, [1]), body.input(I32, [1]), body.input(I32, [1])
    s_out, i_out = body.output(F32, [1]), body.output(I32, [1])
    act = body.constant(T.INT32, 0)
    v = body.temporary(I32, [1])
    body.operation(op, [i, body.constant(I32, [constant]), act], [v])
    as_float = body.temporary(F32, [1])
    if compare is None:
        body.operation(O.CAST, [v], [as_float])
    else:
        test = body.temporary(BOOL8, [1])
        body.operation(compare, [v, body.constant(I32, [1])], [test])
        body.operation(
            O.SELECT, [test, body.constant(F32, [2.0]), body.constant(F32, [-1.0])], [as_float]
        )
    body.operation(O.ADD, [s, as_float, act], [s_out])
    body.operation(O.ADD, [i, body.constant(I32, [1]), act], [i_out])
    g = mb.main
    s0, i0, n = g.input(F32, [1]), g.input(I32, [1]), g.input(I32, [1])
    out_s, out_i = g.output(F32, [1]), g.output(I32, [1])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), s0, i0, n], [out_s, out_i])
    return mb.build()


@pytest.mark.parametrize(
    ("op", "constant", "compare", "scalar"),
    [
        (O.DIV, 3, None, True),
        (O.DIV, -2, None, True),
        (O.DIV, 0, None, False),  # numpy's x // 0 is 0: left to the kernel
        (O.MUL, 2**30, None, True),  # wraps like int32
        (O.SUB, -7, None, True),
        (O.ADD, 5, O.EQUAL, True),
        (O.MUL, 3, O.GREATER_EQUAL, True),
    ],
)
def test_scalar_steps_match_generic(op, constant, compare, scalar):
    model = scalar_model(op, constant, compare)
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    fast_loop = fast.source(0).split("else:")[0]  # the counter loop (the fallback follows)
    symbol = {O.DIV: "//", O.MUL: "*", O.SUB: "-", O.ADD: "+"}[op]
    assert (f"w1i {symbol} {constant}" in fast_loop) == scalar
    assert " // 0" not in fast_loop
    args_list = [(-5, 4), (0, 6), (2**31 - 4, 2**31 - 1)]
    for i0, n in args_list:
        args = [np.array([0.5], np.float32), np.array([i0], np.int32), np.array([n], np.int32)]
        with np.errstate(all="ignore"):
            want = generic.run(args)
        got = fast.run(args)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1].tolist() == want[1].tolist()


def test_scalar_steps_recognised():
    from nnhal.driver.executor.specialize import find_counter

    plans = compile_model(scalar_model(O.DIV, 3, O.EQUAL)).plans
    counter = find_counter(plans[1], plans[2], 2)
    assert counter is not None and len(counter.scalars) == 2
    assert not counter.materialize  # the counter is read only by Python-int steps
    plans = compile_model(scalar_model(O.DIV, 0)).plans
    counter = find_counter(plans[1], plans[2], 2)
    assert counter is not None and counter.scalars == {} and counter.materialize


def test_parity_if_on_python_bool():
    from nnhal.tools.bench_workloads import parity

    w = parity()
    fast, generic = compile_model(w.model), compile_model(w.model, specialize=False)
    assert " // 2" in fast.source(0)
    for n in (0, 1, 6):
        got, want = fast.run(w.inputs(n)), generic.run(w.inputs(n))
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1].tolist() == want[1].tolist() == [n]


def invariant_model(counter_reads_invariant=False):
    """WHILE(s [1,2], i, n, k [1,2]): w = MUL(k, 2) (invariant); s' = ADD(s, w); i += 1."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    cond.input(F32, [1, 2])
    ci, cn = cond.input(I32, [1]), cond.input(I32, [1])
    cond.input(F32, [1, 2])
    cond.operation(O.LESS, [ci, cn], [cond.output(BOOL8, [1])])
    s, i, _n, k = (
        body.input(t, d) for t, d in ((F32, [1, 2]), (I32, [1]), (I32, [1]), (F32, [1, 2]))
    )
    s_out, i_out = body.output(F32, [1, 2]), body.output(I32, [1])
    act = body.constant(T.INT32, 0)
    w = body.temporary(F32, [1, 2])
    body.operation(O.MUL, [k, body.constant(F32, [2.0, 3.0]), act], [w])
    grown = body.temporary(F32, [1, 2])
    body.operation(O.ADD, [s, w, act], [grown])  # reads the state: not invariant
    body.operation(O.MUL, [grown, body.constant(F32, [0.5, 0.5]), act], [s_out])
    body.operation(O.ADD, [i, body.constant(I32, [1]), act], [i_out])
    g = mb.main
    s0, i0, n, k0 = g.input(F32, [1, 2]), g.input(I32, [1]), g.input(I32, [1]), g.input(F32, [1, 2])
    out_s, out_i = g.output(F32, [1, 2]), g.output(I32, [1])
    g.operation(
        O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), s0, i0, n, k0], [out_s, out_i]
    )
    return mb.build()


def test_invariant_step_runs_once_and_matches_generic():
    from nnhal.driver.executor.specialize import invariant_steps

    model = invariant_model()
    fast, generic = compile_model(model), compile_model(model, specialize=False)
    assert invariant_steps(fast.plans[2], 2, set()) == [0]  # MUL(k, c) only
    source = fast.source(0)
    assert source.count("is _UNSET:") == 2  # in the counter loop and in its fallback
    for n in (0, 1, 5):
        args = [np.array([[1.0, -1.0]], np.float32), np.array([0], np.int32)]
        args += [np.array([n], np.int32), np.array([[0.25, 4.0]], np.float32)]
        got, want = fast.run(args), generic.run(args)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1].tolist() == want[1].tolist() == [n]
    # the fallback loop (counter of another dtype) hoists too
    args[1] = np.array([0], np.int64)
    np.testing.assert_array_equal(fast.run(args)[0], generic.run(args)[0])
    # with a deadline: the checked variant still checks before the hoisted step each time
    assert "raise _missed('MUL (subgraph 2, operation 0)')" in fast.source(0, checked=True)


def test_invariant_step_counting_kernel_calls(monkeypatch):
    """The hoisted kernel is called once per execution, whatever the trip count."""
    compiled = compile_model(invariant_model())
    body = compiled.plans[2]
    calls = []
    kernel = body.steps[0].kernel
    from dataclasses import replace as dc_replace

    def counting(*a):
        calls.append(1)
        return kernel(*a)

    body.steps[0] = dc_replace(body.steps[0], kernel=counting)
    recompiled = type(compiled)(compiled.model, compiled.plans)
    args = [np.zeros((1, 2), np.float32), np.array([0], np.int32), np.array([7], np.int32)]
    recompiled.run([*args, np.ones((1, 2), np.float32)])
    assert len(calls) == 1


def test_an_impure_registration_is_never_hoisted(monkeypatch):
    """Purity is a property of the registration: the same invariant MUL, registered
    impure, runs at every iteration and the loop still gives the generic result."""
    from dataclasses import replace as dc_replace

    from nnhal.driver.executor import compiler
    from nnhal.driver.executor.specialize import invariant_steps
    from nnhal.driver.ops import registry

    mul = registry.lookup(O.MUL)
    monkeypatch.setattr(
        compiler, "lookup", lambda code: dc_replace(mul, pure=False) if code == O.MUL
        else registry.lookup(code)
    )  # fmt: skip
    compiled = compile_model(invariant_model())
    assert not compiled.plans[2].steps[0].pure
    assert invariant_steps(compiled.plans[2], 2, set()) == []
    assert "is _UNSET:" not in compiled.source(0)
    args = [np.array([[1.0, -1.0]], np.float32), np.array([0], np.int32)]
    args += [np.array([4], np.int32), np.array([[0.25, 4.0]], np.float32)]
    want = compile_model(invariant_model(), specialize=False).run(args)
    np.testing.assert_array_equal(compiled.run(args)[0], want[0])


def test_random_multinomial_is_registered_impure():
    from nnhal.driver.ops import registry

    impure = sorted(d.type.name for d in registry.registered().values() if not d.pure)
    assert impure == ["RANDOM_MULTINOMIAL"]


def test_counter_arrays_are_fresh_copies_of_their_template():
    """_i32 / _b8 copy a one-element template: every call a new writable array, and a
    write into one result never reaches the template or the next result."""
    from nnhal.driver.executor.specialize import _b8, _i32

    first = _i32(7)
    first[0] = 99
    second = _i32(-(2**31))
    assert second is not first and second.dtype == np.int32 and second.tolist() == [-(2**31)]
    assert _i32(0).tolist() == [0]
    assert _b8(True).tolist() == [True] and _b8(False).tolist() == [False]
    flag = _b8(True)
    flag[0] = False
    assert _b8(True).tolist() == [True] and flag.dtype == np.bool_
    with pytest.raises(OverflowError):  # as np.array([2**31], np.int32): callers wrap first
        _i32(2**31)


@pytest.mark.parametrize(
    ("operator", "first", "bound", "delta", "in_range"),
    [
        ("<", True, None, 1, True),  # t < n <= INT32_MAX: t + 1 still an int32
        ("<", True, None, 2, False),  # t = INT32_MAX - 1 passes, t + 2 wraps
        ("<=", True, None, 1, False),  # t = INT32_MAX passes
        ("<=", True, 10, 1, True),
        (">", False, None, 1, True),  # n > t is t < n
        (">", True, None, -1, True),  # t > n >= INT32_MIN: t - 1 still an int32
        (">=", True, None, -1, False),
        ("<", True, None, -1, False),  # counting away from the bound
        ("<", True, 2**31 - 1, 1, True),
    ],
)
def test_counter_advance_without_wrap_only_when_the_test_bounds_it(
    operator, first, bound, delta, in_range
):
    from nnhal.driver.executor.control_flow import _advance_in_range
    from nnhal.driver.executor.specialize import CounterLoop

    counter = CounterLoop(0, None if bound is not None else 1, bound, operator, first, 0, delta)
    assert _advance_in_range(counter) is in_range


@pytest.mark.parametrize(
    ("left", "right", "in_range"),
    [(3, "c2", True), (3, "c-2", True), (3, "c-1", False), ("c7", 3, False), (3, 4, False)],
)
def test_a_quotient_by_a_constant_other_than_minus_one_needs_no_wrap(left, right, in_range):
    from nnhal.driver.executor.control_flow import _quotient_in_range
    from nnhal.driver.executor.specialize import ScalarStep

    assert _quotient_in_range(ScalarStep(9, "//", left, right, False)) is in_range
    assert not _quotient_in_range(ScalarStep(9, "*", left, right, False))

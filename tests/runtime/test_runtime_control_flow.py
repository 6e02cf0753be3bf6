"""IF and WHILE run by the runtime: operands of unknown dimensions and unknown rank (which
drivers must refuse), bodies partitioned across devices, the loop timeout, whole-device
control flow when a device supports it."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.runtime.api import run_model
from nnhal.runtime.partition import INTERPRETER, WhileStep, partition
from nnhal.runtime.reference import reference_device
from runtime_helpers import served

from nnhal.builder import ModelBuilder
from nnhal.errors import MissedDeadline
from nnhal.types import ExecutionPreference
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

I32, BOOL8 = T.TENSOR_INT32, T.TENSOR_BOOL8
# the tensor types a loop-carried value takes here (TILE supports all of them)
TYPES = {
    "float32": (T.TENSOR_FLOAT32, np.float32, 0.0, 0),
    "float16": (T.TENSOR_FLOAT16, np.float16, 0.0, 0),
    "int32": (T.TENSOR_INT32, np.int32, 0.0, 0),
    "quant8": (T.TENSOR_QUANT8_ASYMM, np.uint8, 0.5, 3),
    "quant8_signed": (T.TENSOR_QUANT8_ASYMM_SIGNED, np.int8, 0.5, -3),
}
SHAPES = {"unknown_dims": [0, 2], "unknown_rank": None}


def _t(g, kind, code, dims, scale, zp):
    fn = getattr(g, kind)
    return (
        fn(code, dims, scale, zp)
        if kind != "temporary"
        else fn(code, dims, scale=scale, zero_point=zp)
    )


def doubling_loop(code, scale, zp, dims):
    """WHILE (i < n): x = TILE(x, [2, 1]) (x twice along axis 0); i = i + 1. x's size grows every
    iteration, so its operands have unknown dimensions (``dims``) or unknown rank (None)."""
    mb = ModelBuilder()
    cond = mb.subgraph()
    _cx = cond.input(code, dims, scale, zp)
    ci, cn = cond.input(I32, [1]), cond.input(I32, [1])
    c_out = cond.output(BOOL8, [1])
    cond.operation(O.LESS, [ci, cn], [c_out])

    body = mb.subgraph()
    bx = body.input(code, dims, scale, zp)
    bi, _bn = body.input(I32, [1]), body.input(I32, [1])
    bx_out = body.output(code, dims, scale, zp)
    bi_out = body.output(I32, [1])
    body.operation(O.TILE, [bx, body.constant(I32, [2, 1])], [bx_out])
    body.operation(O.ADD, [bi, body.constant(I32, [1]), body.constant(T.INT32, 0)], [bi_out])

    g = mb.main
    x = g.input(code, dims, scale, zp)
    i, n = g.input(I32, [1]), g.input(I32, [1])
    x_out, i_out = g.output(code, dims, scale, zp), g.output(I32, [1])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), x, i, n], [x_out, i_out])
    return mb.build()


def branching(code, scale, zp, dims):
    """IF c: y = TILE(x, [2, 1]) else: y = TILE(x, [1, 1]); unknown sizes."""
    mb = ModelBuilder()
    then = mb.subgraph()
    tx = then.input(code, dims, scale, zp)
    ty = then.output(code, dims, scale, zp)
    then.operation(O.TILE, [tx, then.constant(I32, [2, 1])], [ty])
    other = mb.subgraph()
    ox = other.input(code, dims, scale, zp)
    oy = other.output(code, dims, scale, zp)
    other.operation(O.TILE, [ox, other.constant(I32, [1, 1])], [oy])
    g = mb.main
    c = g.input(BOOL8, [1])
    x = g.input(code, dims, scale, zp)
    y = g.output(code, dims, scale, zp)
    g.operation(O.IF, [c, g.subgraph_ref(then), g.subgraph_ref(other), x], [y])
    return mb.build()


def values(dtype):
    return np.arange(6).reshape(3, 2).astype(dtype)


def expected_doubled(x, n):
    for _ in range(n):
        x = np.concatenate([x, x], axis=0)
    return x


def npu_profile(exclude=()):
    return {"name": "npu", "type": "ACCELERATOR", "exclude_operations": list(exclude),
            "capabilities": {"default": {"execTime": 0.5, "powerUsage": 0.5}}}  # fmt: skip


@pytest.fixture(scope="module")
def npu():
    # no LESS on the device: the condition runs on the CPU, the body on the device
    with served(npu_profile(exclude=["LESS"])) as (_, (device,)):
        yield device


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("type_name", sorted(TYPES))
def test_while_with_unknown_sizes(npu, type_name, shape):
    code, dtype, scale, zp = TYPES[type_name]
    model = doubling_loop(code, scale, zp, SHAPES[shape])
    plan = partition(model, [npu, reference_device()], ExecutionPreference.FAST_SINGLE_ANSWER)
    assert isinstance(plan.steps[0], WhileStep) and plan.choices[0].device == INTERPRETER
    x = values(dtype)
    for n in (0, 1, 3):
        outs, execution = run_model(model, [x, np.array([0], np.int32), np.array([n], np.int32)],
                                    [npu])  # fmt: skip
        np.testing.assert_array_equal(outs[0], expected_doubled(x, n))
        assert outs[0].dtype == dtype
        assert outs[1].tolist() == [n]
        devices = {s.device for s in execution.report.steps}
        assert devices == ({"npu", "nnapi-reference"} if n else {"nnapi-reference"})
        assert list(execution.report.loop_iterations.values()) == [n]
        assert not execution.report.fallbacks
        # the growing output needed re-runs with larger buffers (dynamic temporaries)
        if n:
            assert any(s.reruns for s in execution.report.steps if s.device == "npu")


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("type_name", sorted(TYPES))
def test_if_with_unknown_sizes(npu, type_name, shape):
    code, dtype, scale, zp = TYPES[type_name]
    model = branching(code, scale, zp, SHAPES[shape])
    x = values(dtype)
    for c, expected in ((True, np.concatenate([x, x])), (False, x)):
        outs, execution = run_model(model, [np.array([c]), x], [npu])
        np.testing.assert_array_equal(outs[0], expected)
        assert [s.device for s in execution.report.steps] == ["npu"]
        assert execution.report.trace[0]["branch"] == ("then" if c else "else")


def test_the_reference_driver_refuses_unknown_sizes_but_the_runtime_runs_them():
    from nnhal.errors import InvalidArgument

    model = doubling_loop(T.TENSOR_FLOAT32, 0.0, 0, None)
    with pytest.raises(InvalidArgument):
        reference_device().driver.prepareModel_1_3(model)
    outs, _ = run_model(model, [values(np.float32), np.array([0], np.int32),
                                np.array([2], np.int32)])  # fmt: skip
    np.testing.assert_array_equal(outs[0], expected_doubled(values(np.float32), 2))


def endless_loop(dims):
    """WHILE (i >= 0): x = x + 0 (never ends)."""
    mb = ModelBuilder()
    cond = mb.subgraph()
    _cx, ci = cond.input(T.TENSOR_FLOAT32, dims), cond.input(I32, [1])
    c_out = cond.output(BOOL8, [1])
    cond.operation(O.GREATER_EQUAL, [ci, cond.constant(I32, [0])], [c_out])
    body = mb.subgraph()
    bx, _bi = body.input(T.TENSOR_FLOAT32, dims), body.input(I32, [1])
    bx_out = body.output(T.TENSOR_FLOAT32, dims)
    body.operation(O.ADD, [bx, body.constant(T.TENSOR_FLOAT32, [0.0]), body.constant(T.INT32, 0)],
                   [bx_out])  # fmt: skip
    g = mb.main
    x, i = g.input(T.TENSOR_FLOAT32, dims), g.input(I32, [1])
    y = g.output(T.TENSOR_FLOAT32, dims)
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), x, i], [y])
    return mb.build()


@pytest.mark.parametrize("dims", [[0], None], ids=["unknown_dims", "unknown_rank"])
def test_loop_timeout_holds_in_the_interpreter(npu, dims):
    model = endless_loop(dims)
    with pytest.raises(MissedDeadline) as info:
        run_model(model, [np.ones(2, np.float32), np.array([0], np.int32)], [npu],
                  loop_timeout_ns=20_000_000)  # fmt: skip
    assert info.value.status.name == "MISSED_DEADLINE_TRANSIENT"
    assert "loop timeout" in info.value.message


def test_known_size_while_goes_whole_to_a_device_supporting_it():
    model = endless_loop([2])
    with served(npu_profile()) as (_, (device,)):
        plan = partition(
            model, [device, reference_device()], ExecutionPreference.FAST_SINGLE_ANSWER
        )
        assert plan.simple and plan.steps[0].device == 0
        # the device's own loop timeout applies there (no fallback on a missed deadline)
        with pytest.raises(MissedDeadline):
            run_model(model, [np.ones(2, np.float32), np.array([0], np.int32)], [device],
                      loop_timeout_ns=20_000_000)  # fmt: skip


def test_known_size_while_the_device_cannot_take_whole_is_interpreted(npu):
    model = doubling_loop(T.TENSOR_FLOAT32, 0.0, 0, [3, 2])  # LESS is not on the npu
    plan = partition(model, [npu, reference_device()], ExecutionPreference.FAST_SINGLE_ANSWER)
    assert plan.choices[0].device == INTERPRETER
    assert "npu" in {reference_device().name, "npu"}
    assert 0 in plan.choices[0].unsupported  # the npu said no to the WHILE


def test_while_in_a_step_of_a_partitioned_model_carries_its_subgraphs():
    """A known-size WHILE the npu supports goes to it inside a step (its referenced
    subgraphs renumbered into the step model); the MUL after it runs on the CPU."""
    mb = ModelBuilder()
    unused = mb.subgraph()  # a referenced subgraph the step does not reach
    ui, uo = unused.input(T.TENSOR_FLOAT32, [2]), unused.output(T.TENSOR_FLOAT32, [2])
    unused.operation(O.RELU, [ui], [uo])
    cond = mb.subgraph()
    _cx, ci, cn = cond.input(T.TENSOR_FLOAT32, [2]), cond.input(I32, [1]), cond.input(I32, [1])
    c_out = cond.output(BOOL8, [1])
    cond.operation(O.LESS, [ci, cn], [c_out])
    body = mb.subgraph()
    bx, bi, _ = body.input(T.TENSOR_FLOAT32, [2]), body.input(I32, [1]), body.input(I32, [1])
    bx_out, bi_out = body.output(T.TENSOR_FLOAT32, [2]), body.output(I32, [1])
    zero = body.constant(T.INT32, 0)
    body.operation(O.ADD, [bx, bx, zero], [bx_out])
    body.operation(O.ADD, [bi, body.constant(I32, [1]), zero], [bi_out])
    g = mb.main
    x, i, n = g.input(T.TENSOR_FLOAT32, [2]), g.input(I32, [1]), g.input(I32, [1])
    w, i_out = g.temporary(T.TENSOR_FLOAT32, [2]), g.output(I32, [1])
    y = g.output(T.TENSOR_FLOAT32, [2])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), x, i, n], [w, i_out])
    g.operation(O.MUL, [w, x, g.constant(T.INT32, 0)], [y])
    # a dead IF reaching the unused subgraph keeps the model valid (every subgraph referenced)
    c = g.input(BOOL8, [1])
    z = g.output(T.TENSOR_FLOAT32, [2])
    g.operation(O.IF, [c, g.subgraph_ref(unused), g.subgraph_ref(unused), x], [z])
    model = mb.build()
    with served(npu_profile(exclude=["MUL"])) as (_, (device,)):
        plan = partition(
            model, [device, reference_device()], ExecutionPreference.FAST_SINGLE_ANSWER
        )
        while_step = next(s for s in plan.steps if 0 in s.operations)
        assert plan.choices[0].device == 0 and len(while_step.io.model.referenced) >= 2
        x0 = np.array([1.0, 2.0], np.float32)
        outs, execution = run_model(model, [x0, np.array([0], np.int32), np.array([3], np.int32),
                                            np.array([True])], [device])  # fmt: skip
    np.testing.assert_array_equal(outs[1], x0 * 8 * x0)
    assert outs[0].tolist() == [3]
    np.testing.assert_array_equal(outs[2], np.maximum(x0, 0))
    assert {s.device for s in execution.report.steps} == {"npu", "nnapi-reference"}


def test_if_nested_in_an_interpreted_while_body():
    """WHILE (i < n) { x = IF (i < 1) then TILE(x, [2, 1]) else TILE(x, [1, 1]); i += 1 },
    unknown dimensions: the interpreter runs the WHILE and, inside the body, the IF."""
    code, dims = T.TENSOR_FLOAT32, [0, 2]
    mb = ModelBuilder()
    grow = mb.subgraph()
    gx, gy = grow.input(code, dims), grow.output(code, dims)
    grow.operation(O.TILE, [gx, grow.constant(I32, [2, 1])], [gy])
    keep = mb.subgraph()
    kx, ky = keep.input(code, dims), keep.output(code, dims)
    keep.operation(O.TILE, [kx, keep.constant(I32, [1, 1])], [ky])
    cond = mb.subgraph()
    _cx, ci, cn = cond.input(code, dims), cond.input(I32, [1]), cond.input(I32, [1])
    c_out = cond.output(BOOL8, [1])
    cond.operation(O.LESS, [ci, cn], [c_out])
    body = mb.subgraph()
    bx, bi, _bn = body.input(code, dims), body.input(I32, [1]), body.input(I32, [1])
    bx_out, bi_out = body.output(code, dims), body.output(I32, [1])
    first = body.temporary(BOOL8, [1])
    body.operation(O.LESS, [bi, body.constant(I32, [1])], [first])
    body.operation(O.IF, [first, body.subgraph_ref(grow), body.subgraph_ref(keep), bx], [bx_out])
    body.operation(O.ADD, [bi, body.constant(I32, [1]), body.constant(T.INT32, 0)], [bi_out])
    g = mb.main
    x, i, n = g.input(code, dims), g.input(I32, [1]), g.input(I32, [1])
    x_out, i_out = g.output(code, dims), g.output(I32, [1])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), x, i, n], [x_out, i_out])
    model = mb.build()
    x0 = values(np.float32)
    with served(npu_profile(exclude=["LESS"])) as (_, (device,)):
        outs, execution = run_model(model, [x0, np.array([0], np.int32), np.array([3], np.int32)],
                                    [device])  # fmt: skip
    np.testing.assert_array_equal(outs[0], np.concatenate([x0, x0]))
    assert outs[1].tolist() == [3]
    branches = [t["branch"] for t in execution.report.trace if t["call"] == "if"]
    assert branches == ["then", "else", "else"]

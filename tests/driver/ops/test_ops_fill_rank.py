"""FILL and RANK: kernels, late-bound FILL values, RANK's scalar output end to end, negatives.

FILL's value scalar may be a model input or another operation's result (the
executor binds the kernel when the value is known); RANK's output is an INT32
scalar, which the kernel gives as a 0-d int32 array. Both paths run here
through the executor (``compile_model``) and RANK also through the gRPC
service.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from nnhal.driver.ops.registry import validate_operation
from ops_harness import (
    Bad,
    X,
    assert_matches,
    b8,
    context,
    f16,
    f32,
    i32,
    ivec,
    out,
    s8,
    scalar,
    t,
    u8,
)

from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

FILL_OUT = {T.FLOAT32: T.TENSOR_FLOAT32, T.FLOAT16: T.TENSOR_FLOAT16, T.INT32: T.TENSOR_INT32}


def _bind(op: Op, ins: list[X], outs: list[X]):
    ctx = context(op, ins, outs)
    version = validate_operation(ctx)
    return version, ctx.op.prepare(ctx), ctx.op.kernel(ctx)


# ---------------------------------------------------------------------------
# FILL
# ---------------------------------------------------------------------------

FILL_CASES = [
    ("f32-1d", ivec([5]), 3.5, T.FLOAT32, (5,)),
    ("f16-3d", ivec([2, 3, 4]), -1.25, T.FLOAT16, (2, 3, 4)),
    ("i32-5d", ivec([1, 2, 3, 1, 2]), 7, T.INT32, (1, 2, 3, 1, 2)),
    ("i32-runtime-shape", ivec([3, 2], const=False), -4, T.INT32, (0, 0)),
    ("f32-zero-sized", ivec([2, 0]), 1.0, T.FLOAT32, (2, 0)),
]


@pytest.mark.parametrize("case", FILL_CASES, ids=lambda c: c[0])
def test_fill(case):
    _, shape, value, value_type, prepared = case
    out_type = FILL_OUT[value_type]
    version, shapes, kernel = _bind(Op.FILL, [shape, scalar(value, value_type)], [out(out_type)])
    assert version == V.V1_3 and shapes == [prepared]
    got = kernel(shape.data)
    want = np.full(tuple(shape.data), value, dtype=got.dtype)
    assert (
        got.dtype == {T.FLOAT32: np.float32, T.FLOAT16: np.float16, T.INT32: np.int32}[value_type]
    )
    assert np.array_equal(got, want)
    assert got is not kernel(shape.data)  # a fresh array each call


def test_fill_unknown_shape_length():
    shape = ivec([2, 2], const=False, dims=(0,))
    _, shapes, _ = _bind(Op.FILL, [shape, scalar(1.0, T.FLOAT32)], [out(T.TENSOR_FLOAT32)])
    assert shapes == [None]


@pytest.mark.parametrize(
    ("value_type", "values"),
    [(T.INT32, [5, -7]), (T.FLOAT16, [0.5, 2.25]), (T.FLOAT32, [1.5, -3.0])],
)
def test_fill_with_a_model_input_value(value_type, values):
    mb = ModelBuilder()
    g = mb.main
    value = g.input(value_type)
    y = g.output(FILL_OUT[value_type], [2, 3])
    g.operation(Op.FILL, [g.constant(T.TENSOR_INT32, [2, 3]), value], [y])
    compiled = compile_model(mb.build())
    step = compiled.plans[0].steps[0]
    assert step.late is not None and step.kernel is None  # bound at run time
    dtype = {T.INT32: np.int32, T.FLOAT16: np.float16, T.FLOAT32: np.float32}[value_type]
    for v in values:
        (result,) = compiled.run([np.array(v, dtype)])
        assert result.dtype == dtype and np.array_equal(result, np.full((2, 3), v, dtype))


def test_fill_value_from_rank():
    # RANK's INT32 scalar result feeds FILL's value (late-bound inside the model)
    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [2, 3])
    shape = g.input(T.TENSOR_INT32, [3])
    rank = g.temporary(T.INT32)
    y = g.output(T.TENSOR_INT32, [2, 3, 4])
    g.operation(Op.RANK, [x], [rank])
    g.operation(Op.FILL, [shape, rank], [y])
    compiled = compile_model(mb.build())
    (result,) = compiled.run([np.zeros((2, 3), np.float32), np.array([2, 3, 4], np.int32)])
    assert np.array_equal(result, np.full((2, 3, 4), 2, np.int32))


# ---------------------------------------------------------------------------
# RANK
# ---------------------------------------------------------------------------

RANK_CASES = [
    f32((2, 3)),
    f16((4,)),
    i32((1, 2, 3, 4, 5)),
    u8((2, 2, 2)),
    s8((3,)),
    b8((1, 1)),
    t(T.TENSOR_QUANT16_SYMM, (2, 3), scale=1.0),
    t(T.TENSOR_QUANT16_ASYMM, (2, 3, 1), scale=1.0),
    t(T.TENSOR_QUANT8_SYMM, (6,), scale=0.5),
    t(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, (2, 3)),
    f32((2, 3), dims=None),
]


@pytest.mark.parametrize("x", RANK_CASES, ids=lambda x: f"{x.type.name}-{x.data.ndim}d")
def test_rank(x: X):
    version, shapes, kernel = _bind(Op.RANK, [x], [out(T.INT32, ())])
    assert version == V.V1_3 and shapes == [()]
    got = kernel(x.data)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.int32
    assert int(got) == x.data.ndim
    assert got is not kernel(x.data)


def _rank_model():
    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_QUANT8_ASYMM, [2, 1, 3], 0.5, 3)
    g.operation(Op.RANK, [x], [g.output(T.INT32)])
    return mb.build()


def test_rank_scalar_output_through_the_executor():
    (result,) = compile_model(_rank_model()).run([np.zeros((2, 1, 3), np.uint8)])
    assert result.shape == () and result.dtype == np.int32 and int(result) == 3


def test_rank_scalar_output_through_the_service(client_device):
    prepared = client_device.prepareModel_1_3(_rank_model())
    try:
        result = prepared.execute([np.ones((2, 1, 3), np.uint8)])
    finally:
        prepared.release()
    assert int(np.asarray(result.outputs[0]).reshape(-1)[0]) == 3
    assert tuple(result.outputShapes[0].dimensions) == ()
    assert result.outputShapes[0].isSufficient


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

F32_OUT = out(T.TENSOR_FLOAT32)
ONE = scalar(1.0, T.FLOAT32)

BAD_ROWS = [
    Bad("fill-one-input", Op.FILL, [ivec([2])], [F32_OUT], r"expected 2 inputs, got 1"),
    Bad("fill-output-mismatch", Op.FILL, [ivec([2]), ONE], [out(T.TENSOR_INT32)],
        r"output 0 \(output\) has type TENSOR_INT32; with FLOAT32 supported: TENSOR_FLOAT32"),
    Bad("fill-value-tensor", Op.FILL, [ivec([2]), f32((1,))], [F32_OUT],
        r"input 1 \(value\) has type TENSOR_FLOAT32; supported: FLOAT32 \(1.3\), INT32 \(1.3\), "
        r"FLOAT16 \(1.3\)"),
    Bad("fill-value-bool", Op.FILL, [ivec([2]), scalar(True, T.BOOL)], [out(T.TENSOR_BOOL8)],
        r"input 1 \(value\) has type BOOL; supported"),
    Bad("fill-shape-float", Op.FILL, [f32((2,)), ONE], [F32_OUT],
        r"input 0 \(shape\) has type TENSOR_FLOAT32; with FLOAT32 supported: TENSOR_INT32"),
    Bad("fill-shape-rank2", Op.FILL,
        [X(T.TENSOR_INT32, np.ones((1, 2), np.int32), const=True), ONE], [F32_OUT],
        r"input 0 has rank 2; it must have rank 1"),
    Bad("fill-negative-size", Op.FILL, [ivec([2, -1]), ONE], [F32_OUT],
        r"FILL .*input 0 \(shape\) has -1 at position 1; sizes must be >= 0"),
    Bad("rank-output-tensor", Op.RANK, [f32()], [out(T.TENSOR_INT32)],
        r"output 0 \(output\) has type TENSOR_INT32; with TENSOR_FLOAT32 supported: INT32"),
    Bad("rank-scalar-input", Op.RANK, [scalar(3)], [out(T.INT32, ())],
        r"input 0 \(input\) has type INT32; supported: .*TENSOR_BOOL8 \(1.3\)"),
    Bad("rank-two-inputs", Op.RANK, [f32(), f32()], [out(T.INT32, ())],
        r"expected 1 inputs, got 2"),
    Bad("rank-two-outputs", Op.RANK, [f32()], [out(T.INT32, ()), out(T.INT32, ())],
        r"expected 1 outputs, got 2"),
]  # fmt: skip


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_argument(row: Bad):
    row.check()


def test_fill_runtime_negative_size():
    shape = ivec([3, -2], const=False)
    _, _, kernel = _bind(Op.FILL, [shape, ONE], [F32_OUT])
    with pytest.raises(GeneralFailure) as err:
        kernel(shape.data)
    assert_matches(err.value.message, r"FILL \(.*\): input 0 \(shape\) has -2 at position 1")


def test_rank_rejects_a_zero_sized_input():
    _, _, kernel = _bind(Op.RANK, [f32((2, 3), dims=(0, 3))], [out(T.INT32, ())])
    with pytest.raises(GeneralFailure) as err:
        kernel(np.zeros((0, 3), np.float32))
    assert_matches(err.value.message, r"RANK .*zero-sized input")

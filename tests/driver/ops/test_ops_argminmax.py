"""ARGMAX, ARGMIN and TOPK_V2: positive rows, ties, negative rows.

ARGMAX/ARGMIN rows use ops_harness.Row (the reference works on the raw data:
the output is TENSOR_INT32 indices). TOPK_V2 has two outputs; its reference
sorts (value, index) pairs in Python, largest first, as the NNAPI reference
does (so equal values come out highest index first).
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.registry import validate_operation
from ops_harness import (
    RNG,
    Bad,
    Row,
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

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

I32_OUT = out(T.TENSOR_INT32)


def argmax(axis):
    return lambda x: np.argmax(x, axis=axis).reshape(
        -1 if x.ndim == 1 else np.delete(x.shape, axis)
    )


def argmin(axis):
    return lambda x: np.argmin(x, axis=axis).reshape(
        -1 if x.ndim == 1 else np.delete(x.shape, axis)
    )


ARG_ROWS = [
    Row("argmax-f32-axis0", Op.ARGMAX, [f32((3, 4)), scalar(0)], I32_OUT, argmax(0), V.V1_2,
        raw=True, shape=(4,)),
    Row("argmax-f16-negative", Op.ARGMAX, [f16((2, 3, 4)), scalar(-1)], I32_OUT, argmax(2),
        V.V1_2, raw=True, shape=(2, 3)),
    Row("argmax-i32", Op.ARGMAX, [i32((2, 5)), scalar(1)], I32_OUT, argmax(1), V.V1_2, raw=True),
    Row("argmax-u8", Op.ARGMAX, [u8((4, 2, 3)), scalar(1)], I32_OUT, argmax(1), V.V1_2, raw=True),
    Row("argmax-s8", Op.ARGMAX, [s8((3, 3)), scalar(-2)], I32_OUT, argmax(0), V.V1_3, raw=True),
    Row("argmax-1d-gives-1", Op.ARGMAX, [f32((5,)), scalar(0)], I32_OUT, argmax(0), raw=True,
        shape=(1,)),
    Row("argmax-ties-first", Op.ARGMAX, [u8(data=[[3, 7, 7, 1], [2, 2, 2, 2]]), scalar(1)],
        I32_OUT, lambda x: np.array([1, 0]), raw=True),
    Row("argmax-unknown-rank", Op.ARGMAX, [f32((2, 3), dims=None), scalar(-1)], I32_OUT,
        argmax(1), raw=True),
    Row("argmax-unknown-input-axis", Op.ARGMAX, [f32((2, 3, 4), dims=(2, 0, 4)), scalar(1)],
        I32_OUT, argmax(1), raw=True, shape=(2, 4)),
    Row("argmin-f32", Op.ARGMIN, [f32((3, 4)), scalar(1)], I32_OUT, argmin(1), V.V1_2, raw=True),
    Row("argmin-f16", Op.ARGMIN, [f16((3, 4)), scalar(-2)], I32_OUT, argmin(0), V.V1_2, raw=True),
    Row("argmin-i32", Op.ARGMIN, [i32((4,)), scalar(-1)], I32_OUT, argmin(0), V.V1_2, raw=True),
    Row("argmin-u8", Op.ARGMIN, [u8((2, 2, 2, 2)), scalar(3)], I32_OUT, argmin(3), raw=True),
    Row("argmin-s8", Op.ARGMIN, [s8((2, 6)), scalar(1)], I32_OUT, argmin(1), V.V1_3, raw=True),
    Row("argmin-ties-first", Op.ARGMIN, [f32(data=[[1.0, 0.5, 0.5], [0.0, 0.0, -0.0]]),
        scalar(1)], I32_OUT, lambda x: np.array([1, 0]), raw=True),
]  # fmt: skip


@pytest.mark.parametrize("row", ARG_ROWS, ids=lambda r: r.id)
def test_argminmax(row: Row):
    row.check()


def _bind(op: Op, ins: list[X], outs: list[X]):
    ctx = context(op, ins, outs)
    version = validate_operation(ctx)
    return version, ctx.op.prepare(ctx), ctx.op.kernel(ctx)


def test_late_bound_axis_prepares_unknown_dims():
    x = f32((2, 3, 4))
    ctx = context(Op.ARGMIN, [x, scalar(0, const=False)], [I32_OUT])
    validate_operation(ctx)
    assert ctx.op.prepare(ctx) == [(0, 0)]


# ---------------------------------------------------------------------------
# TOPK_V2
# ---------------------------------------------------------------------------


def topk_reference(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    rows = x.reshape(-1, x.shape[-1])
    order = [sorted(range(len(r)), key=lambda i, r=r: (r[i], i), reverse=True)[:k] for r in rows]
    index = np.array(order, np.int32).reshape(x.shape[:-1] + (k,))
    return np.take_along_axis(x, index.astype(np.intp), axis=-1), index


TOPK_CASES = [
    ("f32", f32((3, 6)), 2, V.V1_2),
    ("f32-k-all", f32((2, 4)), 4, V.V1_2),
    ("f16-3d", f16((2, 2, 5)), 3, V.V1_2),
    ("i32-1d", i32((7,)), 3, V.V1_2),
    ("u8", u8((3, 8)), 5, V.V1_2),
    ("s8", s8((2, 3, 4)), 1, V.V1_3),
    ("ties-highest-index-first", f32(data=[[1, 3, 3, 2, 3], [0, 0, 0, 0, 0]]), 2, None),
    ("ties-k4", i32(data=[[1, 3, 3, 2, 3]]), 4, None),
    ("u8-ties-at-kth", u8(data=[[9, 5, 5, 5, 1]]), 2, None),
    ("unknown-dims", f32((2, 5), dims=(0, 0)), 2, None),
    ("f32-many-ties", f32(data=RNG.integers(-2, 3, (4, 40)).astype(np.float32)), 7, None),
    ("f16-many-ties", f16(data=RNG.integers(-2, 3, (3, 30)) / 2), 11, None),
    ("i32-many-ties", i32(data=RNG.integers(-3, 3, (5, 25))), 9, None),
    ("u8-many-ties", u8(data=RNG.integers(0, 4, (2, 50))), 13, None),
    ("s8-many-ties", s8(data=RNG.integers(-2, 2, (2, 50))), 20, None),
    ("f32-signed-zeros", f32(data=[[0.0, -0.0, -1.0, 0.0, -0.0]]), 3, None),
    ("f32-infinities", f32(data=[[-np.inf, 3.0, np.inf, -2.0, np.inf, -np.inf]]), 4, None),
    ("f16-extremes", f16(data=[[-65504, 65504, -np.inf, 0, 1e-7, -1e-7]]), 6, None),
    ("i32-extremes", i32(data=[[-(2**31), 2**31 - 1, 0, -1, 2**31 - 1, -(2**31)]]), 5, None),
    ("s8-extremes", s8(data=[[-128, 127, 0, -1, -128, 127]]), 4, None),
    ("u8-extremes", u8(data=[[0, 255, 128, 255, 0, 1]]), 3, None),
]


@pytest.mark.parametrize("case", TOPK_CASES, ids=lambda c: c[0])
def test_topk(case):
    _, x, k, want_version = case
    outs = [X(x.type, None, None, x.scale, x.zp), I32_OUT]
    version, shapes, kernel = _bind(Op.TOPK_V2, [x, scalar(k)], outs)
    if want_version is not None:
        assert version == want_version
    values, indices = kernel(x.data)
    want_values, want_indices = topk_reference(x.data, k)
    assert values.dtype == x.data.dtype and indices.dtype == np.int32
    assert np.array_equal(indices, want_indices)
    assert np.array_equal(values, want_values)
    assert not np.shares_memory(values, x.data)
    for prepared, got in zip(shapes, (values, indices)):
        assert len(prepared) == got.ndim
        assert all(p in (0, s) for p, s in zip(prepared, got.shape))


def test_topk_known_tie_order():
    x = f32(data=[[1, 3, 3, 2, 3]])
    _, _, kernel = _bind(Op.TOPK_V2, [x, scalar(2)], [out(T.TENSOR_FLOAT32), I32_OUT])
    values, indices = kernel(x.data)
    assert values.tolist() == [[3.0, 3.0]] and indices.tolist() == [[4, 2]]


def test_topk_late_bound_k():
    x = f32((2, 5))
    ctx = context(Op.TOPK_V2, [x, scalar(3, const=False)], [out(T.TENSOR_FLOAT32), I32_OUT])
    validate_operation(ctx)
    assert ctx.op.prepare(ctx) == [(2, 0), (2, 0)]


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

F32_OUT = out(T.TENSOR_FLOAT32)

BAD_ROWS = [
    Bad("argmax-one-input", Op.ARGMAX, [f32()], [I32_OUT], r"expected 2 inputs, got 1"),
    Bad("argmin-two-outputs", Op.ARGMIN, [f32(), scalar(0)], [I32_OUT, I32_OUT],
        r"expected 1 outputs, got 2"),
    Bad("argmax-bool8", Op.ARGMAX, [b8(), scalar(0)], [I32_OUT],
        r"input 0 \(input\) has type TENSOR_BOOL8; supported: TENSOR_FLOAT32 \(1.2\)"),
    Bad("argmax-axis-tensor", Op.ARGMAX, [f32(), ivec([0])], [I32_OUT],
        r"input 1 \(axis\) has type TENSOR_INT32; with TENSOR_FLOAT32 supported: INT32"),
    Bad("argmax-output-f32", Op.ARGMAX, [f32(), scalar(0)], [F32_OUT],
        r"output 0 \(output\) has type TENSOR_FLOAT32; with TENSOR_FLOAT32 supported: "
        r"TENSOR_INT32"),
    Bad("argmin-output-same-type", Op.ARGMIN, [u8(), scalar(0)],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128)],
        r"output 0 \(output\) has type TENSOR_QUANT8_ASYMM; .* supported: TENSOR_INT32"),
    Bad("argmax-axis-range", Op.ARGMAX, [f32((2, 3)), scalar(2)], [I32_OUT],
        r"input 1 \(axis\) is 2; it must be in \[-2, 2\) for a rank 2 input"),
    Bad("argmin-axis-negative-range", Op.ARGMIN, [s8((2, 3, 4)), scalar(-4)], [I32_OUT],
        r"ARGMIN .*input 1 \(axis\) is -4; it must be in \[-3, 3\)"),
    Bad("argmax-quant16", Op.ARGMAX, [t(T.TENSOR_QUANT16_SYMM, scale=1.0), scalar(0)],
        [I32_OUT], r"input 0 \(input\) has type TENSOR_QUANT16_SYMM; supported"),
    Bad("topk-one-output", Op.TOPK_V2, [f32(), scalar(1)], [F32_OUT],
        r"expected 2 outputs, got 1"),
    Bad("topk-k-zero", Op.TOPK_V2, [f32((2, 3)), scalar(0)], [F32_OUT, I32_OUT],
        r"TOPK_V2 .*input 1 \(k\) is 0; it must be positive"),
    Bad("topk-k-negative", Op.TOPK_V2, [f32((2, 3)), scalar(-2)], [F32_OUT, I32_OUT],
        r"input 1 \(k\) is -2; it must be positive"),
    Bad("topk-k-too-big", Op.TOPK_V2, [i32((2, 3)), scalar(4)], [I32_OUT, I32_OUT],
        r"input 1 \(k\) is 4; it must not exceed the last dimension of input 0 \(3\)"),
    Bad("topk-indices-f32", Op.TOPK_V2, [f32(), scalar(1)], [F32_OUT, F32_OUT],
        r"output 1 \(indices\) has type TENSOR_FLOAT32; .*supported: TENSOR_INT32"),
    Bad("topk-values-type", Op.TOPK_V2, [u8(), scalar(1)], [F32_OUT, I32_OUT],
        r"output 0 \(values\) has type TENSOR_FLOAT32; with TENSOR_QUANT8_ASYMM supported: "
        r"TENSOR_QUANT8_ASYMM"),
    Bad("topk-k-float", Op.TOPK_V2, [f32(), scalar(1.0, T.FLOAT32)], [F32_OUT, I32_OUT],
        r"input 1 \(k\) has type FLOAT32; .*supported: INT32"),
    Bad("topk-bool8", Op.TOPK_V2, [b8(), scalar(1)], [out(T.TENSOR_BOOL8), I32_OUT],
        r"input 0 \(input\) has type TENSOR_BOOL8; supported"),
]  # fmt: skip


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_argument(row: Bad):
    row.check()


RUNTIME_BAD = [
    ("argmax-empty-axis", Op.ARGMAX, f32((2, 0), dims=(2, 0)), scalar(1), [I32_OUT],
     r"ARGMAX .*input 1 \(axis\) selects an axis of size 0"),
    ("argmax-unknown-rank-axis", Op.ARGMAX, f32((2, 3), dims=None), scalar(3), [I32_OUT],
     r"input 1 \(axis\) is 3; it must be in \[-2, 2\)"),
    ("topk-k-exceeds-runtime-row", Op.TOPK_V2, f32((2, 3), dims=(0, 0)), scalar(4),
     [F32_OUT, I32_OUT], r"TOPK_V2 .*input 1 \(k\) is 4; the last dimension of input 0 is 3"),
    ("topk-empty", Op.TOPK_V2, f32((0, 3), dims=(0, 0)), scalar(1), [F32_OUT, I32_OUT],
     r"zero-sized input"),
]  # fmt: skip


@pytest.mark.parametrize("case", RUNTIME_BAD, ids=lambda c: c[0])
def test_runtime_failure(case):
    _, op, x, param, outs, pattern = case
    _, _, kernel = _bind(op, [x, param], outs)
    with pytest.raises(GeneralFailure) as err:
        kernel(x.data)
    assert_matches(err.value.message, pattern)


def test_model_input_axis_and_k_through_the_executor():
    from nnhal.driver.executor import compile_model

    from nnhal.builder import ModelBuilder

    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_QUANT8_ASYMM, [3, 4], 0.5, 10)
    axis, k = g.input(T.INT32), g.input(T.INT32)
    index = g.output(T.TENSOR_INT32, [])
    values, order = g.output(T.TENSOR_QUANT8_ASYMM, [], 0.5, 10), g.output(T.TENSOR_INT32, [])
    g.operation(Op.ARGMAX, [x, axis], [index])
    g.operation(Op.TOPK_V2, [x, k], [values, order])
    compiled = compile_model(mb.build())
    data = np.array([[1, 5, 5, 0], [9, 2, 9, 9], [3, 3, 3, 3]], np.uint8)
    got_index, got_values, got_order = compiled.run([data, np.int32(-2), np.int32(2)])
    assert got_index.tolist() == [1, 0, 1, 1]
    assert got_order.tolist() == [[2, 1], [3, 2], [3, 2]]
    assert got_values.tolist() == [[5, 5], [9, 9], [3, 3]]
    with pytest.raises(GeneralFailure, match=r"TOPK_V2 .*input 1 \(k\) is 5; it must not exceed"):
        compiled.run([data, np.int32(0), np.int32(5)])

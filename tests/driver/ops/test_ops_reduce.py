"""REDUCE_ALL/ANY/MAX/MIN/PROD/SUM and MEAN: positive rows, edge cases, negative rows.

See ops_harness.py for how a row runs. References are numpy expressions on the
real values (raw integers for the quantized reductions, which keep the
input's scale and zero point).
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.registry import validate_operation
from ops_harness import (
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
    run,
    s8,
    scalar,
    u8,
)

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32_OUT = out(T.TENSOR_FLOAT32)
F16_OUT = out(T.TENSOR_FLOAT16)
BOOL_OUT = out(T.TENSOR_BOOL8)
KEEP = scalar(True, T.BOOL)
DROP = scalar(False, T.BOOL)


def keep_int(value: int) -> X:
    return scalar(value)  # MEAN's keep_dims is an INT32: positive keeps


def sum_ref(axes, keep):
    return lambda x, _a: np.sum(x.astype(np.float64), axis=axes, keepdims=keep)


def trunc_mean(axes, keep):
    """Raw integer mean, C division (toward zero)."""

    def ref(x, _a):
        total = np.sum(x.astype(np.int64), axis=axes, keepdims=keep)
        count = x.size // max(np.size(total), 1)
        return np.trunc(total / count)

    return ref


ROWS = [
    # --- REDUCE_SUM
    Row(
        "sum-f32-axis1",
        Op.REDUCE_SUM,
        [f32((2, 3, 4)), ivec([1]), DROP],
        F32_OUT,
        sum_ref(1, False),
        V.V1_2,
        shape=(2, 4),
    ),
    Row(
        "sum-f16-negative-duplicate-keep",
        Op.REDUCE_SUM,
        [f16((2, 3, 4)), ivec([-1, 2, 0]), KEEP],
        F16_OUT,
        sum_ref((0, 2), True),
        V.V1_2,
        shape=(1, 3, 1),
    ),
    Row(
        "sum-f32-all-axes-gives-1",
        Op.REDUCE_SUM,
        [f32((2, 3)), ivec([1, 0]), DROP],
        F32_OUT,
        lambda x, _a: np.sum(x, keepdims=True).reshape(1),
        shape=(1,),
    ),
    Row(
        "sum-f32-runtime-axes",
        Op.REDUCE_SUM,
        [f32((2, 3, 4)), ivec([0, -1], const=False), KEEP],
        F32_OUT,
        sum_ref((0, 2), True),
        shape=(0, 0, 0),
    ),
    Row(
        "sum-f32-unknown-axis",
        Op.REDUCE_SUM,
        [f32((2, 3, 4), dims=(0, 3, 0)), ivec([2]), DROP],
        F32_OUT,
        sum_ref(2, False),
        shape=(0, 3),
    ),
    Row(
        "sum-f32-unknown-rank-runtime-axes",
        Op.REDUCE_SUM,
        [f32((2, 3), dims=None), ivec([1, 0], const=False), DROP],
        F32_OUT,
        lambda x, _a: np.sum(x, keepdims=True).reshape(1),
    ),
    # --- REDUCE_PROD
    Row(
        "prod-f32",
        Op.REDUCE_PROD,
        [f32((3, 2)), ivec([0]), DROP],
        F32_OUT,
        lambda x, _a: np.prod(x.astype(np.float64), axis=0),
        V.V1_2,
    ),
    Row(
        "prod-f16-keep",
        Op.REDUCE_PROD,
        [f16((2, 2, 3)), ivec([-1]), KEEP],
        F16_OUT,
        lambda x, _a: np.prod(x.astype(np.float64), axis=2, keepdims=True),
        V.V1_2,
    ),
    # --- REDUCE_MAX / REDUCE_MIN
    Row(
        "max-f32",
        Op.REDUCE_MAX,
        [f32((2, 3, 2)), ivec([1, -1]), DROP],
        F32_OUT,
        lambda x, _a: np.max(x, axis=(1, 2)),
        V.V1_2,
    ),
    Row(
        "max-f16-keep",
        Op.REDUCE_MAX,
        [f16((4, 3)), ivec([0]), KEEP],
        F16_OUT,
        lambda x, _a: np.max(x, axis=0, keepdims=True),
        V.V1_2,
    ),
    Row(
        "max-u8-raw",
        Op.REDUCE_MAX,
        [u8((3, 5), scale=0.25, zp=100), ivec([1]), DROP],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.25, zp=100),
        lambda x, _a: np.max(x, axis=1),
        V.V1_2,
        raw=True,
    ),
    Row(
        "max-s8-raw",
        Op.REDUCE_MAX,
        [s8((2, 2, 2, 3), scale=0.5, zp=-4), ivec([0, 3]), KEEP],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zp=-4),
        lambda x, _a: np.max(x, axis=(0, 3), keepdims=True),
        V.V1_3,
        raw=True,
    ),
    Row(
        "min-f32",
        Op.REDUCE_MIN,
        [f32((3, 4)), ivec([-2]), DROP],
        F32_OUT,
        lambda x, _a: np.min(x, axis=0),
        V.V1_2,
    ),
    Row(
        "min-f16",
        Op.REDUCE_MIN,
        [f16((3, 4)), ivec([1]), DROP],
        F16_OUT,
        lambda x, _a: np.min(x, axis=1),
        V.V1_2,
    ),
    Row(
        "min-u8-all",
        Op.REDUCE_MIN,
        [u8((2, 3)), ivec([0, 1]), DROP],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        lambda x, _a: np.min(x).reshape(1),
        raw=True,
        shape=(1,),
    ),
    Row(
        "min-s8",
        Op.REDUCE_MIN,
        [s8((4, 3)), ivec([1]), KEEP],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        lambda x, _a: np.min(x, axis=1, keepdims=True),
        V.V1_3,
        raw=True,
    ),
    # --- REDUCE_ALL / REDUCE_ANY
    Row(
        "all-bool8",
        Op.REDUCE_ALL,
        [b8((3, 4)), ivec([1]), DROP],
        BOOL_OUT,
        lambda x, _a: np.all(x, axis=1),
        V.V1_2,
    ),
    Row(
        "all-bool8-true-rows",
        Op.REDUCE_ALL,
        [b8(data=[[True, True], [True, False]]), ivec([-1]), KEEP],
        BOOL_OUT,
        lambda x, _a: np.all(x, axis=1, keepdims=True),
    ),
    Row(
        "any-bool8",
        Op.REDUCE_ANY,
        [b8((2, 3, 2)), ivec([0, 2]), DROP],
        BOOL_OUT,
        lambda x, _a: np.any(x, axis=(0, 2)),
        V.V1_2,
    ),
    Row(
        "any-bool8-all",
        Op.REDUCE_ANY,
        [b8(data=[[False, False]]), ivec([0, 1]), DROP],
        BOOL_OUT,
        lambda x, _a: np.array([False]),
        shape=(1,),
    ),
    # --- MEAN
    Row(
        "mean-f32",
        Op.MEAN,
        [f32((2, 3, 4)), ivec([1]), keep_int(0)],
        F32_OUT,
        lambda x, _a: np.mean(x.astype(np.float64), axis=1),
        V.V1_1,
        shape=(2, 4),
    ),
    Row(
        "mean-f32-keep-positive-duplicates",
        Op.MEAN,
        [f32((2, 3, 4)), ivec([0, 2, -1, 0]), keep_int(7)],
        F32_OUT,
        lambda x, _a: np.mean(x.astype(np.float64), axis=(0, 2), keepdims=True),
        shape=(1, 3, 1),
    ),
    Row(
        "mean-f32-negative-keep-drops",
        Op.MEAN,
        [f32((2, 3)), ivec([0, 1]), keep_int(-1)],
        F32_OUT,
        lambda x, _a: np.mean(x.astype(np.float64)).reshape(1),
        shape=(1,),
    ),
    Row(
        "mean-f16",
        Op.MEAN,
        [f16((1, 2, 2, 3)), ivec([1, 2]), keep_int(1)],
        F16_OUT,
        lambda x, _a: np.mean(x.astype(np.float64), axis=(1, 2), keepdims=True),
        V.V1_2,
    ),
    Row(
        "mean-u8-truncates",
        Op.MEAN,
        [u8((4, 3, 2), scale=0.8, zp=5), ivec([0, 2]), keep_int(1)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.8, zp=5),
        trunc_mean((0, 2), True),
        V.V1_1,
        raw=True,
    ),
    Row(
        "mean-s8-truncates-toward-zero",
        Op.MEAN,
        [s8(data=[[-3, -2, -2], [1, 2, 2]], scale=0.8, zp=-3), ivec([1]), keep_int(0)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.8, zp=-3),
        trunc_mean(1, False),
        V.V1_3,
        raw=True,
    ),
    Row(
        "mean-s8-runtime-axes",
        Op.MEAN,
        [s8((3, 5)), ivec([-1], const=False), keep_int(0)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        trunc_mean(1, False),
        raw=True,
        shape=None,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_reduce(row: Row):
    row.check()


def _kernel(op: Op, ins: list[X], outs: list[X]):
    ctx = context(op, ins, outs)
    validate_operation(ctx)
    return ctx.op.kernel(ctx)


def test_mean_s8_known_values():
    # -7/2 = -3.5 truncates to -3 (not -4); 3/2 -> 1; -5/2 -> -2
    x = s8(data=[[-4, -3], [1, 2], [-2, -3]], scale=1.0)
    kernel = _kernel(Op.MEAN, [x, ivec([1]), keep_int(0)], [out(x.type, scale=1.0)])
    assert kernel(x.data, None).tolist() == [-3, 1, -2]


def test_max_min_follow_std_max_min():
    # std::max from the lowest float: NaN never wins, -inf stays at -FLT_MAX
    # (and std::min from the highest: +inf stays at FLT_MAX)
    data = np.array(
        [[-np.inf, np.nan], [1.0, np.nan], [np.inf, -1.0], [np.inf, np.nan]], np.float32
    )
    lowest, highest = (float(v) for v in (np.finfo(np.float32).min, np.finfo(np.float32).max))
    x = f32(data=data)
    top = _kernel(Op.REDUCE_MAX, [x, ivec([1]), DROP], [F32_OUT])(data, None)
    assert top.tolist() == [lowest, 1.0, np.inf, np.inf]
    bottom = _kernel(Op.REDUCE_MIN, [x, ivec([1]), DROP], [F32_OUT])(data, None)
    assert bottom.tolist() == [-np.inf, 1.0, -1.0, highest]
    half = data.astype(np.float16)
    top16 = _kernel(Op.REDUCE_MAX, [f16(data=half), ivec([1]), DROP], [F16_OUT])(half, None)
    assert top16.dtype == np.float16 and top16[0] == -65504


def test_prod_zero_beats_infinity_and_nan():
    data = np.array([[0.0, np.inf], [np.nan, 0.0], [-1.0, 0.0], [2.0, 3.0]], np.float32)
    kernel = _kernel(Op.REDUCE_PROD, [f32(data=data), ivec([1]), DROP], [F32_OUT])
    with np.errstate(invalid="ignore"):
        result = kernel(data, None)
    assert result.tolist() == [0.0, 0.0, 0.0, 6.0]
    assert not np.signbit(result[2])  # the reference's literal 0, not -0.0


def test_mean_of_an_empty_reduction_is_zero():
    kernel = _kernel(Op.MEAN, [f32((2, 3), dims=(2, 0)), ivec([1]), keep_int(0)], [F32_OUT])
    assert kernel(np.zeros((2, 0), np.float32), None).tolist() == [0.0, 0.0]
    q = s8((2, 3), dims=(2, 0))
    kernel = _kernel(Op.MEAN, [q, ivec([1]), keep_int(1)], [out(q.type, scale=0.5)])
    assert kernel(np.zeros((2, 0), np.int8), None).tolist() == [[0], [0]]


def test_late_bound_keep_dims():
    x = f32((2, 3))
    ins = [x, ivec([1]), scalar(True, T.BOOL, const=False)]
    ctx = context(Op.REDUCE_SUM, ins, [F32_OUT])
    validate_operation(ctx)  # keep_dims not needed to validate
    assert ctx.op.prepare(ctx) == [None]
    bound = context(Op.REDUCE_SUM, [x, ivec([1]), KEEP], [F32_OUT])
    assert ctx.op.execute(bound)(x.data, None).shape == (2, 1)


def test_mean_over_no_axes_is_a_copy():
    # MEAN accepts an empty axes tensor (REDUCE_* do not: see RUNTIME_BAD)
    x = f32((2, 3))
    mean = _kernel(Op.MEAN, [x, ivec([], const=False), keep_int(0)], [F32_OUT])
    got = mean(x.data, np.zeros(0, np.int32))
    assert np.array_equal(got, x.data) and not np.shares_memory(got, x.data)


def test_result_shapes_and_fresh_arrays():
    x = f32((2, 3))
    _, shapes, got = run(Op.REDUCE_SUM, [x, ivec([0, 1]), DROP], [F32_OUT])
    assert shapes == [(1,)] and got.shape == (1,) and got.base is None
    _, shapes, got = run(Op.REDUCE_MAX, [x, ivec([1]), KEEP], [F32_OUT])
    assert shapes == [(2, 1)] and got.base is None


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

I32_AXES_2D = X(T.TENSOR_INT32, np.zeros((1, 1), np.int32), const=True)

BAD_ROWS = [
    Bad(
        "sum-two-inputs", Op.REDUCE_SUM, [f32(), ivec([0])], [F32_OUT], r"expected 3 inputs, got 2"
    ),
    Bad(
        "sum-two-outputs",
        Op.REDUCE_SUM,
        [f32(), ivec([0]), DROP],
        [F32_OUT, F32_OUT],
        r"expected 1 outputs, got 2",
    ),
    Bad(
        "sum-int32",
        Op.REDUCE_SUM,
        [i32(), ivec([0]), DROP],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported: TENSOR_FLOAT32 \(1.2\), "
        r"TENSOR_FLOAT16 \(1.2\)",
    ),
    Bad(
        "prod-u8",
        Op.REDUCE_PROD,
        [u8(), ivec([0]), DROP],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128)],
        r"input 0 \(input\) has type TENSOR_QUANT8_ASYMM; supported",
    ),
    Bad(
        "sum-axes-float",
        Op.REDUCE_SUM,
        [f32(), f32((1,)), DROP],
        [F32_OUT],
        r"input 1 \(axes\) has type TENSOR_FLOAT32; with TENSOR_FLOAT32 supported: TENSOR_INT32",
    ),
    Bad(
        "sum-keep-dims-int32",
        Op.REDUCE_SUM,
        [f32(), ivec([0]), scalar(0)],
        [F32_OUT],
        r"input 2 \(keep_dims\) has type INT32; with TENSOR_FLOAT32 supported: BOOL",
    ),
    Bad(
        "sum-output-type",
        Op.REDUCE_SUM,
        [f32(), ivec([0]), DROP],
        [F16_OUT],
        r"output 0 \(output\) has type TENSOR_FLOAT16; with TENSOR_FLOAT32 supported: "
        r"TENSOR_FLOAT32",
    ),
    Bad(
        "sum-rank5",
        Op.REDUCE_SUM,
        [f32((1, 1, 1, 2, 3)), ivec([0]), DROP],
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "sum-axes-rank2",
        Op.REDUCE_SUM,
        [f32(), I32_AXES_2D, DROP],
        [F32_OUT],
        r"input 1 has rank 2; it must have rank 1",
    ),
    Bad(
        "sum-axis-too-big",
        Op.REDUCE_SUM,
        [f32((2, 3)), ivec([0, 2]), DROP],
        [F32_OUT],
        r"input 1 \(axes\) has 2 at position 1; every axis must be in \[-2, 2\) for a rank 2",
    ),
    Bad(
        "prod-axis-too-negative",
        Op.REDUCE_PROD,
        [f32((2, 3)), ivec([-3]), KEEP],
        [F32_OUT],
        r"input 1 \(axes\) has -3 at position 0; every axis must be in \[-2, 2\)",
    ),
    Bad(
        "max-bool8",
        Op.REDUCE_MAX,
        [b8(), ivec([0]), DROP],
        [BOOL_OUT],
        r"input 0 \(input\) has type TENSOR_BOOL8; supported: .*TENSOR_QUANT8_ASYMM_SIGNED \(1.3\)",
    ),
    Bad(
        "min-output-mismatch",
        Op.REDUCE_MIN,
        [u8(), ivec([0]), DROP],
        [out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5)],
        r"output 0 \(output\) has type TENSOR_QUANT8_ASYMM_SIGNED; with TENSOR_QUANT8_ASYMM",
    ),
    Bad(
        "max-axis-range",
        Op.REDUCE_MAX,
        [s8((2, 2, 2)), ivec([3]), DROP],
        [out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5)],
        r"input 1 \(axes\) has 3 at position 0; every axis must be in \[-3, 3\)",
    ),
    Bad(
        "all-f32",
        Op.REDUCE_ALL,
        [f32(), ivec([0]), DROP],
        [F32_OUT],
        r"input 0 \(input\) has type TENSOR_FLOAT32; supported: TENSOR_BOOL8 \(1.2\)",
    ),
    Bad(
        "any-output-f32",
        Op.REDUCE_ANY,
        [b8(), ivec([0]), DROP],
        [F32_OUT],
        r"output 0 \(output\) has type TENSOR_FLOAT32; with TENSOR_BOOL8 supported: TENSOR_BOOL8",
    ),
    Bad(
        "any-rank5",
        Op.REDUCE_ANY,
        [b8((1, 1, 1, 1, 2)), ivec([0]), DROP],
        [BOOL_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "all-four-inputs",
        Op.REDUCE_ALL,
        [b8(), ivec([0]), DROP, DROP],
        [BOOL_OUT],
        r"expected 3 inputs, got 4",
    ),
    Bad(
        "mean-keep-dims-bool",
        Op.MEAN,
        [f32(), ivec([0]), DROP],
        [F32_OUT],
        r"input 2 \(keep_dims\) has type BOOL; with TENSOR_FLOAT32 supported: INT32",
    ),
    Bad(
        "mean-int32",
        Op.MEAN,
        [i32(), ivec([0]), scalar(0)],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported: TENSOR_FLOAT32 \(1.1\)",
    ),
    Bad(
        "mean-rank5",
        Op.MEAN,
        [u8((1, 1, 1, 1, 2)), ivec([0]), scalar(0)],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128)],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "mean-axis-range",
        Op.MEAN,
        [f32((2, 3, 4)), ivec([1, -4]), scalar(1)],
        [F32_OUT],
        r"MEAN .*input 1 \(axes\) has -4 at position 1; every axis must be in \[-3, 3\)",
    ),
    Bad(
        "mean-axes-scalar",
        Op.MEAN,
        [f32(), scalar(0), scalar(0)],
        [F32_OUT],
        r"input 1 \(axes\) has type INT32; with TENSOR_FLOAT32 supported: TENSOR_INT32",
    ),
    Bad("mean-two-inputs", Op.MEAN, [f32(), ivec([0])], [F32_OUT], r"expected 3 inputs, got 2"),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_argument(row: Bad):
    row.check()


RUNTIME_BAD = [
    (
        "sum-runtime-axis-range",
        Op.REDUCE_SUM,
        [f32((2, 3)), ivec([2], const=False), DROP],
        r"REDUCE_SUM \(subgraph 0, operation 3\): input 1 \(axes\) has 2 at position 0",
    ),
    (
        "mean-runtime-axis-range",
        Op.MEAN,
        [f32((2, 3)), ivec([0, -3], const=False), scalar(0)],
        r"MEAN .*input 1 \(axes\) has -3 at position 1",
    ),
    (
        "max-empty-input",
        Op.REDUCE_MAX,
        [f32((0, 3), dims=(0, 3)), ivec([1]), DROP],
        r"REDUCE_MAX .*zero-sized input",
    ),
    (
        "all-empty-axes",
        Op.REDUCE_ALL,
        [b8((2, 3)), ivec([], const=False, dims=(0,)), DROP],
        r"REDUCE_ALL .*zero-sized input",
    ),
]


@pytest.mark.parametrize("case", RUNTIME_BAD, ids=lambda c: c[0])
def test_runtime_failure(case):
    _, op, ins, pattern = case
    out_type = T.TENSOR_BOOL8 if op == Op.REDUCE_ALL else T.TENSOR_FLOAT32
    kernel = _kernel(op, ins, [out(out_type)])
    with pytest.raises(GeneralFailure) as err:
        kernel(*[x.data for x in ins if x.is_tensor])
    assert_matches(err.value.message, pattern)


def test_model_input_keep_dims_and_axes_through_the_executor():
    from nnhal.driver.executor import compile_model

    from nnhal.builder import ModelBuilder

    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [2, 3, 4])
    axes = g.input(T.TENSOR_INT32, [2])
    keep = g.input(T.BOOL)
    y = g.output(T.TENSOR_FLOAT32, [])
    g.operation(Op.REDUCE_MAX, [x, axes, keep], [y])
    compiled = compile_model(mb.build())
    data = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    for axes_value, keep_value in (([0, -1], True), ([2, 2], False), ([1, 0], False)):
        (got,) = compiled.run([data, np.array(axes_value, np.int32), np.array(keep_value)])
        want = np.max(data, axis=tuple(sorted({a % 3 for a in axes_value})), keepdims=keep_value)
        assert np.array_equal(got, want)

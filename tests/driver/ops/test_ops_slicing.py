"""Tables of STRIDED_SLICE, GATHER and SPLIT (driver/ops/slicing.py).

STRIDED_SLICE references are hand-written numpy slices of the same
selection (masks, negative strides, clamping, shrunk axes); GATHER's is
``np.take``; SPLIT's is ``np.split`` (one output per split, a tuple from the
kernel, so its rows have their own loop).
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.registry import OpContext, lookup, validate_operation
from ops_harness import (
    WHERE,
    Bad,
    Row,
    X,
    assert_matches,
    f16,
    f32,
    i32,
    ivec,
    out,
    run_model,
    s8,
    scalar,
    u8,
)

from nnhal.errors import GeneralFailure, InvalidArgument
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32_OUT = out(T.TENSOR_FLOAT32)
U8_OUT = out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128)
S8_OUT = out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zp=0)


def ss(x: X, begin, end, strides, begin_mask=0, end_mask=0, shrink=0, const=True) -> list[X]:
    """STRIDED_SLICE inputs."""
    return [
        x,
        ivec(begin, const=const),
        ivec(end, const=const),
        ivec(strides, const=const),
        scalar(begin_mask),
        scalar(end_mask),
        scalar(shrink),
    ]


def sel(fn):
    """A reference taking the input and ignoring the three parameter tensors."""
    return lambda x, _b, _e, _s: np.asarray(fn(x))


X34 = np.arange(12, dtype=np.float32).reshape(3, 4)

ROWS = [
    # --- STRIDED_SLICE
    Row(
        "ss-f32-basic",
        Op.STRIDED_SLICE,
        ss(f32(data=X34), [1, 0], [3, 4], [1, 2]),
        F32_OUT,
        sel(lambda x: x[1:3, 0:4:2]),
        V.V1_1,
        raw=True,
        shape=(2, 2),
    ),
    Row(
        "ss-f32-negative-indices",
        Op.STRIDED_SLICE,
        ss(f32(data=X34), [-2, -3], [-1, -1], [1, 1]),
        F32_OUT,
        sel(lambda x: x[-2:-1, -3:-1]),
        raw=True,
    ),
    Row(
        "ss-f32-negative-strides",
        Op.STRIDED_SLICE,
        ss(f32(data=X34), [2, 3], [0, 0], [-1, -2]),
        F32_OUT,
        sel(lambda x: x[2:0:-1, 3:0:-2]),
        raw=True,
        shape=(2, 2),
    ),
    Row(
        "ss-f32-negative-stride-to-the-start",  # end -5 is before the start: clamps to -1
        Op.STRIDED_SLICE,
        ss(f32(data=np.arange(4, dtype=np.float32)), [3], [-5], [-1]),
        F32_OUT,
        sel(lambda x: x[::-1]),
        raw=True,
        shape=(4,),
    ),
    Row(
        "ss-f32-masks",
        Op.STRIDED_SLICE,
        ss(f32(data=X34), [2, 3], [0, 1], [-1, 1], begin_mask=1, end_mask=3),
        F32_OUT,
        sel(lambda x: x[::-1, 3:]),
        raw=True,
        shape=(3, 1),
    ),
    Row(
        "ss-f32-masks-negative-stride",
        Op.STRIDED_SLICE,
        ss(f32(data=X34), [0, 0], [0, 0], [-1, -3], begin_mask=3, end_mask=3),
        F32_OUT,
        sel(lambda x: x[::-1, ::-3]),
        raw=True,
    ),
    Row(
        "ss-f32-clamped-out-of-range",
        Op.STRIDED_SLICE,
        ss(f32(data=X34), [-10, 1], [10, 100], [1, 1]),
        F32_OUT,
        sel(lambda x: x[:, 1:]),
        raw=True,
        shape=(3, 3),
    ),
    Row(
        "ss-f32-empty-slice",
        Op.STRIDED_SLICE,
        ss(f32(data=X34), [2, 0], [1, 4], [1, 1]),
        F32_OUT,
        sel(lambda x: x[2:1]),
        raw=True,
    ),
    Row(
        "ss-f32-shrink",
        Op.STRIDED_SLICE,
        ss(f32(data=X34), [1, 0], [2, 4], [1, 1], shrink=1),
        F32_OUT,
        sel(lambda x: x[1]),
        raw=True,
        shape=(4,),
    ),
    Row(
        "ss-f32-shrink-negative-begin",
        Op.STRIDED_SLICE,
        ss(f32(data=X34), [0, -1], [3, 0], [1, 1], end_mask=2, shrink=2),
        F32_OUT,
        sel(lambda x: x[:, -1]),
        raw=True,
    ),
    Row(
        "ss-f32-shrink-every-axis-gives-1",  # NNAPI has no rank 0
        Op.STRIDED_SLICE,
        ss(f32(data=np.arange(4, dtype=np.float32)), [0], [1], [1], shrink=1),
        F32_OUT,
        sel(lambda x: x[0:1]),
        raw=True,
        shape=(1,),
    ),
    Row(
        "ss-u8-4d",
        Op.STRIDED_SLICE,
        ss(u8((2, 3, 4, 2)), [0, 1, 0, 1], [2, 3, 4, 2], [1, 1, 3, 1], shrink=8),
        U8_OUT,
        sel(lambda x: x[:, 1:3, 0:4:3, 1]),
        V.V1_1,
        raw=True,
        shape=(2, 2, 2),
    ),
    Row(
        "ss-f16",
        Op.STRIDED_SLICE,
        ss(f16((5,)), [1], [4], [2]),
        out(T.TENSOR_FLOAT16),
        sel(lambda x: x[1:4:2]),
        V.V1_2,
        raw=True,
    ),
    Row(
        "ss-s8",
        Op.STRIDED_SLICE,
        ss(s8((3, 2)), [2, 0], [-4, 2], [-1, 1]),
        S8_OUT,
        sel(lambda x: x[::-1]),
        V.V1_3,
        raw=True,
    ),
    Row(
        "ss-parameters-are-model-inputs",
        Op.STRIDED_SLICE,
        ss(f32(data=X34), [0, 3], [3, 0], [2, -1], const=False),
        F32_OUT,
        sel(lambda x: x[0:3:2, 3:0:-1]),
        raw=True,
        shape=(0, 0),
    ),
    Row(
        "ss-unknown-axis",
        Op.STRIDED_SLICE,
        ss(f32(data=X34, dims=(0, 4)), [1, 1], [2, 3], [1, 1], shrink=1),
        F32_OUT,
        sel(lambda x: x[1, 1:3]),
        raw=True,
        shape=(2,),
    ),
    # --- GATHER
    Row(
        "gather-f32-axis0",
        Op.GATHER,
        [f32((3, 2)), scalar(0), ivec([2, 0, 2])],
        F32_OUT,
        lambda x, i: np.take(x, i, axis=0),
        V.V1_2,
        raw=True,
        shape=(3, 2),
    ),
    Row(
        "gather-f32-negative-axis-2d-indices",
        Op.GATHER,
        [f32((1, 3, 2)), scalar(-2), ivec([[2, 0], [1, 0], [0, 1]])],
        F32_OUT,
        lambda x, i: np.take(x, i, axis=1),
        raw=True,
        shape=(1, 3, 2, 2),
    ),
    Row(
        "gather-i32",
        Op.GATHER,
        [i32((4,)), scalar(0), ivec([3, 3, 1])],
        out(T.TENSOR_INT32),
        lambda x, i: x[i],
        V.V1_2,
        raw=True,
    ),
    Row(
        "gather-f16",
        Op.GATHER,
        [f16((2, 3)), scalar(1), ivec([1])],
        out(T.TENSOR_FLOAT16),
        lambda x, i: x[:, [1]],
        V.V1_2,
        raw=True,
    ),
    Row(
        "gather-u8-output-quant-not-checked",  # the reference keeps the output's own
        Op.GATHER,
        [u8((2, 2)), scalar(1), ivec([0])],
        out(T.TENSOR_QUANT8_ASYMM, scale=1.0, zp=0),
        lambda x, i: x[:, [0]],
        V.V1_2,
        raw=True,
    ),
    Row(
        "gather-s8-indices-model-input",
        Op.GATHER,
        [s8((3, 2)), scalar(0), ivec([1, 2], const=False)],
        S8_OUT,
        lambda x, i: x[[1, 2]],
        V.V1_3,
        raw=True,
    ),
    Row(
        "gather-unknown-axis-size",
        Op.GATHER,
        [f32((3, 2), dims=(0, 2)), scalar(0), ivec([2])],
        F32_OUT,
        lambda x, i: x[[2]],
        raw=True,
        shape=(1, 2),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_slicing(row: Row):
    row.check()


BAD_ROWS = [
    # --- STRIDED_SLICE
    Bad(
        "ss-shrink-needs-one-element",  # the vectors' strided_slice_invalid
        Op.STRIDED_SLICE,
        ss(f32((2, 3)), [0, 0], [2, 3], [1, 1], shrink=1),
        [F32_OUT],
        r"axis 0 is shrunk \(shrink_axis_mask\) but its slice has 2 elements; it must have "
        r"exactly 1",
    ),
    Bad(
        "ss-shrink-negative-stride",
        Op.STRIDED_SLICE,
        ss(f32((2, 3)), [1, 0], [0, 3], [-1, 1], shrink=1),
        [F32_OUT],
        r"axis 0 is shrunk \(shrink_axis_mask\) but its stride is -1",
    ),
    Bad(
        "ss-zero-stride",
        Op.STRIDED_SLICE,
        ss(f32((2, 3)), [0, 0], [2, 3], [1, 0]),
        [F32_OUT],
        r"strides\[1\] is 0; strides must be non-zero",
    ),
    Bad(
        "ss-begin-length",
        Op.STRIDED_SLICE,
        ss(f32((2, 3)), [0], [2, 3], [1, 1]),
        [F32_OUT],
        r"input 1 \(begin\) has 1 elements; it needs one per input axis \(2\)",
    ),
    Bad(
        "ss-rank5",
        Op.STRIDED_SLICE,
        ss(f32((1, 1, 1, 1, 2)), [0] * 5, [1] * 5, [1] * 5),
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "ss-i32-input",
        Op.STRIDED_SLICE,
        ss(i32((2,)), [0], [1], [1]),
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported:",
    ),
    Bad(
        "ss-mask-type",
        Op.STRIDED_SLICE,
        [*ss(f32((2,)), [0], [1], [1])[:4], scalar(0.0, T.FLOAT32), scalar(0), scalar(0)],
        [F32_OUT],
        r"input 4 \(begin_mask\) has type FLOAT32.*supported: INT32",
    ),
    Bad(
        "ss-six-inputs",
        Op.STRIDED_SLICE,
        ss(f32((2,)), [0], [1], [1])[:6],
        [F32_OUT],
        r"expected 7 inputs, got 6",
    ),
    Bad(
        "ss-u8-output-scale",
        Op.STRIDED_SLICE,
        ss(u8((2,)), [0], [1], [1]),
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.25, zp=128)],
        r"output 0 has scale 0.25 and zero point 128",
    ),
    # --- GATHER
    Bad(
        "gather-negative-index",
        Op.GATHER,
        [f32((3, 2)), scalar(0), ivec([0, -1])],
        [F32_OUT],
        r"input 2 \(indices\): index -1 is out of range; indices must be in \[0, 3\)",
    ),
    Bad(
        "gather-index-too-big",
        Op.GATHER,
        [f32((3, 2)), scalar(1), ivec([2])],
        [F32_OUT],
        r"index 2 is out of range; indices must be in \[0, 2\)",
    ),
    Bad(
        "gather-axis-out-of-range",
        Op.GATHER,
        [f32((3, 2)), scalar(2), ivec([0])],
        [F32_OUT],
        r"input 1 \(axis\) is 2; for a rank 2 input it must be in \[-2, 2\)",
    ),
    Bad(
        "gather-bool8",
        Op.GATHER,
        [X(T.TENSOR_BOOL8, np.zeros((2,), bool)), scalar(0), ivec([0])],
        [out(T.TENSOR_BOOL8)],
        r"input 0 \(input\) has type TENSOR_BOOL8; supported:",
    ),
    Bad(
        "gather-indices-type",
        Op.GATHER,
        [f32((3, 2)), scalar(0), f32((1,), const=True)],
        [F32_OUT],
        r"input 2 \(indices\) has type TENSOR_FLOAT32.*supported: TENSOR_INT32",
    ),
    Bad(
        "gather-axis-tensor",
        Op.GATHER,
        [f32((3, 2)), ivec([0]), ivec([0])],
        [F32_OUT],
        r"input 1 \(axis\) has type TENSOR_INT32.*supported: INT32",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_slicing_invalid(row: Bad):
    row.check()


@pytest.mark.parametrize(
    "op, ins, args, match",
    [
        (
            Op.GATHER,
            [f32((3, 2)), scalar(0), ivec([0], const=False)],
            (np.zeros((3, 2), np.float32), np.array([1, -1], np.int32)),
            r"input 2 \(indices\): index -1 is out of range; indices must be in \[0, 3\)",
        ),
        (
            Op.GATHER,
            [f32((3, 2)), scalar(1), ivec([0], const=False)],
            (np.zeros((3, 2), np.float32), np.array([2], np.int32)),
            r"index 2 is out of range",
        ),
        (
            Op.GATHER,
            [f32((3, 2)), scalar(0), ivec([0], const=False)],
            (np.zeros((3, 2), np.float32), np.array([-1], np.int32)),
            r"input 2 \(indices\): index -1 is out of range; indices must be in \[0, 3\)",
        ),
        (
            Op.GATHER,
            [f32((3, 2), dims=(0, 2)), scalar(0), ivec([0])],
            (np.zeros((0, 2), np.float32), np.array([0], np.int32)),
            r"zero-sized input: input 0 ",
        ),
        (
            Op.STRIDED_SLICE,
            ss(f32((2, 3)), [0, 0], [2, 3], [1, 1], const=False),
            (
                np.zeros((2, 3), np.float32),
                *(np.array(v, np.int32) for v in ([0, 0], [2, 3], [1, 0])),
            ),
            r"strides\[1\] is 0",
        ),
        (
            Op.STRIDED_SLICE,
            ss(f32((2, 3)), [0, 0], [2, 3], [1, 1], shrink=2, const=False),
            (
                np.zeros((2, 3), np.float32),
                *(np.array(v, np.int32) for v in ([0, 0], [2, 3], [1, 1])),
            ),
            r"axis 1 is shrunk \(shrink_axis_mask\) but its slice has 3 elements",
        ),
        (
            Op.STRIDED_SLICE,
            ss(f32((2, 3)), [0, 0], [2, 3], [1, 1], const=False),
            (np.zeros((2, 3), np.float32), *(np.array(v, np.int32) for v in ([0], [2], [1]))),
            r"begin has 1 elements; it needs one per axis \(2\)",
        ),
    ],
    ids=lambda v: v.name if isinstance(v, Op) else None,
)
def test_runtime_failures(op, ins, args, match):
    from ops_harness import context

    ctx = context(op, ins, [F32_OUT])
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(GeneralFailure, match=match) as err:
        kernel(*args)
    assert err.value.message.startswith(f"{op.name} (")


@pytest.mark.usefixtures("shapes_mode")
def test_strided_slice_through_the_executor():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    vec = T.TENSOR_INT32
    (y,) = run_model(
        Op.STRIDED_SLICE,
        [
            ("in", T.TENSOR_FLOAT32, x),
            ("in", vec, np.array([1, -1, 0], np.int32)),
            ("in", vec, np.array([2, -4, 4], np.int32)),
            ("in", vec, np.array([1, -1, 3], np.int32)),
            ("const", T.INT32, 0),
            ("const", T.INT32, 0),
            ("in", T.INT32, np.int32(1)),
        ],
        [(T.TENSOR_FLOAT32, [0, 0])],
    )
    # end -4 is before the start of axis 1: it clamps to -1, so the slice reaches index 0
    np.testing.assert_array_equal(y, x[1, ::-1, 0:4:3])


# ---------------------------------------------------------------------------
# SPLIT
# ---------------------------------------------------------------------------


def _split_ctx(x: X, axis, count, n_out: int, scale=None, zp=None) -> OpContext:
    outs = [
        out(x.type, scale=x.scale if scale is None else scale, zp=x.zp if zp is None else zp).info()
        for _ in range(n_out)
    ]
    ins = [x.info(), scalar(axis).info(), scalar(count).info()]
    return OpContext(lookup(Op.SPLIT), ins, outs, where=WHERE)


SPLIT_ROWS = [
    ("f32-axis0", f32((4, 3)), 0, 2),
    ("f32-negative-axis", f32((2, 6)), -1, 3),
    ("f16", f16((2, 2, 2)), 1, 2),
    ("i32-three", i32((3, 2)), 0, 3),
    ("u8", u8((2, 4), scale=0.25, zp=5), 1, 4),
    ("s8", s8((2, 2)), 0, 1),
    ("unknown-axis-size", f32((4, 2), dims=(0, 2)), 0, 2),
]


@pytest.mark.parametrize("name, x, axis, count", SPLIT_ROWS, ids=[r[0] for r in SPLIT_ROWS])
def test_split(name, x, axis, count):
    ctx = _split_ctx(x, axis, count, count)
    version = validate_operation(ctx)
    assert version == (V.V1_3 if x.type == T.TENSOR_QUANT8_ASYMM_SIGNED else V.V1_2)
    shapes = ctx.op.prepare(ctx)
    parts = ctx.op.kernel(ctx)(x.data)
    want = np.split(x.data, count, axis=axis)
    assert isinstance(parts, tuple) and len(parts) == count
    for got, ref, shape in zip(parts, want, shapes):
        assert got.dtype == x.data.dtype
        np.testing.assert_array_equal(got, ref)
        assert not np.shares_memory(got, x.data)
        assert all(s in (0, g) for s, g in zip(shape, got.shape)), (shape, got.shape)


@pytest.mark.parametrize(
    "ctx, match",
    [
        (_split_ctx(f32((4, 3)), 0, 3, 3), r"input 0 has size 4 on axis 0, which 3 splits cannot"),
        (_split_ctx(f32((4, 3)), 0, 2, 3), r"input 2 \(num_splits\) is 2 but the operation has 3 "),
        (_split_ctx(f32((4, 3)), 0, 0, 1), r"input 2 \(num_splits\) is 0; it must be at least 1"),
        (_split_ctx(f32((4, 3)), 2, 1, 1), r"input 1 \(axis\) is 2; for a rank 2 input"),
        (
            _split_ctx(u8((4,)), 0, 2, 2, zp=0),
            r"output 0 has scale 0.5 and zero point 0; with TENSOR_QUANT8_ASYMM",
        ),
    ],
    ids=["indivisible", "count-vs-outputs", "zero-splits", "axis", "u8-zero-point"],
)
def test_split_invalid(ctx, match):
    with pytest.raises(InvalidArgument) as err:
        validate_operation(ctx)
    assert err.value.message.startswith(f"SPLIT ({WHERE}): ")
    assert_matches(err.value.message, match)


@pytest.mark.usefixtures("shapes_mode")
def test_split_through_the_executor():
    x = np.arange(12, dtype=np.int32).reshape(2, 6)
    parts = run_model(
        Op.SPLIT,
        [("in", T.TENSOR_INT32, x), ("const", T.INT32, -1), ("const", T.INT32, 3)],
        [(T.TENSOR_INT32, [2, 2])] * 3,
    )
    for got, want in zip(parts, np.split(x, 3, axis=1), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("axis", [0, -2])
def test_gather_one_index_into_the_first_axis_is_a_fresh_row(axis):
    """One index [1] into axis 0 takes the row-copy path: np.take's result, not a view."""
    from ops_harness import context

    ctx = context(Op.GATHER, [f32((3, 2)), scalar(axis), ivec([0], const=False)], [F32_OUT])
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    for k in range(3):
        index = np.array([k], np.int32)
        got = kernel(table, index)
        np.testing.assert_array_equal(got, np.take(table, index, axis=0))
        assert got.shape == (1, 2) and not np.shares_memory(got, table)
    # out of range and several indices leave that path with the same answers as before
    for bad in ([3], [-1]):
        with pytest.raises(GeneralFailure, match=f"index {bad[0]} is out of range"):
            kernel(table, np.array(bad, np.int32))
    both = np.array([2, 0], np.int32)
    np.testing.assert_array_equal(kernel(table, both), np.take(table, both, axis=0))


@pytest.mark.parametrize("table", [f32((5, 3), const=True), i32((4,), const=True)])
def test_gather_rows_of_a_constant_table(table):
    """A constant table's rows are kept as arrays: one index gives a fresh copy of its row,
    other indexes (several, out of range) what the generic kernel gives."""
    from ops_harness import context

    result = out(table.type, (1, *table.data.shape[1:]))
    ctx = context(Op.GATHER, [table, scalar(0), ivec([0], const=False)], [result])
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    assert kernel.__name__ == "row"  # the rows path, not the generic kernel
    data = table.data
    for k in range(len(data)):
        got = kernel(data, np.array([k], np.int32))
        np.testing.assert_array_equal(got, np.take(data, [k], axis=0))
        assert got.dtype == data.dtype and got.flags.writeable and got.base is None
        got[...] = 0  # a fresh array: the table and the next call are untouched
        np.testing.assert_array_equal(kernel(data, np.array([k], np.int32)), data[k : k + 1])
    many = np.array([2, 0, 2], np.int32)
    np.testing.assert_array_equal(kernel(data, many), np.take(data, many, axis=0))
    with pytest.raises(GeneralFailure, match=r"index -1 is out of range"):
        kernel(data, np.array([-1], np.int32))
    with pytest.raises(GeneralFailure, match=rf"index {len(data)} is out of range"):
        kernel(data, np.array([len(data)], np.int32))

"""Tables of SQUEEZE, EXPAND_DIMS, TRANSPOSE and TILE (driver/ops/shaping.py).

Positive rows compute their numpy reference in the row on the raw data (these
operations move data without changing it); negative rows assert
INVALID_ARGUMENT naming the operation, the operand and the rule (see
ops_harness.py). Whole small models run through the executor check what the
rows cannot: NO_VALUE and run-time omitted tensors, parameters that are model
inputs, late-bound scalars, and that prepare agrees with the kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
from ops_harness import (
    Bad,
    Row,
    X,
    f16,
    f32,
    i32,
    ivec,
    no_value,
    out,
    run_model,
    runtime_none,
    s8,
    scalar,
    u8,
)

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32_OUT = out(T.TENSOR_FLOAT32)


def _squeeze(x, axes):
    return np.squeeze(x, axis=tuple(axes)) if axes is not None else np.squeeze(x)


# ---------------------------------------------------------------------------
# Positive rows
# ---------------------------------------------------------------------------

ROWS = [
    # --- SQUEEZE
    Row(
        "squeeze-f32",
        Op.SQUEEZE,
        [f32((4, 1, 1, 2)), ivec([1, 2])],
        F32_OUT,
        lambda x, _d: _squeeze(x, (1, 2)),
        V.V1_1,
        raw=True,
        shape=(4, 2),
    ),
    Row(
        "squeeze-f32-negative-and-repeated-axes",
        Op.SQUEEZE,
        [f32((1, 3, 1)), ivec([-1, 2, 0])],
        F32_OUT,
        lambda x, _d: x.reshape(3),
        raw=True,
    ),
    Row(
        "squeeze-u8-no-value",
        Op.SQUEEZE,
        [u8((1, 2, 1, 3)), no_value()],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        lambda x, _d: _squeeze(x, None),
        V.V1_1,
        raw=True,
        shape=(2, 3),
    ),
    Row(
        "squeeze-f16",
        Op.SQUEEZE,
        [f16((2, 1)), ivec([1])],
        out(T.TENSOR_FLOAT16),
        lambda x, _d: x[:, 0],
        V.V1_2,
        raw=True,
    ),
    Row(
        "squeeze-s8",
        Op.SQUEEZE,
        [s8((1, 5)), ivec([0])],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zp=0),
        lambda x, _d: x[0],
        V.V1_3,
        raw=True,
    ),
    Row(
        "squeeze-every-axis-gives-1",  # NNAPI has no rank 0: [1, 1, 1] -> [1]
        Op.SQUEEZE,
        [f32((1, 1, 1)), no_value()],
        F32_OUT,
        lambda x, _d: x.reshape(1),
        raw=True,
        shape=(1,),
    ),
    Row(
        "squeeze-unknown-axes",
        Op.SQUEEZE,
        [f32((1, 3, 1), dims=(0, 3, 0)), ivec([0])],
        F32_OUT,
        lambda x, _d: x[0],
        raw=True,
        shape=(3, 0),
    ),
    Row(
        "squeeze-dims-model-input",
        Op.SQUEEZE,
        [f32((2, 1, 3)), ivec([-2], const=False)],
        F32_OUT,
        lambda x, _d: x[:, 0],
        raw=True,
    ),
    Row(
        "squeeze-dims-given-no-value-at-run-time",
        Op.SQUEEZE,
        [f32((1, 2, 1)), runtime_none(dims=(1,))],
        F32_OUT,
        lambda x, _d: x.reshape(2),
        raw=True,
    ),
    Row(
        "squeeze-unknown-rank",
        Op.SQUEEZE,
        [f32((3, 1), dims=None), no_value()],
        F32_OUT,
        lambda x, _d: x[:, 0],
        raw=True,
    ),
    # --- EXPAND_DIMS
    Row(
        "expand-f32-axis0",
        Op.EXPAND_DIMS,
        [f32((2, 3)), scalar(0)],
        F32_OUT,
        lambda x: x[None],
        V.V1_2,
        raw=True,
        shape=(1, 2, 3),
    ),
    Row(
        "expand-f32-axis-last-negative",
        Op.EXPAND_DIMS,
        [f32((2, 3)), scalar(-1)],
        F32_OUT,
        lambda x: x[..., None],
        raw=True,
        shape=(2, 3, 1),
    ),
    Row(
        "expand-i32-axis-rank",
        Op.EXPAND_DIMS,
        [i32((4,)), scalar(1)],
        out(T.TENSOR_INT32),
        lambda x: x[:, None],
        V.V1_2,
        raw=True,
    ),
    Row(
        "expand-f16-axis-minus-rank-minus-1",
        Op.EXPAND_DIMS,
        [f16((2, 2)), scalar(-3)],
        out(T.TENSOR_FLOAT16),
        lambda x: x[None],
        raw=True,
    ),
    Row(
        "expand-u8",
        Op.EXPAND_DIMS,
        [u8((2, 3), scale=0.25, zp=3), scalar(1)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.25, zp=3),
        lambda x: x[:, None],
        V.V1_2,
        raw=True,
    ),
    Row(
        "expand-s8",
        Op.EXPAND_DIMS,
        [s8((3,)), scalar(0)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        lambda x: x[None],
        V.V1_3,
        raw=True,
    ),
    Row(
        "expand-unknown-rank",
        Op.EXPAND_DIMS,
        [f32((2, 3), dims=None), scalar(-1)],
        F32_OUT,
        lambda x: x[..., None],
        raw=True,
    ),
    # --- TRANSPOSE
    Row(
        "transpose-f32-4d",
        Op.TRANSPOSE,
        [f32((1, 2, 3, 4)), ivec([0, 3, 1, 2])],
        F32_OUT,
        lambda x, _p: x.transpose(0, 3, 1, 2),
        V.V1_1,
        raw=True,
        shape=(1, 4, 2, 3),
    ),
    Row(
        "transpose-u8-3d",
        Op.TRANSPOSE,
        [u8((2, 3, 4)), ivec([2, 0, 1])],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        lambda x, _p: x.transpose(2, 0, 1),
        V.V1_1,
        raw=True,
    ),
    Row(
        "transpose-f16-identity-is-a-copy",
        Op.TRANSPOSE,
        [f16((2, 3)), ivec([0, 1])],
        out(T.TENSOR_FLOAT16),
        lambda x, _p: x,
        V.V1_2,
        raw=True,
    ),
    Row(
        "transpose-s8-1d",
        Op.TRANSPOSE,
        [s8((5,)), ivec([0])],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        lambda x, _p: x,
        V.V1_3,
        raw=True,
    ),
    Row(
        "transpose-no-value-is-matrix-transpose",
        Op.TRANSPOSE,
        [f32((2, 3)), no_value()],
        F32_OUT,
        lambda x, _p: x.T,
        raw=True,
        shape=(3, 2),
    ),
    Row(
        "transpose-perm-given-no-value-at-run-time",
        Op.TRANSPOSE,
        [f32((2, 3)), runtime_none()],
        F32_OUT,
        lambda x, _p: x.T,
        raw=True,
        shape=(0, 0),
    ),
    Row(
        "transpose-perm-model-input",
        Op.TRANSPOSE,
        [f32((2, 3, 4)), ivec([1, 2, 0], const=False)],
        F32_OUT,
        lambda x, _p: x.transpose(1, 2, 0),
        raw=True,
        shape=(0, 0, 0),
    ),
    Row(
        "transpose-zero-sized",  # the one operation of the family that allows it
        Op.TRANSPOSE,
        [f32((0, 2, 2, 1), dims=(0, 2, 2, 1)), ivec([0, 3, 1, 2])],
        F32_OUT,
        lambda x, _p: x.transpose(0, 3, 1, 2),
        raw=True,
        shape=(0, 1, 2, 2),
    ),
    # --- TILE
    Row(
        "tile-f32",
        Op.TILE,
        [f32((2, 3)), ivec([2, 1])],
        F32_OUT,
        lambda x, m: np.tile(x, m),
        V.V1_2,
        raw=True,
        shape=(4, 3),
    ),
    Row(
        "tile-i32-3d",
        Op.TILE,
        [i32((1, 2, 3)), ivec([2, 3, 1])],
        out(T.TENSOR_INT32),
        lambda x, m: np.tile(x, m),
        V.V1_2,
        raw=True,
    ),
    Row(
        "tile-f16-multiples-model-input",
        Op.TILE,
        [f16((3,)), ivec([2], const=False)],
        out(T.TENSOR_FLOAT16),
        lambda x, m: np.tile(x, m),
        raw=True,
        shape=(0,),
    ),
    Row(
        "tile-u8",
        Op.TILE,
        [u8((2, 2), scale=0.5, zp=127), ivec([1, 3])],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=127),
        lambda x, m: np.tile(x, m),
        V.V1_2,
        raw=True,
    ),
    Row(
        "tile-s8-ones-is-a-copy",
        Op.TILE,
        [s8((2, 2)), ivec([1, 1])],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        lambda x, m: x,
        V.V1_3,
        raw=True,
    ),
    Row(
        "tile-unknown-axis",
        Op.TILE,
        [f32((2, 3), dims=(0, 3)), ivec([3, 2])],
        F32_OUT,
        lambda x, m: np.tile(x, m),
        raw=True,
        shape=(0, 6),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_shaping(row: Row):
    row.check()


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

U8_OUT = out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128)

BAD_ROWS = [
    # --- SQUEEZE
    Bad(
        "squeeze-dims-left-off",
        Op.SQUEEZE,
        [f32((1, 2))],
        [F32_OUT],
        r"expected 2 inputs, got 1; input 1 \(squeeze dims\) is omitted with NO_VALUE",
    ),
    Bad(
        "squeeze-three-inputs",
        Op.SQUEEZE,
        [f32((1, 2)), ivec([0]), ivec([0])],
        [F32_OUT],
        r"expected 1 to 2 inputs, got 3",
    ),
    Bad(
        "squeeze-i32-input",
        Op.SQUEEZE,
        [i32((1, 2)), ivec([0])],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported: TENSOR_FLOAT32",
    ),
    Bad(
        "squeeze-dims-type",
        Op.SQUEEZE,
        [f32((1, 2)), f32((1,), const=True)],
        [F32_OUT],
        r"input 1 \(squeeze dims\) has type TENSOR_FLOAT32.*supported: TENSOR_INT32",
    ),
    Bad(
        "squeeze-output-type",
        Op.SQUEEZE,
        [f32((1, 2)), ivec([0])],
        [out(T.TENSOR_FLOAT16)],
        r"output 0 \(output\) has type TENSOR_FLOAT16",
    ),
    Bad(
        "squeeze-rank5",
        Op.SQUEEZE,
        [f32((1, 1, 1, 1, 2)), ivec([0])],
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "squeeze-dims-rank2",
        Op.SQUEEZE,
        [f32((1, 2)), ivec([[0]])],
        [F32_OUT],
        r"input 1 has rank 2; it must have rank 1",
    ),
    Bad(
        "squeeze-axis-not-1",
        Op.SQUEEZE,
        [f32((1, 2)), ivec([1])],
        [F32_OUT],
        r"input 1 \(squeeze dims\): squeeze dim 1 selects axis 1 of size 2; it must be 1",
    ),
    Bad(
        "squeeze-axis-out-of-range",
        Op.SQUEEZE,
        [f32((1, 2)), ivec([-3])],
        [F32_OUT],
        r"squeeze dim -3 is out of range for rank 2; use \[-2, 2\)",
    ),
    Bad(
        "squeeze-u8-output-zero-point",
        Op.SQUEEZE,
        [u8((1, 2)), ivec([0])],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=127)],
        r"output 0 has scale 0.5 and zero point 127; with TENSOR_QUANT8_ASYMM they must "
        r"equal input 0's \(scale 0.5, zero point 128\)",
    ),
    # --- EXPAND_DIMS
    Bad(
        "expand-axis-too-big",
        Op.EXPAND_DIMS,
        [f32((2, 3)), scalar(3)],
        [F32_OUT],
        r"input 1 \(axis\) is 3; for a rank 2 input it must be in \[-3, 2\]",
    ),
    Bad(
        "expand-axis-too-small",
        Op.EXPAND_DIMS,
        [f32((2, 3)), scalar(-4)],
        [F32_OUT],
        r"input 1 \(axis\) is -4",
    ),
    Bad(
        "expand-axis-type",
        Op.EXPAND_DIMS,
        [f32((2, 3)), ivec([0])],
        [F32_OUT],
        r"input 1 \(axis\) has type TENSOR_INT32.*supported: INT32",
    ),
    Bad(
        "expand-bool8",
        Op.EXPAND_DIMS,
        [X(T.TENSOR_BOOL8, np.zeros((2,), bool)), scalar(0)],
        [out(T.TENSOR_BOOL8)],
        r"input 0 \(input\) has type TENSOR_BOOL8; supported:",
    ),
    Bad(
        "expand-s8-output-scale",
        Op.EXPAND_DIMS,
        [s8((2,)), scalar(0)],
        [out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.25)],
        r"output 0 has scale 0.25 and zero point 0",
    ),
    Bad("expand-one-input", Op.EXPAND_DIMS, [f32((2,))], [F32_OUT], r"expected 2 inputs, got 1"),
    # --- TRANSPOSE
    Bad(
        "transpose-perm-left-off",
        Op.TRANSPOSE,
        [f32((2, 3))],
        [F32_OUT],
        r"expected 2 inputs, got 1; input 1 \(perm\) is omitted with NO_VALUE",
    ),
    Bad(
        "transpose-i32",
        Op.TRANSPOSE,
        [i32((2, 3)), ivec([1, 0])],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported:",
    ),
    Bad(
        "transpose-rank5",
        Op.TRANSPOSE,
        [f32((1, 1, 1, 1, 2)), ivec([0, 1, 2, 3, 4])],
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "transpose-perm-length",
        Op.TRANSPOSE,
        [f32((2, 3)), ivec([0, 1, 2])],
        [F32_OUT],
        r"input 1 \(perm\) has 3 elements; it needs one per input axis \(2\)",
    ),
    Bad(
        "transpose-perm-repeats",
        Op.TRANSPOSE,
        [f32((2, 3)), ivec([1, 1])],
        [F32_OUT],
        r"input 1: perm \[1, 1\] is not a permutation of 0..1",
    ),
    Bad(
        "transpose-perm-out-of-range",
        Op.TRANSPOSE,
        [f32((2, 3)), ivec([0, 2])],
        [F32_OUT],
        r"perm \[0, 2\] is not a permutation",
    ),
    Bad(
        "transpose-no-value-needs-rank2",
        Op.TRANSPOSE,
        [f32((2, 3, 4)), no_value()],
        [F32_OUT],
        r"input 1 \(perm\) is omitted, which transposes a matrix, but input 0 has rank 3",
    ),
    Bad(
        "transpose-u8-output-scale",
        Op.TRANSPOSE,
        [u8((2, 3)), ivec([1, 0])],
        [out(T.TENSOR_QUANT8_ASYMM, scale=1.0, zp=128)],
        r"output 0 has scale 1.0 and zero point 128; with TENSOR_QUANT8_ASYMM they must equal",
    ),
    # --- TILE
    Bad(
        "tile-multiples-length",
        Op.TILE,
        [f32((2, 3)), ivec([2])],
        [F32_OUT],
        r"input 1 \(multiples\) has 1 elements; it needs one per input axis \(2\)",
    ),
    Bad(
        "tile-multiples-negative",
        Op.TILE,
        [f32((2, 3)), ivec([2, -1])],
        [F32_OUT],
        r"input 1: multiples \[2, -1\] has a negative value",
    ),
    Bad(
        "tile-multiples-rank2",
        Op.TILE,
        [f32((2, 3)), ivec([[2, 1]])],
        [F32_OUT],
        r"input 1 has rank 2; it must have rank 1",
    ),
    Bad(
        "tile-multiples-scalar",
        Op.TILE,
        [f32((2, 3)), scalar(2)],
        [F32_OUT],
        r"input 1 \(multiples\) has type INT32.*supported: TENSOR_INT32",
    ),
    Bad(
        "tile-u8-output-zero-point",
        Op.TILE,
        [u8((2,)), ivec([2])],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=0)],
        r"output 0 has scale 0.5 and zero point 0",
    ),
    Bad("tile-two-outputs", Op.TILE, [f32((2,)), ivec([2])], [F32_OUT, F32_OUT], r"1 outputs"),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_shaping_invalid(row: Bad):
    row.check()


# ---------------------------------------------------------------------------
# Run-time failures (parameters that are model inputs) and the executor
# ---------------------------------------------------------------------------


def _kernel(op, ins, outs):
    from ops_harness import context

    ctx = context(op, ins, outs)
    return ctx.op.kernel(ctx)


@pytest.mark.parametrize(
    "op, ins, args, match",
    [
        (
            Op.SQUEEZE,
            [f32((1, 2), dims=(0, 2)), ivec([0])],
            (np.zeros((3, 2), np.float32), None),
            r"squeeze dim 0 selects axis 0 of size 3",
        ),
        (
            Op.SQUEEZE,
            [f32((1, 2)), ivec([0], const=False)],
            (np.zeros((1, 2), np.float32), np.array([5], np.int32)),
            r"squeeze dim 5 is out of range",
        ),
        (
            Op.SQUEEZE,
            [f32((1, 2), dims=None), no_value()],
            (np.zeros((0, 2), np.float32), None),
            r"zero-sized input: input 0 ",
        ),
        (
            Op.TRANSPOSE,
            [f32((2, 3)), ivec([1, 0], const=False)],
            (np.zeros((2, 3), np.float32), np.array([0, 0], np.int32)),
            r"perm \[0, 0\] is not a permutation",
        ),
        (
            Op.TRANSPOSE,
            [f32((2, 3), dims=None), ivec([1, 0], const=False)],
            (np.zeros((2, 3, 4), np.float32), None),
            r"perm has no value, which needs a rank 2 input; it has rank 3",
        ),
        (
            Op.TILE,
            [f32((2, 3)), ivec([1, 1], const=False)],
            (np.zeros((2, 3), np.float32), np.array([1, -2], np.int32)),
            r"multiples \[1, -2\] has a negative value",
        ),
        (
            Op.TILE,
            [f32((2, 3)), ivec([1, 1], const=False)],
            (np.zeros((2, 3), np.float32), np.array([1], np.int32)),
            r"multiples has 1 elements",
        ),
        (
            Op.EXPAND_DIMS,
            [f32((2,), dims=None), scalar(2)],
            (np.zeros((2,), np.float32),),
            r"input 1 \(axis\) 2 is out of range for rank 1",
        ),
    ],
    ids=lambda v: v.name if isinstance(v, Op) else None,
)
def test_runtime_failures(op, ins, args, match):
    kernel = _kernel(op, ins, [F32_OUT])
    with pytest.raises(GeneralFailure, match=match) as err:
        kernel(*args)
    assert err.value.message.startswith(f"{op.name} (")


def test_kernels_of_unknown_shapes_never_return_views():
    kernel = _kernel(Op.SQUEEZE, [f32((1, 2), dims=(0, 0)), ivec([0])], [F32_OUT])
    x = np.arange(2, dtype=np.float32).reshape(1, 2)
    assert not np.shares_memory(kernel(x, None), x)
    kernel = _kernel(Op.EXPAND_DIMS, [f32((2,), dims=None), scalar(0)], [F32_OUT])
    assert not np.shares_memory(kernel(x), x)


def test_executor_squeeze_no_value_and_transpose_omitted_at_run_time(shapes_mode):
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 1, 3)
    (y,) = run_model(
        Op.SQUEEZE,
        [("in", T.TENSOR_FLOAT32, x), ("none", T.TENSOR_INT32, None)],
        [(T.TENSOR_FLOAT32, [2, 3])],
    )
    np.testing.assert_array_equal(y, x.reshape(2, 3))
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = run_model(
        Op.TRANSPOSE,
        [("in", T.TENSOR_FLOAT32, m), ("in?", T.TENSOR_INT32, [0])],
        [(T.TENSOR_FLOAT32, [3, 2])],
    )
    np.testing.assert_array_equal(y, m.T)


def test_executor_late_bound_axis_and_runtime_parameters(shapes_mode):
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    for axis in (0, 2, -1):
        (y,) = run_model(
            Op.EXPAND_DIMS,
            [("in", T.TENSOR_INT32, x), ("in", T.INT32, np.int32(axis))],
            [(T.TENSOR_INT32, [])],
        )
        np.testing.assert_array_equal(y, np.expand_dims(x, axis))
    (y,) = run_model(
        Op.TILE,
        [("in", T.TENSOR_INT32, x), ("in", T.TENSOR_INT32, np.array([2, 2], np.int32))],
        [(T.TENSOR_INT32, [4, 6])],
    )
    np.testing.assert_array_equal(y, np.tile(x, (2, 2)))
    (y,) = run_model(
        Op.TRANSPOSE,
        [("in", T.TENSOR_FLOAT32, x.astype(np.float32)), ("const", T.TENSOR_INT32, [1, 0])],
        [(T.TENSOR_FLOAT32, [0, 0])],
    )
    np.testing.assert_array_equal(y, x.T)


def test_executor_quantized_squeeze_keeps_the_data(shapes_mode):
    x = np.array([[[0, 128, 255]]], np.uint8)
    (y,) = run_model(
        Op.SQUEEZE,
        [("in", T.TENSOR_QUANT8_ASYMM, x, 0.5, 128), ("const", T.TENSOR_INT32, [0, 1])],
        [(T.TENSOR_QUANT8_ASYMM, [3], 0.5, 128)],
    )
    assert y.dtype == np.uint8
    np.testing.assert_array_equal(y, [0, 128, 255])

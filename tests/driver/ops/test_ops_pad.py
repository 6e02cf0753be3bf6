"""Tables of PAD and PAD_V2 (driver/ops/pad.py).

References are ``np.pad`` with the pad value the reference uses: 0.0 for
floats, the input's zero point for quantized PAD, input 2 for PAD_V2 (its
low byte for quantized tensors). Negative rows assert INVALID_ARGUMENT naming
the operation, the operand and the rule.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.registry import validate_operation
from ops_harness import Bad, Row, X, context, f16, f32, i32, ivec, out, run_model, s8, scalar, u8

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32_OUT = out(T.TENSOR_FLOAT32)


def padded(value):
    """np.pad reference with a constant value (paddings are the second tensor)."""
    return lambda x, p, *_: np.pad(x, np.asarray(p), constant_values=value)


ROWS = [
    # --- PAD
    Row(
        "pad-f32-4d",
        Op.PAD,
        [f32((1, 2, 3, 1)), ivec([[0, 0], [1, 2], [2, 1], [0, 0]])],
        F32_OUT,
        padded(0.0),
        V.V1_1,
        raw=True,
        shape=(1, 5, 6, 1),
    ),
    Row(
        "pad-f32-1d",
        Op.PAD,
        [f32((3,)), ivec([[2, 0]])],
        F32_OUT,
        padded(0.0),
        raw=True,
    ),
    Row(
        "pad-f16",
        Op.PAD,
        [f16((2, 2)), ivec([[1, 1], [0, 3]])],
        out(T.TENSOR_FLOAT16),
        padded(0.0),
        V.V1_2,
        raw=True,
    ),
    Row(
        "pad-u8-zero-point-0",
        Op.PAD,
        [u8((2, 3), zp=0), ivec([[1, 0], [0, 1]])],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=0),
        padded(0),
        V.V1_1,
        raw=True,
    ),
    Row(
        "pad-u8-pads-with-the-zero-point",  # real 0; a nonzero zero point needs 1.2
        Op.PAD,
        [u8((2, 3), zp=100), ivec([[1, 1], [2, 0]])],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=100),
        padded(100),
        V.V1_2,
        raw=True,
    ),
    Row(
        "pad-s8",
        Op.PAD,
        [s8((2, 2), zp=-7), ivec([[0, 1], [1, 0]])],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zp=-7),
        padded(-7),
        V.V1_3,
        raw=True,
    ),
    Row(
        "pad-no-padding-is-a-copy",
        Op.PAD,
        [f32((2, 3)), ivec([[0, 0], [0, 0]])],
        F32_OUT,
        padded(0.0),
        raw=True,
    ),
    Row(
        "pad-paddings-model-input",
        Op.PAD,
        [f32((2, 3)), ivec([[1, 2], [0, 1]], const=False)],
        F32_OUT,
        padded(0.0),
        raw=True,
        shape=(0, 0),
    ),
    Row(
        "pad-unknown-axis",
        Op.PAD,
        [f32((2, 3), dims=(0, 3)), ivec([[1, 1], [1, 1]])],
        F32_OUT,
        padded(0.0),
        raw=True,
        shape=(0, 5),
    ),
    Row(
        "pad-unknown-rank",
        Op.PAD,
        [f32((2, 3), dims=None), ivec([[1, 0], [0, 2]])],
        F32_OUT,
        padded(0.0),
        raw=True,
        shape=(0, 0),
    ),
    # --- PAD_V2
    Row(
        "pad-v2-f32",
        Op.PAD_V2,
        [f32((2, 3)), ivec([[1, 1], [2, 2]]), scalar(-1.5, T.FLOAT32)],
        F32_OUT,
        padded(-1.5),
        V.V1_2,
        raw=True,
        shape=(4, 7),
    ),
    Row(
        "pad-v2-f16",
        Op.PAD_V2,
        [f16((2,)), ivec([[3, 1]]), scalar(2.5, T.FLOAT16)],
        out(T.TENSOR_FLOAT16),
        padded(2.5),
        V.V1_2,
        raw=True,
    ),
    Row(
        "pad-v2-u8",
        Op.PAD_V2,
        [u8((1, 2, 2, 1), zp=3), ivec([[0, 0], [1, 1], [1, 1], [0, 0]]), scalar(9)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=3),
        padded(9),
        V.V1_2,
        raw=True,
    ),
    Row(
        "pad-v2-u8-value-is-its-low-byte",  # the reference reads the INT32's first byte
        Op.PAD_V2,
        [u8((2,)), ivec([[1, 1]]), scalar(256 + 7)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        padded(7),
        raw=True,
    ),
    Row(
        "pad-v2-s8",
        Op.PAD_V2,
        [s8((2, 2)), ivec([[1, 0], [0, 1]]), scalar(-3)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        padded(-3),
        V.V1_3,
        raw=True,
    ),
    Row(
        "pad-v2-s8-value-is-its-low-byte",
        Op.PAD_V2,
        [s8((2,)), ivec([[1, 1]]), scalar(200)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        padded(200 - 256),
        raw=True,
    ),
    Row(
        "pad-v2-paddings-model-input",
        Op.PAD_V2,
        [f32((3,)), ivec([[0, 2]], const=False), scalar(4.0, T.FLOAT32)],
        F32_OUT,
        padded(4.0),
        raw=True,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_pad(row: Row):
    row.check()


BAD_ROWS = [
    Bad(
        "pad-negative-padding",
        Op.PAD,
        [f32((2, 3)), ivec([[0, 0], [-1, 0]])],
        [F32_OUT],
        r"input 1: paddings for axis 1 are \(-1, 0\); they must be non-negative",
    ),
    Bad(
        "pad-paddings-shape",
        Op.PAD,
        [f32((2, 3)), ivec([[0, 0, 0], [0, 0, 0]])],
        [F32_OUT],
        r"input 1 \(paddings\) has shape \[2, 3\]; it must be \[2, 2\]",
    ),
    Bad(
        "pad-paddings-rows",
        Op.PAD,
        [f32((2, 3)), ivec([[0, 0]])],
        [F32_OUT],
        r"input 1 \(paddings\) has shape \[1, 2\]; it must be \[2, 2\]",
    ),
    Bad(
        "pad-paddings-rank1",
        Op.PAD,
        [f32((2, 3)), ivec([0, 0, 0, 0])],
        [F32_OUT],
        r"input 1 has rank 1; it must have rank 2",
    ),
    Bad(
        "pad-rank5",
        Op.PAD,
        [f32((1, 1, 1, 1, 2)), ivec([[0, 0]] * 5)],
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "pad-i32",
        Op.PAD,
        [i32((2,)), ivec([[0, 0]])],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported:",
    ),
    Bad(
        "pad-u8-output-zero-point",
        Op.PAD,
        [u8((2,), zp=10), ivec([[1, 1]])],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=0)],
        r"output 0 has scale 0.5 and zero point 0; with TENSOR_QUANT8_ASYMM they must equal "
        r"input 0's \(scale 0.5, zero point 10\)",
    ),
    Bad(
        "pad-three-inputs",
        Op.PAD,
        [f32((2,)), ivec([[1, 1]]), scalar(0.0, T.FLOAT32)],
        [F32_OUT],
        r"expected 2 inputs, got 3",
    ),
    Bad(
        "pad-v2-f32-int-value",
        Op.PAD_V2,
        [f32((2,)), ivec([[1, 1]]), scalar(0)],
        [F32_OUT],
        r"input 2 \(pad_value\) has type INT32; with TENSOR_FLOAT32 supported: FLOAT32",
    ),
    Bad(
        "pad-v2-f16-float32-value",
        Op.PAD_V2,
        [f16((2,)), ivec([[1, 1]]), scalar(0.0, T.FLOAT32)],
        [out(T.TENSOR_FLOAT16)],
        r"input 2 \(pad_value\) has type FLOAT32; with TENSOR_FLOAT16 supported: FLOAT16",
    ),
    Bad(
        "pad-v2-u8-float-value",
        Op.PAD_V2,
        [u8((2,)), ivec([[1, 1]]), scalar(0.0, T.FLOAT32)],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128)],
        r"input 2 \(pad_value\) has type FLOAT32; with TENSOR_QUANT8_ASYMM supported: INT32",
    ),
    Bad(
        "pad-v2-two-inputs",
        Op.PAD_V2,
        [f32((2,)), ivec([[1, 1]])],
        [F32_OUT],
        r"expected 3 inputs, got 2",
    ),
    Bad(
        "pad-v2-negative-padding",
        Op.PAD_V2,
        [f32((2,)), ivec([[1, -2]]), scalar(0.0, T.FLOAT32)],
        [F32_OUT],
        r"paddings for axis 0 are \(1, -2\); they must be non-negative",
    ),
    Bad(
        "pad-v2-bool8",
        Op.PAD_V2,
        [X(T.TENSOR_BOOL8, np.zeros((2,), bool)), ivec([[1, 1]]), scalar(0)],
        [out(T.TENSOR_BOOL8)],
        r"input 0 \(input\) has type TENSOR_BOOL8; supported:",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_pad_invalid(row: Bad):
    row.check()


@pytest.mark.parametrize(
    "paddings, x, match",
    [
        (np.array([[1, -1]], np.int32), np.zeros((2,), np.float32), r"must be non-negative"),
        (np.array([[1, 1]], np.int32), np.zeros((2, 2), np.float32), r"must be \[2, 2\]"),
        (np.array([[1, 1]], np.int32), np.zeros((0,), np.float32), r"zero-sized input: input 0 "),
    ],
    ids=["negative", "shape", "zero-sized"],
)
def test_runtime_failures(paddings, x, match):
    ctx = context(Op.PAD, [f32((2,), dims=None), ivec([[0, 0]], const=False)], [F32_OUT])
    validate_operation(ctx)
    with pytest.raises(GeneralFailure, match=match) as err:
        ctx.op.kernel(ctx)(x, paddings)
    assert err.value.message.startswith("PAD (")


@pytest.mark.usefixtures("shapes_mode")
def test_pad_through_the_executor():
    x = np.array([[1, 2], [3, 4]], np.uint8)
    (y,) = run_model(
        Op.PAD,
        [("in", T.TENSOR_QUANT8_ASYMM, x, 0.5, 50), ("const", T.TENSOR_INT32, [[1, 0], [0, 1]])],
        [(T.TENSOR_QUANT8_ASYMM, [3, 3], 0.5, 50)],
    )
    np.testing.assert_array_equal(y, [[50, 50, 50], [1, 2, 50], [3, 4, 50]])
    (y,) = run_model(
        Op.PAD_V2,
        [
            ("in", T.TENSOR_FLOAT32, x.astype(np.float32)),
            ("in", T.TENSOR_INT32, np.array([[0, 1], [1, 0]], np.int32)),
            ("in", T.FLOAT32, np.float32(-2.0)),
        ],
        [(T.TENSOR_FLOAT32, [])],
    )
    np.testing.assert_array_equal(y, [[-2, 1, 2], [-2, 3, 4], [-2, -2, -2]])

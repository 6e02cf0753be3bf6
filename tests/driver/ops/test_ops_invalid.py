"""Negative rows of the operation tables.

INVALID_ARGUMENT at validation, prepare or kernel binding, with a message
naming the operation, where it sits, the operand and the rule; and run-time
GENERAL_FAILURE from kernels whose shape parameters are model inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.registry import validate_operation
from ops_harness import (
    F32_OUT,
    NONE,
    Bad,
    X,
    act,
    assert_matches,
    b8,
    context,
    f16,
    f32,
    i32,
    ivec,
    out,
    scalar,
    t,
    u8,
)

from nnhal.errors import GeneralFailure
from nnhal.types import FusedActivationFunc as Act
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

BAD_ROWS = [
    # --- ADD / SUB / MUL / DIV
    Bad("add-two-inputs", Op.ADD, [f32(), f32()], [F32_OUT], r"expected 3 inputs, got 2"),
    Bad("add-two-outputs", Op.ADD, [f32(), f32(), NONE], [F32_OUT, F32_OUT], r"expected 1 out"),
    Bad(
        "add-input1-type",
        Op.ADD,
        [f32(), f16(), NONE],
        [F32_OUT],
        r"input 1 \(input1\) has type TENSOR_FLOAT16",
    ),
    Bad(
        "add-activation-type",
        Op.ADD,
        [f32(), f32(), scalar(0.0, T.FLOAT32)],
        [F32_OUT],
        r"input 2 \(activation\) has type FLOAT32.*supported: INT32",
    ),
    Bad("add-activation-4", Op.ADD, [f32(), f32(), scalar(4)], [F32_OUT], r"input 2.*value 4"),
    Bad("add-activation-negative", Op.ADD, [f32(), f32(), scalar(-1)], [F32_OUT], r"value -1"),
    Bad(
        "add-i32-relu",
        Op.ADD,
        [i32(), i32(), act(Act.RELU)],
        [out(T.TENSOR_INT32)],
        r"input 2 \(activation\) is RELU; with TENSOR_INT32 it must be NONE",
    ),
    Bad(
        "add-rank5",
        Op.ADD,
        [f32((1, 1, 1, 2, 3)), f32(), NONE],
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "add-broadcast-mismatch",
        Op.ADD,
        [f32((2, 3)), f32((4,)), NONE],
        [F32_OUT],
        r"cannot be broadcast.*3 in input 0 and 4 in input 1",
    ),
    Bad(
        "add-output-type",
        Op.ADD,
        [f32(), f32(), NONE],
        [out(T.TENSOR_FLOAT16)],
        r"output 0 \(output\) has type TENSOR_FLOAT16",
    ),
    Bad(
        "add-unsupported-type",
        Op.ADD,
        [b8(), b8(), NONE],
        [out(T.TENSOR_BOOL8)],
        r"input 0 \(input0\) has type TENSOR_BOOL8; supported: .*TENSOR_FLOAT32 \(1.0\)",
    ),
    Bad(
        "add-activation-not-constant",
        Op.ADD,
        [f32(), f32(), scalar(0, const=False)],
        [F32_OUT],
        r"input 2 \(activation\) must be a constant",
    ),
    Bad(
        "div-u8",
        Op.DIV,
        [u8(), u8(), NONE],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.5)],
        r"input 0 \(input0\) has type TENSOR_QUANT8_ASYMM; supported",
    ),
    Bad(
        "mul-u8-output-scale",
        Op.MUL,
        [u8(scale=0.5), u8(scale=0.5), NONE],
        [out(T.TENSOR_QUANT8_ASYMM, scale=0.25)],
        r"output 0 has scale 0.25.*greater than input0 scale \* input1 scale",
    ),
    # --- comparisons, logical, SELECT
    Bad(
        "less-output-f32",
        Op.LESS,
        [f32(), f32()],
        [F32_OUT],
        r"output 0 \(output\) has type TENSOR_FLOAT32.*supported: TENSOR_BOOL8",
    ),
    Bad("equal-mixed-types", Op.EQUAL, [f32(), i32()], [out(T.TENSOR_BOOL8)], r"input 1.*INT32"),
    Bad(
        "greater-quant16",
        Op.GREATER,
        [t(T.TENSOR_QUANT16_SYMM, scale=1.0), t(T.TENSOR_QUANT16_SYMM, scale=1.0)],
        [out(T.TENSOR_BOOL8)],
        r"input 0 \(input0\) has type TENSOR_QUANT16_SYMM; supported",
    ),
    Bad("not-equal-3-inputs", Op.NOT_EQUAL, [f32(), f32(), f32()], [out(T.TENSOR_BOOL8)], r"2"),
    Bad(
        "less-broadcast",
        Op.LESS_EQUAL,
        [f32((3, 2)), f32((3,))],
        [out(T.TENSOR_BOOL8)],
        r"cannot be broadcast",
    ),
    Bad(
        "logical-and-f32",
        Op.LOGICAL_AND,
        [f32(), f32()],
        [F32_OUT],
        r"input 0 \(input0\) has type TENSOR_FLOAT32; supported: TENSOR_BOOL8 \(1.2\)",
    ),
    Bad("logical-not-two", Op.LOGICAL_NOT, [b8(), b8()], [out(T.TENSOR_BOOL8)], r"expected 1"),
    Bad(
        "select-condition-f32",
        Op.SELECT,
        [f32(), f32(), f32()],
        [F32_OUT],
        r"input 0 \(condition\) has type TENSOR_FLOAT32.*TENSOR_BOOL8",
    ),
    Bad(
        "select-shape",
        Op.SELECT,
        [b8((2, 3)), f32((2, 3)), f32((3,))],
        [F32_OUT],
        r"input 2 has rank 1 but input 0 has rank 2",
    ),
    Bad(
        "select-dim",
        Op.SELECT,
        [b8((2, 3)), f32((2, 4)), f32((2, 4))],
        [F32_OUT],
        r"input 1 has dimension 4 on axis 1 but input 0 has 3",
    ),
    Bad(
        "select-bool8-data",
        Op.SELECT,
        [b8(), b8(), b8()],
        [out(T.TENSOR_BOOL8)],
        r"input 1 \(input1\) has type TENSOR_BOOL8; supported",
    ),
    # --- CAST
    Bad(
        "cast-bool-to-f32",
        Op.CAST,
        [b8()],
        [F32_OUT],
        r"output 0 \(output\) has type TENSOR_FLOAT32; with TENSOR_BOOL8 supported: TENSOR_BOOL8",
    ),
    Bad(
        "cast-f32-to-s8",
        Op.CAST,
        [f32()],
        [out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=1.0)],
        r"output 0.*TENSOR_QUANT8_ASYMM_SIGNED",
    ),
    Bad(
        "cast-mismatching-shapes",
        Op.CAST,
        [i32((2, 3))],
        [out(T.TENSOR_INT32, (100,))],
        r"output 0 has dimensions \[100\] but input 0 has \[2, 3\]; CAST keeps the shape",
    ),
    Bad(
        "cast-rank",
        Op.CAST,
        [i32((2, 3))],
        [out(T.TENSOR_INT32, (0,))],
        r"output 0 has dimensions \[0\] but input 0 has \[2, 3\]",
    ),
    Bad(
        "cast-per-channel",
        Op.CAST,
        [t(T.TENSOR_QUANT8_SYMM_PER_CHANNEL)],
        [out(T.TENSOR_QUANT8_SYMM_PER_CHANNEL)],
        r"input 0 \(input\) has type TENSOR_QUANT8_SYMM_PER_CHANNEL; supported",
    ),
    # --- FULLY_CONNECTED
    Bad(
        "fc-weights-rank3",
        Op.FULLY_CONNECTED,
        [f32((2, 4)), f32((3, 4, 1)), f32((3,)), NONE],
        [F32_OUT],
        r"input 1 has rank 3; it must have rank 2",
    ),
    Bad(
        "fc-input-rank1",
        Op.FULLY_CONNECTED,
        [f32((4,)), f32((3, 4)), f32((3,)), NONE],
        [F32_OUT],
        r"input 0 has rank 1; the minimum rank is 2",
    ),
    Bad(
        "fc-bias-size",
        Op.FULLY_CONNECTED,
        [f32((2, 4)), f32((3, 4)), f32((2,)), NONE],
        [F32_OUT],
        r"input 2 \(bias\) has 2 elements but input 1 \(weights\) has 3 units",
    ),
    Bad(
        "fc-input-size",
        Op.FULLY_CONNECTED,
        [f32((2, 5)), f32((3, 4)), f32((3,)), NONE],
        [F32_OUT],
        r"input 0 has 10 elements, not a multiple of the weights' input size 4",
    ),
    Bad(
        "fc-bias-type-quant",
        Op.FULLY_CONNECTED,
        [u8(), u8((4, 3)), u8((4,)), NONE],
        [out(T.TENSOR_QUANT8_ASYMM, scale=1.0)],
        r"input 2 \(bias\) has type TENSOR_QUANT8_ASYMM; .*supported: TENSOR_INT32",
    ),
    Bad(
        "fc-bias-scale",
        Op.FULLY_CONNECTED,
        [u8(scale=0.5), u8((4, 3), scale=0.5), t(T.TENSOR_INT32, (4,), scale=0.5), NONE],
        [out(T.TENSOR_QUANT8_ASYMM, scale=1.0)],
        r"input 2 \(bias\) has scale 0.5; it must equal input scale \* weights scale \(0.25\)",
    ),
    Bad(
        "fc-activation-7",
        Op.FULLY_CONNECTED,
        [f32((2, 4)), f32((3, 4)), f32((3,)), scalar(7)],
        [F32_OUT],
        r"input 3 \(activation\) has value 7",
    ),
    Bad(
        "fc-five-inputs",
        Op.FULLY_CONNECTED,
        [f32((2, 4)), f32((3, 4)), f32((3,)), NONE, NONE],
        [F32_OUT],
        r"expected 4 inputs, got 5",
    ),
    # --- RESHAPE
    Bad(
        "reshape-shape-rank2",
        Op.RESHAPE,
        [f32((2, 3)), X(T.TENSOR_INT32, np.array([[6]], np.int32), const=True)],
        [F32_OUT],
        r"input 1 has rank 2; it must have rank 1",
    ),
    Bad(
        "reshape-two-stretch",
        Op.RESHAPE,
        [f32((2, 3)), ivec([-1, -1])],
        [F32_OUT],
        r"input 1 \(shape\): shape \[-1, -1\] has more than one -1",
    ),
    Bad(
        "reshape-count",
        Op.RESHAPE,
        [f32((2, 3)), ivec([4, 2])],
        [F32_OUT],
        r"input 1 \(shape\): shape \[4, 2\] has 8 elements but the input has 6",
    ),
    Bad(
        "reshape-not-divisible",
        Op.RESHAPE,
        [f32((2, 3)), ivec([4, -1])],
        [F32_OUT],
        r"does not divide the input's 6 elements",
    ),
    Bad(
        "reshape-negative",
        Op.RESHAPE,
        [f32((2, 3)), ivec([-3, -2])],
        [F32_OUT],
        r"negative size other than -1",
    ),
    Bad(
        "reshape-zero-and-stretch",
        Op.RESHAPE,
        [f32((2, 3)), ivec([0, -1])],
        [F32_OUT],
        r"has a -1 and a 0 size",
    ),
    Bad(
        "reshape-shape-type",
        Op.RESHAPE,
        [f32((2, 3)), f32((2,), const=True)],
        [F32_OUT],
        r"input 1 \(shape\) has type TENSOR_FLOAT32.*TENSOR_INT32",
    ),
    # --- CONCATENATION
    Bad(
        "concat-axis-range",
        Op.CONCATENATION,
        [f32((2, 3)), f32((2, 3)), scalar(2)],
        [F32_OUT],
        r"input 2 \(axis\) is 2; it must be in \[0, 2\)",
    ),
    Bad(
        "concat-axis-negative",
        Op.CONCATENATION,
        [f32((2, 3)), f32((2, 3)), scalar(-1)],
        [F32_OUT],
        r"input 2 \(axis\) is -1",
    ),
    Bad(
        "concat-rank-mismatch",
        Op.CONCATENATION,
        [f32((2, 3)), f32((2, 3, 1)), scalar(0)],
        [F32_OUT],
        r"input 1 has rank 3 but input 0 has rank 2",
    ),
    Bad(
        "concat-dim-mismatch",
        Op.CONCATENATION,
        [f32((2, 3)), f32((4, 4)), scalar(0)],
        [F32_OUT],
        r"input 1 has dimension 4 on axis 1 but input 0 has 3; only axis 0 may differ",
    ),
    Bad(
        "concat-rank5",
        Op.CONCATENATION,
        [f32((1, 1, 1, 1, 2)), f32((1, 1, 1, 1, 2)), scalar(0)],
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "concat-type-mismatch",
        Op.CONCATENATION,
        [f32(), f16(), scalar(0)],
        [F32_OUT],
        r"input 1 \(input\) has type TENSOR_FLOAT16",
    ),
    Bad(
        "concat-axis-missing",
        Op.CONCATENATION,
        [f32(), f32()],
        [F32_OUT],
        r"input 1 \(axis\) has type TENSOR_FLOAT32.*INT32",
    ),
    Bad("concat-only-axis", Op.CONCATENATION, [scalar(0)], [F32_OUT], r"at least 2 inputs, got 1"),
    Bad(
        "concat-axis-not-constant",
        Op.CONCATENATION,
        [f32(), f32(), scalar(0, const=False)],
        [F32_OUT],
        r"input 2 \(axis\) must be a constant",
    ),
    Bad(
        "concat-i32",
        Op.CONCATENATION,
        [i32(), i32(), scalar(0)],
        [out(T.TENSOR_INT32)],
        r"input 0 \(input\) has type TENSOR_INT32; supported",
    ),
    # --- SLICE
    Bad(
        "slice-begin-length",
        Op.SLICE,
        [f32((3, 4)), ivec([1]), ivec([1, 1])],
        [F32_OUT],
        r"input 1 \(begin\) has 1 elements; it needs one per input axis \(2\)",
    ),
    Bad(
        "slice-begin-range",
        Op.SLICE,
        [f32((3, 4)), ivec([4, 0]), ivec([1, 1])],
        [F32_OUT],
        r"begin\[0\] is 4; it must be in \[0, 3\]",
    ),
    Bad(
        "slice-begin-negative",
        Op.SLICE,
        [f32((3, 4)), ivec([0, -1]), ivec([1, 1])],
        [F32_OUT],
        r"begin\[1\] is -1",
    ),
    Bad(
        "slice-size-overflow",
        Op.SLICE,
        [f32((3, 4)), ivec([1, 2]), ivec([1, 3])],
        [F32_OUT],
        r"begin\[1\] \+ size\[1\] = 5 exceeds dimension 4",
    ),
    Bad(
        "slice-size-negative",
        Op.SLICE,
        [f32((3, 4)), ivec([0, 0]), ivec([-2, 1])],
        [F32_OUT],
        r"size\[0\] is -2; it must be -1 or non-negative",
    ),
    Bad(
        "slice-begin-type",
        Op.SLICE,
        [f32((3, 4)), f32((2,)), ivec([1, 1])],
        [F32_OUT],
        r"input 1 \(begin\) has type TENSOR_FLOAT32",
    ),
    Bad(
        "slice-size-rank",
        Op.SLICE,
        [f32((3, 4)), ivec([0, 0]), X(T.TENSOR_INT32, np.ones((1, 2), np.int32), const=True)],
        [F32_OUT],
        r"input 2 has rank 2; it must have rank 1",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_argument(row: Bad):
    row.check()


# ---------------------------------------------------------------------------
# Run-time failures: parameters that are model inputs are checked by the kernel
# ---------------------------------------------------------------------------

RUNTIME_BAD = [
    (
        "slice-begin",
        Op.SLICE,
        [f32((3,)), ivec([4], const=False), ivec([1], const=False)],
        r"SLICE \(subgraph 0, operation 3\): begin\[0\] is 4",
    ),
    (
        "slice-size",
        Op.SLICE,
        [f32((3,)), ivec([1], const=False), ivec([3], const=False)],
        r"begin\[0\] \+ size\[0\] = 4 exceeds dimension 3",
    ),
    (
        "slice-length",
        Op.SLICE,
        [f32((3,)), ivec([0, 0], const=False, dims=(0,)), ivec([1], const=False)],
        r"begin has 2 and size 1 elements",
    ),
    (
        "reshape-count",
        Op.RESHAPE,
        [f32((2, 3)), ivec([5], const=False)],
        r"RESHAPE .*shape \[5\] has 5 elements but the input has 6",
    ),
    (
        "reshape-stretch",
        Op.RESHAPE,
        [f32((2, 3)), ivec([-1, -1], const=False)],
        r"more than one -1",
    ),
    (
        "reshape-constant-stretch",
        Op.RESHAPE,
        [f32((2, 3), dims=(0, 0)), ivec([4, -1])],
        r"shape \[4, -1\] does not divide the input's 6 elements",
    ),
    (
        "fc-input-size",
        Op.FULLY_CONNECTED,
        [f32((2, 3), dims=(0, 0)), f32((2, 4)), f32((2,)), NONE],
        r"input 0 has 6 elements, not a multiple of input size 4",
    ),
]


@pytest.mark.parametrize("case", RUNTIME_BAD, ids=lambda c: c[0])
def test_runtime_failure(case):
    _, op, ins, pattern = case
    ctx = context(op, ins, [F32_OUT])
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(GeneralFailure) as err:
        kernel(*[x.data for x in ins if x.is_tensor])
    assert_matches(err.value.message, pattern)

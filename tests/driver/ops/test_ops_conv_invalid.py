"""Convolutions: negative rows (InvalidArgument messages at validation) and run-time
failures (GENERAL_FAILURE of shapes only known at execution)."""

from __future__ import annotations

import pytest
from conv_operands import (
    B1,
    F16,
    F32,
    FALSE,
    SAME,
    TRUE,
    U8,
    VALID,
    W1,
    WPC,
    WQ,
    X1,
    XQ,
    bias_for,
    ints,
    per_channel,
)
from nnhal.driver.ops.registry import validate_operation
from ops_harness import NONE, Bad, assert_matches, context, f16, f32, i32, ivec, out, scalar, t, u8

from nnhal.errors import GeneralFailure
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

F32_OUT = out(F32)
GOOD = [X1, W1, B1, *ints(SAME, 1, 1), NONE]

BAD_ROWS = [
    Bad("conv-too-few", Op.CONV_2D, GOOD[:6], [F32_OUT], r"expected 7 to 13 inputs, got 6"),
    Bad(
        "conv-9-inputs",
        Op.CONV_2D,
        [*GOOD, FALSE, scalar(1)],
        [F32_OUT],
        r"only one dilation factor.*input 8",
    ),
    Bad(
        "conv-8-int-inputs",
        Op.CONV_2D,
        [*GOOD, scalar(1)],
        [F32_OUT],
        r"cannot tell implicit from explicit padding: 8 inputs with input 7 of type INT32",
    ),
    Bad(
        "conv-filter-type",
        Op.CONV_2D,
        [X1, f16((4, 3, 3, 3)), B1, *GOOD[3:]],
        [F32_OUT],
        r"input 1 \(filter\) has type TENSOR_FLOAT16",
    ),
    Bad(
        "conv-bias-type-quant",
        Op.CONV_2D,
        [XQ, WQ, u8((4,)), *GOOD[3:]],
        [out(U8, scale=1.0)],
        r"input 2 \(bias\) has type TENSOR_QUANT8_ASYMM.*TENSOR_INT32",
    ),
    Bad(
        "conv-per-channel-f32",
        Op.CONV_2D,
        [X1, WPC, B1, *GOOD[3:]],
        [F32_OUT],
        r"input 1 \(filter\) has type TENSOR_QUANT8_SYMM_PER_CHANNEL",
    ),
    Bad(
        "conv-layout-int",
        Op.CONV_2D,
        [*GOOD[:3], *ints(0, 0, 0, 0, 1, 1, 0), scalar(1)],
        [F32_OUT],
        r"input 10 \(layout\) has type INT32; with TENSOR_FLOAT32 supported: BOOL",
    ),
    Bad(
        "conv-stride-bool",
        Op.CONV_2D,
        [*GOOD[:4], TRUE, *GOOD[5:]],
        [F32_OUT],
        r"input 4 \(stride_width\|padding_right\) has type BOOL; .*supported: INT32",
    ),
    Bad(
        "conv-input-rank",
        Op.CONV_2D,
        [f32((5, 6, 3)), W1, B1, *GOOD[3:]],
        [F32_OUT],
        r"input 0 has rank 3; it must have rank 4",
    ),
    Bad(
        "conv-bias-rank",
        Op.CONV_2D,
        [X1, W1, f32((4, 1)), *GOOD[3:]],
        [F32_OUT],
        r"input 2 has rank 2; it must have rank 1",
    ),
    Bad(
        "conv-channels",
        Op.CONV_2D,
        [f32((1, 5, 5, 2)), W1, B1, *GOOD[3:]],
        [F32_OUT],
        r"filter\) has 3 channels \(axis 3\); the input has 2",
    ),
    Bad(
        "conv-bias-size",
        Op.CONV_2D,
        [X1, W1, f32((3,)), *GOOD[3:]],
        [F32_OUT],
        r"input 2 \(bias\) has 3 elements; there are 4 output channels",
    ),
    Bad(
        "conv-padding-code",
        Op.CONV_2D,
        [*GOOD[:3], *ints(3, 1, 1), NONE],
        [F32_OUT],
        r"input 3 \(padding\) is 3; supported: SAME \(1\), VALID \(2\)",
    ),
    Bad(
        "conv-stride-zero",
        Op.CONV_2D,
        [*GOOD[:3], *ints(SAME, 0, 1), NONE],
        [F32_OUT],
        r"input 4 \(stride_width\) is 0; it must be >= 1",
    ),
    Bad(
        "conv-negative-pad",
        Op.CONV_2D,
        [*GOOD[:3], *ints(-1, 0, 0, 0, 1, 1), NONE],
        [F32_OUT],
        r"input 3 \(padding_left\) is -1; it must be >= 0",
    ),
    Bad(
        "conv-dilation-zero",
        Op.CONV_2D,
        [*GOOD, FALSE, *ints(1, 0)],
        [F32_OUT],
        r"input 9 \(dilation_height\) is 0",
    ),
    Bad(
        "conv-pad-exceeds-filter",
        Op.CONV_2D,
        [*GOOD[:3], *ints(3, 0, 0, 0, 1, 1), NONE],
        [F32_OUT],
        r"padding left is 3; it must be smaller than the filter width \(3\)",
    ),
    Bad(
        "conv-output-empty",
        Op.CONV_2D,
        [f32((1, 2, 2, 3)), W1, B1, *ints(VALID, 1, 1), NONE],
        [F32_OUT],
        r"output height would be 0",
    ),
    Bad(
        "conv-activation",
        Op.CONV_2D,
        [*GOOD[:6], scalar(7)],
        [F32_OUT],
        r"input 6 \(activation\) has value 7",
    ),
    Bad(
        "conv-stride-not-constant",
        Op.CONV_2D,
        [*GOOD[:4], scalar(1, const=False), *GOOD[5:]],
        [F32_OUT],
        r"input 4 \(stride_width\|padding_right\) must be a constant",
    ),
    Bad(
        "conv-bias-scale",
        Op.CONV_2D,
        [XQ, WQ, bias_for(4, 0.5), *GOOD[3:]],
        [out(U8, scale=1.0)],
        r"input 2 \(bias\) has scale 0.5; it must equal input scale \* filter scale",
    ),
    Bad(
        "conv-per-channel-dim",
        Op.CONV_2D,
        [XQ, per_channel((4, 3, 3, 3), (0.1, 0.1, 0.1), 3), i32((4,)), *GOOD[3:]],
        [out(U8, scale=1.0)],
        r"input 1 \(filter\) has channelQuant.channelDim 3; it must be 0",
    ),
    Bad(
        "conv-output-type",
        Op.CONV_2D,
        GOOD,
        [out(F16)],
        r"output 0 \(output\) has type TENSOR_FLOAT16",
    ),
    Bad(
        "depthwise-filter-axis0",
        Op.DEPTHWISE_CONV_2D,
        [X1, f32((2, 3, 3, 3)), f32((3,)), *ints(SAME, 1, 1, 1), NONE],
        [F32_OUT],
        r"has 2 on axis 0; a depthwise filter has 1",
    ),
    Bad(
        "depthwise-multiplier",
        Op.DEPTHWISE_CONV_2D,
        [X1, f32((1, 3, 3, 6)), f32((6,)), *ints(SAME, 1, 1, 3), NONE],
        [F32_OUT],
        r"6 output channels \(axis 3\); it must be input channels \(3\) \* depth_multiplier \(3\)",
    ),
    Bad(
        "depthwise-multiplier-zero",
        Op.DEPTHWISE_CONV_2D,
        [X1, f32((1, 3, 3, 3)), f32((3,)), *ints(SAME, 1, 1, 0), NONE],
        [F32_OUT],
        r"input 6 \(depth_multiplier\) is 0",
    ),
    Bad(
        "depthwise-arity",
        Op.DEPTHWISE_CONV_2D,
        [X1, f32((1, 3, 3, 3)), f32((3,)), *ints(SAME, 1, 1), NONE],
        [F32_OUT],
        r"expected 8 to 14 inputs, got 7",
    ),
    Bad(
        "depthwise-per-channel-dim",
        Op.DEPTHWISE_CONV_2D,
        [XQ, per_channel((1, 3, 3, 3), (0.1,), 0), i32((3,)), *ints(SAME, 1, 1, 1), NONE],
        [out(U8, scale=1.0)],
        r"channelQuant.channelDim 0; it must be 3",
    ),
    Bad(
        "grouped-no-layout",
        Op.GROUPED_CONV_2D,
        [X1, W1, B1, *ints(SAME, 1, 1, 1), NONE],
        [F32_OUT],
        r"expected 9 to 12 inputs, got 8",
    ),
    Bad(
        "grouped-10-inputs",
        Op.GROUPED_CONV_2D,
        [X1, W1, B1, *ints(SAME, 1, 1, 1), NONE, FALSE, scalar(1)],
        [F32_OUT],
        r"10 inputs; with implicit padding the operation takes 9",
    ),
    Bad(
        "grouped-channels",
        Op.GROUPED_CONV_2D,
        [f32((1, 5, 5, 4)), f32((4, 3, 3, 3)), f32((4,)), *ints(SAME, 1, 1, 2), NONE, FALSE],
        [F32_OUT],
        r"3 channels per group \(axis 3\); times groups \(2\) it must equal the input channels \(4\)",
    ),
    Bad(
        "grouped-out-multiple",
        Op.GROUPED_CONV_2D,
        [f32((1, 5, 5, 4)), f32((3, 3, 3, 2)), f32((3,)), *ints(SAME, 1, 1, 2), NONE, FALSE],
        [F32_OUT],
        r"3 output channels; not a multiple of groups \(2\)",
    ),
    Bad(
        "transpose-arity",
        Op.TRANSPOSE_CONV_2D,
        [X1, W1, B1, *ints(0, 0, 0, 0, 1, 1), NONE],
        [F32_OUT],
        r"expected 9 \(implicit padding\) or 11 \(explicit padding\) inputs, got 10",
    ),
    Bad(
        "transpose-output-shape-type",
        Op.TRANSPOSE_CONV_2D,
        [X1, W1, B1, scalar(1), *ints(SAME, 1, 1), NONE, FALSE],
        [F32_OUT],
        r"input 3 \(output_shape\) has type INT32; it must be TENSOR_INT32",
    ),
    Bad(
        "transpose-output-shape-size",
        Op.TRANSPOSE_CONV_2D,
        [X1, W1, B1, ivec([1, 2, 3]), *ints(SAME, 1, 1), NONE, FALSE],
        [F32_OUT],
        r"input 3 \(output_shape\) has shape \[3\]; it must be \[4\]",
    ),
    Bad(
        "transpose-negative-left",
        Op.TRANSPOSE_CONV_2D,
        [X1, W1, B1, *ints(-1, 0, 0, 0, 1, 1), NONE, FALSE],
        [F32_OUT],
        r"input 3 \(padding_left\) is -1",
    ),
    Bad(
        "transpose-channels",
        Op.TRANSPOSE_CONV_2D,
        [f32((1, 3, 3, 2)), W1, B1, *ints(0, 0, 0, 0, 1, 1), NONE, FALSE],
        [F32_OUT],
        r"3 input channels \(axis 3\); the input has 2",
    ),
    Bad(
        "transpose-empty-output",
        Op.TRANSPOSE_CONV_2D,
        [f32((1, 1, 1, 3)), W1, B1, *ints(2, 2, 0, 0, 1, 1), NONE, FALSE],
        [F32_OUT],
        r"output would be 3 x -1",
    ),
    Bad(
        "transpose-layout-type",
        Op.TRANSPOSE_CONV_2D,
        [X1, W1, B1, *ints(0, 0, 0, 0, 1, 1), NONE, scalar(0)],
        [F32_OUT],
        r"input 10 \(layout\) has type INT32; .*supported: BOOL",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid(row: Bad):
    row.check()


# ---------------------------------------------------------------------------
# Run-time failures: shapes only known at execution
# ---------------------------------------------------------------------------

RUNTIME_BAD = [
    (
        "conv-channels",
        Op.CONV_2D,
        [t(F32, (1, 4, 4, 2), dims=(1, 0, 0, 0)), W1, B1, *ints(SAME, 1, 1), NONE],
        r"CONV_2D .*filter\) has 3 channels \(axis 3\); the input has 2",
    ),
    (
        "conv-too-small",
        Op.CONV_2D,
        [t(F32, (1, 2, 2, 3), dims=(1, 0, 0, 3)), W1, B1, *ints(VALID, 1, 1), NONE],
        r"output height would be 0",
    ),
    (
        "depthwise-multiplier",
        Op.DEPTHWISE_CONV_2D,
        [
            t(F32, (1, 4, 4, 2), dims=(1, 4, 4, 0)),
            f32((1, 3, 3, 6)),
            f32((6,)),
            *ints(SAME, 1, 1, 2),
            NONE,
        ],
        r"it must be input channels \(2\) \* depth_multiplier \(2\)",
    ),
    (
        "transpose-output-shape-values",
        Op.TRANSPOSE_CONV_2D,
        [
            X1,
            W1,
            B1,
            t(T.TENSOR_INT32, (3,), data=[1, 2, 3], dims=(0,)),
            *ints(SAME, 1, 1),
            NONE,
            FALSE,
        ],
        r"input 3 \(output_shape\) has 3 values; it must have 4",
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

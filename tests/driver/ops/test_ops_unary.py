"""Tables of the math operations: ABS, EXP, LOG, SQRT, RSQRT, SIN, NEG, FLOOR
(one input) and MAXIMUM, MINIMUM, POW (two broadcasting inputs).

Positive rows compute their numpy reference in the row (on real values for
quantized operands); negative rows assert INVALID_ARGUMENT naming the
operation, the operand and the rule. See ops_harness.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.registry import lookup, validate_operation
from ops_harness import Bad, Row, context, f16, f32, i32, out, s8, scalar, t, u8

from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32_OUT = out(T.TENSOR_FLOAT32)
F16_OUT = out(T.TENSOR_FLOAT16)
I32_OUT = out(T.TENSOR_INT32)


def positive(shape=(2, 3), dtype=T.TENSOR_FLOAT32, **kw):
    """A float tensor with values in (0.1, 4] (LOG, SQRT, RSQRT need positives)."""
    from ops_harness import RNG

    data = RNG.uniform(0.1, 4, shape)
    return t(dtype, shape, data=data, **kw)


def as_f32(fn):
    """Reference computed in float32 (as the driver's reference does for float16)."""
    return lambda *a: fn(*(np.asarray(x, np.float32) for x in a))


UNARY_ROWS = [
    Row("abs-f32", Op.ABS, [f32()], F32_OUT, np.abs, V.V1_2),
    Row("abs-f16", Op.ABS, [f16((4,))], F16_OUT, np.abs, V.V1_2),
    Row("abs-i32", Op.ABS, [i32((2, 2, 2))], I32_OUT, np.abs, V.V1_3),
    Row(
        "abs-i32-min-wraps",
        Op.ABS,
        [i32(data=[[-(2**31), -5, 7]])],
        I32_OUT,
        lambda x: np.abs(x.astype(np.int32)),
        raw=True,
    ),
    Row("exp-f32", Op.EXP, [f32((1, 2, 3, 4, 2))], F32_OUT, np.exp, V.V1_2),
    Row("exp-f16", Op.EXP, [f16()], F16_OUT, as_f32(np.exp), V.V1_2),
    Row("log-f32", Op.LOG, [positive()], F32_OUT, np.log, V.V1_2),
    Row("log-f16", Op.LOG, [positive(dtype=T.TENSOR_FLOAT16)], F16_OUT, as_f32(np.log)),
    Row("sqrt-f32", Op.SQRT, [positive((5,))], F32_OUT, np.sqrt, V.V1_2),
    Row("sqrt-f16", Op.SQRT, [positive(dtype=T.TENSOR_FLOAT16)], F16_OUT, as_f32(np.sqrt)),
    Row("rsqrt-f32", Op.RSQRT, [positive()], F32_OUT, lambda x: 1 / np.sqrt(x), V.V1_2),
    Row(
        "rsqrt-f16",
        Op.RSQRT,
        [positive((3, 1), dtype=T.TENSOR_FLOAT16)],
        F16_OUT,
        as_f32(lambda x: 1 / np.sqrt(x)),
    ),
    Row("sin-f32", Op.SIN, [f32()], F32_OUT, np.sin, V.V1_2),
    Row("sin-f16", Op.SIN, [f16()], F16_OUT, as_f32(np.sin), V.V1_2),
    Row("neg-f32", Op.NEG, [f32()], F32_OUT, np.negative, V.V1_2),
    Row("neg-f16", Op.NEG, [f16()], F16_OUT, np.negative, V.V1_2),
    Row("neg-i32", Op.NEG, [i32((7,))], I32_OUT, np.negative, V.V1_2),
    Row("floor-f32", Op.FLOOR, [f32((1, 2, 2, 2))], F32_OUT, np.floor, V.V1_0),
    Row("floor-f16", Op.FLOOR, [f16()], F16_OUT, np.floor, V.V1_2),
    # Unknown output shape and rank: prepare gives the input's shape.
    Row(
        "exp-unknown-out", Op.EXP, [f32((2, 2))], out(T.TENSOR_FLOAT32, None), np.exp, shape=(2, 2)
    ),
    # Unknown input axes stay unknown.
    Row("neg-unknown-axis", Op.NEG, [f32((2, 3), dims=(0, 3))], F32_OUT, np.negative, shape=(0, 3)),
    # Zero-sized tensors.
    Row("sqrt-zero-sized", Op.SQRT, [f32((0, 3))], F32_OUT, np.sqrt, shape=(0, 3)),
    Row("abs-zero-sized", Op.ABS, [i32((3, 0))], I32_OUT, np.abs),
]

# ---------------------------------------------------------------------------
# MAXIMUM, MINIMUM, POW
# ---------------------------------------------------------------------------

BINARY_ROWS = [
    Row("max-f32", Op.MAXIMUM, [f32(), f32()], F32_OUT, np.maximum, V.V1_2),
    Row(
        "max-f32-broadcast",
        Op.MAXIMUM,
        [f32((2, 1, 3)), f32((4, 1))],
        F32_OUT,
        np.maximum,
        shape=(2, 4, 3),
    ),
    Row("min-f16-broadcast", Op.MINIMUM, [f16((3,)), f16((2, 3))], F16_OUT, np.minimum, V.V1_2),
    Row("max-i32", Op.MAXIMUM, [i32((2, 2)), i32((2,))], I32_OUT, np.maximum, V.V1_2),
    Row("min-i32", Op.MINIMUM, [i32(), i32()], I32_OUT, np.minimum, V.V1_2),
    Row(
        "max-u8-rescales",
        Op.MAXIMUM,
        [u8(scale=0.5, zp=127), u8(scale=1.0, zp=100)],
        out(T.TENSOR_QUANT8_ASYMM, scale=2.0, zp=80),
        np.maximum,
        V.V1_2,
    ),
    Row(
        "min-u8-same-quant",
        Op.MINIMUM,
        [u8((2, 1, 3), scale=0.1, zp=3), u8((1, 4, 1), scale=0.1, zp=3)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.1, zp=3),
        np.minimum,
        shape=(2, 4, 3),
    ),
    Row(
        "max-s8-broadcast",
        Op.MAXIMUM,
        [s8((2, 3), scale=0.25, zp=-10), s8((3,), scale=0.5, zp=4)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.3, zp=-1),
        np.maximum,
        V.V1_3,
    ),
    Row(
        "min-s8",
        Op.MINIMUM,
        [s8(scale=0.2, zp=0), s8(scale=0.2, zp=5)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.05, zp=-128),
        np.minimum,
        V.V1_3,
    ),
    Row("max-zero-sized", Op.MAXIMUM, [f32((0, 3)), f32((1, 3))], F32_OUT, np.maximum),
    Row("pow-f32", Op.POW, [positive(), f32()], F32_OUT, np.power, V.V1_2),
    Row(
        "pow-f32-broadcast",
        Op.POW,
        [positive((2, 1, 2)), f32((3, 1), data=[[2], [0.5], [-1]])],
        F32_OUT,
        np.power,
        shape=(2, 3, 2),
    ),
    Row(
        "pow-f16",
        Op.POW,
        [positive((4,), dtype=T.TENSOR_FLOAT16), f16((1,), data=[3])],
        F16_OUT,
        as_f32(np.power),
        V.V1_2,
    ),
]


@pytest.mark.parametrize("row", UNARY_ROWS + BINARY_ROWS, ids=lambda r: r.id)
def test_math_ops(row: Row):
    row.check()


def test_max_min_quant8_requantize_like_the_reference():
    """0.5 * (129 - 127) = 1.0 against -1.0 on scale 2, zero point 80: 80.5 rounds away to 81."""
    from ops_harness import run

    a = u8((1,), scale=0.5, zp=127, data=[129])
    b = u8((1,), scale=1.0, zp=100, data=[99])
    o = out(T.TENSOR_QUANT8_ASYMM, scale=2.0, zp=80)
    assert run(Op.MAXIMUM, [a, b], [o])[2].tolist() == [81]
    assert run(Op.MINIMUM, [a, b], [o])[2].tolist() == [80]  # -0.5 + 80 = 79.5 -> 80


def test_float32_kernels_are_the_ufuncs():
    """No wrapper on the hot path for the common float32 case."""
    for op, fn in [(Op.EXP, np.exp), (Op.ABS, np.abs), (Op.MAXIMUM, np.maximum)]:
        ins = [f32()] * (2 if op == Op.MAXIMUM else 1)
        ctx = context(op, ins, [F32_OUT])
        validate_operation(ctx)
        assert lookup(op).execute(ctx) is fn


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

BAD_ROWS = [
    Bad("exp-two-inputs", Op.EXP, [f32(), f32()], [F32_OUT], r"expected 1 inputs, got 2"),
    Bad("log-two-outputs", Op.LOG, [f32()], [F32_OUT, F32_OUT], r"expected 1 outputs, got 2"),
    Bad(
        "sqrt-int32",
        Op.SQRT,
        [i32()],
        [I32_OUT],
        r"input 0 \(input\) has type TENSOR_INT32; supported: TENSOR_FLOAT32 \(1\.2\), "
        r"TENSOR_FLOAT16 \(1\.2\)",
    ),
    Bad("rsqrt-quant8", Op.RSQRT, [u8()], [out(T.TENSOR_QUANT8_ASYMM)], r"input 0 \(input\)"),
    Bad("sin-output-type", Op.SIN, [f32()], [F16_OUT], r"output 0 \(output\) has type TENSOR_F"),
    Bad("abs-quant8", Op.ABS, [s8()], [out(T.TENSOR_QUANT8_ASYMM_SIGNED)], r"supported: .*INT32"),
    Bad("neg-bool", Op.NEG, [t(T.TENSOR_BOOL8)], [out(T.TENSOR_BOOL8)], r"TENSOR_BOOL8"),
    Bad("neg-output-i32", Op.NEG, [f32()], [I32_OUT], r"output 0 \(output\) has type TENSOR_INT32"),
    Bad(
        "floor-rank5",
        Op.FLOOR,
        [f32((1, 1, 1, 2, 3))],
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad("floor-int32", Op.FLOOR, [i32()], [I32_OUT], r"input 0 \(input\) has type TENSOR_INT32"),
    Bad("exp-scalar", Op.EXP, [scalar(1.0, T.FLOAT32)], [F32_OUT], r"input 0 \(input\) has type"),
    Bad("max-one-input", Op.MAXIMUM, [f32()], [F32_OUT], r"expected 2 inputs, got 1"),
    Bad(
        "max-three-inputs",
        Op.MAXIMUM,
        [f32(), f32(), f32()],
        [F32_OUT],
        r"expected 2 inputs, got 3",
    ),
    Bad(
        "min-mixed-types",
        Op.MINIMUM,
        [f32(), f16()],
        [F32_OUT],
        r"input 1 \(input1\) has type TENSOR_FLOAT16; with TENSOR_FLOAT32 supported: "
        r"TENSOR_FLOAT32",
    ),
    Bad(
        "max-output-type",
        Op.MAXIMUM,
        [u8(), u8()],
        [out(T.TENSOR_QUANT8_ASYMM_SIGNED)],
        r"output 0 \(output\) has type TENSOR_QUANT8_ASYMM_SIGNED",
    ),
    Bad("min-bool", Op.MINIMUM, [t(T.TENSOR_BOOL8)] * 2, [out(T.TENSOR_BOOL8)], r"input 0"),
    Bad(
        "max-broadcast-mismatch",
        Op.MAXIMUM,
        [f32((2, 3)), f32((4,))],
        [F32_OUT],
        r"cannot be broadcast.*3 in input 0 and 4 in input 1",
    ),
    Bad(
        "pow-int32",
        Op.POW,
        [i32(), i32()],
        [I32_OUT],
        r"input 0 \(base\) has type TENSOR_INT32; supported: TENSOR_FLOAT32 \(1\.2\)",
    ),
    Bad(
        "pow-exponent-type",
        Op.POW,
        [f32(), i32()],
        [F32_OUT],
        r"input 1 \(exponent\) has type TENSOR_INT32",
    ),
    Bad(
        "pow-broadcast-mismatch",
        Op.POW,
        [f32((2, 2)), f32((3, 2))],
        [F32_OUT],
        r"axis 0 of the broadcast shape is 2 in input 0 and 3 in input 1",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_math_ops(row: Bad):
    row.check()

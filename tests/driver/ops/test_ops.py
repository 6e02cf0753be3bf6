"""Operation tables: one row per case, each with its numpy reference.

See ops_harness.py for how a row runs. Negative rows are in test_ops_invalid.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from nnhal.driver.ops import quant
from nnhal.driver.ops._operand_rules import fuse_float_activation
from ops_harness import (
    NONE,
    QUANT,
    RNG,
    Row,
    act,
    b8,
    context,
    f16,
    f32,
    i32,
    ivec,
    out,
    relu,
    relu1,
    relu6,
    s8,
    scalar,
    t,
    u8,
)

from nnhal.types import FusedActivationFunc as Act
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

# ---------------------------------------------------------------------------
# ADD, SUB, MUL, DIV
# ---------------------------------------------------------------------------

ARITH_ROWS = [
    Row("add-f32", Op.ADD, [f32(), f32(), NONE], out(T.TENSOR_FLOAT32), np.add, V.V1_0),
    Row(
        "add-f32-broadcast-relu",
        Op.ADD,
        [f32((2, 1, 3)), f32((4, 1)), act(Act.RELU)],
        out(T.TENSOR_FLOAT32),
        lambda a, b: relu(a + b),
        shape=(2, 4, 3),
    ),
    Row(
        "add-f16-relu6",
        Op.ADD,
        [f16(), f16((3,)), act(Act.RELU6)],
        out(T.TENSOR_FLOAT16),
        lambda a, b: relu6(a.astype(np.float32) + b),
        V.V1_2,
    ),
    Row(
        "add-u8-scales-relu1",
        Op.ADD,
        [u8(scale=0.02, zp=120), u8(scale=0.03, zp=100), act(Act.RELU1)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.01, zp=128),
        lambda a, b: relu1(a + b),
        V.V1_0,
    ),
    Row(
        "add-s8-broadcast",
        Op.ADD,
        [s8((1, 2, 2, 3), scale=0.1, zp=-5), s8((3,), scale=0.2, zp=3), NONE],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.25, zp=-2),
        np.add,
        V.V1_3,
    ),
    Row("add-i32", Op.ADD, [i32(), i32(), NONE], out(T.TENSOR_INT32), np.add, V.V1_3),
    Row(
        "add-zero-sized",
        Op.ADD,
        [f32((0, 3)), f32((1, 3)), NONE],
        out(T.TENSOR_FLOAT32),
        np.add,
    ),
    Row(
        "add-unknown-dims",
        Op.ADD,
        [f32((2, 3), dims=(0, 3)), f32((2, 1), dims=None), NONE],
        out(T.TENSOR_FLOAT32),
        np.add,
    ),
    Row(
        "sub-f32-relu",
        Op.SUB,
        [f32(), f32(), act(Act.RELU)],
        out(T.TENSOR_FLOAT32),
        lambda a, b: relu(a - b),
        V.V1_1,
    ),
    Row("sub-f16", Op.SUB, [f16(), f16(), NONE], out(T.TENSOR_FLOAT16), np.subtract, V.V1_2),
    Row(
        "sub-u8",
        Op.SUB,
        [u8(scale=0.05, zp=10), u8((3,), scale=0.1, zp=200), NONE],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.2, zp=127),
        np.subtract,
        V.V1_2,
    ),
    Row(
        "sub-s8-relu6",
        Op.SUB,
        [s8(scale=0.05), s8(scale=0.07, zp=-20), act(Act.RELU6)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.05, zp=-128),
        lambda a, b: relu6(a - b),
        V.V1_3,
    ),
    Row("sub-i32", Op.SUB, [i32(), i32((3,)), NONE], out(T.TENSOR_INT32), np.subtract, V.V1_3),
    Row(
        "mul-f32-relu6",
        Op.MUL,
        [f32(), f32((1, 3)), act(Act.RELU6)],
        out(T.TENSOR_FLOAT32),
        lambda a, b: relu6(a * b),
        V.V1_0,
    ),
    Row("mul-f16", Op.MUL, [f16(), f16(), NONE], out(T.TENSOR_FLOAT16), np.multiply, V.V1_2),
    Row(
        "mul-u8",
        Op.MUL,
        [u8(scale=0.05, zp=128), u8(scale=0.04, zp=120), act(Act.RELU)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.1, zp=0),
        lambda a, b: relu(a * b),
        V.V1_0,
    ),
    Row(
        "mul-s8",
        Op.MUL,
        [s8(scale=0.05), s8((3,), scale=0.04, zp=7), NONE],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.03, zp=1),
        np.multiply,
        V.V1_3,
    ),
    Row("mul-i32", Op.MUL, [i32(), i32(), NONE], out(T.TENSOR_INT32), np.multiply, V.V1_3),
    Row("div-f32", Op.DIV, [f32(), f32(), NONE], out(T.TENSOR_FLOAT32), np.divide, V.V1_1),
    Row(
        "div-f16-relu1",
        Op.DIV,
        [f16(), f16(data=[[2.0, -4.0, 0.5]], shape=None), act(Act.RELU1)],
        out(T.TENSOR_FLOAT16),
        lambda a, b: relu1(a.astype(np.float32) / b),
        V.V1_2,
    ),
    Row(
        "div-i32-floor",
        Op.DIV,
        [i32(data=[[7, -7, 7, -7, 0, 9]], shape=None), i32(data=[2, 2, -2, -2, 3, 3]), NONE],
        out(T.TENSOR_INT32),
        lambda a, b: np.array([[3, -4, -4, 3, 0, 3]]),  # floor division, not truncation
        V.V1_3,
    ),
]


# ---------------------------------------------------------------------------
# Comparisons, logical ops, SELECT
# ---------------------------------------------------------------------------

COMPARISONS = {
    Op.LESS: np.less,
    Op.LESS_EQUAL: np.less_equal,
    Op.GREATER: np.greater,
    Op.GREATER_EQUAL: np.greater_equal,
    Op.EQUAL: np.equal,
    Op.NOT_EQUAL: np.not_equal,
}


def _small_ints(type_, shape, **kw):
    # Few distinct values so that EQUAL/NOT_EQUAL see both outcomes.
    return t(type_, shape, data=RNG.integers(0, 3, shape), **kw)


COMPARE_ROWS = []
for _op, _fn in COMPARISONS.items():
    COMPARE_ROWS += [
        Row(
            f"{_op.name.lower()}-f32-broadcast",
            _op,
            [f32((2, 1, 3), data=RNG.integers(-1, 2, (2, 1, 3))), f32((2, 1), data=[[0], [1]])],
            out(T.TENSOR_BOOL8),
            _fn,
            V.V1_2,
        ),
        Row(f"{_op.name.lower()}-f16", _op, [f16(), f16()], out(T.TENSOR_BOOL8), _fn, V.V1_2),
        Row(
            f"{_op.name.lower()}-i32",
            _op,
            [_small_ints(T.TENSOR_INT32, (4,)), _small_ints(T.TENSOR_INT32, (4,))],
            out(T.TENSOR_BOOL8),
            _fn,
        ),
        Row(f"{_op.name.lower()}-bool8", _op, [b8(), b8((3,))], out(T.TENSOR_BOOL8), _fn),
        Row(
            # Real values compared: 2 * 0.5 == 1 * 1.0 although the integers differ.
            f"{_op.name.lower()}-u8-scales",
            _op,
            [
                _small_ints(T.TENSOR_QUANT8_ASYMM, (6,), scale=0.5, zp=0),
                _small_ints(T.TENSOR_QUANT8_ASYMM, (6,), scale=1.0, zp=0),
            ],
            out(T.TENSOR_BOOL8),
            _fn,
            V.V1_2,
        ),
        Row(
            f"{_op.name.lower()}-s8",
            _op,
            [s8((2, 3), scale=0.5, zp=-3), s8((3,), scale=0.25, zp=4)],
            out(T.TENSOR_BOOL8),
            _fn,
            V.V1_3,
        ),
    ]

LOGICAL_ROWS = [
    Row(
        "logical_and",
        Op.LOGICAL_AND,
        [b8((2, 3)), b8((3,))],
        out(T.TENSOR_BOOL8),
        np.logical_and,
        V.V1_2,
    ),
    Row("logical_or", Op.LOGICAL_OR, [b8((4, 1)), b8((1, 5))], out(T.TENSOR_BOOL8), np.logical_or),
    Row("logical_not", Op.LOGICAL_NOT, [b8((3, 2))], out(T.TENSOR_BOOL8), np.logical_not, V.V1_2),
]

SELECT_ROWS = [
    Row("select-f32", Op.SELECT, [b8(), f32(), f32()], out(T.TENSOR_FLOAT32), np.where, V.V1_2),
    Row("select-f16", Op.SELECT, [b8(), f16(), f16()], out(T.TENSOR_FLOAT16), np.where),
    Row("select-i32", Op.SELECT, [b8(), i32(), i32()], out(T.TENSOR_INT32), np.where),
    Row(
        "select-u8-requantized",
        Op.SELECT,
        [b8(), u8(scale=0.1, zp=100), u8(scale=0.05, zp=50)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.2, zp=128),
        np.where,
        V.V1_2,
    ),
    Row(
        "select-s8-same-params",
        Op.SELECT,
        [b8((5,)), s8((5,)), s8((5,))],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zp=0),
        np.where,
        V.V1_3,
    ),
]


def test_float_activation_none_binds_the_ufunc_itself():
    # Hot path: with NONE the kernel is the numpy ufunc, no wrapper.
    assert fuse_float_activation(np.add, Act.NONE) is np.add
    ctx = context(Op.ADD, [f32(), f32(), NONE], [out(T.TENSOR_FLOAT32)])
    assert ctx.op.kernel(ctx) is np.add


@pytest.mark.parametrize(
    "row", ARITH_ROWS + COMPARE_ROWS + LOGICAL_ROWS + SELECT_ROWS, ids=lambda r: r.id
)
def test_elementwise(row: Row):
    row.check()


# ---------------------------------------------------------------------------
# CAST
# ---------------------------------------------------------------------------

CONVERTIBLE = [T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM]
CAST_SOURCE = {
    T.TENSOR_FLOAT16: [[-3.7, 0.2, 254.9], [300.0, -0.9, 7.5]],
    T.TENSOR_FLOAT32: [[-3.7, 0.2, 254.9], [300.0, -0.9, 7.5]],
    T.TENSOR_INT32: [[-3, 0, 255], [300, -1, 7]],
    T.TENSOR_QUANT8_ASYMM: [[0, 3, 255], [128, 1, 7]],
}


def _cast_ref(to: T) -> Callable[[np.ndarray], np.ndarray]:
    def ref(x: np.ndarray) -> np.ndarray:
        if to == T.TENSOR_QUANT8_ASYMM:  # clamp, then truncate toward zero
            return np.trunc(np.clip(x.astype(np.float64), 0, 255))
        if to == T.TENSOR_INT32:
            return np.trunc(x.astype(np.float64))
        return x

    return ref


CAST_ROWS = [
    Row(
        f"cast-{src.name}-to-{dst.name}",
        Op.CAST,
        [t(src, data=CAST_SOURCE[src], scale=0.5 if src in QUANT else 0.0)],
        out(dst, (2, 3), scale=0.25 if dst in QUANT else 0.0, zp=3 if dst in QUANT else 0),
        _cast_ref(dst),
        V.V1_2,
        raw=True,  # quantized data casts as raw integers
    )
    for src in CONVERTIBLE
    for dst in CONVERTIBLE
] + [
    Row(
        f"cast-identity-{ty.name}",
        Op.CAST,
        [t(ty, (4,), scale=0.0 if ty == T.TENSOR_BOOL8 else 0.5)],
        out(ty, None, scale=0.0 if ty == T.TENSOR_BOOL8 else 0.5),
        lambda x: x,
        V.V1_3,
        raw=True,
    )
    for ty in (
        T.TENSOR_BOOL8,
        T.TENSOR_QUANT16_ASYMM,
        T.TENSOR_QUANT16_SYMM,
        T.TENSOR_QUANT8_ASYMM_SIGNED,
        T.TENSOR_QUANT8_SYMM,
    )
]
CAST_ROWS.append(
    Row(
        "cast-output-axis-unknown",
        Op.CAST,
        [f32((2, 3), dims=(2, 0))],
        out(T.TENSOR_INT32, (0, 3)),
        np.trunc,
        shape=(2, 3),
    )
)


# ---------------------------------------------------------------------------
# FULLY_CONNECTED
# ---------------------------------------------------------------------------


def _fc_ref(activation=lambda v: v):
    def ref(x, w, b):
        return activation(x.reshape(-1, w.shape[1]).astype(np.float64) @ w.T.astype(np.float64) + b)

    return ref


def _bias(type_, units, scale):
    if type_ in QUANT:
        return t(T.TENSOR_INT32, (units,), scale=scale, data=RNG.integers(-300, 300, units))
    return t(type_, (units,))


FC_ROWS = [
    Row(
        "fc-f32-const-weights",
        Op.FULLY_CONNECTED,
        [f32((3, 4)), f32((5, 4), const=True), f32((5,), const=True), NONE],
        out(T.TENSOR_FLOAT32),
        _fc_ref(),
        V.V1_0,
        shape=(3, 5),
    ),
    Row(
        "fc-f32-rank4-input-relu",
        Op.FULLY_CONNECTED,
        [f32((2, 2, 1, 6)), f32((3, 4)), f32((3,)), act(Act.RELU)],
        out(T.TENSOR_FLOAT32, (0, 3)),
        _fc_ref(relu),
        shape=(6, 3),
    ),
    Row(
        "fc-f16-relu1",
        Op.FULLY_CONNECTED,
        [f16((2, 3)), f16((4, 3), const=True), f16((4,)), act(Act.RELU1)],
        out(T.TENSOR_FLOAT16),
        _fc_ref(relu1),
        V.V1_2,
    ),
    Row(
        "fc-u8-const",
        Op.FULLY_CONNECTED,
        [
            u8((2, 5), scale=0.05, zp=120),
            u8((3, 5), scale=0.02, zp=130, const=True),
            _bias(T.TENSOR_QUANT8_ASYMM, 3, 0.05 * 0.02),
            NONE,
        ],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.1, zp=128),
        _fc_ref(),
        V.V1_0,
    ),
    Row(
        # outputScale <= inputScale * weightsScale is only allowed since HAL 1.2
        "fc-u8-small-output-scale-relu6",
        Op.FULLY_CONNECTED,
        [
            u8((2, 2), scale=0.5, zp=128, data=[[130, 126], [128, 140]]),
            u8((2, 2), scale=0.5, zp=128, data=[[129, 127], [131, 128]]),
            _bias(T.TENSOR_QUANT8_ASYMM, 2, 0.25),
            act(Act.RELU6),
        ],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.1, zp=0),
        _fc_ref(relu6),
        V.V1_2,
    ),
    Row(
        "fc-s8-runtime-weights",
        Op.FULLY_CONNECTED,
        [
            s8((4, 6), scale=0.04, zp=-10),
            s8((2, 6), scale=0.03, zp=5),
            _bias(T.TENSOR_QUANT8_ASYMM_SIGNED, 2, 0.04 * 0.03),
            NONE,
        ],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.08, zp=-3),
        _fc_ref(),
        V.V1_3,
    ),
]


# ---------------------------------------------------------------------------
# RESHAPE, CONCATENATION, SLICE
# ---------------------------------------------------------------------------

SHAPE_ROWS = [
    Row(
        "reshape-f32-stretch",
        Op.RESHAPE,
        [f32((2, 3, 4)), ivec([4, -1])],
        out(T.TENSOR_FLOAT32),
        lambda x, s: x.reshape(4, 6),
        V.V1_0,
        shape=(4, 6),
    ),
    Row(
        "reshape-f16-runtime-shape",
        Op.RESHAPE,
        [f16((6,)), ivec([3, 2], const=False)],
        out(T.TENSOR_FLOAT16),
        lambda x, s: x.reshape(3, 2),
        V.V1_2,
        shape=(0, 0),
    ),
    Row(
        "reshape-u8-flatten",
        Op.RESHAPE,
        [u8((2, 2)), ivec([-1])],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        lambda x, s: x.reshape(-1),
        V.V1_0,
        raw=True,
    ),
    Row(
        "reshape-s8-unknown-input",
        Op.RESHAPE,
        [s8((2, 3), dims=(0, 3)), ivec([3, -1])],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        lambda x, s: x.reshape(3, 2),
        V.V1_3,
        raw=True,
        shape=(3, 0),
    ),
    Row(
        "concat-f32-axis1-three",
        Op.CONCATENATION,
        [f32((2, 1)), f32((2, 3)), f32((2, 2)), scalar(1)],
        out(T.TENSOR_FLOAT32),
        lambda *xs: np.concatenate(xs, axis=1),
        V.V1_0,
        shape=(2, 6),
    ),
    Row(
        "concat-f16-single-input",
        Op.CONCATENATION,
        [f16((3, 2)), scalar(0)],
        out(T.TENSOR_FLOAT16),
        lambda x: x,
        V.V1_2,
    ),
    Row(
        "concat-u8-same-params",
        Op.CONCATENATION,
        [u8((1, 2)), u8((3, 2)), scalar(0)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        lambda *xs: np.concatenate(xs, axis=0),
        V.V1_0,
    ),
    Row(
        # different input/output quantization needs HAL 1.2
        "concat-u8-rescaled",
        Op.CONCATENATION,
        [u8((2, 2), scale=0.1, zp=100), u8((2, 3), scale=0.3, zp=20), scalar(1)],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.2, zp=128),
        lambda *xs: np.concatenate(xs, axis=1),
        V.V1_2,
    ),
    Row(
        "concat-s8-rescaled-rank4",
        Op.CONCATENATION,
        [s8((1, 2, 2, 1), scale=0.1, zp=-100), s8((1, 2, 2, 2), scale=0.3, zp=20), scalar(3)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.2, zp=-1),
        lambda *xs: np.concatenate(xs, axis=3),
        V.V1_3,
    ),
    Row(
        "concat-zero-sized",
        Op.CONCATENATION,
        [f32((0, 2)), f32((3, 2)), scalar(0)],
        out(T.TENSOR_FLOAT32),
        lambda *xs: np.concatenate(xs, axis=0),
    ),
    Row(
        "slice-f32-const",
        Op.SLICE,
        [f32((3, 4)), ivec([1, 0]), ivec([2, -1])],
        out(T.TENSOR_FLOAT32),
        lambda x, b, s: x[1:3, 0:4],
        V.V1_2,
        shape=(2, 4),
    ),
    Row(
        "slice-i32-runtime",
        Op.SLICE,
        [i32((2, 3, 4)), ivec([0, 1, 1], const=False), ivec([2, 2, -1], const=False)],
        out(T.TENSOR_INT32),
        lambda x, b, s: x[0:2, 1:3, 1:4],
        V.V1_2,
    ),
    Row(
        "slice-f16-empty",
        Op.SLICE,
        [f16((3,)), ivec([3]), ivec([0])],
        out(T.TENSOR_FLOAT16),
        lambda x, b, s: x[3:3],
    ),
    Row(
        "slice-u8",
        Op.SLICE,
        [u8((4, 2)), ivec([2, 1]), ivec([2, 1])],
        out(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        lambda x, b, s: x[2:4, 1:2],
        V.V1_2,
        raw=True,
    ),
    Row(
        "slice-s8-runtime",
        Op.SLICE,
        [s8((5,)), ivec([1], const=False), ivec([-1], const=False)],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5),
        lambda x, b, s: x[1:],
        V.V1_3,
        raw=True,
    ),
]


@pytest.mark.parametrize("row", CAST_ROWS + FC_ROWS + SHAPE_ROWS, ids=lambda r: r.id)
def test_data_movement_and_fc(row: Row):
    row.check()


def test_slice_with_a_run_time_begin_and_a_constant_size():
    """begin only known at run time (a loop index), size constant: the per-axis range
    check, with the rule's own message when begin is out of range."""
    from nnhal.driver.ops.registry import validate_operation

    from nnhal.errors import GeneralFailure

    ctx = context(
        Op.SLICE, [f32((4, 3)), ivec([0, 0], const=False), ivec([2, 3])], [out(T.TENSOR_FLOAT32)]
    )
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    size = np.array([2, 3], np.int32)
    for start in range(3):
        got = kernel(x, np.array([start, 0], np.int32), size)
        np.testing.assert_array_equal(got, x[start : start + 2])
        assert not np.shares_memory(got, x)
    cases = [
        ([3, 0], r"begin\[0\] \+ size\[0\] = 5 exceeds dimension 4"),
        ([-1, 0], r"begin\[0\] is -1; it must be in \[0, 4\]"),
        ([0, 1], r"begin\[1\] \+ size\[1\] = 4 exceeds dimension 3"),
        ([0], r"begin has 1 and size 2 elements"),
    ]
    for begin, match in cases:
        with pytest.raises(GeneralFailure, match=match):
            kernel(x, np.array(begin, np.int32), size)


# ---------------------------------------------------------------------------
# quant.py: the fixed-point steps against exact rational arithmetic
# ---------------------------------------------------------------------------


def test_quantize_multiplier():
    assert quant.quantize_multiplier(0.0) == (0, 0)
    assert quant.quantize_multiplier(0.5) == (1 << 30, 0)
    assert quant.quantize_multiplier(1.0) == (1 << 30, 1)
    assert quant.quantize_multiplier(1e-12) == (0, 0)  # flushed, as the reference does
    # q * 2**31 rounding up to 2**31 carries into the exponent
    assert quant.quantize_multiplier(1 - 2**-40) == (1 << 30, 1)
    for real in RNG.uniform(1e-6, 8.0, 200):
        m, e = quant.quantize_multiplier(float(real))
        assert 1 << 30 <= m < 1 << 31
        assert abs(Fraction(m) * Fraction(2) ** (e - 31) - Fraction(float(real))) <= Fraction(
            2
        ) ** (e - 32)


def test_saturating_rounding_doubling_high_mul_rounds_half_up():
    a = RNG.integers(-(2**31) + 1, 2**31, 500, dtype=np.int64)
    a[:4] = [0, 1 << 30, -(1 << 30), 12345]
    b = int(RNG.integers(1 << 30, 1 << 31))
    got = quant.saturating_rounding_doubling_high_mul(a, b)
    want = [math.floor(Fraction(int(x) * b, 2**31) + Fraction(1, 2)) for x in a]
    assert got.tolist() == want


@pytest.mark.parametrize("exponent", [0, 1, 5, 20])
def test_rounding_divide_by_pot_rounds_half_away_from_zero(exponent):
    x = np.arange(-200, 201, dtype=np.int64) * 37
    got = quant.rounding_divide_by_pot(x, exponent)
    want = [quant.round_half_away(v / 2**exponent) for v in x.tolist()]
    assert got.tolist() == want


def test_multiply_by_quantized_multiplier_approximates_the_real_product():
    x = RNG.integers(-100000, 100000, 300, dtype=np.int64)
    for real in (0.0003, 0.7, 1.5, 37.25):
        m, e = quant.quantize_multiplier(real)
        got = quant.multiply_by_quantized_multiplier(x, m, e)
        assert np.all(np.abs(got - x * real) <= 1 + abs(real) * 1e-6 * np.abs(x))


def test_activation_ranges_are_quantized_bounds():
    u8_ = np.dtype(np.uint8)
    i8_ = np.dtype(np.int8)
    assert quant.activation_range(Act.NONE, 0.1, 10, u8_) == (0, 255)
    assert quant.activation_range(Act.RELU, 0.1, 10, u8_) == (10, 255)
    assert quant.activation_range(Act.RELU6, 0.1, 10, u8_) == (10, 70)
    assert quant.activation_range(Act.RELU1, 0.5, -1, i8_) == (-3, 1)
    assert quant.activation_range(Act.RELU6, 0.01, -128, i8_) == (-128, 127)


def test_identity_requantization_is_skipped():
    assert quant.requantize_table(np.dtype(np.int8), 0.5, 3, 0.5, 3) is None
    assert quant.rescale_table(np.dtype(np.uint8), 0.5, 3, 0.5, 3) is None
    table = quant.requantize_table(np.dtype(np.uint8), 1.0, 0, 2.0, 0)
    assert table[[0, 1, 3, 255]].tolist() == [0, 1, 2, 128]  # 0.5 and 1.5 round away from 0

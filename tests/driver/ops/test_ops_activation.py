"""Tables of the activations: RELU, RELU1, RELU6, LOGISTIC, TANH, ELU, HARD_SWISH,
PRELU, and the gemmlowp fixed-point helpers behind the quantized kernels.

References work on real values (quantized inputs dequantized, the real result
quantized with the output's scale and zero point), so they do not share the
fixed-point arithmetic under test; quantized results may differ by one unit,
as the vectors' tolerance allows. See ops_harness.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops import _act_util as fx
from nnhal.driver.ops.registry import ValueNotConstant
from ops_harness import (
    RNG,
    Bad,
    Row,
    f16,
    f32,
    i32,
    out,
    relu,
    relu1,
    relu6,
    run,
    s8,
    scalar,
    t,
    u8,
)

from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32_OUT = out(T.TENSOR_FLOAT32)
F16_OUT = out(T.TENSOR_FLOAT16)
U8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
LOGISTIC_U8 = out(U8, scale=1 / 256, zp=0)
LOGISTIC_S8 = out(S8, scale=1 / 256, zp=-128)
TANH_U8 = out(U8, scale=1 / 128, zp=128)
TANH_S8 = out(S8, scale=1 / 128, zp=0)


def sigmoid(x):
    return 1 / (1 + np.exp(-np.asarray(x, np.float64)))


def elu(alpha):
    return lambda x: np.where(x > 0, x, alpha * np.expm1(np.asarray(x, np.float64)))


def hard_swish(x):
    return x * np.clip(x + 3, 0, 6) / 6


def prelu(x, a):
    return np.where(x >= 0, x, x * a)


def wide(type_, shape=(4, 64), **kw):
    """A quantized tensor holding every 8-bit value (the whole table is exercised)."""
    info = np.iinfo(np.uint8 if type_ == U8 else np.int8)
    data = np.resize(np.arange(info.min, info.max + 1), shape)
    return t(type_, shape, data=data, **kw)


RELU_ROWS = [
    Row("relu-f32", Op.RELU, [f32()], F32_OUT, relu, V.V1_0),
    Row("relu-f16", Op.RELU, [f16((1, 2, 2, 2))], F16_OUT, relu, V.V1_2),
    Row("relu1-f32", Op.RELU1, [f32((4,))], F32_OUT, relu1, V.V1_0),
    Row("relu6-f32", Op.RELU6, [f32((2, 2), data=[[-1, 7], [3.5, 6]])], F32_OUT, relu6),
    Row("relu6-f16", Op.RELU6, [f16()], F16_OUT, relu6, V.V1_2),
    Row(
        "relu-u8",
        Op.RELU,
        [wide(U8, scale=0.1, zp=100)],
        out(U8, scale=0.1, zp=100),
        relu,
        V.V1_0,
    ),
    Row(
        "relu1-u8",
        Op.RELU1,
        [wide(U8, scale=0.01, zp=128)],
        out(U8, scale=0.01, zp=128),
        relu1,
        V.V1_0,
    ),
    Row(
        "relu6-s8",
        Op.RELU6,
        [wide(S8, scale=0.05, zp=-20)],
        out(S8, scale=0.05, zp=-20),
        relu6,
        V.V1_3,
    ),
    Row(
        "relu1-s8",
        Op.RELU1,
        [wide(S8, (2, 128), scale=0.02, zp=5)],
        out(S8, scale=0.02, zp=5),
        relu1,
        V.V1_3,
    ),
    Row("relu-zero-sized", Op.RELU, [f32((0, 2))], F32_OUT, relu, shape=(0, 2)),
    Row("relu-unknown-rank-out", Op.RELU6, [f32()], out(T.TENSOR_FLOAT32, None), relu6),
]

SIGMOID_ROWS = [
    Row("logistic-f32", Op.LOGISTIC, [f32((2, 5))], F32_OUT, sigmoid, V.V1_0),
    Row("logistic-f16", Op.LOGISTIC, [f16()], F16_OUT, sigmoid, V.V1_2),
    Row(
        "logistic-f32-saturates",
        Op.LOGISTIC,
        [f32((4,), data=[-100, 100, 0, 1e-3])],
        F32_OUT,
        sigmoid,
    ),
    Row("logistic-u8", Op.LOGISTIC, [wide(U8, scale=0.1, zp=128)], LOGISTIC_U8, sigmoid, V.V1_0),
    Row("logistic-u8-coarse", Op.LOGISTIC, [wide(U8, scale=0.5, zp=10)], LOGISTIC_U8, sigmoid),
    Row("logistic-s8", Op.LOGISTIC, [wide(S8, scale=0.03, zp=-3)], LOGISTIC_S8, sigmoid, V.V1_3),
    Row("tanh-f32", Op.TANH, [f32((1, 1, 2, 3))], F32_OUT, np.tanh, V.V1_0),
    Row("tanh-f16", Op.TANH, [f16()], F16_OUT, np.tanh, V.V1_2),
    Row("tanh-u8", Op.TANH, [wide(U8, scale=0.05, zp=128)], TANH_U8, np.tanh, V.V1_2),
    Row("tanh-u8-fine", Op.TANH, [wide(U8, scale=0.004, zp=0)], TANH_U8, np.tanh),
    Row("tanh-s8", Op.TANH, [wide(S8, scale=0.1, zp=7)], TANH_S8, np.tanh, V.V1_3),
    Row("tanh-zero-sized", Op.TANH, [u8((0,), scale=0.1)], TANH_U8, np.tanh, shape=(0,)),
]

OTHER_ROWS = [
    Row(
        "elu-f32",
        Op.ELU,
        [f32((2, 4)), scalar(0.5, T.FLOAT32)],
        F32_OUT,
        elu(0.5),
        V.V1_3,
    ),
    Row("elu-f16", Op.ELU, [f16(), scalar(2.0, T.FLOAT16)], F16_OUT, elu(2.0), V.V1_3),
    Row("elu-zero-sized", Op.ELU, [f32((2, 0)), scalar(1.0, T.FLOAT32)], F32_OUT, elu(1.0)),
    Row("hard-swish-f32", Op.HARD_SWISH, [f32((5, 6))], F32_OUT, hard_swish, V.V1_3),
    Row("hard-swish-f16", Op.HARD_SWISH, [f16()], F16_OUT, hard_swish, V.V1_3),
    Row(
        "hard-swish-u8",
        Op.HARD_SWISH,
        [wide(U8, scale=0.078125, zp=128)],
        out(U8, scale=0.03125, zp=0),
        hard_swish,
        V.V1_3,
    ),
    Row(
        "hard-swish-u8-large-range",
        Op.HARD_SWISH,
        [wide(U8, scale=0.5, zp=100)],
        out(U8, scale=0.6, zp=20),
        hard_swish,
    ),
    Row(
        "hard-swish-s8",
        Op.HARD_SWISH,
        [wide(S8, scale=0.03, zp=-5)],
        out(S8, scale=0.02, zp=-64),
        hard_swish,
        V.V1_3,
    ),
    Row(
        "hard-swish-s8-fine",
        Op.HARD_SWISH,
        [wide(S8, scale=0.001, zp=0)],
        out(S8, scale=0.0005, zp=-100),
        hard_swish,
    ),
    Row("prelu-f32", Op.PRELU, [f32((2, 3)), f32((3,))], F32_OUT, prelu, V.V1_2),
    Row(
        "prelu-f16-broadcast-both",
        Op.PRELU,
        [f16((2, 1, 3)), f16((4, 1))],
        F16_OUT,
        prelu,
        V.V1_2,
        shape=(2, 4, 3),
    ),
    Row(
        "prelu-u8",
        Op.PRELU,
        [wide(U8, (4, 64), scale=0.25, zp=128), u8((64,), scale=0.01, zp=50)],
        out(U8, scale=0.5, zp=120),
        prelu,
        V.V1_2,
    ),
    Row(
        "prelu-s8",
        Op.PRELU,
        [wide(S8, (2, 2, 64), scale=0.1, zp=-1), s8((2, 1, 1), scale=0.05, zp=3)],
        out(S8, scale=0.2, zp=10),
        prelu,
        V.V1_3,
    ),
]


@pytest.mark.parametrize("row", RELU_ROWS + SIGMOID_ROWS + OTHER_ROWS, ids=lambda r: r.id)
def test_activations(row: Row):
    with np.errstate(over="ignore"):  # the executor runs kernels so; exp(100) overflows
        row.check()


@pytest.mark.parametrize(
    "type_, radius_case",
    [(U8, [0, 255, 128]), (S8, [-128, 127, 0])],
)
def test_quant_logistic_saturates_and_centres(type_, radius_case):
    """Far outside the input radius the reference returns the type's bounds; 0 gives 1/2."""
    out_spec = LOGISTIC_U8 if type_ == U8 else LOGISTIC_S8
    zp = 128 if type_ == U8 else 0
    x = t(type_, (3,), data=radius_case, scale=0.5, zp=zp)
    got = run(Op.LOGISTIC, [x], [out_spec])[2].astype(int).tolist()
    qmin, qmax = (0, 255) if type_ == U8 else (-128, 127)
    assert got[0] == qmin and got[1] == qmax
    assert got[2] == 128 + out_spec.zp  # 0.5 / (1/256) + zero point


def test_quant_tanh_of_zero_is_the_zero_point():
    for type_, spec, zp in [(U8, TANH_U8, 128), (S8, TANH_S8, 0)]:
        x = t(type_, (1,), data=[3], scale=0.1, zp=3)
        assert run(Op.TANH, [x], [spec])[2].tolist() == [zp]


def test_elu_alpha_may_be_a_runtime_scalar():
    """A non-constant alpha passes validation; binding waits for its value."""
    from nnhal.driver.ops.registry import validate_operation
    from ops_harness import context

    ctx = context(Op.ELU, [f32(), scalar(1.0, T.FLOAT32, const=False)], [F32_OUT])
    assert validate_operation(ctx) == V.V1_3
    with pytest.raises(ValueNotConstant):
        ctx.op.kernel(ctx)


# ---------------------------------------------------------------------------
# gemmlowp fixed point
# ---------------------------------------------------------------------------


def test_exp_on_negative_values_matches_exp():
    for bits in (4, 5):
        real = -RNG.uniform(0, 2**bits - 0.01, 2000)
        raw = np.round(real * 2 ** (31 - bits)).astype(np.int64)
        got = fx.exp_on_negative_values(raw, bits) / 2**31
        np.testing.assert_allclose(got, np.exp(raw / 2 ** (31 - bits)), atol=2e-7)
    assert fx.exp_on_negative_values(np.array([0]), 5)[0] == 2**31 - 1


def test_fixed_logistic_and_tanh_match_floats():
    real = RNG.uniform(-15.9, 15.9, 2000)
    raw = np.round(real * 2**27).astype(np.int64)
    x = raw / 2**27
    np.testing.assert_allclose(fx.fixed_logistic(raw, 4) / 2**31, sigmoid(x), atol=1e-6)
    np.testing.assert_allclose(fx.fixed_tanh(raw, 4) / 2**31, np.tanh(x), atol=2e-6)
    assert fx.fixed_logistic(np.array([0]), 4)[0] == 2**30
    assert fx.fixed_tanh(np.array([0]), 4)[0] == 0


def test_one_over_one_plus_x():
    a = RNG.integers(0, 2**31 - 1, 1000)
    got = fx.one_over_one_plus_x_for_x_in_0_1(a) / 2**31
    np.testing.assert_allclose(got, 1 / (1 + a / 2**31), atol=1e-8)


def test_srdhm_saturates_and_rounds():
    assert fx.srdhm(np.array([-(2**31)]), -(2**31))[0] == 2**31 - 1
    assert fx.srdhm(np.array([1 << 30]), 1 << 30)[0] == 1 << 29
    assert fx.srdhm(np.array([-3]), 1 << 30)[0] == -1  # -1.5 rounds away from zero


def test_rdbpot_per_element_exponents():
    x = np.array([5, -5, 6, 7])
    assert fx.rdbpot(x, np.array([1, 1, 2, 0])).tolist() == [3, -3, 2, 7]


def test_quantize_multiplier_greater_than_one():
    assert fx.quantize_multiplier_greater_than_one(1.0) is None
    assert fx.quantize_multiplier_greater_than_one(2.0) == (1 << 30, 2)
    assert fx.input_radius(4, 27) == 15  # floor(15 * 2**27 / 2**27)
    assert fx.input_radius(5, 30) == 1  # floor(31 * 2**26 / 2**30)


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

BAD_ROWS = [
    Bad("relu-two-inputs", Op.RELU, [f32(), f32()], [F32_OUT], r"expected 1 inputs, got 2"),
    Bad("relu6-int32", Op.RELU6, [i32()], [out(T.TENSOR_INT32)], r"input 0 \(input\) has type"),
    Bad(
        "relu1-rank5",
        Op.RELU1,
        [f32((1, 1, 1, 1, 2))],
        [F32_OUT],
        r"input 0 has rank 5; the maximum supported rank is 4",
    ),
    Bad(
        "relu-u8-output-scale",
        Op.RELU,
        [u8(scale=0.5, zp=128)],
        [out(U8, scale=0.25, zp=128)],
        r"output 0 has scale 0\.25 and zeroPoint 128; with TENSOR_QUANT8_ASYMM it must have "
        r"the scale and zeroPoint of input 0",
    ),
    Bad(
        "relu6-s8-output-zero-point",
        Op.RELU6,
        [s8(scale=0.5, zp=0)],
        [out(S8, scale=0.5, zp=1)],
        r"zeroPoint 1; with TENSOR_QUANT8_ASYMM_SIGNED it must have the scale and zeroPoint",
    ),
    Bad("relu-output-type", Op.RELU, [f32()], [F16_OUT], r"output 0 \(output\) has type"),
    Bad(
        "logistic-u8-scale",
        Op.LOGISTIC,
        [u8()],
        [out(U8, scale=1 / 128, zp=0)],
        r"output 0 has scale 0\.0078125 and zeroPoint 0; with TENSOR_QUANT8_ASYMM it must have "
        r"scale 1/256 \(0\.00390625\) and zeroPoint 0",
    ),
    Bad(
        "logistic-s8-zero-point",
        Op.LOGISTIC,
        [s8()],
        [out(S8, scale=1 / 256, zp=0)],
        r"with TENSOR_QUANT8_ASYMM_SIGNED it must have scale 1/256 \(0\.00390625\) and "
        r"zeroPoint -128",
    ),
    Bad(
        "logistic-rank5",
        Op.LOGISTIC,
        [f32((2, 1, 1, 1, 1))],
        [F32_OUT],
        r"input 0 has rank 5",
    ),
    Bad(
        "logistic-tiny-input-scale",
        Op.LOGISTIC,
        [u8(scale=2.0**-28)],
        [LOGISTIC_U8],
        r"input 0 has scale .*; the reference needs scale \* 2\*\*27 > 1",
    ),
    Bad(
        "tanh-u8-zero-point",
        Op.TANH,
        [u8()],
        [out(U8, scale=1 / 128, zp=0)],
        r"it must have scale 1/128 \(0\.0078125\) and zeroPoint 128",
    ),
    Bad(
        "tanh-s8-scale",
        Op.TANH,
        [s8()],
        [out(S8, scale=1 / 256, zp=0)],
        r"it must have scale 1/128 \(0\.0078125\) and zeroPoint 0",
    ),
    Bad("tanh-int32", Op.TANH, [i32()], [out(T.TENSOR_INT32)], r"input 0 \(input\)"),
    Bad("elu-one-input", Op.ELU, [f32()], [F32_OUT], r"expected 2 inputs, got 1"),
    Bad(
        "elu-f16-alpha-float32",
        Op.ELU,
        [f16(), scalar(1.0, T.FLOAT32)],
        [F16_OUT],
        r"input 1 \(alpha\) has type FLOAT32; with TENSOR_FLOAT16 supported: FLOAT16",
    ),
    Bad(
        "elu-f32-alpha-int",
        Op.ELU,
        [f32(), scalar(1)],
        [F32_OUT],
        r"input 1 \(alpha\) has type INT32; with TENSOR_FLOAT32 supported: FLOAT32",
    ),
    Bad(
        "elu-quant8",
        Op.ELU,
        [u8(), scalar(1.0, T.FLOAT32)],
        [out(U8)],
        r"input 0 \(input\) has type TENSOR_QUANT8_ASYMM; supported: TENSOR_FLOAT32 \(1\.3\)",
    ),
    Bad("hard-swish-int32", Op.HARD_SWISH, [i32()], [out(T.TENSOR_INT32)], r"input 0 \(input\)"),
    Bad(
        "hard-swish-output-scale-too-small",
        Op.HARD_SWISH,
        [u8(scale=1.0, zp=0)],
        [out(U8, scale=0.001, zp=0)],
        r"output 0 has scale 0\.001; the reference needs input scale / 128 / output scale < 1",
    ),
    Bad("prelu-one-input", Op.PRELU, [f32()], [F32_OUT], r"expected 2 inputs, got 1"),
    Bad(
        "prelu-alpha-type",
        Op.PRELU,
        [u8(), s8()],
        [out(U8)],
        r"input 1 \(alpha\) has type TENSOR_QUANT8_ASYMM_SIGNED; with TENSOR_QUANT8_ASYMM "
        r"supported: TENSOR_QUANT8_ASYMM",
    ),
    Bad("prelu-int32", Op.PRELU, [i32(), i32()], [out(T.TENSOR_INT32)], r"input 0 \(input\)"),
    Bad(
        "prelu-broadcast",
        Op.PRELU,
        [f32((2, 3)), f32((2,))],
        [F32_OUT],
        r"cannot be broadcast.*3 in input 0 and 2 in input 1",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_activations(row: Bad):
    row.check()

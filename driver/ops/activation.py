"""RELU, RELU1, RELU6, LOGISTIC, TANH, ELU, HARD_SWISH and PRELU.

Float kernels follow the reference's float32 formulas (float16 through
float32, rounded once). The quantized kernels are tables built once at bind
time with the reference's integer arithmetic, so a kernel is one gather:

- RELU/RELU1/RELU6 clamp the raw values to ``CalculateActivationRange`` of the
  input's quantization (the output must share it).
- LOGISTIC and TANH rescale the input to a Q4.27 fixed-point value and run
  gemmlowp's ``logistic``/``tanh``; the output quantization is fixed by NNAPI
  (LOGISTIC 1/256 with zero point 0 or -128, TANH 1/128 with 128 or 0).
- HARD_SWISH is TFLite's reference 16-bit algorithm (``reluish`` multiplier,
  truncating high multiply), with any output quantization.
- PRELU is a 256 x 256 table over (input, alpha) of the reference's two
  fixed-point multipliers; fancy indexing broadcasts alpha against the input.

Rank limits: up to 4 for RELU*, LOGISTIC and TANH (the reference's
validation); any rank for ELU, HARD_SWISH and PRELU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant
from nnhal.driver.ops._act_util import (
    check_output_quant,
    fixed_logistic,
    fixed_tanh,
    input_radius,
    mul_greater_than_one,
    quantize_multiplier_greater_than_one,
    rdbpot,
    same_shape_prepare,
    table_kernel,
    via_float32,
)
from nnhal.driver.ops._operand_rules import QUANT8, broadcast_shape, check_rank
from nnhal.driver.ops.quant import QuantParams, quant_params
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import FusedActivationFunc, HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32
F16 = _T.TENSOR_FLOAT16
Q8A, Q8AS = _T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED

CLASSIC = {_T.TENSOR_FLOAT32: _V.V1_0, Q8A: _V.V1_0, F16: _V.V1_2, Q8AS: _V.V1_3}
V1_3_ALL = {_T.TENSOR_FLOAT32: _V.V1_3, F16: _V.V1_3, Q8A: _V.V1_3, Q8AS: _V.V1_3}


def _float_scalar(primary: int) -> frozenset:
    return frozenset({_T.FLOAT16 if primary == F16 else _T.FLOAT32})


def _register_unary(
    op_type: OperationType,
    types: dict[int, HalVersion],
    execute: Callable[[OpContext], Callable],
    validate: Callable[[OpContext], None] | None,
    extra_inputs: tuple[Arg, ...] = (),
) -> OperationDef:
    return register(
        OperationDef(
            op_type,
            inputs=(Arg("input"), *extra_inputs),
            outputs=(Arg("output"),),
            types=types,
            execute=execute,
            prepare=same_shape_prepare,
            validate=validate,
        )
    )


# ---------------------------------------------------------------------------
# RELU, RELU1, RELU6
# ---------------------------------------------------------------------------

_RELU_BOUNDS = {
    FusedActivationFunc.RELU: (0.0, None),
    FusedActivationFunc.RELU1: (-1.0, 1.0),
    FusedActivationFunc.RELU6: (0.0, 6.0),
}


def _relu(op_type: OperationType, activation: FusedActivationFunc) -> OperationDef:
    lo_f, hi_f = _RELU_BOUNDS[activation]

    def validate(ctx: OpContext) -> None:
        check_rank(ctx, 0, max_rank=4)
        if ctx.primary_type in QUANT8:
            check_output_quant(ctx, why="the scale and zeroPoint of input 0")

    def execute(ctx: OpContext):
        lo, hi = lo_f, hi_f
        # std::max(lo, x) keeps lo for a NaN input, as np.fmax does.
        floor = np.fmax
        if ctx.primary_type in QUANT8:
            p = quant_params(ctx.inputs[0])
            lo, hi = quant.activation_range(activation, p.scale, p.zeroPoint, p.dtype)
            floor = np.maximum
            if hi == quant.QUANT_RANGE[p.dtype][1]:
                hi = None  # the upper clamp is a no-op
        if hi is None:
            return lambda x: floor(x, lo)

        def clamp(x: np.ndarray) -> np.ndarray:
            out = floor(x, lo)
            np.minimum(out, hi, out=out)
            return out

        return clamp

    return _register_unary(op_type, CLASSIC, execute, validate)


RELU = _relu(OperationType.RELU, FusedActivationFunc.RELU)
RELU1 = _relu(OperationType.RELU1, FusedActivationFunc.RELU1)
RELU6 = _relu(OperationType.RELU6, FusedActivationFunc.RELU6)

# ---------------------------------------------------------------------------
# LOGISTIC, TANH
# ---------------------------------------------------------------------------

_INPUT_INTEGER_BITS = 4


def _q4_multiplier(scale: float) -> tuple[int, int] | None:
    # inputShape.scale * double(1 << (31 - kInputIntegerBits)), in double.
    return quantize_multiplier_greater_than_one(float(f32(scale)) * (1 << 27))


@functools.lru_cache(maxsize=256)
def _sigmoid_table(p: QuantParams, tanh: bool) -> np.ndarray:
    """The reference quantized LOGISTIC / TANH over all 256 input values."""
    multiplier, shift = _q4_multiplier(p.scale)
    radius = input_radius(_INPUT_INTEGER_BITS, shift)
    centered = quant.table_domain(p.dtype) - p.zeroPoint
    q4 = mul_greater_than_one(centered, multiplier, shift)
    qmin, qmax = quant.QUANT_RANGE[p.dtype]
    signed = p.dtype == np.int8
    if tanh:
        value = rdbpot(fixed_tanh(q4, _INPUT_INTEGER_BITS), 24) + (0 if signed else 128)
    else:
        value = rdbpot(fixed_logistic(q4, _INPUT_INTEGER_BITS), 23) - (128 if signed else 0)
    value = np.clip(value, qmin, qmax)  # uint8: only 256 -> 255 can happen
    value = np.where(centered <= -radius, qmin, np.where(centered >= radius, qmax, value))
    return value.astype(p.dtype)


def _sigmoid_like(op_type: OperationType, tanh: bool) -> OperationDef:
    if tanh:
        types = {_T.TENSOR_FLOAT32: _V.V1_0, F16: _V.V1_2, Q8A: _V.V1_2, Q8AS: _V.V1_3}
        fixed = {Q8A: (1 / 128, 128), Q8AS: (1 / 128, 0)}
        rule = "scale 1/128 (0.0078125) and zeroPoint {}"
    else:
        types = CLASSIC
        fixed = {Q8A: (1 / 256, 0), Q8AS: (1 / 256, -128)}
        rule = "scale 1/256 (0.00390625) and zeroPoint {}"

    def validate(ctx: OpContext) -> None:
        check_rank(ctx, 0, max_rank=4)
        t = ctx.primary_type
        if t in QUANT8:
            scale, zero = fixed[t]
            check_output_quant(ctx, scale, zero, why=rule.format(zero))
            if _q4_multiplier(ctx.inputs[0].scale) is None:
                raise ctx.fail(
                    f"input 0 has scale {ctx.inputs[0].scale!r}; the reference needs "
                    "scale * 2**27 > 1 to rescale it"
                )

    def execute(ctx: OpContext):
        if ctx.primary_type in QUANT8:
            return table_kernel(_sigmoid_table(quant_params(ctx.inputs[0]), tanh))
        if tanh:
            return np.tanh
        return via_float32(_logistic) if ctx.primary_type == F16 else _logistic

    return _register_unary(op_type, types, execute, validate)


def _logistic(x: np.ndarray) -> np.ndarray:
    # 1.f / (1.f + std::exp(-x)) in float32.
    out = np.negative(x)
    np.exp(out, out=out)
    out += 1
    np.divide(1, out, out=out)
    return out


LOGISTIC = _sigmoid_like(OperationType.LOGISTIC, tanh=False)
TANH = _sigmoid_like(OperationType.TANH, tanh=True)

# ---------------------------------------------------------------------------
# ELU
# ---------------------------------------------------------------------------


def _elu_execute(ctx: OpContext):
    alpha = f32(ctx.scalar(1))

    def elu(x: np.ndarray) -> np.ndarray:
        # max(0, x) + min(0, alpha * (exp(x) - 1)) in float32.
        out = np.exp(x)
        out -= 1
        out *= alpha
        np.fmin(out, 0, out=out)
        out += np.fmax(x, 0)
        return out

    return via_float32(elu) if ctx.primary_type == F16 else elu


ELU = _register_unary(
    OperationType.ELU,
    {_T.TENSOR_FLOAT32: _V.V1_3, F16: _V.V1_3},
    _elu_execute,
    None,
    (Arg("alpha", _float_scalar),),
)

# ---------------------------------------------------------------------------
# HARD_SWISH
# ---------------------------------------------------------------------------


def _hard_swish_float(x: np.ndarray) -> np.ndarray:
    # in * min(6, max(0, in + 3)) / 6 in float32.
    out = x + 3
    np.clip(out, 0, 6, out=out)
    out *= x
    out /= 6
    return out


def _int16_multiplier(multiplier: int) -> int:
    """``DownScaleInt32ToInt16Multiplier``."""
    if multiplier >= 2**31 - 1 - (1 << 15):
        return 2**15 - 1
    return (multiplier + (1 << 15)) >> 16


def _hard_swish_multipliers(inp: float, out: float) -> tuple[int, int, int, int]:
    """(output multiplier, exponent, reluish multiplier, exponent), 16-bit multipliers."""
    hires = f32(1.0 / 128.0) * f32(inp)
    m_out, e_out = quant.quantize_multiplier(float(hires / f32(out)))
    m_rel, e_rel = quant.quantize_multiplier(float(hires / (f32(3.0) / f32(32768.0))))
    return _int16_multiplier(m_out), e_out, _int16_multiplier(m_rel), e_rel


def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    x = ab + nudge
    out = np.where(x >= 0, x >> 15, -((-x) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, out)


def _sdhm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TFLite ``SaturatingDoublingHighMul`` (int16, truncating)."""
    ab = a * b
    out = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, out)


def _sat_shift16(x: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(x * (1 << amount), -32768, 32767)


@functools.lru_cache(maxsize=256)
def _hard_swish_table(inp: QuantParams, out: QuantParams) -> np.ndarray:
    """TFLite ``reference_ops::HardSwish`` (quantized) over all 256 input values."""
    m_out, e_out, m_rel, e_rel = _hard_swish_multipliers(inp.scale, out.scale)
    hires = (quant.table_domain(inp.dtype) - inp.zeroPoint) * 128
    preshift = _srdhm16(hires, m_out)
    reluish = hires
    if e_rel > 0:
        reluish = _sat_shift16(reluish, e_rel - 1)
    reluish = _srdhm16(reluish, m_rel)
    if e_rel > 0:
        reluish = _sat_shift16(reluish, 1)
    if e_rel < 0:
        reluish = rdbpot(reluish, -e_rel)
    reluish = (reluish + (1 << 15)) >> 1
    value = rdbpot(_sdhm16(reluish, preshift), -e_out) + out.zeroPoint
    qmin, qmax = quant.QUANT_RANGE[out.dtype]
    return np.clip(value, qmin, qmax).astype(out.dtype)


def _hard_swish_validate(ctx: OpContext) -> None:
    if ctx.primary_type in QUANT8:
        _, e_out, _, _ = _hard_swish_multipliers(ctx.inputs[0].scale, ctx.outputs[0].scale)
        if e_out > 0:
            raise ctx.fail(
                f"output 0 has scale {ctx.outputs[0].scale!r}; the reference needs "
                f"input scale / 128 / output scale < 1 (input 0 has scale "
                f"{ctx.inputs[0].scale!r})"
            )


def _hard_swish_execute(ctx: OpContext):
    if ctx.primary_type in QUANT8:
        table = _hard_swish_table(quant_params(ctx.inputs[0]), quant_params(ctx.outputs[0]))
        return table_kernel(table)
    return via_float32(_hard_swish_float) if ctx.primary_type == F16 else _hard_swish_float


HARD_SWISH = _register_unary(
    OperationType.HARD_SWISH, V1_3_ALL, _hard_swish_execute, _hard_swish_validate
)

# ---------------------------------------------------------------------------
# PRELU
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _prelu_table(inp: QuantParams, alpha: QuantParams, out: QuantParams) -> np.ndarray:
    """The reference quantized PRELU as a 256 x 256 table over (input, alpha)."""
    s_in, s_alpha, s_out = f32(inp.scale), f32(alpha.scale), f32(out.scale)
    m_pos, e_pos = quant.quantize_multiplier(float(s_in / s_out))
    # input_product_scale is a float product widened to double; then double / float.
    m_neg, e_neg = quant.quantize_multiplier(float(s_in * s_alpha) / float(s_out))

    def fn(x: np.ndarray, a: np.ndarray) -> np.ndarray:
        centered = x - inp.zeroPoint
        pos = quant.multiply_by_quantized_multiplier(centered, m_pos, e_pos)
        neg = quant.multiply_by_quantized_multiplier(centered * (a - alpha.zeroPoint), m_neg, e_neg)
        return np.where(centered >= 0, pos, neg) + out.zeroPoint

    qmin, qmax = quant.QUANT_RANGE[out.dtype]
    return quant.frozen(np.clip(quant.binary_table(fn, inp.dtype, alpha.dtype), qmin, qmax)
                        .astype(out.dtype))  # fmt: skip


def _prelu_float(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, x, x * alpha)


def _prelu_execute(ctx: OpContext):
    if ctx.primary_type in QUANT8:
        table = _prelu_table(*(quant_params(i) for i in (*ctx.inputs, ctx.outputs[0])))

        def prelu(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
            return table[x.view(np.uint8), alpha.view(np.uint8)]

        return prelu
    return _prelu_float


def _prelu_prepare(ctx: OpContext) -> list[Shape]:
    return [broadcast_shape(ctx, ctx.inputs[0].dimensions, ctx.inputs[1].dimensions)]


PRELU = register(
    OperationDef(
        OperationType.PRELU,
        inputs=(Arg("input"), Arg("alpha")),
        outputs=(Arg("output"),),
        types={_T.TENSOR_FLOAT32: _V.V1_2, F16: _V.V1_2, Q8A: _V.V1_2, Q8AS: _V.V1_3},
        execute=_prelu_execute,
        prepare=_prelu_prepare,
    )
)

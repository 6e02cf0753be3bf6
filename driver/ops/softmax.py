"""SOFTMAX and LOG_SOFTMAX along one axis (default and negative axes as NNAPI says).

Float: ``exp((x - max) * beta) / sum`` in float32 (float16 through float32).
LOG_SOFTMAX: ``(x - max) * beta - log(sum(exp(...)))`` with the exponentials
summed in double, as the reference's ``std::exp(static_cast<double>(...))``.

Quantized SOFTMAX is the reference's fixed-point algorithm: input differences
from the row maximum (always in [-255, 0]) are rescaled by ``beta * scale`` to
Q5.26, exponentiated with gemmlowp's ``exp_on_negative_values`` and summed in
Q12.19; the reciprocal of the sum comes from ``one_over_one_plus_x_for_x_in_0_1``
after normalising away its headroom. The per-difference exponentials are a
256-entry table bound once; the per-row part runs vectorized over all rows.
The output quantization is fixed: scale 1/256, zero point 0 (unsigned) or
-128 (signed). Differences below ``-CalculateInputRadius(5, shift)`` give the
minimum value, as in the reference.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant
from nnhal.driver.ops._act_util import (
    check_output_quant,
    exp_on_negative_values,
    input_radius,
    mul_greater_than_one,
    one_over_one_plus_x_for_x_in_0_1,
    quantize_multiplier_greater_than_one,
    rdbpot,
    same_shape_prepare,
    srdhm,
)
from nnhal.driver.ops._operand_rules import INT32_SCALAR, QUANT8, check_rank
from nnhal.driver.ops.quant import QuantParams, quant_params
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32
F16 = _T.TENSOR_FLOAT16

_SCALED_DIFF_BITS = 5  # Q5.26 exponent inputs
_ACCUMULATION_BITS = 12  # Q12.19 sum of exponentials


def _float_scalar(primary: int) -> frozenset:
    return frozenset({_T.FLOAT16 if primary == F16 else _T.FLOAT32})


def _check_axis(ctx: OpContext, index: int) -> None:
    """A constant axis must lie in [-rank, rank) when the rank is known."""
    value = ctx.constant(index)
    rank = ctx.inputs[0].rank
    if value is None or rank is None:
        return
    axis = int(value.reshape(-1)[0])
    if not -rank <= axis < rank:
        raise ctx.fail(
            f"input {index} (axis) has value {axis}; with a rank {rank} input 0 it must be "
            f"in [{-rank}, {rank})"
        )


def _bound_axis(ctx: OpContext, index: int) -> int:
    axis = int(ctx.scalar(index, -1))
    rank = ctx.inputs[0].rank
    if rank is not None and not -rank <= axis < rank:
        raise ctx.fail(
            f"input {index} (axis) has value {axis}; with a rank {rank} input 0 it must be "
            f"in [{-rank}, {rank})"
        )
    return axis


def _quant_multiplier(beta: float, scale: float) -> tuple[int, int] | None:
    # min(1.0 * beta * scale * 2**26, 2**31 - 1) in double, then > 1 required.
    real = min(float(f32(beta)) * float(f32(scale)) * (1 << (31 - _SCALED_DIFF_BITS)), 2**31 - 1.0)
    return quantize_multiplier_greater_than_one(real)


# ---------------------------------------------------------------------------
# SOFTMAX
# ---------------------------------------------------------------------------

_SOFTMAX_OUT = {
    _T.TENSOR_QUANT8_ASYMM: "scale 1/256 (0.00390625) and zeroPoint 0",
    _T.TENSOR_QUANT8_ASYMM_SIGNED: "scale 1/256 (0.00390625) and zeroPoint -128",
}


def _softmax_validate(ctx: OpContext) -> HalVersion | None:
    check_rank(ctx, 0, max_rank=4)
    rank = ctx.inputs[0].rank
    version = None
    if not ctx.is_omitted(2):
        version = _V.V1_2  # the axis input came with HAL 1.2
        _check_axis(ctx, 2)
    elif rank is not None and rank not in (2, 4):
        version = _V.V1_2  # before 1.2 only rank 2 or 4
    beta = ctx.constant(1)
    if beta is not None and not float(beta.reshape(-1)[0]) > 0:
        raise ctx.fail(f"input 1 (beta) has value {float(beta.reshape(-1)[0])}; it must be > 0")
    t = ctx.primary_type
    if t in QUANT8:
        check_output_quant(ctx, 1 / 256, -128 if t == _T.TENSOR_QUANT8_ASYMM_SIGNED else 0,
                           why=_SOFTMAX_OUT[t])  # fmt: skip
        if beta is not None and _quant_multiplier(float(beta), ctx.inputs[0].scale) is None:
            raise ctx.fail(
                f"input 1 (beta) is {float(beta)} and input 0 has scale {ctx.inputs[0].scale!r};"
                " the reference needs beta * scale * 2**26 > 1"
            )
    return version


def _softmax_float(axis: int, beta: float) -> Callable[[np.ndarray], np.ndarray]:
    b = f32(beta)

    def softmax(x: np.ndarray) -> np.ndarray:
        if x.size == 0:
            return np.empty_like(x)
        out = x - x.max(axis=axis, keepdims=True)
        out *= b
        np.exp(out, out=out)
        out /= out.sum(axis=axis, keepdims=True)
        return out

    def softmax_beta_one(x: np.ndarray) -> np.ndarray:
        if x.size == 0:
            return np.empty_like(x)
        out = x - x.max(axis=axis, keepdims=True)
        np.exp(out, out=out)
        out /= out.sum(axis=axis, keepdims=True)
        return out

    return softmax_beta_one if b == 1 else softmax


@functools.lru_cache(maxsize=256)
def _softmax_tables(p: QuantParams, beta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(exp in Q0.31, exp in Q12.19, valid) for every difference -255..0 (index diff + 255)."""
    multiplier, shift = _quant_multiplier(beta, p.scale)
    diff_min = -input_radius(_SCALED_DIFF_BITS, shift)
    diffs = np.arange(-255, 1, dtype=np.int64)
    valid = diffs >= diff_min
    rescaled = mul_greater_than_one(np.where(valid, diffs, 0), multiplier, shift)
    exp = np.where(valid, exp_on_negative_values(rescaled, _SCALED_DIFF_BITS), 0)
    acc = rdbpot(exp, _ACCUMULATION_BITS)  # Rescale<12> of a Q0.31 value
    return tuple(quant.frozen(t) for t in (exp, acc, valid))


def _softmax_quant(ctx: OpContext, axis: int, beta: float) -> Callable[[np.ndarray], np.ndarray]:
    p = quant_params(ctx.inputs[0])
    if _quant_multiplier(beta, p.scale) is None:
        raise ctx.fail(
            f"input 1 (beta) is {beta} and input 0 has scale {p.scale!r}; the reference needs "
            "beta * scale * 2**26 > 1"
        )
    exp_t, acc_t, valid_t = _softmax_tables(p, beta)
    qmin, qmax = quant.QUANT_RANGE[p.dtype]
    offset = 128 if p.dtype == np.int8 else 0
    dtype = p.dtype

    def softmax(x: np.ndarray) -> np.ndarray:
        if x.size == 0:
            return np.empty_like(x)
        xi = x.astype(np.int32)
        idx = xi - xi.max(axis=axis, keepdims=True)
        idx += 255
        # FixedPoint sums wrap as int32; the reference reads the sum as uint32.
        total = acc_t[idx].sum(axis=axis, keepdims=True) & 0xFFFFFFFF
        headroom = 32 - np.frexp(total.astype(np.float64))[1]  # CountLeadingZeros
        shifted_minus_one = (total << headroom) - (1 << 31)
        scale = one_over_one_plus_x_for_x_in_0_1(shifted_minus_one)
        out = rdbpot(srdhm(scale, exp_t[idx]), _ACCUMULATION_BITS - headroom + 31 - 8)
        out -= offset
        np.clip(out, qmin, qmax, out=out)
        return np.where(valid_t[idx], out, qmin).astype(dtype)

    return softmax


def _softmax_execute(ctx: OpContext):
    beta = float(ctx.scalar(1))
    axis = _bound_axis(ctx, 2)
    if not beta > 0:
        raise ctx.fail(f"input 1 (beta) has value {beta}; it must be > 0")
    if ctx.primary_type in QUANT8:
        return _softmax_quant(ctx, axis, beta)
    kernel = _softmax_float(axis, beta)
    if ctx.primary_type == F16:
        return lambda x: kernel(x.astype(f32)).astype(np.float16)
    return kernel


SOFTMAX = register(
    OperationDef(
        OperationType.SOFTMAX,
        inputs=(Arg("input"), Arg("beta", _float_scalar), Arg("axis", INT32_SCALAR, optional=True)),
        outputs=(Arg("output"),),
        types={
            _T.TENSOR_FLOAT32: _V.V1_0,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_0,
            _T.TENSOR_FLOAT16: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_softmax_execute,
        prepare=same_shape_prepare,
        validate=_softmax_validate,
    )
)

# ---------------------------------------------------------------------------
# LOG_SOFTMAX
# ---------------------------------------------------------------------------


def _log_softmax_execute(ctx: OpContext):
    b = f32(ctx.scalar(1))
    axis = _bound_axis(ctx, 2)

    def log_softmax(x: np.ndarray) -> np.ndarray:
        if x.size == 0:
            return np.empty_like(x)
        out = x - x.max(axis=axis, keepdims=True)
        out *= b
        log_sum = np.log(np.exp(out.astype(np.float64)).sum(axis=axis, keepdims=True))
        out -= log_sum.astype(f32)
        return out

    if ctx.primary_type == F16:
        return lambda x: log_softmax(x.astype(f32)).astype(np.float16)
    return log_softmax


def _log_softmax_validate(ctx: OpContext) -> None:
    _check_axis(ctx, 2)


LOG_SOFTMAX = register(
    OperationDef(
        OperationType.LOG_SOFTMAX,
        inputs=(Arg("input"), Arg("beta", _float_scalar), Arg("axis", INT32_SCALAR)),
        outputs=(Arg("output"),),
        types={_T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_FLOAT16: _V.V1_2},
        execute=_log_softmax_execute,
        prepare=same_shape_prepare,
        validate=_log_softmax_validate,
    )
)

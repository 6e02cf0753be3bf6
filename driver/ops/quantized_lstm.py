"""QUANTIZED_16BIT_LSTM and QUANTIZED_LSTM: the integer LSTM cells, bit for bit.

QUANTIZED_16BIT_LSTM (HAL 1.2) is the reference's ``quantizedLstmStep<4>``:
the eight uint8 weight matrices are assembled into one
``[4 n, n + input_size]`` matrix exactly as the reference assembles it
(gate rows input, cell, forget, output; recurrent columns first) and
multiplied with ``[input, prev_output] - 128``; the int32 accumulators are
scaled by ``4096 * bias_scale`` to 16-bit fixed point with 3 integer bits,
the gates go through gemmlowp's fixed-point logistic/tanh, the cell state is
16-bit with 4 integer bits (scale 2^-11) and the output is uint8 (scale
1/128, zero point 128). The quantization parameters the reference requires
are checked at validation.

QUANTIZED_LSTM (HAL 1.3) is the reference's integer-only LSTM
(``qlstm::execute``): int8 matmuls with precomputed zero-point biases,
requantized by effective scales (weight scale x input scale / intermediate
scale) into saturating int16 gate accumulators, optional peephole terms,
integer layer normalization (mean and variance in int64, an int32
Newton-Raphson inverse square root, the gate bias added inside), fixed-point
sigmoid/tanh, a 16-bit cell state whose scale is a power of two <= 2^-9,
the hidden state requantized to int8 with ``hidden_state_scale`` and
``hidden_state_zero_point``, and an optional int8 projection. Where the
reference reads an uninitialized buffer (the input and forget peepholes read
the *output* cell state) or a wrong length (the peephole vector length is
the output size), this uses the previous cell state and the cell count.

Matmuls run as float64 BLAS products of the integer values: every partial
sum of 8-bit products stays far below 2^53, so they are exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from nnhal.driver.ops import _lstm_fixedpoint as fx
from nnhal.driver.ops import quant
from nnhal.driver.ops._lstm_util import (
    cell_args,
    check_cell,
    compiled_cell,
    layer_norm_args,
    runtime_state,
    scalar_value,
)
from nnhal.driver.ops._operand_rules import INT32_SCALAR, runtime_failure
from nnhal.driver.ops.lstm import LAYOUT as LSTM_LAYOUT
from nnhal.driver.ops.lstm import operand_arrays
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32
i64 = np.int64
Q16 = frozenset({_T.TENSOR_QUANT16_SYMM})
Q8S = frozenset({_T.TENSOR_QUANT8_SYMM})
I32 = frozenset({_T.TENSOR_INT32})
F32 = frozenset({_T.FLOAT32})


def _log2_exact(x: float) -> tuple[int, bool]:
    """``CheckedLog2``: (rounded log2, whether x is within 1e-3 of that power of two)."""
    if not x > 0:
        return 0, False
    value = float(f32(math.log(x)) * (f32(1.0) / f32(math.log(2.0))))
    rounded = quant.round_half_away(value)
    return rounded, abs(value - rounded) < 1e-3


def _exact_matrix(w: np.ndarray, zero_point: int = 0) -> np.ndarray:
    """(w - zero_point).T as float64, for exact integer matmuls."""
    return np.ascontiguousarray((np.asarray(w, np.float64) - zero_point).T)


def _int_matmul(x: np.ndarray, wt: np.ndarray) -> np.ndarray:
    return (np.asarray(x, np.float64) @ wt).astype(i64)


# ---------------------------------------------------------------------------
# QUANTIZED_16BIT_LSTM
# ---------------------------------------------------------------------------


def _q16_validate(ctx: OpContext) -> HalVersion | None:
    def name(i):
        return f"input {i} ({ctx.op.inputs[i].name})"

    for i in (0, 14):
        info = ctx.inputs[i]
        if f32(info.scale) != f32(1 / 128) or info.zeroPoint != 128:
            raise ctx.fail(
                f"{name(i)} has scale {info.scale} and zero point {info.zeroPoint}; "
                "it must have scale 1/128 and zero point 128"
            )
    w = ctx.inputs[1]
    if f32(w.scale) == 0:
        raise ctx.fail(f"{name(1)} has scale 0; the weights' scale must be nonzero")
    for i in range(2, 9):
        info = ctx.inputs[i]
        if f32(info.scale) != f32(w.scale) or info.zeroPoint != w.zeroPoint:
            raise ctx.fail(
                f"{name(i)} has scale {info.scale} and zero point {info.zeroPoint}; all weights "
                f"must share input 1's scale {w.scale} and zero point {w.zeroPoint}"
            )
    bias_scale = f32(w.scale) / f32(128)
    for i in range(9, 13):
        info = ctx.inputs[i]
        if f32(info.scale) != bias_scale or info.zeroPoint != 0:
            raise ctx.fail(
                f"{name(i)} has scale {info.scale} and zero point {info.zeroPoint}; biases "
                f"must have scale weights_scale / 128 = {float(bias_scale)} and zero point 0"
            )
    cell = ctx.inputs[13]
    log2, exact = _log2_exact(float(f32(cell.scale)))
    if cell.zeroPoint != 0 or not exact or 15 + log2 != 4:
        raise ctx.fail(
            f"{name(13)} has scale {cell.scale} and zero point {cell.zeroPoint}; the cell "
            "state must have scale 2^-11 (4 integer bits) and zero point 0"
        )
    return None


def _check_q16_shapes(ctx: OpContext, shape_of, fail) -> tuple[int, int, int]:
    def name(i):
        return f"input {i} ({ctx.op.inputs[i].name})"

    def rank2(i):
        dims = shape_of(i)
        if dims is not None and len(dims) != 2:
            raise fail(f"{name(i)} has rank {len(dims)}; it must have rank 2")
        return dims or (0, 0)

    batch, in_size = rank2(0)
    out_batch, out_size = rank2(14)

    def want(i, expected, labels):
        dims = shape_of(i)
        if dims is None:
            return
        if len(dims) != len(expected):
            raise fail(f"{name(i)} has rank {len(dims)}; it must be [{labels}]")
        for axis, (d, e) in enumerate(zip(dims, expected)):
            if d and e and d != e:
                raise fail(
                    f"{name(i)} has dimension {d} on axis {axis}; it must be [{labels}] = "
                    f"{list(expected)}"
                )

    want(14, (batch, out_size), "batch, output_size")
    for i in range(1, 5):
        want(i, (out_size, in_size), "output_size, input_size")
    for i in range(5, 9):
        want(i, (out_size, out_size), "output_size, output_size")
    for i in range(9, 13):
        want(i, (out_size,), "output_size")
    want(13, (batch or out_batch, out_size), "batch, output_size")
    return batch or out_batch, in_size, out_size


def _q16_prepare(ctx: OpContext) -> list[Shape]:
    batch, _, out_size = _check_q16_shapes(ctx, lambda i: ctx.inputs[i].dimensions, ctx.fail)
    return [(batch, out_size), (batch, out_size)]


def _q16_weights(arrays, zero_point: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference's assembled weights (transposed, centered) and biases."""
    rows = []
    for gate in (0, 2, 1, 3):  # input, cell, forget, output
        rows.append(np.concatenate([arrays[5 + gate], arrays[1 + gate]], axis=1))
    weights = _exact_matrix(np.concatenate(rows, axis=0), zero_point)
    bias = np.concatenate([np.asarray(arrays[9 + g], i64) for g in (0, 2, 1, 3)])
    return weights, bias


def _q16_execute(ctx: OpContext) -> Callable:
    zero_point = ctx.inputs[1].zeroPoint
    multiplier, shift = quant.quantize_multiplier(4096 * float(f32(ctx.inputs[9].scale)))
    fail = lambda message: runtime_failure(ctx, message)
    constant = all(ctx.inputs[i].is_constant for i in range(1, 13))
    bound = None
    if constant:
        bound = _q16_weights([info.value for info in ctx.inputs], zero_point)
    logistic, tanh = fx.logistic_table(3), fx.tanh_table(3)

    def q16(*t: np.ndarray):
        x, h, cell = t[0], t[14], t[13]
        _check_q16_shapes(ctx, lambda i: t[i].shape, fail)
        weights, bias = bound if bound is not None else _q16_weights(t, zero_point)
        concat = np.concatenate([x, h], axis=1).astype(np.float64) - 128
        acc = (concat @ weights).astype(i64) + bias
        acc = fx.saturate(fx.mbqm(acc, multiplier, shift), 16)
        n = h.shape[1]
        gate_i = fx.lookup(logistic, acc[:, :n])
        gate_z = fx.lookup(tanh, acc[:, n : 2 * n])
        gate_f = fx.lookup(logistic, acc[:, 2 * n : 3 * n])
        gate_o = fx.lookup(logistic, acc[:, 3 * n :])
        scaled_in = fx.rdbpot(fx.srdhm(gate_i, gate_z, 16), 4)  # Rescale<4> of F0
        kept = fx.srdhm(gate_f, np.asarray(cell, i64), 16)
        new_cell = fx.saturate(scaled_in + kept, 16)
        squashed = fx.lookup(tanh, fx.srmbpot(new_cell, 1, 16))  # Rescale<3> of F4
        activ = fx.srdhm(gate_o, squashed, 16)
        out = 128 + np.clip(fx.rdbpot(activ, 8), -128, 127)
        return new_cell.astype(np.int16), out.astype(np.uint8)

    return q16


QUANTIZED_16BIT_DEF = register(
    OperationDef(
        OperationType.QUANTIZED_16BIT_LSTM,
        inputs=(
            Arg("input"),
            *(
                Arg(f"{src}_to_{gate}_weights")
                for src in ("input", "recurrent")
                for gate in ("input", "forget", "cell", "output")
            ),
            *(Arg(f"{gate}_gate_bias", I32) for gate in ("input", "forget", "cell", "output")),
            Arg("prev_cell_state", Q16),
            Arg("prev_output"),
        ),
        outputs=(Arg("cell_state_out", Q16), Arg("output")),
        types={_T.TENSOR_QUANT8_ASYMM: _V.V1_2},
        execute=_q16_execute,
        prepare=_q16_prepare,
        validate=_q16_validate,
    )
)


# ---------------------------------------------------------------------------
# QUANTIZED_LSTM
# ---------------------------------------------------------------------------

QL = replace(LSTM_LAYOUT, ln=(20, 21, 22, 23))  # LSTM's positions, layer norm after the states
CELL_CLIP, PROJ_CLIP, INTERMEDIATE, HIDDEN_ZP, HIDDEN_SCALE = 24, 25, (26, 27, 28, 29), 30, 31
#: kOverflowGuard of the reference's integer layer normalization
_OVERFLOW_GUARD = 1 << 20


def _cell_shift(ctx: OpContext) -> int:
    info = ctx.inputs[QL.c_in]
    shift, exact = _log2_exact(float(f32(info.scale)))
    if not exact or not -15 <= shift <= -9:
        raise ctx.fail(
            f"input {QL.c_in} (cell_state_in) has scale {info.scale}; it must be a power of "
            "two between 2^-15 and 2^-9"
        )
    return shift


def _ql_validate(ctx: OpContext) -> HalVersion | None:
    _cell_shift(ctx)
    for i in (CELL_CLIP, PROJ_CLIP):
        value = scalar_value(ctx, i)
        if value is not None and not value >= 0:
            raise ctx.fail(
                f"input {i} ({ctx.op.inputs[i].name}) is {value}; it must be >= 0 "
                "(0 disables clipping)"
            )
    for i in (*INTERMEDIATE, HIDDEN_SCALE):
        value = scalar_value(ctx, i)
        if value is not None and not (value >= 0 and math.isfinite(value)):
            raise ctx.fail(f"input {i} ({ctx.op.inputs[i].name}) is {value}; it must be >= 0")
    return None


def _ql_prepare(ctx: OpContext) -> list[Shape]:
    geo = compiled_cell(ctx, QL)
    return [(geo.n_batch, geo.n_output), (geo.n_batch, geo.n_cell), (geo.n_batch, geo.n_output)]


def _multiplier(ctx: OpContext, scale: float, what: str) -> tuple[int, int]:
    if not (math.isfinite(scale) and scale > 0):
        raise runtime_failure(ctx, f"the effective scale of {what} is {scale}; it must be > 0")
    return quant.quantize_multiplier(scale)


class _QGate:
    """One gate's integer parameters: matmuls, peephole, layer norm."""

    def __init__(self, ctx, a, gate: int, intermediate: float, cell_shift: int) -> None:
        inp, prev = ctx.inputs[QL.input], ctx.inputs[QL.h_in]
        w_info, r_info = ctx.inputs[QL.i2x[gate]], ctx.inputs[QL.r2x[gate]]
        w, r = a[QL.i2x[gate]], a[QL.r2x[gate]]
        self.wt, self.rt = _exact_matrix(w), _exact_matrix(r)
        # PrecomputeZeroPointTimesWeightWithBias(-zero_point, weights, no bias)
        self.w_bias = -inp.zeroPoint * np.asarray(w, i64).sum(axis=1)
        self.r_bias = -prev.zeroPoint * np.asarray(r, i64).sum(axis=1)
        name = ("input", "forget", "cell", "output")[gate]
        mid = f32(intermediate)
        self.w_scale = _multiplier(
            ctx, float(f32(f32(w_info.scale) * f32(inp.scale)) / mid), f"{name} input weights"
        )
        self.r_scale = _multiplier(
            ctx, float(f32(f32(r_info.scale) * f32(prev.scale)) / mid), f"{name} recurrent weights"
        )
        self.peephole = None
        if gate != 2 and a[QL.c2x[(0, 1, None, 2)[gate]]] is not None:
            index = QL.c2x[(0, 1, None, 2)[gate]]
            scale = f32(2.0**cell_shift * float(f32(ctx.inputs[index].scale)) / float(mid))
            self.peephole = (np.asarray(a[index], i64), *_multiplier(ctx, float(scale), name))
        self.norm = None
        ln = a[QL.ln[gate]]
        if ln is not None:
            ln_info = ctx.inputs[QL.ln[gate]]
            limit = min(1, int(10000 * f32(ln_info.scale)))  # the reference's "inv large value"
            m, e = quant.quantize_multiplier(float(f32(ln_info.scale)))
            bias = np.asarray(a[QL.bias[gate]], i64)
            self.norm = (np.asarray(ln, i64), bias, m, e + 12, limit)

    def __call__(self, x: np.ndarray, h: np.ndarray, cell: np.ndarray) -> np.ndarray:
        acc = fx.wrap(_int_matmul(x, self.wt) + self.w_bias, 32)
        g = fx.saturate(fx.mbqm(acc, *self.w_scale), 16)
        acc = fx.wrap(_int_matmul(h, self.rt) + self.r_bias, 32)
        g = fx.saturate(g + fx.mbqm(acc, *self.r_scale), 16)
        if self.peephole is not None:
            w, m, e = self.peephole
            g = fx.saturate(g + fx.mbqm(w * cell, m, e), 16)
        if self.norm is not None:
            g = _layer_norm(g, *self.norm)
        return g


def _layer_norm(g, weights, bias, multiplier, shift, limit) -> np.ndarray:
    """The reference's ApplyLayerNorm (int16 in and out, int64 statistics)."""
    n = g.shape[1]
    total = g.sum(axis=1)
    mean = fx.wrap(fx.trunc_div(total * 1024, n), 32)
    variance = (g * g).sum(axis=1) * (_OVERFLOW_GUARD // n) - mean * mean
    variance = fx.wrap(fx.trunc_div(variance, _OVERFLOW_GUARD), 32)
    variance = np.where(variance < 1, limit, variance)
    inv_m, inv_e = fx.inv_sqrt_multiplier(variance)
    shifted = fx.wrap(1024 * g - mean[:, None], 32)
    rescaled = fx.mbqm(shifted, inv_m[:, None], inv_e[:, None])
    val = fx.wrap(fx.wrap(rescaled * weights, 32) + bias, 32)
    val = fx.wrap(fx.trunc_div(np.where(val > 0, val + 512, val - 512), 1024), 32)
    return fx.saturate(fx.mbqm(val, multiplier, shift), 16)


class _QParams:
    """Everything a QUANTIZED_LSTM step needs that does not depend on the states."""

    def __init__(self, ctx: OpContext, a, cell_shift: int) -> None:
        mids = [float(ctx.scalar(i)) for i in INTERMEDIATE]
        self.cifg = a[QL.i2x[0]] is None
        self.gates = [
            None if (g == 0 and self.cifg) else _QGate(ctx, a, g, mids[g], cell_shift)
            for g in range(4)
        ]
        self.cell_shift = cell_shift
        hidden_scale = float(f32(ctx.scalar(HIDDEN_SCALE)))
        if not hidden_scale > 0:  # validation allows 0; the hidden state divides by it
            raise runtime_failure(
                ctx, f"input {HIDDEN_SCALE} (hidden state scale) is {hidden_scale}; it must be > 0"
            )
        self.hidden_zp = int(fx.wrap(np.asarray(int(ctx.scalar(HIDDEN_ZP)), i64), 8))
        self.hidden = _multiplier(
            ctx, float(f32(2.0**-15 / hidden_scale * 2.0**-15)), "the hidden state"
        )
        cell_scale = f32(ctx.inputs[QL.c_in].scale)
        cell_clip = f32(ctx.scalar(CELL_CLIP))
        self.cell_clip = 0
        if cell_clip > 0:
            self.cell_clip = int(np.clip(cell_clip / cell_scale, f32(-32768), f32(32767)))
        self.projection = None
        if a[QL.proj_w] is not None:
            p_info, prev = ctx.inputs[QL.proj_w], ctx.inputs[QL.h_in]
            pw = np.asarray(a[QL.proj_w], i64)
            pb = a[QL.proj_b]
            bias = np.zeros(pw.shape[0], i64) if pb is None else np.asarray(pb, i64)
            bias = bias + self.hidden_zp * pw.sum(axis=1)
            scale = f32(f32(p_info.scale) * f32(hidden_scale)) / f32(prev.scale)
            clip = f32(ctx.scalar(PROJ_CLIP))
            q_clip = 0
            if clip > 0:
                q_clip = int(np.clip(clip / f32(p_info.scale), f32(-128), f32(127)))
            m, e = _multiplier(ctx, float(scale), "the projection")
            self.projection = (_exact_matrix(pw), bias, m, e, prev.zeroPoint, q_clip)
        self.sigmoid = fx.logistic_table(3)
        self.tanh_gate = fx.tanh_table(3)
        self.tanh_cell = fx.tanh_table(cell_shift + 15)

    def step(self, x, h, c):
        x, h, c = (np.asarray(v, i64) for v in (x, h, c))
        gate_i, gate_f, gate_z, gate_o = self.gates
        f = fx.lookup(self.sigmoid, gate_f(x, h, c))
        z = fx.lookup(self.tanh_gate, gate_z(x, h, c))
        i = 32767 - f if self.cifg else fx.lookup(self.sigmoid, gate_i(x, h, c))
        kept = fx.wrap(fx.rdbpot(f * c, 15), 16)
        added = fx.wrap(fx.rdbpot(i * z, 30 + self.cell_shift), 16)
        cell = fx.saturate(kept + added, 16)
        if self.cell_clip > 0:
            cell = np.clip(cell, -self.cell_clip, self.cell_clip)
        o = fx.lookup(self.sigmoid, gate_o(x, h, cell))
        squashed = fx.lookup(self.tanh_cell, cell)
        hidden = fx.mbqm(o * squashed, *self.hidden) - self.hidden_zp
        hidden = np.clip(hidden, -128, 127)
        if self.projection is None:
            out = hidden
        else:
            pt, bias, m, e, zp, q_clip = self.projection
            acc = fx.wrap(_int_matmul(hidden, pt) + bias, 32)
            out = np.clip(fx.mbqm(acc, m, e) + zp, -128, 127)
            if q_clip > 0:
                out = np.clip(out, -q_clip, q_clip)
        return out.astype(np.int8), cell.astype(np.int16)


def _ql_execute(ctx: OpContext) -> Callable:
    cell_shift = _cell_shift(ctx)
    fail = lambda message: runtime_failure(ctx, message)
    arrays = operand_arrays(ctx)
    params = None
    if all(ctx.is_omitted(i) or ctx.inputs[i].is_constant for i in QL.weights):
        values = [None if ctx.is_omitted(i) else info.value for i, info in enumerate(ctx.inputs)]
        compiled_cell(ctx, QL)
        params = _QParams(ctx, values, cell_shift)

    def qlstm(*tensors: np.ndarray):
        a = arrays(tensors)
        check_cell(ctx, QL, runtime_state(a), fail, time_major=None)
        p = params if params is not None else _QParams(ctx, a, cell_shift)
        out, cell = p.step(a[QL.input], a[QL.h_in], a[QL.c_in])
        return out, cell, out.copy()

    return qlstm


QUANTIZED_LSTM_DEF = OperationDef(
    OperationType.QUANTIZED_LSTM,
    inputs=(
        Arg("input"),
        *cell_args(weight_type=Q8S, bias_type=I32, peephole=Q16),
        Arg("output_state_in"),
        Arg("cell_state_in", Q16),
        *layer_norm_args(type_=Q16),
        Arg("cell_clip", F32),
        Arg("projection_clip", F32),
        *(Arg(f"{g}_intermediate_scale", F32) for g in ("input", "forget", "cell", "output")),
        Arg("hidden_state_zero_point", INT32_SCALAR),
        Arg("hidden_state_scale", F32),
    ),
    outputs=(
        Arg("output_state_out"),
        Arg("cell_state_out", Q16),
        Arg("output"),
    ),
    types={_T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3},
    execute=_ql_execute,
    prepare=_ql_prepare,
    validate=_ql_validate,
)

register(QUANTIZED_LSTM_DEF)

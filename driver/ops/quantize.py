"""QUANTIZE and DEQUANTIZE: float <-> 8-bit quantized, keeping the shape.

QUANTIZE (float32/float16 -> QUANT8_ASYMM / QUANT8_ASYMM_SIGNED) computes, as
the reference does in float32, ``zeroPoint + round(x / scale)`` with
``std::round`` (halves away from zero) and clamps to the type's range with
``std::min``/``std::max``: infinities saturate and NaN becomes the top of
the range (``np.fmin``/``np.fmax`` behave the same way). The quotient is a
float32; rounding it in float64 is exact (``|q| + 0.5`` never rounds there).

DEQUANTIZE (QUANT8_ASYMM, QUANT8_ASYMM_SIGNED, QUANT8_SYMM,
QUANT8_SYMM_PER_CHANNEL -> float32/float16) is the float32 product
``scale * (q - zeroPoint)`` rounded once to the output type; an 8-bit input
has 256 values, so the kernel is a gather from a table built at bind time.
Per-channel data uses the scale of its index along ``channelDim``.

Both accept zero-sized tensors (the reference registers them that way).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant
from nnhal.driver.ops._operand_rules import check_rank, dtype_of
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType, SymmPerChannelQuantParams

_T = OperandType
_V = HalVersion
f32 = np.float32

QUANT_OUT = frozenset({_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED})
FLOAT_OUT = frozenset({_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT16})

#: DEQUANTIZE input rank limit in the reference
DEQUANTIZE_MAX_RANK = 4


def _same_shape_prepare(ctx: OpContext) -> list[Shape]:
    """The output has the input's shape (merged with the output's declared axes)."""
    a, o = ctx.inputs[0].dimensions, ctx.outputs[0].dimensions
    if a is None or o is None:
        return [a if o is None else o]
    if len(a) != len(o) or any(x and y and x != y for x, y in zip(a, o)):
        raise ctx.fail(
            f"output 0 has dimensions {list(o)} but input 0 has {list(a)}; "
            f"{ctx.name} keeps the shape"
        )
    return [tuple(x or y for x, y in zip(a, o))]


# ---------------------------------------------------------------------------
# QUANTIZE
# ---------------------------------------------------------------------------


def _quantize_validate(ctx: OpContext) -> HalVersion | None:
    _same_shape_prepare(ctx)
    return _V.V1_3 if ctx.outputs[0].type == _T.TENSOR_QUANT8_ASYMM_SIGNED else None


def _quantize_execute(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    out = ctx.outputs[0]
    dtype = dtype_of(out.type)
    lo, hi = quant.QUANT_RANGE[dtype]
    scale = f32(out.scale)
    zero_point = np.float64(out.zeroPoint)

    def quantize(x: np.ndarray) -> np.ndarray:
        # float32 quotient (a float16 input is promoted) ...
        q = np.divide(x, scale, dtype=f32)
        # ... rounded half away from zero: floor(|q| + 0.5) is exact in float64
        r = np.abs(q, dtype=np.float64)
        r += 0.5
        np.floor(r, out=r)
        np.copysign(r, q, out=r)
        r += zero_point
        # std::max(lo, std::min(hi, v)): NaN -> hi, like fmin then fmax
        np.fmin(r, hi, out=r)
        np.fmax(r, lo, out=r)
        return r.astype(dtype)

    return quantize


QUANTIZE = register(
    OperationDef(
        OperationType.QUANTIZE,
        inputs=(Arg("input"),),
        outputs=(Arg("output", QUANT_OUT),),
        types={_T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_FLOAT16: _V.V1_2},
        execute=_quantize_execute,
        prepare=_same_shape_prepare,
        validate=_quantize_validate,
    )
)

# ---------------------------------------------------------------------------
# DEQUANTIZE
# ---------------------------------------------------------------------------


def _channel_quant(ctx: OpContext) -> SymmPerChannelQuantParams:
    params = ctx.inputs[0].extraParams
    if not isinstance(params, SymmPerChannelQuantParams):
        raise ctx.fail("input 0 is TENSOR_QUANT8_SYMM_PER_CHANNEL without channelQuant parameters")
    return params


def _dequantize_validate(ctx: OpContext) -> HalVersion | None:
    check_rank(ctx, 0, max_rank=DEQUANTIZE_MAX_RANK)
    _same_shape_prepare(ctx)
    t = ctx.primary_type
    if t == _T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        params = _channel_quant(ctx)
        dims = ctx.inputs[0].dimensions
        if dims is not None and not 0 <= params.channelDim < len(dims):
            raise ctx.fail(
                f"input 0 has channelDim {params.channelDim}; it must be in [0, {len(dims)})"
            )
    # QUANT8_ASYMM to float32 is HAL 1.0; to float16 came with 1.2
    if t == _T.TENSOR_QUANT8_ASYMM and ctx.outputs[0].type == _T.TENSOR_FLOAT16:
        return _V.V1_2
    return None


def _dequantize_execute(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    inp = ctx.inputs[0]
    in_dtype, out_dtype = dtype_of(inp.type), dtype_of(ctx.outputs[0].type)
    domain = quant.table_domain(in_dtype)  # the value of each uint8 view index
    if inp.type != _T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        table = quant.frozen(
            ((domain - inp.zeroPoint).astype(f32) * f32(inp.scale)).astype(out_dtype)
        )

        def dequantize(x: np.ndarray) -> np.ndarray:
            return np.take(table, x.view(np.uint8))

        return dequantize

    params = _channel_quant(ctx)
    axis = params.channelDim
    scales = np.asarray(params.scales, dtype=f32)
    # [256, channels] table; the kernel gathers with (value, channel index)
    table = quant.frozen(
        ((domain - inp.zeroPoint).astype(f32)[:, None] * scales[None, :]).astype(out_dtype)
    )

    def per_channel(x: np.ndarray) -> np.ndarray:
        shape = [1] * x.ndim
        shape[axis] = x.shape[axis]
        channel = np.arange(x.shape[axis]).reshape(shape)
        return table[x.view(np.uint8), channel]

    return per_channel


DEQUANTIZE = register(
    OperationDef(
        OperationType.DEQUANTIZE,
        inputs=(Arg("input"),),
        outputs=(Arg("output", FLOAT_OUT),),
        types={
            _T.TENSOR_QUANT8_ASYMM: _V.V1_0,
            _T.TENSOR_QUANT8_SYMM: _V.V1_2,
            _T.TENSOR_QUANT8_SYMM_PER_CHANNEL: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_dequantize_execute,
        prepare=_same_shape_prepare,
        validate=_dequantize_validate,
    )
)

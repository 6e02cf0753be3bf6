"""FULLY_CONNECTED: ``output = activation(input @ weights.T + bias)``.

The input (rank 2 to 4) is flattened to ``[batch, input_size]`` where
``input_size`` is the weights' second axis; the output is
``[batch, num_units]``. Float16 computes in float32. Quantized FC follows the
reference: int32 accumulation of ``(input - zp_in) * (weights - zp_w)`` plus
the int32 bias, then a fixed-point requantization by
``input_scale * weights_scale / output_scale`` and the activation clamp. The
accumulation runs as a float64 BLAS matmul, which is exact for 8-bit
operands (every partial sum stays far below 2**53). Constant weights are
converted and transposed once, when the kernel is bound.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import quant
from nnhal.driver.ops._operand_rules import (
    INT32_SCALAR,
    QUANT8,
    TENSOR_INT32,
    bound_activation,
    check_activation,
    check_rank,
    dtype_of,
    fuse_float_activation,
    runtime_failure,
)
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32


def _bias_types(primary: int) -> frozenset:
    return TENSOR_INT32 if primary in QUANT8 else frozenset({primary})


def _product_scale(ctx: OpContext) -> float:
    # A float32 product in the reference (Shape.scale is a float).
    return float(f32(ctx.inputs[0].scale) * f32(ctx.inputs[1].scale))


def _validate(ctx: OpContext) -> HalVersion | None:
    check_activation(ctx, 3)
    check_rank(ctx, 0, min_rank=2, max_rank=4)
    check_rank(ctx, 1, exact=2)
    check_rank(ctx, 2, exact=1)
    weights, bias = ctx.inputs[1].dimensions, ctx.inputs[2].dimensions
    if weights and bias and weights[0] and bias[0] and weights[0] != bias[0]:
        raise ctx.fail(
            f"input 2 (bias) has {bias[0]} elements but input 1 (weights) has "
            f"{weights[0]} units (axis 0); they must match"
        )
    version = None
    if ctx.primary_type in QUANT8:
        product = _product_scale(ctx)
        bias_scale = float(f32(ctx.inputs[2].scale))
        # GetQuantizedConvolutionMultipler: bias scale == input scale * weights scale.
        if abs(product - bias_scale) > 1e-6 * min(product, bias_scale):
            raise ctx.fail(
                f"input 2 (bias) has scale {ctx.inputs[2].scale}; it must equal input scale * "
                f"weights scale ({product})"
            )
        # Before HAL 1.2, QUANT8_ASYMM required outputScale > inputScale * weightsScale.
        if ctx.primary_type == _T.TENSOR_QUANT8_ASYMM and not f32(ctx.outputs[0].scale) > product:
            version = _V.V1_2
    return version


def _prepare(ctx: OpContext) -> list[Shape]:
    inp, weights = ctx.inputs[0].dimensions, ctx.inputs[1].dimensions
    # Unknown weight axes (0) leave units and batch unknown.
    units = weights[0] if weights else 0
    input_size = weights[1] if weights else 0
    batch = 0
    if inp is not None and input_size and all(inp):
        count = 1
        for d in inp:
            count *= d
        if count % input_size:
            raise ctx.fail(
                f"input 0 has {count} elements, not a multiple of the weights' input size "
                f"{input_size} (input 1, axis 1)"
            )
        batch = count // input_size
    return [(batch, units)]


#: weights up to this many elements are transposed into a contiguous copy once (tiny
#: matmuls in loop bodies run a little faster on it); larger ones are used as a
#: transposed view: BLAS reads a transposed operand at the same speed, while the
#: strided copy of a [1000, 1024] matrix took longer than onnxruntime's whole
#: session creation for a MobileNet
COPY_TRANSPOSE_MAX = 1 << 16


def transposed_weights(weights: np.ndarray) -> np.ndarray:
    """[units, input_size] weights as the float32 [input_size, units] matmul operand."""
    wt = weights.astype(f32, copy=False).T
    if weights.size <= COPY_TRANSPOSE_MAX:
        wt = np.ascontiguousarray(wt)
    return wt


def _float_kernel(ctx: OpContext, activation: int) -> Callable[..., np.ndarray]:
    out_dtype = dtype_of(ctx.outputs[0].type)
    weights_const, bias_const = ctx.constant(1), ctx.constant(2)

    def bad_size(x: np.ndarray, size: int) -> Exception:
        return runtime_failure(
            ctx, f"input 0 has {x.size} elements, not a multiple of input size {size}"
        )

    # Float16 runs in float32: matmul promotes a float16 input against float32
    # weights, and the bias adds into the float32 result.
    if weights_const is not None and bias_const is not None:
        wt = transposed_weights(weights_const)
        bc = bias_const.astype(f32)
        size = wt.shape[0]
        dims = ctx.inputs[0].dimensions
        if dims is not None and len(dims) == 2 and dims[1] == size:
            # The common case, and the hot one in loop bodies: the input is
            # already [batch, size] (the executor guarantees declared axes), so
            # no reshape and no size check (0.24 µs of 1.4 µs for a [1, 2] input).
            def fc(x: np.ndarray, _w: np.ndarray, _b: np.ndarray) -> np.ndarray:
                out = x @ wt
                out += bc
                return out

        else:

            def fc(x: np.ndarray, _w: np.ndarray, _b: np.ndarray) -> np.ndarray:
                if x.size % size:
                    raise bad_size(x, size)
                out = np.matmul(x.reshape(-1, size), wt)
                out += bc
                return out

    else:

        def fc(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
            size = w.shape[1]
            if x.size % size:
                raise bad_size(x, size)
            out = np.matmul(x.reshape(-1, size), w.astype(f32, copy=False).T)
            out += b
            return out

    kernel = fuse_float_activation(fc, activation)
    if out_dtype == np.float32:
        return kernel
    return lambda x, w, b: kernel(x, w, b).astype(out_dtype)


def _quant_kernel(ctx: OpContext, activation: int) -> Callable[..., np.ndarray]:
    inp, weights, out = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    dtype = dtype_of(out.type)
    multiplier, exponent = quant.quantize_multiplier(_product_scale(ctx) / float(f32(out.scale)))
    lo, hi = quant.activation_range(activation, out.scale, out.zeroPoint, dtype)
    zp_in, zp_w, zp_out = inp.zeroPoint, weights.zeroPoint, out.zeroPoint

    def centered_weights(w: np.ndarray) -> np.ndarray:
        # a transposed view: BLAS takes it as is (the integer sums are exact in any order),
        # while copying a large matrix's transpose is a cache-hostile strided copy
        return (w.astype(np.float64) - zp_w).T

    weights_const = ctx.constant(1)
    wt = None if weights_const is None else centered_weights(weights_const)

    def fc(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        w_t = wt if wt is not None else centered_weights(w)
        size = w_t.shape[0]
        if x.size % size:
            raise runtime_failure(
                ctx, f"input 0 has {x.size} elements, not a multiple of input size {size}"
            )
        # Exact: |(x - zp) * (w - zp)| <= 255 * 255, summed far below 2**53.
        acc = (x.reshape(-1, size).astype(np.float64) - zp_in) @ w_t
        acc = acc.astype(np.int64) + b
        res = quant.multiply_by_quantized_multiplier(acc, multiplier, exponent) + zp_out
        return np.clip(res, lo, hi).astype(dtype)

    return fc


def _execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    activation = bound_activation(ctx, 3)
    if ctx.primary_type in QUANT8:
        return _quant_kernel(ctx, activation)
    return _float_kernel(ctx, activation)


FULLY_CONNECTED = register(
    OperationDef(
        OperationType.FULLY_CONNECTED,
        inputs=(
            Arg("input"),
            Arg("weights"),
            Arg("bias", _bias_types),
            Arg("activation", INT32_SCALAR),
        ),
        outputs=(Arg("output"),),
        types={
            _T.TENSOR_FLOAT32: _V.V1_0,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_0,
            _T.TENSOR_FLOAT16: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_execute,
        prepare=_prepare,
        validate=_validate,
    )
)

"""Kernels of SoftClip (y = limit * tanh(x / limit)), two implementations.

The float16 one is registered FAST for FLOAT_16 operands; the generic one
(GLACIAL) runs everything else the definition allows.
"""

import numpy as np
from nnhal.driver.op_packages.runtime import FAST, GLACIAL, implementation


@implementation(cost=FAST, types={"x": "FLOAT_16"})
def soft_clip_f16(x, *, limit=1.0):
    """FLOAT_16 in, FLOAT_16 out (computed in float32, rounded once)."""
    limit = np.float32(limit)
    return (limit * np.tanh(x.astype(np.float32) / limit)).astype(np.float16)


@implementation(cost=GLACIAL)
def soft_clip(x, *, limit=1.0, operands=None):
    """Any type the definition allows: floats directly, quantized ones through their real
    values (scale and zeroPoint from ``operands``)."""
    if x.dtype.kind == "f":
        return limit * np.tanh(x / np.asarray(limit, x.dtype))
    xi, yo = operands["inputs"][0], operands["outputs"][0]
    real = (x.astype(np.float32) - xi.zeroPoint) * xi.scale
    y = np.float32(limit) * np.tanh(real / np.float32(limit))
    info = np.iinfo(x.dtype)
    return np.clip(np.round(y / yo.scale) + yo.zeroPoint, info.min, info.max).astype(x.dtype)


@implementation(cost=FAST, types={"x": "UFIXED_POINT_8"})
def soft_clip_u8(x, *, limit=1.0, operands=None):
    """UFIXED_POINT_8 (TENSOR_QUANT8_ASYMM): dequantize, clip, requantize to y's scale/zeroPoint."""
    xi, yo = operands["inputs"][0], operands["outputs"][0]
    real = (x.astype(np.float32) - xi.zeroPoint) * xi.scale
    y = limit * np.tanh(real / np.float32(limit))
    return np.clip(np.round(y / yo.scale) + yo.zeroPoint, 0, 255).astype(np.uint8)

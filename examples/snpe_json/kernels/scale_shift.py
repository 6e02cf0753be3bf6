"""Kernel of ScaleShift: y = x * scale + shift.

Floats (CPU float32, GPU float16) are computed in their own type; DSP FIXED_8
(TENSOR_QUANT8_ASYMM) operands are dequantized with the input's scale and
zeroPoint and requantized to the output's.
"""

import numpy as np
from nnhal.driver.op_packages.runtime import GLACIAL, implementation


@implementation(cost=GLACIAL)
def scale_shift(x, *, scale, shift=0.0, operands=None):
    if x.dtype.kind == "f":
        t = x.dtype.type  # the scalars in x's type: float32 stays float32
        return x * t(scale) + t(shift)
    xi, yo = operands["inputs"][0], operands["outputs"][0]
    real = (x.astype(np.float32) - xi.zeroPoint) * np.float32(xi.scale)
    y = real * np.float32(scale) + np.float32(shift)
    return np.clip(np.round(y / np.float32(yo.scale)) + yo.zeroPoint, 0, 255).astype(np.uint8)

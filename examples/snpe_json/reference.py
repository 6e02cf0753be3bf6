"""A plain numpy reference for ScaleShift (`nnhal oppkg test --reference`): y = x * scale + shift,
in real values (FIXED_8 operands through their scale and zeroPoint)."""

import numpy as np


def scale_shift(x, *, scale, shift=0.0, operands=None):
    xi, yo = operands["inputs"][0], operands["outputs"][0]
    real = x.astype(np.float64) if x.dtype.kind == "f" else (x - np.float64(xi.zeroPoint)) * xi.scale
    y = real * scale + shift
    if x.dtype.kind == "f":
        return y.astype(x.dtype)
    return np.clip(np.round(y / yo.scale) + yo.zeroPoint, 0, 255).astype(np.uint8)

"""Plain numpy references for the SoftClipPackage operations (`nnhal oppkg test --reference`).

Called like the kernels; ``operands`` (scale, zeroPoint of each operand) lets the
reference handle quantized operands too, so the UFIXED_POINT_8 kernel is compared.
"""

import numpy as np


def _real(x, info):
    if x.dtype.kind == "f":
        return x.astype(np.float64)
    return (x.astype(np.float64) - info.zeroPoint) * info.scale


def _back(y, like, info):
    if like.dtype.kind == "f":
        return y.astype(like.dtype)
    q = np.round(y / info.scale) + info.zeroPoint
    limits = np.iinfo(like.dtype)
    return np.clip(q, limits.min, limits.max).astype(like.dtype)


def soft_clip(x, *, limit=1.0, operands=None):
    xi, yo = operands["inputs"][0], operands["outputs"][0]
    y = limit * np.tanh(_real(x, xi) / limit)
    return _back(y, x, yo)


def add_soft_clip(a, b, *, limit=1.0, operands=None):
    ai, bi, yo = operands["inputs"][0], operands["inputs"][1], operands["outputs"][0]
    y = limit * np.tanh((_real(a, ai) + _real(b, bi)) / limit)
    return _back(y, a, yo)


def relu(x):
    return np.maximum(x, 0).astype(x.dtype)

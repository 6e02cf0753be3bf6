"""Operands shared by the convolution tests (tests/test_ops_conv*.py): the operand types,
per-channel quantized filters, scalar lists, and the standard input/filter/bias operands."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from ops_harness import RNG, X, f32, i32, s8, scalar, u8

from nnhal.types import OperandType as T
from nnhal.types import SymmPerChannelQuantParams

F32, F16, U8, S8 = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)
SAME, VALID = 1, 2
TRUE, FALSE = scalar(True, T.BOOL), scalar(False, T.BOOL)


@dataclass(frozen=True)
class PerChannel(X):
    """A TENSOR_QUANT8_SYMM_PER_CHANNEL operand (channelQuant scales along channel_dim)."""

    scales: tuple = ()
    channel_dim: int = 0

    def info(self):
        params = SymmPerChannelQuantParams(tuple(self.scales), self.channel_dim)
        return replace(super().info(), extraParams=params)

    def real(self) -> np.ndarray:
        shape = [1] * self.data.ndim
        shape[self.channel_dim] = -1
        return self.data.astype(np.float64) * np.reshape(self.scales, shape)


def per_channel(shape, scales, channel_dim=0, const=True) -> PerChannel:
    data = RNG.integers(-127, 127, shape, endpoint=True, dtype=np.int8)
    return PerChannel(
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL, data, "data", 0.0, 0, const, tuple(scales), channel_dim
    )


def ints(*values) -> list[X]:
    return [scalar(v) for v in values]


def bias_for(n: int, scale: float) -> X:
    return i32((n,), scale=scale, const=True)


X1 = f32((2, 5, 6, 3))
W1, B1 = f32((4, 3, 3, 3), const=True), f32((4,), const=True)
XQ = u8((1, 5, 5, 3), scale=0.05, zp=120)
WQ = u8((4, 3, 3, 3), scale=0.02, zp=130, const=True)
XS = s8((1, 5, 5, 3), scale=0.05, zp=-3)
WS = s8((4, 3, 3, 3), scale=0.02, zp=4, const=True)
PC_SCALES = (0.01, 0.02, 0.005, 0.03)
WPC = per_channel((4, 3, 3, 3), PC_SCALES)
WPC_S8 = per_channel((4, 2, 2, 3), PC_SCALES)
XN = f32((1, 3, 6, 5))  # NCHW: C=3, H=6, W=5

"""Kernel of ScaleShift: y = x * scale + shift."""

from nnhal.driver.op_packages.runtime import GLACIAL, implementation


@implementation(cost=GLACIAL)
def scale_shift(x, *, scale, shift=0.0):
    t = x.dtype.type  # the scalars in x's type: float32 stays float32
    return x * t(scale) + t(shift)

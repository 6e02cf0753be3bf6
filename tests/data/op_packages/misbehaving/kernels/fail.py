"""Fail: raises, as a kernel with a bug does."""

from nnhal.driver.op_packages.runtime import implementation


@implementation()
def fail(x):
    raise ValueError(f"bad input: x has {x.size} elements")

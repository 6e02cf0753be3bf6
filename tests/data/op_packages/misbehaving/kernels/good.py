"""Good: y = x + 1 (the well-behaved kernel beside the others)."""

from nnhal.driver.op_packages.runtime import implementation


@implementation()
def good(x):
    return x + 1

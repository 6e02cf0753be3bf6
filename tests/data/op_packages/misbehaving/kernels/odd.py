"""Odd: returns an object of its own class instead of an array."""

from nnhal.driver.op_packages.runtime import implementation


class Box:
    def __init__(self, value):
        self.value = value


@implementation()
def odd(x):
    return Box(x)

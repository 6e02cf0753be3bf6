"""Nap: sleeps `ms` milliseconds, then y = x + 1."""

import time

from nnhal.driver.op_packages.runtime import implementation


@implementation()
def nap(x, *, ms):
    time.sleep(ms / 1000)
    return x + 1

"""Crash: a segmentation fault (reads address 0 through ctypes)."""

import ctypes

from nnhal.driver.op_packages.runtime import implementation


@implementation()
def crash(x):
    ctypes.string_at(0)

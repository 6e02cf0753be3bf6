"""Hang: never returns."""

import time

from nnhal.driver.op_packages.runtime import implementation


@implementation()
def hang(x):
    while True:
        time.sleep(1)

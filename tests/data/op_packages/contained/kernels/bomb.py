"""Bomb: allocates far more memory than a worker may have (an allocation bomb)."""

import numpy as np
from nnhal.driver.op_packages.runtime import implementation


@implementation()
def bomb(x):
    blocks = [np.ones(1 << 27, np.float64) for _ in range(64)]  # 64 GiB if nothing stops it
    return x + len(blocks)

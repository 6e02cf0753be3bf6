"""A plain numpy reference for SquareAdd (`nnhal oppkg test --reference`): z = alpha * x * x + y,
computed in float64 and rounded once to the output type."""

import numpy as np


def square_add(x, y, *, alpha=1.0):
    return (alpha * x.astype(np.float64) ** 2 + y.astype(np.float64)).astype(x.dtype)

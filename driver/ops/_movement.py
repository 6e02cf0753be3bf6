"""Data movement rules of the tensor-shaping family.

The reference computes a moved tensor's output with the *input's* scale and
zero point and fails an execution whose model output declares other ones, so
validation here rejects a quantized output whose scale or zero point differ
from the input's. The reference also refuses zero-sized inputs for every
operation of the family except TRANSPOSE: their registrations say
``zero_sized_inputs=False``.
"""

from __future__ import annotations

import numpy as np
from nnhal.driver.ops.common import QUANT8
from nnhal.driver.ops.registry import OpContext

from nnhal.types import OperandType


def check_same_quant(ctx: OpContext, *outputs: int) -> None:
    """Quantized outputs must keep input 0's scale and zero point (data is moved, not requantized)."""
    src = ctx.inputs[0]
    if src.type not in QUANT8:
        return
    for i in outputs or range(len(ctx.outputs)):
        out = ctx.outputs[i]
        if np.float32(out.scale) != np.float32(src.scale) or out.zeroPoint != src.zeroPoint:
            raise ctx.fail(
                f"output {i} has scale {out.scale} and zero point {out.zeroPoint}; with "
                f"{OperandType(src.type).name} they must equal input 0's (scale {src.scale}, "
                f"zero point {src.zeroPoint})"
            )

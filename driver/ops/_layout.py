"""Helpers of the tensor-shaping family (issue 3): data layout and data movement.

**NCHW/NHWC** (the shaping family's copy): BATCH_TO_SPACE_ND,
SPACE_TO_BATCH_ND, DEPTH_TO_SPACE and SPACE_TO_DEPTH take an optional BOOL
``layout`` input (true = NCHW, since HAL 1.2). As the reference CpuExecutor
does, the kernels are written for NHWC and an NCHW input is viewed as NHWC on
the way in and transposed back on the way out. The convolution family
(issue 4) keeps its own copy of these conversions for now.

**Data movement rules** shared by the family: the reference computes a
moved tensor's output with the *input's* scale and zero point and fails an
execution whose model output declares other ones, so validation here rejects
a quantized output whose scale or zero point differ from the input's; the
reference also refuses zero-sized inputs for every operation of the family
except TRANSPOSE.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops.common import QUANT8, runtime_failure
from nnhal.driver.ops.registry import OpContext, Shape

from nnhal.types import OperandType

#: axis order that views an NCHW tensor as NHWC, and back
NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


def layout_is_nchw(ctx: OpContext, index: int) -> bool:
    """The optional ``layout`` scalar at ``index`` (False = NHWC when left off).

    Raises ValueNotConstant when the layout is only known at run time.
    """
    return bool(ctx.scalar(index, False))


def check_layout_present(ctx: OpContext, index: int) -> None:
    """A ``layout`` input may be left off the list, but never given as NO_VALUE."""
    if index < len(ctx.inputs) and ctx.inputs[index].omitted:
        raise ctx.fail(
            f"input {index} (layout) has no value; leave it off the input list for NHWC "
            "or give a BOOL"
        )


def to_nhwc(dims: Shape, nchw: bool) -> Shape:
    """A rank-4 shape in the operation's layout, as NHWC."""
    if dims is None or not nchw:
        return dims
    return tuple(dims[i] for i in NCHW_TO_NHWC)


def from_nhwc(dims: Shape, nchw: bool) -> Shape:
    """A rank-4 NHWC shape, in the operation's layout."""
    if dims is None or not nchw:
        return dims
    return tuple(dims[i] for i in NHWC_TO_NCHW)


def in_layout(fn: Callable[..., np.ndarray], nchw: bool) -> Callable[..., np.ndarray]:
    """An NHWC kernel ``fn(x, *rest)`` made to take and give tensors in the given layout.

    NHWC returns ``fn`` itself (nothing added on the hot path).
    """
    if not nchw:
        return fn

    def nchw_kernel(x: np.ndarray, *rest) -> np.ndarray:
        return fn(x.transpose(NCHW_TO_NHWC), *rest).transpose(NHWC_TO_NCHW).copy()

    return nchw_kernel


# ---------------------------------------------------------------------------
# Data movement rules
# ---------------------------------------------------------------------------


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


def zero_sized_failure(ctx: OpContext, index: int = 0):
    """The GENERAL_FAILURE of a kernel given a zero-sized tensor (raise the result)."""
    return runtime_failure(ctx, f"input {index} is zero-sized; this operation does not support it")

"""NCHW and NHWC: the optional layout flag, and shapes and tensors in either layout.

Operations that take a ``layout`` input (a BOOL, true = NCHW, since HAL 1.2)
are written for NHWC, as in the reference CpuExecutor: an NCHW input is
viewed as NHWC on the way in and the result transposed back on the way out.
Everything that converts between the two lives here, once.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops.registry import OpContext, Shape

#: axis order that views an NCHW tensor as NHWC, and back
NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


def layout_is_nchw(ctx: OpContext) -> bool:
    """The call's ``layout`` flag (``OperationDef.layout``; NHWC when left off).

    Raises ValueNotConstant when the layout is only known at run time.
    """
    index = ctx.op.layout_index(ctx)
    return False if index is None else bool(ctx.scalar(index, False))


def layout_if_constant(ctx: OpContext) -> bool | None:
    """The call's ``layout`` flag, or None when it is only known at run time."""
    index = ctx.op.layout_index(ctx)
    if index is None:
        return False
    value = ctx.constant(index)
    return None if value is None else bool(value.item())


# -- shapes ------------------------------------------------------------------


def nhwc_dims(dims: Shape, nchw: bool) -> tuple[int, int, int, int] | None:
    """(N, H, W, C) of a rank-4 shape given in the op's layout (0 = unknown)."""
    if dims is None:
        return None
    n, a, b, c = dims
    return (n, b, c, a) if nchw else (n, a, b, c)


def dims_in_layout(dims: Shape, nchw: bool) -> Shape:
    """A rank-4 NHWC shape in the operation's layout."""
    if dims is None or not nchw:
        return dims
    return tuple(dims[i] for i in NHWC_TO_NCHW)


def layout_dims(n: int, h: int, w: int, c: int, nchw: bool) -> tuple[int, int, int, int]:
    return (n, c, h, w) if nchw else (n, h, w, c)


# -- tensors -----------------------------------------------------------------


def to_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    """A tensor in the op's layout, viewed as NHWC (no copy)."""
    return x.transpose(NCHW_TO_NHWC) if nchw else x


def from_nhwc(y: np.ndarray, nchw: bool) -> np.ndarray:
    """An NHWC result in the op's layout, as an array that owns its data."""
    return owned(y.transpose(NHWC_TO_NCHW) if nchw else y)


def owned(a: np.ndarray) -> np.ndarray:
    """``a`` as a C-contiguous array owning its data (copied only when it is not).

    The executor copies a main output that is a view; returning owned arrays
    spares that copy.
    """
    if a.base is None and a.flags.c_contiguous:
        return a
    return a.copy(order="C")


def in_layout(fn: Callable[..., np.ndarray], nchw: bool) -> Callable[..., np.ndarray]:
    """An NHWC kernel ``fn(x, *rest)`` made to take and give tensors in the given layout.

    NHWC returns ``fn`` itself (nothing added on the hot path).
    """
    if not nchw:
        return fn

    def nchw_kernel(x: np.ndarray, *rest) -> np.ndarray:
        return fn(x.transpose(NCHW_TO_NHWC), *rest).transpose(NHWC_TO_NCHW).copy()

    return nchw_kernel

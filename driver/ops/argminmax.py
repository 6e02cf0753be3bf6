"""ARGMAX, ARGMIN and TOPK_V2.

ARGMAX/ARGMIN give the TENSOR_INT32 index of the extreme value along one
axis (an INT32 scalar, negative counts from the end), dropping that axis; a
1-D input gives shape [1]. On ties the first index wins, as the reference's
strict comparison does (and numpy's argmax/argmin). Quantized inputs compare
raw integers (the scale is positive, so the order is the real order). Not
emulated: with NaNs the reference keeps the first element if it is NaN and
otherwise skips NaNs, where numpy returns the first NaN's index.

TOPK_V2 returns the k largest values of each row (last axis) and their
indices, largest first. The reference sorts (value, index) pairs and reverses
them, so equal values come out highest index first, and a tie at the k-th
place keeps the higher indices. The kernel packs each pair into one unique
uint64 (an order-preserving key of the value, then the index), so a plain
``np.partition`` (O(n)) and a sort of the k survivors give exactly that order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._reduce_util import resolve_axis
from nnhal.driver.ops.common import (
    INT32_SCALAR,
    TENSOR_INT32,
    check_rank,
    dtype_of,
    runtime_failure,
)
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion

_TYPES = {
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_FLOAT32: _V.V1_2,
    _T.TENSOR_INT32: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}

# ---------------------------------------------------------------------------
# ARGMAX / ARGMIN
# ---------------------------------------------------------------------------

AXIS = "input 1 (axis)"


def _constant_int(ctx: OpContext, index: int) -> int | None:
    value = ctx.constant(index)
    return None if value is None else int(value.reshape(-1)[0])


def _arg_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, min_rank=1)
    dims, axis = ctx.inputs[0].dimensions, _constant_int(ctx, 1)
    if dims is not None and axis is not None:
        resolve_axis(axis, len(dims), AXIS, ctx.fail)


def _arg_shape(dims: tuple, axis: int) -> tuple:
    return tuple(d for i, d in enumerate(dims) if i != axis) if len(dims) > 1 else (1,)


def _arg_prepare(ctx: OpContext) -> list[Shape]:
    dims, axis = ctx.inputs[0].dimensions, _constant_int(ctx, 1)
    if dims is None:
        return [None]
    if axis is None:
        return [(0,) * (len(dims) - 1) if len(dims) > 1 else (1,)]
    return [_arg_shape(dims, resolve_axis(axis, len(dims), AXIS, ctx.fail))]


def _arg_execute(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    # the ndarray methods skip np.argmax's dispatch wrapper (about 1 µs a call)
    find = np.ndarray.argmin if ctx.op.type == OperationType.ARGMIN else np.ndarray.argmax
    axis = int(ctx.scalar(1))
    dims = ctx.inputs[0].dimensions

    def empty_axis() -> Exception:
        return runtime_failure(ctx, f"{AXIS} selects an axis of size 0")

    if dims is not None:
        axis = resolve_axis(axis, len(dims), AXIS, ctx.fail)
        if len(dims) == 1:

            def vector(x: np.ndarray) -> np.ndarray:
                if not x.size:
                    raise empty_axis()
                return np.array([find(x)], np.int32)

            return vector

        def kernel(x: np.ndarray) -> np.ndarray:
            if not x.shape[axis]:
                raise empty_axis()
            return find(x, axis).astype(np.int32)

        return kernel

    def dynamic(x: np.ndarray) -> np.ndarray:
        a = resolve_axis(axis, x.ndim, AXIS, lambda m: runtime_failure(ctx, m))
        if not x.shape[a]:
            raise empty_axis()
        return find(x, a).astype(np.int32).reshape(_arg_shape(x.shape, a))

    return dynamic


def _register_arg(op: OperationType) -> OperationDef:
    return register(
        OperationDef(
            op,
            inputs=(Arg("input"), Arg("axis", INT32_SCALAR)),
            outputs=(Arg("output", TENSOR_INT32),),
            types=_TYPES,
            execute=_arg_execute,
            prepare=_arg_prepare,
            validate=_arg_validate,
        )
    )


ARGMAX = _register_arg(OperationType.ARGMAX)
ARGMIN = _register_arg(OperationType.ARGMIN)

# ---------------------------------------------------------------------------
# TOPK_V2
# ---------------------------------------------------------------------------


def _check_k(ctx: OpContext, k: int, last: int | None, fail) -> None:
    if k <= 0:
        raise fail(f"input 1 (k) is {k}; it must be positive")
    if last and k > last:
        raise fail(f"input 1 (k) is {k}; it must not exceed the last dimension of input 0 ({last})")


def _topk_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, min_rank=1)
    dims, k = ctx.inputs[0].dimensions, _constant_int(ctx, 1)
    if k is not None:
        _check_k(ctx, k, dims[-1] if dims else None, ctx.fail)


def _topk_prepare(ctx: OpContext) -> list[Shape]:
    dims, k = ctx.inputs[0].dimensions, _constant_int(ctx, 1)
    if dims is None:
        return [None, None]
    if k is not None:
        _check_k(ctx, k, dims[-1], ctx.fail)
    shape = tuple(dims[:-1]) + (k or 0,)
    return [shape, shape]


_LOW32 = np.uint64(0xFFFFFFFF)


def _order_keys(dtype: np.dtype) -> Callable[[np.ndarray], np.ndarray]:
    """x -> uint64 values whose unsigned order is the element order (ties equal).

    Floats map their bits so that the unsigned order is the numeric one, after
    turning -0.0 into +0.0 (the reference compares them equal); NaNs end up
    beyond the infinities (their order is unspecified in the reference).
    """
    if dtype.kind == "f":
        bits = np.dtype(f"uint{dtype.itemsize * 8}")
        sign = bits.type(1 << (dtype.itemsize * 8 - 1))
        zero = dtype.type(0)

        def float_keys(x: np.ndarray) -> np.ndarray:
            v = (x + zero).view(bits)
            return np.where(v & sign, ~v, v | sign).astype(np.uint64)

        return float_keys
    offset = -np.iinfo(dtype).min  # signed ints shift to non-negative
    return lambda x: (x.astype(np.int64) + offset).astype(np.uint64)


def _topk_execute(ctx: OpContext) -> Callable[[np.ndarray], tuple]:
    k = int(ctx.scalar(1))
    dims = ctx.inputs[0].dimensions
    _check_k(ctx, k, dims[-1] if dims else None, ctx.fail)
    keys_of = _order_keys(dtype_of(ctx.inputs[0].type))

    def topk(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = x.shape[-1] if x.ndim else 0
        if k > n:
            raise runtime_failure(ctx, f"input 1 (k) is {k}; the last dimension of input 0 is {n}")
        # (value, index) in one unique uint64 per element: any partition or sort
        # then gives the reference's pair order exactly, ties included.
        keys = keys_of(x) << np.uint64(32)
        keys |= np.arange(n, dtype=np.uint64)
        if k < n:
            keys = np.partition(keys, n - k, axis=-1)[..., n - k :]
        keys.sort(axis=-1)
        order = (keys[..., ::-1] & _LOW32).astype(np.int32)
        return np.take_along_axis(x, order, axis=-1), order

    return topk


TOPK_V2 = register(
    OperationDef(
        OperationType.TOPK_V2,
        inputs=(Arg("input"), Arg("k", INT32_SCALAR)),
        outputs=(Arg("values"), Arg("indices", TENSOR_INT32)),
        types=_TYPES,
        execute=_topk_execute,
        zero_sized_inputs=False,
        prepare=_topk_prepare,
        validate=_topk_validate,
    )
)

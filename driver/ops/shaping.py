"""SQUEEZE, EXPAND_DIMS, TRANSPOSE, TILE: operations that rearrange a tensor's axes.

No arithmetic: quantized data is moved as is, so a quantized output must keep
the input's scale and zero point (see _layout.check_same_quant). Parameter
tensors (squeeze dims, perm, multiples) may be constants, checked fully at
validation and bound once, or run-time inputs checked by the kernel
(GENERAL_FAILURE on a bad value). Kernels return fresh arrays.

Reference details kept here: SQUEEZE and TRANSPOSE take their optional tensor
as NO_VALUE (the input list always has 2 entries); a SQUEEZE that removes
every axis gives a [1] tensor (NNAPI has no rank-0 tensors; the reference's
empty shape resolves to the declared [1]); TRANSPOSE is the only operation
of the family that accepts zero-sized inputs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._movement import check_same_quant
from nnhal.driver.ops.common import (
    INT32_SCALAR,
    TENSOR_INT32,
    check_rank,
    int_vector,
    runtime_failure,
)
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.errors import HalError
from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion

#: SQUEEZE, TRANSPOSE limit their input to rank 4 (the reference's checks)
MAX_RANK = 4

_MOVE_TYPES = {
    _T.TENSOR_FLOAT32: _V.V1_1,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_1,
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}
_V12_TYPES = {
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_FLOAT32: _V.V1_2,
    _T.TENSOR_INT32: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}


def _check_two_inputs(ctx: OpContext, name: str) -> None:
    # The optional tensor is omitted with NO_VALUE, never by leaving it off.
    if len(ctx.inputs) != 2:
        raise ctx.fail(
            f"expected 2 inputs, got {len(ctx.inputs)}; input 1 ({name}) is omitted with "
            "NO_VALUE, not left off"
        )


def _vector_length(ctx: OpContext, index: int) -> int | None:
    dims = ctx.inputs[index].dimensions
    return dims[0] if dims and dims[0] else None


# ---------------------------------------------------------------------------
# SQUEEZE
# ---------------------------------------------------------------------------


def _squeeze_axes(
    dims: tuple[int, ...], values: list[int] | None, fail: Callable[[str], HalError]
) -> frozenset[int] | None:
    """Axes SQUEEZE removes; an axis of size 0 is unknown (model shapes).

    ``values`` None (omitted) removes every axis of size 1; the answer is then
    None when an unknown axis might be 1.
    """
    rank = len(dims)
    if values is None:
        if any(d == 0 for d in dims):
            return None
        return frozenset(i for i, d in enumerate(dims) if d == 1)
    axes = set()
    for v in values:
        axis = v + rank if v < 0 else v
        if not 0 <= axis < rank:
            raise fail(f"squeeze dim {v} is out of range for rank {rank}; use [-{rank}, {rank})")
        if dims[axis] not in (0, 1):
            raise fail(f"squeeze dim {v} selects axis {axis} of size {dims[axis]}; it must be 1")
        axes.add(axis)
    return frozenset(axes)


def _squeezed(dims: tuple[int, ...], axes: frozenset[int]) -> tuple[int, ...]:
    return tuple(d for i, d in enumerate(dims) if i not in axes) or (1,)


def _squeeze_validate(ctx: OpContext) -> None:
    _check_two_inputs(ctx, "squeeze dims")
    check_rank(ctx, 0, max_rank=MAX_RANK)
    check_rank(ctx, 1, exact=1)
    check_same_quant(ctx)
    _squeeze_prepare(ctx)


def _squeeze_prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    if dims is None:
        return [None]
    if ctx.is_omitted(1):
        values = None
    else:
        values = int_vector(ctx, 1)
        if values is None:
            return [None]
    axes = _squeeze_axes(tuple(dims), values, lambda m: ctx.fail(f"input 1 (squeeze dims): {m}"))
    return [None if axes is None else _squeezed(tuple(dims), axes)]


def _squeeze_execute(ctx: OpContext) -> Callable[[np.ndarray, np.ndarray | None], np.ndarray]:
    def fail(message: str) -> HalError:
        return runtime_failure(ctx, f"input 1 (squeeze dims): {message}")

    dims = ctx.inputs[0].dimensions
    omitted = ctx.is_omitted(1)
    values = None if omitted else int_vector(ctx, 1)
    if dims is not None and all(dims) and (omitted or values is not None):
        target = _squeeze_prepare(ctx)[0]

        def fixed(x: np.ndarray, _d: np.ndarray | None) -> np.ndarray:
            return x.reshape(target).copy()

        return fixed
    bound = omitted or values is not None

    def dynamic(x: np.ndarray, d: np.ndarray | None) -> np.ndarray:
        chosen = values if bound else (None if d is None else d.reshape(-1).tolist())
        return x.reshape(_squeezed(x.shape, _squeeze_axes(x.shape, chosen, fail))).copy()

    return dynamic


SQUEEZE = register(
    OperationDef(
        OperationType.SQUEEZE,
        inputs=(Arg("input"), Arg("squeeze dims", TENSOR_INT32, optional=True)),
        outputs=(Arg("output"),),
        types=_MOVE_TYPES,
        execute=_squeeze_execute,
        zero_sized_inputs=False,
        prepare=_squeeze_prepare,
        validate=_squeeze_validate,
    )
)

# ---------------------------------------------------------------------------
# EXPAND_DIMS
# ---------------------------------------------------------------------------


def _expand_axis(ctx: OpContext, rank: int) -> int:
    axis = int(ctx.scalar(1))
    if not -(rank + 1) <= axis <= rank:
        raise ctx.fail(
            f"input 1 (axis) is {axis}; for a rank {rank} input it must be in "
            f"[{-(rank + 1)}, {rank}]"
        )
    return axis + rank + 1 if axis < 0 else axis


def _expand_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, min_rank=1)
    check_same_quant(ctx)
    _expand_prepare(ctx)


def _expand_prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    if dims is None:
        return [None]
    axis = _expand_axis(ctx, len(dims))
    return [tuple(dims[:axis]) + (1,) + tuple(dims[axis:])]


def _expand_execute(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    dims = ctx.inputs[0].dimensions
    if dims is not None and all(dims):
        target = _expand_prepare(ctx)[0]
        return lambda x: x.reshape(target).copy()
    raw = int(ctx.scalar(1))

    def dynamic(x: np.ndarray) -> np.ndarray:
        rank = x.ndim
        if not -(rank + 1) <= raw <= rank:
            raise runtime_failure(ctx, f"input 1 (axis) {raw} is out of range for rank {rank}")
        return np.expand_dims(x, raw).copy()

    return dynamic


EXPAND_DIMS = register(
    OperationDef(
        OperationType.EXPAND_DIMS,
        inputs=(Arg("input"), Arg("axis", INT32_SCALAR)),
        outputs=(Arg("output"),),
        types=_V12_TYPES,
        execute=_expand_execute,
        zero_sized_inputs=False,
        prepare=_expand_prepare,
        validate=_expand_validate,
    )
)

# ---------------------------------------------------------------------------
# TRANSPOSE
# ---------------------------------------------------------------------------


def _check_perm(perm: list[int], rank: int, fail: Callable[[str], HalError]) -> None:
    if len(perm) != rank:
        raise fail(f"perm has {len(perm)} elements; it needs one per input axis ({rank})")
    if sorted(perm) != list(range(rank)):
        raise fail(f"perm {perm} is not a permutation of 0..{rank - 1}")


def _transpose_validate(ctx: OpContext) -> None:
    _check_two_inputs(ctx, "perm")
    check_rank(ctx, 0, min_rank=1, max_rank=MAX_RANK)
    check_rank(ctx, 1, exact=1)
    check_same_quant(ctx)
    rank = ctx.inputs[0].rank
    if ctx.is_omitted(1):
        if rank is not None and rank != 2:
            raise ctx.fail(
                f"input 1 (perm) is omitted, which transposes a matrix, but input 0 has "
                f"rank {rank}; it must have rank 2"
            )
        return
    length = _vector_length(ctx, 1)
    if rank is not None and length is not None and length != rank:
        raise ctx.fail(
            f"input 1 (perm) has {length} elements; it needs one per input axis ({rank})"
        )
    perm = int_vector(ctx, 1)
    if perm is not None:
        if rank is None and len(perm) > MAX_RANK:
            raise ctx.fail(f"input 1 (perm) has {len(perm)} elements; the maximum rank is 4")
        _check_perm(perm, len(perm) if rank is None else rank, lambda m: ctx.fail(f"input 1: {m}"))


def _transpose_prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    if ctx.is_omitted(1):
        return [(2 * (0,)) if dims is None else tuple(reversed(dims))]
    perm = int_vector(ctx, 1)
    if dims is None:
        if perm is not None:
            return [(0,) * len(perm)]
        length = _vector_length(ctx, 1)
        return [None if length is None else (0,) * length]
    if perm is None:
        return [(0,) * len(dims)]
    _check_perm(perm, len(dims), lambda m: ctx.fail(f"input 1: {m}"))
    return [tuple(dims[p] for p in perm)]


def _transpose_execute(ctx: OpContext) -> Callable[[np.ndarray, np.ndarray | None], np.ndarray]:
    def fail(message: str) -> HalError:
        return runtime_failure(ctx, f"input 1: {message}")

    if ctx.is_omitted(1) and ctx.inputs[0].rank == 2:
        return lambda x, _p: x.T.copy()
    perm = None if ctx.is_omitted(1) else int_vector(ctx, 1)
    if perm is not None:
        axes = tuple(perm)
        return lambda x, _p: x.transpose(axes).copy()

    def dynamic(x: np.ndarray, p: np.ndarray | None) -> np.ndarray:
        if p is None:  # a model input given no value: the matrix transpose
            if x.ndim != 2:
                raise fail(f"perm has no value, which needs a rank 2 input; it has rank {x.ndim}")
            return x.T.copy()
        order = p.reshape(-1).tolist()
        _check_perm(order, x.ndim, fail)
        return x.transpose(order).copy()

    return dynamic


TRANSPOSE = register(
    OperationDef(
        OperationType.TRANSPOSE,
        inputs=(Arg("input"), Arg("perm", TENSOR_INT32, optional=True)),
        outputs=(Arg("output"),),
        types=_MOVE_TYPES,
        execute=_transpose_execute,
        prepare=_transpose_prepare,
        validate=_transpose_validate,
    )
)

# ---------------------------------------------------------------------------
# TILE
# ---------------------------------------------------------------------------


def _check_multiples(multiples: list[int], rank: int, fail: Callable[[str], HalError]) -> None:
    if len(multiples) != rank:
        raise fail(f"multiples has {len(multiples)} elements; it needs one per input axis ({rank})")
    if any(m < 0 for m in multiples):
        raise fail(f"multiples {multiples} has a negative value")


def _tile_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, min_rank=1)
    check_rank(ctx, 1, exact=1)
    check_same_quant(ctx)
    rank, length = ctx.inputs[0].rank, _vector_length(ctx, 1)
    if rank is not None and length is not None and length != rank:
        raise ctx.fail(
            f"input 1 (multiples) has {length} elements; it needs one per input axis ({rank})"
        )
    multiples = int_vector(ctx, 1)
    if multiples is not None:
        want = len(multiples) if rank is None else rank
        _check_multiples(multiples, want, lambda m: ctx.fail(f"input 1: {m}"))


def _tile_prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    multiples = int_vector(ctx, 1)
    if dims is None:
        return [None if multiples is None else (0,) * len(multiples)]
    if multiples is None:
        return [(0,) * len(dims)]
    _check_multiples(multiples, len(dims), lambda m: ctx.fail(f"input 1: {m}"))
    # 0 stays unknown; a known size times 0 is 0 too, which the runtime checks
    return [tuple(d * m for d, m in zip(dims, multiples))]


def _tile_execute(ctx: OpContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def fail(message: str) -> HalError:
        return runtime_failure(ctx, f"input 1: {message}")

    multiples = int_vector(ctx, 1)
    if multiples is not None:
        reps = tuple(multiples)

        def fixed(x: np.ndarray, _m: np.ndarray) -> np.ndarray:
            return np.tile(x, reps)

        return fixed

    def dynamic(x: np.ndarray, m: np.ndarray) -> np.ndarray:
        reps = m.reshape(-1).tolist()
        _check_multiples(reps, x.ndim, fail)
        return np.tile(x, reps)

    return dynamic


TILE = register(
    OperationDef(
        OperationType.TILE,
        inputs=(Arg("input"), Arg("multiples", TENSOR_INT32)),
        outputs=(Arg("output"),),
        types=_V12_TYPES,
        execute=_tile_execute,
        zero_sized_inputs=False,
        prepare=_tile_prepare,
        validate=_tile_validate,
    )
)

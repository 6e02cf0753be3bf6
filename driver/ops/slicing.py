"""SPLIT, STRIDED_SLICE, GATHER: operations that select parts of a tensor.

Data is moved, never requantized. SPLIT and STRIDED_SLICE keep the input's
scale and zero point on their outputs (as the reference's prepare does);
GATHER's reference keeps the output operand's own, so it is not checked.

STRIDED_SLICE follows the reference's prepare (which sizes the output): per
axis, a masked begin/end is the first/last element in the stride's
direction, other indices are clamped (``ClampedIndex``), the length is
``ceil((end - begin) / stride)`` (never negative), and a shrunk axis needs a
positive stride and a length of exactly 1. A slice that shrinks every axis
gives a [1] tensor (NNAPI has no rank-0 tensors).

GATHER indices must lie in [0, size of the axis): negative indices fail, as
in the reference (which reads them as unsigned).

SPLIT has one output per split (the registry's ``variadic_outputs``); its
kernel returns a tuple.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._movement import check_same_quant
from nnhal.driver.ops._operand_rules import (
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

_V12_TYPES = {
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_FLOAT32: _V.V1_2,
    _T.TENSOR_INT32: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}


def _axis(ctx: OpContext, index: int, rank: int) -> int:
    """A constant axis scalar in [-rank, rank), made non-negative."""
    axis = int(ctx.scalar(index))
    if not -rank <= axis < rank:
        raise ctx.fail(
            f"input {index} (axis) is {axis}; for a rank {rank} input it must be in [{-rank}, {rank})"
        )
    return axis + rank if axis < 0 else axis


# ---------------------------------------------------------------------------
# SPLIT
# ---------------------------------------------------------------------------


def _split_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, min_rank=1)
    check_same_quant(ctx)
    count = int(ctx.scalar(2))
    if count < 1:
        raise ctx.fail(f"input 2 (num_splits) is {count}; it must be at least 1")
    if count != len(ctx.outputs):
        raise ctx.fail(
            f"input 2 (num_splits) is {count} but the operation has {len(ctx.outputs)} outputs; "
            "there is one output per split"
        )
    _split_prepare(ctx)


def _split_prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    count = len(ctx.outputs)
    if dims is None:
        return [None] * count
    axis = _axis(ctx, 1, len(dims))
    size = dims[axis]
    if size and size % count:
        raise ctx.fail(
            f"input 0 has size {size} on axis {axis}, which {count} splits cannot divide evenly"
        )
    part = list(dims)
    part[axis] = size // count
    return [tuple(part)] * count


def _split_execute(ctx: OpContext) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
    count = int(ctx.scalar(2))
    dims = ctx.inputs[0].dimensions
    rank = len(dims) if dims is not None else None
    raw_axis = int(ctx.scalar(1))

    def kernel(x: np.ndarray) -> tuple[np.ndarray, ...]:
        r = x.ndim if rank is None else rank
        if not -r <= raw_axis < r or x.shape[raw_axis] % count:
            raise runtime_failure(
                ctx, f"cannot split axis {raw_axis} of a {x.shape} input into {count} parts"
            )
        return tuple(part.copy() for part in np.split(x, count, axis=raw_axis))

    return kernel


SPLIT = register(
    OperationDef(
        OperationType.SPLIT,
        inputs=(Arg("input"), Arg("axis", INT32_SCALAR), Arg("num_splits", INT32_SCALAR)),
        outputs=(Arg("output"),),  # repeated: one output per split
        types=_V12_TYPES,
        execute=_split_execute,
        zero_sized_inputs=False,
        prepare=_split_prepare,
        validate=_split_validate,
        variadic_outputs=True,
    )
)

# ---------------------------------------------------------------------------
# STRIDED_SLICE
# ---------------------------------------------------------------------------

#: STRIDED_SLICE is limited to rank 4 (the reference's validate)
SLICE_MAX_RANK = 4


def _clamped_index(index: int, dim: int, positive: bool) -> int:
    """The reference's ``ClampedIndex`` (``dim`` > 0)."""
    if positive:
        return dim if index >= dim else min(max(index, -dim), dim) % dim
    return -1 if index < -dim else min(max(index, -dim), dim - 1) % dim


def _axis_range(
    dim: int, begin: int, end: int, stride: int, begin_masked: bool, end_masked: bool
) -> tuple[int, int]:
    """(first index, number of elements) of one sliced axis of known size."""
    positive = stride > 0
    if begin_masked:
        first = 0 if positive else dim - 1
    else:
        first = _clamped_index(begin, dim, positive)
    if end_masked:
        stop = dim if positive else -1
    else:
        stop = _clamped_index(end, dim, positive)
    return first, max(0, math.ceil((stop - first) / stride))


class _SliceSpec:
    """The STRIDED_SLICE parameters, checked against a shape."""

    def __init__(self, begin, end, strides, begin_mask, end_mask, shrink_mask) -> None:
        self.begin, self.end, self.strides = begin, end, strides
        self.begin_mask, self.end_mask, self.shrink_mask = begin_mask, end_mask, shrink_mask

    def plan(
        self, dims: tuple[int, ...], fail: Callable[[str], HalError]
    ) -> tuple[tuple, tuple[int, ...]]:
        """(numpy index, output shape) for ``dims``; 0 axes are unknown (no index then)."""
        rank = len(dims)
        for name in ("begin", "end", "strides"):
            values = getattr(self, name)
            if len(values) != rank:
                raise fail(f"{name} has {len(values)} elements; it needs one per axis ({rank})")
        index, shape = [], []
        for axis, dim in enumerate(dims):
            stride = self.strides[axis]
            if stride == 0:
                raise fail(f"strides[{axis}] is 0; strides must be non-zero")
            shrink = bool(self.shrink_mask >> axis & 1)
            if shrink and stride < 0:
                raise fail(f"axis {axis} is shrunk (shrink_axis_mask) but its stride is {stride}")
            if not dim:
                index.append(None)
                if not shrink:
                    shape.append(0)
                continue
            first, count = _axis_range(
                dim,
                self.begin[axis],
                self.end[axis],
                stride,
                bool(self.begin_mask >> axis & 1),
                bool(self.end_mask >> axis & 1),
            )
            if shrink:
                if count != 1:
                    raise fail(
                        f"axis {axis} is shrunk (shrink_axis_mask) but its slice has {count} "
                        "elements; it must have exactly 1"
                    )
                index.append(first)
                continue
            shape.append(count)
            if count == 0:
                index.append(slice(0, 0))
            else:
                stop = first + count * stride
                index.append(slice(first, stop if stop >= 0 else None, stride))
        return tuple(index), tuple(shape) or (1,)


def _slice_spec(ctx: OpContext) -> _SliceSpec | None:
    vectors = [int_vector(ctx, i) for i in (1, 2, 3)]
    if any(v is None for v in vectors):
        return None
    return _SliceSpec(*vectors, *(int(ctx.scalar(i)) for i in (4, 5, 6)))


def _strided_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, min_rank=1, max_rank=SLICE_MAX_RANK)
    check_same_quant(ctx)
    rank = ctx.inputs[0].rank
    for i, name in ((1, "begin"), (2, "end"), (3, "strides")):
        check_rank(ctx, i, exact=1)
        dims = ctx.inputs[i].dimensions
        if rank is not None and dims and dims[0] and dims[0] != rank:
            raise ctx.fail(
                f"input {i} ({name}) has {dims[0]} elements; it needs one per input axis ({rank})"
            )
    for i in (4, 5, 6):
        ctx.scalar(i)  # a mask only known at run time: bind the step then
    _strided_prepare(ctx)


def _strided_prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    spec = _slice_spec(ctx)
    if dims is None:
        return [None]
    if spec is None:
        shrink = int(ctx.scalar(6))
        kept = [a for a in range(len(dims)) if not shrink >> a & 1]
        return [(0,) * len(kept) if kept else (1,)]
    return [spec.plan(tuple(dims), lambda m: ctx.fail(f"STRIDED_SLICE parameters: {m}"))[1]]


def _strided_execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    def fail(message: str) -> HalError:
        return runtime_failure(ctx, message)

    dims = ctx.inputs[0].dimensions
    spec = _slice_spec(ctx)
    if spec is not None and dims is not None and all(dims):
        index, shape = spec.plan(tuple(dims), ctx.fail)

        def fixed(x: np.ndarray, _b, _e, _s) -> np.ndarray:
            return np.array(x[index]).reshape(shape)

        return fixed
    masks = tuple(int(ctx.scalar(i)) for i in (4, 5, 6))

    def dynamic(x: np.ndarray, b: np.ndarray, e: np.ndarray, s: np.ndarray) -> np.ndarray:
        current = spec or _SliceSpec(b.tolist(), e.tolist(), s.tolist(), *masks)
        index, shape = current.plan(x.shape, fail)
        return np.array(x[index]).reshape(shape)

    return dynamic


STRIDED_SLICE = register(
    OperationDef(
        OperationType.STRIDED_SLICE,
        inputs=(
            Arg("input"),
            Arg("begin", TENSOR_INT32),
            Arg("end", TENSOR_INT32),
            Arg("strides", TENSOR_INT32),
            Arg("begin_mask", INT32_SCALAR),
            Arg("end_mask", INT32_SCALAR),
            Arg("shrink_axis_mask", INT32_SCALAR),
        ),
        outputs=(Arg("output"),),
        types={
            _T.TENSOR_FLOAT32: _V.V1_1,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_1,
            _T.TENSOR_FLOAT16: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_strided_execute,
        zero_sized_inputs=False,
        prepare=_strided_prepare,
        validate=_strided_validate,
    )
)

# ---------------------------------------------------------------------------
# GATHER
# ---------------------------------------------------------------------------


def _check_indices(values: np.ndarray, size: int, fail: Callable[[str], HalError]) -> None:
    if values.size and (values.min() < 0 or values.max() >= size):
        bad = values[(values < 0) | (values >= size)].reshape(-1)[0]
        raise fail(f"index {int(bad)} is out of range; indices must be in [0, {size})")


def _gather_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, min_rank=1)
    check_rank(ctx, 2, min_rank=1)
    _gather_prepare(ctx)  # the axis range
    dims = ctx.inputs[0].dimensions
    indices = ctx.constant(2)
    if dims is not None and indices is not None:
        size = dims[_axis(ctx, 1, len(dims))]
        if size:
            _check_indices(indices, size, lambda m: ctx.fail(f"input 2 (indices): {m}"))


def _gather_prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    indices = ctx.inputs[2].dimensions
    if dims is None or indices is None:
        return [None]
    axis = _axis(ctx, 1, len(dims))
    return [tuple(dims[:axis]) + tuple(indices) + tuple(dims[axis + 1 :])]


#: largest constant GATHER table whose rows are kept as arrays of their own (a copy)
ROWS_BYTES = 1 << 20


def _gather_execute(ctx: OpContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def fail(message: str) -> HalError:
        return runtime_failure(ctx, f"input 2 (indices): {message}")

    dims = ctx.inputs[0].dimensions
    raw_axis = int(ctx.scalar(1))
    if dims is not None:
        axis = _axis(ctx, 1, len(dims))
        constant = ctx.constant(2)
        if dims[axis] and constant is not None:  # indices validated once
            index = np.asarray(constant, dtype=np.intp)

            def fixed(x: np.ndarray, _i: np.ndarray) -> np.ndarray:
                return np.take(x, index, axis=axis)

            return fixed

    # one index into the first axis (a decoder's token into its embedding table) is a row
    # copy: a third of np.take's cost, which converts the index array to intp first
    first_axis = raw_axis == 0 or (dims is not None and raw_axis == -len(dims))

    def dynamic(x: np.ndarray, i: np.ndarray) -> np.ndarray:
        if first_axis and i.shape == (1,):
            k = i.item()  # a Python int without the numpy scalar int(i[0]) makes first
            if 0 <= k < len(x):
                return x[k : k + 1].copy()
        if not -x.ndim <= raw_axis < x.ndim:
            raise runtime_failure(ctx, f"input 1 (axis) {raw_axis} is out of range")
        if i.size == 1:  # one index (a decoder's token): a Python comparison, no reductions
            if not 0 <= int(i.reshape(-1)[0]) < x.shape[raw_axis]:
                _check_indices(i, x.shape[raw_axis], fail)
        else:
            _check_indices(i, x.shape[raw_axis], fail)
        return np.take(x, i, axis=raw_axis)

    table = ctx.constant(0)
    if first_axis and table is not None and table.ndim >= 1 and table.nbytes <= ROWS_BYTES:
        # a constant table (an embedding): its rows as arrays of their own, made now, so
        # one row is a copy of one array (0.13 against 0.24 µs for slicing then copying)
        rows = [table[k : k + 1].copy() for k in range(len(table))]
        count = len(rows)

        def row(x: np.ndarray, i: np.ndarray) -> np.ndarray:
            if i.shape == (1,):
                k = i.item()
                if 0 <= k < count:
                    return rows[k].copy()
            return dynamic(x, i)

        return row

    return dynamic


GATHER = register(
    OperationDef(
        OperationType.GATHER,
        inputs=(Arg("input"), Arg("axis", INT32_SCALAR), Arg("indices", TENSOR_INT32)),
        outputs=(Arg("output"),),
        types=_V12_TYPES,
        execute=_gather_execute,
        zero_sized_inputs=False,
        prepare=_gather_prepare,
        validate=_gather_validate,
    )
)

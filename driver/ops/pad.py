"""PAD and PAD_V2: a constant border around a tensor of rank 1 to 4.

``paddings`` is a [rank, 2] TENSOR_INT32 of (before, after) counts, each at
least 0; it may be a constant (checked at validation, bound once) or a run-time
input (checked by the kernel). The pad value is, as in the reference:

- PAD: 0.0 for floats, the input's zero point for quantized tensors (so a
  quantized PAD pads with real 0; a nonzero zero point needs HAL 1.2);
- PAD_V2: input 2, a FLOAT32 / FLOAT16 scalar for float tensors, an INT32 for
  quantized ones, taken in the input's quantized units. The reference reads
  that INT32 through a byte pointer, i.e. its low byte; that is kept.

The data is copied unchanged, so a quantized output keeps the input's scale
and zero point.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._movement import check_same_quant
from nnhal.driver.ops.common import QUANT8, TENSOR_INT32, check_rank, dtype_of, runtime_failure
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.errors import HalError
from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion

#: PAD and PAD_V2 take inputs of rank 1 to 4 (the reference's validation)
MAX_RANK = 4


def _pairs(values: np.ndarray, rank: int, fail: Callable[[str], HalError]) -> list[tuple[int, int]]:
    """paddings as (before, after) per axis, checked."""
    if values.ndim != 2 or values.shape != (rank, 2):
        raise fail(f"paddings has shape {list(values.shape)}; it must be [{rank}, 2]")
    pairs = [(int(b), int(a)) for b, a in values.tolist()]
    for axis, (b, a) in enumerate(pairs):
        if b < 0 or a < 0:
            raise fail(f"paddings for axis {axis} are ({b}, {a}); they must be non-negative")
    return pairs


def _padded(dims, pairs) -> tuple[int, ...]:
    # an unknown axis (0) stays unknown
    return tuple(d + b + a if d else 0 for d, (b, a) in zip(dims, pairs))


def _validate(ctx: OpContext) -> HalVersion | None:
    check_rank(ctx, 0, min_rank=1, max_rank=MAX_RANK)
    check_rank(ctx, 1, exact=2)
    check_same_quant(ctx)
    rank = ctx.inputs[0].rank
    pdims = ctx.inputs[1].dimensions
    if pdims is not None and (
        (pdims[1] and pdims[1] != 2) or (rank is not None and pdims[0] and pdims[0] != rank)
    ):
        want = f"[{rank}, 2]" if rank is not None else "[rank, 2]"
        raise ctx.fail(f"input 1 (paddings) has shape {list(pdims)}; it must be {want}")
    _prepare(ctx)
    if ctx.op.type == OperationType.PAD:
        src = ctx.inputs[0]
        if src.type == _T.TENSOR_QUANT8_ASYMM and src.zeroPoint != 0:
            return _V.V1_2  # padding with a nonzero zero point came with HAL 1.2
    return None


def _prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[1].dimensions
    paddings = ctx.constant(1)
    src = ctx.inputs[0].dimensions
    if src is None:
        rank = dims[0] if dims and dims[0] else None
        return [None if rank is None else (0,) * rank]
    if paddings is None:
        return [(0,) * len(src)]
    pairs = _pairs(paddings, len(src), lambda m: ctx.fail(f"input 1: {m}"))
    return [_padded(src, pairs)]


def _pad_value(ctx: OpContext):
    t = ctx.primary_type
    dtype = dtype_of(t)
    if ctx.op.type == OperationType.PAD:
        return dtype.type(ctx.inputs[0].zeroPoint if t in QUANT8 else 0)
    value = ctx.scalar(2)
    if t in QUANT8:
        low = int(value) & 0xFF  # the reference reads the INT32's first (low) byte
        return dtype.type(low - 256 if dtype == np.int8 and low > 127 else low)
    return dtype.type(value)


def _execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    def fail(message: str) -> HalError:
        return runtime_failure(ctx, f"input 1: {message}")

    value = _pad_value(ctx)
    dtype = dtype_of(ctx.primary_type)
    src = ctx.inputs[0].dimensions
    paddings = ctx.constant(1)
    if paddings is not None and src is not None:
        pairs = _pairs(paddings, len(src), ctx.fail)
        if all(src):
            shape = _padded(src, pairs)
            inner = tuple(slice(b, b + d) for d, (b, _) in zip(src, pairs))

            def fixed(x: np.ndarray, *_rest) -> np.ndarray:
                out = np.full(shape, value, dtype)
                out[inner] = x
                return out

            return fixed

        def known_pads(x: np.ndarray, *_rest) -> np.ndarray:
            out = np.full(_padded(x.shape, pairs), value, dtype)
            out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pairs))] = x
            return out

        return known_pads

    def dynamic(x: np.ndarray, p: np.ndarray, *_rest) -> np.ndarray:
        if x.ndim > MAX_RANK:
            raise runtime_failure(ctx, f"input 0 has rank {x.ndim}; the maximum is {MAX_RANK}")
        pairs = _pairs(p, x.ndim, fail)
        out = np.full(_padded(x.shape, pairs), value, dtype)
        out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pairs))] = x
        return out

    return dynamic


PAD = register(
    OperationDef(
        OperationType.PAD,
        inputs=(Arg("input"), Arg("paddings", TENSOR_INT32)),
        outputs=(Arg("output"),),
        types={
            _T.TENSOR_FLOAT32: _V.V1_1,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_1,
            _T.TENSOR_FLOAT16: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_execute,
        zero_sized_inputs=False,
        prepare=_prepare,
        validate=_validate,
    )
)


def _pad_value_type(t: int) -> frozenset:
    """PAD_V2's pad value: the float scalar matching the tensor, INT32 for quantized."""
    if t == _T.TENSOR_FLOAT16:
        return frozenset({_T.FLOAT16})
    if t == _T.TENSOR_FLOAT32:
        return frozenset({_T.FLOAT32})
    return frozenset({_T.INT32})


PAD_V2 = register(
    OperationDef(
        OperationType.PAD_V2,
        inputs=(
            Arg("input"),
            Arg("paddings", TENSOR_INT32),
            Arg("pad_value", _pad_value_type),
        ),
        outputs=(Arg("output"),),
        types={
            _T.TENSOR_FLOAT32: _V.V1_2,
            _T.TENSOR_FLOAT16: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_execute,
        zero_sized_inputs=False,
        prepare=_prepare,
        validate=_validate,
    )
)

"""REDUCE_ALL/ANY/MAX/MIN/PROD/SUM and MEAN: reductions over a list of axes.

Inputs: the tensor (rank <= 4), a 1-D TENSOR_INT32 of axes (negative ones
count from the end, repeats allowed) and keep_dims (BOOL for REDUCE_*, INT32
for MEAN where any positive value keeps). The axes may be a run-time tensor;
the kernel then resolves them on each call. Removing every dimension gives
shape [1].

Arithmetic follows the reference:
- REDUCE_MAX/MIN start from the type's lowest/highest finite value and use
  ``std::max``/``std::min``, so NaNs are skipped and an all -inf row gives
  -FLT_MAX: exactly ``np.fmax``/``np.fmin`` with that ``initial``.
- REDUCE_PROD returns 0 as soon as a factor is 0 (even times inf or NaN).
- Quantized REDUCE_MAX/MIN and MEAN work on the raw integers: the output
  keeps the input's scale and zero point (NNAPI requires them equal, and the
  reference does not rescale). Quantized MEAN sums in integers and divides
  with C's truncation toward zero.
- Float16 accumulates in float32 and rounds once.
- REDUCE_* are registered without zero-sized input support in the reference:
  an empty input (or axes) tensor fails the execution. MEAN of an empty
  reduction gives 0, as the reference's zero-initialized sums do.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._reduce_util import reduced_shape, removes_all, resolve_axes
from nnhal.driver.ops.common import INT32_SCALAR, TENSOR_INT32, check_rank, dtype_of, int_vector
from nnhal.driver.ops.common import runtime_failure as _runtime_failure
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32

#: the reference's reductions take inputs up to rank 4
MAX_RANK = 4
AXES = "input 1 (axes)"

#: reduce(x, axes, keep_dims) -> fresh array of the output dtype
ReduceFn = Callable[[np.ndarray, tuple, bool], np.ndarray]


# ---------------------------------------------------------------------------
# Shapes and validation
# ---------------------------------------------------------------------------


def _keep_dims(ctx: OpContext) -> bool | None:
    """keep_dims when constant (None otherwise)."""
    value = ctx.constant(2)
    if value is None:
        return None
    flag = value.reshape(-1)[0]
    return bool(flag) if ctx.op.type != OperationType.MEAN else int(flag) > 0


def _validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, max_rank=MAX_RANK)
    check_rank(ctx, 1, exact=1)
    dims, axes = ctx.inputs[0].dimensions, int_vector(ctx, 1)
    if dims is not None and axes is not None:
        resolve_axes(axes, len(dims), AXES, ctx.fail)


def _prepare(ctx: OpContext) -> list[Shape]:
    dims, axes, keep = ctx.inputs[0].dimensions, int_vector(ctx, 1), _keep_dims(ctx)
    if dims is None or keep is None:
        return [None]
    if axes is None:
        # keep_dims keeps the rank; otherwise repeats make the rank unknown
        return [(0,) * len(dims) if keep else None]
    return [reduced_shape(dims, resolve_axes(axes, len(dims), AXES, ctx.fail), keep)]


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------


def _bind(ctx: OpContext, reduce: ReduceFn) -> Callable:
    """The kernel ``(x, axes) -> out`` around one reduction function."""
    value = ctx.scalar(2)
    keep = int(value) > 0 if ctx.op.type == OperationType.MEAN else bool(value)
    dims, axes_const = ctx.inputs[0].dimensions, int_vector(ctx, 1)

    if dims is not None and axes_const is not None:
        axes = resolve_axes(axes_const, len(dims), AXES, ctx.fail)
        if removes_all(len(dims), axes, keep):
            # Reduce the flattened input with keepdims: a fresh [1] result.
            def flat(x: np.ndarray, _a: np.ndarray) -> np.ndarray:
                return reduce(x.reshape(-1), (0,), True)

            return flat

        def fixed(x: np.ndarray, _a: np.ndarray) -> np.ndarray:
            return reduce(x, axes, keep)

        return fixed

    def runtime_fail(message: str) -> Exception:
        return _runtime_failure(ctx, message)

    def dynamic(x: np.ndarray, a: np.ndarray) -> np.ndarray:
        axes = resolve_axes(a.reshape(-1).tolist(), x.ndim, AXES, runtime_fail)
        if removes_all(x.ndim, axes, keep):
            return reduce(x.reshape(-1), (0,), True)
        return reduce(x, axes, keep)

    return dynamic


def _float_sum(out: np.dtype) -> ReduceFn:
    if out == f32:
        return _plain(np.add)

    def reduce(x: np.ndarray, axes: tuple, keep: bool) -> np.ndarray:
        return np.add.reduce(x, axis=axes, keepdims=keep, dtype=f32).astype(out)

    return reduce


def _float_prod(out: np.dtype) -> ReduceFn:
    def reduce(x: np.ndarray, axes: tuple, keep: bool) -> np.ndarray:
        result = np.multiply.reduce(x, axis=axes, keepdims=keep, dtype=f32)
        # the reference returns 0 whenever a factor is 0 (so 0 * inf is 0, not NaN)
        result[np.logical_or.reduce(x == 0, axis=axes, keepdims=keep)] = 0
        return result.astype(out, copy=False)

    return reduce


def _extremum(ufunc: np.ufunc, initial) -> ReduceFn:
    def reduce(x: np.ndarray, axes: tuple, keep: bool) -> np.ndarray:
        return ufunc.reduce(x, axis=axes, keepdims=keep, initial=initial)

    return reduce


def _plain(ufunc: np.ufunc) -> ReduceFn:
    def reduce(x: np.ndarray, axes: tuple, keep: bool) -> np.ndarray:
        return ufunc.reduce(x, axis=axes, keepdims=keep)

    return reduce


def _float_mean(out: np.dtype) -> ReduceFn:
    def reduce(x: np.ndarray, axes: tuple, keep: bool) -> np.ndarray:
        total = np.add.reduce(x, axis=axes, keepdims=keep, dtype=f32)
        count = x.size // total.size if total.size else 1
        total /= f32(count or 1)  # an empty reduction stays 0
        return total.astype(out, copy=False)

    return reduce


def _quant_mean(out: np.dtype) -> ReduceFn:
    signed = out == np.int8

    def reduce(x: np.ndarray, axes: tuple, keep: bool) -> np.ndarray:
        total = np.add.reduce(x, axis=axes, keepdims=keep, dtype=np.int64)
        count = (x.size // total.size if total.size else 1) or 1
        if signed:  # C integer division truncates toward zero
            mean = np.where(total < 0, -((-total) // count), total // count)
        else:
            mean = total // count
        return mean.astype(out)

    return reduce


def _execute_with(factory: Callable[[OpContext], ReduceFn]):
    def execute(ctx: OpContext) -> Callable:
        return _bind(ctx, factory(ctx))

    return execute


def _out_dtype(ctx: OpContext) -> np.dtype:
    return dtype_of(ctx.outputs[0].type)


def _is_float(ctx: OpContext) -> bool:
    return _out_dtype(ctx).kind == "f"


def _max_fn(ctx: OpContext) -> ReduceFn:
    dtype = _out_dtype(ctx)
    if _is_float(ctx):
        return _extremum(np.fmax, np.finfo(dtype).min)
    return _plain(np.maximum)


def _min_fn(ctx: OpContext) -> ReduceFn:
    dtype = _out_dtype(ctx)
    if _is_float(ctx):
        return _extremum(np.fmin, np.finfo(dtype).max)
    return _plain(np.minimum)


def _mean_fn(ctx: OpContext) -> ReduceFn:
    dtype = _out_dtype(ctx)
    return _float_mean(dtype) if _is_float(ctx) else _quant_mean(dtype)


# ---------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------

_BOOL = frozenset({_T.BOOL})
_FLOATS = {_T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_FLOAT16: _V.V1_2}
_FLOATS_QUANT = {
    **_FLOATS,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}


def _register(
    op: OperationType, types: dict, execute, keep_type=_BOOL, zero_sized: bool = False
) -> OperationDef:
    return register(
        OperationDef(
            op,
            inputs=(Arg("input"), Arg("axes", TENSOR_INT32), Arg("keep_dims", keep_type)),
            outputs=(Arg("output"),),
            types=types,
            execute=execute,
            zero_sized_inputs=zero_sized,
            prepare=_prepare,
            validate=_validate,
        )
    )


REDUCE_SUM = _register(
    OperationType.REDUCE_SUM,
    _FLOATS,
    _execute_with(lambda ctx: _float_sum(_out_dtype(ctx))),
)
REDUCE_PROD = _register(
    OperationType.REDUCE_PROD,
    _FLOATS,
    _execute_with(lambda ctx: _float_prod(_out_dtype(ctx))),
)
REDUCE_MAX = _register(OperationType.REDUCE_MAX, _FLOATS_QUANT, _execute_with(_max_fn))
REDUCE_MIN = _register(OperationType.REDUCE_MIN, _FLOATS_QUANT, _execute_with(_min_fn))
REDUCE_ALL = _register(
    OperationType.REDUCE_ALL,
    {_T.TENSOR_BOOL8: _V.V1_2},
    _execute_with(lambda ctx: _plain(np.logical_and)),
)
REDUCE_ANY = _register(
    OperationType.REDUCE_ANY,
    {_T.TENSOR_BOOL8: _V.V1_2},
    _execute_with(lambda ctx: _plain(np.logical_or)),
)
MEAN = _register(
    OperationType.MEAN,
    {
        _T.TENSOR_FLOAT32: _V.V1_1,
        _T.TENSOR_QUANT8_ASYMM: _V.V1_1,
        _T.TENSOR_FLOAT16: _V.V1_2,
        _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
    },
    _execute_with(_mean_fn),
    keep_type=INT32_SCALAR,
    zero_sized=True,
)

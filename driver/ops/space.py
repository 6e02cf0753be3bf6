"""BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, DEPTH_TO_SPACE, SPACE_TO_DEPTH, CHANNEL_SHUFFLE.

The first four move blocks of a rank-4 image tensor between its spatial axes
and its batch or depth axis. They are written for NHWC; the optional BOOL
``layout`` input (true = NCHW, HAL 1.2) views the tensor as NHWC on the way in
and back on the way out (``layout.in_layout``), as the reference does. Each
kernel is one reshape, one transpose and one copy:

- DEPTH_TO_SPACE: ``out[b, h*s + i, w*s + j, c] = in[b, h, w, (i*s + j)*C + c]``;
  SPACE_TO_DEPTH is its inverse.
- BATCH_TO_SPACE_ND: ``out[n, h*bh + i, w*bw + j, c] = in[(i*bw + j)*N + n, h, w, c]``;
  SPACE_TO_BATCH_ND pads H and W first (with 0, or the zero point: a nonzero
  QUANT8_ASYMM zero point needs HAL 1.2) then does the inverse.

CHANNEL_SHUFFLE (rank 1 to 4, any axis) views the axis as [groups, size/groups]
and swaps the two. No operation here changes values: quantized outputs keep
the input's scale and zero point.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._movement import check_same_quant
from nnhal.driver.ops._operand_rules import INT32_SCALAR, TENSOR_INT32, check_rank, runtime_failure
from nnhal.driver.ops.layout import (
    dims_in_layout,
    in_layout,
    layout_is_nchw,
    nhwc_dims,
)
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.errors import HalError
from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
BOOL_SCALAR = frozenset({_T.BOOL})

_V10_TYPES = {
    _T.TENSOR_FLOAT32: _V.V1_0,
    _T.TENSOR_QUANT8_ASYMM: _V.V1_0,
    _T.TENSOR_FLOAT16: _V.V1_2,
    _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
}
_V11_TYPES = {**_V10_TYPES, _T.TENSOR_FLOAT32: _V.V1_1, _T.TENSOR_QUANT8_ASYMM: _V.V1_1}


def _image_checks(ctx: OpContext) -> HalVersion | None:
    """Rank 4, same quantization; HAL 1.2 when a layout is given."""
    check_rank(ctx, 0, exact=4)
    check_same_quant(ctx)
    return _V.V1_2 if ctx.op.layout_index(ctx) is not None else None


def _nhwc_dims(ctx: OpContext) -> tuple[int, ...] | None:
    dims = ctx.inputs[0].dimensions
    return nhwc_dims(tuple(dims), layout_is_nchw(ctx)) if dims is not None else None


def _image_kernel(
    ctx: OpContext,
    nhwc: Callable[[np.ndarray], np.ndarray],
) -> Callable[..., np.ndarray]:
    """The NHWC kernel ``nhwc(x)`` in the operation's layout, refusing zero-sized inputs."""
    inner = in_layout(nhwc, layout_is_nchw(ctx))

    def kernel(x: np.ndarray, *_params) -> np.ndarray:
        return inner(x)

    return kernel


# ---------------------------------------------------------------------------
# DEPTH_TO_SPACE, SPACE_TO_DEPTH
# ---------------------------------------------------------------------------


def _block_size(ctx: OpContext) -> int:
    block = int(ctx.scalar(1))
    if block < 1:
        raise ctx.fail(f"input 1 (block_size) is {block}; it must be at least 1")
    return block


def _depth_to_space_shape(dims, block: int, fail) -> tuple[int, ...]:
    n, h, w, c = dims
    if c and c % (block * block):
        raise fail(
            f"input 0 has depth {c}, which is not a multiple of block_size^2 = {block * block}"
        )
    return (n, h * block, w * block, c // (block * block))


def _space_to_depth_shape(dims, block: int, fail) -> tuple[int, ...]:
    n, h, w, c = dims
    for name, size in (("height", h), ("width", w)):
        if size and size % block:
            raise fail(f"input 0 has {name} {size}, which is not a multiple of block_size {block}")
    return (n, h // block, w // block, c * block * block)


def _depth_family(op_type: OperationType, to_space: bool) -> OperationDef:
    shape_of = _depth_to_space_shape if to_space else _space_to_depth_shape

    def validate(ctx: OpContext) -> HalVersion | None:
        version = _image_checks(ctx)
        prepare(ctx)
        return version

    def prepare(ctx: OpContext) -> list[Shape]:
        block = _block_size(ctx)
        dims = _nhwc_dims(ctx)
        if dims is None:
            return [(0, 0, 0, 0)]
        out = shape_of(dims, block, ctx.fail)
        return [dims_in_layout(out, layout_is_nchw(ctx))]

    def execute(ctx: OpContext) -> Callable[..., np.ndarray]:
        s = _block_size(ctx)

        def depth_to_space(x: np.ndarray) -> np.ndarray:
            n, h, w, c = x.shape
            if c % (s * s):
                raise runtime_failure(ctx, f"depth {c} is not a multiple of {s * s}")
            y = x.reshape(n, h, w, s, s, c // (s * s)).transpose(0, 1, 3, 2, 4, 5).copy()
            return y.reshape(n, h * s, w * s, c // (s * s))

        def space_to_depth(x: np.ndarray) -> np.ndarray:
            n, h, w, c = x.shape
            if h % s or w % s:
                raise runtime_failure(ctx, f"height {h} or width {w} is not a multiple of {s}")
            y = x.reshape(n, h // s, s, w // s, s, c).transpose(0, 1, 3, 2, 4, 5).copy()
            return y.reshape(n, h // s, w // s, s * s * c)

        return _image_kernel(ctx, depth_to_space if to_space else space_to_depth)

    return register(
        OperationDef(
            op_type,
            inputs=(
                Arg("input"),
                Arg("block_size", INT32_SCALAR),
                Arg("layout", BOOL_SCALAR, optional=True),
            ),
            outputs=(Arg("output"),),
            layout=2,
            types=_V10_TYPES,
            execute=execute,
            zero_sized_inputs=False,
            prepare=prepare,
            validate=validate,
        )
    )


DEPTH_TO_SPACE = _depth_family(OperationType.DEPTH_TO_SPACE, to_space=True)
SPACE_TO_DEPTH = _depth_family(OperationType.SPACE_TO_DEPTH, to_space=False)

# ---------------------------------------------------------------------------
# BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND
# ---------------------------------------------------------------------------


def _blocks(values: np.ndarray, fail: Callable[[str], HalError]) -> tuple[int, int]:
    if values.shape != (2,):
        raise fail(f"input 1 (block_shape) has shape {list(values.shape)}; it must be [2]")
    bh, bw = (int(v) for v in values)
    if bh < 1 or bw < 1:
        raise fail(f"input 1 (block_shape) is [{bh}, {bw}]; both sizes must be at least 1")
    return bh, bw


def _space_pads(values: np.ndarray, fail: Callable[[str], HalError]) -> tuple[int, int, int, int]:
    if values.shape != (2, 2):
        raise fail(f"input 2 (paddings) has shape {list(values.shape)}; it must be [2, 2]")
    pads = tuple(int(v) for v in values.reshape(-1))
    if min(pads) < 0:
        raise fail(
            f"input 2 (paddings) is {[list(pads[:2]), list(pads[2:])]}; a padding is negative"
        )
    return pads


def _check_vector_shape(ctx: OpContext, index: int, name: str, want: tuple[int, ...]) -> None:
    check_rank(ctx, index, exact=len(want))
    dims = ctx.inputs[index].dimensions
    if dims is not None and any(d and d != w for d, w in zip(dims, want)):
        raise ctx.fail(f"input {index} ({name}) has shape {list(dims)}; it must be {list(want)}")


def _batch_to_space_shape(dims, blocks, fail) -> tuple[int, ...]:
    n, h, w, c = dims
    bh, bw = blocks
    if n and n % (bh * bw):
        raise fail(f"input 0 has batch {n}, which is not a multiple of block_shape {bh} x {bw}")
    return (n // (bh * bw), h * bh, w * bw, c)


def _space_to_batch_shape(dims, blocks, pads, fail) -> tuple[int, ...]:
    n, h, w, c = dims
    bh, bw = blocks
    ph = h + pads[0] + pads[1] if h else 0
    pw = w + pads[2] + pads[3] if w else 0
    for name, size, block in (("height", ph, bh), ("width", pw, bw)):
        if size and size % block:
            raise fail(f"padded {name} {size} is not a multiple of its block size {block}")
    return (n * bh * bw, ph // bh, pw // bw, c)


def _b2s_validate(ctx: OpContext) -> HalVersion | None:
    version = _image_checks(ctx)
    _check_vector_shape(ctx, 1, "block_shape", (2,))
    _b2s_prepare(ctx)
    return version


def _b2s_prepare(ctx: OpContext) -> list[Shape]:
    dims = _nhwc_dims(ctx)
    blocks = ctx.constant(1)
    if dims is None or blocks is None:
        return [(0, 0, 0, 0)]
    out = _batch_to_space_shape(dims, _blocks(blocks, ctx.fail), ctx.fail)
    return [dims_in_layout(out, layout_is_nchw(ctx))]


def _batch_to_space(x: np.ndarray, bh: int, bw: int) -> np.ndarray:
    b, h, w, c = x.shape
    n = b // (bh * bw)
    y = x.reshape(bh, bw, n, h, w, c).transpose(2, 3, 0, 4, 1, 5).copy()
    return y.reshape(n, h * bh, w * bw, c)


def _b2s_execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    def fail(message: str) -> HalError:
        return runtime_failure(ctx, message)

    constant = ctx.constant(1)
    if constant is not None:
        bh, bw = _blocks(constant, ctx.fail)

        def fixed(x: np.ndarray) -> np.ndarray:
            _batch_to_space_shape(x.shape, (bh, bw), fail)
            return _batch_to_space(x, bh, bw)

        return _image_kernel(ctx, fixed)
    nchw = layout_is_nchw(ctx)

    def dynamic(x: np.ndarray, blocks: np.ndarray) -> np.ndarray:
        bh, bw = _blocks(blocks, fail)
        nhwc = x.transpose(0, 2, 3, 1) if nchw else x
        _batch_to_space_shape(nhwc.shape, (bh, bw), fail)
        return in_layout(lambda v: _batch_to_space(v, bh, bw), nchw)(x)

    return dynamic


BATCH_TO_SPACE_ND = register(
    OperationDef(
        OperationType.BATCH_TO_SPACE_ND,
        inputs=(
            Arg("input"),
            Arg("block_shape", TENSOR_INT32),
            Arg("layout", BOOL_SCALAR, optional=True),
        ),
        outputs=(Arg("output"),),
        layout=2,
        types=_V11_TYPES,
        execute=_b2s_execute,
        zero_sized_inputs=False,
        prepare=_b2s_prepare,
        validate=_b2s_validate,
    )
)


def _s2b_validate(ctx: OpContext) -> HalVersion | None:
    version = _image_checks(ctx)
    _check_vector_shape(ctx, 1, "block_shape", (2,))
    _check_vector_shape(ctx, 2, "paddings", (2, 2))
    _s2b_prepare(ctx)
    src = ctx.inputs[0]
    if src.type == _T.TENSOR_QUANT8_ASYMM and src.zeroPoint != 0:
        version = max(version or _V.V1_1, _V.V1_2)  # padding with the zero point
    return version


def _s2b_prepare(ctx: OpContext) -> list[Shape]:
    dims = _nhwc_dims(ctx)
    blocks, pads = ctx.constant(1), ctx.constant(2)
    if dims is None or blocks is None or pads is None:
        return [(0, 0, 0, 0)]
    out = _space_to_batch_shape(
        dims,
        _blocks(blocks, ctx.fail),
        _space_pads(pads, ctx.fail),
        ctx.fail,
    )
    return [dims_in_layout(out, layout_is_nchw(ctx))]


def _space_to_batch(x: np.ndarray, bh: int, bw: int, pads, value) -> np.ndarray:
    n, h, w, c = x.shape
    top, bottom, left, right = pads
    ph, pw = h + top + bottom, w + left + right
    padded = np.full((n, ph, pw, c), value, x.dtype)
    padded[:, top : top + h, left : left + w, :] = x
    y = padded.reshape(n, ph // bh, bh, pw // bw, bw, c).transpose(2, 4, 0, 1, 3, 5).copy()
    return y.reshape(bh * bw * n, ph // bh, pw // bw, c)


def _s2b_execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    def fail(message: str) -> HalError:
        return runtime_failure(ctx, message)

    src = ctx.inputs[0]
    value = (
        src.zeroPoint if src.type in (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED) else 0
    )
    blocks_c, pads_c = ctx.constant(1), ctx.constant(2)
    if blocks_c is not None and pads_c is not None:
        bh, bw = _blocks(blocks_c, ctx.fail)
        pads = _space_pads(pads_c, ctx.fail)

        def fixed(x: np.ndarray) -> np.ndarray:
            _space_to_batch_shape(x.shape, (bh, bw), pads, fail)
            return _space_to_batch(x, bh, bw, pads, value)

        return _image_kernel(ctx, fixed)
    nchw = layout_is_nchw(ctx)

    def dynamic(x: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
        bh, bw = _blocks(blocks_c if blocks_c is not None else b, fail)
        pads = _space_pads(pads_c if pads_c is not None else p, fail)
        _space_to_batch_shape(nhwc_dims(x.shape, nchw), (bh, bw), pads, fail)
        return in_layout(lambda v: _space_to_batch(v, bh, bw, pads, value), nchw)(x)

    return dynamic


SPACE_TO_BATCH_ND = register(
    OperationDef(
        OperationType.SPACE_TO_BATCH_ND,
        inputs=(
            Arg("input"),
            Arg("block_shape", TENSOR_INT32),
            Arg("paddings", TENSOR_INT32),
            Arg("layout", BOOL_SCALAR, optional=True),
        ),
        outputs=(Arg("output"),),
        layout=3,
        types=_V11_TYPES,
        execute=_s2b_execute,
        zero_sized_inputs=False,
        prepare=_s2b_prepare,
        validate=_s2b_validate,
    )
)

# ---------------------------------------------------------------------------
# CHANNEL_SHUFFLE
# ---------------------------------------------------------------------------

#: CHANNEL_SHUFFLE takes inputs of rank 1 to 4
SHUFFLE_MAX_RANK = 4


def _shuffle_params(ctx: OpContext, rank: int) -> tuple[int, int]:
    groups = int(ctx.scalar(1))
    if groups < 1:
        raise ctx.fail(f"input 1 (num_groups) is {groups}; it must be at least 1")
    axis = int(ctx.scalar(2))
    if not -rank <= axis < rank:
        raise ctx.fail(
            f"input 2 (axis) is {axis}; for a rank {rank} input it must be in [{-rank}, {rank})"
        )
    return groups, axis + rank if axis < 0 else axis


def _shuffle_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, min_rank=1, max_rank=SHUFFLE_MAX_RANK)
    check_same_quant(ctx)
    _shuffle_prepare(ctx)


def _shuffle_prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    if dims is None:
        ctx.scalar(1)
        return [None]
    groups, axis = _shuffle_params(ctx, len(dims))
    if dims[axis] and dims[axis] % groups:
        raise ctx.fail(
            f"input 0 has size {dims[axis]} on axis {axis}, which is not a multiple of "
            f"num_groups {groups}"
        )
    return [tuple(dims)]


def _shuffle(x: np.ndarray, groups: int, axis: int) -> np.ndarray:
    shape = x.shape
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    y = x.reshape(outer, groups, shape[axis] // groups, inner).transpose(0, 2, 1, 3).copy()
    return y.reshape(shape)


def _shuffle_execute(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    dims = ctx.inputs[0].dimensions
    if dims is not None:
        groups, axis = _shuffle_params(ctx, len(dims))
        if all(dims):
            view = (
                int(np.prod(dims[:axis], dtype=np.int64)),
                groups,
                dims[axis] // groups,
                int(np.prod(dims[axis + 1 :], dtype=np.int64)),
            )
            shape = tuple(dims)
            return lambda x: x.reshape(view).transpose(0, 2, 1, 3).copy().reshape(shape)
    groups, raw_axis = int(ctx.scalar(1)), int(ctx.scalar(2))

    def dynamic(x: np.ndarray) -> np.ndarray:
        if not -x.ndim <= raw_axis < x.ndim:
            raise runtime_failure(ctx, f"input 2 (axis) {raw_axis} is out of range")
        axis = raw_axis % x.ndim
        if groups < 1 or x.shape[axis] % groups:
            raise runtime_failure(
                ctx, f"axis {axis} of size {x.shape[axis]} cannot be split into {groups} groups"
            )
        return _shuffle(x, groups, axis)

    return dynamic


CHANNEL_SHUFFLE = register(
    OperationDef(
        OperationType.CHANNEL_SHUFFLE,
        inputs=(Arg("input"), Arg("num_groups", INT32_SCALAR), Arg("axis", INT32_SCALAR)),
        outputs=(Arg("output"),),
        types={
            _T.TENSOR_FLOAT16: _V.V1_2,
            _T.TENSOR_FLOAT32: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_shuffle_execute,
        zero_sized_inputs=False,
        prepare=_shuffle_prepare,
        validate=_shuffle_validate,
    )
)

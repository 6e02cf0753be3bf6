"""The registration's zero-sized rule, enforced once by ``OperationDef.kernel``.

Operations registered with ``zero_sized_inputs=False`` fail an execution that
hands any input a zero-sized tensor (AOSP's checkNoZeroSizedInput); the check
is added only where a shape is not known to be non-empty at bind time.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.registry import registered
from ops_harness import context, f32, ivec, out, scalar

from nnhal.errors import GeneralFailure
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

REFUSING = {
    Op.SQUEEZE, Op.EXPAND_DIMS, Op.TILE, Op.PAD, Op.PAD_V2, Op.BATCH_TO_SPACE_ND,
    Op.SPACE_TO_BATCH_ND, Op.DEPTH_TO_SPACE, Op.SPACE_TO_DEPTH, Op.CHANNEL_SHUFFLE,
    Op.SPLIT, Op.STRIDED_SLICE, Op.GATHER, Op.REDUCE_SUM, Op.REDUCE_PROD, Op.REDUCE_MAX,
    Op.REDUCE_MIN, Op.REDUCE_ALL, Op.REDUCE_ANY, Op.RANK, Op.TOPK_V2,
    Op.DETECTION_POSTPROCESSING, Op.HEATMAP_MAX_KEYPOINT, Op.GENERATE_PROPOSALS,
    Op.ROI_POOLING,
}  # fmt: skip


def test_the_registrations_that_refuse_zero_sized_inputs():
    refusing = {op for op, d in registered().items() if not d.zero_sized_inputs}
    assert refusing == REFUSING


def _tile(dims):
    x = f32((2, 3), dims=dims)
    return context(Op.TILE, [x, ivec([2, 1])], [out(T.TENSOR_FLOAT32, (0, 0))])


def test_an_unknown_shape_is_checked_and_names_the_input():
    ctx = _tile((0, 0))
    kernel = ctx.op.kernel(ctx)
    assert kernel(np.ones((2, 3), np.float32), np.array([2, 1], np.int32)).shape == (4, 3)
    with pytest.raises(
        GeneralFailure,
        match=r"TILE.*zero-sized input: input 0 \(input\) "
        r"has shape \(0, 3\)",
    ):
        kernel(np.ones((0, 3), np.float32), np.array([2, 1], np.int32))


def test_a_known_non_empty_shape_binds_the_kernel_unwrapped():
    known, unknown = _tile((2, 3)), _tile((0, 0))
    assert known.op.kernel(known).__name__ != "refusing_zero_sized"
    assert unknown.op.kernel(unknown).__name__ == "refusing_zero_sized"


def test_an_operation_that_accepts_zero_sized_inputs_is_not_wrapped():
    ctx = context(
        Op.MEAN, [f32((0, 3), dims=(0, 0)), ivec([1]), scalar(0)], [out(T.TENSOR_FLOAT32, (0,))]
    )
    result = ctx.op.kernel(ctx)(np.ones((0, 3), np.float32), np.array([1], np.int32))
    assert result.shape == (0,)

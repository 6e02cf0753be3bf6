"""The registration's layout property, ``OperationDef.layout``, and its one rule.

Every operation with an NCHW ``layout`` flag says where the flag is (an index,
or a function of the call when its signature moves it); ``validate_operation``
refuses the flag given as NO_VALUE for all of them, and kernels and shape rules
read it through ``layout.layout_is_nchw``.
"""

from __future__ import annotations

import pytest
from nnhal.driver.ops.layout import layout_is_nchw
from nnhal.driver.ops.registry import registered, validate_operation
from ops_harness import context, f32, ivec, no_value, out, scalar

from nnhal.errors import InvalidArgument
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

WITH_LAYOUT = {
    Op.CONV_2D, Op.DEPTHWISE_CONV_2D, Op.GROUPED_CONV_2D, Op.TRANSPOSE_CONV_2D,
    Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D, Op.L2_POOL_2D, Op.RESIZE_BILINEAR,
    Op.RESIZE_NEAREST_NEIGHBOR, Op.DEPTH_TO_SPACE, Op.SPACE_TO_DEPTH, Op.BATCH_TO_SPACE_ND,
    Op.SPACE_TO_BATCH_ND, Op.ROI_ALIGN, Op.ROI_POOLING, Op.HEATMAP_MAX_KEYPOINT,
    Op.GENERATE_PROPOSALS, Op.INSTANCE_NORMALIZATION,
}  # fmt: skip

NCHW = scalar(True, T.BOOL)
I = scalar  # an INT32 scalar parameter


def test_the_registrations_that_have_a_layout_flag():
    declared = {op for op, d in registered().items() if d.layout is not None}
    assert declared == WITH_LAYOUT
    # and each of them names a `layout` input among its registered arguments
    for op in WITH_LAYOUT:
        names = {part for arg in registered()[op].inputs for part in arg.name.split("|")}
        assert "layout" in names, op.name


def _pool(*params):
    x = f32((1, 4, 4, 2))
    return context(Op.MAX_POOL_2D, [x, *params], [out(T.TENSOR_FLOAT32, (0, 0, 0, 0))])


POOL_IMPLICIT = [I(1), I(1), I(1), I(2), I(2), I(0)]  # padding, strides, filter, activation
POOL_EXPLICIT = [I(0), I(0), I(0), I(0), I(1), I(1), I(2), I(2), I(0)]


@pytest.mark.parametrize(
    "params, index",
    [
        (POOL_IMPLICIT, None),
        ([*POOL_IMPLICIT, NCHW], 7),
        (POOL_EXPLICIT, None),
        ([*POOL_EXPLICIT, NCHW], 10),
    ],
    ids=["implicit", "implicit-nchw", "explicit", "explicit-nchw"],
)
def test_the_place_follows_the_signature(params, index):
    ctx = _pool(*params)
    assert ctx.op.layout_index(ctx) == index
    assert layout_is_nchw(ctx) is (index is not None)


@pytest.mark.parametrize(
    "op, inputs",
    [
        (Op.DEPTH_TO_SPACE, [f32((1, 2, 2, 4)), I(2)]),
        (Op.RESIZE_BILINEAR, [f32((1, 2, 2, 1)), I(4), I(4)]),
        (Op.MAX_POOL_2D, [f32((1, 4, 4, 2)), *POOL_IMPLICIT]),
        (Op.SPACE_TO_BATCH_ND, [f32((1, 4, 4, 1)), ivec([2, 2]), ivec([[0, 0], [0, 0]])]),
    ],
    ids=lambda v: v.name if isinstance(v, Op) else "",
)
def test_a_layout_given_as_no_value_is_refused_for_every_operation(op, inputs):
    """Left off the list is NHWC; NO_VALUE in its place is refused, naming the rule."""
    outputs = [out(T.TENSOR_FLOAT32, (0, 0, 0, 0))]
    nhwc = context(op, inputs, outputs)
    validate_operation(nhwc)
    assert layout_is_nchw(nhwc) is False
    given = context(op, [*inputs, no_value(T.BOOL)], outputs)
    with pytest.raises(InvalidArgument, match=r"input \d+ \(layout\) has no value"):
        validate_operation(given)

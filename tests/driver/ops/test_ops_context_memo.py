"""OpContext.remember: a padded operation's parameters read once per context."""

from __future__ import annotations

import dataclasses

import numpy as np
from nnhal.driver.ops import registry
from nnhal.driver.ops._conv_util import read_params
from nnhal.driver.ops.conv import CONV
from nnhal.driver.ops.registry import OpContext, OperandInfo

from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

F32 = T.TENSOR_FLOAT32


def _scalar(value: int) -> OperandInfo:
    return OperandInfo(type=T.INT32, dimensions=(), value=np.array(value, np.int32))


def _conv_context(stride: int) -> OpContext:
    """CONV_2D with implicit padding (SAME), the given stride, no activation."""
    inputs = [
        OperandInfo(type=F32, dimensions=(1, 8, 8, 2)),
        OperandInfo(type=F32, dimensions=(3, 3, 3, 2), value=np.zeros((3, 3, 3, 2), np.float32)),
        OperandInfo(type=F32, dimensions=(3,), value=np.zeros(3, np.float32)),
        _scalar(1),  # padding: SAME
        _scalar(stride),
        _scalar(stride),
        _scalar(0),
    ]
    outputs = [OperandInfo(type=F32, dimensions=(0, 0, 0, 0))]
    return OpContext(op=registry.lookup(Op.CONV_2D), inputs=inputs, outputs=outputs)


def test_parameters_are_read_once_per_context():
    ctx = _conv_context(2)
    signature = CONV.signature
    where = signature.resolve(ctx)
    assert signature.resolve(ctx) is where
    params = read_params(ctx, where, signature)
    assert params.stride == (2, 2)
    assert read_params(ctx, where, signature) is params
    # the shape rule then uses those parameters: 8 / 2 with SAME padding
    assert ctx.op.prepare(ctx) == [(1, 4, 4, 3)]


def test_a_replaced_context_reads_its_own_parameters():
    ctx = _conv_context(2)
    signature = CONV.signature
    read_params(ctx, signature.resolve(ctx), signature)
    other = dataclasses.replace(ctx, inputs=_conv_context(1).inputs)
    params = read_params(other, signature.resolve(other), signature)
    assert params.stride == (1, 1)
    assert other.op.prepare(other) == [(1, 8, 8, 3)]


def test_a_failure_is_not_kept():
    calls = []

    def make():
        calls.append(1)
        raise ValueError("not yet")

    ctx = _conv_context(1)
    for _ in range(2):
        try:
            ctx.remember("key", make)
        except ValueError:
            pass
    assert len(calls) == 2
    assert ctx.remember("key", lambda: 5) == 5
    assert ctx.remember("key", lambda: 6) == 5

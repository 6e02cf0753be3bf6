"""SELECT of 4-byte values as a masked copy (driver/ops/select.py) against np.where."""

from __future__ import annotations

import numpy as np
import pytest
from ops_harness import b8, context, f16, f32, i32, out

from nnhal.types import OperationType as Op

RNG = np.random.default_rng(7)


def _kernel(make, shape):
    ins = [b8(shape), make(shape), make(shape)]
    ctx = context(Op.SELECT, ins, [out(ins[1].type)])
    return ctx.op.kernel(ctx)


@pytest.mark.parametrize("make", [f32, i32, f16])
@pytest.mark.parametrize("shape", [(1,), (1, 1024), (3, 5, 7), (0, 4)])
def test_select_gives_what_np_where_gives(make, shape):
    kernel = _kernel(make, shape)
    c = RNG.random(shape) < 0.5
    a, b = make(shape).data, make(shape).data
    got = kernel(c, a, b)
    want = np.where(c, a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(got, a) and not np.shares_memory(got, b)


def test_operands_in_any_memory_layout():
    kernel = _kernel(f32, (6, 8))
    c = (RNG.random((8, 6)) < 0.5).T
    a = RNG.random((6, 16)).astype(np.float32)[:, ::2]
    b = np.asfortranarray(RNG.random((6, 8)).astype(np.float32))
    b.flags.writeable = False  # inputs are read-only at run time
    np.testing.assert_array_equal(kernel(c, a, b), np.where(c, a, b))
    assert kernel(c, a, b).flags.writeable

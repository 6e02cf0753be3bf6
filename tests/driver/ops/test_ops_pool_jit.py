"""MAX_POOL_2D's and AVERAGE_POOL_2D's compiled kernels (``_jit_conv.max_pool_float``,
``average_pool_float``) against the numpy path.

Each case is compiled with ``kernels.set_kernels("numpy")`` and with the default
(numba installed through the ``test`` extra) and run on the same inputs. A
maximum gives the same values, NaN and infinities included; an average the same
values to float32 rounding (numpy's order of the additions
depends on the output's size), with NaN and infinities in the same places.
L2_POOL_2D has no compiled kernel.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from nnhal.driver.ops import kernels
from test_ops_conv_jit import _compiled, break_kernels

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="numba is not installed"
)
SAME, VALID = 1, 2

#: (N, H, W, C, padding (code or (left, right, top, bottom)), (sw, sh), (fw, fh))
GEOMETRIES = [
    (1, 112, 112, 64, SAME, (2, 2), (3, 3)),  # ResNet's stem pool
    (2, 9, 11, 5, (1, 1, 1, 1), (2, 2), (3, 3)),
    (1, 8, 8, 16, VALID, (2, 2), (2, 2)),
    (1, 7, 10, 3, (0, 2, 1, 0), (1, 3), (3, 2)),
    (1, 5, 5, 8, SAME, (1, 1), (5, 5)),  # windows wider than the input's border
    (1, 6, 6, 4, VALID, (1, 1), (6, 6)),  # a global pool
]


def _model(geometry, activation, nchw, dtype, op=Op.MAX_POOL_2D):
    n, h, w, c, padding, strides, filt = geometry
    mb = ModelBuilder()
    g = mb.main
    tt = T.TENSOR_FLOAT32 if dtype == np.float32 else T.TENSOR_FLOAT16
    shape = [n, c, h, w] if nchw else [n, h, w, c]
    pads = [padding] if isinstance(padding, int) else list(padding)
    scalars = [*pads, *strides, *filt, activation]
    ins = [g.input(tt, shape), *(g.constant(T.INT32, v) for v in scalars)]
    ins.append(g.constant(T.BOOL, nchw))
    g.operation(op, ins, [g.output(tt, [0, 0, 0, 0])])
    rng = np.random.default_rng(hash((geometry, activation, nchw, op)) % 2**32)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 8)] = -0.0
    flat[rng.integers(0, flat.size, 8)] = 0.0
    flat[rng.integers(0, flat.size, 2)] = [np.inf, -np.inf]
    flat[0] = np.nan  # the first pixel: inside the first window of every geometry
    return mb.build(), [x]


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.signbit(a), np.signbit(b))
    np.testing.assert_array_equal(np.nan_to_num(a), np.nan_to_num(b))


@pytest.fixture
def pool_calls(monkeypatch):
    """The names of the compiled pool kernels called."""
    module = kernels.jit_module()
    calls = []
    for name in ("max_pool_float", "average_pool_float"):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    return calls


OPS = {Op.MAX_POOL_2D: "max_pool_float", Op.AVERAGE_POOL_2D: "average_pool_float"}


@pytest.mark.parametrize("op", list(OPS), ids=lambda o: o.name)
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:4])))
@pytest.mark.parametrize("activation", [0, 1, 3])
@pytest.mark.parametrize("nchw", [False, True], ids=["nhwc", "nchw"])
def test_compiled_pools_agree_with_numpy(pool_calls, op, geometry, activation, nchw):
    model, inputs = _model(geometry, activation, nchw, np.float32, op)
    (ref,) = _compiled(model, kernels.NUMPY).run(inputs)
    assert pool_calls == []
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    assert pool_calls == [OPS[op]]
    _agree(op, ours, ref)
    if activation == 0:
        assert np.isnan(ref).any()


def _agree(op, ours, ref):
    if op == Op.MAX_POOL_2D:
        # the same values, NaN included; the sign of a zero maximum is the later
        # tap's, as numpy's x86 SIMD maximum gives, but other CPUs' numpy may differ
        assert ours.dtype == ref.dtype and ours.shape == ref.shape
        np.testing.assert_array_equal(ours, ref)
        return
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(ours), np.isinf(ref))
    finite = np.isfinite(ref)
    tol = 1e-6 if ref.dtype == np.float32 else 1e-3
    np.testing.assert_allclose(ours[finite], ref[finite], rtol=tol, atol=tol)


@pytest.mark.parametrize("op", list(OPS), ids=lambda o: o.name)
def test_float16_goes_through_them(pool_calls, op):
    model, inputs = _model(GEOMETRIES[1], 0, False, np.float16, op)
    (ref,) = _compiled(model, kernels.NUMPY).run(inputs)
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    assert pool_calls == [OPS[op]]
    _agree(op, ours, ref)


@pytest.mark.parametrize("op", list(OPS), ids=lambda o: o.name)
def test_a_failing_compile_falls_back_to_numpy(monkeypatch, op):
    break_kernels(monkeypatch, OPS[op])
    model, inputs = _model(GEOMETRIES[1], 0, False, np.float32, op)
    (ref,) = _compiled(model, kernels.NUMPY).run(inputs)
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    _same_bits(ours, ref)
    assert not kernels.jit_wanted()

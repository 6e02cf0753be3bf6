"""MAX_POOL_2D's compiled kernel (``_jit_conv.max_pool_float``) against the numpy path.

Each case is compiled with ``kernels.set_kernels("numpy")`` and with the default
(numba installed through the ``test`` extra) and run on the same inputs: the
outputs are the same bits, NaN, infinities and signed zeros included.
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


def _model(geometry, activation, nchw, dtype):
    n, h, w, c, padding, strides, filt = geometry
    mb = ModelBuilder()
    g = mb.main
    tt = T.TENSOR_FLOAT32 if dtype == np.float32 else T.TENSOR_FLOAT16
    shape = [n, c, h, w] if nchw else [n, h, w, c]
    pads = [padding] if isinstance(padding, int) else list(padding)
    scalars = [*pads, *strides, *filt, activation]
    ins = [g.input(tt, shape), *(g.constant(T.INT32, v) for v in scalars)]
    ins.append(g.constant(T.BOOL, nchw))
    g.operation(Op.MAX_POOL_2D, ins, [g.output(tt, [0, 0, 0, 0])])
    rng = np.random.default_rng(hash((geometry, activation, nchw)) % 2**32)
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
def max_pool_calls(monkeypatch):
    module = kernels.jit_module()
    calls = []
    real = module.max_pool_float
    monkeypatch.setattr(module, "max_pool_float", lambda *a: calls.append(1) or real(*a))
    return calls


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:4])))
@pytest.mark.parametrize("activation", [0, 1, 3])
@pytest.mark.parametrize("nchw", [False, True], ids=["nhwc", "nchw"])
def test_compiled_max_pool_gives_the_numpy_bits(max_pool_calls, geometry, activation, nchw):
    model, inputs = _model(geometry, activation, nchw, np.float32)
    (ref,) = _compiled(model, kernels.NUMPY).run(inputs)
    assert max_pool_calls == []
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    assert max_pool_calls == [1]
    _same_bits(ours, ref)
    if activation == 0:
        assert np.isnan(ref).any()


def test_float16_goes_through_it(max_pool_calls):
    model, inputs = _model(GEOMETRIES[1], 0, False, np.float16)
    (ref,) = _compiled(model, kernels.NUMPY).run(inputs)
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    assert max_pool_calls == [1]
    _same_bits(ours, ref)


def test_a_failing_compile_falls_back_to_numpy(monkeypatch):
    break_kernels(monkeypatch, "max_pool_float")
    model, inputs = _model(GEOMETRIES[1], 0, False, np.float32)
    (ref,) = _compiled(model, kernels.NUMPY).run(inputs)
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    _same_bits(ours, ref)
    assert not kernels.jit_wanted()

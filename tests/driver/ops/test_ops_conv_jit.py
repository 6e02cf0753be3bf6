"""The compiled convolution kernels (``_jit_conv``) against the numpy reference.

Each case is compiled twice, with ``kernels.set_kernels("numpy")`` and with
the default (the compiled kernels, numba being installed in CI through the
``test`` extra), and run on the same inputs: float outputs agree to float32
rounding, quantized ones bit for bit. The shared NNAPI vectors of the
convolutions pass on both paths. Without numba the compiled half is skipped.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from nnhal.driver.ops import kernels
from repo_paths import REPO_ROOT

from nnhal.builder import ModelBuilder
from nnhal.errors import HalError
from nnhal.types import ErrorStatus
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op
from nnhal.vector_runner import compare_outputs
from nnhal.vectors import find_vector_files, load_vectors, operations_used

VECTORS = Path(REPO_ROOT).parent / "shared" / "nnapi-vectors"
if not VECTORS.is_dir():  # a worktree next to the main checkout
    VECTORS = Path("/work/shared/nnapi-vectors")

needs_numba = pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="numba is not installed"
)


@pytest.fixture(autouse=True)
def _restore_choice():
    yield
    kernels.set_kernels(None)


def _compiled(model, choice: str):
    kernels.set_kernels(choice)
    try:
        return compile_model(model)
    finally:
        kernels.set_kernels(None)


def break_kernels(monkeypatch, *names):
    """The named compiled kernels raise as a failed compile would, and the compiled
    path is wanted again (other tests may have given up on it); returns the module."""
    module = kernels.jit_module()

    def broken(*args):
        raise RuntimeError("simulated compile failure")

    for name in names:
        monkeypatch.setattr(module, name, broken)
    monkeypatch.setattr(kernels, "_broken", False)
    monkeypatch.setattr(kernels, "_module", module)
    return module


def _both(model, inputs):
    """(numpy outputs, compiled-path outputs) of one model."""
    ours = _compiled(model, kernels.NUMPY).run([np.copy(a) for a in inputs])
    jit = _compiled(model, kernels.AUTO).run([np.copy(a) for a in inputs])
    return ours, jit


# ---------------------------------------------------------------------------
# Random cases
# ---------------------------------------------------------------------------

#: (N, H, W, C, KH, KW, multiplier, (left, right, top, bottom), (sw, sh), (dw, dh))
GEOMETRIES = [
    (1, 9, 11, 8, 3, 3, 1, (1, 1, 1, 1), (1, 1), (1, 1)),  # MobileNet's: fused 3x3
    (2, 8, 8, 5, 3, 3, 1, (0, 1, 0, 1), (2, 2), (1, 1)),  # stride 2, SAME-like
    (1, 10, 7, 3, 3, 3, 1, (2, 2, 2, 2), (1, 1), (2, 2)),  # dilated 3x3
    (1, 6, 9, 4, 2, 4, 1, (1, 2, 0, 1), (1, 3), (1, 1)),  # other filter sizes
    (2, 7, 6, 3, 3, 3, 2, (1, 1, 1, 1), (1, 1), (1, 1)),  # depth multiplier
    (1, 5, 5, 2, 1, 1, 3, (0, 0, 0, 0), (1, 1), (1, 1)),  # 1x1 with multiplier
    (1, 4, 4, 6, 3, 3, 1, (0, 0, 0, 0), (1, 1), (1, 1)),  # no padding at all
    (1, 3, 3, 16, 5, 5, 1, (2, 2, 2, 2), (2, 1), (1, 1)),  # window wider than the input
    (1, 12, 5, 4, 3, 3, 1, (1, 1, 1, 1), (1, 2), (1, 2)),  # anisotropic
    # four output pixels a step (unit width stride and dilation): a whole number of
    # steps across the interior, and steps with a remainder under height stride and
    # dilation (channels not a multiple of the SIMD width)
    (2, 6, 14, 20, 3, 3, 1, (1, 1, 1, 1), (1, 1), (1, 1)),
    (1, 11, 13, 7, 3, 3, 1, (0, 2, 1, 1), (1, 2), (1, 2)),
    # the same at a width stride of 2: steps and a remainder across the interior,
    # padded or not on the left, odd and even widths; then dilated (one pixel a time)
    (1, 9, 37, 20, 3, 3, 1, (1, 1, 1, 1), (2, 2), (1, 1)),
    (2, 7, 24, 33, 3, 3, 1, (0, 1, 0, 1), (2, 1), (1, 1)),
    (1, 5, 40, 16, 3, 3, 1, (2, 0, 1, 1), (2, 3), (1, 1)),
    (1, 9, 20, 8, 3, 3, 1, (2, 2, 2, 2), (2, 2), (2, 2)),
]
ACTIVATIONS = [0, 1, 2, 3]


def _model(geometry, activation, nchw, dtype, quant=None, filter_input=False):
    n, h, w, c, kh, kw, m, pads, strides, dilation = geometry
    co = c * m
    mb = ModelBuilder()
    g = mb.main
    shape = [n, c, h, w] if nchw else [n, h, w, c]
    rng = np.random.default_rng(hash((geometry, activation, nchw)) % 2**32)
    if quant is None:
        x = rng.standard_normal(shape).astype(dtype)
        wv = rng.standard_normal((1, kh, kw, co)).astype(dtype)
        b = rng.standard_normal(co).astype(dtype)
        tt = T.TENSOR_FLOAT32 if dtype == np.float32 else T.TENSOR_FLOAT16
        inp = g.input(tt, shape)
        wop = g.input(tt, wv.shape) if filter_input else g.constant(tt, wv)
        bop = g.constant(tt, b)
        out = g.output(tt, [0, 0, 0, 0])
    else:
        tt, lo, hi, xz, wz, yz = quant
        x = rng.integers(lo, hi + 1, shape).astype(dtype)
        wv = rng.integers(lo, hi + 1, (1, kh, kw, co)).astype(dtype)
        b = rng.integers(-3000, 3000, co).astype(np.int32)
        inp = g.input(tt, shape, 0.05, xz)
        wop = (
            g.input(tt, wv.shape, 0.02, wz)
            if filter_input
            else g.constant(tt, wv, scale=0.02, zero_point=wz)
        )
        bop = g.constant(T.TENSOR_INT32, b, scale=0.05 * 0.02)
        out = g.output(tt, [0, 0, 0, 0], 0.1, yz)
    scalars = [*pads, *strides, m, activation]
    ins = [inp, wop, bop, *(g.constant(T.INT32, v) for v in scalars)]
    ins += [g.constant(T.BOOL, nchw), *(g.constant(T.INT32, v) for v in dilation)]
    g.operation(Op.DEPTHWISE_CONV_2D, ins, [out])
    return mb.build(), [x, wv] if filter_input else [x]


@needs_numba
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:7])))
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("nchw", [False, True], ids=["nhwc", "nchw"])
def test_float_depthwise_agrees(geometry, activation, nchw):
    model, inputs = _model(geometry, activation, nchw, np.float32)
    (ref,), (jit,) = _both(model, inputs)
    assert ref.shape == jit.shape
    np.testing.assert_allclose(jit, ref, rtol=2e-6, atol=2e-6)


@needs_numba
@pytest.mark.parametrize("geometry", GEOMETRIES[:5], ids=lambda g: "x".join(map(str, g[:7])))
def test_float16_and_filter_as_input_agree(geometry):
    model, inputs = _model(geometry, 3, False, np.float16, filter_input=True)
    (ref,), (jit,) = _both(model, inputs)
    assert jit.dtype == np.float16
    np.testing.assert_array_equal(jit, ref)  # float32 sums rounded to float16: equal here


#: (type, lowest, highest, input zero point, filter zero point, output zero point)
QUANT = [
    (T.TENSOR_QUANT8_ASYMM, 0, 255, 128, 120, 100),
    (T.TENSOR_QUANT8_ASYMM, 0, 255, 0, 255, 0),  # extreme zero points
    (T.TENSOR_QUANT8_ASYMM_SIGNED, -128, 127, -3, 5, -10),
]


@needs_numba
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:7])))
@pytest.mark.parametrize("quant", QUANT, ids=["u8", "u8-edges", "s8"])
@pytest.mark.parametrize("activation", [0, 3])
@pytest.mark.parametrize("nchw", [False, True], ids=["nhwc", "nchw"])
def test_quant_depthwise_is_bit_exact(geometry, quant, activation, nchw):
    dtype = np.uint8 if quant[0] == T.TENSOR_QUANT8_ASYMM else np.int8
    model, inputs = _model(geometry, activation, nchw, dtype, quant)
    (ref,), (jit,) = _both(model, inputs)
    np.testing.assert_array_equal(jit, ref)


def _conv_model(op, geometry, activation, nchw, quant, groups=1):
    """A quantized (``quant`` None: float32) CONV_2D or GROUPED_CONV_2D of the
    geometry's input and filter size."""
    n, h, w, c, kh, kw, _, pads, strides, dilation = geometry
    o = 2 * groups
    mb = ModelBuilder()
    g = mb.main
    shape = [n, c, h, w] if nchw else [n, h, w, c]
    rng = np.random.default_rng(hash((geometry, activation, nchw, op)) % 2**32)
    wshape = (o, kh, kw, c // groups)
    if quant is None:
        tt, out_scale = T.TENSOR_FLOAT32, ()
        x = rng.standard_normal(shape).astype(np.float32)
        # NaN passes the clamp on both paths: one in the first output's window
        left, top, (dw, dh) = pads[0], pads[2], dilation
        y, xc = -(-top // dh) * dh - top, -(-left // dw) * dw - left
        x[(0, 0, y, xc) if nchw else (0, y, xc, 0)] = np.nan
        wv = rng.standard_normal(wshape).astype(np.float32)
        ins = [g.input(tt, shape), g.constant(tt, wv)]
        ins += [g.constant(tt, rng.standard_normal(o).astype(np.float32))]
    else:
        tt, lo, hi, xz, wz, yz = quant
        out_scale = (0.1, yz)
        dtype = np.uint8 if tt == T.TENSOR_QUANT8_ASYMM else np.int8
        x = rng.integers(lo, hi + 1, shape).astype(dtype)
        wv = rng.integers(lo, hi + 1, wshape).astype(dtype)
        b = rng.integers(-3000, 3000, o).astype(np.int32)
        ins = [
            g.input(tt, shape, 0.05, xz),
            g.constant(tt, wv, scale=0.02, zero_point=wz),
            g.constant(T.TENSOR_INT32, b, scale=0.05 * 0.02),
        ]
    ins += [g.constant(T.INT32, v) for v in (*pads, *strides)]
    if op == Op.GROUPED_CONV_2D:
        ins += [g.constant(T.INT32, groups), g.constant(T.INT32, activation)]
        ins += [g.constant(T.BOOL, nchw)]
    else:
        ins += [g.constant(T.INT32, activation), g.constant(T.BOOL, nchw)]
        ins += [g.constant(T.INT32, v) for v in dilation]
    g.operation(op, ins, [g.output(tt, [0, 0, 0, 0], *out_scale)])
    return mb.build(), [x]


@needs_numba
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:7])))
@pytest.mark.parametrize("quant", QUANT, ids=["u8", "u8-edges", "s8"])
@pytest.mark.parametrize("activation", [0, 1, 3])
def test_quant_conv_requantization_is_bit_exact(geometry, quant, activation):
    """CONV_2D and GROUPED_CONV_2D quant8 go through the compiled requantization."""
    for op, groups in ((Op.CONV_2D, 1), (Op.GROUPED_CONV_2D, 1)):
        if op == Op.GROUPED_CONV_2D and geometry[9] != (1, 1):
            continue  # no dilation for GROUPED_CONV_2D
        model, inputs = _conv_model(op, geometry, activation, False, quant, groups)
        (ref,), (jit,) = _both(model, inputs)
        np.testing.assert_array_equal(jit, ref)


@needs_numba
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:7])))
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("nchw", [False, True], ids=["nhwc", "nchw"])
def test_float_conv_bias_and_clamp_agree(geometry, activation, nchw):
    """Float CONV_2D and GROUPED_CONV_2D add the bias and clamp in one compiled pass:
    the same operations on the same matmul results as numpy's, so the same values."""
    for op, groups in ((Op.CONV_2D, 1), (Op.GROUPED_CONV_2D, 2)):
        if op == Op.GROUPED_CONV_2D and (geometry[9] != (1, 1) or geometry[3] % 2):
            continue  # no dilation for GROUPED_CONV_2D; channels split in two groups
        model, inputs = _conv_model(op, geometry, activation, nchw, None, groups)
        (ref,), (jit,) = _both(model, inputs)
        assert np.isnan(ref).any()
        np.testing.assert_array_equal(jit, ref)


@needs_numba
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_integer_requantization_matches_the_reference(dtype):
    """``requantize_fixed`` against ``_conv_util.requantizer`` (TFLite's formula in numpy)
    on accumulators across the int32 range, wraps included, with left and right
    shifts and per-channel multipliers."""
    from nnhal.driver.ops import _conv_util, quant

    rng = np.random.default_rng(7)
    module = kernels.jit_module()
    # real multipliers 0.05 * scale / 0.1 from 5e-7 (right shifts) to 50 (left shifts)
    scales = np.array([1e-6, 1e-4, 0.01, 0.3, 0.5, 1.9, 2.1, 3, 4, 8, 30, 100], dtype=np.float32)
    channels = len(scales)
    mult, exp = _conv_util.multipliers(0.05, scales, 0.1)
    assert (exp > 0).any() and (exp < 0).any()
    zp = 3 if dtype == np.int8 else 120
    lo, hi = quant.activation_range(0, 0.1, zp, dtype)
    reference = _conv_util.requantizer(mult, exp, zp, lo, hi, dtype)
    acc = np.concatenate([
        rng.integers(-(2**31), 2**31, (500, channels)),
        rng.integers(-3000, 3000, (500, channels)),
        np.array([[-(2**31)] * channels, [2**31 - 1] * channels, [0] * channels]),
    ]).astype(np.float64)  # fmt: skip
    bias = rng.integers(-(2**31), 2**31, channels).astype(np.int64)
    out = np.empty(acc.shape, dtype=dtype)
    module.requantize_fixed(
        acc, bias, mult, np.maximum(exp, 0), np.maximum(-exp, 0), zp, lo, hi, out
    )
    np.testing.assert_array_equal(out, reference(acc.astype(np.int64) + bias))


@needs_numba
@pytest.mark.parametrize("acc", [np.float64, np.int32])
def test_quant_depthwise_on_the_wider_accumulators(monkeypatch, acc):
    """The float64 and int32 accumulations (filters whose bounds exceed float32's
    mantissa) agree too: forced here through the accumulation choice."""
    from nnhal.driver.ops import _qexact

    monkeypatch.setattr(_qexact, "accumulation_dtype", lambda bounds: None)
    if acc is np.float64:
        monkeypatch.setattr(_qexact, "accumulation_dtype", lambda bounds: np.float64)
    for geometry in GEOMETRIES[:5]:
        model, inputs = _model(geometry, 0, False, np.uint8, QUANT[0], filter_input=True)
        (ref,), (jit,) = _both(model, inputs)
        np.testing.assert_array_equal(jit, ref)


@needs_numba
def test_the_compiled_kernels_run(monkeypatch):
    """The default path really calls the compiled kernels (and the numpy one does not)."""
    module = kernels.jit_module()
    assert module is not None
    calls = []
    names = ("depthwise_float", "bias_clamp", "im2col", "depthwise_acc", "requantize")
    names += ("requantize_fixed",)
    for name in names:
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    float_model, f_in = _model(GEOMETRIES[0], 0, False, np.float32)
    conv_model, c_in = _conv_model(Op.CONV_2D, GEOMETRIES[0], 3, False, None)
    quant_model, q_in = _model(GEOMETRIES[0], 3, False, np.uint8, QUANT[0])  # one floor
    for model, inputs in ((float_model, f_in), (conv_model, c_in), (quant_model, q_in)):
        _compiled(model, kernels.NUMPY).run(inputs)
    assert calls == []
    _compiled(float_model, kernels.AUTO).run(f_in)
    assert calls == ["depthwise_float"]
    _compiled(conv_model, kernels.AUTO).run(c_in)
    assert set(calls[1:]) == {"im2col", "bias_clamp"}
    del calls[:]
    _compiled(quant_model, kernels.AUTO).run(q_in)
    assert set(calls) == {"depthwise_acc", "requantize"}


@needs_numba
def test_a_failing_compile_falls_back_to_numpy(monkeypatch, caplog):
    """A kernel that fails to compile logs one warning; numpy runs it and every
    kernel after it, with the same results."""
    module = break_kernels(
        monkeypatch, "depthwise_float", "depthwise_acc", "requantize", "requantize_fixed"
    )
    float_model, f_in = _model(GEOMETRIES[1], 1, False, np.float32)
    quant_model, q_in = _model(GEOMETRIES[1], 1, False, np.uint8, QUANT[0])
    float_ref = _compiled(float_model, kernels.NUMPY).run(f_in)[0]
    quant_ref = _compiled(quant_model, kernels.NUMPY).run(q_in)[0]
    f_model = _compiled(float_model, kernels.AUTO)
    q_model = _compiled(quant_model, kernels.AUTO)
    with caplog.at_level(logging.WARNING, logger=kernels.__name__):
        np.testing.assert_array_equal(f_model.run(f_in)[0], float_ref)
    assert "simulated compile failure" in caplog.text
    assert not kernels.jit_wanted()
    monkeypatch.setattr(kernels, "_broken", False)
    monkeypatch.setattr(kernels, "_module", module)
    np.testing.assert_array_equal(q_model.run(q_in)[0], quant_ref)
    assert not kernels.jit_wanted()


@needs_numba
@pytest.mark.parametrize("broken_name", ["im2col", "bias_clamp"])
@pytest.mark.parametrize("quant", [None, QUANT[0]], ids=["f32", "u8"])
def test_a_failing_conv_kernel_falls_back_to_numpy(monkeypatch, caplog, broken_name, quant):
    """CONV_2D's compiled im2col or bias pass failing to compile: one warning, and
    numpy's copy (centering a quantized input itself) or passes give the same values."""
    break_kernels(monkeypatch, broken_name)
    model, inputs = _conv_model(Op.CONV_2D, GEOMETRIES[0], 3, False, quant)
    ref = _compiled(model, kernels.NUMPY).run(inputs)[0]
    compiled = _compiled(model, kernels.AUTO)
    with caplog.at_level(logging.WARNING, logger=kernels.__name__):
        np.testing.assert_array_equal(compiled.run(inputs)[0], ref)
    if quant is None or broken_name == "im2col":  # quantized outputs take no bias pass
        assert "simulated compile failure" in caplog.text
        assert not kernels.jit_wanted()


@needs_numba
def test_running_out_of_memory_in_a_compiled_kernel_is_the_executions(monkeypatch):
    """A MemoryError from a compiled kernel is RESOURCE_EXHAUSTED for the execution,
    and the compiled kernels stay in use (it is not a compile failure)."""
    module = break_kernels(monkeypatch)

    def no_memory(*args):
        raise MemoryError("simulated")

    monkeypatch.setattr(module, "depthwise_float", no_memory)
    model, inputs = _model(GEOMETRIES[0], 0, False, np.float32)
    compiled = _compiled(model, kernels.AUTO)
    with pytest.raises(HalError) as info:
        compiled.run(inputs)
    assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
    assert kernels.jit_wanted()


def test_a_failing_import_falls_back_to_numpy(monkeypatch, caplog):
    """numba present but broken (its import raises): numpy, no crash."""
    import sys

    monkeypatch.setitem(sys.modules, "nnhal.driver.ops._jit_conv", None)  # import -> ImportError
    monkeypatch.setattr(kernels, "_broken", False)
    monkeypatch.setattr(kernels, "_module", None)
    monkeypatch.setattr(kernels, "_present", True)
    model, inputs = _model(GEOMETRIES[0], 3, False, np.float32)
    compiled = _compiled(model, kernels.AUTO)
    with caplog.at_level(logging.WARNING, logger=kernels.__name__):
        out = compiled.run(inputs)[0]
    monkeypatch.setattr(kernels, "_broken", False)
    ref = _compiled(model, kernels.NUMPY).run(inputs)[0]
    np.testing.assert_array_equal(out, ref)
    assert "compiled kernels disabled" in caplog.text


# ---------------------------------------------------------------------------
# The setting
# ---------------------------------------------------------------------------


def test_the_choice_and_where_it_comes_from(monkeypatch):
    monkeypatch.delenv(kernels.ENV, raising=False)
    assert kernels.current() == kernels.AUTO
    monkeypatch.setenv(kernels.ENV, "NumPy")
    assert kernels.current() == kernels.NUMPY
    assert not kernels.jit_wanted()
    kernels.set_kernels("auto")  # Python wins over the environment
    assert kernels.current() == kernels.AUTO
    kernels.set_kernels(None)
    assert kernels.current() == kernels.NUMPY
    with pytest.raises(ValueError, match="kernels must be 'auto' or 'numpy', got 'fast'"):
        kernels.parse_kernels("fast")


def test_serving_kernels_from_profiles(monkeypatch):
    monkeypatch.delenv(kernels.ENV, raising=False)
    assert kernels.serving_kernels([None, None]) is None
    assert kernels.serving_kernels([None, "numpy"]) == "numpy"
    with pytest.raises(ValueError, match="different kernels"):
        kernels.serving_kernels(["numpy", "auto"])
    monkeypatch.setenv(kernels.ENV, "auto")
    assert kernels.serving_kernels(["numpy"]) is None  # the environment wins


def test_profile_kernels_key():
    from nnhal.driver.profile import ProfileError, parse_profile

    assert parse_profile({"name": "t"}).kernels is None
    assert parse_profile({"name": "t", "kernels": "numpy"}).kernels == "numpy"
    with pytest.raises(ProfileError, match="kernels"):
        parse_profile({"name": "t", "kernels": "numba"})


def test_serve_refuses_profiles_that_disagree_on_kernels(tmp_path):
    import os
    import subprocess
    import sys

    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('name = "a"\nkernels = "numpy"\n')
    b.write_text('name = "b"\nkernels = "auto"\n')
    env = {k: v for k, v in os.environ.items() if k != kernels.ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "nnhal.tools.cli", "serve", "--address", "127.0.0.1:0",
         "--profile", str(a), "--profile", str(b)],
        check=False, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "different kernels" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------
# TRANSPOSE_CONV_2D: each output pixel gathers its taps (``transpose_conv_float``)
# ---------------------------------------------------------------------------

#: (N, H, W, C, O, KH, KW, (left, right, top, bottom), (sw, sh))
TRANSPOSE_GEOMETRIES = [
    (1, 7, 9, 8, 5, 3, 3, (0, 1, 0, 1), (2, 2)),  # a decoder's upsampling
    (2, 5, 4, 3, 16, 4, 4, (1, 1, 1, 1), (2, 2)),  # 4x4 stride 2, a batch
    (1, 6, 5, 4, 7, 3, 2, (0, 0, 0, 0), (1, 1)),  # unit stride, uncropped
    (1, 4, 6, 5, 3, 2, 3, (2, 0, 1, 2), (3, 2)),  # a stride above the filter: gaps
    (1, 3, 3, 2, 4, 3, 3, (0, -2, 0, -1), (2, 2)),  # negative right / bottom padding
    (1, 1, 1, 6, 9, 5, 5, (1, 2, 2, 1), (1, 1)),  # one input pixel
]


def _transpose_model(geometry, activation, nchw, dtype, filter_input=False):
    n, h, w, c, o, kh, kw, pads, strides = geometry
    rng = np.random.default_rng(hash((geometry, activation, nchw)) % 2**32)
    tt = T.TENSOR_FLOAT32 if dtype == np.float32 else T.TENSOR_FLOAT16
    shape = [n, c, h, w] if nchw else [n, h, w, c]
    x = rng.standard_normal(shape).astype(dtype)
    x.flat[5] = np.nan  # reaches the outputs its taps land on, on both paths
    wv = rng.standard_normal((o, kh, kw, c)).astype(dtype)
    b = rng.standard_normal(o).astype(dtype)
    mb = ModelBuilder()
    g = mb.main
    ins = [g.input(tt, shape), g.input(tt, wv.shape) if filter_input else g.constant(tt, wv)]
    ins += [g.constant(tt, b), *(g.constant(T.INT32, v) for v in (*pads, *strides, activation))]
    g.operation(Op.TRANSPOSE_CONV_2D, [*ins, g.constant(T.BOOL, nchw)], [g.output(tt, [0] * 4)])
    return mb.build(), [x, wv] if filter_input else [x]


@needs_numba
@pytest.mark.parametrize("geometry", TRANSPOSE_GEOMETRIES, ids=lambda g: str(g[:7]))
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("nchw", [False, True], ids=["nhwc", "nchw"])
def test_float_transpose_conv_agrees(geometry, activation, nchw):
    """The same sums in the same order as numpy's scatter (from zero, taps in filter
    order, then the bias), so the same values, NaN included."""
    model, inputs = _transpose_model(geometry, activation, nchw, np.float32)
    (ref,), (jit,) = _both(model, inputs)
    assert np.isnan(ref).any()
    np.testing.assert_array_equal(jit, ref)


@needs_numba
def test_float16_transpose_conv_and_its_filter_given_at_run_time():
    for dtype, filter_input in ((np.float16, False), (np.float32, True)):
        model, inputs = _transpose_model(TRANSPOSE_GEOMETRIES[0], 3, False, dtype, filter_input)
        (ref,), (jit,) = _both(model, inputs)
        assert jit.dtype == dtype
        np.testing.assert_array_equal(jit, ref)


@needs_numba
def test_a_failing_transpose_conv_compile_falls_back_to_numpy(monkeypatch, caplog):
    model, inputs = _transpose_model(TRANSPOSE_GEOMETRIES[1], 1, False, np.float32)
    ref = _compiled(model, kernels.NUMPY).run(inputs)[0]
    break_kernels(monkeypatch, "transpose_conv_float")
    compiled = _compiled(model, kernels.AUTO)
    with caplog.at_level(logging.WARNING, logger=kernels.__name__):
        np.testing.assert_array_equal(compiled.run(inputs)[0], ref)
    assert "simulated compile failure" in caplog.text
    assert not kernels.jit_wanted()


# ---------------------------------------------------------------------------
# The shared NNAPI vectors of the convolutions, on both paths
# ---------------------------------------------------------------------------

CONVOLUTIONS = {"CONV_2D", "DEPTHWISE_CONV_2D", "GROUPED_CONV_2D", "TRANSPOSE_CONV_2D"}


def _vector_tests():
    if not VECTORS.is_dir():
        return []
    return [
        t
        for f in find_vector_files([VECTORS])
        if "conv" in f.name
        for t in load_vectors(f)
        if not t.expectFailure and operations_used(t.model) & CONVOLUTIONS
        and operations_used(t.model) <= CONVOLUTIONS | {"DEQUANTIZE", "QUANTIZE"}
    ]  # fmt: skip


@pytest.mark.skipif(not VECTORS.is_dir(), reason=f"shared NNAPI vectors not found at {VECTORS}")
@pytest.mark.parametrize("choice", [kernels.NUMPY, pytest.param(kernels.AUTO, marks=needs_numba)])
def test_convolution_vectors_pass(choice):
    tests = _vector_tests()
    assert len(tests) > 300
    failures = []
    for t in tests:
        outputs = _compiled(t.model, choice).run(t.inputs)
        problems, _ = compare_outputs(t, outputs)
        failures += [f"{t.name}: {p}" for p in problems]
    assert not failures, failures[:10]

"""CONV_2D by Winograd's F(2x2, 3x3) (``_winograd``) on the compiled path.

The outputs are compared with a float64 direct convolution under NNAPI's
float32 tolerance (|actual - expected| <= 1e-5 + 5 ulp * |expected|, the
vectors' rule), and with the numpy im2col path under the same rule; every case
checks that Winograd really ran. Which convolutions take it is data
(``eligible``), and the shared CONV_2D vectors pass with the rule widened to
every 3x3 unit-stride convolution.
"""

from __future__ import annotations

import importlib.util
import logging

import numpy as np
import pytest
from nnhal.driver.ops import _winograd, kernels
from numpy.lib.stride_tricks import sliding_window_view
from test_ops_conv_jit import VECTORS, _compiled, _vector_tests, break_kernels

from nnhal.builder import ModelBuilder
from nnhal.errors import HalError
from nnhal.types import ErrorStatus
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op
from nnhal.vector_runner import compare_outputs
from nnhal.vectors import operations_used

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="numba is not installed"
)
F32_ATOL, F32_RTOL = 1e-5, 5 * 2.0**-23
F16_TOL = 5 * 2.0**-10
SAME, VALID = 1, 2


@pytest.fixture(autouse=True)
def _restore_choice():
    yield
    kernels.set_kernels(None)


@pytest.fixture
def winograd_calls(monkeypatch):
    """The convolutions ``_winograd.convolve`` finished (True) or gave up (False)."""
    calls = []
    real = _winograd.convolve

    def counted(*args):
        done = real(*args)
        calls.append(done)
        return done

    monkeypatch.setattr(_winograd, "convolve", counted)
    return calls


def _model(x_shape, o, padding, *, activation=0, nchw=False, dtype=np.float32,
           filter_input=False, bad_weight=None, seed=0, out_shape=(0, 0, 0, 0)):  # fmt: skip
    """A CONV_2D of a 3x3 filter at unit stride; ``padding`` is SAME / VALID or
    (left, right, top, bottom). Returns (model, inputs, x NHWC, w, b)."""
    rng = np.random.default_rng(seed)
    n, h, w, c = x_shape
    tt = T.TENSOR_FLOAT32 if dtype == np.float32 else T.TENSOR_FLOAT16
    x = rng.standard_normal(x_shape).astype(dtype)
    wv = (rng.standard_normal((o, 3, 3, c)) * 0.2).astype(dtype)
    if bad_weight is not None:
        wv[3, 1, 1, 2] = bad_weight
    b = rng.standard_normal(o).astype(dtype)
    mb = ModelBuilder()
    g = mb.main
    shape = [n, c, h, w] if nchw else [n, h, w, c]
    inp = g.input(tt, shape)
    wop = g.input(tt, wv.shape) if filter_input else g.constant(tt, wv)
    pads = [padding] if isinstance(padding, int) else list(padding)
    scalars = [*pads, 1, 1, activation]
    ins = [inp, wop, g.constant(tt, b), *(g.constant(T.INT32, v) for v in scalars)]
    ins.append(g.constant(T.BOOL, nchw))
    g.operation(Op.CONV_2D, ins, [g.output(tt, list(out_shape))])
    xin = np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if nchw else x
    return mb.build(), [xin, wv] if filter_input else [xin], x, wv, b


def _reference(x, w, b, padding, activation):
    """The direct convolution in float64, NHWC."""
    h, wd = x.shape[1:3]
    if padding == SAME:
        pads = (1, 1, 1, 1)
    elif padding == VALID:
        pads = (0, 0, 0, 0)
    else:
        pads = padding
    left, right, top, bottom = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    windows = sliding_window_view(xp, (3, 3), axis=(1, 2))  # [N, OH, OW, C, 3, 3]
    y = np.einsum("nhwcij,oijc->nhwo", windows, w.astype(np.float64)) + b
    lo, hi = {1: (0, np.inf), 2: (-1, 1), 3: (0, 6)}.get(activation, (-np.inf, np.inf))
    assert y.shape[1:3] == (h + top + bottom - 2, wd + left + right - 2)
    return np.clip(y, lo, hi)


def _assert_within(actual, expected, atol, rtol):
    err = np.abs(actual.astype(np.float64) - expected)
    bound = atol + rtol * np.abs(expected)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert (err <= bound).all(), f"{err[worst]} > {bound[worst]} at {worst}"


CASES = [  # (NHWC input shape, filters, padding)
    ((1, 16, 16, 8), 16, SAME),  # the smallest channels the rule takes
    ((1, 9, 11, 16), 8, SAME),  # odd sizes: the last tile row and column half outside
    ((2, 12, 7, 12), 20, VALID),  # a batch; VALID leaves odd outputs
    ((1, 10, 13, 32), 24, (0, 2, 1, 0)),  # explicit, uneven padding
    ((1, 6, 6, 16), 16, (2, 2, 2, 2)),  # padding wider than the filter's half
    ((1, 4, 4, 32), 32, SAME),  # the smallest output area it takes
    ((1, 40, 36, 24), 48, SAME),  # several bands of tile rows
]


@pytest.mark.parametrize("shape,o,padding", CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("activation", [0, 1, 2, 3])
def test_winograd_is_within_the_float32_tolerance(winograd_calls, shape, o, padding, activation):
    model, inputs, x, w, b = _model(shape, o, padding, activation=activation)
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    assert winograd_calls == [True]
    expected = _reference(x, w, b, padding, activation)
    _assert_within(ours, expected, F32_ATOL, F32_RTOL)
    (im2col,) = _compiled(model, kernels.NUMPY).run(inputs)
    assert winograd_calls == [True]  # the numpy path never takes it
    _assert_within(ours, im2col.astype(np.float64), F32_ATOL, F32_RTOL)


def test_nchw_float16_and_a_filter_given_at_run_time(winograd_calls):
    for nchw, dtype, filter_input in ((True, np.float32, False), (False, np.float32, True),
                                      (False, np.float16, False)):  # fmt: skip
        model, inputs, x, w, b = _model(
            (1, 11, 10, 16), 16, SAME, nchw=nchw, dtype=dtype, filter_input=filter_input
        )
        (ours,) = _compiled(model, kernels.AUTO).run(inputs)
        assert ours.dtype == dtype
        if nchw:
            ours = ours.transpose(0, 2, 3, 1)
        expected = _reference(x, w, b, SAME, 0)
        if dtype == np.float16:
            _assert_within(ours, expected, F16_TOL, F16_TOL)
        else:
            _assert_within(ours, expected, F32_ATOL, F32_RTOL)
    assert winograd_calls == [True, True, True]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_input_reaches_the_outputs_the_direct_way(winograd_calls, bad):
    """Winograd mixes a tile's whole 4x4 window, so a NaN or infinity would spread to
    outputs whose 3x3 window does not hold it: such inputs go by im2col, whose
    outputs are the numpy path's exactly."""
    model, inputs, *_ = _model((1, 12, 12, 16), 16, SAME)
    inputs[0][0, 5, 6, 3] = bad
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    (ref,) = _compiled(model, kernels.NUMPY).run(inputs)
    assert winograd_calls == [False]
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(ref))
    assert (~np.isfinite(ours)).sum() == 9 * 16  # the 3x3 outputs around it, every filter
    finite = np.isfinite(ref)
    _assert_within(ours[finite], ref[finite].astype(np.float64), F32_ATOL, F32_RTOL)


def test_random_geometries_are_within_the_float32_tolerance(winograd_calls):
    """Sixty drawn shapes (batch, odd and even sizes down to 1, channels off the SIMD
    width, explicit paddings of 0 to 2 on each side, activations): every output
    within NNAPI's float32 tolerance of the float64 direct sum."""
    rng = np.random.default_rng(20261127)
    done = 0
    while done < 60:
        n, h, w = (int(v) for v in (rng.integers(1, 3), rng.integers(1, 20), rng.integers(1, 20)))
        c, o = int(rng.choice([8, 9, 16, 33])), int(rng.choice([8, 15, 40]))
        pads = tuple(int(v) for v in rng.integers(0, 3, 4))  # left, right, top, bottom
        if w + pads[0] + pads[1] < 3 or h + pads[2] + pads[3] < 3:
            continue  # no output
        activation = int(rng.integers(0, 4))
        model, inputs, x, wt, b = _model((n, h, w, c), o, pads, activation=activation, seed=done)
        (ours,) = _compiled(model, kernels.AUTO).run(inputs)
        _assert_within(ours, _reference(x, wt, b, pads, activation), F32_ATOL, F32_RTOL)
        done += 1
    assert winograd_calls.count(True) >= 40  # 44: the rest are too small or 8 to 8 channels


@pytest.mark.parametrize("filter_input", [False, True], ids=["constant", "input"])
def test_a_non_finite_filter_goes_by_im2col(winograd_calls, filter_input):
    model, inputs, *_ = _model((1, 8, 8, 8), 16, SAME, filter_input=filter_input,
                               bad_weight=np.inf)  # fmt: skip
    compiled = _compiled(model, kernels.AUTO)
    (ref,) = _compiled(model, kernels.NUMPY).run(inputs)
    for _ in range(2):  # a constant filter's refusal is kept
        (ours,) = compiled.run(inputs)
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(ref))
        np.testing.assert_array_equal(np.isinf(ours), np.isinf(ref))
    assert np.isinf(ref).any()
    assert winograd_calls == []  # refused before convolving


@pytest.mark.parametrize(
    "w_shape,stride,dilation,c,oh,ow,taken",
    [
        ((64, 3, 3, 32), (1, 1), (1, 1), 32, 112, 112, True),
        ((16, 3, 3, 8), (1, 1), (1, 1), 8, 4, 4, True),
        ((64, 3, 3, 32), (2, 2), (1, 1), 32, 56, 56, False),  # strided
        ((64, 3, 3, 32), (1, 2), (1, 1), 32, 56, 56, False),
        ((64, 3, 3, 32), (1, 1), (2, 2), 32, 56, 56, False),  # dilated
        ((64, 5, 5, 32), (1, 1), (1, 1), 32, 56, 56, False),  # not 3x3
        ((64, 1, 1, 32), (1, 1), (1, 1), 32, 56, 56, False),
        ((64, 3, 3, 4), (1, 1), (1, 1), 4, 56, 56, False),  # too few channels
        ((4, 3, 3, 64), (1, 1), (1, 1), 64, 56, 56, False),  # too few filters
        ((8, 3, 3, 8), (1, 1), (1, 1), 8, 56, 56, False),  # 8 x 8 < 128
        ((32, 3, 3, 32), (1, 1), (1, 1), 32, 3, 5, False),  # too small an output
    ],
)
def test_which_convolutions_take_it(w_shape, stride, dilation, c, oh, ow, taken):
    assert _winograd.eligible(w_shape, stride, dilation, c, oh, ow) is taken


@pytest.mark.parametrize(
    "out_shape,at_preparation",
    [((1, 16, 16, 16), True), ((0, 0, 0, 0), False), ((1, 16, 16, 16), None)],
    ids=["declared", "unknown", "filter-input"],
)
def test_when_the_filter_is_transformed(monkeypatch, out_shape, at_preparation):
    """A constant filter is transformed while preparing when the declared output shows
    Winograd will be taken, else at the first execution that takes it, once; a filter
    given at run time by every execution."""
    transforms = []
    real = _winograd.filter_transform
    monkeypatch.setattr(
        _winograd,
        "filter_transform",
        lambda w, *module: transforms.append(w.shape) or real(w, *module),
    )
    filter_input = at_preparation is None
    model, inputs, *_ = _model((1, 16, 16, 16), 16, SAME, out_shape=out_shape,
                               filter_input=filter_input)  # fmt: skip
    compiled = _compiled(model, kernels.AUTO)
    assert len(transforms) == (1 if at_preparation else 0)
    (first,) = compiled.run(inputs)
    (second,) = compiled.run(inputs)
    assert len(transforms) == (2 if filter_input else 1)
    np.testing.assert_array_equal(first, second)


def test_an_ineligible_convolution_does_not_call_it(winograd_calls):
    model, inputs, *_ = _model((1, 16, 16, 4), 64, SAME)  # 4 input channels
    _compiled(model, kernels.AUTO).run(inputs)
    assert winograd_calls == []


def test_a_failing_compile_falls_back_to_numpy(monkeypatch, caplog):
    break_kernels(monkeypatch, "winograd_input")
    model, inputs, *_ = _model((1, 16, 16, 16), 16, SAME, activation=3)
    ref = _compiled(model, kernels.NUMPY).run(inputs)[0]
    compiled = _compiled(model, kernels.AUTO)
    with caplog.at_level(logging.WARNING, logger=kernels.__name__):
        np.testing.assert_array_equal(compiled.run(inputs)[0], ref)
    assert "simulated compile failure" in caplog.text
    assert not kernels.jit_wanted()


def _vector_failures(operation: str) -> tuple[list, list[str]]:
    """(the shared vectors using ``operation``, their failures on the compiled path)."""
    tests = [t for t in _vector_tests() if operation in operations_used(t.model)]
    failures = []
    for t in tests:
        outputs = _compiled(t.model, kernels.AUTO).run(t.inputs)
        problems, _ = compare_outputs(t, outputs)
        failures += [f"{t.name}: {p}" for p in problems]
    return tests, failures


@pytest.mark.skipif(not VECTORS.is_dir(), reason=f"shared NNAPI vectors not found at {VECTORS}")
def test_conv_vectors_pass_with_winograd_on_every_3x3(monkeypatch, winograd_calls):
    """The rule widened to every 3x3 unit-stride, unit-dilation CONV_2D: the shared
    vectors still pass NNAPI's tolerance (those with a 3x3 filter go by Winograd)."""
    for name in ("MIN_CHANNELS", "MIN_FILTERS", "MIN_PRODUCT", "MIN_PIXELS"):
        monkeypatch.setattr(_winograd, name, 1)
    _, failures = _vector_failures("CONV_2D")
    assert not failures, failures[:10]
    assert winograd_calls.count(True) >= 4  # the corpus has few 3x3 unit-stride CONV_2D


# ---------------------------------------------------------------------------
# The filter transform
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "o,c", [(1, 1), (8, 8), (13, 37), (16, 16), (17, 33), (64, 3), (3, 64), (96, 160)]
)
def test_the_compiled_filter_transform_gives_numpys_values(o, c):
    """Every value equal to the numpy form's, for block-sized and ragged channel and
    filter counts, and for weights spread over many exponents."""
    rng = np.random.default_rng(o * 1000 + c)
    w = rng.standard_normal((o, 3, 3, c)) * 10.0 ** rng.integers(-30, 30, (o, 3, 3, c))
    w = w.astype(np.float32)
    ours = _winograd.filter_transform(w, kernels.jit_module())
    ref = _winograd.filter_transform_numpy(w)
    assert ours.shape == ref.shape == (16, c, o)
    np.testing.assert_array_equal(ours, ref)


def test_the_compiled_filter_transform_of_float16_weights():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((24, 3, 3, 40)).astype(np.float16)
    ours = _winograd.filter_transform(w, kernels.jit_module())
    np.testing.assert_array_equal(ours, _winograd.filter_transform_numpy(w))


@pytest.mark.parametrize(
    "value,refused",
    [(np.nan, True), (np.inf, True), (-np.inf, True), (2.0e38, True), (1.0e38, False)],
)
def test_the_compiled_filter_transform_refuses_what_numpy_refuses(value, refused):
    """A NaN or infinite weight, or a filter whose transformed sums overflow float32
    (nine weights of 2e38: the middle value is 9/4 of them), gives None as numpy's
    form does; large finite sums that fit (9/4 of 1e38) are kept."""
    w = np.ones((20, 3, 3, 18), dtype=np.float32)
    w[17, :, :, 9] = value
    ours = _winograd.filter_transform(w, kernels.jit_module())
    ref = _winograd.filter_transform_numpy(w)
    assert (ours is None) is refused
    assert (ref is None) is refused
    if not refused:
        np.testing.assert_array_equal(ours, ref)


def test_a_failing_filter_transform_compile_falls_back_to_numpy(monkeypatch, caplog):
    """A compiled transform that fails while preparing is a failed compile: one warning,
    the filter transformed by numpy, and numpy's kernels from then on (the module's
    rule for any compile failure), so the outputs are the numpy path's."""
    model, inputs, *_ = _model((1, 16, 16, 16), 16, SAME, out_shape=(1, 16, 16, 16))
    ref = _compiled(model, kernels.NUMPY).run(inputs)[0]
    break_kernels(monkeypatch, "winograd_filter")
    with caplog.at_level(logging.WARNING, logger=kernels.__name__):
        compiled = _compiled(model, kernels.AUTO)
    assert "simulated compile failure" in caplog.text
    np.testing.assert_array_equal(compiled.run(inputs)[0], ref)


def test_running_out_of_memory_is_not_a_compile_failure(monkeypatch):
    """A MemoryError inside the Winograd path is the execution's (RESOURCE_EXHAUSTED),
    and the compiled kernels stay in use."""
    model, inputs, *_ = _model((1, 16, 16, 16), 16, SAME)
    compiled = _compiled(model, kernels.AUTO)

    def no_memory(*args):
        raise MemoryError("simulated")

    monkeypatch.setattr(_winograd, "convolve", no_memory)
    with pytest.raises(HalError) as info:
        compiled.run(inputs)
    assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
    assert kernels.jit_wanted()


# ---------------------------------------------------------------------------
# GROUPED_CONV_2D group by group (channel windows of one input and output)
# ---------------------------------------------------------------------------


def _grouped_model(x_shape, o, groups, padding, *, stride=1, k=3, activation=0, nchw=False,
                   filter_input=False, seed=0):  # fmt: skip
    """A float32 GROUPED_CONV_2D; ``padding`` SAME / VALID or (left, right, top, bottom).
    Returns (model, inputs, x NHWC, w, b)."""
    rng = np.random.default_rng(seed)
    n, h, w, c = x_shape
    x = rng.standard_normal(x_shape).astype(np.float32)
    wv = (rng.standard_normal((o, k, k, c // groups)) * 0.2).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    tt = T.TENSOR_FLOAT32
    mb = ModelBuilder()
    g = mb.main
    inp = g.input(tt, [n, c, h, w] if nchw else [n, h, w, c])
    wop = g.input(tt, wv.shape) if filter_input else g.constant(tt, wv)
    pads = [padding] if isinstance(padding, int) else list(padding)
    scalars = [*pads, stride, stride, groups, activation]
    ins = [inp, wop, g.constant(tt, b), *(g.constant(T.INT32, v) for v in scalars)]
    g.operation(Op.GROUPED_CONV_2D, [*ins, g.constant(T.BOOL, nchw)], [g.output(tt, [0] * 4)])
    xin = np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if nchw else x
    return mb.build(), [xin, wv] if filter_input else [xin], x, wv, b


def _grouped_reference(x, w, b, groups, padding, activation):
    """Each group's direct convolution in float64 (3x3, unit stride), side by side."""
    cg, og = w.shape[3], w.shape[0] // groups
    return np.concatenate([
        _reference(x[..., g * cg : (g + 1) * cg], w[g * og : (g + 1) * og],
                   b[g * og : (g + 1) * og], padding, activation)
        for g in range(groups)
    ], axis=-1)  # fmt: skip


GROUPED_CASES = [  # (NHWC input shape, filters, groups, padding)
    ((1, 12, 10, 64), 64, 4, SAME),  # 16 channels and 16 filters a group
    ((2, 9, 11, 48), 24, 2, (0, 2, 1, 0)),  # a batch, odd sizes, uneven explicit padding
    ((1, 20, 18, 96), 96, 3, VALID),  # channels off the SIMD width per group, bands
]


@pytest.mark.parametrize("shape,o,groups,padding", GROUPED_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("activation", [0, 3])
def test_grouped_conv_goes_by_winograd_group_by_group(
    winograd_calls, shape, o, groups, padding, activation
):
    model, inputs, x, w, b = _grouped_model(shape, o, groups, padding, activation=activation)
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    assert winograd_calls == [True] * groups
    _assert_within(ours, _grouped_reference(x, w, b, groups, padding, activation),
                   F32_ATOL, F32_RTOL)  # fmt: skip
    (batched,) = _compiled(model, kernels.NUMPY).run(inputs)
    _assert_within(ours, batched.astype(np.float64), F32_ATOL, F32_RTOL)


def test_grouped_conv_in_nchw_and_with_a_filter_given_at_run_time(winograd_calls):
    for nchw, filter_input in ((True, False), (False, True)):
        model, inputs, x, w, b = _grouped_model(
            (1, 11, 10, 64), 32, 4, SAME, nchw=nchw, filter_input=filter_input
        )
        (ours,) = _compiled(model, kernels.AUTO).run(inputs)
        if nchw:
            ours = ours.transpose(0, 2, 3, 1)
        _assert_within(ours, _grouped_reference(x, w, b, 4, SAME, 0), F32_ATOL, F32_RTOL)
    assert winograd_calls == [True] * 8


@pytest.mark.parametrize("stride,k", [(2, 3), (1, 1), (1, 5)], ids=["strided", "1x1", "5x5"])
def test_grouped_conv_that_winograd_does_not_take_goes_by_im2col_per_group(
    winograd_calls, stride, k
):
    """Each group's channels through CONV_2D's compiled im2col slabs: the batched
    numpy path's values (the same sums, one GEMM per group either way)."""
    model, inputs, *_ = _grouped_model((2, 13, 9, 64), 48, 4, SAME, stride=stride, k=k,
                                       activation=1)  # fmt: skip
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    (batched,) = _compiled(model, kernels.NUMPY).run(inputs)
    assert winograd_calls == []
    assert ours.shape == batched.shape
    _assert_within(ours, batched.astype(np.float64), F32_ATOL, F32_RTOL)


def test_a_non_finite_input_sends_only_its_group_to_im2col(winograd_calls):
    """A NaN in the channels of group 1: that group goes by im2col (its 3x3 outputs
    around the NaN are NaN, as on the numpy path), the other groups by Winograd."""
    model, inputs, *_ = _grouped_model((1, 12, 12, 64), 64, 4, SAME)
    inputs[0][0, 5, 6, 16 + 3] = np.nan  # group 1's fourth channel
    (ours,) = _compiled(model, kernels.AUTO).run(inputs)
    (ref,) = _compiled(model, kernels.NUMPY).run(inputs)
    assert winograd_calls == [True, False, True, True]
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(ref))
    assert np.isnan(ours).sum() == 9 * 16  # the 3x3 outputs around it, group 1's filters
    finite = ~np.isnan(ref)
    _assert_within(ours[finite], ref[finite].astype(np.float64), F32_ATOL, F32_RTOL)


def test_groups_of_few_channels_keep_the_batched_matmul(winograd_calls):
    """4 channels times 4 filters a group (below ``GROUP_MIN_PRODUCT``), and one
    channel a group (a depthwise-like grouping): numpy's batched form, whose values
    the compiled path gives exactly."""
    for shape, o, groups in (((1, 10, 10, 32), 32, 8), ((1, 9, 9, 16), 32, 16)):
        model, inputs, *_ = _grouped_model(shape, o, groups, SAME, activation=3)
        (ours,) = _compiled(model, kernels.AUTO).run(inputs)
        (ref,) = _compiled(model, kernels.NUMPY).run(inputs)
        np.testing.assert_array_equal(ours, ref)
    assert winograd_calls == []


def test_channel_windows_give_the_values_of_contiguous_copies():
    """``convolve`` reading channels c0.. of the input and writing filters o0.. of the
    output in place: the same values as on contiguous copies, and nothing outside
    the output's window is written."""
    rng = np.random.default_rng(11)
    module = kernels.jit_module()
    x = rng.standard_normal((2, 13, 11, 40)).astype(np.float32)
    w = rng.standard_normal((24, 3, 3, 16)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    u = _winograd.filter_transform(w, module)
    geo = (1, 1, 13, 11)  # SAME
    lo, hi = np.float32(-np.inf), np.float32(np.inf)
    alone = np.empty((2, 13, 11, 24), dtype=np.float32)
    assert _winograd.convolve(module, np.ascontiguousarray(x[..., 20:36]), u, b, geo, alone, lo, hi)
    out = np.full((2, 13, 11, 56), 7.0, dtype=np.float32)
    assert _winograd.convolve(module, x, u, b, geo, out, lo, hi, 20, 30)
    np.testing.assert_array_equal(out[..., 30:54], alone)
    assert (out[..., :30] == 7.0).all() and (out[..., 54:] == 7.0).all()


@pytest.mark.skipif(not VECTORS.is_dir(), reason=f"shared NNAPI vectors not found at {VECTORS}")
def test_grouped_conv_vectors_pass_group_by_group(monkeypatch):
    """Every float GROUPED_CONV_2D of the shared vectors sent group by group (the
    threshold at 1; their filters are not 3x3 at unit stride, so each group goes by
    the compiled im2col): NNAPI's tolerance still holds."""
    from nnhal.driver.ops import conv

    monkeypatch.setattr(conv, "GROUP_MIN_PRODUCT", 1)
    built = []
    real = conv._grouped_float_kernel
    monkeypatch.setattr(conv, "_grouped_float_kernel", lambda *args: built.append(1) or real(*args))
    tests, failures = _vector_failures("GROUPED_CONV_2D")
    assert not failures, failures[:10]
    assert len(tests) >= 100 and len(built) >= 50

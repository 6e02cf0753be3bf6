"""Quantized arithmetic done in floating point (driver/ops/_qexact.py) against the integer
reference path: bit-exact requantization within the stated bound, and the bound itself."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops import _qexact, quant
from nnhal.driver.ops._conv_util import multipliers, requantizer

from nnhal.errors import InvalidArgument


def _cases():
    rng = np.random.default_rng(7)
    # (input scale, filter scales, output scale): multipliers < 1, > 1 (left shifts), per channel
    yield 0.5, np.array([0.25], np.float32), 0.9
    yield 0.5, np.array([0.25], np.float32), 0.01  # real multiplier 12.5: a left shift
    yield 1.0, np.array([1.0], np.float32), 1.0  # multiplier exactly 1 (exponent 1)
    yield 0.05, rng.uniform(1e-4, 0.05, 16).astype(np.float32), 0.1
    yield 0.05, rng.uniform(1e-4, 0.5, 16).astype(np.float32), 0.003


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("case", list(_cases()))
def test_float_requantizer_is_bit_exact_within_its_limit(case, dtype):
    in_scale, scales, out_scale = case
    mult, exp = multipliers(in_scale, scales, out_scale)
    qmin, qmax = quant.QUANT_RANGE[np.dtype(dtype)]
    zp = (qmin + qmax + 1) // 2 - 3
    channels = len(scales)
    limit = _qexact.requant_limit(exp)
    rng = np.random.default_rng(1)
    acc = rng.integers(-(2**21), 2**21, (512, channels)).astype(np.int64)
    acc = np.clip(acc, -(limit - 1).astype(np.int64), (limit - 1).astype(np.int64))
    # the rounding edges: exact halves after the shift, zero, and the limit itself
    edges = []
    for c in range(channels):
        right = max(-int(exp[c]), 0)
        for k in range(-6, 7):
            edges.append(k * (1 << right) + (1 << right) // 2)
    col = np.array(edges + [0, -1, 1], np.int64)
    col = np.clip(col, -(int(limit.min()) - 1), int(limit.min()) - 1)
    acc = np.concatenate([acc, np.repeat(col[:, None], channels, axis=1)])
    reference = requantizer(mult, exp, zp, qmin, qmax, dtype)(acc.copy())
    ours = _qexact.float_requantizer(mult, exp, zp, qmin, qmax, dtype)(acc.astype(np.float64))
    assert ours.dtype == reference.dtype
    np.testing.assert_array_equal(ours, reference)
    # the unclamped values too: a wide clamp shows every rounding, not just saturation
    wide = requantizer(mult, exp, 0, -(2**31), 2**31 - 1, np.int64)(acc.copy())
    ours_wide = _qexact.float_requantizer(mult, exp, 0, -(2**31), 2**31 - 1, np.int64)(
        acc.astype(np.float64)
    )
    np.testing.assert_array_equal(ours_wide, wide)
    # the bias folded into the scaling, on float32 accumulators (as the convolutions
    # pass them), over more rows than one cache-sized chunk
    bias = rng.integers(-4000, 4000, channels).astype(np.int64)
    rows = _qexact.CHUNK_ELEMENTS // channels + 7
    many = np.resize(acc, (rows, channels))
    many = np.clip(many, -(limit - 1).astype(np.int64) - bias, (limit - 1).astype(np.int64) - bias)
    many = np.clip(many, -(2**24) + 1, 2**24 - 1)
    reference = requantizer(mult, exp, zp, qmin, qmax, dtype)(many + bias)
    ours = _qexact.float_requantizer(mult, exp, zp, qmin, qmax, dtype)(
        many.astype(np.float32), bias.astype(np.float64)
    )
    np.testing.assert_array_equal(ours, reference)


def test_accumulation_dtype_follows_the_mantissa_bounds():
    assert _qexact.accumulation_dtype(np.array([2.0**24 - 1])) is np.float32
    assert _qexact.accumulation_dtype(np.array([2.0**24])) is np.float64
    assert _qexact.accumulation_dtype(np.array([2.0**53])) is None
    assert _qexact.centered_bound(128, np.uint8) == 128
    assert _qexact.centered_bound(0, np.uint8) == 255
    assert _qexact.centered_bound(-128, np.int8) == 255


def test_requant_limit_shrinks_with_left_shifts():
    limit = _qexact.requant_limit(np.array([-3, 0, 2]))
    assert limit.tolist() == [2.0**22, 2.0**22, 2.0**20]


def test_the_cases_cover_left_and_right_shifts():
    exps = np.concatenate([multipliers(a, b, c)[1] for a, b, c in _cases()])
    assert (exps > 0).any() and (exps < 0).any()


@pytest.mark.parametrize(
    "mult, exp",
    [
        (2**31 - 1, 0),
        (2**31 - 1, -1),
        (2**30, 1),
        (2**30 + 1, -7),
        (1518500250, -12),
        (2**31 - 3, 2),
    ],
)
def test_float_requantizer_at_the_edge_of_its_range(mult, exp):
    """Accumulators up to the limit with the largest multipliers, every sign and parity."""
    m, e = np.array([mult], np.int64), np.array([exp], np.int64)
    limit = int(_qexact.requant_limit(e)[0])
    rng = np.random.default_rng(mult % 1000 + exp)
    near = np.concatenate(
        [np.arange(limit - 300, limit), rng.integers(limit // 2, limit, 2000)]
    ).astype(np.int64)
    acc = np.concatenate([near, -near, np.arange(-300, 300)])[:, None]
    wide = requantizer(m, e, 0, -(2**31), 2**31 - 1, np.int64)(acc.copy())
    ours = _qexact.float_requantizer(m, e, 0, -(2**31), 2**31 - 1, np.int64)(acc.astype(np.float64))
    np.testing.assert_array_equal(ours, wide)


def _quant_conv_reference(x, w, b, zx, zw, mult, exp, zy, lo, hi, dtype):
    """CONV_2D VALID stride 1 with int64 sums and the integer requantizer."""
    n, h, wd, _ = x.shape
    o, kh, kw, _ = w.shape
    oh, ow = h - kh + 1, wd - kw + 1
    xc = x.astype(np.int64) - zx
    wc = w.astype(np.int64) - zw
    acc = np.zeros((n, oh, ow, o), np.int64)
    for i in range(kh):
        for j in range(kw):
            acc += np.einsum("nhwc,oc->nhwo", xc[:, i : i + oh, j : j + ow], wc[:, i, j])
    acc += b
    return requantizer(mult, exp, zy, lo, hi, dtype)(acc)


@pytest.mark.parametrize(
    "channels, spread, bias, ys, path",
    [
        (8, 20, 1000, 40.0, "float32 sums, float requantization"),
        (64, 120, 10**6, 40.0, "float32 sums, integer requantization"),
        (300, 255, 0, 10000.0, "float64 sums, integer requantization"),
    ],
)
def test_quant_conv_is_exact_on_every_accumulation_path(channels, spread, bias, ys, path):
    from nnhal.driver.executor import compile_model

    from nnhal.builder import ModelBuilder
    from nnhal.types import OperandType as T
    from nnhal.types import OperationType as O

    rng = np.random.default_rng(channels)
    xs, ws = 0.5, 0.01
    x = rng.integers(0, 256, (1, 5, 5, channels), dtype=np.uint8)
    zw = 0 if spread == 255 else 128
    w = rng.integers(max(0, zw - spread), min(255, zw + spread) + 1, (3, 3, 3, channels))
    w = w.astype(np.uint8)
    if spread == 255:
        w[...] = 255  # the largest |w - zw| everywhere: sums past 2**24
    b = rng.integers(-bias, bias + 1, 3).astype(np.int32)
    # the case really takes its path: the bound of _qexact against its two limits
    bound = 255 * np.abs(w.astype(np.int64) - zw).sum(axis=(1, 2, 3)).max()
    assert (bound < 2**24) == path.startswith("float32")
    assert (bound + bias < 2**22) == path.endswith("float requantization")
    mb = ModelBuilder()
    g = mb.main
    inp = g.input(T.TENSOR_QUANT8_ASYMM, [1, 5, 5, channels], xs, 0)
    out = g.output(T.TENSOR_QUANT8_ASYMM, [1, 3, 3, 3], ys, 7)
    wc = g.constant(T.TENSOR_QUANT8_ASYMM, w, scale=ws, zero_point=zw)
    bc = g.constant(T.TENSOR_INT32, b, scale=xs * ws)
    g.operation(O.CONV_2D, [inp, wc, bc, *[g.constant(T.INT32, v) for v in (2, 1, 1, 0)]], [out])
    got = compile_model(mb.build()).run([x])[0]
    mult, exp = multipliers(xs, np.array([ws], np.float32), ys)
    want = _quant_conv_reference(x, w, b, 0, zw, mult, exp, 7, 0, 255, np.uint8)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 1  # not all saturated


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("case", list(_cases()))
@pytest.mark.parametrize("zp_at", ["min", "mid"])
def test_one_floor_requantizer_with_a_relu_clamp(case, dtype, zp_at):
    """A clamp whose low end is the zero point (ReLU, RELU6) takes the one-floor form."""
    in_scale, scales, out_scale = case
    mult, exp = multipliers(in_scale, scales, out_scale)
    qmin, qmax = quant.QUANT_RANGE[np.dtype(dtype)]
    zp = qmin if zp_at == "min" else (qmin + qmax + 1) // 2 - 3
    lo, hi = zp, min(qmax, zp + 100)
    ours_fn = _qexact.float_requantizer(mult, exp, zp, lo, hi, dtype)
    limit = ours_fn.limit
    assert np.all(limit >= _qexact.requant_limit(exp) / 2)
    channels = len(scales)
    rng = np.random.default_rng(3)
    acc = rng.integers(-(2**21), 2**21, (4096, channels)).astype(np.int64)
    # halves of every right shift (both signs), zero, and the limits themselves
    edges = []
    for c in range(channels):
        right = max(-int(exp[c]), 0)
        for k in range(-40, 41):
            edges.append(k * (1 << right) + (1 << right) // 2)
    col = np.array(edges + [0, -1, 1], np.int64)
    acc = np.concatenate([acc, np.repeat(col[:, None], channels, axis=1)])
    top = (limit - 1).astype(np.int64)
    acc = np.concatenate([acc, top[None, :], -top[None, :], (top // 3)[None, :]])
    acc = np.clip(acc, -top, top)
    reference = requantizer(mult, exp, zp, lo, hi, dtype)(acc.copy())
    np.testing.assert_array_equal(ours_fn(acc.astype(np.float64)), reference)
    # with a bias, from float32 accumulators
    bias = rng.integers(-5000, 5000, channels).astype(np.int64)
    small = np.clip(acc, -(2**24) + 1, 2**24 - 1)
    small = np.clip(small, -top - bias, top - bias)
    reference = requantizer(mult, exp, zp, lo, hi, dtype)(small + bias)
    ours = ours_fn(small.astype(np.float32), bias.astype(np.float64))
    np.testing.assert_array_equal(ours, reference)


@pytest.mark.parametrize(
    "mult, exp",
    [(2**31 - 1, -1), (2**30 + 1, -7), (1518500250, -12), (2**31 - 1, -20), (2**31 - 3, 2)],
)
def test_one_floor_requantizer_at_the_edge_of_its_range(mult, exp):
    """Up to the one-floor form's own limit, unclamped above the zero point."""
    m, e = np.array([mult], np.int64), np.array([exp], np.int64)
    fn = _qexact.float_requantizer(m, e, 0, 0, 2**31 - 1, np.int64)
    limit = int(fn.limit[0])
    rng = np.random.default_rng(mult % 1000 - exp)
    near = np.concatenate(
        [np.arange(limit - 300, limit), rng.integers(limit // 2, limit, 2000)]
    ).astype(np.int64)
    acc = np.concatenate([near, -near, np.arange(-300, 300)])[:, None]
    wide = requantizer(m, e, 0, 0, 2**31 - 1, np.int64)(acc.copy())
    np.testing.assert_array_equal(fn(acc.astype(np.float64)), wide)


@pytest.mark.parametrize("kind_name", ["conv", "depthwise"])
def test_norm_bound_covers_the_exact_sums(kind_name):
    """The cheap per-channel bound is never below sum |w - zp|, including the tight case
    (every |w - zp| equal, where Cauchy-Schwarz is an equality) and long rows."""
    from nnhal.driver.ops import conv

    kind = conv.CONV if kind_name == "conv" else conv.DEPTHWISE
    rng = np.random.default_rng(11)
    shapes = (
        [(1, 3, 3, 40), (1, 1, 1, 7)]
        if kind_name == "depthwise"
        else [(16, 3, 3, 64), (8, 1, 1, 4096), (4, 3, 3, 1)]
    )
    for shape in shapes:
        for fill in ("random", "equal", "extreme"):
            if fill == "random":
                w = rng.integers(0, 256, shape)
            elif fill == "equal":
                w = np.where(rng.random(shape) < 0.5, 0, 254)
            else:
                w = np.full(shape, 255)
            centered = (w - 127).astype(np.float32)
            exact = conv._abs_sums(kind, centered)
            bound = conv._norm_bound(kind, centered)
            assert bound.shape == exact.shape
            assert np.all(bound >= exact)
            assert np.all(bound <= exact * 1.5 + 1)  # and not uselessly loose here


def test_quantize_multipliers_match_the_scalar_form():
    rng = np.random.default_rng(7)
    reals = np.concatenate(
        [
            10.0 ** rng.uniform(-15, 5, size=2000),
            -(10.0 ** rng.uniform(-15, 5, size=200)),
            # zero, a fraction rounding up to 2**31, the flush below 2**-32, exact halves
            [0.0, 1 - 2**-33, 2**-32, 2**-33, 3 * 2**-33, 0.5, 2**-32 * (1 - 2**-40)],
        ]
    )
    mult, exp = quant.quantize_multipliers(reals)
    assert [(int(m), int(e)) for m, e in zip(mult, exp)] == [
        quant.quantize_multiplier(float(r)) for r in reals
    ]


def test_quantize_multipliers_reject_an_infinite_rescale_as_the_scalar_form():
    with pytest.raises(InvalidArgument, match="rescale multiplier of inf"):
        quant.quantize_multipliers(np.array([1.0, np.inf]))


def test_one_channel_requantizer_is_the_array_forms_first_channel():
    """A per-tensor scale takes float_requantizer's Python-float path: the same limit,
    coefficients and results as the array form (two equal channels)."""
    rng = np.random.default_rng(11)
    for _ in range(400):
        mult, exp = int(rng.integers(0, 2**31)), int(rng.integers(-31, 12))
        zp, lo = int(rng.integers(0, 256)), int(rng.integers(0, 256))
        hi = max(lo, int(rng.integers(0, 256)))
        if exp < 0 and lo < zp:
            lo = zp  # the two-floor form has no one-channel path
            hi = max(lo, hi)
        one = _qexact.float_requantizer(np.array([mult]), np.array([exp]), zp, lo, hi, np.uint8)
        two = _qexact.float_requantizer(
            np.array([mult, mult]), np.array([exp, exp]), zp, lo, hi, np.uint8
        )
        assert one.limit.tolist() == two.limit[:1].tolist()
        assert [a.tolist() for a in one.one_floor] == [a[:1].tolist() for a in two.one_floor]
        acc = rng.integers(-(2**20), 2**20, size=(5, 1)).astype(np.float64)
        bias = np.array([float(rng.integers(-1000, 1000))])
        got = one(acc, bias)
        want = two(np.repeat(acc, 2, axis=1), np.repeat(bias, 2))[:, :1]
        np.testing.assert_array_equal(got, want)
